"""A short curated list of mlx-community chat models the app offers to download.

Sizes are approximate (parameters × bits per weight, plus the tokenizer); the hub shows
the exact figure while downloading. Models whose KV cache cannot be rolled back would
decode plainly, so only plain-attention models are listed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CatalogModel:
    repo: str
    name: str
    parameters: str
    quantization: str
    download_mb: int  # approximate
    licence: str


CATALOG = (
    CatalogModel(
        "mlx-community/SmolLM2-360M-Instruct",
        "SmolLM2 360M Instruct",
        "360M",
        "bfloat16",
        730,
        "Apache-2.0",
    ),
    CatalogModel(
        "mlx-community/Qwen2.5-0.5B-Instruct-4bit",
        "Qwen2.5 0.5B Instruct",
        "0.5B",
        "4-bit",
        280,
        "Apache-2.0",
    ),
    CatalogModel(
        "mlx-community/Llama-3.2-1B-Instruct-4bit",
        "Llama 3.2 1B Instruct",
        "1.2B",
        "4-bit",
        700,
        "Llama 3.2 Community",
    ),
    CatalogModel(
        "mlx-community/Qwen2.5-1.5B-Instruct-4bit",
        "Qwen2.5 1.5B Instruct",
        "1.5B",
        "4-bit",
        870,
        "Apache-2.0",
    ),
    CatalogModel(
        "mlx-community/Phi-3.5-mini-instruct-4bit",
        "Phi-3.5 mini Instruct",
        "3.8B",
        "4-bit",
        2150,
        "MIT",
    ),
)
