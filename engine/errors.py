"""The one error type the engine raises for things a person can fix, and its warnings."""

import logging

log = logging.getLogger("engine")


class EngineError(Exception):
    """A problem with the user's input or environment, with a message they can act on."""


_said: set[str] = set()


def warn(message: str) -> None:
    """Something was wrong but the engine carried on (a bad file set aside, drafts dropped):
    say it once per process, as a warning of the ``engine`` logger (one line on stderr when
    the program set up no logging; the app and the CLI may route it elsewhere)."""
    if message not in _said:
        _said.add(message)
        log.warning(message)


def describe_error(error: BaseException) -> str:
    """An exception as words, even when it carries no message (``KeyError()``, ``ValueError('')``)."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else f"{type(error).__name__} (no message)"
