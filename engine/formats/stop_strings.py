"""Stop strings: an answer ends where one of them first appears, and the text given out
ends just before it. One implementation for the server's ``stop`` and the app's setting,
and one for the figures of an answer so cut (``kept_figures``)."""

from __future__ import annotations

from dataclasses import replace

from ..stats import DecodeStats

# the most stop strings a request or the app's settings may hold, and their longest length
# (OpenAI's API takes up to 4; 256 characters bound the suffix scan ``StopMatcher`` does
# per token)
MAX_STOPS = 4
MAX_STOP_CHARS = 256


def valid_stop_strings(values) -> bool:
    """Whether ``values`` is a list or tuple of at most ``MAX_STOPS`` non-empty strings of
    at most ``MAX_STOP_CHARS`` characters each."""
    return (
        isinstance(values, (list, tuple))
        and len(values) <= MAX_STOPS
        and all(isinstance(s, str) and 0 < len(s) <= MAX_STOP_CHARS for s in values)
    )


class StopMatcher:
    """Cuts the text at the first stop string, holding back text that may begin one.

    The held text is shorter than the longest stop string, so each ``feed`` scans at most
    that much old text plus the new text: linear in the answer's length. (Stop strings are
    bounded by the request checks, so the suffix test below is bounded too.)
    """

    def __init__(self, stops: tuple[str, ...]):
        self.stops = stops
        self.held = ""
        self.stopped = False
        self.returned = 0  # characters given out so far

    def feed(self, text: str) -> str:
        if self.stopped:
            return ""
        if not self.stops:
            return self._out(text)
        window = self.held + text
        cuts = [cut for cut in (window.find(s) for s in self.stops) if cut >= 0]
        if cuts:
            self.stopped = True
            self.held = ""
            return self._out(window[: min(cuts)])
        keep = max(
            (
                k
                for s in self.stops
                for k in range(min(len(s) - 1, len(window)), 0, -1)
                if window.endswith(s[:k])
            ),
            default=0,
        )
        self.held = window[len(window) - keep :]
        return self._out(window[: len(window) - keep])

    def flush(self) -> str:
        out, self.held = self.held, ""
        return self._out(out)

    def _out(self, text: str) -> str:
        self.returned += len(text)
        return text


def kept_figures(stats: dict, timing: dict, passes, kept: int) -> tuple[dict, dict]:
    """An answer's figures (``DecodeStats.to_dict()``, ``timing_dict()``) counting only its
    first ``kept`` tokens, where a stop string cut it: the pass the cut falls in counts the
    tokens before the cut (and its drafts accepted among them), as a pass that wrote the
    end-of-answer token counts the tokens before that; passes run after the cut (the
    engine stops between passes, a little after) are not counted. ``passes``: the answer's
    ``PassEvent``s in order. The speed-up estimate keeps the curve's cost per second of
    decoding: scaled by the tokens kept and the seconds of the passes counted."""
    whole = DecodeStats.from_dict(stats, timing)
    if kept >= whole.emitted or not passes:
        return stats, timing
    cut = replace(
        whole,
        passes=0,
        drafted=0,
        accepted=0,
        emitted=0,
        decode_s=0.0,
        calls=0,
        gen_drafts=0,
        acc_drafts=0,
        position_drafted=[],
        position_accepted=[],
        accepted_length_counts=[],
        pass_sizes=[],
        ended=False,
    )
    left = kept
    for event in passes:
        if left <= 0:
            break
        emitted = min(event.emitted, left)
        cut.record_pass(event.drafted, min(event.accepted, emitted), emitted, event.seconds)
        left -= emitted
    cut.first_pass_s = whole.first_pass_s
    cut.tree_passes = min(whole.tree_passes, cut.passes)
    cut.queued_passes = min(whole.queued_passes, cut.passes)
    if whole.estimated_speedup and cut.decode_s > 0:
        plain_share = cut.emitted / (whole.emitted + int(whole.ended))
        cut.estimated_speedup = (
            whole.estimated_speedup * plain_share * whole.decode_s / cut.decode_s
        )
    else:
        cut.estimated_speedup = None
    return cut.to_dict(), cut.timing_dict()
