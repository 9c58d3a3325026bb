"""Each new drafter's rule, pinned on small hand-made token streams (no model)."""

import json

import pytest

from engine.drafters import make_drafter
from engine.drafters.base import ONCE, USUAL
from engine.drafters.ngram_cache import NgramCounts, dynamic_cache_path, static_cache_path
from engine.drafters.stores import DrafterStores
from engine.errors import EngineError
from engine.settings import DraftSettings


pytestmark = pytest.mark.usefixtures("private_dirs")  # conftest: a data and cache folder per test


def drafter(name, **kw):
    options = kw.pop("options", {})
    d = make_drafter(DraftSettings(drafter=name, adaptive=False, options=options, **kw))
    return d


# ---------------------------------------------------------------- ngram-simple
def test_ngram_simple_copies_after_the_most_recent_earlier_match():
    d = drafter("ngram-simple", options={"n": 2, "m": 3})
    d.reset([1, 2, 10, 11, 12, 1, 2, 20, 21, 22, 9, 1, 2])
    assert d.propose(8).rows == [[20, 21, 22]]  # most recent earlier [1, 2], m = 3 tokens
    assert d.propose(2).rows == [[20, 21]]  # capped by the pass's limit


def test_ngram_simple_check_rate_skips_lookups():
    d = drafter("ngram-simple", options={"n": 1, "m": 2, "check_rate": 3})
    d.reset([5, 6, 7, 5])
    assert d.propose(4).rows == [[6, 7]]
    d.observe([6])
    assert d.propose(4).rows == []  # one token since the last lookup < 3
    d.observe([7, 5])
    assert d.propose(4).rows == [[6, 7]]


def test_option_errors_are_clear():
    with pytest.raises(EngineError, match="'n' must be an integer"):
        drafter("ngram-simple", options={"n": 0})
    with pytest.raises(EngineError, match="min_hits"):
        drafter("ngram-map-k", options={"min_hits": "two"})


# ---------------------------------------------------------------- ngram-map-k
def test_map_k_does_not_draft_before_min_hits():
    d = drafter("ngram-map-k", options={"n": 2, "m": 2, "min_hits": 2})
    d.reset([1, 2, 3, 4, 0, 1, 2])
    assert d.propose(8).rows == []  # [1,2] -> [3,4] seen once
    d.observe([3, 4, 0, 1, 2])
    assert d.propose(8).rows == [[3, 4]]  # now twice


def test_map_k_caps_the_next_draft_at_the_last_acceptance():
    d = drafter("ngram-map-k", options={"n": 1, "m": 3})
    d.reset([7, 1, 2, 3, 7])
    assert d.propose(8).rows == [[1, 2, 3]]
    d.observe([1, 9], accepted=1, drafted=3)  # one draft token accepted, then the target's own
    d.observe([8, 7])  # no draft this pass
    assert d.propose(8).rows == [[1]]  # [7] -> [1, 9, 8] (most recent), capped at 1 for key [7]


def test_map_k_keeps_its_cap_when_the_proposal_was_not_sent():
    d = drafter("ngram-map-k", options={"n": 1, "m": 3})
    d.reset([7, 1, 2, 3, 7])
    assert d.propose(8).rows == [[1, 2, 3]]
    d.observe([1], accepted=0, drafted=0)  # an adaptive policy sent none of it
    d.observe([2, 3, 7])
    assert d.propose(8).rows == [[1, 2, 3]]  # still m tokens: nothing was judged


def test_copying_drafters_report_how_long_their_match_is():
    prompt = [5, 6, 1, 2, 3, 4, 9, 8, 1, 2, 3, 4]  # [1, 2, 3, 4] matched; before it 6 vs 8 differ
    for name, options in (("prompt-lookup", {}), ("suffix", {}), ("ngram-simple", {"n": 2})):
        d = drafter(name, ngram_order=2, options=options)
        d.reset(prompt)
        proposal = d.propose(4)
        assert (proposal.rows, proposal.match_length) == ([[9, 8, 1, 2]], 4), name


