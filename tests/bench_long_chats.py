"""How long chats feel: event-loop blocking while opening, scrolling and zooming, and memory.

Run: ``QT_QPA_PLATFORM=offscreen python -m tests.bench_long_chats [--sizes 500 5000]``.
Not a pytest file (its name does not start with ``test_``): the figures depend on the
machine, so they are printed, each with the load average it was measured under, not asserted.

Event-loop blocking is the longest gap between the ticks of a 5 ms QTimer heartbeat: the
longest time the window could not react to anything.
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

HEARTBEAT_MS = 5  # finer than any goal (50 ms), coarse enough not to load the loop itself
SETTLE_S = 1.0  # after an action, how long the heartbeat keeps watching the later turns
WINDOW = (1000, 800)  # a laptop window's transcript, in pixels
SCROLL_STEP_MS = 16  # one scroll step per display frame (60 Hz)
WHEEL_PX = 120  # a fast mouse wheel: two notches of Qt's 3 lines a frame, 7,500 px/s

ANSWER = """Here is **one** way to do it, step by step (answer {n}).

1. Read the input and check that it is *what you expect*: a list of numbers.
2. Add them up with `sum`, which handles an empty list as well.
3. Print the result, or return it to the caller.

```python
def total(numbers: list[float]) -> float:
    \"\"\"The sum of ``numbers`` ({n}).\"\"\"
    if not all(isinstance(x, (int, float)) for x in numbers):
        raise TypeError("numbers only")
    return sum(numbers)


print(total([1, 2, 3.5]))
```

