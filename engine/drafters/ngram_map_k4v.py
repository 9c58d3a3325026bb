"""`ngram-map-k4v`: llama.cpp's experimental ``--spec-type ngram-map-k4v``.

Like ``ngram-map-k`` (see that file: windows of ``n + m`` tokens record key → value hits,
``min_hits``, the per-key cap from the last acceptance), but each key keeps at most
**four** value m-grams with their counts (the first four distinct values seen; later new
values are ignored, as in llama.cpp).

Dominance rule (llama.cpp's): let ``top`` be the count of the most frequent value (ties:
the most recent) and ``rest`` the sum of the other values' counts. Draft ``top``'s value
only if ``rest == 0`` or ``top >= 2 * rest``, and only if the key was followed by values
at least ``min_hits`` times in total (llama.cpp counts key hits).

Options: ``n`` (default 12), ``m`` (default 48), ``min_hits`` (default 1),
``check_rate`` (default 1). ``draft_count`` caps the tokens sent per pass.
"""

from __future__ import annotations

from .ngram_map_k import NgramMapDrafter


class NgramMapK4VDrafter(NgramMapDrafter):
    name = "ngram-map-k4v"
    summary = (
        "llama.cpp ngram-map-k4v: up to 4 m-gram values per key; draft only a clearly dominant one"
    )
    max_values = 4

    def choose(self, values):
        ranked = sorted(values.items(), key=lambda item: (item[1][0], item[1][1]), reverse=True)
        value, (top, _) = ranked[0]
        rest = sum(entry[0] for _, entry in ranked[1:])
        if top + rest < self.min_hits:
            return None
        if rest and top < 2 * rest:
            return None
        return value
