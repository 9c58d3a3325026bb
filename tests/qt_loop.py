"""The app's asyncio loop inside pytest-qt: one qasync loop per test, marked as already
running so pytest-qt's waits (which spin the Qt event loop) also run the app's tasks."""

from __future__ import annotations

import asyncio

import qasync
import shiboken6


def open_loop(qapp) -> qasync.QEventLoop:
    event_loop = qasync.QEventLoop(qapp, already_running=True)
    asyncio.set_event_loop(event_loop)
    return event_loop


def close_loop(event_loop: qasync.QEventLoop) -> None:
    # not stop(): it calls QApplication.exit(), which would end later tests' event loops
    event_loop._QEventLoop__is_running = False
    asyncio.events._set_running_loop(None)
    event_loop.close()
    asyncio.set_event_loop(None)
    # close() leaves the Qt timers of cancelled call_later handles (asyncio.wait_for's
    # timeout) registered on qasync's timer object. The loop sits in reference cycles, so
    # the garbage collector frees that object later, on whichever thread allocates: on the
    # engine thread Qt cannot unregister the timers ("Timers cannot be stopped from another
    # thread") and the next one to expire is delivered to freed memory: a segfault. Delete
    # it here, on the GUI thread, where Qt unregisters its timers.
    shiboken6.delete(event_loop._timer)
