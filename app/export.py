"""A chat as a file: Markdown to read or share, JSON to keep everything.

Both hold the chat as shown (the chosen version of each message). The JSON file also
carries each answer's statistics and per-token provenance: which tokens were accepted
drafts, in which pass and at which draft position, and the characters each one made.
"""

from __future__ import annotations

import json
import time

FORMATS = {"markdown": ("Markdown", "md"), "json": ("JSON", "json")}


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds)) if seconds else ""


def chat_markdown(session, messages) -> str:
    lines = [f"# {session.title}", ""]
    if session.created:
        lines += [f"*Draftless chat, started {_when(session.created)}*", ""]
    for message in messages:
        who = "You" if message.role == "user" else "Draftless"
        if message.role == "assistant" and message.model:
            who += f" ({message.model})"
        lines += [f"## {who}", "", message.content.rstrip(), ""]
    return "\n".join(lines).rstrip() + "\n"


def chat_json(session, messages) -> str:
    def one(message) -> dict:
        item = {"role": message.role, "content": message.content, "created": message.created}
        if message.role == "assistant":
            item.update(
                model=message.model,
                finish_reason=message.finish_reason,
                stats=message.stats,
                timing=message.timing,
            )
            if message.provenance is not None:
                item["tokens"] = [
                    {
                        "token": t.token,
                        "from_draft": t.from_draft,
                        "pass": t.pass_index,
                        "draft_position": t.draft_position,
                        "drafter": t.drafter,
                        "start": t.start,
                        "end": t.end,
                    }
                    for t in message.provenance.tokens
                ]
        return item

    return (
        json.dumps(
            {
                "title": session.title,
                "created": session.created,
                "updated": session.updated,
                "messages": [one(m) for m in messages],
            },
            ensure_ascii=False,
            indent=2,
        )
        + "\n"
    )


def export_text(kind: str, session, messages) -> str:
    return chat_json(session, messages) if kind == "json" else chat_markdown(session, messages)
