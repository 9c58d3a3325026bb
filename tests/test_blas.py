"""MLX's float32 products through the BLAS Draftless loads (engine/_blas.py): right for every
layout; with the opt-in one-row library (DRAFTLESS_ROW_GEMV=1), one- and two-row products
computed as OpenBLAS's sgemv row by row (so a two-token pass's products round as two
one-token passes do); ``import engine`` compiles nothing and loads nothing from the
cache folder, and turns cuDNN attention off for MLX's CUDA backend."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import engine._blas as blas
import mlx.core as mx

LAYOUTS = ("plain", "a transposed", "b transposed", "both transposed")


def product(a: np.ndarray, b: np.ndarray, layout: str) -> np.ndarray:
    x = mx.array(np.ascontiguousarray(a.T)).T if "a " in layout or "both" in layout else mx.array(a)
    w = mx.array(np.ascontiguousarray(b.T)).T if "b " in layout or "both" in layout else mx.array(b)
    return np.array(x @ w)


@pytest.mark.parametrize("rows", [1, 2, 3, 5])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_products_are_right_for_every_layout_and_row_count(rows, layout):
    rng = np.random.default_rng(rows)
    a = rng.standard_normal((rows, 70)).astype(np.float32)
    b = rng.standard_normal((70, 90)).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(product(a, b, layout) - exact).max() < 1e-4


@pytest.mark.parametrize("rows", [1, 2])
def test_addmm_keeps_alpha_and_beta(rows):
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((rows, 40)), rng.standard_normal((40, 30))
    c = rng.standard_normal((rows, 30))
    got = mx.addmm(
        mx.array(c.astype(np.float32)),
        mx.array(a.astype(np.float32)),
        mx.array(b.astype(np.float32)),
        alpha=2.0,
        beta=0.5,
    )
    assert np.abs(np.array(got) - (2.0 * a @ b + 0.5 * c)).max() < 1e-4


ROW_BY_ROW_CHECK = """
import ctypes, sys
import numpy as np
import engine._blas as blas
import mlx.core as mx
assert blas.row_gemv, "the one-row library did not load"
library = ctypes.CDLL(blas.loaded_blas)
def sgemv(w, x):  # w @ x by OpenBLAS's own cblas_sgemv, called directly
    out = np.zeros(w.shape[0], dtype=np.float32)
    p = ctypes.c_void_p
    library.cblas_sgemv(101, 111, w.shape[0], w.shape[1], ctypes.c_float(1.0), p(w.ctypes.data),
                        w.shape[1], p(x.ctypes.data), 1, ctypes.c_float(0.0), p(out.ctypes.data), 1)
    return out
