"""Blind passes: after a pass that sends no draft, the next one-token pass is queued before
that pass's token is read (plain decoding's pipelining), so it sends no draft whatever the
drafter then proposes; it is still planned, and the policy learns what it would have sent.

The output stays plain decoding's (greedy: token for token; sampled: the target's own
samples), the cache holds the history but its last token whenever the caller has a result
or stops, the tuning replay makes the same passes as the loop, and the schedule goes
blind, on a curve with a measured pipelined pace, only while queuing blind has gained,
summed over the passes after one that sent nothing (each blind pass's token says what its
unsent draft would have kept).
"""

import mlx.core as mx
import pytest

from engine.bench.tune import simulate
from engine.drafters import make_drafter
from engine.loop.decode import Target, TokenChooser, speculative_decode
from engine.policy.adaptive import AdaptiveMemory, AdaptivePolicy
from engine.policy.draft_policy import (
    NO_DRAFT,
    Choice,
    FixedDraftLength,
    MatchClass,
    PassOutcome,
    UnsentDraft,
)
from engine.policy.passes import DraftPlan
from engine.policy.schedule import PassSchedule
from engine.policy.verify_cost import CostCurve, pace_steps
from engine.settings import DraftSettings, SamplingSettings

from .identity import answer_on_curve_file, reference_greedy, run_with_policy
from .scripted_model import ScriptedModel
from .tiny_model import make_tiny_llama

pytestmark = pytest.mark.usefixtures("private_dirs")  # conftest: a data and cache folder per test

PROMPT = [40 + (i % 9) for i in range(60)] + [7, 8, 9]
FLAT = {1: 0.01, 65: 0.012}


class Scripted(FixedDraftLength):
    """Drafts (the whole proposal) when asked for the ``every``-th time and the time after,
    and so on, else nothing: a blind pass that would have drafted is followed by a planned
    pass that does. Keeps every outcome it is handed."""

    def __init__(self, every: int):
        self.every, self.asked, self.outcomes = every, 0, []

    def choose(self, proposal, limit):
        self.asked += 1
        drafts = self.asked > 1 and self.asked % self.every in (0, 1)
        return super().choose(proposal, limit) if drafts else NO_DRAFT

    def record(self, choice, outcome):
        self.outcomes.append((choice, outcome))


class AlwaysBlind(PassSchedule):
    """Queues the next pass blind after every pass planned to send nothing."""

    def queues_next_blind(self, plan, drafter):
        return self.pipelines and plan.may_queue_next(drafter)


def run_blind(model, prompt, max_tokens, settings, policy, *args, **kwargs):
    return run_with_policy(
        model, prompt, max_tokens, settings, policy, *args, schedule=AlwaysBlind(), **kwargs
    )


@pytest.fixture(scope="module")
def model():
    return make_tiny_llama(seed=1)


def test_greedy_output_equals_plain_with_blind_passes_and_drafts_between(model):
    settings = DraftSettings(drafter="prompt-lookup", draft_count=6, ngram_order=2)
    policy = Scripted(every=4)
    tokens, results = run_blind(model, PROMPT, 60, settings, policy)
    assert tokens == reference_greedy(model, PROMPT, 60)
    blind = [outcome for _, outcome in policy.outcomes if outcome.blind]
    assert len(blind) > 5, "blind passes must have run"
    assert all(o.verified == 0 and o.depth == 0 for o in blind)  # nothing went out blind
    assert sum(r.accepted for r in results) > 0, "and drafts between them were kept"
    assert len(policy.outcomes) == len(results)  # every pass, blind or not, is learned from


def test_a_pass_that_would_draft_after_a_blind_one_is_recorded_as_its_choice(model):
    """The policy sees what the blind pass would have sent (its choice) with nothing sent."""
    settings = DraftSettings(drafter="prompt-lookup", draft_count=6, ngram_order=2)
    policy = Scripted(every=4)
    run_blind(model, PROMPT, 40, settings, policy)
    wanted = [c for c, o in policy.outcomes if o.blind and c.length > 0]
    assert wanted, "a blind pass whose plan wanted a draft"


