"""Where nothing is drafted, the loop is plain decoding: the same model calls, the same
queuing (each pass queued before the last token is read), the same waits for a token and
no planning, counted pass by pass against ``--drafter none`` (no timing).

Counted: the target's forward passes, ``mx.async_eval`` calls (a pass queued), the passes
that went out before the previous token was read (``PassResult.queued``), the drafter's
proposals and the policy's choices (the host's planning)."""

import mlx.core as mx
import pytest

from engine.drafters import make_drafter
from engine.loop.decode import Target, TokenChooser, speculative_decode
from engine.policy.adaptive import AdaptiveMemory
from engine.policy.draft_policy import NO_DRAFT, FixedDraftLength
from engine.policy.schedule import PassSchedule
from engine.policy.verify_cost import CostCurve, prior_cost_curve
from engine.settings import DraftSettings, SamplingSettings

from .tiny_model import make_tiny_llama

PROMPT = [5, 9, 12, 40, 7, 3, 77, 21, 9, 12] * 4  # repeats itself: the drafter has proposals
TOKENS = 40
HOPELESS = {1: 0.1, 2: 0.2, 4: 0.4, 8: 0.8, 17: 1.7}  # 4-bit on MLX's CPU backend


@pytest.fixture(scope="module")
def model():
    return make_tiny_llama(seed=3)


def counted_run(
    model, monkeypatch, drafter_name: str, curve: CostCurve | None, policy=None, schedule=None
) -> dict:
    """One answer through the loop, every piece of work counted: the adaptive policy and its
    schedule on ``curve`` (None: a fixed draft count), or the ``policy`` and ``schedule``
    given."""
    counts = {"forward": 0, "async_eval": 0, "proposals": 0, "choices": 0}
    target = Target(model)
    history = list(PROMPT)
    target.prefill(history[:-1])
    target.forward = counted(counts, "forward", target.forward)
    monkeypatch.setattr(mx, "async_eval", counted(counts, "async_eval", mx.async_eval))
    settings = DraftSettings(drafter=drafter_name, draft_count=8).validated()
    drafter = make_drafter(settings)
    drafter.reset(history)
    drafter.propose = counted(counts, "proposals", drafter.propose)
    if curve is not None:
        memory = AdaptiveMemory()
        policy = memory.policy("k", drafter, curve=curve)
        schedule = memory.schedule("k", drafter, curve)
    if policy is not None:
        policy.choose = counted(counts, "choices", policy.choose)
    results = list(
        speculative_decode(
            target,
            drafter,
            TokenChooser(SamplingSettings()),
            history,
            max_tokens=TOKENS,
            draft_count=8,
            eos_tokens=set(),
            policy=policy,
            schedule=schedule,
        )
    )
    monkeypatch.undo()
    counts["queued"] = sum(r.queued for r in results)
    counts["drafted"] = sum(r.drafted for r in results)
    counts["tokens"] = history[len(PROMPT) :]
    return counts


def counted(counts: dict, name: str, call):
    """``call``, each call counted in ``counts[name]``."""

    def counting(*args, **kwargs):
        counts[name] += 1
        return call(*args, **kwargs)

    return counting


@pytest.mark.parametrize(
    "curve",
    [
        pytest.param(lambda: CostCurve(HOPELESS), id="measured, no draft can pay"),
        pytest.param(
            lambda: CostCurve(HOPELESS, pipelined=0.93), id="measured with its pipelined pace"
        ),
        pytest.param(prior_cost_curve, id="a guess: never measured for this model"),
    ],
)
def test_an_answer_that_drafts_nothing_costs_what_plain_decoding_does(model, monkeypatch, curve):
    plain = counted_run(model, monkeypatch, "none", None)
    default = counted_run(model, monkeypatch, "suffix", curve())
    assert plain["forward"] == plain["async_eval"] == TOKENS  # every pass queued…
    assert plain["queued"] == TOKENS - 1  # …but the first, before the last token is read
    assert default["drafted"] == 0
    for work in ("forward", "async_eval", "queued", "proposals", "choices", "tokens"):
        assert default[work] == plain[work], work


class SendsNothing(FixedDraftLength):
    def choose(self, proposal, limit):
        return NO_DRAFT


def test_where_drafting_could_pay_the_passes_that_send_nothing_still_queue(model, monkeypatch):
    """A flat curve with a pipelined pace, where queuing blind has gained, and a policy that
    sends nothing: the passes go out blind, queued as plain decoding's are; only the planning
    (a proposal and a choice a pass, while the device runs the queued pass) is added."""
    plain = counted_run(model, monkeypatch, "none", None)
    schedule = PassSchedule(CostCurve({1: 0.01, 64: 0.0105}, fixed=True, pipelined=0.8))
    schedule.blind_gain.record(1.0)
    blind = counted_run(
        model, monkeypatch, "suffix", None, policy=SendsNothing(), schedule=schedule
    )
    assert blind["drafted"] == 0 and blind["tokens"] == plain["tokens"]
    for work in ("forward", "async_eval", "queued"):
        assert blind[work] == plain[work], work
    assert 0 < blind["choices"] <= blind["proposals"] <= TOKENS  # a pass's planning at most
