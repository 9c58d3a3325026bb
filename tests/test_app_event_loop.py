"""A closed test event loop leaves no Qt timer behind for a later thread to free (this was
the segfault that made the suite run one process per file)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Like a GUI test: wait_for leaves a cancelled timer, the fixture closes the loop, then the
# garbage collector runs on another thread (the engine thread, in the suite) and Qt goes on.
SCRIPT = r"""
import asyncio, gc, threading, time
from PySide6.QtWidgets import QApplication
from tests.qt_loop import close_loop, open_loop

app = QApplication([])
loop = open_loop(app)
task = asyncio.ensure_future(asyncio.wait_for(asyncio.sleep(0), 0.3))
deadline = time.monotonic() + 5
while not task.done() and time.monotonic() < deadline:
    app.processEvents()
assert task.done()
close_loop(loop)
gc.disable()
del loop, task
collector = threading.Thread(target=gc.collect)
collector.start()
collector.join()
deadline = time.monotonic() + 1  # past the cancelled timer's 0.3 s
while time.monotonic() < deadline:
    app.processEvents()
print("survived")
"""


def test_a_closed_loop_freed_on_another_thread_leaves_no_timer_behind():
    result = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", SCRIPT],
        cwd=ROOT,
        env=dict(os.environ, QT_QPA_PLATFORM="offscreen"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and "survived" in result.stdout, result.stderr[-2000:]
    assert "Timers cannot be stopped" not in result.stderr
