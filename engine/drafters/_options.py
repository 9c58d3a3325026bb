"""Reading drafter-specific ``options`` with clear errors (shared by the drafters)."""

from __future__ import annotations

from ..errors import EngineError


def int_option(settings, drafter: str, key: str, default: int, low: int, high: int) -> int:
    value = settings.options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise EngineError(f"{drafter}: option {key!r} must be an integer from {low} to {high}; "
                          f"got {value!r}.")
    return value


def float_option(settings, drafter: str, key: str, default: float, low: float, high: float) -> float:
    value = settings.options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise EngineError(f"{drafter}: option {key!r} must be a number from {low} to {high}; "
                          f"got {value!r}.")
    return float(value)


def bool_option(settings, drafter: str, key: str, default: bool) -> bool:
    value = settings.options.get(key, default)
    if not isinstance(value, bool):
        raise EngineError(f"{drafter}: option {key!r} must be true or false; got {value!r}.")
    return value

