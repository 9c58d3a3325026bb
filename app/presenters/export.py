"""A chat as a file: Markdown to read or share, JSON to keep everything.

Both hold the chat as shown (the chosen version of each message). In the Markdown file,
HTML a message holds (``<script>``, ``<b>``) is escaped so that a viewer shows it as the
text it was; code blocks and code spans stay as written. A reasoning model's thinking
(its ``<think>`` block) is marked as such: a quoted block headed "Thinking" above the
answer in Markdown, a ``thinking`` field beside the full ``content`` in JSON. The JSON
file also carries each answer's statistics and per-token provenance: which tokens were accepted
drafts, in which pass and at which draft position, and the characters each one made.
"""

from __future__ import annotations

import json
import re
import time

from ..views.markdown_code import outside_code
from ..views.thinking import split

FORMATS = {"markdown": ("Markdown", "md"), "json": ("JSON", "json")}


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds)) if seconds else ""


MARKUP = re.compile(r"<|&(?=#?\w+;)")  # what starts a tag or an entity
ESCAPED = {"<": "&lt;", "&": "&amp;"}


def markdown_text(text: str) -> str:
    """Markdown in which any HTML shows as text; fenced and indented code blocks and code
    spans are kept as they are (a viewer shows them literally already), found by
    ``app.views.markdown_code`` (markdown-it, a CommonMark parser)."""
    parts, last = [], 0
    for start, end in outside_code(text):
        parts += [text[last:start], MARKUP.sub(lambda m: ESCAPED[m.group()], text[start:end])]
        last = end
    return "".join(parts)


def chat_markdown(session, messages) -> str:
    lines = [f"# {markdown_text(session.title)}", ""]
    if session.created:
        lines += [f"*Draftless chat, started {_when(session.created)}*", ""]
    for message in messages:
        who = "You" if message.role == "user" else "Draftless"
        if message.role == "assistant" and message.model:
            who += f" ({markdown_text(message.model)})"
        lines += [f"## {who}", ""]
        parts = split(message.content) if message.role == "assistant" else None
        if parts is not None and parts.thinking is not None:
            thinking = markdown_text(parts.thinking_text.strip()).split("\n")
            lines += ["> **Thinking**", ">", *[f"> {line}".rstrip() for line in thinking], ""]
            content = parts.answer_text
        else:
            content = message.content
        lines += [markdown_text(content.rstrip()), ""]
    return "\n".join(lines).rstrip() + "\n"


def chat_json(session, messages, system_prompt: str | None = None) -> str:
    """The chat as one JSON object in the replay's conversation format (``id``,
    ``category`` "chat", OpenAI-style ``messages``, the chat's system prompt first), so
    ``python -m engine.bench.devices --conversations FILE`` predicts what Draftless would do
    for it on any device curve; each message also keeps what the app knows of it."""

    def one(message) -> dict:
        item = {"role": message.role, "content": message.content, "created": message.created}
        if message.role == "assistant":
            item.update(
                model=message.model,
                finish_reason=message.finish_reason,
                stats=message.stats,
                timing=message.timing,
            )
            parts = split(message.content)
            if parts.thinking is not None:
                item.update(thinking=parts.thinking_text, answer=parts.answer_text)
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

    system = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return (
        json.dumps(
            {
                "id": session.id,
                "category": "chat",
                "title": session.title,
                "created": session.created,
                "updated": session.updated,
                "messages": system + [one(m) for m in messages],
            },
            ensure_ascii=False,
            indent=2,
        )
        + "\n"
    )


def export_text(kind: str, session, messages, system_prompt: str | None = None) -> str:
    if kind == "json":
        return chat_json(session, messages, system_prompt)
    return chat_markdown(session, messages)
