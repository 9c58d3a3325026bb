"""MLX's float32 products through the BLAS Draftless loads (engine/_blas.py): right for every
layout, and, with the one-row library, one- and two-row products computed as OpenBLAS's
sgemv row by row (so a two-token pass's products round as two one-token passes do)."""

from __future__ import annotations

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
    got = mx.addmm(mx.array(c.astype(np.float32)), mx.array(a.astype(np.float32)),
                   mx.array(b.astype(np.float32)), alpha=2.0, beta=0.5)
    assert np.abs(np.array(got) - (2.0 * a @ b + 0.5 * c)).max() < 1e-4


def openblas_sgemv(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """w @ x by OpenBLAS's own cblas_sgemv, called directly."""
    import ctypes

    library = ctypes.CDLL(blas.loaded_blas)
    out = np.zeros(w.shape[0], dtype=np.float32)
    pointer = ctypes.c_void_p
    library.cblas_sgemv(101, 111, w.shape[0], w.shape[1], ctypes.c_float(1.0), pointer(w.ctypes.data),
                        w.shape[1], pointer(x.ctypes.data), 1, ctypes.c_float(0.0),
                        pointer(out.ctypes.data), 1)
    return out


def test_one_and_two_row_products_are_openblas_sgemv_row_by_row():
    if not blas.row_gemv:
        pytest.skip("no C compiler or no OpenBLAS here: MLX's products go to the BLAS unchanged")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 576)).astype(np.float32)
    w = rng.standard_normal((1536, 576)).astype(np.float32)
    rows = [openblas_sgemv(w, x[i]) for i in range(2)]
    one, two = np.array(mx.array(x[:1]) @ mx.array(w).T), np.array(mx.array(x) @ mx.array(w).T)
    assert np.array_equal(one[0], rows[0])
    assert np.array_equal(two[0], rows[0]) and np.array_equal(two[1], rows[1])
