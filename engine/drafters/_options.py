"""Drafter-specific ``options``: each drafter declares its own, and nothing else passes.

A drafter class lists ``options = {"n": Option(12, 1, 1024), ...}``; ``read_options``
checks a request's options against that list (an unknown name, a wrong type or a value
out of range is an ``EngineError`` naming the option) and fills in the defaults. Options
are numbers and switches only: no option names a file, a folder or code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import EngineError


@dataclass(frozen=True)
class Option:
    """An option's default and, for numbers, its inclusive range. Its type is the default's."""

    default: int | float | bool
    low: int | float | None = None
    high: int | float | None = None

    def check(self, drafter: str, key: str, value):
        if isinstance(self.default, bool):
            if not isinstance(value, bool):
                raise EngineError(
                    f"{drafter}: option {key!r} must be true or false; got {value!r}."
                )
            return value
        integer = isinstance(self.default, int)
        kinds = int if integer else (int, float)
        if (
            isinstance(value, bool)
            or not isinstance(value, kinds)
            or not self.low <= value <= self.high
        ):
            kind = "an integer" if integer else "a number"
            raise EngineError(
                f"{drafter}: option {key!r} must be {kind} from {self.low} to "
                f"{self.high}; got {value!r}."
            )
        return value if integer else float(value)


def read_options(drafter: str, declared: Mapping[str, Option], given: Mapping) -> dict:
    """The options ``given`` for ``drafter``, checked, with every declared default filled in."""
    if not isinstance(given, Mapping):
        raise EngineError(f"{drafter}: options must be an object of names and values.")
    unknown = sorted(str(key) for key in given if key not in declared)
    if unknown:
        known = ", ".join(declared) if declared else "none"
        raise EngineError(
            f"{drafter}: unknown option(s) {', '.join(unknown)}; this drafter takes: {known}."
        )
    return {
        key: spec.check(drafter, key, given[key]) if key in given else spec.default
        for key, spec in declared.items()
    }
