"""Adaptive speculation: the cost curve, the length choice, caching, and the fixed mode."""

import json

import pytest

from engine.policy import adaptive, verify_cost
from engine.policy.adaptive import AcceptanceTracker, AdaptivePolicy, CostCurve
from engine.loop.decode import Target, TokenChooser, speculative_decode
from engine.policy.draft_policy import (
    AlternativesOutcome,
    Choice,
    DraftPolicy,
    FixedDraftLength,
    MatchClass,
    PassOutcome,
)
from engine.drafters import make_drafter
from engine.drafters.base import ONCE, USUAL, Drafter, Proposal
from engine.settings import DraftSettings, SamplingSettings

from .identity import reference_greedy
from .policy_steps import choose, length, passed
from .tiny_model import make_tiny_llama


pytestmark = pytest.mark.usefixtures("private_dirs")  # conftest: a data and cache folder per test


CURVE = {1: 0.086, 5: 0.142, 17: 0.170}  # the embedded model on this CPU (seconds)


def test_cost_curve_interpolates_and_extrapolates():
    curve = CostCurve(CURVE)
    assert curve(1) == pytest.approx(0.086)
    assert curve(3) == pytest.approx(0.114)
    assert curve(33) > curve(17)
    curve.observe(5, 0.284)  # the machine got twice as slow
    assert curve.scale > 1.0


def trained(probability: float, passes: int = 200, depth: int = 8) -> AcceptanceTracker:
    tracker = AcceptanceTracker()
    import random

    rng = random.Random(0)
    for _ in range(passes):
        tracker.decay()
        accepted = 0
        while accepted < depth and rng.random() < probability:
            accepted += 1
        tracker.record(depth, accepted)
    return tracker


def test_policy_drafts_nothing_when_drafts_are_rejected():
    policy = AdaptivePolicy(CostCurve(CURVE), {0: trained(0.05)})
    assert length(policy, 8) == 0


def test_policy_drafts_long_when_drafts_are_accepted():
    policy = AdaptivePolicy(CostCurve(CURVE), {0: trained(0.95)})
    assert length(policy, 16) >= 8


FLAT = {1: 0.010, 64: 0.0102, 96: 0.012}


def with_bonus(tracker: AcceptanceTracker, per_token: float) -> AcceptanceTracker:
    """A tracker whose prior says a tree's other rows add ``per_token`` tokens per token of
    its first row."""
    tracker.bonus.prior = per_token
    return tracker


def chosen_rows(policy: AdaptivePolicy, limit: int = 16, rows: int = 10) -> int:
    return choose(policy, limit, rows=rows).rows


def test_a_tree_goes_out_only_where_its_rows_earn_more_than_they_cost():
    # this CPU's steep curve: at most two rows (a third costs over 5% more than two), and
    # only where they add enough
    multi = AdaptivePolicy(CostCurve(CURVE), {0: with_bonus(trained(0.6), 0.3)}, rows=10)
    assert chosen_rows(multi) <= 2
    small = AdaptivePolicy(CostCurve(CURVE), {0: with_bonus(trained(0.6), 0.01)}, rows=10)
    choice = choose(small, 16, rows=10)
    assert choice.rows == 1
    assert choice.length == length(AdaptivePolicy(CostCurve(CURVE), {0: trained(0.6)}, rows=1), 16)
    # a flat curve: rows that add a little ride along, as many as cost at most 5% more than two
    policy = AdaptivePolicy(CostCurve(FLAT), {0: with_bonus(trained(0.6), 0.05)}, rows=10)
    choice = choose(policy, 16, rows=10)
    cost = policy.curve(1 + choice.rows * choice.length)
    assert choice.rows > 1 and cost <= 1.05 * policy.curve(1 + 2 * choice.length)
    assert chosen_rows(policy, rows=1) == 1  # a proposal of one row is sent as one row
    # rows that add nothing stay home even where they are free
    idle = AdaptivePolicy(CostCurve(FLAT), {0: with_bonus(trained(0.6), 0.0)}, rows=10)
    assert chosen_rows(idle) == 1


def test_a_short_first_row_earns_only_on_its_own_tokens():
    # a first row of 2 tokens beside a second of 16: the tree's 16-token length must pay
    # through the second row's bonus, not through first-row tokens that do not exist
    steps = {1: 0.010, 3: 0.011, 33: 0.016}

    def sent(first: int) -> int:
        policy = AdaptivePolicy(CostCurve(steps), {0: with_bonus(trained(0.9), 0.05)}, rows=2)
        return length(policy, 16, rows=2, first=first)

    assert sent(first=2) == 2  # 30 more nodes for 0.8 more tokens: no
    assert sent(first=16) > 2  # both rows long: the first row's own tokens pay


