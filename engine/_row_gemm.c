/* One- and two-row float32 products as OpenBLAS's sgemv, row by row (Linux only, opt-in).
 *
 * MLX's CPU backend computes every float32 product with cblas_sgemm. OpenBLAS 0.3.21
 * (Debian 12) runs a one-row sgemm at half the speed of its cblas_sgemv. Loaded with
 * RTLD_GLOBAL before OpenBLAS and mlx, this library's cblas_sgemm computes products of one
 * or two rows as one sgemv per row and sends everything else to OpenBLAS's sgemm. Row by
 * row, a two-token pass's products round exactly as two one-token passes do.
 *
 * Built by the package's build backend (pyproject.toml's tool.setuptools.ext-modules), never
 * at run time; engine/_blas.py loads it only when DRAFTLESS_ROW_GEMV=1. It is loaded with
 * ctypes, not imported: the module init below only says so. */
#define _GNU_SOURCE
#include <Python.h>
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

PyMODINIT_FUNC PyInit__row_gemm(void) {
    PyErr_SetString(PyExc_ImportError,
                    "engine._row_gemm is a BLAS shim loaded by engine/_blas.py, not a module");
    return NULL;
}
