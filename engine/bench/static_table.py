"""Build the static n-gram table (``engine/drafters/_static_table.py``) from the tuning split.

``python -m engine.bench.static_table --out resources/ngrams/SmolLM2-135M-Instruct.npz``
tokenizes every assistant answer of the **tuning** split of each public source
(``conversations.py``: ShareGPT V3, MT-bench's reference answers, HumanEval's solutions) with
the embedded model's tokenizer, counts each context of 2 and 3 tokens and the token after it,
and keeps, per context seen at least ``--min-count`` times, its most frequent follower where
that follower's share is at least ``--min-share``. ``--exclude FILE`` leaves out the
conversations of a conversations file (to replay a tuning sample against a table that never
saw it). Only the tuning split is read: dev and the rest are never consulted.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from ..drafters._static_table import ID_BITS, ORDERS, SHARE_SCALE, StaticTable
from ..errors import EngineError
from .conversations import SOURCES, read_conversations, split_of

# Chosen to keep the shipped file near 2 MB (470,172 contexts, 2.36 MB from the 4.28M tuning
# tokens), and checked against one larger table: contexts seen 2+ times whose top follower
# took 20%+ (924,725 contexts, 4.56 MB) replayed the tuning sample (151 chats, each table
# built without them) at 1.282x vs 1.287x on h100-7b-bf16 and 1.270x vs 1.252x on
# apple-m5max-70b-4bit: under 2%, so the smaller file ships.
MIN_COUNT = 3
MIN_SHARE = 0.3


def tuning_answers(tokenizer, exclude: set[str]) -> tuple[list[np.ndarray], int]:
    """Every tuning-split answer of every source, tokenized; and how many conversations."""
    answers, conversations = [], 0
    for source, read in SOURCES.items():
        for group, conversation in read():
            if split_of(source, group) != "tuning" or conversation["id"] in exclude:
                continue
            conversations += 1
            for message in conversation["messages"]:
                if message["role"] == "assistant":
                    ids = tokenizer.encode(message["content"], add_special_tokens=False)
                    answers.append(np.asarray(ids, dtype=np.uint64))
    return answers, conversations


def count_followers(answers: list[np.ndarray], n: int, min_count: int, min_share: float):
    """Sorted packed contexts of ``n`` tokens, their top followers and shares (255ths)."""
    pairs = []
    for ids in answers:
        if len(ids) <= n:
            continue
        key = np.zeros(len(ids) - n, dtype=np.uint64)
        for j in range(n + 1):  # the context's tokens, then the follower
            key = (key << np.uint64(ID_BITS)) | ids[j : len(ids) - n + j]
        pairs.append(key)
    pair, count = np.unique(np.concatenate(pairs), return_counts=True)
    context = pair >> np.uint64(ID_BITS)
    starts = np.flatnonzero(np.r_[True, context[1:] != context[:-1]])
    totals = np.add.reduceat(count, starts)
    # within each context, the last of the pairs ordered by count is the top follower
    order = np.lexsort((count, context))
    ends = np.r_[starts[1:], len(pair)] - 1
    top = order[ends]
    share = count[top] / totals
    keep = (totals >= min_count) & (share >= min_share)
    followers = (pair[top] & np.uint64((1 << ID_BITS) - 1)).astype(np.uint16)
    shares = np.clip(np.round(share * SHARE_SCALE), 1, SHARE_SCALE).astype(np.uint8)
    return context[starts][keep], followers[keep], shares[keep]


def build(
    tokenizer, model: str, vocab_size: int, exclude=(), min_count=MIN_COUNT, min_share=MIN_SHARE
):
    if vocab_size > 1 << ID_BITS:
        raise EngineError(f"{model}'s vocabulary ({vocab_size}) is over {1 << ID_BITS} tokens")
    answers, conversations = tuning_answers(tokenizer, set(exclude))
    orders = {n: count_followers(answers, n, min_count, min_share) for n in ORDERS}
    tokens = sum(len(a) for a in answers)
    return StaticTable(model, vocab_size, orders), conversations, len(answers), tokens


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m engine.bench.static_table", description=__doc__
    )
    parser.add_argument("--out", required=True, help="the .npz file to write")
    parser.add_argument(
        "--exclude", metavar="FILE", help="leave out this conversations file's chats"
    )
    parser.add_argument("--min-count", type=int, default=MIN_COUNT)
    parser.add_argument("--min-share", type=float, default=MIN_SHARE)
    args = parser.parse_args(argv)
    from ..models import load_model
    from ..tokens import output_size

    try:
        exclude = {c["id"] for c in read_conversations(args.exclude)} if args.exclude else set()
        loaded = load_model(None)
        table, conversations, answers, tokens = build(
            loaded.tokenizer,
            loaded.name,
            output_size(loaded.model),
            exclude,
            args.min_count,
            args.min_share,
        )
        table.save(args.out)
    except (EngineError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(
        f"{args.out}: {len(table)} contexts from {conversations} tuning conversations "
        f"({answers} answers, {tokens} tokens)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