@pytest.mark.parametrize("stop_after", [1, 2, 7, 20])
def test_stopping_mid_run_leaves_the_cache_ready_to_go_on(model, stop_after):
    settings = DraftSettings(drafter="prompt-lookup", draft_count=6, ngram_order=2)
    target, history = Target(model), list(PROMPT)
    target.prefill(history[:-1])
    drafter = make_drafter(settings)
    drafter.reset(history)
    chooser = TokenChooser(SamplingSettings())
    decoder = speculative_decode(
        target,
        drafter,
        chooser,
        history,
        max_tokens=40,
        draft_count=6,
        eos_tokens=set(),
        policy=Scripted(every=4),
        schedule=AlwaysBlind(),
    )
    for passes, _ in enumerate(decoder, start=1):
        assert target.offset in (len(history) - 1, len(history))  # one ahead: a pass queued
        if passes == stop_after:
            break
    decoder.close()
    assert target.offset == len(history) - 1
    rest = list(
        speculative_decode(
            target, drafter, chooser, history, max_tokens=60, draft_count=6, eos_tokens=set()
        )
    )
    made = len(history) - len(PROMPT)
    assert rest and history[len(PROMPT) :] == reference_greedy(model, PROMPT, made)


def test_sampled_blind_passes_are_the_targets_own_samples(model):
    """A policy that never drafts and always queues blind makes the passes of plain,
    pipelined decoding: the same sampled tokens as ``--drafter none``."""
    sampling = SamplingSettings(temperature=0.9, seed=5)
    settings = DraftSettings(drafter="prompt-lookup", draft_count=6, ngram_order=2)
    mx.random.seed(5)
    blind, _ = run_blind(model, PROMPT, 40, settings, Scripted(every=10**9), sampling)
    mx.random.seed(5)
    none, _ = run_with_policy(model, PROMPT, 40, DraftSettings(drafter="none"), None, sampling)
    assert blind == none
    assert len(set(blind)) > 3  # really sampled


def test_an_end_of_sequence_token_in_a_blind_run_ends_the_answer():
    script = PROMPT + [100 + i for i in range(12)] + [99] + [0] * 20
    model = ScriptedModel(script)
    settings = DraftSettings(drafter="prompt-lookup", draft_count=6, ngram_order=2)
    policy = Scripted(every=10**9)
    tokens, results = run_blind(model, PROMPT, 30, settings, policy, eos=[99])
    assert tokens == [100 + i for i in range(12)] + [99]
    assert sum(o.blind for _, o in policy.outcomes) == 12  # all but the run's first pass


def scripted_answer():
    """A prompt that repeats itself, and an answer that first says something new (no draft
    to send: passes that send nothing follow each other) and then copies the prompt."""
    prompt = [5, 17, 33, 8, 41, 12, 29, 3, 60, 22, 50, 14] * 3
    answer = [100 + i for i in range(30)] + prompt[:24] + [130 + i for i in range(20)]
    return prompt, answer


def adaptive(drafter, pipelined):
    """An adaptive policy and its schedule on a flat curve with this pipelined share."""
    memory, curve = AdaptiveMemory(), CostCurve(FLAT, fixed=True, pipelined=pipelined)
    return memory.policy("k", drafter, curve=curve), memory.schedule("k", drafter, curve)


def test_the_tuning_replay_makes_the_loops_passes_blind_ones_included():
    prompt, answer = scripted_answer()
    settings = DraftSettings(drafter="prompt-lookup", draft_count=8, ngram_order=3, adaptive=True)
    policy, schedule = adaptive(make_drafter(settings), pipelined=0.5)
    blind = []
    record = policy.record
    policy.record = lambda choice, outcome: blind.append(outcome.blind) or record(choice, outcome)
    tokens, results = run_with_policy(
        ScriptedModel(prompt + answer + [0] * 9),
        prompt,
        len(answer),
        settings,
        policy,
        schedule=schedule,
    )
    assert tokens == answer
    assert sum(blind) > 10 and sum(r.accepted for r in results) > 10

    chat = [{"prompt": prompt, "answer": answer, "stop": False}]
    replayed = simulate(
        chat,
        "prompt-lookup",
        8,
        True,
        AdaptiveMemory(),
        "k",
        FLAT,
        0,
        settings.options,
        pipelined=0.5,
    )
    assert [n for n, _ in replayed["sizes"]] == [r.drafted + 1 for r in results]
    # a blind pass costs the pipelined share of c(1), and so does each token of plain decoding
    assert replayed["plain_s"] == pytest.approx(len(answer) * 0.5 * FLAT[1])
    waited = sum(1 for r in results if r.drafted == 0) - sum(blind)
    drafted = [r.drafted + 1 for r in results if r.drafted]
    curve = CostCurve(FLAT)
    spent = sum(blind) * 0.5 * FLAT[1] + waited * FLAT[1] + sum(map(curve.base, drafted))
    assert replayed["spec_s"] == pytest.approx(spent)


