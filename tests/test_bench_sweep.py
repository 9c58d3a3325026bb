"""The constant sweep replays each value with the constant set, and puts it back."""

import pytest

from engine.bench import sweep
from engine.errors import EngineError
from engine.policy import adaptive
from engine.policy.verify_cost import named_curves


def test_each_value_is_replayed_with_the_constant_set_and_the_constant_is_put_back(monkeypatch):
    seen = []

    def predict(chats, key, eos, seconds, plan, **priced):
        seen.append((adaptive.DECAY, priced["pipelined"]))
        return {"code": adaptive.DECAY * 2, "prose": adaptive.DECAY * 8}

    monkeypatch.setattr(sweep, "predict", predict)
    curves = named_curves()
    named = [curves["h100-7b-bf16"], curves["cpu-epyc-2core-135m-4bit"]]
    before = adaptive.DECAY
    figures = sweep.sweep("DECAY", [0.5, 0.25], named, {}, "key", 0)
    assert adaptive.DECAY == before
    assert [value for value, _ in seen] == [0.5, 0.5, 0.25, 0.25]
    assert [share for _, share in seen[:2]] == [c.pipelined_share for c in named]
    assert figures[0.5, "h100-7b-bf16"] == pytest.approx(2.0)  # geomean of 1 and 4
    assert figures[0.25, "cpu-epyc-2core-135m-4bit"] == pytest.approx(1.0)


def test_only_numeric_constants_and_named_curves_are_swept():
    with pytest.raises(EngineError, match="not a numeric constant"):
        sweep.main(["CLASS_PRIORS", "1", "--conversations", "x.jsonl"])
    with pytest.raises(EngineError, match="no curve named nowhere"):
        sweep.main(["DECAY", "1", "--conversations", "x.jsonl", "--curves", "nowhere"])
