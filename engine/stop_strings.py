"""Stop strings: an answer ends where one of them first appears, and the text given out
ends just before it. One implementation for the server's ``stop`` and the app's setting."""

from __future__ import annotations

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
