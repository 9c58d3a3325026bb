"""Grammar compiles within a budget: each grammar is first compiled in a process that can be
killed, and only one that compiled there in time is compiled for the answer.

llguidance's own limits (``LLParserLimits``: lexer fuel and states, grammar size) bound the
work of each token's mask, but not the compile: measured (`python -m
tests.measure_schema_bomb --compile`, llguidance 1.9.1, SmolLM2's 49,152 tokens), a string
under 32 distinct ``allOf`` patterns took 2.9 s and 164 MB beyond the tokenizer's before
llguidance gave up on it; 64 ran past 20 s (19 s and 1.6 GB when let run), 128 past 60 s,
whatever the limits said. A compile on the engine thread cannot be stopped, so the engine
sends each grammar to a ``TrialCompiler`` first. Its process holds the same tokenizer and,
for each grammar, forks a child that builds the matcher and its first mask under a memory
limit; the child is killed at ``COMPILE_SECONDS`` or as soon as the request stops (the
server's time cap, a client gone), and the process is at once ready for the next grammar.
Compiling is deterministic, so a grammar that compiled there compiles again in the same
time for the answer; the digests of those that passed are remembered, so a client that
sends the same schema each time pays for the trial once.

The process is started with multiprocessing's "spawn": a script that compiles grammars
needs the ``if __name__ == "__main__":`` guard (the engine's commands have it).
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import os
import select
import signal
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from ..errors import EngineError

log = logging.getLogger(__name__)

# The budget of one grammar's compile (its matcher and first mask), the figures.
# What fits, measured with `python -m tests.measure_schema_bomb --compile` (one process per
# figure, SmolLM2's tokenizer, 172 MB with it built): a string under up to 28 distinct
# allOf patterns (0.17 s; past 16 llguidance itself refuses them: "Unable to determine if
# regex is empty"), 512 properties with a pattern each (0.07 s), an anyOf of 512
# patterned strings (0.02 s), an enum of 5,000 strings (0.02 s), an alternation of 1,000
# words in one pattern (0.02 s), each within 4 MB beyond the tokenizer; 32 allOf patterns
# take 2.9 s and 164 MB. So the static limits of engine/formats/schemas.py stay, and this budget
# refuses only what intertwines its regexes.
COMPILE_SECONDS = 1.0
COMPILE_MEMORY_BYTES = 256 << 20  # beyond what the process holds with its tokenizer built
# starting the process: Python, llguidance and the tokenizer (about 1 s here for SmolLM2's);
# a request waiting for it still stops when it is cancelled
START_SECONDS = 120.0
# the process answers within COMPILE_SECONDS and a fork; past this much more it is stuck
ANSWER_SLACK_SECONDS = 10.0
# grammars known to compile within the budget, by digest (32 bytes each)
REMEMBERED_GRAMMARS = 1024
POLL_SECONDS = 0.02  # how often a wait looks at the request's stop
ERROR_CHARS = 2000  # of llguidance's error (it may print a whole regex)


def budget_words() -> str:
    return f"{COMPILE_SECONDS:g} s and {COMPILE_MEMORY_BYTES >> 20} MB"


class TrialCompiler:
    """The process that test-compiles grammars for one tokenizer (its ``tokenizer_json``,
    ``vocab_size`` and ``eos_tokens``, as llguidance's ``LLTokenizer`` takes them) with the
    engine's ``limits`` (``LLParserLimits`` keywords). One grammar at a time."""

    def __init__(self, tokenizer_json: str, vocab_size: int, eos_tokens: list[int], limits: dict):
        self._arguments = (
            tokenizer_json,
            vocab_size,
            eos_tokens,
            limits,
            COMPILE_MEMORY_BYTES,
            COMPILE_SECONDS,
        )
        self._context = multiprocessing.get_context("spawn")
        self._passed: OrderedDict[bytes, None] = OrderedDict()
        self._passed_lock = threading.Lock()  # held for a look, never for a compile
        self._lock = threading.Lock()  # one compile at a time
        self._process = None
        self._connection = None
        self._starter: threading.Thread | None = None
        self._start_error = ""
        self._ready = False
        self._job = 0
        self.stopped = 0  # compiles stopped past the budget or with their request
        self._start()

    def check(
        self, grammar: str, field: str, should_stop: Callable[[], bool] = lambda: False
    ) -> None:
        """Return once ``grammar`` has compiled within the budget; raise an EngineError
        naming ``field`` when it did not (or failed to), or when the request stopped."""
        digest = hashlib.sha256(grammar.encode("utf-8", "surrogatepass")).digest()
        if self._remembered(digest):  # without waiting for another request's compile
            return
        with self._lock:
            if self._remembered(digest):
                return
            self._await_ready(field, should_stop)
            self._job += 1
            self._connection.send(("compile", self._job, grammar))
            outcome = self._await_outcome(should_stop)
            if outcome is None:
                self._connection.send(("stop", self._job))
                self.stopped += 1
                raise _stopped(field)
            kind, detail = outcome
            if kind == "compiled" and not detail:
                with self._passed_lock:
                    self._passed[digest] = None
                    while len(self._passed) > REMEMBERED_GRAMMARS:
                        self._passed.popitem(last=False)
                return
            if kind == "compiled":
                raise EngineError(
                    f"'{field}' asks for output this server cannot constrain: {detail}"
                )
            self.stopped += 1
            log.warning("A grammar did not compile within %s (%s).", budget_words(), detail)
            raise EngineError(
                f"'{field}' asks for a grammar that does not compile within {budget_words()} "
                f"here ({detail}): it has too many regular expressions (pattern, format) that "
                "must hold together, or too many intertwined alternatives or references. "
                "Simplify the schema."
            )

    def _remembered(self, digest: bytes) -> bool:
        """Whether a grammar of this digest compiled within the budget here (kept as the
        most recently used if so)."""
        with self._passed_lock:
            if digest in self._passed:
                self._passed.move_to_end(digest)
                return True
        return False

    def close(self) -> None:
        """Stop the process (a daemon: it also ends with this one)."""
        with self._lock:
            if self._starter is not None:
                self._starter.join()
            _reap(self._process, self._connection)
            self._process = self._connection = self._starter = None

    def _start(self) -> None:
        """Start the process from a thread of its own: starting it blocks until it has
        imported its modules and read its tokenizer, a second or more."""
        self._ready, self._start_error = False, ""
        self._starter = threading.Thread(target=self._spawn, daemon=True, name="grammar-start")
        self._starter.start()

    def _spawn(self) -> None:
        try:
            ours, theirs = self._context.Pipe()
            process = self._context.Process(
                target=serve, args=(theirs, *self._arguments), daemon=True, name="grammar-trials"
            )
            process.start()
            theirs.close()
            self._process, self._connection = process, ours
        except Exception as error:  # no process to be had: each request is told so
            self._start_error = f"{type(error).__name__}: {error}"

    def _restart(self) -> None:
        threading.Thread(target=_reap, args=(self._process, self._connection)).start()
        self._process = self._connection = None
        self._start()

    def _await_ready(self, field: str, should_stop: Callable[[], bool]) -> None:
        if self._ready:
            return
        while self._starter.is_alive():
            if should_stop():  # it goes on starting, for the next request
                raise _stopped(field)
            self._starter.join(POLL_SECONDS)
        outcome = self._receive(START_SECONDS, should_stop) if self._process else None
        if outcome == "ready":
            self._ready = True
            return
        if outcome is None and not self._start_error:
            raise _stopped(field)
        why = self._start_error or outcome
        self._restart()
        raise EngineError(
            f"Internal error: the process that compiles grammars did not start ({why})."
        )

    def _await_outcome(self, should_stop: Callable[[], bool]):
        """This job's (kind, detail); None when the request stopped first."""
        deadline = time.monotonic() + COMPILE_SECONDS + ANSWER_SLACK_SECONDS
        while True:
            message = self._receive(deadline - time.monotonic(), should_stop)
            if message is None or isinstance(message, str):
                break
            job, outcome = message
            if job == self._job:  # (an earlier, stopped job's answer is skipped)
                return outcome
        if message is None:
            return None
        self._restart()
        raise EngineError(f"Internal error: the process that compiles grammars failed ({message}).")

    def _receive(self, seconds: float, should_stop: Callable[[], bool]):
        """The process's next message; None when the request stopped first; else a string
        that says why none came."""
        deadline = time.monotonic() + seconds
        while not should_stop():
            left = deadline - time.monotonic()
            if left <= 0:
                return "it did not answer in time"
            try:
                if self._connection.poll(min(POLL_SECONDS, left)):
                    return self._connection.recv()
            except (EOFError, OSError):
                self._process.join(timeout=5)
                return f"it ended with exit code {self._process.exitcode}"
        return None


def _reap(process, connection) -> None:
    """Kill the process and wait for its end (a killed process is gone within milliseconds)."""
    if process is not None:
        process.kill()
        process.join(timeout=5)
        connection.close()


def _stopped(field: str) -> EngineError:
    return EngineError(f"'{field}': the request stopped while its grammar was compiling.")


def serve(connection, tokenizer_json, vocab_size, eos_tokens, limits, memory, seconds) -> None:
    """The process: build the tokenizer, then compile each grammar it is sent in a child of
    its own and answer (job, (kind, detail)): ("compiled", llguidance's error or ''),
    ("stopped", why) past the time or memory budget or at the engine's word."""
    from llguidance import LLTokenizer

    tokenizer = LLTokenizer(tokenizer_json, n_vocab=vocab_size, eos_token=eos_tokens)
    connection.send("ready")
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):  # the engine has gone
            return
        if message[0] == "compile":  # (a "stop" for a job already answered is skipped)
            _, job, grammar = message
            child, output = _fork_compile(tokenizer, grammar, limits, memory)
            outcome = _await_child(child, output, connection, job, seconds)
            try:
                connection.send((job, outcome))
            except OSError:  # the engine has gone
                return