That prints `6.5`. For very long lists of floats `math.fsum` is more accurate, since it
keeps the rounding errors that a running sum drops; see the [docs](https://docs.python.org).
"""


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def load() -> str:
    return "load %.2f %.2f %.2f" % os.getloadavg()


def write_chat(store, messages: int):
    """A chat of ``messages`` messages (questions and ~400-token answers with code)."""
    from app.storage.provenance import Provenance
    from app.storage.store import Message
    from engine.events import TokenEvent

    session = store.create_session(f"A chat of {messages} messages")
    parent = 0
    with store.db:  # one transaction: thousands of commits would take minutes
        writing, store._writing = store._writing, _no_commit(store)
        try:
            for turn in range(messages // 2):
                question = Message(None, session.id, "user", f"Question {turn}: how do I add?")
                store.add_message(question)
                store.link(question, parent)
                text = ANSWER.format(n=turn)
                provenance = Provenance()
                pieces = [text[i : i + 4] for i in range(0, len(text), 4)]
                for i, piece in enumerate(pieces):
                    drafted = i % 3 != 0
                    event = TokenEvent(
                        1000 + i, piece, drafted, i // 2, 0 if drafted else None, "s"
                    )
                    provenance.add_event(event)
                provenance.finish(text)
                stats = {"drafter": "suffix", "tokens_per_pass": 2.1, "passes": len(pieces) // 2}
                answer = Message(
                    None, session.id, "assistant", text, "stop", "m", stats, {}, provenance
                )
                store.add_message(answer)
                store.link(answer, question.id)
                parent = answer.id
        finally:
            store._writing = writing
    return session


def _no_commit(store):
    from contextlib import contextmanager

    @contextmanager
    def writing():
        yield store.db

    return writing


class Heartbeat:
    """The longest gap between ticks of a fast timer while it runs."""

    def __init__(self):
        from PySide6.QtCore import QTimer

        self.timer = QTimer()
        self.timer.setInterval(HEARTBEAT_MS)
        self.timer.timeout.connect(self._tick)
        self.ticks: list[float] = []

    def _tick(self):
        self.ticks.append(time.perf_counter())

    def start(self):
        self.ticks = [time.perf_counter()]
        self.timer.start()

    def stop(self) -> float:
        """The longest gap in ms, counting the time up to now."""
        self.timer.stop()
        self.ticks.append(time.perf_counter())
        return max(self.gaps())

    def gaps(self) -> list[float]:
        """Every gap between ticks, in ms."""
        return [(b - a) * 1000 for a, b in zip(self.ticks, self.ticks[1:])]


def run_loop(seconds: float) -> None:
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    QTimer.singleShot(int(seconds * 1000), loop.quit)
    loop.exec()


def scroll(transcript, heartbeat, up: bool, pixels: int | None, limit_s: float) -> dict:
    """Scroll by ``pixels`` a frame (None: a page), up to the top (every message boxed) or
    down to the bottom, for at most ``limit_s``; the event loop's gaps meanwhile."""
    from PySide6.QtCore import QEventLoop, QTimer

    bar = transcript.verticalScrollBar()
    loop = QEventLoop()
    frames, at_end = [0], [0]
    started = time.perf_counter()

    def step():
        frames[0] += 1
        # at the end for a few frames: boxes arriving above move the reader down with
        # what it reads, so the top is reached when it stays there
        end = bar.value() == 0 and not transcript._pending if up else bar.value() >= bar.maximum()
        at_end[0] = at_end[0] + 1 if end else 0
        if at_end[0] >= 3 or time.perf_counter() - started > limit_s:
            timer.stop()
            loop.quit()
            return
        distance = pixels or bar.pageStep()
        bar.setValue(bar.value() - distance if up else bar.value() + distance)

    timer = QTimer()
    timer.setInterval(SCROLL_STEP_MS)
    timer.timeout.connect(step)
    heartbeat.start()
    timer.start()
    loop.exec()
    longest = heartbeat.stop()
    gaps = heartbeat.gaps()
    return {
        "longest_ms": (longest, load()),
        "over_50_ms": f"{sum(g > 50 for g in gaps)} of {len(gaps)} gaps, {frames[0]} frames, "
        f"{time.perf_counter() - started:.0f} s, reached the end: {at_end[0] >= 3} "
        f"(at {bar.value():,} of {bar.maximum():,} px)",
    }


def measure(size: int, scroll_limit_s: float) -> dict:
    from app.storage.store import Store
    from app.views.transcript import TranscriptView

    folder = Path(tempfile.mkdtemp(prefix="draftless-bench-"))
    store = Store(folder / "chats.sqlite3")
    made = time.perf_counter()
    session = write_chat(store, size)
    print(f"  wrote {size} messages in {time.perf_counter() - made:.1f} s")
    transcript = TranscriptView()
    transcript.resize(*WINDOW)
    transcript.show()
    run_loop(0.2)
    gc.collect()
    before_mb = rss_mb()
    heartbeat = Heartbeat()
    result = {"size": size}

    started = time.perf_counter()
    store.messages(session.id)
    result["store_ms"] = (time.perf_counter() - started) * 1000, load()

    heartbeat.start()
    started = time.perf_counter()
    transcript.set_messages(store.messages(session.id))  # what opening a chat does
    result["open_call_ms"] = (time.perf_counter() - started) * 1000, load()
    run_loop(SETTLE_S)
    result["open_block_ms"] = heartbeat.stop(), load()
    bar = transcript.verticalScrollBar()
    result["at_bottom"] = bar.value() == bar.maximum() > 0

    for key, value in scroll(transcript, heartbeat, True, None, scroll_limit_s).items():
        result[f"up_pages_{key}"] = value  # a fling to the top, a page a frame
    for key, value in scroll(transcript, heartbeat, False, WHEEL_PX, scroll_limit_s).items():
        result[f"down_wheel_{key}"] = value  # back down, a fast wheel

    heartbeat.start()
    started = time.perf_counter()
    transcript.zoom(1)
    result["zoom_call_ms"] = (time.perf_counter() - started) * 1000, load()
    run_loop(SETTLE_S)
    result["zoom_block_ms"] = heartbeat.stop(), load()
    gc.collect()
    result["memory_mb"] = rss_mb() - before_mb, load()
    transcript.close()
    transcript.deleteLater()
    store.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 5000])
    parser.add_argument(
        "--scroll-limit",
        type=float,
        default=60.0,
        help="most seconds of each scroll: up a page a frame, then down a wheel step a frame "
        "(a 5,000-message chat is about 1,400 pages, 1.1 million px: the wheel at 60 frames "
        "a second needs over 2 minutes to go down all of it)",
    )
    args = parser.parse_args()
    from PySide6.QtWidgets import QApplication

    application = QApplication([])
    print(f"{os.cpu_count()} CPUs, {load()}")
    for size in args.sizes:
        print(f"{size} messages:")
        result = measure(size, args.scroll_limit)
        for key, value in result.items():
            if isinstance(value, tuple):
                print(f"  {key:14} {value[0]:8.0f}   ({value[1]})")
            else:
                print(f"  {key:14} {value}")
    application.quit()


if __name__ == "__main__":
    main()
