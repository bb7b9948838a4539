// The forward kernels: a Dense layer through oneDNN's sgemm and GELU's tanh form, in training and in
// prediction (MindSpore's CPU MatMul ran ALBERT's shapes at 0.13-0.31 of the sgemm peak).
// The AOT signature and the threading rules are backward.cc's: each output element is computed
// by one thread in the same order whatever the thread count.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "helper.h"
#include "onednn.h"

namespace {

// e^x to about 1 ulp in float32 (Cephes' expf: x = n ln 2 + r, |r| <= ln 2 / 2, a degree-5 polynomial
// for e^r, times 2^n), branch-free so that a loop over it vectorises (no floor, fmin or fmax); x is
// clamped to where e^x is a finite normal float.
inline float exp_approx(float x) {
  x = x < -87.3365447f ? -87.3365447f : x;
  x = x > 88.0f ? 88.0f : x;
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;   // round to nearest: 1.5 * 2^23
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;     // ln 2 in two parts: r exact
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;        // 2^n, n in [-126, 127]
  float scale;
  std::memcpy(&scale, &bits, 4);
  return er * scale;
}

}  // namespace

// y = x W^T + b, a Dense layer (W stored [out, in] as in PyTorch): one sgemm per half of the rows.
// inputs:  x (..., K), W (N, K), b (N)
// outputs: y (..., N)
extern "C" int dense_forward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                             void *stream, void *extra) {
  const float *x = static_cast<const float *>(params[0]);
  const float *w = static_cast<const float *>(params[1]);
  const float *b = static_cast<const float *>(params[2]);
  float *y = static_cast<float *>(params[3]);
  const int64_t K = shapes[0][ndims[0] - 1], M = helper::leading_rows(ndims[0], shapes[0]), N = shapes[1][0];
  int status[2] = {0, 0};                       // oneDNN's, per half: nonzero fails the op
  helper::split_range(M, M * N * K >= helper::kMinWork, [&](int64_t begin, int64_t end) {
    if (end == begin) return;
    status[begin > 0] = onednn::sgemm('N', 'T', end - begin, N, K, x + begin * K, K, w, K, y + begin * N, N);
    for (int64_t r = begin; r < end; ++r) {
      float *yr = y + r * N;
      for (int64_t c = 0; c < N; ++c) yr[c] += b[c];
    }
  });
  return status[0] | status[1];
}

// GELU's tanh form as albert_min computes it (modeling.gelu_new): y = x sigmoid(s) = x / (1 + e^-s),
// s = sqrt(8/pi) (x + 0.044715 x^3).
// inputs:  x;  outputs: y (same shape)
extern "C" int gelu_new_forward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                void *stream, void *extra) {
  const float *x = static_cast<const float *>(params[0]);
  float *y = static_cast<float *>(params[1]);
  int64_t n = 1;
  for (int i = 0; i < ndims[0]; ++i) n *= shapes[0][i];
  const float a = 1.5957691216057308f, b = 0.044715f;   // sqrt(8/pi)
  helper::split_range(n, n >= helper::kMinElements, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float v = x[i], s = a * (v + b * v * v * v);
      y[i] = v / (1.0f + exp_approx(-s));
    }
  });
  return 0;
}

// Output shapes for MindSpore's graph compiler: a graph whose input shapes are dynamic
// (classify.dynamic_graph, [None, None] ids) needs them in C++ (``<kernel>InferShape``; Python
// ``out_shape`` functions fail there). -1 is an unknown dimension, [-2] an unknown rank.
namespace {
std::vector<int64_t> shape_of(int ndim, const int64_t *shape) { return std::vector<int64_t>(shape, shape + ndim); }
bool unknown_rank(int ndim, const int64_t *shape) { return ndim > 0 && shape[0] == -2; }
}  // namespace

extern "C" std::vector<int64_t> dense_forwardInferShape(int *ndims, int64_t **shapes, void *extra) {
  if (unknown_rank(ndims[0], shapes[0])) return {-2};
  std::vector<int64_t> out = shape_of(ndims[0], shapes[0]);
  out.back() = shapes[1][0];                   // x (..., K), W (N, K) -> (..., N)
  return out;
}

extern "C" std::vector<int64_t> gelu_new_forwardInferShape(int *ndims, int64_t **shapes, void *extra) {
  return shape_of(ndims[0], shapes[0]);
}

extern "C" std::vector<int64_t> layer_norm_forwardInferShape(int *ndims, int64_t **shapes, void *extra) {
  return shape_of(ndims[0], shapes[0]);
}

extern "C" std::vector<int64_t> batch_matmul_nnInferShape(int *ndims, int64_t **shapes, void *extra) {
  if (unknown_rank(ndims[0], shapes[0])) return {-2};
  std::vector<int64_t> out = shape_of(ndims[0], shapes[0]);
  out.back() = shapes[1][ndims[1] - 1];        // a (..., M, K), b (..., K, N) -> (..., M, N)
  return out;
}

extern "C" std::vector<int64_t> batch_matmul_ntInferShape(int *ndims, int64_t **shapes, void *extra) {
  if (unknown_rank(ndims[0], shapes[0])) return {-2};
  std::vector<int64_t> out = shape_of(ndims[0], shapes[0]);
  out.back() = shapes[1][ndims[1] - 2];        // a (..., M, K), b (..., N, K) -> (..., M, N)
  return out;
}