# ---------------------------------------------------------------- ngram-map-k4v
def test_k4v_does_not_draft_without_dominance():
    d = drafter("ngram-map-k4v", options={"n": 1, "m": 1})
    d.reset([5, 1, 5, 2, 5])  # 5 -> 1 once, 5 -> 2 once: no dominant value
    assert d.propose(4).rows == []
    d.observe([3, 5])  # 1, 1, 1: top 1 < 2 * 2
    assert d.propose(4).rows == []
    d.observe([1, 5, 1, 5])  # 5 -> 1 three times, rest 2: 3 < 2 * 2
    assert d.propose(4).rows == []
    d.observe([1, 5])  # 4 vs 2: 4 >= 2 * 2 dominates
    assert d.propose(4).rows == [[1]]


def test_k4v_keeps_at_most_four_values():
    d = drafter("ngram-map-k4v", options={"n": 1, "m": 1})
    d.reset([5, 1, 5, 2, 5, 3, 5, 4, 5, 6, 5, 6, 5, 6, 5, 6, 5, 6, 5, 6, 5, 6, 5])
    assert len(d.index.values((5,))) == 4  # value 6 came fifth: ignored, as in llama.cpp
    assert d.propose(4).rows == []


# ---------------------------------------------------------------- ngram-cache
def test_ngram_cache_context_uses_lax_thresholds():
    d = drafter("ngram-cache", ngram_order=1, ngram_min=1, options={"dynamic": False})
    d.reset([4, 9, 3])
    assert d.propose(4).rows == []  # n=1 needs a sample of 2 ...
    d.observe([4, 9, 4])
    assert d.propose(1).rows == [[9]]  # 4 -> 9 twice: 2 samples, 100%
    d.observe([8, 4])  # 4 -> 9, 9, 8: 66.7% >= 66%
    assert d.propose(1).rows == [[9]]
    d.observe([7, 4])  # 4 -> 9, 9, 8, 7: 50% < 66%
    assert d.propose(1).rows == []


def test_ngram_cache_dynamic_uses_strict_thresholds_and_persists():
    path = dynamic_cache_path("k")
    stores = DrafterStores()  # what one service hands its chats

    def attached(stores):
        d = drafter("ngram-cache", ngram_order=1)
        d.attach_model("k", stores=stores)
        return d

    first = attached(stores)
    first.reset([1])
    first.observe([4, 9, 4, 9, 4, 9])  # generated: 4 -> 9 three times
    first.reset([0])  # next chat: merged and saved
    assert path.exists()
    assert NgramCounts.load(path).parts[(4,)] == {9: 3}
    second = attached(stores)
    second.reset([2, 4])
    assert second.propose(1).rows == []  # strict n=1 needs 4 samples
    first.observe([4, 9])
    assert second.propose(1).rows == [[9]]  # 4 samples, 100% (shared store of one owner)
    third = attached(DrafterStores())  # another owner (a new process): reads the file
    third.reset([2, 4])  # the first chat's last turn was saved when the next chat began
    assert third.propose(1).rows == []
    first.reset([0])
    fourth = attached(DrafterStores())
    fourth.reset([2, 4])
    assert fourth.propose(1).rows == [[9]]
    first.observe([4, 9, 4, 9])
    stores.flush()  # what the service does on shutdown
    assert NgramCounts.load(path).parts[(4,)] == {9: 6}


def test_ngram_cache_static_cache_from_the_models_file():
    static = NgramCounts.from_tokens([1, 2, 3, 1, 2, 3, 1, 2, 3], 2, 2)
    static.save(static_cache_path("k"))
    d = drafter("ngram-cache", options={"dynamic": False})
    d.attach_model("k")
    d.reset([1, 2])
    assert d.propose(3).rows == [[3, 1, 2]]
    off = drafter("ngram-cache", options={"dynamic": False, "static": False})
    off.attach_model("k")
    off.reset([1, 2])
    assert off.propose(3).rows == []


