"""`suffix-static`: a row from the static n-gram table of public answers, merged with the
user's earlier chats; a bad table file is named and drafting goes on; lossless as always."""

import logging

import pytest

from engine.drafters import make_drafter
from engine.drafters._static_table import StaticTable, StaticTableError
from engine.drafters.stores import DrafterStores
from engine.runtime import static_ngrams
from engine.runtime.static_ngrams import FollowerCounts, count_all
from engine.settings import DraftSettings

from .identity import reference_greedy, speculative
from .tiny_model import make_tiny_llama

pytestmark = pytest.mark.usefixtures("private_dirs")  # conftest: a data and cache folder per test

MODEL_KEY = "test-model"  # tests/identity.py's key
TOKENIZER = "test-tokenizer"  # the tokenizer digest the table test.npz records
VOCAB = 256


def counted(answers, vocab=VOCAB, min_count=2) -> FollowerCounts:
    counts = FollowerCounts(vocab, min_count, 0.3)
    for answer in answers:
        counts.add(answer)
    return count_all(counts)


def write_table(folder, answers, vocab=VOCAB, min_count=2):
    orders = counted(answers, 1 << 21, min_count).orders
    StaticTable("test", vocab, orders, TOKENIZER).save(folder / "test.npz")


@pytest.fixture
def tables(tmp_path, monkeypatch):
    folder = tmp_path / "ngrams"
    folder.mkdir()
    monkeypatch.setattr(static_ngrams, "TABLES_DIR", folder)
    return folder


def drafter(stores=None, **options):
    settings = DraftSettings(drafter="suffix-static", draft_count=8, ngram_min=1, options=options)
    made = make_drafter(settings.validated())
    table = static_ngrams.shipped_table(TOKENIZER, VOCAB)  # as ``ModelTables.static`` finds it
    made.attach_model(MODEL_KEY, static_table=table, stores=stores, vocab_size=VOCAB)
    return made


def test_beside_suffixs_rows_what_the_first_row_rests_on_stays_for_the_calibrated_policy(tables):
    from engine.policy.calibrated_policy import FITTED, fitted_model

    write_table(tables, [[1, 2, 3, 4, 5, 6, 7]] * 3)
    chat = drafter()
    chat.reset([3, 8, 9, 3, 8, 1, 2, 3])  # "3 8" followed 3 once: suffix copies 8 9 ...
    alone = make_drafter(DraftSettings(drafter="suffix", draft_count=8, ngram_min=1).validated())
    alone.reset([3, 8, 9, 3, 8, 1, 2, 3])
    theirs, ours = alone.propose(8), chat.propose(8)
    assert ours.rows[0] == theirs.rows[0] and ours.rows[-1] == [4, 5, 6, 7]
    assert theirs.continuation and ours.continuation == theirs.continuation
    assert (ours.match_length, ours.follows, ours.source) == (
        theirs.match_length,
        theirs.follows,
        theirs.source,
    )
    assert fitted_model("suffix-static").weights == list(FITTED["suffix"][0])


def test_the_extra_row_is_the_tables_continuation(tables):
    write_table(tables, [[1, 2, 3, 4, 5, 6, 7]] * 3)
    chat = drafter()
    chat.reset([9, 1, 2, 3])  # "1 2 3" never occurred before in this chat: suffix has nothing
    proposal = chat.propose(8)
    assert proposal.rows == [[4, 5, 6, 7]]
    assert proposal.match_length == 0  # judged apart from the chat's own matches
    assert make_drafter(DraftSettings(drafter="suffix", ngram_min=1)).propose(8).rows == []


def test_the_tables_other_usual_followers_are_alternative_rows(tables):
    # after "1 2 3": 4 three times (the usual row, 4 5), 6 twice (an alternative, 6 7)
    write_table(tables, [[1, 2, 3, 4, 5]] * 3 + [[1, 2, 3, 6, 7]] * 2)
    chat = drafter(alternatives=4)
    assert chat.rows_per_pass == 4 + 4  # suffix's rows, and as many alternatives
    chat.reset([9, 1, 2, 3])
    proposal = chat.propose(8)
    assert proposal.rows == [[4, 5], [6, 7]] and proposal.alternatives == 1
    default = drafter()  # off unless asked for
    default.reset([9, 1, 2, 3])
    assert default.propose(8).rows == [[4, 5]] and default.rows_per_pass == 4
    # a follower that already begins a row (here suffix's own copy of 6 8) is not repeated
    chat.reset([1, 2, 3, 6, 8, 1, 2, 3])
    proposal = chat.propose(8)
    assert [row[0] for row in proposal.rows] == [6, 4] and proposal.alternatives == 0


