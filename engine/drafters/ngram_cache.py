"""`ngram-cache`: llama.cpp's lookup decoding (``--spec-type ngram-cache``, common/ngram-cache).

Three n-gram → next-token count caches:
- **context**: n-grams of sizes ``ngram_min..ngram_order`` (default 1..4, at most 4) of
  this conversation (prompt, answers, later turns);
- **dynamic**: the same n-grams over everything this user's model generated in earlier
  chats, persisted in the user data directory ($DRAFTLESS_DATA_DIR overrides), one file
  per model (``dynamic_cache_path``); generated tokens are counted in as they come and the
  file is saved when the next turn or chat starts and when the service shuts down (it owns
  the stores);
- **static**: 2-grams read from ``static_cache_path(model_key)`` in the same folder, if
  that file exists (write one with ``NgramCounts.from_tokens(tokens, 2, 2).save(path)``),
  used to validate candidates.

Drafting goes token by token (each drafted token extends the context for the next), as
``common_ngram_cache_draft``: try the context cache with the **lax** thresholds, then the
dynamic cache with the **strict** ones, then the static cache alone; stop at the first
position where none gives a token. For each cache the longest n-gram is tried first; its
candidate is the follower maximising ``count × (100 × static count, or 1 if the static
cache never saw it)`` (without a static cache, equal counts go to the most recently
counted); it is used only if the n-gram's total count reaches the minimum sample size and
the candidate's share reaches the minimum percentage for that n-gram size:

    n:                1   2   3   4
    lax sample size   2   2   1   1      lax percent    66  50  50  50
    strict sample     4   3   2   2      strict percent 75  66  66  66

The static cache alone uses the lax thresholds of n = 2.

Options: ``dynamic`` (default true: read and grow the cross-chat cache), ``static``
(default true: use the model's static cache if there is one). Where the files live and
how large the cross-chat cache may grow are the engine's choice, never a request's: a
request's options name no path, and one client cannot shrink or swell the memory that
every chat shares. The dynamic cache keeps ``MAX_ENTRIES`` n-grams (100,000; the lowest
``total count × n`` go first, as llama.cpp's eviction). ``draft_count`` caps the draft
length.

Memory budget: the dynamic cache is bounded in memory too, not only in its file: past
``MAX_ENTRIES`` + 25 % n-grams the least used n-grams are evicted, and past twice that
many (n-gram, follower) counts the rarest followers of much-followed n-grams go first
(their totals stay, so drafting does not change until the memory is saved and read back).
At most 125,000 n-grams and 250,000 counts (see tests/measure_drafter_memory.py for
the figures at 100k and 1M tokens of history).

Cache files are untrusted: an entry whose token ids are not integers in the model's
vocabulary, or whose counts are not positive integers, is dropped. A dynamic file that
cannot be read (not a regular file, too large, not JSON), or that held such entries, is
renamed beside itself
(``<name>.corrupt-<date>-<time>``) before anything is written, and this is said once (a
warning of the ``engine`` logger); a file that cannot be renamed is left alone and never written over.
A static file that cannot be read is reported and ignored. Never fatal.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import EngineError, warn
from ..paths import data_dir
from ..tokens import is_token_id
from ..untrusted import move_aside, read_regular_file, write_atomic
from ._counts import FollowerCounts
from ._options import Option
from .base import Drafter, Proposal
from .stores import DrafterStores

NGRAM_MAX = 4
NGRAM_STATIC = 2
MIN_SAMPLE_LAX = (2, 2, 1, 1)
MIN_PERCENT_LAX = (66, 50, 50, 50)
MIN_SAMPLE_STRICT = (4, 3, 2, 2)
MIN_PERCENT_STRICT = (75, 66, 66, 66)
FILE_FORMAT = "draftless-ngram-cache"
FILE_VERSION = 1
MAX_ENTRIES = 100_000
PAIRS_PER_ENTRY = 2  # follower counts allowed per n-gram kept, on average, in memory
PAIR_CHECK = 4096
FOLLOWERS_KEPT = 8  # of an n-gram's followers, when follower counts are over budget
ID_LIMIT = 1 << 31  # token ids read before the model's vocabulary is known stay below this
MAX_COUNT = 1 << 53
MAX_FILE_BYTES = 256 << 20  # far above what MAX_ENTRIES allows (~40 bytes an entry)


class NgramCounts(FollowerCounts):
    """The follower table, saved to and loaded from a cache file."""

    dropped = 0  # entries left out by ``load`` (bad token ids or counts)

    @classmethod
    def from_tokens(cls, tokens, n_min: int, n_max: int) -> "NgramCounts":
        counts = cls()
        counts.update(list(tokens), 0, n_min, n_max)
        return counts

    def pairs(self) -> int:
        """How many (n-gram, follower) counts are held: memory grows with these."""
        return sum(len(part) for part in self.parts.values())

    def evict(self, max_entries: int, max_pairs: int | None = None) -> int:
        """Keep the ``max_entries`` most used n-grams (highest total count × n); then, while
        more than ``max_pairs`` follower counts are held, first forget the rarest followers
        of n-grams with more than ``FOLLOWERS_KEPT`` (totals and the drafted follower stay,
        so drafting is unchanged), then the least used n-grams. Returns n-grams dropped."""
        over = max_pairs is not None and self.pairs() > max_pairs
        if len(self.parts) <= max_entries and not over:
            return 0
        ranked = sorted(self.parts, key=lambda g: self.best[g][0] * len(g), reverse=True)
        keep = ranked[:max_entries]
        if over:
            self._trim_followers(keep)
            held, last = 0, 0
            for last, ngram in enumerate(keep):
                held += len(self.parts[ngram])
                if held > max_pairs:
                    keep = keep[:last]
                    break
        kept = set(keep)
        # new dicts rather than deletions: a dict never gives back the room of deleted keys
        self.parts = {g: part for g, part in self.parts.items() if g in kept}
        self.best = {g: self.best[g] for g in self.parts}
        return len(ranked) - len(kept)

    def _trim_followers(self, ngrams) -> None:
        for ngram in ngrams:
            part = self.parts[ngram]
            if len(part) > FOLLOWERS_KEPT:
                kept = {self.best[ngram][1]}  # the follower it drafts, then the most counted
                for token in sorted(part, key=part.get, reverse=True):
                    if len(kept) == FOLLOWERS_KEPT:
                        break
                    kept.add(token)
                self.parts[ngram] = {t: c for t, c in part.items() if t in kept}

    def save(self, path, max_entries: int | None = None) -> None:
        """Atomic, durable write, so neither a crash nor a power cut leaves half a file."""
        if max_entries is not None:
            self.evict(max_entries)
        entries = [
            [list(g), [x for tc in part.items() for x in tc]] for g, part in self.parts.items()
        ]
        write_atomic(
            path,
            json.dumps(
                {"format": FILE_FORMAT, "version": FILE_VERSION, "entries": entries},
                separators=(",", ":"),
            ),
        )

    @classmethod
    def load(cls, path, vocab_size: int | None = None) -> "NgramCounts":
        """Read a cache file; raise ValueError/OSError if it is missing or not a cache file.

        Entries whose token ids are not in ``[0, vocab_size)`` (any id below 2**31 when the
        vocabulary is not known) or whose counts are not positive integers are dropped;
        ``dropped`` says how many.
        """
        data = json.loads(read_regular_file(path, MAX_FILE_BYTES).decode("utf-8"))
        if not isinstance(data, dict) or data.get("format") != FILE_FORMAT:
            raise ValueError("not a Draftless n-gram cache file")
        if data.get("version") != FILE_VERSION:
            raise ValueError(f"unsupported version {data.get('version')!r}")
        entries = data.get("entries")
        if not isinstance(entries, list):
            raise ValueError("no list of entries")
        limit = vocab_size or ID_LIMIT
        counts = cls()
        counts.dropped = 0
        for entry in entries:
            if not (
                isinstance(entry, list)
                and len(entry) == 2
                and isinstance(entry[0], list)
                and isinstance(entry[1], list)
            ):
                raise ValueError("malformed entry")
            ngram, flat = entry
            if (
                not 0 < len(ngram) <= NGRAM_MAX
                or len(flat) % 2
                or not all(is_token_id(t, limit) for t in ngram)
                or not all(is_token_id(t, limit) for t in flat[0::2])
                or not all(is_token_id(c, MAX_COUNT) and c > 0 for c in flat[1::2])
            ):
                counts.dropped += 1
                continue
            key = tuple(int(t) for t in ngram)
            for i in range(0, len(flat), 2):
                counts.add(key, int(flat[i]), int(flat[i + 1]))
        return counts


def load_or_warn(
    path, vocab_size: int | None = None, keep_aside: bool = False
) -> NgramCounts | None:
    """The cache in ``path``, or None when it exists but cannot be used (said once).

    ``keep_aside`` (for files this process will write again): a file that cannot be read,
    or that held entries outside the vocabulary, is renamed beside itself first, so saving
    never overwrites it; what could be read is returned. If it cannot be renamed, None.
    """
    path = Path(path)
    if not path.exists():
        return NgramCounts()
    try:
        counts = NgramCounts.load(path, vocab_size)
    except (
        OSError,
        ValueError,
        TypeError,
        RecursionError,
    ) as error:  # UnicodeError is a ValueError
        counts, problem = None, f"it cannot be read ({error})"
    else:
        if not counts.dropped:
            return counts
        problem = (
            f"{counts.dropped} of its entries hold token ids outside this model's "
            "vocabulary or bad counts; they were dropped"
        )
    if not keep_aside:
        warn(
            f"Ignoring the n-gram cache {path}: {problem}."
            if counts is None
            else f"The n-gram cache {path}: {problem}."
        )
        return counts
    try:
        moved = move_aside(path)
    except OSError as error:
        warn(
            f"The n-gram memory {path} is not used: {problem}, and it could not be moved "
            f"aside ({error}); it is left as it is and will not be written over."
        )
        return None
    fresh = (
        f"its {len(counts):,} other n-grams are kept"
        if counts
        else "a new, empty memory was started"
    )
    warn(
        f"The n-gram memory {path}: {problem}. The file was kept as {moved.name} "
        f"beside it and {fresh}."
    )
    return counts if counts is not None else NgramCounts()


def dynamic_cache_path(model_key: str, folder: Path | None = None) -> Path:
    """The cross-chat cache of one model (``model_key`` is file-name safe) in ``folder``
    (default: the user's data folder)."""
    return (folder or data_dir()) / "ngram-cache" / f"{model_key}.json"


def static_cache_path(model_key: str, folder: Path | None = None) -> Path:
    """The static 2-gram cache of one model, used if it exists."""
    return (folder or data_dir()) / "ngram-cache" / f"{model_key}.static.json"


class _DynamicStore:
    """One dynamic cache file, shared by the chats of one ``DrafterStores`` owner.

    In memory it holds at most ``MAX_ENTRIES`` + a quarter n-grams and about twice as
    many follower counts: past that the least used are evicted (as when saving), so memory
    stays bounded however long it runs.
    """

    def __init__(self, path: Path | None, vocab_size: int | None = None):
        """``path`` None: a memory of its own that starts empty and is never saved."""
        self.path = path
        self.max_entries = MAX_ENTRIES
        loaded = None if path is None else load_or_warn(path, vocab_size, keep_aside=True)
        self.writable = loaded is not None  # never write over a file that was not read
        self.counts = loaded if loaded is not None else NgramCounts()
        self.dirty = bool(getattr(loaded, "dropped", 0))  # write the cleaned memory back
        self.since_check = PAIR_CHECK
        self.bound()

    def bound(self, added: int = 0) -> None:
        """Evict once past the budget + a quarter (``added``: tokens just counted in; the
        follower counts are summed only every ``PAIR_CHECK`` tokens, as that walks them all)."""
        slack = self.max_entries // 4
        self.since_check += added
        over = len(self.counts) > self.max_entries + slack
        if not over and self.since_check >= PAIR_CHECK:
            self.since_check = 0
            over = self.counts.pairs() > PAIRS_PER_ENTRY * (self.max_entries + slack)
        if over:
            self.counts.evict(self.max_entries, PAIRS_PER_ENTRY * self.max_entries)

    def save(self) -> None:
        if not self.dirty or not self.writable:
            return
        try:
            self.counts.save(self.path, self.max_entries)
            self.dirty = False
        except OSError as error:
            warn(f"Could not save the n-gram memory {self.path}: {error}")


def shared_dynamic_store(
    stores: DrafterStores, model_key: str, vocab_size: int | None
) -> _DynamicStore:
    """The cross-chat memory of ``model_key`` that ``stores`` keeps (one per file, shared by
    every drafter that reads it)."""
    return stores.get(
        dynamic_cache_path(model_key, stores.folder),
        lambda path: _DynamicStore(path if stores.persistent else None, vocab_size),
    )


def _try_draft(
    cache: NgramCounts,
    ngrams: list[tuple],
    static_part: dict | None,
    min_sample,
    min_percent,
    n_min: int,
):
    for ngram in reversed(ngrams):  # longest first
        best = cache.best.get(ngram)
        if best is None:
            continue
        total = best[0]
        index = len(ngram) - 1
        if total < min_sample[index]:
            continue
        if static_part:
            part = cache.parts[ngram]
            token, top, top_score = None, 0, 0
            for candidate, count in part.items():
                score = count * (100 * static_part[candidate] if candidate in static_part else 1)
                if score > top_score:
                    token, top, top_score = candidate, count, score
        else:
            token, top = best[1], best[2]
        if 100 * top < min_percent[index] * total:
            continue
        return token
    return None


def _try_static(static: NgramCounts, ngram: tuple):
    best = static.best.get(ngram)
    if best is None:
        return None
    total, token, top = best
    if (
        total < MIN_SAMPLE_LAX[NGRAM_STATIC - 1]
        or 100 * top < MIN_PERCENT_LAX[NGRAM_STATIC - 1] * total
    ):
        return None
    return token


class NgramCacheDrafter(Drafter):
    name = "ngram-cache"
    summary = "llama.cpp lookup: context (lax) → cross-chat dynamic (strict) → static n-gram caches"
    measurement_options = {"dynamic": False}
    options = {"dynamic": Option(True), "static": Option(True)}

    def __init__(self, settings):
        super().__init__(settings)
        self.n_min = max(1, settings.ngram_min)
        self.n_max = min(NGRAM_MAX, settings.ngram_order)
        if self.n_min > self.n_max:
            raise EngineError(
                f"ngram-cache: n-grams go up to {NGRAM_MAX} tokens; "
                f"ngram_min {settings.ngram_min} is too large."
            )
        self.use_dynamic = self.option["dynamic"]
        self.use_static = self.option["static"]
        self.static = NgramCounts()
        self.model_key: str | None = None
        self.stores = DrafterStores()  # the service's, once attached
        self.vocab_size: int | None = None
        self.store: _DynamicStore | None = None
        self.context = NgramCounts()
        self.tokens: list[int] = []

    def use_model(self, model_key: str, *, bigram=None, stores=None, vocab_size=None) -> None:
        """Which model's token ids these are (names the dynamic file; ids read from it must
        lie below ``vocab_size``), and whose stores."""
        self.model_key = model_key
        self.vocab_size = vocab_size
        if stores is not None and stores is not self.stores:
            if self.store is not None:
                self.store.save()  # anything counted before the owner's stores came
            self.stores = stores
            self.store = None  # found again in the owner's stores (shared by its chats)
        static = static_cache_path(model_key, self.stores.folder)
        if self.use_static and static.exists():
            self.static = load_or_warn(static, vocab_size) or NgramCounts()

    def _dynamic_store(self) -> _DynamicStore | None:
        if not self.use_dynamic:
            return None
        if self.store is None:
            if self.model_key is None:
                return None
            self.store = shared_dynamic_store(self.stores, self.model_key, self.vocab_size)
        return self.store

    def flush(self) -> None:
        """Save the dynamic cache if it grew."""
        store = self._dynamic_store()
        if store is not None:
            store.save()

    def reset(self, prompt_tokens):
        self.flush()
        self.context = NgramCounts()
        self.tokens = []
        self._append(prompt_tokens, generated=False)

    def extend(self, tokens):
        self.flush()
        self._append(tokens, generated=False)

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None):
        self._append(emitted, generated=True)

    def _append(self, new_tokens, generated: bool):
        start = len(self.tokens)
        self.tokens.extend(int(t) for t in new_tokens)
        self.context.update(self.tokens, start, self.n_min, self.n_max)
        if generated:
            store = self._dynamic_store()
            if store is not None:
                store.counts.update(self.tokens, start, self.n_min, self.n_max)
                store.dirty = True
                store.bound(len(self.tokens) - start)

    def propose(self, k):
        tokens = self.tokens
        if len(tokens) < NGRAM_STATIC or k <= 0:
            return Proposal()
        store = self._dynamic_store()
        dynamic = store.counts if store is not None else None
        tail = tokens[-NGRAM_MAX:]
        draft: list[int] = []
        while len(draft) < k:
            seq = tail + draft
            static_key = tuple(seq[-NGRAM_STATIC:])
            static_part = self.static.parts.get(static_key) if self.static.parts else None
            ngrams = [tuple(seq[-n:]) for n in range(self.n_min, self.n_max + 1) if n <= len(seq)]
            token = _try_draft(
                self.context, ngrams, static_part, MIN_SAMPLE_LAX, MIN_PERCENT_LAX, self.n_min
            )
            if token is None and dynamic is not None and len(dynamic):
                token = _try_draft(
                    dynamic, ngrams, static_part, MIN_SAMPLE_STRICT, MIN_PERCENT_STRICT, self.n_min
                )
            if token is None and self.static.parts:
                token = _try_static(self.static, static_key)
            if token is None:
                break
            draft.append(token)
        return Proposal([draft] if draft else [])