def _fork_compile(tokenizer, grammar: str, limits: dict, memory: int) -> tuple[int, int]:
    """A child that compiles ``grammar`` and writes llguidance's error ('' for none) to the
    pipe whose reading end is returned with its process id."""
    output, child_end = os.pipe()
    child = os.fork()
    if child == 0:  # the child: never returns
        try:
            os.close(output)
            silent = os.open(os.devnull, os.O_WRONLY)
            os.dup2(silent, 2)  # an allocation that fails prints a backtrace: not to the log
            limit_memory(memory)
            error = _compile(tokenizer, grammar, limits)
            os.write(child_end, error[:ERROR_CHARS].encode("utf-8", "replace") or b" ")
        finally:
            os._exit(0)
    os.close(child_end)
    return child, output


def _compile(tokenizer, grammar: str, limits: dict) -> str:
    """llguidance's error on ``grammar`` ('' for none) once it has built the matcher and its
    first mask."""
    from llguidance import LLMatcher, LLParserLimits

    try:
        matcher = LLMatcher(tokenizer, grammar, limits=LLParserLimits(**limits))
        if not matcher.is_error():
            matcher.compute_bitmask()
    except (ValueError, TypeError) as error:  # a grammar it cannot read at all
        return str(error) or type(error).__name__
    return matcher.get_error() if matcher.is_error() else ""


