"""Make MLX's CPU backend use the system OpenBLAS on Linux.

The Linux ``mlx[cpu]`` wheel links a slow reference BLAS. Loading the system OpenBLAS (by
its absolute path, from the system's library folder) with RTLD_GLOBAL before the first
``import mlx`` makes its symbols win: a 135M float32 model decodes about 2.7x faster. This
is the only library ``import engine`` loads; on a Mac (Metal) it does nothing.

Opt-in, Linux only: ``DRAFTLESS_ROW_GEMV=1`` also loads ``engine/_row_gemm.c``, built with
the package at install time (pyproject.toml), from the package's own folder. It computes one- and
two-row products with OpenBLAS's faster sgemv (plain decoding about 1.7x faster here with
OpenBLAS 0.3.21). Nothing is compiled at run time and nothing executable is loaded from a
cache or data folder. ``row_gemv`` says whether it is on (the benchmark reports it, and
verify-cost curves measured with it are kept apart).
"""

import ctypes
import importlib.machinery
import logging
import os
import stat
import sys
from pathlib import Path

log = logging.getLogger(__name__)

OPENBLAS_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3",
    "/usr/lib/aarch64-linux-gnu/openblas-pthread/libblas.so.3",
    "/usr/lib64/libopenblas.so.0",
)
ROW_GEMV_VARIABLE = "DRAFTLESS_ROW_GEMV"

loaded_blas: str | None = None
row_gemv: str | None = None  # the one-row library, when the user turned it on and it loaded


def row_gemm_library() -> Path | None:
    """The one-row library built with the package, if the build made one."""
    folder = Path(__file__).resolve().parent
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = folder / f"_row_gemm{suffix}"
        try:
            if stat.S_ISREG(candidate.stat().st_mode):
                return candidate
        except OSError:
            continue
    return None


def _load_row_gemm(blas_path: str) -> str | None:
    library = row_gemm_library()
    if library is None:
        log.warning(
            "%s=1, but the one-row library was not built with this install "
            "(a C compiler is needed when installing); using OpenBLAS alone.",
            ROW_GEMV_VARIABLE,
        )
        return None
    try:
        handle = ctypes.CDLL(str(library), mode=os.RTLD_GLOBAL)
        # without OpenBLAS's functions its cblas_sgemm passes every product on unchanged
        if not handle.draftless_row_gemm_init(blas_path.encode()):
            return None
    except (OSError, AttributeError) as error:
        log.warning("The one-row library %s is not used: %s", library, error)
        return None
    return str(library)


def preload_openblas() -> str | None:
    """Load OpenBLAS globally if on Linux and present; return its path or None."""
    global loaded_blas, row_gemv
    if loaded_blas or not sys.platform.startswith("linux") or "mlx.core" in sys.modules:
        return loaded_blas
    if os.environ.get("DRAFTLESS_NO_OPENBLAS"):
        return None
    for path in OPENBLAS_CANDIDATES:
        if os.path.exists(path):
            if os.environ.get(ROW_GEMV_VARIABLE) == "1":
                # first, so that its cblas_sgemm is the one MLX finds; it loads OpenBLAS itself
                row_gemv = _load_row_gemm(path)
            try:
                ctypes.CDLL(path, mode=os.RTLD_GLOBAL)
            except OSError:
                continue
            loaded_blas = path
            return path
    return None