def test_a_tree_pays_for_what_it_costs_beyond_its_nodes():
    def rows(tree_extra: float, per_token: float) -> int:
        curve = CostCurve(FLAT, tree_extra=tree_extra)
        return chosen_rows(AdaptivePolicy(curve, {0: with_bonus(trained(0.6), per_token)}, rows=4))

    assert rows(0.0, 0.02) == 4
    assert rows(0.002, 0.02) == 1  # a tree pass 20% dearer for 0.3 more tokens: no
    assert rows(0.002, 0.2) == 4  # for three more tokens: yes


def with_alternatives(policy: AdaptivePolicy, own: int, alternatives: int, limit: int) -> Choice:
    """The choice of a proposal of ``own`` rows of ``limit`` tokens and ``alternatives``
    one-token alternative rows after them."""
    rows = [[1] * limit for _ in range(own)] + [[2]] * alternatives
    return policy.choose(Proposal(rows, alternatives=alternatives), limit)


def test_alternative_rows_go_out_only_where_they_pay_and_are_learned_apart():
    # a flat curve: three one-token alternatives beside the own row cost next to nothing
    tracker = trained(0.3)
    tracker.alternatives.prior = 0.05  # each alternative token adds 0.05 tokens
    choice = with_alternatives(AdaptivePolicy(CostCurve(FLAT), {0: tracker}, 8), 1, 3, 8)
    assert choice.alternatives and choice.rows == 1
    # beside own rows: as many as a tree of them would send (here all 3), and the alternatives
    choice = with_alternatives(
        AdaptivePolicy(CostCurve(FLAT), {0: with_bonus(tracker, 0.05)}, 8), 3, 3, 8
    )
    assert choice.alternatives and choice.rows == 3
    # this CPU's curve: they would cost more than the 5% of a token each is expected to add
    tracker = trained(0.9)
    tracker.alternatives.prior = 0.05
    choice = with_alternatives(AdaptivePolicy(CostCurve(CURVE), {0: tracker}, 8), 1, 3, 8)
    assert not choice.alternatives and choice.rows == 1
    # a policy's own trackers start from its prior
    assert AdaptivePolicy(CostCurve(FLAT), alternatives_prior=0.05).tracker(0).alternatives_gain(
        1
    ) == pytest.approx(0.05)
    # learned apart from the own rows: a tree of 2 own rows (first of 8 tokens kept 1, the
    # other 3) and alternatives (3 tokens sent) that kept 2 more than both
    tracker = AdaptivePolicy(CostCurve(FLAT), alternatives_prior=0.0).tracker(0)
    outcome = PassOutcome(19, 5, 0.01, 8, True, (8, 1), AlternativesOutcome(2, 3, 2))
    tracker.record_rows(outcome)
    assert (tracker.bonus.gained, tracker.bonus.sent) == (2.0, 8.0)
    assert (tracker.alternatives.gained, tracker.alternatives.sent) == (2.0, 3.0)
    weight = adaptive.TREE_BONUS_WEIGHT * adaptive.TREE_BONUS_LENGTH
    assert tracker.alternatives_gain(4) == pytest.approx(4 * 2.0 / (3.0 + weight))
    # beside one own row there is no tree of own rows to learn from
    tracker.record_rows(PassOutcome(4, 3, 0.01, 3, True, (3, 1), AlternativesOutcome(1, 1, 2)))
    assert (tracker.bonus.gained, tracker.bonus.sent) == (2.0, 8.0)


def test_a_tree_pass_teaches_its_first_row_and_what_the_others_added():
    policy = AdaptivePolicy(CostCurve(FLAT), rows=4)
    choice = choose(policy, 8, rows=4)
    passed(policy, choice, 20, 5, 0.0101, depth=8, tree=True, first_row=(8, 1))
    tracker = policy.tracker(0)
    assert tracker.reached[:3] == [1.0, 1.0, 0.0] and tracker.accepted[:2] == [1.0, 0.0]
    assert (tracker.bonus.gained, tracker.bonus.sent) == (4.0, 8.0)  # 4 beyond a first row of 8
    prior = adaptive.TREE_BONUS_WEIGHT * adaptive.TREE_BONUS_LENGTH  # first-row tokens at 0
    assert tracker.tree_bonus(8) == pytest.approx(8 * 4.0 / (8.0 + prior))


