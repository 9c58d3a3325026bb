"""`ngram-cache`: llama.cpp's lookup decoding (``--spec-type ngram-cache``, common/ngram-cache).

Three n-gram → next-token count caches:
- **context**: n-grams of sizes ``ngram_min..ngram_order`` (default 1..4, at most 4) of
  this conversation (prompt, answers, later turns);
- **dynamic**: the same n-grams over everything this user's model generated in earlier
  chats, persisted in the user data directory ($DRAFTLESS_DATA_DIR overrides), one file
  per model; generated tokens are counted in as they come and the file is saved when the
  next turn or chat starts and when the service shuts down (it owns the stores);
- **static**: 2-grams loaded from a file (option ``static_path``; write one with
  ``NgramCounts.from_tokens(tokens, 2, 2).save(path)``), used to validate candidates.

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

Options: ``dynamic`` (default true: read and grow the cross-chat cache), ``dynamic_path``
(default: the data directory), ``static_path`` (default none), ``max_entries`` (n-grams
kept in the dynamic file, default 200000; the lowest ``total count × n`` go first, as
llama.cpp's eviction). A cache file that cannot be read is reported (logged as a warning)
and ignored, never fatal. ``draft_count`` caps the draft length.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import warnings
from pathlib import Path

from ..errors import EngineError
from ..paths import data_dir
from ._counts import FollowerCounts
from ._options import bool_option, int_option
from .base import Drafter
from .stores import DrafterStores

log = logging.getLogger(__name__)

NGRAM_MAX = 4
NGRAM_STATIC = 2
MIN_SAMPLE_LAX = (2, 2, 1, 1)
MIN_PERCENT_LAX = (66, 50, 50, 50)
MIN_SAMPLE_STRICT = (4, 3, 2, 2)
MIN_PERCENT_STRICT = (75, 66, 66, 66)
FILE_FORMAT = "draftless-ngram-cache"
FILE_VERSION = 1


class NgramCounts(FollowerCounts):
    """The follower table, saved to and loaded from a cache file."""

    @classmethod
    def from_tokens(cls, tokens, n_min: int, n_max: int) -> "NgramCounts":
        counts = cls()
        counts.update(list(tokens), 0, n_min, n_max)
        return counts

    def merge(self, other: "NgramCounts") -> None:
        for ngram, part in other.parts.items():
            for token, count in part.items():
                self.add(ngram, token, count)

    def evict(self, max_entries: int) -> int:
        if len(self.parts) <= max_entries:
            return 0
        ranked = sorted(self.parts, key=lambda g: self.best[g][0] * len(g), reverse=True)
        for ngram in ranked[max_entries:]:
            del self.parts[ngram]
            del self.best[ngram]
        return len(ranked) - max_entries

    def save(self, path, max_entries: int | None = None) -> None:
        """Atomic write (temp file + rename), so a crash never leaves half a file."""
        if max_entries is not None:
            self.evict(max_entries)
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        entries = [[list(g), [x for tc in part.items() for x in tc]] for g, part in self.parts.items()]
        payload = json.dumps({"format": FILE_FORMAT, "version": FILE_VERSION, "entries": entries},
                             separators=(",", ":"))
        handle, temp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(payload)
            os.replace(temp, path)
        except BaseException:
            try:
                os.unlink(temp)
            except OSError:
                pass
            raise

    @classmethod
    def load(cls, path) -> "NgramCounts":
        """Read a cache file; raise ValueError/OSError if it is missing or corrupt."""
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("format") != FILE_FORMAT:
            raise ValueError("not a Draftless n-gram cache file")
        if data.get("version") != FILE_VERSION:
            raise ValueError(f"unsupported version {data.get('version')!r}")
        counts = cls()
        for ngram, flat in data["entries"]:
            if not ngram or len(ngram) > NGRAM_MAX or len(flat) % 2:
                raise ValueError("malformed entry")
            key = tuple(int(t) for t in ngram)
            for i in range(0, len(flat), 2):
                count = int(flat[i + 1])
                if count <= 0:
                    raise ValueError("non-positive count")
                counts.add(key, int(flat[i]), count)
        return counts


def load_or_warn(path) -> NgramCounts | None:
    """The cache in ``path``; None (after a warning) when it exists but cannot be read."""
    path = Path(path)
    if not path.exists():
        return NgramCounts()
    try:
        return NgramCounts.load(path)
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as error:
        message = f"Ignoring the n-gram cache {path}: it cannot be read ({error})."
        log.warning(message)
        warnings.warn(message, RuntimeWarning, stacklevel=2)
        return None


class _DynamicStore:
    """One dynamic cache file, shared by the chats of one ``DrafterStores`` owner."""

    def __init__(self, path: Path, max_entries: int):
        self.path = path
        self.max_entries = max_entries
        loaded = load_or_warn(path)
        self.counts = loaded if loaded is not None else NgramCounts()
        self.dirty = False

    def save(self) -> None:
        if not self.dirty:
            return
        try:
            self.counts.save(self.path, self.max_entries)
            self.dirty = False
        except OSError as error:
            log.warning("Could not save the n-gram cache %s: %s", self.path, error)


def _try_draft(cache: NgramCounts, ngrams: list[tuple], static_part: dict | None,
               min_sample, min_percent, n_min: int):
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
    if total < MIN_SAMPLE_LAX[NGRAM_STATIC - 1] or 100 * top < MIN_PERCENT_LAX[NGRAM_STATIC - 1] * total:
        return None
    return token


class NgramCacheDrafter(Drafter):
    name = "ngram-cache"
    summary = "llama.cpp lookup: context (lax) → cross-chat dynamic (strict) → static n-gram caches"
    measurement_options = {"dynamic": False}

    def __init__(self, settings):
        super().__init__(settings)
        self.n_min = max(1, settings.ngram_min)
        self.n_max = min(NGRAM_MAX, settings.ngram_order)
        if self.n_min > self.n_max:
            raise EngineError(f"ngram-cache: n-grams go up to {NGRAM_MAX} tokens; "
                              f"ngram_min {settings.ngram_min} is too large.")
        self.use_dynamic = bool_option(settings, self.name, "dynamic", True)
        self.max_entries = int_option(settings, self.name, "max_entries", 200_000, 1, 50_000_000)
        self.dynamic_path = settings.options.get("dynamic_path")
        static_path = settings.options.get("static_path")
        if static_path is not None and not isinstance(static_path, (str, os.PathLike)):
            raise EngineError(f"ngram-cache: option 'static_path' must be a file path; got {static_path!r}.")
        self.static = NgramCounts()
        if static_path:
            loaded = load_or_warn(static_path) if Path(static_path).exists() else None
            if loaded is None and not Path(static_path).exists():
                log.warning("ngram-cache: static cache %s does not exist; ignored.", static_path)
            self.static = loaded or NgramCounts()
        self.model_key: str | None = None
        self.stores = DrafterStores()  # the service's, once attached
        self.store: _DynamicStore | None = None
        self.context = NgramCounts()
        self.tokens: list[int] = []

    def use_model(self, model_key: str, *, bigram=None, stores=None) -> None:
        """Which model's token ids these are (names the dynamic file), and whose stores."""
        self.model_key = model_key
        if stores is not None and stores is not self.stores:
            if self.store is not None:
                self.store.save()  # anything counted before the owner's stores came
            self.stores = stores
            self.store = None  # found again in the owner's stores (shared by its chats)

    def _dynamic_store(self) -> _DynamicStore | None:
        if not self.use_dynamic:
            return None
        if self.store is None:
            path = self.dynamic_path
            if path is None:
                if self.model_key is None:
                    return None
                path = data_dir() / "ngram-cache" / f"{self.model_key}.json"
            self.store = self.stores.get(Path(path), lambda p: _DynamicStore(p, self.max_entries))
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

    def propose(self, history, k):
        tokens = self.tokens
        if len(tokens) < NGRAM_STATIC or k <= 0:
            return []
        store = self._dynamic_store()
        dynamic = store.counts if store is not None else None
        tail = tokens[-NGRAM_MAX:]
        draft: list[int] = []
        while len(draft) < k:
            seq = tail + draft
            static_key = tuple(seq[-NGRAM_STATIC:])
            static_part = self.static.parts.get(static_key) if self.static.parts else None
            ngrams = [tuple(seq[-n:]) for n in range(self.n_min, self.n_max + 1) if n <= len(seq)]
            token = _try_draft(self.context, ngrams, static_part, MIN_SAMPLE_LAX, MIN_PERCENT_LAX,
                               self.n_min)
            if token is None and dynamic is not None and len(dynamic):
                token = _try_draft(dynamic, ngrams, static_part, MIN_SAMPLE_STRICT,
                                   MIN_PERCENT_STRICT, self.n_min)
            if token is None and self.static.parts:
                token = _try_static(self.static, static_key)
            if token is None:
                break
            draft.append(token)
        return [draft] if draft else []
