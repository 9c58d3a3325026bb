"""One pass, three callers: the decode loop, the replay of a finished answer and the tuning
replay plan and learn each pass through engine/policy/passes.py, so on a greedy answer they make
the same passes. Plus the pass steps on their own."""

import subprocess
import sys

import pytest

from engine.bench.tune import simulate
from engine.drafters import make_drafter
from engine.drafters.base import Drafter, Proposal
from engine.policy.adaptive import AdaptiveMemory
from engine.policy.draft_policy import AlternativesOutcome, FixedDraftLength
from engine.policy.passes import judge_by_answer, learn_pass, plan_pass
from engine.runtime.replay import replay
from engine.settings import DraftSettings
from engine.stats import DecodeStats

from .identity import speculative
from .scripted_model import ScriptedModel
from .tiny_model import make_tiny_llama

TINY_PROMPT = [40 + (i % 9) for i in range(60)] + [7, 8, 9]
# a text that repeats itself with a new token (60 + i) in each copy: drafts of a row, cut
SCRIPT = [n for i in range(12) for n in [5, 17, 33, 8, 41, 12, 29, 3, 60 + i, 22, 50, 14]]
# an answer ended by an end-of-sequence token (99) that the prompt has where the answer goes
# on: the first draft, 4 99 5 6, is cut after it
ENDED = [1, 2, 3, 4, 99, 5, 6, 7, 8, 1, 2, 3], [4, 10, 11, 12, 99]
SECONDS = {1: 0.01, 65: 0.012}  # a flat curve: no policy here plans on it

pytestmark = pytest.mark.usefixtures("private_dirs")  # conftest: a data and cache folder per test


def observed_passes(monkeypatch, drafter_class) -> list:
    """Every ``observe`` call the drafter class gets from now on: one per pass."""
    calls = []
    original = drafter_class.observe

    def spy(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None):
        calls.append((list(emitted), accepted, drafted, row))
        return original(
            self, emitted, accepted=accepted, drafted=drafted, row=row, target_topk=target_topk
        )

    monkeypatch.setattr(drafter_class, "observe", spy)
    return calls


def answer_of(case: str):
    """(settings, prompt, the loop's emitted tokens, its pass results, end token, limit)."""
    name = "suffix" if case == "tree" else "prompt-lookup"
    settings = DraftSettings(drafter=name, draft_count=8, ngram_order=3, adaptive=False)
    eos, limit = (99, len(ENDED[1])) if case == "ended" else (None, 50)
    if case == "tree":  # a tiny random Llama: verifies several rows as one tree
        model, prompt = make_tiny_llama(seed=1), TINY_PROMPT
    else:  # a scripted target: the answer is the script's rest, whatever was drafted
        prompt, answer = ENDED if case == "ended" else (SCRIPT[:40], SCRIPT[40:])
        model = ScriptedModel(prompt + answer + [0] * 9)
    eos_tokens = [eos] if eos is not None else []
    tokens, results = speculative(model, prompt, limit, settings, eos=eos_tokens)
    return settings, prompt, tokens, results, eos, limit


@pytest.mark.parametrize("case", ["rows", "ended", "tree"])
def test_the_loop_and_both_replays_make_the_same_passes(monkeypatch, case):
    """``rows``: one row a pass; ``ended``: the answer ends with an end-of-sequence token
    that the drafts run into; ``tree``: several rows verified in one pass."""
    # the replays take the answer's length for the request's limit: the loop is given that
    settings = DraftSettings(drafter="suffix" if case == "tree" else "prompt-lookup")
    calls = observed_passes(monkeypatch, type(make_drafter(settings)))
    settings, prompt, tokens, results, eos, limit = answer_of(case)
    looped, calls[:] = list(calls), []
    assert sum(r.accepted for r in results) > 0, "the comparison needs accepted drafts"
    assert (case == "tree") == any(r.tree for r in results)
    assert (case == "ended") == (tokens[-1] == eos)

    answer = tokens[:-1] if eos is not None else tokens
    replay(prompt, answer, settings, end_token=eos, max_tokens=limit)
    replayed, calls[:] = list(calls), []

    chat = [{"prompt": prompt, "answer": answer, "stop": eos is not None}]
    memory = AdaptiveMemory()
    name = settings.drafter
    simulated = simulate(chat, name, 8, False, memory, "k", SECONDS, eos or 0, settings.options)
    assert looped == replayed == calls
    assert simulated["passes"] == len(results)
    assert [n for n, _ in simulated["sizes"]] == [r.drafted + 1 for r in results]


