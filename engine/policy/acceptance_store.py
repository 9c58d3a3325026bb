"""The adaptive policy's acceptance counts kept on disk, so a launch starts where the last
one left off instead of from the cold-start priors.

One file per model in the cache folder ($DRAFTLESS_CACHE_DIR or the user cache dir),
``acceptance/<model>-v1.json``: per drafter and kind of answer (free, or constrained by a
grammar), per match class, the decayed counts ``adaptive.AcceptanceTracker`` learns
(``AcceptanceTracker.counts``). It holds counts only, no text of any chat. A file that is not
such counts is kept aside as ``.corrupt-<stamp>``, reported once, and the policy starts from
its priors. Only a memory made with ``persist=True`` (the service's) reads or writes it:
benchmarks and replays never depend on what this machine's chats taught.

Why: replayed one chat after another (the device table's "one process"), a policy that keeps
what earlier chats taught makes first answers as fast as later ones; started cold each
launch, HumanEval's first answers on the steep curves ran at 0.92-0.95x of plain (dev split,
``python -m engine.bench.tune``'s cold replay; resources/readme/benchmarks/results.md).
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

from ..paths import cache_dir
from ..untrusted import read_regular_file, set_aside, write_atomic
from .draft_policy import MatchClass

log = logging.getLogger(__name__)

ACCEPTANCE_VERSION = 1
# every drafter x 2 kinds x 7 classes x 64 positions reached, 2 counts of ~20 digits: 0.5 MB
MAX_ACCEPTANCE_FILE_BYTES = 4 << 20
KINDS = {False: "free", True: "constrained"}  # answers constrained by a grammar, or not
Counts = dict[MatchClass, dict]  # per class, ``AcceptanceTracker.counts``
Saved = dict[tuple[str, bool], Counts]  # per (drafter, constrained)
COUNT_KEYS = ("accepted", "reached", "bonus", "alternatives")  # ``AcceptanceTracker.counts``


def acceptance_path(model_key: str) -> Path:
    return cache_dir() / "acceptance" / f"{model_key}-v{ACCEPTANCE_VERSION}.json"


def load_acceptance(model_key: str, positions: int) -> Saved:
    """The counts kept for ``model_key`` (``positions`` per class at most), or none: missing,
    or bad (then kept aside and said once)."""
    path = acceptance_path(model_key)
    if not path.exists():
        return {}
    try:
        data = json.loads(read_regular_file(path, MAX_ACCEPTANCE_FILE_BYTES).decode("utf-8"))
        return _validated(data, positions)
    except (OSError, ValueError, RecursionError) as error:
        set_aside(path, "acceptance file", error, "the draft policy starts from its priors")
        return {}


def save_acceptance(model_key: str, saved: Saved) -> None:
    """Replace the model's file with ``saved``; a failure is logged, never raised."""
    drafters: dict = {}
    for (drafter, constrained), classes in saved.items():
        counts = {str(int(klass)): counts for klass, counts in classes.items()}
        drafters.setdefault(drafter, {})[KINDS[constrained]] = counts
    path = acceptance_path(model_key)
    try:
        write_atomic(path, json.dumps({"version": ACCEPTANCE_VERSION, "drafters": drafters}))
    except OSError as error:
        log.warning("Could not save %s: %s", path, error)


def _validated(data, positions: int) -> Saved:
    if not isinstance(data, dict) or data.get("version") != ACCEPTANCE_VERSION:
        raise ValueError(f"it is not a version {ACCEPTANCE_VERSION} acceptance file")
    drafters = data.get("drafters")
    if not isinstance(drafters, dict):
        raise ValueError("it has no drafters")
    saved: Saved = {}
    names = {name: constrained for constrained, name in KINDS.items()}
    for drafter, kinds in drafters.items():
        if not isinstance(kinds, dict) or set(kinds) - set(names):
            raise ValueError(f"drafter {drafter!r}: expected {' and '.join(names)} counts")
        for kind, classes in kinds.items():
            if not isinstance(classes, dict):
                raise ValueError(f"drafter {drafter!r}: its {kind} counts are not an object")
            saved[(drafter, names[kind])] = {
                _match_class(key): _counts(value, positions) for key, value in classes.items()
            }
    return saved


def _match_class(key: str) -> MatchClass:
    try:
        return MatchClass(int(key))
    except ValueError:
        raise ValueError(f"{key!r} is not a match class") from None


def _counts(value, positions: int) -> dict:
    """``AcceptanceTracker.counts``: per position kept <= reached, and two gains."""
    if not isinstance(value, dict):
        raise ValueError("a class's counts are not an object")
    accepted, reached = value.get("accepted"), value.get("reached")
    if not (_numbers(accepted) and _numbers(reached)) or len(accepted) != len(reached):
        raise ValueError("accepted and reached are not lists of counts of one length")
    if len(reached) > positions or any(a > r + 1e-9 for a, r in zip(accepted, reached)):
        raise ValueError("more kept than reached, or more positions than a draft has")
    for gain in ("bonus", "alternatives"):
        if not (_numbers(value.get(gain)) and len(value[gain]) == 2):
            raise ValueError(f"{gain} is not [tokens gained, tokens sent]")
    return {key: [float(v) for v in value[key]] for key in COUNT_KEYS}


def _numbers(values) -> bool:
    return isinstance(values, list) and all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
        for v in values
    )
