// The train step's slow backward kernels, for MindSpore's ops.Custom(func_type="aot").
//
// Every function has MindSpore's AOT signature: params holds the inputs, then
// the outputs; shapes[i] / ndims[i] describe params[i]. All tensors are
// contiguous float32. Results depend only on the inputs, not on the thread
// count: oneDNN's sgemm runs on the calling thread, and where a kernel uses the second core
// (helper.h) each output element is still computed by one thread, in the same
// order, so a run repeats bit for bit.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "helper.h"   // and xmmintrin.h on x86
#include "onednn.h"

namespace {

// Sums of n floats in 8 interleaved partial sums, then added up in a fixed order: the same
// result on every call, and a loop the compiler turns into vector adds (a single running
// sum is one long dependent chain, 4 cycles per element).
constexpr int kLanes = 8;

template <typename Term>
float lane_sum(int64_t n, Term term) {
  float lanes[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += term(i + l);
  for (int l = 0; i < n; ++i, ++l) lanes[l] += term(i);
  float total = 0.0f;
  for (int l = 0; l < kLanes; ++l) total += lanes[l];
  return total;
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
  const int64_t K = shapes[0][ndims[0] - 1], M = helper::leading_rows(ndims[0], shapes[0]), N = shapes[1][0];
  // dx and dW cost the same (M N K multiply-adds each): one on each core
  int status[2] = {0, 0};
  helper::run_pair(M * N * K >= helper::kMinWork,
      [&] { status[0] = onednn::sgemm('N', 'N', M, K, N, dy, N, w, K, dx, K); },
      [&] {
        status[1] = onednn::sgemm('T', 'N', N, K, M, dy, N, x, K, dw, K);
        std::memset(db, 0, N * sizeof(float));
        add_column_sums(dy, M, N, db);
      });
  return status[0] | status[1];
}

namespace {
// mean and 1 / sqrt(var + eps) of one row, the same numbers in the forward and the backward
void row_moments(const float *xr, int64_t C, float eps, float *mean, float *rstd) {
  const float m = lane_sum(C, [&](int64_t c) { return xr[c]; }) / C;
  const float var = lane_sum(C, [&](int64_t c) { return (xr[c] - m) * (xr[c] - m); }) / C;
  *mean = m;
  *rstd = 1.0f / std::sqrt(var + eps);
}
}  // namespace

// y = (x - mean) / sqrt(var + eps) * gamma + beta over the last axis, in training (MindSpore's
// CPU LayerNorm took ~1 ms per call on [64, 32, 128]); rows split over the two cores.
// inputs:  x (..., C), gamma (C), beta (C), eps (1)
// outputs: y (..., C)
extern "C" int layer_norm_forward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                  void *stream, void *extra) {
  const float *x = static_cast<const float *>(params[0]);
  const float *gamma = static_cast<const float *>(params[1]);
  const float *beta = static_cast<const float *>(params[2]);
  const float eps = static_cast<const float *>(params[3])[0];
  float *y = static_cast<float *>(params[4]);
  const int64_t C = shapes[0][ndims[0] - 1], R = helper::leading_rows(ndims[0], shapes[0]);
  helper::split_range(R, R * C >= helper::kMinElements, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *xr = x + r * C;
      float *yr = y + r * C;
      float mean, rstd;
      row_moments(xr, C, eps, &mean, &rstd);
      for (int64_t c = 0; c < C; ++c) yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
    }
  });
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
  const int64_t C = shapes[0][ndims[0] - 1], R = helper::leading_rows(ndims[0], shapes[0]);
  std::memset(dgamma, 0, C * sizeof(float));
  std::memset(dbeta, 0, C * sizeof(float));
  for (int64_t r = 0; r < R; ++r) {
    const float *xr = x + r * C, *dyr = dy + r * C;
    float *dxr = dx + r * C;
    float mean, rstd;
    row_moments(xr, C, eps, &mean, &rstd);
    // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * gamma
    const float sum_g = lane_sum(C, [&](int64_t c) { return dyr[c] * gamma[c]; });
    const float sum_g_xhat = lane_sum(C, [&](int64_t c) { return dyr[c] * gamma[c] * (xr[c] - mean) * rstd; });
    for (int64_t c = 0; c < C; ++c) {
      dgamma[c] += dyr[c] * (xr[c] - mean) * rstd;
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

// Gradient of y = softmax(x) over the last axis, from the forward's output:
// dx = y * (dy - sum(dy * y)).
// inputs:  y (..., C), dy (..., C)
// outputs: dx (..., C)
extern "C" int softmax_backward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                void *stream, void *extra) {
  const float *y = static_cast<const float *>(params[0]);
  const float *dy = static_cast<const float *>(params[1]);
  float *dx = static_cast<float *>(params[2]);
  const int64_t C = shapes[0][ndims[0] - 1], R = helper::leading_rows(ndims[0], shapes[0]);
  helper::split_range(R, R * C >= helper::kMinElements, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *yr = y + r * C, *dyr = dy + r * C;
      float *dxr = dx + r * C;
      const float dot = lane_sum(C, [&](int64_t c) { return dyr[c] * yr[c]; });
      for (int64_t c = 0; c < C; ++c) dxr[c] = yr[c] * (dyr[c] - dot);
    }
  });
  return 0;
}

