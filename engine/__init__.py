"""Draftless engine: lossless n-gram speculative decoding on MLX. Never imports Qt."""

import os

from ._blas import preload_openblas

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # no "PyTorch was not found" noise
# MLX's CUDA backend: cuDNN's attention builds a new graph for every pass of several tokens at
# a cache length it has not seen, which is nearly every verify pass: 45-50 ms each against a
# 4-8 ms pass (SmolLM2-135M and a Llama-1B shape on an H200). MLX's own kernels have no such
# cost. Metal and the CPU never read this variable; a value the user set is kept.
os.environ.setdefault("MLX_CUDA_USE_CUDNN_SDPA", "0")

preload_openblas()

from .errors import EngineError  # noqa: E402
from .settings import DraftSettings, GenerationRequest, SamplingSettings  # noqa: E402

__all__ = ["EngineError", "DraftSettings", "GenerationRequest", "SamplingSettings"]