def test_tree_passes_teach_the_curve_their_extra_cost_and_leave_c_of_n_alone():
    curve = CostCurve(FLAT)
    policy = AdaptivePolicy(curve, {0: with_bonus(trained(0.6), 0.02)}, rows=4)
    choice = choose(policy, 16, rows=4)
    assert choice.rows == 4
    chain = curve(17)
    for _ in range(60):  # 3 ms more than 17 tokens
        passed(policy, choice, 16, 3, chain + 0.003, depth=4, tree=True)
    assert curve.tree_extra == pytest.approx(0.003, rel=0.05)
    assert curve(17) == pytest.approx(chain) and curve.scale == 1.0
    assert chosen_rows(policy, rows=4) == 1
    named = CostCurve(FLAT, fixed=True, tree_extra=0.001)
    named.observe_tree(17, 0.5)  # another device's curve is planned on as it is
    assert named.tree_extra == 0.001


def test_policy_probes_again_after_a_while():
    policy = AdaptivePolicy(CostCurve(CURVE), {0: trained(0.0)})
    assert policy.probe_interval() >= adaptive.PROBE_INTERVAL
    for _ in range(policy.probe_interval()):
        choice = choose(policy, 4)
        assert choice.length == 0
        passed(policy, choice, 0, 0, 0.086)
    probe = choose(policy, 4)
    assert probe.length == 1  # a one-token probe
    passed(policy, probe, 1, 0, 0.09)  # rejected: quiet again
    assert length(policy, 4) == 0


def test_policy_judges_long_matches_apart_from_short_ones():
    policy = AdaptivePolicy(CostCurve(CURVE), {adaptive.match_class(1): trained(0.0)})
    assert length(policy, 8, match_length=1) == 0  # short guesses failed
    assert length(policy, 8, match_length=24) >= 2  # a long copy starts from the prior
    assert adaptive.match_class(0) is MatchClass.NOT_SAID
    assert adaptive.match_class(2) is MatchClass.SHORT
    assert adaptive.match_class(12) is MatchClass.LONG_COPY


def test_the_policy_keeps_nothing_between_choosing_and_recording():
    """Each choice carries its own class: a pass recorded after another choice was made
    teaches the class it drafted in, not the latest one asked about."""
    policy = AdaptivePolicy(CostCurve(CURVE))
    copy = choose(policy, 8, match_length=24)
    short = choose(policy, 8, match_length=1)
    assert (copy.kind, short.kind) == (MatchClass.LONG_COPY, MatchClass.SHORT)
    assert choose(policy, 8, match_length=1) == short  # asking again changes nothing
    passed(policy, copy, copy.length, 0, 0.15)
    assert policy.tracker(MatchClass.LONG_COPY).reached[0] == 1.0
    assert policy.tracker(MatchClass.SHORT).reached[0] == 0.0


def test_both_policies_answer_the_loops_protocol():
    for policy in (FixedDraftLength(), AdaptivePolicy(CostCurve(CURVE))):
        assert isinstance(policy, DraftPolicy)
    # every row, all of it, alternatives too
    assert choose(FixedDraftLength(), 5, rows=3) == Choice(5, 3, alternatives=True)


def test_policy_judges_a_usual_short_match_apart_from_other_short_ones():
    usual = adaptive.match_class(1, USUAL)
    assert usual is MatchClass.USUAL_SHORT and adaptive.match_class(4, USUAL) is MatchClass.MEDIUM
    policy = AdaptivePolicy(
        CostCurve(CURVE), {adaptive.match_class(1): trained(0.0), usual: trained(1.0)}
    )
    assert length(policy, 8, match_length=1) == 0  # other short guesses failed
    assert length(policy, 8, match_length=1, follows=USUAL) >= 2  # these were kept


def test_policy_judges_a_short_match_seen_once_apart_from_usual_and_other_short_ones():
    once = adaptive.match_class(1, ONCE)
    usual = adaptive.match_class(1, USUAL)
    assert len({once, usual, adaptive.match_class(1)}) == 3
    assert adaptive.match_class(4, ONCE) == adaptive.match_class(4)
    policy = AdaptivePolicy(CostCurve(CURVE), {usual: trained(1.0), once: trained(0.0)})
    assert length(policy, 8, match_length=1, follows=ONCE) == 0  # these failed lately
    assert length(policy, 8, match_length=1, follows=USUAL) >= 2  # not because of them


