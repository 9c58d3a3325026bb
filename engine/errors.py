"""The one error type the engine raises for things a person can fix."""


class EngineError(Exception):
    """A problem with the user's input or environment, with a message they can act on."""