rng = np.random.default_rng(3)
x = rng.standard_normal((2, 576)).astype(np.float32)
w = rng.standard_normal((1536, 576)).astype(np.float32)
rows = [sgemv(w, x[i]) for i in range(2)]
one, two = np.array(mx.array(x[:1]) @ mx.array(w).T), np.array(mx.array(x) @ mx.array(w).T)
assert np.array_equal(one[0], rows[0])
assert np.array_equal(two[0], rows[0]) and np.array_equal(two[1], rows[1])
print("row by row")
"""


def run_python(code: str, tmp_path, **env) -> subprocess.CompletedProcess:
    environment = dict(
        os.environ,
        PYTHONPATH=os.getcwd(),
        DRAFTLESS_CACHE_DIR=str(tmp_path / "cache"),
        DRAFTLESS_DATA_DIR=str(tmp_path / "data"),
        **env,
    )
    environment.pop("DRAFTLESS_ROW_GEMV", None)
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=environment
    )


needs_openblas = pytest.mark.skipif(
    not blas.loaded_blas,
    reason="no system OpenBLAS here (Debian: libopenblas0-pthread); the library needs it",
)


@needs_openblas
def test_opted_in_one_and_two_row_products_are_openblas_sgemv_row_by_row(tmp_path):
    """Built at install time where a C compiler is (pyproject.toml); this fails if it was not."""
    assert blas.row_gemm_library() is not None, "engine/_row_gemm was not built by the install"
    result = run_python(ROW_BY_ROW_CHECK, tmp_path, DRAFTLESS_ROW_GEMV="1")
    assert result.returncode == 0 and "row by row" in result.stdout, result.stderr


def test_the_one_row_library_is_off_unless_asked_for(tmp_path):
    result = run_python("import engine._blas as b; print(repr(b.row_gemv))", tmp_path)
    assert result.returncode == 0 and result.stdout.strip() == "None", result.stderr


PLANTED = r"""
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void planted(void) {
    FILE *f = fopen(getenv("PLANTED_MARKER"), "w"); if (f) { fputs("ran", f); fclose(f); }
}
int draftless_row_gemm_init(const char *p) { return 0; }
"""


@pytest.mark.skipif(
    shutil.which("cc") is None, reason="needs a C compiler to build the planted file"
)
def test_import_engine_runs_no_code_from_the_cache_and_starts_no_compiler(tmp_path):
    """A library planted where earlier versions compiled theirs, and a ``cc`` on the PATH that
    leaves a mark when run: importing the engine (with and without the opt-in) touches neither."""
    source = tmp_path / "planted.c"
    source.write_text(PLANTED)
    blas_folder = tmp_path / "cache" / "blas"
    blas_folder.mkdir(parents=True)
    for name in ("row-gemm-0000000000000000.so", "row-gemm.so", "_row_gemm.so"):
        subprocess.run(
            ["cc", "-shared", "-fPIC", "-o", str(blas_folder / name), str(source)], check=True
        )
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("cc", "gcc"):
        fake = tools / name
        fake.write_text(f"#!/bin/sh\necho compiled > {tmp_path / 'compiler-ran'}\nexit 1\n")
        fake.chmod(0o755)
    marker = tmp_path / "planted-ran"
    for opt_in in ("0", "1"):
        result = run_python(
            "import engine; import mlx.core as mx; print(mx.array([1.0]) @ mx.array([[2.0]]))",
            tmp_path,
            PLANTED_MARKER=str(marker),
            DRAFTLESS_ROW_GEMV=opt_in,
            PATH=f"{tools}:{os.environ['PATH']}",
        )
        assert result.returncode == 0, result.stderr
    assert not marker.exists(), "a library from the cache folder ran"
    assert not (tmp_path / "compiler-ran").exists(), "import engine started a compiler"
    assert sorted(p.name for p in (tmp_path / "cache").rglob("*") if p.is_file()) == sorted(
        ["row-gemm-0000000000000000.so", "row-gemm.so", "_row_gemm.so"]
    )  # nothing written


def test_a_library_without_the_init_symbol_is_refused_not_fatal(monkeypatch, caplog):
    import ctypes.util

    other = ctypes.util.find_library("m")  # a real library that lacks draftless_row_gemm_init
    if other is None:
        pytest.skip("no libm to stand in")
    import glob

    path = next(iter(glob.glob(f"/usr/lib/*/{other}") + glob.glob(f"/lib/*/{other}")), None)
    if path is None:
        pytest.skip("libm's file was not found")
    from pathlib import Path

    monkeypatch.setattr(blas, "row_gemm_library", lambda: Path(path))
    assert blas._load_row_gemm(blas.loaded_blas or "/nonexistent") is None
    assert "is not used" in caplog.text


@pytest.mark.parametrize("preset, expected", [(None, "0"), ("1", "1")])
def test_import_engine_turns_cudnn_attention_off_unless_the_user_chose(preset, expected):
    """On MLX's CUDA backend cuDNN's attention rebuilds a graph for almost every verify pass
    (engine/__init__.py); ``import engine`` turns it off before MLX loads, and keeps a choice
    the user made."""
    env = {k: v for k, v in os.environ.items() if k != "MLX_CUDA_USE_CUDNN_SDPA"}
    if preset is not None:
        env["MLX_CUDA_USE_CUDNN_SDPA"] = preset
    check = "import engine, os; print(os.environ['MLX_CUDA_USE_CUDNN_SDPA'])"
    done = subprocess.run(
        [sys.executable, "-c", check], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == expected