def test_ngram_cache_corrupt_file_is_reported_and_ignored(caplog):
    path = dynamic_cache_path("k")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    d = drafter("ngram-cache")
    d.attach_model("k")
    d.reset([1, 2, 1, 2, 1])
    assert "cannot be read" in caplog.text  # a warning of the engine logger
    assert d.propose(2).rows == [[2, 1]]  # the context cache still drafts
    static_cache_path("k").write_text(
        json.dumps({"format": "draftless-ngram-cache", "version": 99, "entries": []})
    )
    caplog.clear()
    d2 = drafter("ngram-cache", options={"dynamic": False})
    d2.attach_model("k")
    assert "unsupported version" in caplog.text
    d2.reset([1, 2])


def test_ngram_cache_eviction_bounds_the_file(tmp_path):
    counts = NgramCounts.from_tokens(list(range(100)), 1, 2)
    counts.save(tmp_path / "c.json", max_entries=10)
    assert len(NgramCounts.load(tmp_path / "c.json")) == 10


# ---------------------------------------------------------------- nasd
def test_nasd_is_initialised_from_the_prompt_and_stops_if_unknown():
    d = drafter("nasd", ngram_order=2, ngram_min=2)
    d.reset([1, 2, 3, 1])
    assert d.propose(5).rows == [[2, 3, 1, 2, 3]]
    d.reset([1, 2, 3, 7])
    assert d.propose(5).rows == []  # 7 never seen as a context
    d2 = drafter("nasd", ngram_order=2, ngram_min=2, options={"stop_if_unknown": False})
    d2.reset([1, 2, 3, 1, 7])
    assert d2.propose(2).rows == [[1, 7]]  # unknown: most frequent token (1), then 1 -> 7 (recent)


def test_nasd_enrichment_adds_the_targets_top_k():
    d = drafter("nasd", ngram_order=2, ngram_min=2, options={"filler_top_k": 3})
    assert d.wants_target_topk == 3
    d.reset([1, 2])
    d.observe([5], accepted=0, target_topk=[[5, 8, 9]])  # after 2: 5 (emitted), 8, 9 (top-k)
    followers = d.storage.parts[(2,)]
    assert set(followers) == {5, 8, 9}
    plain = drafter("nasd", ngram_order=2, ngram_min=2)
    assert plain.wants_target_topk == 0


# ---------------------------------------------------------------- ngrammys
def test_ngrammys_context_rows_ranked_by_count_ties_to_most_recent():
    d = drafter("ngrammys", draft_count=2, options={"rows": 3})
    d.reset([7, 1, 1, 7, 2, 2, 7, 1, 1, 7, 3, 3, 9, 7])
    assert d.propose(2).rows == [[1, 1], [3, 3], [2, 2]]  # count 2 first; then 3,3 (more recent)
    assert d.propose(1).rows == [[1], [3], [2]]


def test_ngrammys_fills_remaining_rows_from_the_extended_bigram():
    import numpy as np

    d = drafter("ngrammys", draft_count=3, options={"rows": 3})
    table = np.array([[1, 2], [2, 0], [0, 1], [4, 5], [3, 1], [5, 5]], dtype=np.int32)
    d.attach_model("k", bigram=table)
    d.reset([3, 4, 5, 3])
    # context: after 3 came [4, 5, 3]; then bigram top tokens after 3: 4 (dup start ok), 5
    assert d.propose(3).rows == [[4, 5, 3], [4, 3, 4], [5, 5, 5]]


# ---------------------------------------------------------------- suffix
def test_suffix_finds_the_longest_match_not_the_most_recent_short_one():
    d = drafter("suffix", options={"max_spec_factor": 10.0, "min_prob": 0.0})
    d.reset([1, 2, 3, 4, 50, 51, 9, 3, 4, 60, 1, 2, 3, 4])
    # [3, 4] last occurred before 60, but [1, 2, 3, 4] (longer) before 50: the first row
    assert d.propose(2).rows[0] == [50, 51]
    assert d.sam.longest_match()[0] == 4