class Rows(Drafter):
    """Proposes fixed rows; counts how often it is asked."""

    name = "rows"
    summary = "fixed rows"
    multi_row = True

    def __init__(self, rows, alternatives=0):
        self.rows, self.asked, self.alternatives = rows, 0, alternatives

    def reset(self, tokens):
        pass

    def propose(self, k):
        self.asked += 1
        rows = [list(row) for row in self.rows]
        return Proposal(rows, match_length=3, alternatives=self.alternatives)

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None):
        self.seen = (list(emitted), accepted, drafted, row)


def test_a_plan_cuts_rows_at_the_limit_and_after_eos_and_drops_empty_ones():
    drafter = Rows([[1, 2, 9, 4], [], [5, 6, 7, 8, 3]])
    plan = plan_pass(drafter, 4, {9}, FixedDraftLength())
    assert plan.rows == [[1, 2, 9], [5, 6, 7, 8]]
    assert plan_pass(drafter, 4, {9}, FixedDraftLength(), first_row_only=True).rows == [[1, 2, 9]]
    asked = drafter.asked
    assert plan_pass(drafter, 0, {9}, FixedDraftLength()).rows == []
    assert drafter.asked == asked  # no room for a draft: the drafter is not asked


class Recorder(FixedDraftLength):
    """Sends everything; keeps the outcomes it is told of."""

    def __init__(self):
        self.outcomes = []

    def record(self, choice, outcome):
        self.outcomes.append(outcome)


def test_the_alternative_rows_are_followed_through_the_plan_and_judged_beside_the_own_ones():
    # the own rows [1 2 3] and [] (dropped), the alternatives [5 6] and [] (dropped) and [7]
    drafter = Rows([[1, 2, 3], [], [5, 6], [], [7]], alternatives=3)
    policy = Recorder()
    plan = plan_pass(drafter, 4, {9}, policy)
    assert plan.rows == [[1, 2, 3], [5, 6], [7]] and plan.alternatives == 2
    answer = [5, 6, 8, 9]
    learn_pass(drafter, policy, plan, judge_by_answer(plan.rows, answer, 0, {9}, True), 0.01)
    # the alternative [5 6] kept 2 tokens where the own row kept none
    assert policy.outcomes[-1].alternatives == AlternativesOutcome(own_rows=1, tokens=3, gained=2)
    # an own row that keeps as much: the alternatives added nothing
    plan = plan_pass(Rows([[5, 6, 4], [5, 6]], alternatives=1), 4, {9}, policy)
    learn_pass(drafter, policy, plan, judge_by_answer(plan.rows, answer, 0, {9}, True), 0.01)
    assert policy.outcomes[-1].alternatives == AlternativesOutcome(1, 2, 0)
    # a proposal of alternatives alone keeps none as such: they are its rows
    plan = plan_pass(Rows([[5, 6]], alternatives=1), 4, {9}, policy)
    assert plan.rows == [[5, 6]] and plan.alternatives == 0


def test_a_grammars_forced_tokens_go_out_where_the_drafter_has_none():
    plan = plan_pass(Rows([[4, 4]]), 3, {9}, FixedDraftLength(), forced=[1, 9, 2, 3])
    assert plan.rows == [[1, 9]] and plan.grammar


def test_an_answer_judges_a_tree_by_its_longest_row_and_stops_at_eos():
    answer = [1, 2, 3, 9]
    verdict = judge_by_answer([[1, 5], [1, 2, 3], [1, 2, 4]], answer, 0, {9}, tree=True)
    assert (verdict.emitted, verdict.accepted, verdict.row) == ([1, 2, 3, 9], 3, 1)
    assert verdict.drafted == 5 and verdict.depth == 3 and verdict.first_row == (2, 1)
    ended = judge_by_answer([[2, 3, 9]], answer, 1, {9}, tree=True)
    assert ended.emitted == [2, 3, 9] and ended.depth is None
    single = judge_by_answer([[1, 5], [1, 2, 3]], answer, 0, {9}, tree=False)
    assert (single.emitted, single.accepted, single.drafted) == ([1, 2], 1, 2)


def test_learning_a_pass_tells_the_drafter_and_counts_it_without_the_eos_token():
    drafter = Rows([[2, 3, 9]])
    plan = plan_pass(drafter, 3, {9}, FixedDraftLength())
    verdict = judge_by_answer(plan.rows, [1, 2, 3, 9], 1, {9}, tree=True)
    stats = DecodeStats()
    kept = learn_pass(drafter, FixedDraftLength(), plan, verdict, 0.0, stats=stats, eos_tokens={9})
    assert drafter.seen == ([2, 3, 9], 3, 3, 0)
    assert kept == 2 and (stats.drafted, stats.accepted, stats.emitted) == (3, 2, 2)


def test_the_pass_steps_load_no_mlx():
    code = "import sys, engine.policy.passes; print('mlx.core' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