def test_the_replay_charges_a_blind_runs_host_work_only_beyond_its_passes(monkeypatch):
    """The loop learns from a pass and plans the blind one after it while that one runs on
    the device, so in the replay a run of blind passes adds no host time where each host
    step is shorter than a pass; without a measured pace every step is charged."""
    clock = iter(range(10**6))
    monkeypatch.setattr("engine.bench.tune.time.perf_counter", lambda: next(clock) * 1e-3)
    slow = {1: 1.0, 2: 1.7, 65: 2.0}  # a pass far longer than a host step (1 ms)

    def charged(tokens: int, pipelined: float | None) -> float:
        prompt, answer = list(range(100, 160)), list(range(200, 200 + tokens))  # no repeats
        chat = [{"prompt": prompt, "answer": answer, "stop": False}]
        args = ("suffix", 8, True, AdaptiveMemory(), "k", slow, 0)
        return simulate(chat, *args, pipelined=pipelined)["drafter_s"]

    assert charged(200, 0.5) == pytest.approx(charged(20, 0.5), abs=0.02)  # blind after 2
    assert charged(200, None) > charged(20, None) + 0.3  # each pass's steps, charged


def test_without_a_measured_pipelined_pace_nothing_goes_blind():
    prompt, answer = scripted_answer()
    settings = DraftSettings(drafter="prompt-lookup", draft_count=8, ngram_order=3, adaptive=True)
    policy, schedule = adaptive(make_drafter(settings), pipelined=None)
    blind = []
    record = policy.record
    policy.record = lambda choice, outcome: blind.append(outcome.blind) or record(choice, outcome)
    model = ScriptedModel(prompt + answer + [0] * 9)
    run_with_policy(model, prompt, len(answer), settings, policy, schedule=schedule)
    assert blind and not any(blind)


def idle(schedule: PassSchedule, passes: int) -> None:
    for _ in range(passes):
        schedule.learn(NO_DRAFT, PassOutcome(0, 0, 0.01, 0))


SUFFIX = make_drafter(DraftSettings(drafter="suffix"))


def blind_next(schedule: PassSchedule) -> bool:
    """Whether the pass after one planned to send nothing goes out blind."""
    return schedule.queues_next_blind(DraftPlan([]), SUFFIX)


STEEP = {1: 0.010, 2: 0.017, 3: 0.018, 4: 0.019}


def test_the_schedule_goes_blind_while_queuing_blind_has_gained():
    """Summed over the passes after one that sent nothing, in c(1)s: 1 - pipelined where
    nothing would go out; c(n) - pipelined x c(1) for a pass of n tokens whose draft's first
    token was wrong, and that less c(L) where it was right (its row of L tokens goes on in
    the next pass). Blind while the sum is above 0."""
    schedule = PassSchedule(CostCurve(STEEP, fixed=True, pipelined=0.85))
    idle(schedule, 1)
    assert not blind_next(schedule)  # the first pass follows none: nothing summed yet
    idle(schedule, 1)
    assert schedule.blind_gain.total == pytest.approx(0.15) and blind_next(schedule)
    kept = UnsentDraft(2, tree=False, kept=True, first_kept=True)  # 2 tokens, the first right
    schedule.learn(Choice(2), PassOutcome(0, 0, 0.0085, 0, blind=True, unsent=kept))
    assert schedule.blind_gain.total == pytest.approx(0.15 + 1.8 - 0.85 - 1.7)  # c(3), c(2)
    assert not blind_next(schedule)
    idle(schedule, 3)
    assert not blind_next(schedule)  # -0.15
    idle(schedule, 2)
    assert blind_next(schedule)  # 0.15
    schedule.learn(Choice(3), PassOutcome(3, 0, 0.019, 3))  # sent after one that sent nothing
    assert schedule.blind_gain.total == pytest.approx(0.15 + 1.9 - 0.85)  # none kept: c(4)
    assert schedule.blind_gain.passes == 8  # every pass but the first

    this_cpu = PassSchedule(CostCurve(STEEP, fixed=True, pipelined=0.995))
    idle(this_cpu, 2)
    assert blind_next(this_cpu)  # 0.005 of c(1) saved
    this_cpu.learn(Choice(1), PassOutcome(0, 0, 0.01, 0, blind=True, unsent=kept))
    assert not blind_next(this_cpu)  # a kept token's draft lost 0.995 + c(1) - c(2)
    unmeasured = PassSchedule(CostCurve(STEEP, fixed=True))
    idle(unmeasured, 30)
    assert not blind_next(unmeasured) and unmeasured.blind_gain.passes == 0
    assert not blind_next(
        PassSchedule(CostCurve(STEEP, fixed=True, pipelined=0.85)).for_loop(False)
    )


