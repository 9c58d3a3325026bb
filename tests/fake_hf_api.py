"""A stand-in for ``huggingface_hub.HfApi`` in the Search Hugging Face tests and screenshots:
``list_models`` and ``model_info`` answer from a table of repos with the library's own
``ModelInfo`` objects, and record what they were asked. No network.

``error`` is raised by every call; ``gate`` (a ``threading.Event``) holds every call until
it is set, as a slow hub would."""

from __future__ import annotations

import threading

from huggingface_hub.hf_api import ModelInfo

GB = 1_000_000_000

# repo id → (downloads, likes, base model, {file: size})
REPOS = {
    "mlx-community/Qwen2.5-1.5B-Instruct-4bit": (
        91_200,
        41,
        "Qwen/Qwen2.5-1.5B-Instruct",
        {"model.safetensors": 868_000_000, "config.json": 1_200, "tokenizer.json": 7_000_000},
    ),
    "mlx-community/Qwen2.5-1.5B-Instruct-8bit": (
        12_400,
        9,
        "Qwen/Qwen2.5-1.5B-Instruct",
        {"model.safetensors": 1_640_000_000, "config.json": 1_200, "README.md": 900},
    ),
    "mlx-community/Qwen2.5-1.5B-Instruct-bf16": (
        3_100,
        4,
        "Qwen/Qwen2.5-1.5B-Instruct",
        {
            "model-00001-of-00002.safetensors": 2_000_000_000,
            "model-00002-of-00002.safetensors": 1_090_000_000,
            "model.safetensors.index.json": 30_000,
        },
    ),
    "mlx-community/Qwen2.5-7B-Instruct-4bit": (
        250_300,
        112,
        "Qwen/Qwen2.5-7B-Instruct",
        {"model.safetensors": 4_280_000_000, "config.json": 1_200},
    ),
    "mlx-community/Qwen2.5-7B-Instruct-3bit": (
        8_800,
        6,
        "Qwen/Qwen2.5-7B-Instruct",
        {"model.safetensors": 3_340_000_000, "config.json": 1_200},
    ),
    "someone/Qwen2.5-Coder-0.5B-Instruct-mlx": (
        540,
        2,
        None,
        {"model.safetensors": 990_000_000, "config.json": 1_200},
    ),
}


def model_info(repo: str, with_sizes: bool = False) -> ModelInfo:
    downloads, likes, base, files = REPOS[repo]
    tags = ["mlx", "safetensors", "text-generation"]
    if base:
        tags += [f"base_model:{base}", f"base_model:quantized:{base}"]
    siblings = [
        {"rfilename": name, **({"size": size} if with_sizes else {})}
        for name, size in files.items()
    ]
    return ModelInfo(
        id=repo,
        downloads=downloads,
        likes=likes,
        tags=tags,
        library_name="mlx",
        siblings=siblings if with_sizes else None,
    )


class FakeHfApi:
    def __init__(self, repos=REPOS, error: Exception | None = None):
        self.repos = repos
        self.error = error
        self.gate: threading.Event | None = None
        self.searches: list[dict] = []
        self.infos: list[str] = []

    def _wait(self) -> None:
        if self.gate is not None:
            self.gate.wait(30)
        if self.error is not None:
            raise self.error

    def list_models(self, **asked):
        self.searches.append(asked)
        self._wait()
        words = (asked.get("search") or "").lower().split()
        found = [r for r in self.repos if all(w in r.lower() for w in words)]
        found.sort(key=lambda r: -self.repos[r][0])
        for repo in found:  # a generator, like the real one: pages read as they are asked for
            yield model_info(repo)

    def model_info(self, repo_id: str, *, files_metadata: bool = False, timeout=None, **_):
        self.infos.append(repo_id)
        self._wait()
        return model_info(repo_id, with_sizes=files_metadata)
