"""Draftless engine: lossless n-gram speculative decoding on MLX. Never imports Qt."""

import os

from ._blas import preload_openblas

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # no "PyTorch was not found" noise

preload_openblas()

from .errors import EngineError  # noqa: E402
from .settings import DraftSettings, GenerationRequest, SamplingSettings  # noqa: E402

__all__ = ["EngineError", "DraftSettings", "GenerationRequest", "SamplingSettings"]