def test_positions_not_reached_lately_follow_the_ones_that_were():
    tracker = AcceptanceTracker()
    for _ in range(3):  # position 0 accepted, position 1 rejected
        tracker.decay()
        tracker.record(8, 1)
    assert tracker.probability(1) < 0.3
    for _ in range(15):  # then only one-token drafts, all accepted
        tracker.decay()
        tracker.record(1, 1)
    assert tracker.probability(0) > 0.9
    assert tracker.probability(1) > 0.6  # stale failures faded toward position 0's estimate


def test_positions_of_a_copy_from_the_third_on_share_one_rate():
    tracker = AcceptanceTracker(pooled=True)
    for _ in range(6):  # copies of 4 tokens kept whole
        tracker.decay()
        tracker.record(4, 4)
    tracker.decay()
    tracker.record(12, 7)  # one that ended at position 7
    rates = tracker.probabilities(12)
    assert rates[2:] == [rates[2]] * 10  # one rate from position 2 on
    assert rates[7] > 0.9  # one failure among many kept tokens, not a wall at position 7
    policy = AdaptivePolicy(CostCurve(CURVE))
    copies = [policy.tracker(adaptive.match_class(n)).pooled for n in (1, 3, 6, 12)]
    assert copies == [False, False, True, True]
    assert not policy.tracker(adaptive.match_class(1, USUAL)).pooled


def test_policy_follows_a_switch_from_copying_to_new_text():
    policy = AdaptivePolicy(CostCurve(CURVE), {0: trained(0.95)})
    assert length(policy, 8) >= 4
    for _ in range(25):
        choice = choose(policy, 8)
        passed(policy, choice, choice.length, 0, 0.15)
    assert length(policy, 8) == 0


def measure(memory: adaptive.AdaptiveMemory, model_key: str, model) -> CostCurve:
    """Measure as the service does between answers: a cache of its own, a short context."""
    for _ in memory.measure_in_steps(model_key, Target(model), context=37):
        pass
    return memory.curve(model_key)


def test_cost_curve_is_measured_once_and_cached_on_disk(tmp_path, monkeypatch):
    # every length timed: the tiny model's 1 ms passes, timed beside other work (the tests'
    # second worker), can look as if they cost their length, which stops a timing early
    monkeypatch.setattr(verify_cost, "costs_its_length", lambda *args, **kwargs: False)
    memory = adaptive.AdaptiveMemory()
    assert not memory.measured("tiny-key")  # nothing on disk: the prior shape
    curve = measure(memory, "tiny-key", make_tiny_llama(seed=3))
    assert curve.measured and curve.lengths == list(verify_cost.COST_LENGTHS)
    assert verify_cost.cost_path("tiny-key").exists()
    again = adaptive.AdaptiveMemory().curve("tiny-key")  # from disk, no target needed
    assert again.measured and again.lengths == curve.lengths
    # and a queued one-token pass's share of c(1) (``pace_steps``), saved with it
    assert 0 < curve.pipelined < 2 and again.pipelined == curve.pipelined


@pytest.mark.parametrize("steep", [False, True], ids=["every length", "stopped where hopeless"])
def test_a_measurement_reports_one_total_and_ends_at_it(monkeypatch, steep):
    """The progress a person sees: one total from the first step, and 100% at the end, also
    where a curve that costs its length stops the timing early (4-bit on MLX's CPU)."""
    # decided here, not by timing the tiny model's 1 ms passes beside the tests' other worker
    monkeypatch.setattr(verify_cost, "costs_its_length", lambda *args, **kwargs: steep)
    memory = adaptive.AdaptiveMemory()
    model = make_tiny_llama(seed=3)
    progress = list(memory.measure_in_steps(f"progress-{steep}", Target(model), context=37))
    totals = {total for _, total in progress}
    assert len(totals) == 1 and progress[-1][0] == progress[-1][1]
    assert [done for done, _ in progress] == sorted(done for done, _ in progress)
    curve = memory.curve(f"progress-{steep}")
    assert curve.measured
    assert len(curve.lengths) == (
        verify_cost.PROBED_LENGTHS if steep else len(verify_cost.COST_LENGTHS)
    )


def test_a_curve_saved_without_its_pipelined_pace_is_measured_again():
    memory = adaptive.AdaptiveMemory()
    measure(memory, "older", make_tiny_llama(seed=3))
    path = verify_cost.cost_path("older")
    data = json.loads(path.read_text())
    del data["pipelined_share"]
    path.write_text(json.dumps(data))
    older = adaptive.AdaptiveMemory()
    assert older.curve("older").measured and not older.measured("older")
    path.write_text(json.dumps(dict(data, pipelined_share="fast")))  # not a share: set aside
    assert verify_cost.load_cost_curve("older") is None and not path.exists()


