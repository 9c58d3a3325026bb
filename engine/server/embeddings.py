"""The embedding routes' bodies: OpenAI's ``/v1/embeddings``, Ollama's ``/api/embed`` and
its older ``/api/embeddings``. Each input's vector is the model's mean-pooled, normalised
last hidden state (``engine.loop.scoring.embedding``), of the model's hidden size."""

from __future__ import annotations

import base64
import struct

from .requests import ApiError, check_fields, typed

OPENAI_FIELDS = {
    "model": "string",
    "input": None,
    "encoding_format": "string",
    "dimensions": "integer",
    "user": "string",
}
OLLAMA_FIELDS = {
    "model": "string",
    "input": None,
    "truncate": "boolean",
    "options": "object",
    "keep_alive": None,
    "dimensions": "integer",
}
OLLAMA_OLD_FIELDS = {"model": "string", "prompt": "string", "options": "object", "keep_alive": None}


def _bad(message: str, param: str) -> ApiError:
    return ApiError(400, message, param=param)


def _no_dimensions(body: dict) -> None:
    if body.get("dimensions") is not None:
        raise _bad(
            "'dimensions' is not supported: the vectors have the model's hidden size.",
            "dimensions",
        )


def inputs_of(raw, token_ids: bool = True) -> list:
    """The inputs to embed: a string, a list of strings, or (OpenAI) a list of token ids
    or of token-id lists; each non-empty."""
    if isinstance(raw, str):
        raw = [raw]
    elif token_ids and isinstance(raw, list) and raw and all(isinstance(t, int) for t in raw):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise _bad("'input' must be a string or a non-empty list of strings.", "input")
    inputs = []
    for index, item in enumerate(raw):
        if isinstance(item, str) and typed(item, "string", f"input[{index}]").strip():
            inputs.append(item)
        elif (
            token_ids
            and isinstance(item, list)
            and item
            and all(isinstance(t, int) and not isinstance(t, bool) for t in item)
        ):
            inputs.append(tuple(item))
        else:
            raise _bad(f"input[{index}] is empty or not text: there is nothing to embed.", "input")
    return inputs


def openai_request(body) -> tuple[list, str]:
    """(the inputs, the encoding: "float" or "base64") of an OpenAI embeddings body."""
    check_fields(body, OPENAI_FIELDS)
    _no_dimensions(body)
    encoding = body.get("encoding_format") or "float"
    if encoding not in ("float", "base64"):
        raise _bad("'encoding_format' must be \"float\" or \"base64\".", "encoding_format")
    return inputs_of(body.get("input")), encoding


def openai_body(model: str, vectors: list[list[float]], tokens: int, encoding: str) -> dict:
    def shown(vector):
        if encoding == "base64":  # little-endian float32, as OpenAI sends it
            return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
        return vector

    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": shown(vector)}
            for i, vector in enumerate(vectors)
        ],
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def ollama_request(body, older: bool) -> tuple[list, bool]:
    """(the inputs, whether to cut one longer than the context) of an Ollama body:
    ``/api/embed`` (``input``, ``truncate``) or the older ``/api/embeddings`` (``prompt``)."""
    if older:
        check_fields(body, OLLAMA_OLD_FIELDS)
        return inputs_of(body.get("prompt"), token_ids=False), True
    check_fields(body, OLLAMA_FIELDS)
    _no_dimensions(body)
    return inputs_of(body.get("input"), token_ids=False), body.get("truncate") is not False