def test_a_blind_pass_says_what_its_unsent_draft_would_have_kept():
    plan = DraftPlan([[5, 6, 7], [8, 9, 1]], choice=Choice(3, 2)).went_blind()
    assert plan.rows == [] and plan.blind and plan.unsent == [[5, 6, 7], [8, 9, 1]]
    second_row = plan.outcome(0, 0, 0.01, 0, emitted=[8])
    assert second_row.blind and second_row.unsent == UnsentDraft(6, True, True, False)
    assert plan.outcome(0, 0, 0.01, 0, emitted=[4]).unsent == UnsentDraft(6, True, False, False)
    one = DraftPlan([[5, 6]], choice=Choice(2)).went_blind().outcome(0, 0, 0.01, 0, emitted=[5])
    assert one.unsent == UnsentDraft(2, False, True, True)
    assert DraftPlan([]).went_blind().outcome(0, 0, 0.01, 0, emitted=[5]).unsent is None


@pytest.mark.parametrize("first_kept", [True, False])
def test_a_blind_pass_token_teaches_its_class_the_first_token(first_kept):
    policy = AdaptivePolicy(CostCurve(STEEP, fixed=True, pipelined=0.85))
    before = policy.tracker(MatchClass.MEDIUM).probabilities(1)[0]
    unsent = UnsentDraft(2, tree=False, kept=first_kept, first_kept=first_kept)
    choice = Choice(2, kind=MatchClass.MEDIUM)
    policy.record(choice, PassOutcome(0, 0, 0.0085, 0, blind=True, unsent=unsent))
    after = policy.tracker(MatchClass.MEDIUM).probabilities(1)[0]
    assert (after > before) if first_kept else (after < before)


def test_a_blind_pass_time_is_not_taken_for_c1():
    schedule = PassSchedule(CostCurve(FLAT, pipelined=0.5))
    schedule.learn(NO_DRAFT, PassOutcome(0, 0, 0.001, 0, blind=True))
    assert schedule.curve(1) == pytest.approx(FLAT[1])
    schedule.learn(NO_DRAFT, PassOutcome(0, 0, 0.001, 0))
    assert schedule.curve(1) < FLAT[1]


def test_the_pipelined_pace_is_measured_as_a_share_of_c1(model):
    target = Target(model)
    target.prefill(list(range(10, 60)))
    offset = target.offset
    steps = pace_steps(target, tokens=4, rounds=1)
    count = 0
    while True:
        try:
            next(steps)
            count += 1
        except StopIteration as done:
            share = done.value
            break
    assert count == 4  # an untimed run of each way, then one of each
    assert 0 < share < 2
    assert target.offset == offset  # every run undone
    target.pipelines = False
    assert list(pace_steps(target)) == []


class GivesUpLater(AlwaysBlind):
    """Gives up once asked ``after`` times whether to."""

    def __init__(self, after: int):
        super().__init__()
        self.after, self.asked_give_up = after, 0

    def gives_up(self, limit):
        self.asked_give_up += 1
        return self.asked_give_up > self.after


def test_a_schedule_that_gives_up_in_a_blind_run_gets_plain_decoding_for_the_rest(model):
    settings = DraftSettings(drafter="prompt-lookup", draft_count=6, ngram_order=2)
    policy, schedule = Scripted(every=10**9), GivesUpLater(after=5)
    tokens, results = run_with_policy(model, PROMPT, 40, settings, policy, schedule=schedule)
    assert tokens == reference_greedy(model, PROMPT, 40)
    assert len(results) == 40  # one token a pass throughout
    # the loop's first pass and then each blind one after a "no" to giving up; none after
    # the "yes"
    assert len(policy.outcomes) == schedule.after
    assert schedule.asked_give_up == schedule.after + 1  # not asked again once it gave up


def test_an_answer_with_blind_passes_is_estimated_at_the_pipelined_pace(tiny_loaded, tmp_path):
    """Through a chat session on a curve file with a pipelined share: queued passes are
    counted (``queued_passes``, stored with the answer) and the estimate prices plain
    decoding and queued passes at the share. Sampled, so that few drafts match and passes
    that send nothing follow each other (the tiny model's greedy answer loops)."""
    from engine.stats import DecodeStats

    done, named = answer_on_curve_file(
        tiny_loaded,
        tmp_path,
        {"seconds": {"1": 0.01, "64": 0.012}, "pipelined_share": 0.5},
        "The cat sat on the mat. The dog sat on the log. The cat",
        60,
        drafter="prompt-lookup",
        sampling=SamplingSettings(temperature=1.0, seed=3),
    )
    stats, curve = done.stats, named.curve()
    assert stats["queued_passes"] > 5, "no pass went out blind: the test would prove nothing"
    assert DecodeStats.from_dict(stats).queued_passes == stats["queued_passes"]
    plain = (stats["emitted"] + int(stats["ended"])) * 0.5 * curve(1)
    spent = sum(curve(n) for n in stats["pass_sizes"]) + done.timing["drafter_s"]
    spent -= stats["queued_passes"] * 0.5 * curve(1)
    assert stats["estimated_speedup"] == pytest.approx(plain / spent, rel=2e-3)


