"""Continue: an answer that stopped at its token limit goes on from its own tokens, and the
whole equals one longer answer (greedy)."""

import pytest

from engine.errors import EngineError
from engine.events import DoneEvent
from engine.runtime.session import ChatSession
from engine.settings import DraftSettings, GenerationRequest
from engine.stats import DecodeStats

MESSAGES = [{"role": "user", "content": "List five fruits and say one thing about each."}]


def answer(loaded, max_tokens, continue_tokens=None, chat_id=None, drafter="suffix"):
    request = GenerationRequest(
        messages=MESSAGES,
        max_tokens=max_tokens,
        draft=DraftSettings(drafter=drafter, draft_count=8),
        continue_tokens=continue_tokens,
    ).validated()
    done = list(ChatSession(loaded).generate(request))[-1]
    assert isinstance(done, DoneEvent)
    return done


@pytest.mark.embedded  # the tiny random models repeat one token: a real model's answer varies
@pytest.mark.parametrize("drafter", ["none", "suffix"])
def test_continuing_equals_one_longer_answer(embedded_loaded, drafter):
    whole = answer(embedded_loaded, 40, drafter=drafter)
    start = answer(embedded_loaded, 15, drafter=drafter)
    assert start.finish_reason == "length" and start.tokens == whole.tokens[:15]
    rest = answer(embedded_loaded, 25, tuple(start.tokens), drafter=drafter)
    assert len(set(rest.tokens)) > 5  # an answer that goes somewhere
    assert start.tokens + rest.tokens == whole.tokens


def test_the_whole_answers_numbers_add_up():
    first = DecodeStats(passes=4, drafted=6, accepted=3, emitted=7, pass_sizes=[1, 3, 2, 4])
    first.position_drafted, first.position_accepted = [3, 2, 1], [2, 1, 0]
    first.estimated_speedup = 7 / 5  # 5 one-token passes' worth of time
    later = DecodeStats(passes=2, drafted=2, accepted=2, emitted=5, ended=True, pass_sizes=[3, 1])
    later.position_drafted, later.position_accepted = [1, 1], [1, 1]
    later.estimated_speedup = 6 / 3
    whole = first.merged(later)
    assert (whole.passes, whole.drafted, whole.accepted, whole.emitted) == (6, 8, 5, 12)
    assert whole.pass_sizes == [1, 3, 2, 4, 3, 1] and whole.ended
    assert whole.position_drafted == [4, 3, 1] and whole.position_accepted == [3, 2, 0]
    assert whole.estimated_speedup == pytest.approx(13 / 8)


def test_only_token_ids_of_a_chat_answer_can_be_continued():
    with pytest.raises(EngineError, match="continued"):
        GenerationRequest(prompt="hi", raw=True, continue_tokens=(1, 2)).validated()
    with pytest.raises(EngineError, match="continued"):
        GenerationRequest(messages=MESSAGES, continue_tokens=(1, -2)).validated()


@pytest.mark.parametrize("stored", ["7", -1, True, 5.0, 10**9, None, [2]])
def test_a_stored_tree_pass_count_that_is_not_one_reads_as_none(stored):
    """Stored answers are untrusted: a tree-pass (or queued-pass) count that is not a whole
    number from 0 to the answer's passes is read as 0, not trusted and not a traceback."""
    stats = DecodeStats.from_dict({"passes": 6, "tree_passes": stored, "queued_passes": stored})
    assert stats.tree_passes == 0 and stats.queued_passes == 0
    assert DecodeStats.from_dict({"passes": 6, "tree_passes": 4}).tree_passes == 4
    assert DecodeStats.from_dict({"passes": 6, "queued_passes": 5}).queued_passes == 5