// Gradient of GELU's tanh form as albert_min computes it, y = x * sigmoid(s) with
// s = sqrt(8/pi) (x + 0.044715 x^3):  dy/dx = sig + x sig (1 - sig) sqrt(8/pi) (1 + 3 * 0.044715 x^2).
// sig is read off the forward's output, y / x (near x = 0 its limit 1/2 + s/4), so no
// exponential is evaluated and the loop vectorises.
// inputs:  x, y, dy (same shape)
// outputs: dx
extern "C" int gelu_new_backward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                 void *stream, void *extra) {
  const float *x = static_cast<const float *>(params[0]);
  const float *y = static_cast<const float *>(params[1]);
  const float *dy = static_cast<const float *>(params[2]);
  float *dx = static_cast<float *>(params[3]);
  int64_t n = 1;
  for (int i = 0; i < ndims[0]; ++i) n *= shapes[0][i];
  const float a = 1.5957691216057308f, b = 0.044715f;   // sqrt(8/pi)
  helper::split_range(n, n >= helper::kMinElements, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float v = x[i], s = a * (v + b * v * v * v);
      const float sig = std::fabs(v) > 1e-4f ? y[i] / v : 0.5f + 0.25f * s;
      dx[i] = dy[i] * (sig + v * sig * (1.0f - sig) * a * (1.0f + 3.0f * b * v * v));
    }
  });
  return 0;
}

// Batched matrix products for attention, one sgemm per matrix of the batch (MindSpore's CPU
// BatchMatMul took 1-1.4 ms per call on [64, 4, 32, 32] operands: 256 products of 32 x 32).
// The batch is every leading dimension; op(a) is M x K, op(b) K x N, out (..., M, N).
namespace {
int batched_sgemm(char ta, char tb, void **params, int *ndims, int64_t **shapes) {
  const float *a = static_cast<const float *>(params[0]);
  const float *b = static_cast<const float *>(params[1]);
  float *out = static_cast<float *>(params[2]);
  const int nd = ndims[0];
  const int64_t a_rows = shapes[0][nd - 2], a_cols = shapes[0][nd - 1];
  const int64_t b_rows = shapes[1][nd - 2], b_cols = shapes[1][nd - 1];
  const int64_t M = ta == 'T' ? a_cols : a_rows, K = ta == 'T' ? a_rows : a_cols;
  const int64_t N = tb == 'T' ? b_rows : b_cols;
  const int64_t batch = helper::leading_rows(nd - 1, shapes[0]);
  int status[2] = {0, 0};
  helper::split_range(batch, batch * M * N * K >= helper::kMinWork, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      status[begin > 0] |= onednn::sgemm(ta, tb, M, N, K, a + i * a_rows * a_cols, a_cols, b + i * b_rows * b_cols,
                                         b_cols, out + i * M * N, N);
  });
  return status[0] | status[1];
}
}  // namespace

// out = a b    inputs: a (..., M, K), b (..., K, N)
extern "C" int batch_matmul_nn(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                               void *stream, void *extra) {
  return batched_sgemm('N', 'N', params, ndims, shapes);
}

// out = a b^T  inputs: a (..., M, K), b (..., N, K)
extern "C" int batch_matmul_nt(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                               void *stream, void *extra) {
  return batched_sgemm('N', 'T', params, ndims, shapes);
}

// out = a^T b  inputs: a (..., K, M), b (..., K, N)
extern "C" int batch_matmul_tn(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                               void *stream, void *extra) {
  return batched_sgemm('T', 'N', params, ndims, shapes);
}

// Attention's head split and merge: (B, P, Q, D) -> (B, Q, P, D), rows of D floats copied
// ([B, S, N, D] -> [B, N, S, D] and back), forward and gradient. MindSpore's CPU Transpose
// kernel keeps a vector of one 8-byte index per element for as long as its graph lives (twice
// the float32 tensor; 32 of them in a 4-loop train step, 1.07 GB per graph at batch 64 x 384).
// inputs:  x (B, P, Q, D)
// outputs: out (B, Q, P, D)
extern "C" int swap_middle_axes(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                void *stream, void *extra) {
  const float *x = static_cast<const float *>(params[0]);
  float *out = static_cast<float *>(params[1]);
  const int64_t B = shapes[0][0], P = shapes[0][1], Q = shapes[0][2], D = shapes[0][3];
  helper::split_range(B * Q, B * P * Q * D >= helper::kMinElements, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {                     // i = b * Q + q: one output (P, D) block
      const int64_t b = i / Q, q = i % Q;
      for (int64_t p = 0; p < P; ++p)
        std::memcpy(out + (i * P + p) * D, x + ((b * P + p) * Q + q) * D, D * sizeof(float));
    }
  });
  return 0;
}

// How many threads the kernels split their work over (1 or 2; see helper.h).
extern "C" void set_kernel_threads(int threads) { helper::set_threads(threads); }

// Denormal inputs read as zero and denormal results written as zero (MXCSR's DAZ and FTZ) on the
// calling thread and the threads it starts from now on (Linux threads inherit the mode). MindSpore's
// kernel threads run so (its ThreadPool sets both), but the threads that launch a compiled graph or a
// PyNative op do not, and which thread computes what depends on the launch (a graph's first launch
// runs elsewhere than its later ones): set on the main thread before MindSpore starts those, every
// thread computes alike, and a step gives the same bits whichever thread runs it.
extern "C" void flush_denormals() {
#if defined(__SSE__)
  _mm_setcsr(_mm_getcsr() | 0x8040);    // FTZ (bit 15) | DAZ (bit 6)
#endif
}