def test_the_users_earlier_chats_come_before_the_table(tables, tmp_path):
    write_table(tables, [[1, 2, 3, 4, 5, 6, 7]] * 3)
    stores = DrafterStores(tmp_path / "data")
    earlier = drafter(stores)
    earlier.reset([50])
    for _ in range(3):
        earlier.observe([1, 2, 3, 8, 60])
    earlier.flush()
    # a new service reads the memory back from its file
    chat = drafter(DrafterStores(tmp_path / "data"))
    chat.reset([9, 1, 2, 3])
    assert chat.propose(8).rows[0][0] == 8
    without = drafter(DrafterStores(tmp_path / "data"), memory=False)
    without.reset([9, 1, 2, 3])
    assert without.propose(8).rows == [[4, 5, 6, 7]]


def test_a_corrupt_table_is_named_and_drafting_goes_on(tables, caplog):
    (tables / "test.npz").write_bytes(b"not a table")
    with pytest.raises(StaticTableError, match="python -m engine.bench.static_table"):
        StaticTable.load(tables / "test.npz")
    with caplog.at_level(logging.WARNING, logger="engine"):
        chat = drafter()
    assert str(tables / "test.npz") in caplog.text and "drafts without it" in caplog.text
    chat.reset([9, 1, 2, 3, 7, 1, 2])
    assert chat.propose(8).rows == [[3, 7, 1, 2]]  # suffix's own row still drafts


def test_a_table_with_ids_outside_its_vocabulary_is_refused(tables, caplog):
    write_table(tables, [[1, 2, 3, 200]] * 3, vocab=100)
    with pytest.raises(StaticTableError, match="not all below its vocabulary size 100"):
        StaticTable.load(tables / "test.npz")
    write_table(tables, [[1, 2, 3, 4]] * 3, vocab=100)  # sound, but not this model's vocabulary
    with caplog.at_level(logging.WARNING, logger="engine"):
        chat = drafter()
    assert "vocabulary of 100 tokens, this model has 256" in caplog.text
    chat.reset([9, 1, 2, 3])
    assert chat.propose(8).rows == []


def test_greedy_output_with_table_rows_equals_plain(tables):
    model = make_tiny_llama(seed=1)
    prompt = [(i * 37 + 11) % 250 + 3 for i in range(30)]
    expected = reference_greedy(model, prompt, 40)
    # a table that knows stretches of the answer, and one stretch it gets wrong
    wrong = [expected[10], expected[11], expected[12], (expected[13] + 1) % VOCAB]
    write_table(tables, [expected[:10] + expected[14:30]] * 2 + [wrong] * 3)
    for adaptive in (False, True):
        settings = DraftSettings(
            drafter="suffix-static", draft_count=6, ngram_min=1, adaptive=adaptive
        )
        table = static_ngrams.shipped_table(TOKENIZER, VOCAB)
        got, results = speculative(model, prompt, 40, settings, static_table=table)
        assert got == expected, adaptive
        assert sum(r.accepted for r in results) > 0, "no table row was ever accepted"


def test_greedy_output_with_alternative_rows_equals_plain(tables):
    from engine.loop.decode import Target, TokenChooser, speculative_decode
    from engine.settings import SamplingSettings

    model = make_tiny_llama(seed=1)
    prompt = [(i * 37 + 11) % 250 + 3 for i in range(30)]
    expected = reference_greedy(model, prompt, 40)  # 87 six times, then 176 again and again
    assert expected[5:7] == [87, 176] and set(expected[6:]) == {176}
    # the table's usual follower is wrong, its alternative right: after three 176s, 175 three
    # times and 176 twice
    write_table(tables, [[176] * 3 + [175]] * 3 + [[176] * 4] * 2)
    # suffix drafts only from matches of 32 tokens or more (none before the answer's end),
    # and no memory of earlier chats: the table's rows are the draft
    settings = DraftSettings(
        drafter="suffix-static",
        draft_count=4,
        ngram_order=32,
        ngram_min=32,
        options={"memory": False, "alternatives": 4},
    )
    chat = make_drafter(settings.validated())
    chat.attach_model(
        MODEL_KEY, static_table=static_ngrams.shipped_table(TOKENIZER, VOCAB), vocab_size=VOCAB
    )
    proposals = []
    propose = chat.propose
    chat.propose = lambda k: proposals.append(propose(k)) or proposals[-1]
    history = list(prompt)
    target = Target(model)
    target.prefill(history[:-1])
    chat.reset(history)
    chooser = TokenChooser(SamplingSettings())
    decoding = speculative_decode(
        target, chat, chooser, history, max_tokens=40, draft_count=4, eos_tokens=set()
    )
    results = list(decoding)
    assert history[len(prompt) :] == expected
    from_alternatives = [
        result.accepted
        for result, proposal in zip(results, proposals)
        if result.row >= len(proposal.rows) - proposal.alternatives
    ]
    assert sum(from_alternatives) >= 10, "the alternative rows were not what was kept"
