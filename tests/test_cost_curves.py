"""Verify-cost curves as data: shipped device curves by name, a JSON file of n -> seconds,
estimates that name their curve, and the peers' drafting rules replayed faithfully."""

import json
import random
from types import SimpleNamespace

import pytest

from engine.bench.peer_drafters import HFPromptLookupPeer, VllmNgramPeer
from engine.errors import EngineError
from engine.policy import verify_cost
from engine.policy.verify_cost import (
    CostCurve,
    curve_from_spec,
    named_curves,
    prior_cost_curve,
    timing_steps,
)
from engine.runtime.session import ChatSession
from engine.settings import DraftSettings, GenerationRequest
from engine.stats import summary_line

from .identity import answer_on_curve_file
from .policy_steps import length

pytestmark = pytest.mark.usefixtures("private_dirs")


def test_every_shipped_curve_loads_and_states_its_source():
    curves = named_curves()
    assert {
        "cpu-epyc-2core-135m-f32-rowgemv",
        "h100-135m-f32",
        "h100-7b-bf16",
        "h100-7b-4bit",
        "h200-135m-f16",
        "apple-m2pro-135m-f32-estimate",
        "apple-m2pro-7b-4bit-estimate",
        "apple-m4pro-8b-4bit-estimate",
        "apple-m5max-70b-4bit",
        "flat-2pct",
    } <= set(curves)
    for curve in curves.values():
        assert 1 in curve.seconds and curve.source
        # every strategy is priced alike on it: plain decoding's queued pace is stated
        assert curve.pipelined_share is not None, curve.name
        assert "ipelined" in curve.source, curve.name  # and says where it comes from
    assert "Estimate, not a measurement" in curves["apple-m2pro-135m-f32-estimate"].source
    assert "not by this project" in curves["apple-m5max-70b-4bit"].source
    # MLX on a Mac runs a pass of several tokens through other kernels than a one-token pass:
    # the Apple curves are steep at 2 tokens (f32) or from 4 (4-bit), as measured publicly
    apple = {name: curve.seconds for name, curve in curves.items() if name.startswith("apple-")}
    assert all(seconds[16] > 1.9 * seconds[1] for seconds in apple.values())
    # measured with cuDNN's attention off, as the engine runs: a tree pass costs what a chain
    # of its nodes does on the H100 and H200 (and on this CPU)
    gpus = [c for name, c in curves.items() if name.startswith(("h100-", "h200-"))]
    assert len(gpus) == 7 and all(c.tree_extra_s == 0.0 for c in gpus)
    assert all("cuDNN's attention off" in c.source for c in gpus)
    assert curves["cpu-epyc-2core-135m-f32"].tree_extra_s == 0.0
    assert all("tree_extra_s" in c.source for c in curves.values())


def test_the_m4_pro_8b_estimate_verifies_a_few_tokens_on_qmv_wide_at_the_cited_speed():
    """What most Mac users run: an M3/M4-class GPU verifies 2-9 tokens with MLX's small-batch
    kernel (an M2 does not), then pays for one 32-row tile from 10 or 12 rows to 32."""
    m4 = curve_from_spec("apple-m4pro-8b-4bit-estimate")  # --cost-curve finds it by name
    seconds, lengths = m4.seconds, sorted(m4.seconds)
    assert "Estimate, not a measurement" in m4.source
    assert "46 tokens/s" in m4.source and 1 / seconds[1] == pytest.approx(46, rel=0.02)
    assert all(seconds[a] <= seconds[b] for a, b in zip(lengths, lengths[1:]))
    m2 = named_curves()["apple-m2pro-7b-4bit-estimate"].seconds
    assert seconds[8] / seconds[1] < 0.6 * m2[8] / m2[1]  # 2.3x against the M2 Pro's 4.3x
    assert seconds[10] > 1.4 * seconds[9]  # the MLP's products leave qmv_wide at 10 rows
    assert seconds[12] == seconds[16] == seconds[32] and seconds[33] > 1.9 * seconds[32]