@pytest.mark.embedded
def test_greedy_identity_with_blind_passes_on_the_embedded_model(embedded_loaded):
    """The real model, the default drafter and the adaptive policy on the H200 curve (which
    states a pipelined share): passes go out blind between drafts, and the answer is plain
    greedy decoding's."""
    from engine.policy.verify_cost import named_curves

    settings = DraftSettings(drafter="suffix", adaptive=True)
    curve = named_curves()["h200-135m-f16"].curve()
    blind, accepted = [], 0
    for text in (
        "Repeat the following line three times, exactly: red green blue yellow purple",
        "Write a short poem about a lighthouse keeper who discovers a new color.",
    ):
        messages = [{"role": "user", "content": text}]
        prompt = list(
            embedded_loaded.tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        )
        memory, drafter = AdaptiveMemory(), make_drafter(settings)
        policy = memory.policy("k", drafter, curve=curve)
        record = policy.record
        policy.record = lambda c, o, record=record: blind.append(o.blind) or record(c, o)
        schedule = memory.schedule("k", drafter, curve)
        got, results = run_with_policy(
            embedded_loaded.model, prompt, 80, settings, policy, schedule=schedule
        )
        assert got == reference_greedy(embedded_loaded.model, prompt, 80)
        accepted += sum(r.accepted for r in results)
    assert sum(blind) > 10 and accepted > 0, "blind passes and kept drafts, both"


def test_what_follows_a_pass_that_sent_nothing_is_kept_across_answers():
    """An answer starts from the share the answers before it saw (per model, drafter and
    constrained or not, as the acceptance counts); forgetting acceptance forgets it too."""
    memory = AdaptiveMemory()
    drafter = make_drafter(DraftSettings(drafter="suffix"))
    curve = CostCurve(FLAT, fixed=True, pipelined=0.85)
    first = memory.schedule("k", drafter, curve)
    idle(first, 8)
    assert blind_next(first)
    second = memory.schedule("k", drafter, curve)
    assert blind_next(second)  # no warm-up in the next answer
    assert not blind_next(memory.schedule("k", drafter, curve, constrained=True))
    assert not blind_next(memory.schedule("other", drafter, curve))
    memory.forget_acceptance()
    assert not blind_next(memory.schedule("k", drafter, curve))


@pytest.mark.parametrize("blind", [False, True], ids=["plain", "blind"])
def test_every_queued_pass_is_timed_the_first_included(model, monkeypatch, blind):
    """On MLX's CPU backend most of a pass runs inside ``mx.async_eval`` itself. A clock that
    moves only there (one unit a pass) shows whether the passes' seconds, which the answer's
    decode time and tokens per second are summed from, hold every pass: a run of queued
    passes whose clock started after queuing its first pass would lose one pass a run."""
    clock = [0.0]
    real_async_eval = mx.async_eval

    def async_eval(*arrays):
        real_async_eval(*arrays)
        clock[0] += 1.0

    monkeypatch.setattr("engine.loop.decode.time.perf_counter", lambda: clock[0])
    monkeypatch.setattr(mx, "async_eval", async_eval)
    learned = []

    class Recording(AlwaysBlind):
        def learn(self, choice, outcome):
            learned.append(outcome.seconds)
            super().learn(choice, outcome)

    settings = DraftSettings(drafter="suffix" if blind else "none", draft_count=4)
    policy, schedule = (Scripted(every=5), Recording()) if blind else (None, None)
    _, results = run_with_policy(model, PROMPT, 16, settings, policy, schedule=schedule)
    runs = sum(r.queued and not before.queued for before, r in zip(results, results[1:]))
    assert runs >= (2 if blind else 0) and any(r.queued for r in results), "nothing queued"
    assert sum(r.seconds for r in results) == pytest.approx(clock[0])
    # what the schedule learns a pass took holds no other pass's queuing: each step of a run
    # already holds the pass it queues (here, one unit)
    assert bool(learned) == blind and max(learned, default=0.0) <= 1.0
