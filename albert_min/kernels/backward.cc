// The train step's slow backward kernels, for MindSpore's ops.Custom(func_type="aot").
//
// Every function has MindSpore's AOT signature: params holds the inputs, then
// the outputs; shapes[i] / ndims[i] describe params[i]. All tensors are
// contiguous float32. Results depend only on the inputs (sums run in a fixed
// order on one thread; OpenBLAS splits sgemm over rows and columns, never over
// the summed dimension), so a run repeats bit for bit.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "cblas.h"

namespace {

int64_t leading_rows(int ndim, const int64_t *shape) {  // product of all but the last dimension
  int64_t rows = 1;
  for (int i = 0; i < ndim - 1; ++i) rows *= shape[i];
  return rows;
}

// sum over rows of a (rows, cols) matrix, added to out (cols)
void add_column_sums(const float *a, int64_t rows, int64_t cols, float *out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = a + r * cols;
    for (int64_t c = 0; c < cols; ++c) out[c] += row[c];
  }
}

}  // namespace

// Gradient of y = x W^T + b (a Dense layer, W stored [out, in] as in PyTorch).
// inputs:  x (..., K), W (N, K), dy (..., N)
// outputs: dx (..., K) = dy W;  dW (N, K) = dy^T x;  db (N) = column sums of dy
extern "C" int dense_backward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                              void *stream, void *extra) {
  const float *x = static_cast<const float *>(params[0]);
  const float *w = static_cast<const float *>(params[1]);
  const float *dy = static_cast<const float *>(params[2]);
  float *dx = static_cast<float *>(params[3]);
  float *dw = static_cast<float *>(params[4]);
  float *db = static_cast<float *>(params[5]);
  const int64_t K = shapes[0][ndims[0] - 1], M = leading_rows(ndims[0], shapes[0]), N = shapes[1][0];
  scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, K, N, 1.0f, dy, N, w, K, 0.0f, dx, K);
  scipy_cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1.0f, dy, N, x, K, 0.0f, dw, K);
  std::memset(db, 0, N * sizeof(float));
  add_column_sums(dy, M, N, db);
  return 0;
}

// Gradient of y = (x - mean) / sqrt(var + eps) * gamma + beta over the last axis, in one pass
// per row (mean and 1/std recomputed: cheaper than keeping them from the forward).
// inputs:  x (..., C), gamma (C), dy (..., C), eps (1)
// outputs: dx (..., C);  dgamma (C) = sum of dy * xhat;  dbeta (C) = sum of dy
extern "C" int layer_norm_backward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                   void *stream, void *extra) {
  const float *x = static_cast<const float *>(params[0]);
  const float *gamma = static_cast<const float *>(params[1]);
  const float *dy = static_cast<const float *>(params[2]);
  const float eps = static_cast<const float *>(params[3])[0];
  float *dx = static_cast<float *>(params[4]);
  float *dgamma = static_cast<float *>(params[5]);
  float *dbeta = static_cast<float *>(params[6]);
  const int64_t C = shapes[0][ndims[0] - 1], R = leading_rows(ndims[0], shapes[0]);
  std::memset(dgamma, 0, C * sizeof(float));
  std::memset(dbeta, 0, C * sizeof(float));
  for (int64_t r = 0; r < R; ++r) {
    const float *xr = x + r * C, *dyr = dy + r * C;
    float *dxr = dx + r * C;
    float mean = 0.0f, var = 0.0f;
    for (int64_t c = 0; c < C; ++c) mean += xr[c];
    mean /= C;
    for (int64_t c = 0; c < C; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    const float rstd = 1.0f / std::sqrt(var / C + eps);
    // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * gamma
    float sum_g = 0.0f, sum_g_xhat = 0.0f;
    for (int64_t c = 0; c < C; ++c) {
      const float xhat = (xr[c] - mean) * rstd, g = dyr[c] * gamma[c];
      sum_g += g;
      sum_g_xhat += g * xhat;
      dgamma[c] += dyr[c] * xhat;
      dbeta[c] += dyr[c];
    }
    const float mean_g = sum_g / C, mean_g_xhat = sum_g_xhat / C;
    for (int64_t c = 0; c < C; ++c) {
      const float xhat = (xr[c] - mean) * rstd;
      dxr[c] = rstd * (dyr[c] * gamma[c] - mean_g - xhat * mean_g_xhat);
    }
  }
  return 0;
}

// OpenBLAS's thread count, set once by the loader (albert_min/kernels/build.py).
extern "C" void set_blas_threads(int threads) { scipy_openblas_set_num_threads(threads); }