def test_a_curve_file_maps_n_to_seconds(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"1": 0.0084, "2": 0.0130, "4": 0.0141}))
    curve = curve_from_spec(str(path))
    assert curve.seconds == {1: 0.0084, 2: 0.0130, 4: 0.0141} and curve.name == "mine.json"
    report = tmp_path / "report.json"  # a report's verify_cost object works too
    report.write_text(json.dumps({"seconds": {"median_s": {"1": 0.02, "3": 0.03}}}))
    assert curve_from_spec(str(report)).seconds == {1: 0.02, 3: 0.03}
    treed = tmp_path / "treed.json"
    treed.write_text(json.dumps({"seconds": {"1": 0.01, "8": 0.01}, "tree_extra_s": 0.001}))
    assert curve_from_spec(str(treed)).curve().tree_cost(5) == pytest.approx(0.011)
    assert curve_from_spec(str(treed)).curve().pipelined is None  # not said: not measured
    piped = tmp_path / "piped.json"  # what a queued one-token pass costs, a share of c(1)
    piped.write_text(json.dumps({"seconds": {"1": 0.01, "8": 0.01}, "pipelined_share": 0.85}))
    assert curve_from_spec(str(piped)).curve().pipelined == 0.85
    assert curve_from_spec(str(piped)).jittered(1, 0.03).pipelined_share == 0.85


