"""Start `python -m engine …` as a child process that Ctrl-C reaches.

A shell without job control starts background commands with SIGINT ignored, and children
inherit that; the child here gets the default handler back, so tests that send SIGINT test
the engine, not how the test run was launched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys


def default_ctrl_c() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def engine_process(*args: str, launcher: tuple[str, ...] = (), **popen) -> subprocess.Popen:
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen(
        [*launcher, sys.executable, "-m", "engine", *args],
        text=True,
        env=dict(os.environ, PYTHONPATH=os.getcwd()),
        preexec_fn=default_ctrl_c,
        **popen,
    )
