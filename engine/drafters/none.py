"""`none`: never drafts. Plain decoding through the same loop: the baseline."""

from .base import Drafter, Proposal


class NoDrafter(Drafter):
    name = "none"
    summary = "plain decoding through the same loop (the baseline)"
    drafts = False

    def reset(self, prompt_tokens):
        pass

    def propose(self, k):
        return Proposal()

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None):
        pass