def _await_child(child: int, output: int, connection, job: int, seconds: float) -> tuple:
    """The child's outcome once it has written it, died, run out of time or been stopped;
    it is dead and reaped when this returns."""
    deadline = time.monotonic() + seconds
    outcome = None
    while outcome is None:
        left = deadline - time.monotonic()
        if left <= 0:
            outcome = ("stopped", f"still compiling after {seconds:g} s")
            break
        readable, _, _ = select.select([output, connection.fileno()], [], [], left)
        if output in readable:
            written = _read_all(output)
            outcome = ("compiled", written.decode("utf-8", "replace").strip()) if written else ()
        elif readable:
            try:
                if connection.recv() == ("stop", job):
                    outcome = ("stopped", "its request stopped")
            except (EOFError, OSError):  # the engine has gone: so does its compile
                outcome = ("stopped", "the engine has gone")
    os.close(output)
    try:
        os.kill(child, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _, status = os.waitpid(child, 0)
    return outcome or ("stopped", death(status))


def death(status: int) -> str:
    """Why a child that wrote nothing ended (``os.waitpid``'s status)."""
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGABRT:
        return "out of memory"  # a failed allocation aborts (a Rust panic would too)
    if os.WIFSIGNALED(status):
        return f"the grammar engine crashed on it: {signal.Signals(os.WTERMSIG(status)).name}"
    return f"the grammar engine ended with exit code {os.WEXITSTATUS(status)}"


def _read_all(descriptor: int) -> bytes:
    chunks = []
    while chunk := os.read(descriptor, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


def limit_memory(budget: int) -> None:
    """Let this process's address space grow by at most ``budget`` bytes from here, where
    the system enforces it (Linux; elsewhere the time budget bounds the growth, about
    80 MB a second measured on the bomb above)."""
    if not sys.platform.startswith("linux"):
        return
    import resource

    with open("/proc/self/statm") as statm:
        size = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    wanted = size + budget
    if hard == resource.RLIM_INFINITY or wanted <= hard:
        resource.setrlimit(resource.RLIMIT_AS, (wanted, hard))