def test_suffix_rows_after_the_first_come_from_earlier_and_shorter_matches():
    d = drafter("suffix", options={"max_spec_factor": 10.0, "min_prob": 0.0})
    # [1, 2, 3] before 50 (most recent) and before 70 (the occurrence before it); the
    # shorter [2, 3] also before 60; [3] alone repeats [60, 2]'s start, so it adds nothing new
    d.reset([1, 2, 3, 70, 71, 9, 2, 3, 60, 61, 1, 2, 3, 50, 51, 8, 1, 2, 3])
    assert d.propose(2).rows == [[50, 51], [70, 71], [60, 61]]
    assert d.propose(2).match_length == 3
    single = drafter("suffix", options={"rows": 1, "max_spec_factor": 10.0, "min_prob": 0.0})
    single.reset([1, 2, 3, 70, 71, 9, 2, 3, 60, 61, 1, 2, 3, 50, 51, 8, 1, 2, 3])
    assert single.propose(2).rows == [[50, 51]]
    assert drafter("suffix").rows_per_pass == 4 and drafter("suffix").multi_row


def test_suffix_draft_length_follows_match_length_and_frequency():
    d = drafter("suffix", options={"max_spec_factor": 1.0})  # at most the match's length
    d.reset([1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2])
    assert d.propose(8).rows == [[3, 4]]
    eight = drafter("suffix")  # the default factor 8: up to eight times the match's length
    eight.reset([1, 2, *range(3, 23), 0, 1, 2])
    assert eight.propose(32).rows == [list(range(3, 19))]
    d.reset([1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2, 3, 4, 5])
    assert d.propose(3).rows == [[6, 7, 8]]
    # after [9] came 1, 2, 3, 4, 5 once each: p = 0.2 for the first token, 0.2 < 0.3 stops
    d2 = drafter("suffix", options={"min_prob": 0.3})
    d2.reset([9, 1, 9, 2, 9, 3, 9, 4, 9, 5, 9])
    assert d2.propose(4).rows == []
    d3 = drafter("suffix", options={"min_prob": 0.1, "max_spec_factor": 1.0})
    d3.reset([9, 1, 9, 2, 9, 3, 9, 4, 9, 5, 9])
    # the most recent continuation first (probability 0.2), then the one before it
    assert d3.propose(4).rows == [[5], [4]]


def test_suffix_says_when_its_draft_is_what_usually_followed_the_match():
    d = drafter("suffix", options={"min_prob": 0.0})
    d.reset([9, 5, 1, 9, 5, 2, 9, 5, 3, 9, 5, 4, 9])  # [9] was always followed by 5
    proposal = d.propose(4)
    assert proposal.rows[0][0] == 5 and proposal.match_length == 1 and proposal.follows == USUAL
    d.reset([9, 1, 8, 9, 2, 7, 9, 3, 6, 9, 3, 5, 9])  # 3 followed [9] in two of four
    proposal = d.propose(4)
    assert proposal.rows[0][0] == 3 and proposal.match_length == 1 and proposal.follows != USUAL
    d.reset([9, 1, 8, 9, 3, 7, 9, 3, 6, 9, 3, 5, 9])  # three of four (75% >= 60%)
    proposal = d.propose(4)
    assert proposal.rows[0][0] == 3 and proposal.match_length == 1 and proposal.follows == USUAL
    # it speaks of the first token: it holds while the first row sent still begins with it
    assert (
        proposal.sendable([[3]]).follows == USUAL
        and proposal.sendable([[3, 7], [1]]).follows == USUAL
    )
    assert not proposal.sendable([]).follows and not proposal.sendable([[1, 8]]).follows