def test_a_measurement_stopped_before_its_end_leaves_the_curve_alone():
    memory = adaptive.AdaptiveMemory()
    steps = memory.measure_in_steps("stopped", Target(make_tiny_llama(seed=3)), context=37)
    for _ in range(5):
        next(steps)
    steps.close()  # another model was loaded, or the service stopped
    assert not memory.measured("stopped")
    assert not verify_cost.cost_path("stopped").exists()


def test_corrupt_cost_file_is_reported_and_measured_again(caplog):
    path = verify_cost.cost_path("broken")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{]")
    assert verify_cost.load_cost_curve("broken") is None
    assert "Ignoring the verify-cost file" in caplog.text
    memory = adaptive.AdaptiveMemory()
    assert not memory.measured("broken")
    measure(memory, "broken", make_tiny_llama(seed=3))
    assert json.loads(path.read_text())["version"] == verify_cost.COST_VERSION


def run(model, prompt, settings, policy=None, max_tokens=40):
    target = Target(model)
    history = list(prompt)
    target.prefill(history[:-1])
    drafter = make_drafter(settings)
    drafter.reset(history)
    results = list(
        speculative_decode(
            target,
            drafter,
            TokenChooser(SamplingSettings()),
            history,
            max_tokens=max_tokens,
            draft_count=settings.draft_count,
            eos_tokens=set(),
            policy=policy,
        )
    )
    return history[len(prompt) :], results


@pytest.mark.parametrize("name", ["prompt-lookup", "suffix", "ngrammys"])
def test_adaptive_decoding_stays_lossless(name):
    model = make_tiny_llama(seed=1)
    prompt = [40 + (i % 9) for i in range(60)]
    settings = DraftSettings(
        drafter=name,
        draft_count=6,
        adaptive=True,
        options={"rows": 2} if name == "ngrammys" else {},
    )
    drafter = make_drafter(settings)
    policy = AdaptivePolicy(CostCurve(CURVE), rows=drafter.rows_per_pass)
    got, results = run(model, prompt, settings, policy)
    assert got == reference_greedy(model, prompt, 40)
    assert sum(r.accepted for r in results) > 0


class Always(Drafter):
    name = "always"
    summary = "always offers k tokens"

    def reset(self, prompt_tokens):
        pass

    def propose(self, k):
        return Proposal([[7] * k])

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None):
        pass


def test_adaptive_off_honours_the_fixed_draft_count():
    model = make_tiny_llama(seed=1)
    target = Target(model)
    history = list(range(3, 30))
    target.prefill(history[:-1])
    results = list(
        speculative_decode(
            target,
            Always(DraftSettings(adaptive=False)),
            TokenChooser(SamplingSettings()),
            history,
            max_tokens=30,
            draft_count=3,
            eos_tokens=set(),
        )
    )
    produced = 0
    for result in results:  # exactly 3 unless fewer tokens remain to produce
        assert result.drafted == min(3, 30 - produced - 1)
        produced += len(result.tokens)


class Copier(Always):
    name = "copier"

    def propose(self, k):
        return Proposal(super().propose(k).rows, match_length=9)

    def __init__(self, settings):
        super().__init__(settings)
        self.drafted = []

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None):
        self.drafted.append(drafted)


class TwoTokens(FixedDraftLength):
    def __init__(self):
        self.asked = []

    def choose(self, proposal, limit):
        self.asked.append((limit, proposal.match_length))
        return Choice(2)


def test_policy_sees_the_proposal_and_its_match_then_trims_it():
    target = Target(make_tiny_llama(seed=1))
    history = list(range(3, 30))
    target.prefill(history[:-1])
    drafter, policy = Copier(DraftSettings()), TwoTokens()
    results = list(
        speculative_decode(
            target,
            drafter,
            TokenChooser(SamplingSettings()),
            history,
            max_tokens=12,
            draft_count=5,
            eos_tokens=set(),
            policy=policy,
        )
    )
    assert policy.asked[0] == (5, 9)  # the whole proposal and how long its match is
    produced, expected = 0, []
    for result in results:  # two tokens, unless fewer remain to produce
        expected.append(min(2, 12 - produced - 1))
        produced += len(result.tokens)
    assert [r.drafted for r in results] == expected
    assert drafter.drafted == expected  # the drafter learns what was sent


