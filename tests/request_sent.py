"""Marks the moment a request reaches the engine thread's queue, for tests that run work
between requests and check that a request sent during a step is served before the next."""

import threading


def log_when_sent(service, after: threading.Event, sent: threading.Event, log: list) -> None:
    """Wrap ``service``'s engine-thread submit: the first request submitted once ``after`` is
    set appends ("sent",) to ``log`` and sets ``sent`` (it counts as waiting from there)."""
    real_submit = service.engine_thread.submit

    def submit(*args, **kwargs):
        real_submit(*args, **kwargs)
        if after.is_set() and not sent.is_set():
            log.append(("sent",))
            sent.set()

    service.engine_thread.submit = submit