def test_suffix_says_when_its_match_occurred_only_once_before():
    d = drafter("suffix", options={"min_prob": 0.0})
    d.reset([9, 5, 1, 9])  # [9] once before, followed by 5: trivially usual, said apart
    proposal = d.propose(4)
    assert proposal.rows[0][0] == 5 and proposal.match_length == 1
    assert proposal.follows == ONCE
    assert proposal.sendable([[5, 1]]).follows == ONCE and not proposal.sendable([[1]]).follows
    d.reset([9, 5, 1, 9, 5, 2, 9])  # twice before, both followed by 5
    proposal = d.propose(4)
    assert proposal.follows == USUAL


def test_suffix_resumes_copying_right_after_an_edit():
    # the passage 10..17, then elsewhere 14 followed by 70, 71 (the most recent 14)
    prompt = [10, 11, 12, 13, 14, 15, 16, 17, 8, 14, 70, 71, 8]
    for locality, first_row in ((32, [15, 16, 17]), (0, [70, 71, 8])):
        d = drafter("suffix", options={"locality": locality})
        d.reset(prompt)
        d.observe([10])  # the model starts copying the passage
        assert d.propose(2).rows[0] == [11, 12]
        d.observe([11, 12, 99], accepted=2, drafted=2, row=0)  # its edit: 99 for 13
        d.observe([14])  # back to the passage
        assert d.propose(3).rows[0] == first_row
    # the cursor follows accepted drafts and the model's own tokens that go on copying
    d = drafter("suffix")
    d.reset(prompt)
    d.observe([10])
    d.propose(2)
    d.observe([11, 12, 99], accepted=2, drafted=2, row=0)
    assert d.cursor == 2  # the source position of the last accepted token, 12
    d.observe([14])
    d.propose(3)
    d.observe([15, 16, 17], accepted=2, drafted=3, row=0)
    assert d.cursor == 7  # 16 accepted at 6, then the model's own 17 follows the source
    d.extend([5, 6])  # a new turn: nothing is being copied
    assert d.cursor is None


def test_suffix_lookup_time_does_not_grow_with_history():
    import random
    import time

    rng = random.Random(0)
    d = drafter("suffix")
    d.reset([rng.randrange(1000) for _ in range(20000)])
    assert len(d.sam) == 20000
    began = time.perf_counter()
    for _ in range(100):
        d.propose(8).rows
    assert (time.perf_counter() - began) / 100 < 0.01  # generous: O(1), not a scan


def test_every_new_drafter_is_registered():
    from engine.drafters import DRAFTERS

    for name in (
        "ngram-simple",
        "ngram-map-k",
        "ngram-map-k4v",
        "ngram-cache",
        "nasd",
        "ngrammys",
        "suffix",
    ):
        assert name in DRAFTERS
    assert DRAFTERS["ngrammys"].multi_row


def test_measurements_run_ngram_cache_without_cross_chat_memory():
    from engine.drafters import measurement_options

    assert measurement_options("ngram-cache") == {"dynamic": False}
    assert measurement_options("prompt-lookup") == {}
    assert not drafter("ngram-cache", options=measurement_options("ngram-cache")).use_dynamic


def test_stores_with_a_folder_keep_the_drafters_files_there_and_read_nothing_else():
    """What the benchmarks use: the user's data folder is neither read nor written."""
    from engine.bench.scratch import FolderStores

    user_static = NgramCounts.from_tokens([1, 2, 3, 1, 2, 3, 1, 2, 3], 2, 2)
    user_static.save(static_cache_path("k"))
    stores = FolderStores()
    d = drafter("ngram-cache")
    d.attach_model("k", stores=stores)
    d.reset([1, 2])
    assert d.propose(3).rows == []  # the user's static table was not read
    d.observe([5, 6, 5, 6])
    stores.flush()
    assert dynamic_cache_path("k", stores.folder).exists()
    assert not dynamic_cache_path("k").exists()
    assert stores.folder != dynamic_cache_path("k").parents[1]