def test_adaptive_is_on_by_default():
    assert DraftSettings().adaptive is True


def test_a_prior_curve_takes_its_seconds_from_the_first_pass_and_keeps_its_shape():
    curve = verify_cost.prior_cost_curve()
    assert not curve.measured
    curve.observe(1, 0.02)  # this machine: 20 ms for one token
    assert curve(1) == pytest.approx(0.02)
    assert curve(4) / curve(1) == pytest.approx(verify_cost.PRIOR_RATIOS[4])
    curve.observe(4, 0.02)  # here four tokens cost what one does (a GPU): learned per length
    for _ in range(30):
        curve.observe(4, 0.02)
        curve.observe(1, 0.02)
    assert curve(4) / curve(1) < 1.2


def test_memories_of_two_owners_are_apart():
    first, second = adaptive.AdaptiveMemory(), adaptive.AdaptiveMemory()
    drafter = make_drafter(DraftSettings(drafter="prompt-lookup"))
    policy = first.policy("model", drafter)
    passed(policy, choose(policy, 4), 4, 4, 0.1)
    assert first.trackers and not second.trackers
    assert first.curve("model") is not second.curve("model")


def test_probes_cost_at_most_a_share_of_the_idle_passes():
    """Where a 2-token pass costs 1.7 one-token passes, a probe every 16 idle passes would
    cost 4% of them: it waits until its extra cost is 1% (70 passes); on a flat curve, 16."""
    flat = CostCurve({1: 0.010, 2: 0.0102, 8: 0.011})
    steep = CostCurve({1: 0.010, 2: 0.017, 8: 0.020})
    for curve, interval in ((flat, 16), (steep, 70)):
        policy = AdaptivePolicy(curve, priors={1: (0.0, 50.0)})  # matches that never pay
        sent = []
        for _ in range(interval + 1):
            choice = choose(policy, 4, match_length=1)
            passed(policy, choice, choice.length, 0, curve(1 + choice.length))
            sent.append(choice.length)
        assert sent == [0] * interval + [1]


def test_grammar_forced_tokens_go_out_as_far_as_the_curve_pays():
    policy = AdaptivePolicy(CostCurve({1: 0.010, 2: 0.0102, 16: 0.011}))
    assert policy.forced_length(5) == 5  # nearly free: all of them
    policy = AdaptivePolicy(CostCurve({1: 0.010, 2: 0.025, 8: 0.090}))
    assert policy.forced_length(5) == 0  # each token costs more than a pass of its own


def test_constrained_answers_learn_acceptance_apart_from_free_text():
    """Short matches that failed in prose do not hold back a schema's short copies: the two
    kinds of answer keep their own counts, and each new answer of a kind shares its kind's."""
    memory = adaptive.AdaptiveMemory()
    drafter = make_drafter(DraftSettings(drafter="suffix"))
    curve = CostCurve({1: 0.010, 2: 0.016, 16: 0.017})  # a draft costs 1.6 passes, then flat
    prose = memory.policy("model", drafter, curve=curve)
    for _ in range(60):
        passed(prose, choose(prose, 16, match_length=4), 8, 0, 0.016)
    assert length(memory.policy("model", drafter, curve=curve), 16, match_length=4) == 0
    schema = memory.policy("model", drafter, curve=curve, constrained=True)
    assert length(schema, 16, match_length=4) > 0  # the class prior: such copies pay
    for _ in range(60):
        passed(schema, choose(schema, 16, match_length=4), 8, 0, 0.016)
    again = memory.policy("model", drafter, curve=curve, constrained=True)
    assert length(again, 16, match_length=4) == 0


def test_a_session_plans_an_answer_under_a_schema_with_the_constrained_counts(tiny_loaded):
    from engine.runtime.memory import EngineMemory
    from engine.runtime.session import ChatSession
    from engine.settings import GenerationRequest

    memory = EngineMemory()
    session = ChatSession(tiny_loaded, memory)
    draft = DraftSettings(drafter="suffix", cost_curve=verify_cost.curve_from_spec("flat-2pct"))
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    for json_schema in (None, schema):
        request = GenerationRequest(
            prompt='{"a": "abab"} {"a": "abab"}',
            raw=True,
            max_tokens=8,
            draft=draft,
            json_schema=json_schema,
        ).validated()
        list(session.generate(request))
    assert sorted(key[2] for key in memory.adaptive.trackers) == [False, True]
