"""Text completions as evaluation harnesses use them: ``echo`` with the prompt's
log-probabilities, ``max_tokens`` 0, prompts of token ids and lists of prompts (answered in
turn), through the openai client; and a real lm-evaluation-harness ``local-completions``
run on a handful of items (skipped where lm_eval is not installed)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import mlx.core as mx
import openai
import pytest

from .tool_model import InProcessServer, LoadedService

PROMPT = "abcabc hello"


@pytest.fixture(scope="module")
def server(tiny_loaded):
    with InProcessServer(LoadedService(tiny_loaded), "tiny") as running:
        yield running


def client(server):
    return openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)


def model_logprobs(loaded, ids: list[int]) -> mx.array:
    """The model's own log-softmax after each prefix of ``ids``."""
    logits = loaded.model(mx.array(ids)[None])[0].astype(mx.float32)
    return logits - mx.logsumexp(logits, axis=-1, keepdims=True)


def test_echo_with_max_tokens_0_scores_the_prompt(server, tiny_loaded):
    ids = list(tiny_loaded.tokenizer.encode(PROMPT))
    answer = client(server).completions.create(
        model="tiny", prompt=PROMPT, echo=True, logprobs=2, max_tokens=0, temperature=0
    )
    choice = answer.choices[0]
    assert choice.text == PROMPT and choice.finish_reason == "length"
    scores = choice.logprobs
    assert len(scores.tokens) == len(ids) and "".join(scores.tokens) == PROMPT
    assert scores.token_logprobs[0] is None and scores.top_logprobs[0] is None
    reference = model_logprobs(tiny_loaded, ids)
    for i, value in enumerate(scores.token_logprobs[1:]):
        assert value == pytest.approx(reference[i, ids[i + 1]].item(), abs=1e-4)
        assert 1 <= len(scores.top_logprobs[i + 1]) <= 2  # (two bytes may share a text)
        assert max(scores.top_logprobs[i + 1].values()) == pytest.approx(
            reference[i].max().item(), abs=1e-4
        )
    assert scores.text_offset == list(range(len(PROMPT)))  # one byte, one character each
    assert answer.usage.prompt_tokens == len(ids) and answer.usage.completion_tokens == 0


def test_echo_then_the_answer_as_without_echo(server):
    settings = dict(model="tiny", prompt=PROMPT, max_tokens=5, temperature=0, logprobs=1)
    plain = client(server).completions.create(**settings).choices[0]
    echoed = client(server).completions.create(echo=True, **settings).choices[0]
    assert echoed.text == PROMPT + plain.text
    assert echoed.logprobs.tokens[len(PROMPT) :] == plain.logprobs.tokens
    assert echoed.logprobs.token_logprobs[len(PROMPT) :] == pytest.approx(
        plain.logprobs.token_logprobs, abs=1e-5
    )
    settings.pop("logprobs")  # (a chunk with a token's log-probabilities may have no text)
    streamed = list(client(server).completions.create(echo=True, stream=True, **settings))
    assert "".join(c.choices[0].text for c in streamed) == PROMPT + plain.text
    assert streamed[0].choices[0].text.startswith(PROMPT)
    texts = [c.choices[0].text for c in streamed if not c.choices[0].finish_reason]
    assert all(texts), "no empty chunk"
    passes = [c.model_extra["draftless"] for c in streamed if c.model_extra.get("draftless")]
    shown = [p["pass"] for p in passes] + [e["pass"] for p in passes for e in p.get("earlier", [])]
    assert sorted(shown) == list(range(len(shown)))  # every pass's figures, once


def test_token_id_prompts_and_lists_of_prompts_are_answered_in_turn(server, tiny_loaded):
    ids = list(tiny_loaded.tokenizer.encode(PROMPT))
    settings = dict(model="tiny", max_tokens=4, temperature=0)
    text = client(server).completions.create(prompt=PROMPT, **settings)
    by_ids = client(server).completions.create(prompt=ids, **settings)
    assert by_ids.choices[0].text == text.choices[0].text
    other = client(server).completions.create(prompt="xyz", **settings).choices[0].text
    both = client(server).completions.create(prompt=[ids, "xyz"], **settings)
    assert [c.index for c in both.choices] == [0, 1]
    assert [c.text for c in both.choices] == [text.choices[0].text, other]
    assert both.usage.prompt_tokens == len(ids) + 3 and both.usage.completion_tokens == 8
    with pytest.raises(openai.BadRequestError) as caught:
        client(server).completions.create(prompt=[259 + 7], **settings)
    assert "token id 266" in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:
        client(server).completions.create(prompt=["a", "b"], stream=True, **settings)
    assert caught.value.body["param"] == "stream"
    with pytest.raises(openai.BadRequestError) as caught:
        client(server).chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=0
        )
    assert caught.value.body["param"] == "max_tokens"


def lm_eval_python() -> str | None:
    """A Python that has lm_eval: ``DRAFTLESS_LM_EVAL_PYTHON``, else this one's."""
    named = os.environ.get("DRAFTLESS_LM_EVAL_PYTHON")
    if named and shutil.which(named):
        return named
    return sys.executable if find_spec("lm_eval") else None


ITEMS = [
    {"question": "abcabcabc", "choices": ["abc", "xyz"], "answer": 0},
    {"question": "hello hello", "choices": [" hello", " world"], "answer": 0},
    {"question": "1 2 3 4", "choices": [" 5", " 9"], "answer": 0},
    {"question": "red green", "choices": [" blue", " stone"], "answer": 0},
]
TASK = """task: draftless_tiny
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: acc
"""


def test_lm_evaluation_harness_scores_items_through_echo(
    server, tiny_loaded, tiny_model_dir, tmp_path
):
    """lm_eval's ``local-completions`` sends token ids with echo and logprobs; each
    choice's log-likelihood it reports is the model's own, summed over the choice."""
    python = lm_eval_python()
    if python is None:
        pytest.skip("lm_eval is not installed (pip install lm-eval)")
    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps(item) + "\n" for item in ITEMS))
    (tmp_path / "task.yaml").write_text(TASK.format(data=data))
    model_args = ",".join(
        [
            "model=tiny",
            f"base_url={server.url}/completions",
            f"tokenizer={tiny_model_dir}",
            "tokenizer_backend=huggingface",
            "tokenized_requests=True",
            "num_concurrent=1",
            "max_retries=1",
        ]
    )
    command = [python, "-m", "lm_eval", "--model", "local-completions", "--model_args"]
    command += [model_args, "--tasks", "draftless_tiny", "--include_path", str(tmp_path)]
    command += ["--output_path", str(tmp_path / "out"), "--log_samples"]
    offline = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "OPENAI_API_KEY": "unused"}
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=600, env={**os.environ, **offline}
    )
    assert result.returncode == 0, result.stderr[-3000:]
    samples = [
        json.loads(line)
        for path in Path(tmp_path / "out").rglob("samples_draftless_tiny_*.jsonl")
        for line in path.read_text().splitlines()
    ]
    assert len(samples) == len(ITEMS)
    tokenizer = tiny_loaded.tokenizer
    for sample in samples:  # each choice: its context and continuation, its figure
        asked = sample["arguments"].values()
        for arguments, (value, _) in zip(asked, sample["filtered_resps"]):
            context = list(tokenizer.encode(arguments["arg_0"]))
            whole = context + list(tokenizer.encode(arguments["arg_1"]))
            reference = model_logprobs(tiny_loaded, whole)
            expected = sum(
                reference[i - 1, whole[i]].item() for i in range(len(context), len(whole))
            )
            assert float(value) == pytest.approx(expected, abs=1e-3)