def test_a_noisy_copy_of_a_named_curve_is_another_run_of_its_measurement():
    named = curve_from_spec("h100-1b-bf16")
    copy = curve_from_spec("h100-1b-bf16~3")
    assert copy.name == "h100-1b-bf16~3" and "noisy copy" in copy.source
    assert copy.seconds.keys() == named.seconds.keys() and copy.seconds != named.seconds
    assert all(0.8 < copy.seconds[n] / s < 1.2 for n, s in named.seconds.items())
    assert curve_from_spec("h100-1b-bf16~3").seconds == copy.seconds  # one seed, one copy
    assert curve_from_spec("h100-1b-bf16~4").seconds != copy.seconds
    for bad in ("h100-1b-bf16~x", "h100-1b-bf16~²", "h100-1b-bf16~" + "9" * 5000, "nope~3"):
        with pytest.raises(EngineError, match="NAME~SEED"):
            curve_from_spec(bad)


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"1": 0.01, "2": "x"}', "not a positive number of seconds"),
        ('{"2": 0.01}', "no timing for a one-token pass"),
        ("[1, 2]", "no timings"),
        ("{not json", "cannot be used"),
        ('{"seconds": {"1": 0.01}, "tree_extra_s": -1}', "tree_extra_s"),
        ('{"seconds": {"1": 0.01}, "tree_extra_s": "1"}', "tree_extra_s"),
        ('{"seconds": {"1": 0.01}, "pipelined_share": 0}', "pipelined_share"),
        ('{"seconds": {"1": 0.01}, "pipelined_share": true}', "pipelined_share"),
        ('{"seconds": {"1": 0.01}, "pipelined_share": 1e999}', "pipelined_share"),
    ],
)
def test_a_bad_curve_file_is_a_clear_error(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(EngineError, match=message):
        curve_from_spec(str(path))


def test_an_unknown_name_lists_the_shipped_curves():
    with pytest.raises(EngineError, match="h100-7b-bf16"):
        curve_from_spec("no-such-curve")


def test_a_named_curve_plans_and_its_estimate_can_be_checked_from_pass_sizes(tiny_loaded):
    named = curve_from_spec("h100-7b-bf16")
    request = GenerationRequest(
        prompt="abcabcabcabcabcabc",
        raw=True,
        max_tokens=24,
        draft=DraftSettings(drafter="prompt-lookup", cost_curve=named),
    ).validated()
    done = list(ChatSession(tiny_loaded).generate(request))[-1]
    stats, curve = done.stats, named.curve()
    assert stats["estimate_curve"] == "h100-7b-bf16 curve"
    assert len(stats["pass_sizes"]) == stats["passes"] and all(n >= 1 for n in stats["pass_sizes"])
    share = curve.pipelined  # plain decoding and queued passes: its pipelined pace
    plain = (stats["emitted"] + int(stats["ended"])) * share * curve(1)
    spent = sum(curve(n) for n in stats["pass_sizes"]) + done.timing["drafter_s"]
    spent -= stats["queued_passes"] * (1 - share) * curve(1)
    assert stats["estimated_speedup"] == pytest.approx(plain / spent, rel=2e-3)
    assert "on the h100-7b-bf16 curve" in summary_line(stats, done.timing)
    before = dict(zip(curve.lengths, curve.seconds))
    curve.observe(3, 10.0)  # another device's seconds are not rescaled by this machine's passes
    assert dict(zip(curve.lengths, curve.seconds)) == before and curve(3) == named.curve()(3)


def test_an_estimate_on_a_curve_never_measured_says_it_is_a_guess(tiny_loaded):
    request = GenerationRequest(
        prompt="abcabcabcabcabcabc",
        raw=True,
        max_tokens=12,
        draft=DraftSettings(drafter="prompt-lookup"),
    ).validated()
    done = list(ChatSession(tiny_loaded).generate(request))[-1]
    assert done.stats["estimate_curve"].startswith("a guess")
    assert "a guess: not measured for this model yet" in summary_line(done.stats, done.timing)


def test_a_fixed_draft_count_answer_is_estimated_on_the_models_measured_curve(tiny_loaded):
    """ "Use settings" answers with a fixed draft count: its answers still say how much faster
    they were than plain, on the curve measured for the model here."""
    from engine.runtime.memory import EngineMemory

    memory = EngineMemory()
    session = ChatSession(tiny_loaded, memory)
    measured = {1: 0.010, 2: 0.011, 4: 0.012, 8: 0.014}
    memory.adaptive.curves[session.model_key] = curve = CostCurve(measured)
    request = GenerationRequest(
        prompt="abcabcabcabcabcabc",
        raw=True,
        max_tokens=24,
        draft=DraftSettings(drafter="prompt-lookup", draft_count=4, adaptive=False),
    ).validated()
    done = list(session.generate(request))[-1]
    stats = done.stats
    assert stats["estimate_curve"] == "measured" and stats["estimated_speedup"]
    plain = (stats["emitted"] + int(stats["ended"])) * curve(1)
    spent = sum(curve(n) for n in stats["pass_sizes"]) + done.timing["drafter_s"]
    assert stats["estimated_speedup"] == pytest.approx(plain / spent, rel=2e-3)


# ------------------------------------------------ the peers' rules, against their algorithms
def hf_reference(tokens, k=10):
    """transformers' PromptLookupCandidateGenerator: n = 2 then 1, first match, no overlap."""
    for n in (2, 1):
        if len(tokens) < n:
            continue
        for index in range(len(tokens) - n + 1):
            if tokens[index : index + n] == tokens[-n:]:
                start, end = index + n, min(index + n + k, len(tokens))
                if start < end:
                    return tokens[start:end]
    return []


def vllm_reference(tokens, k=5, low=1, high=4):
    """vLLM's reversed-KMP search: the longest suffix match, its earliest occurrence."""
    reverse, total = tokens[::-1], len(tokens)
    lps, longest, position, previous, i = [0] * high, 0, 0, 0, 1
    while i < total:
        if reverse[previous] == reverse[i]:
            previous += 1
            if previous >= longest:
                longest, position = previous, i
            if i < high:
                lps[i] = previous
            if previous == high:
                previous = lps[high - 1]
            i += 1
        elif previous:
            previous = lps[previous - 1]
        else:
            i += 1
    if longest < low:
        return []
    start = total - 1 - position + longest
    return tokens[start : start + min(k, total - start)]


@pytest.mark.parametrize(
    "peer, reference", [(HFPromptLookupPeer, hf_reference), (VllmNgramPeer, vllm_reference)]
)
def test_peer_replays_draft_what_the_peers_algorithm_drafts(peer, reference):
    rng = random.Random(0)
    for _ in range(300):
        tokens = [rng.randrange(6) for _ in range(rng.randrange(1, 60))]
        drafter = peer()
        drafter.reset(tokens[:1])
        drafter.observe(tokens[1:])
        got = drafter.propose(100).rows
        assert (got[0] if got else []) == reference(tokens), tokens


# ------------------------------------------------ a model whose curve was never measured
def test_a_guess_takes_its_slope_from_the_prompt_and_its_speed_from_the_least_one_token_pass():
    from engine.policy.verify_cost import OUTPUT_ALLOWANCE, prior_cost_curve

    curve = prior_cost_curve()
    curve.observe_span(100, 9.0)  # reading 100 prompt tokens took 90 ms a token
    curve.observe(1, 0.30)  # the first pass: a burst of load
    curve.observe(1, 0.12)  # a quiet one
    curve.observe(1, 0.25)
    assert curve(1) == pytest.approx(0.12)  # the least one-token pass, not the latest
    assert curve(5) == pytest.approx(0.12 + OUTPUT_ALLOWANCE * 0.09 * 4)


def test_on_a_steep_guess_nothing_is_drafted_and_a_guess_decodes_plainly_where_it_can():
    from engine.policy.adaptive import AdaptivePolicy
    from engine.policy.schedule import PassSchedule
    from engine.policy.verify_cost import prior_cost_curve

    curve = prior_cost_curve()
    policy = AdaptivePolicy(curve, rows=1, priors={0: (0.98, 0.02)})
    assert length(policy, 8) == 0  # not anchored: a plain first pass gives c(1)
    curve.observe_span(100, 9.0)  # 4-bit on MLX's CPU backend: a pass costs its length
    curve.observe(1, 0.12)
    assert length(policy, 8) == 0 and PassSchedule(curve).gives_up(8)
    flat = prior_cost_curve()  # a GPU: the prompt is read at a fraction of a pass a token
    flat.observe_span(100, 0.05)
    flat.observe(1, 0.005)
    sure = AdaptivePolicy(flat, rows=1, priors={0: (0.98, 0.02)})
    assert length(sure, 8) == 8  # where the loop cannot queue passes (a grammar) it drafts
    assert PassSchedule(flat).gives_up(8)  # elsewhere a guess decodes plainly, pipelined
    assert not PassSchedule(flat, pipelines=False).gives_up(8)
    measured = CostCurve({1: 0.005, 9: 0.006})
    assert not PassSchedule(measured).gives_up(8)


def test_a_hopeless_curve_decodes_plainly_pipelined_with_the_same_tokens(tiny_loaded, monkeypatch):
    from engine.drafters import make_drafter
    from engine.loop import decode
    from engine.loop.decode import Target, TokenChooser, speculative_decode
    from engine.policy.adaptive import AdaptivePolicy
    from engine.policy.draft_policy import FixedDraftLength
    from engine.policy.schedule import PassSchedule
    from engine.policy.verify_cost import CostCurve
    from engine.settings import SamplingSettings

    prompt = list(tiny_loaded.tokenizer.encode("abcabcabcabc"))

    def run(policy, schedule=None):
        target = Target(tiny_loaded.model)
        target.prefill(prompt[:-1])
        drafter = make_drafter(DraftSettings(drafter="prompt-lookup", draft_count=4).validated())
        drafter.reset(prompt)
        history = list(prompt)
        passes = list(
            speculative_decode(
                target,
                drafter,
                TokenChooser(SamplingSettings()),
                history,
                max_tokens=20,
                draft_count=4,
                eos_tokens=set(),
                policy=policy,
                schedule=schedule,
            )
        )
        return history[len(prompt) :], passes

    switched = []
    real = decode.pipelined_plain_decode

    def pipelined(*args, **kwargs):
        switched.append(kwargs["max_tokens"])
        yield from real(*args, **kwargs)

    monkeypatch.setattr(decode, "pipelined_plain_decode", pipelined)
    linear = CostCurve({1: 0.1, 2: 0.2, 4: 0.4, 8: 0.8})
    tokens, passes = run(AdaptivePolicy(linear, rows=1), PassSchedule(linear))
    assert switched == [20]  # from the first pass, pipelined
    plain, _ = run(FixedDraftLength())
    assert tokens == plain  # lossless either way
    assert all(p.drafted == 0 for p in passes) and len(passes) == 20


def test_tree_passes_are_charged_their_extra_in_the_estimate(tiny_loaded, tmp_path):
    """A multi-row drafter on a flat curve whose tree passes cost 4% more (a fixed draft count: every
    row goes out): trees are sent, counted, and the estimate charges each its extra (checkable from the published stats)."""
    done, named = answer_on_curve_file(
        tiny_loaded,
        tmp_path,
        {"seconds": {"1": 0.01, "64": 0.0101}, "tree_extra_s": 0.0004},
        "abcabd abcabe abcabf abcabd abcabe abcab",
        40,
        drafter="ngrammys",
        draft_count=4,
        adaptive=False,
        options={"rows": 4},
    )
    stats, curve = done.stats, named.curve()
    assert stats["tree_passes"] > 0, "no tree pass was sent: the test would prove nothing"
    plain = (stats["emitted"] + int(stats["ended"])) * curve(1)
    spent = sum(curve(n) for n in stats["pass_sizes"]) + done.timing["drafter_s"]
    spent += stats["tree_passes"] * 0.0004
    assert stats["estimated_speedup"] == pytest.approx(plain / spent, rel=2e-3)


class SteppedTarget:
    """A model whose pass of at least ``step`` tokens costs twice a shorter one, as a GPU's
    does where its few-row kernel hands over to a tiled one: each pass moves ``clock`` on by
    its cost, so the timing reads what the pass cost and nothing else on the machine."""

    def __init__(self, step: int):
        self.step = step
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def checkpoint(self):
        return None

    def restore(self, saved) -> None:
        pass

    def forward(self, tokens):
        import mlx.core as mx

        self.now += 0.02 if len(tokens) >= self.step else 0.01
        return mx.zeros((len(tokens), 4))


@pytest.mark.parametrize("before, step", [(8, 10), (16, 17), (32, 33)])
def test_the_measured_curve_sees_a_kernel_switch_after_8_16_and_32_tokens(
    before, step, monkeypatch
):
    target = SteppedTarget(step)
    monkeypatch.setattr(verify_cost, "time", SimpleNamespace(perf_counter=target.clock))
    samples = {}
    for _, _, samples in timing_steps(target, repeats=2):
        pass
    curve = CostCurve({n: min(values) for n, values in samples.items()})
    assert curve(1) == pytest.approx(0.01) and curve(before) == pytest.approx(0.01)
    # measured there, not drawn from the lengths around it
    assert curve(step) == pytest.approx(0.02)


def test_a_guess_refitted_from_timed_passes_answers_from_its_new_points():
    """c(n) is remembered per n between refits; each refit of a guess forgets it."""
    curve = prior_cost_curve()

    def as_built(n):  # a curve made afresh from the guess's points now
        return CostCurve(dict(zip(curve.lengths, curve.seconds))).base(n)

    shape = curve.base(4)
    curve.observe(1, 0.05)  # anchored: seconds now
    assert curve.base(4) == pytest.approx(as_built(4)) and curve.base(4) != pytest.approx(shape)
    anchored = curve.base(4)
    curve.observe_span(64, 0.64)  # a prompt chunk: the line from c(1) at its time per token
    assert curve.base(4) == pytest.approx(as_built(4)) and curve.base(4) != pytest.approx(anchored)


def test_a_curve_timer_keeps_every_sample_and_prices_on_all_of_them(tiny_loaded):
    """The bench times c(n) at its start and again after each chat (the lengths that chat's
    passes are priced on); its curve is the medians of all the samples, and timing none more
    (``--verify-between 0``) changes nothing."""
    from engine.bench.runner import CurveTimer

    timer = CurveTimer(tiny_loaded, list(range(10, 40)), [1, 2, 4], 16)
    timer.time(3, warm=True)
    first = timer.curve()
    timer.time(0)
    assert timer.curve() == first and first["repeats"] == 3
    timer.time(2)
    assert {n: len(s) for n, s in timer.samples.items()} == {1: 5, 2: 5, 4: 5}
    assert timer.curve()["repeats"] == 5
    median = sorted(timer.samples[4])[2]
    assert timer.curve()["median_s"]["4"] == round(median, 5)
    # after a chat whose passes were at most 2 tokens: only what those are priced on
    timer.time(1, longest=2)
    assert {n: len(s) for n, s in timer.samples.items()} == {1: 6, 2: 6, 4: 5}
    timer.time(1, longest=3)  # priced between c(2) and c(4)
    timer.time(1, longest=99)  # past the curve: on its last length
    assert {n: len(s) for n, s in timer.samples.items()} == {1: 8, 2: 8, 4: 7}
