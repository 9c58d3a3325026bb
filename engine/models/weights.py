"""A model folder's config checked against its weight files before anything is built.

A config.json is untrusted: ``num_hidden_layers: 3000000`` would make mlx-lm build three
million layers (memory grows until the process is killed) before the weights are even
read, and ``vocab_size: 0`` fails deep inside with an empty message. The safetensors
headers (a length, then JSON naming each tensor's shape) are read without the weights, and
the config's sizes must be positive and agree with them.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

from ..errors import EngineError

MAX_HEADER_BYTES = 100 << 20
SIZE_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "max_position_embeddings",
    "head_dim",
)
MAX_SIZE = 1 << 31
LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
EMBEDDING = re.compile(
    r"(?:^|\.)embed_tokens\.weight$|(?:^|\.)wte\.weight$|(?:^|\.)tok_embeddings\.weight$"
)


def weight_shapes(folder: Path) -> dict[str, list[int]]:
    """Every tensor's shape, from the headers of the folder's *.safetensors files."""
    shapes: dict[str, list[int]] = {}
    for file in sorted(folder.glob("*.safetensors")):
        try:
            if not file.is_file():  # a FIFO or a device would block or flood the reader
                raise ValueError("it is not a regular file")
            with open(file, "rb") as handle:
                prefix = handle.read(8)
                if len(prefix) < 8:
                    raise ValueError("it is shorter than a safetensors header")
                (length,) = struct.unpack("<Q", prefix)
                if length > MAX_HEADER_BYTES:
                    raise ValueError(f"its header claims {length:,} bytes")
                header = json.loads(handle.read(length))
            if not isinstance(header, dict):
                raise ValueError("its header is not a JSON object")
            for name, entry in header.items():
                if (
                    name != "__metadata__"
                    and isinstance(entry, dict)
                    and isinstance(entry.get("shape"), list)
                ):
                    shapes[name] = entry["shape"]
        except (OSError, ValueError, RecursionError) as error:  # UnicodeError is a ValueError
            raise EngineError(
                f"The weight file {file} is damaged ({error}). Download or convert the model again."
            ) from None
    return shapes


def check_sizes(config: dict, folder: Path) -> None:
    """Raise EngineError unless the config's sizes are sane and match the weights."""
    config_file = folder / "config.json"
    for field in SIZE_FIELDS:
        value = config.get(field)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_SIZE:
            raise EngineError(
                f"{config_file} says {field} = {value!r}; it must be a positive "
                "whole number. The folder's config.json is damaged or not meant for "
                "this model."
            )
    shapes = weight_shapes(folder)
    layers = {int(match.group(1)) for name in shapes if (match := LAYER.search(name))}
    wanted = config.get("num_hidden_layers")
    if wanted is not None and layers and wanted > max(layers) + 1:
        raise EngineError(
            f"{config_file} says the model has {wanted:,} layers, but its weights "
            f"hold {max(layers) + 1}. The config.json does not belong to these weights."
        )
    vocab = config.get("vocab_size")
    embeddings = [shape for name, shape in shapes.items() if EMBEDDING.search(name)]
    if vocab is not None and embeddings and embeddings[0] and embeddings[0][0] != vocab:
        raise EngineError(
            f"{config_file} says vocab_size = {vocab:,}, but the token embedding in "
            f"the weights has {embeddings[0][0]:,} rows. The config.json does not "
            "belong to these weights."
        )
