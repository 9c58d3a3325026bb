"""Where the default policy loses to the best cut: each pass sorted by what it sent against
the best cut of the same proposal, and the time each kind lost."""

from __future__ import annotations

import pytest

from engine.bench.policy_gap import Gap, PassRecord, kind_of
from engine.policy.verify_cost import CostCurve


@pytest.mark.parametrize(
    "record, kind",
    [
        (PassRecord(sent=0, kept=0, best=0), "nothing pays"),
        (PassRecord(sent=0, kept=0, best=3), "held back"),
        (PassRecord(sent=4, kept=0, best=0), "sent, none kept"),
        (PassRecord(sent=4, kept=0, best=2), "sent, none kept, a cut paid"),
        (PassRecord(sent=4, kept=2, best=3), "kept less than the best cut"),
        (PassRecord(sent=4, kept=3, best=3), "sent more than kept"),
        (PassRecord(sent=3, kept=3, best=3), "the best cut"),
    ],
)
def test_each_pass_is_sorted_by_what_it_sent_against_the_best_cut(record, kind):
    assert kind_of(record) == kind


def test_time_lost_is_the_time_beyond_what_the_best_cuts_rate_needs():
    curve = CostCurve({1: 1.0, 2: 1.5, 3: 2.0})
    gap = Gap(curve.base(1))
    gap.add("held back", 1.0, 1, 2, curve)  # a plain pass where 3 tokens for c(3) = 2 paid
    gap.add("sent, none kept", 1.5, 1, 0, curve)  # one draft token, rejected
    gap.add("the best cut", 2.0, 3, 2, curve)
    rows = {
        kind: (passes, share, rate, best, lost)
        for kind, passes, share, rate, best, lost in gap.rows()
    }
    whole = 4.5
    passes, share, rate, best, lost = rows["held back"]
    assert (passes, share, rate, best) == (1, pytest.approx(1 / whole), 1.0, 1.5)
    assert lost == pytest.approx((1.0 - 1 / 1.5) / whole)  # 1 token at 1.5 tokens per c(1)
    assert rows["sent, none kept"][4] == pytest.approx((1.5 - 1.0) / whole)
    assert rows["the best cut"][4] == pytest.approx(0.0)
    assert "nothing pays" not in rows  # no pass of that kind: no row
    assert gap.speedup() == pytest.approx(5 / whole)


@pytest.mark.embedded
def test_the_sorted_passes_are_the_device_tables_default(embedded_loaded, tmp_path):
    """The recorded replay makes the default's own passes: its pooled speed-up equals the
    device table's replay of the same chat, and every pass is in one kind."""
    from engine.bench.conversations import read_conversations, replay_chats, write_conversations
    from engine.bench.devices import strategies
    from engine.bench.policy_gap import policy_gap
    from engine.bench.tune import model_identity, replays
    from engine.policy.verify_cost import named_curves

    answer = "Red, green and blue. " * 6 + "Those are the primary colours of light, " * 3
    chat = {
        "id": "c",
        "category": "prose",
        "messages": [
            {"role": "user", "content": "Name three colours, six times."},
            {"role": "assistant", "content": answer},
            {"role": "user", "content": "Again."},
            {"role": "assistant", "content": answer},
        ],
    }
    write_conversations([chat], tmp_path / "chat.jsonl")
    chats = replay_chats(read_conversations(tmp_path / "chat.jsonl"), embedded_loaded)
    key, eos = model_identity(embedded_loaded)
    named = named_curves()["h100-7b-bf16"]
    gap = policy_gap(chats, key, eos, named)
    plan = strategies(eos, named)["default"]
    options = (False, False, False, named.tree_extra_s, 1, named.pipelined_share)
    result = replays(chats, key, eos, named.seconds, plan, *options)["c"]
    assert gap.speedup() == pytest.approx(result["plain_s"] / result["spec_s"])
    assert sum(t.passes for t in gap.kinds.values()) == result["passes"]
    assert gap.kinds["the best cut"].passes + gap.kinds["sent more than kept"].passes > 0
