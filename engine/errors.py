"""The one error type the engine raises for things a person can fix, and its warnings."""

import warnings


class EngineError(Exception):
    """A problem with the user's input or environment, with a message they can act on."""


class EngineWarning(RuntimeWarning):
    """Something was wrong but the engine carried on (a bad file set aside, drafts dropped)."""


_said: dict = {}  # the warnings registry: each distinct message is shown once per process


def warn(message: str) -> None:
    """Say ``message`` once, on one line (no source line: it is not about the code)."""
    warnings.warn_explicit(message, EngineWarning, "draftless", 0, registry=_said)
