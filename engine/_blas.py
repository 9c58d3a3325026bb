"""Make MLX's CPU backend use the system OpenBLAS on Linux.

The Linux ``mlx[cpu]`` wheel links a slow reference BLAS. Loading OpenBLAS with
RTLD_GLOBAL before the first ``import mlx`` makes its symbols win (measured 2.7x on a
135M model). This must run before anything imports mlx, so ``engine/__init__`` calls it.

MLX computes every float32 product with ``cblas_sgemm``, also the one-row products of
plain decoding (one token times a weight matrix). OpenBLAS 0.3.21 (Debian 12) runs those
as a full matrix product, half as fast as its matrix-vector ``cblas_sgemv``. Where a C
compiler is found, a small library (``ROW_GEMM_SOURCE``, compiled once into the cache
folder) is loaded first: its ``cblas_sgemm`` computes products of one or two rows as one
sgemv per row (two sgemv calls still beat one sgemm; three do not) and sends everything
else to OpenBLAS's sgemm. Row by row, a two-token pass's products round exactly as two
one-token passes do. Without a compiler, OpenBLAS alone is used.
$DRAFTLESS_NO_ROW_GEMV=1 turns the library off (to compare).
"""

import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

OPENBLAS_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3",
    "/usr/lib/aarch64-linux-gnu/openblas-pthread/libblas.so.3",
    "/usr/lib64/libopenblas.so.0",
)

loaded_blas: str | None = None
row_gemv: str | None = None  # the compiled one-row library, when loaded

ROW_GEMM_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

enum { ROW_MAJOR = 101, NO_TRANS = 111, MAX_ROWS = 2 };
typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int,
                         const float *, int, float, float *, int);
typedef void (*sgemv_fn)(int, int, int, int, float, const float *, int, const float *, int,
                         float, float *, int);
static sgemm_fn real_sgemm;
static sgemv_fn real_sgemv;

int draftless_row_gemm_init(const char *blas_path) {
    void *blas = dlopen(blas_path, RTLD_NOW | RTLD_GLOBAL);
    if (!blas) return 0;
    real_sgemm = (sgemm_fn)dlsym(blas, "cblas_sgemm");
    real_sgemv = (sgemv_fn)dlsym(blas, "cblas_sgemv");
    return real_sgemm && real_sgemv;
}

/* Row by row: C[i] = alpha * a_i . op(B) + beta * C[i], with a_i row i of op(A). */
void cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    if (!real_sgemm) real_sgemm = (sgemm_fn)dlsym(RTLD_NEXT, "cblas_sgemm");  /* not initialised */
    if (real_sgemv && order == ROW_MAJOR && m >= 1 && m <= MAX_ROWS && n > 0 && k > 0) {
        int step_a = trans_a == NO_TRANS ? 1 : lda, next_row = trans_a == NO_TRANS ? lda : 1;
        for (int i = 0; i < m; i++) {
            const float *row = a + (size_t)i * next_row;
            float *out = c + (size_t)i * ldc;
            if (beta == 0.0f) memset(out, 0, sizeof(float) * (size_t)n);
            if (trans_b == NO_TRANS)  /* B is k x n: out = B^T row */
                real_sgemv(ROW_MAJOR, NO_TRANS + 1, k, n, alpha, b, ldb, row, step_a, beta, out, 1);
            else  /* B is stored n x k: out = B row */
                real_sgemv(ROW_MAJOR, NO_TRANS, n, k, alpha, b, ldb, row, step_a, beta, out, 1);
        }
        return;
    }
    real_sgemm(order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
"""


def _compiled_row_gemm() -> Path | None:
    """The one-row library, compiled into the cache folder the first time (None: no compiler)."""
    from .paths import cache_dir

    digest = hashlib.sha256(ROW_GEMM_SOURCE.encode()).hexdigest()[:16]
    library = cache_dir() / "blas" / f"row-gemm-{digest}.so"
    if library.exists():
        return library
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if compiler is None:
        return None
    library.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=library.parent) as work:
        source, built = Path(work) / "row_gemm.c", Path(work) / "row_gemm.so"
        source.write_text(ROW_GEMM_SOURCE)
        result = subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(built), str(source), "-ldl"],
                                capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            log.info("Could not compile the one-row BLAS library: %s", result.stderr.strip()[-500:])
            return None
        os.replace(built, library)  # atomic: a concurrent process sees all of it or none
    for old in library.parent.glob("row-gemm-*.so"):
        if old != library:
            old.unlink(missing_ok=True)
    return library


def _load_row_gemm(blas_path: str) -> str | None:
    if os.environ.get("DRAFTLESS_NO_ROW_GEMV"):
        return None
    try:
        library = _compiled_row_gemm()
        if library is None:
            return None
        # without OpenBLAS's functions its cblas_sgemm passes every product on unchanged
        if not ctypes.CDLL(str(library), mode=os.RTLD_GLOBAL).draftless_row_gemm_init(blas_path.encode()):
            return None
    except (OSError, subprocess.SubprocessError) as error:
        log.info("One-row BLAS library not used: %s", error)
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
            # first, so that its cblas_sgemm is the one MLX finds; it loads OpenBLAS itself
            row_gemv = _load_row_gemm(path)
            try:
                ctypes.CDLL(path, mode=os.RTLD_GLOBAL)
            except OSError:
                continue
            loaded_blas = path
            return path
    return None
