"""Build the static n-gram table (``engine/drafters/_static_table.py``) from the tuning split,
and write the corpus of public answers it is built from (``engine/runtime/static_ngrams.py``).

``python -m engine.bench.static_table --out resources/ngrams/SmolLM2-135M-Instruct.npz``
tokenizes every assistant answer of the **tuning** split of each public source
(``conversations.py``: ShareGPT V3, MT-bench's reference answers, HumanEval's solutions) with
the embedded model's tokenizer, counts each context of 2 and 3 tokens and the token after it,
and keeps, per context seen at least ``--min-count`` times, its most frequent followers (up to
``FOLLOWERS``; after the first, those with a share of at least ``--alternative-min-share``),
and whether the first one's share is at least ``--min-share``, which drafts it
(``static_ngrams.FollowerCounts``: the rules a table built at run time for another tokenizer
follows). The table records the
tokenizer's digest (``static_ngrams.tokenizer_digest``): every model of that tokenizer finds
it by that. ``--exclude FILE`` leaves
out the conversations of a conversations file (to replay a tuning sample against a table that
never saw it).

``--corpus-out resources/ngrams/public-answers.txt.xz`` writes the same answers, as text,
as the corpus that tables for other tokenizers are built from. Only the tuning split is
read: dev and the rest are never consulted.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import EngineError
from ..runtime.static_ngrams import (
    ALTERNATIVE_MIN_SHARE,
    MIN_COUNT,
    MIN_SHARE,
    FollowerCounts,
    count_all,
    encode_plain,
    tokenizer_digest,
    write_corpus,
)
from .conversations import SOURCES, read_conversations, split_of


def tuning_texts(exclude: set[str] = frozenset()) -> tuple[list[str], int]:
    """Every tuning-split answer of every source, as text; and how many conversations."""
    texts, conversations = [], 0
    for source, read in SOURCES.items():
        for group, conversation in read():
            if split_of(source, group) != "tuning" or conversation["id"] in exclude:
                continue
            conversations += 1
            texts += [m["content"] for m in conversation["messages"] if m["role"] == "assistant"]
    return texts, conversations


def build(
    tokenizer,
    model: str,
    vocab_size: int,
    exclude=(),
    min_count=MIN_COUNT,
    min_share=MIN_SHARE,
    tokenizer_id: str = "",
    alternative_min_share=ALTERNATIVE_MIN_SHARE,
):
    """The table of ``tokenizer`` (whose ``tokenizer_digest`` is ``tokenizer_id``) from the
    tuning answers, and how many conversations, answers and tokens it counted."""
    counts = FollowerCounts(
        vocab_size, min_count, min_share, alternative_min_share=alternative_min_share
    )
    texts, conversations = tuning_texts(set(exclude))
    for text in texts:
        counts.add(encode_plain(tokenizer, text))
    count_all(counts)
    return counts.table(model, tokenizer_id), conversations, counts.answers, counts.tokens


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m engine.bench.static_table", description=__doc__
    )
    parser.add_argument("--out", help="the .npz table to write (embedded model's tokenizer)")
    parser.add_argument("--corpus-out", help="the .txt.xz corpus of the answers to write")
    parser.add_argument(
        "--exclude", metavar="FILE", help="leave out this conversations file's chats"
    )
    parser.add_argument("--min-count", type=int, default=MIN_COUNT)
    parser.add_argument("--min-share", type=float, default=MIN_SHARE)
    parser.add_argument("--alternative-min-share", type=float, default=ALTERNATIVE_MIN_SHARE)
    args = parser.parse_args(argv)
    if not (args.out or args.corpus_out):
        parser.error("say what to write: --out, --corpus-out or both")
    try:
        exclude = {c["id"] for c in read_conversations(args.exclude)} if args.exclude else set()
        if args.corpus_out:
            texts, conversations = tuning_texts(exclude)
            size = write_corpus(texts, args.corpus_out)
            print(
                f"{args.corpus_out}: {len(texts)} answers of {conversations} tuning "
                f"conversations, {sum(map(len, texts))} characters, {size} bytes",
                file=sys.stderr,
            )
        if args.out:
            from ..models import load_model
            from ..tokens import output_size

            loaded = load_model(None)
            table, conversations, answers, tokens = build(
                loaded.tokenizer,
                loaded.name,
                output_size(loaded.model),
                exclude,
                args.min_count,
                args.min_share,
                tokenizer_digest(loaded.path),
                args.alternative_min_share,
            )
            table.save(args.out)
            orders = table.orders.values()
            drafting = sum(int(order.drafts.sum()) for order in orders)
            rows = sum(len(order.followers) for order in orders)
            print(
                f"{args.out}: {len(table)} contexts ({drafting} drafting) and "
                f"{rows} followers from {conversations} tuning conversations "
                f"({answers} answers, {tokens} tokens)",
                file=sys.stderr,
            )
    except (EngineError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
