"""Whose chat is it: client identities and the chat ids this server issues.

A **client** is what the server can tell apart: the API key it presented (when the server
has one), its network address and the OpenAI ``user`` field it sends. Its identity is a
digest of those; the engine keeps its cross-chat n-gram memory per client identity, so
one client's text is never drafted into another client's answer. The key and address
make its party, which ``user`` cannot change: what is kept or waits is shared between
parties first (engine/runtime/clients.py).

A **chat id** keeps a chat's KV cache between turns, and whoever can name a kept chat
can probe its text (how many prompt tokens were reused says how much of a guessed prompt
matched). So only ids this server issued are honoured: a random nonce signed with a
per-process secret and bound to the client identity it was issued to. A request that
sends any other ``chat_id`` (its own name for the chat, or another client's id) starts a
fresh chat under a new id; the response carries the id to send with the next turn
(``chat_id`` in the body, the first stream chunk, and the ``X-Draftless-Chat-Id``
header). The id stays a secret of the client, as a session token would.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

CHAT_ID_PREFIX = "chat-"
NONCE_BYTES = 16  # 128 random bits: not guessable
TAG_CHARS = 32  # 128 bits of HMAC-SHA256: not forgeable
CHAT_ID_HEADER = "X-Draftless-Chat-Id"


def digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "replace")).hexdigest()[:16]


def client_identity(api_key: str | None, peer: str | None, user: str | None) -> str:
    """The identity chats, cross-chat memory and places in the queue are kept under (the key
    never leaves it): ``<party>.<member>`` (engine/runtime/clients.py), the party a digest of the
    key and the address, the member one of those and ``user``."""
    party = digest("key" if api_key else "peer", api_key or "", peer or "")
    return f"{party}.{digest(party, user or '')}"


class ChatIds:
    """Issues chat ids and checks that one was issued to a given client."""

    def __init__(self, secret: bytes | None = None):
        self._secret = secret or secrets.token_bytes(32)

    def _tag(self, client: str, nonce: str) -> str:
        mac = hmac.new(self._secret, f"{client}\0{nonce}".encode(), hashlib.sha256)
        return mac.hexdigest()[:TAG_CHARS]

    def issue(self, client: str) -> str:
        nonce = secrets.token_hex(NONCE_BYTES)
        return f"{CHAT_ID_PREFIX}{nonce}{self._tag(client, nonce)}"

    def issued_to(self, chat_id: str, client: str) -> bool:
        body = chat_id.removeprefix(CHAT_ID_PREFIX)
        if body == chat_id or len(body) != 2 * NONCE_BYTES + TAG_CHARS:
            return False
        nonce, tag = body[: 2 * NONCE_BYTES], body[2 * NONCE_BYTES :]
        return hmac.compare_digest(tag, self._tag(client, nonce))

    def resolve(self, chat_id: str | None, client: str) -> str | None:
        """The chat id to answer under: ``chat_id`` if it was issued to ``client``, a new
        one if the client asked to keep a chat under any other name, None if it did not."""
        if chat_id is None or self.issued_to(chat_id, client):
            return chat_id
        return self.issue(client)
