"""The suite's prompts: ``prompts/<task>.jsonl``, one chat a line, each task in a **check**
set (what the report shows) and a separate **tuning** set (what the engine's defaults were
tuned on), so the report never shows the prompts that were fitted. A workload is one chat:
its first user message and any later user ``turns``, run as the app runs a chat (one
session, each later turn after the model's own plain greedy answer).

Tasks: ``code-edit`` (rename or refactor a given function), ``edit-session`` (4-6 turns, each
changing the previous answer), ``edit-memory`` (a similar chat run ``after`` an edit-session
chat, so cross-chat memory can help), ``rag`` (answer from a passage, quoting it),
``structured`` (JSON / CSV with repeated keys), ``json-schema`` (JSON decoded under a
``schema``, the server's ``response_format``), ``humaneval`` and ``mt-bench`` (public sets,
each line naming its ``source``), and ``open-question`` and ``novel``: nothing to copy.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import EngineError

TASK_ORDER = ("code-edit", "edit-session", "edit-memory", "rag", "structured", "json-schema")
TASK_ORDER += ("humaneval", "mt-bench", "open-question", "novel")
SPLITS = ("check", "tuning")
PROMPTS = Path(__file__).resolve().parent / "prompts"
WRITTEN = "written for this suite (engine/bench/prompts/)"
FIELDS = {"id": str, "split": str, "prompt": str, "role": str, "turns": list, "after": str}
FIELDS.update(schema=dict, source=str)


@dataclass
class Workload:
    task: str
    id: str
    messages: list[dict[str, str]]
    source: str  # provenance in words
    role: str = ""
    turns: list[str] = field(default_factory=list)  # later user turns, in the same chat
    split: str = "check"
    after: str | None = None  # the chat run before it in the same memory (edit-memory)
    schema: dict | None = None  # answers decoded under this JSON schema

    def turn_ids(self) -> list[str]:
        """One cell per answer: ``id`` for a one-turn chat, ``id-t1``, ``id-t2``… otherwise."""
        if not self.turns:
            return [self.id]
        return [f"{self.id}-t{n}" for n in range(1, len(self.turns) + 2)]


def load_prompts(path: Path) -> list[Workload]:
    """The workloads of one JSONL file (named by their task): one JSON object a line with
    ``FIELDS``, of which ``id``, ``split`` and ``prompt`` are required (``turns``: later user
    messages; ``source``: where a prompt was taken from). A bad line raises ValueError naming
    the file and the line."""
    workloads = []
    for number, row in json_lines(path.read_text(encoding="utf-8"), str(path)):
        missing = [k for k in ("id", "split", "prompt") if k not in row]
        unknown = sorted(set(row) - set(FIELDS))
        wrong = [k for k, kind in FIELDS.items() if k in row and not isinstance(row[k], kind)]
        if not all(isinstance(t, str) for t in row.get("turns") or []):
            wrong.append("turns")
        found = {"missing": missing, "unknown": unknown, "wrong type for": wrong}
        problems = [f"{label} {', '.join(keys)}" for label, keys in found.items() if keys]
        if not problems and row["split"] not in SPLITS:
            problems = [f"split {row['split']!r} is not one of {', '.join(SPLITS)}"]
        if problems:
            raise ValueError(f"{path}, line {number}: " + "; ".join(problems))
        extra = {k: row[k] for k in ("role", "turns", "split", "after", "schema") if k in row}
        source, prompt = row.get("source", WRITTEN), [{"role": "user", "content": row["prompt"]}]
        workloads.append(Workload(path.stem, row["id"], prompt, source, **extra))
    return workloads


def json_lines(text: str, where: str, error=ValueError) -> Iterator[tuple[int, dict]]:
    """Each non-blank line of a JSONL text: (its number, the JSON object on it); ``error``
    raised with ``where`` and the line's number for a line that holds no JSON object."""
    # split at newlines only: JSON text may hold U+2028 and more that splitlines breaks at
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError) as problem:  # nested too deep: not a chat either
            raise error(f"{where}, line {number}: not JSON ({problem})") from None
        if not isinstance(row, dict):
            raise error(f"{where}, line {number}: not a JSON object")
        yield number, row


def written_workloads() -> dict[str, list[Workload]]:
    return {path.stem: load_prompts(path) for path in sorted(PROMPTS.glob("*.jsonl"))}


def select_workloads(
    tasks: list[str], per_task: int, split: str = "check"
) -> tuple[list[Workload], list[dict]]:
    """The chosen tasks' workloads of one split (``check``: the report's; ``tuning``), and
    per task where they come from (``{"task", "source", "items"}``)."""
    if split not in SPLITS:
        raise EngineError(f"Unknown prompt set {split!r}; choose from {', '.join(SPLITS)}.")
    written = written_workloads()
    chosen, provenance = [], []
    for task in tasks:
        if task not in written:
            raise EngineError(f"Unknown task {task!r}; choose from {', '.join(TASK_ORDER)}.")
        items = [w for w in written[task] if w.split == split][:per_task]
        ours = all(w.source == WRITTEN for w in items)
        names = [w.id if ours else f"{w.id} ({w.source})" for w in items]
        provenance.append({"task": task, "source": WRITTEN if ours else "public", "items": names})
        chosen += items
    return chosen, provenance


def predecessor(workload: Workload) -> Workload | None:
    """The chat an ``edit-memory`` workload follows (whatever was selected), else None."""
    if workload.after is None:
        return None
    for items in written_workloads().values():
        for item in items:
            if item.id == workload.after:
                return item
    raise ValueError(f"{workload.id}: no workload {workload.after!r} to follow")
