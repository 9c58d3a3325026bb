"""The written prompts are package data: every file loads, and a bad line is a clear error."""

from __future__ import annotations

import pytest


def test_every_written_task_loads_from_its_file():
    from engine.bench.workloads import PROMPTS, written_workloads

    written = written_workloads()
    assert sorted(written) == sorted(p.stem for p in PROMPTS.glob("*.jsonl"))
    assert {
        "code-edit",
        "rag",
        "structured",
        "edit-session",
        "edit-memory",
        "open-question",
        "novel",
        "json-schema",
        "humaneval",
        "mt-bench",
    } <= set(written)
    assert all(w.schema and w.schema.get("type") for w in written["json-schema"])
    assert all(w.source.startswith("HumanEval") for w in written["humaneval"])
    assert all(len(w.turn_ids()) == 2 for w in written["mt-bench"])
    for task, items in written.items():
        assert items and all(w.task == task and w.messages[0]["content"] for w in items)
    ids = {w.id for items in written.values() for w in items}
    assert all(w.after in ids for w in written["edit-memory"])


@pytest.mark.parametrize(
    "line, words",
    [
        ("{not json", "not JSON"),
        ('["a list"]', "not a JSON object"),
        ('{"id": "x", "split": "check"}', "missing prompt"),
        ('{"id": "x", "split": "check", "prompt": "p", "colour": 1}', "unknown colour"),
        ('{"id": "x", "split": "check", "prompt": "p", "turns": [1]}', "wrong type for turns"),
        ('{"id": "x", "split": "later", "prompt": "p"}', "split 'later'"),
    ],
)
def test_a_bad_line_names_the_file_and_line(tmp_path, line, words):
    from engine.bench.workloads import load_prompts

    path = tmp_path / "code-edit.jsonl"
    path.write_text('{"id": "ok", "split": "check", "prompt": "fine"}\n' + line + "\n")
    with pytest.raises(ValueError) as error:
        load_prompts(path)
    assert f"{path}, line 2" in str(error.value) and words in str(error.value)
