// GELU's tanh form as albert_min computes it (modeling.gelu_new), forward and gradient:
// y = x sigmoid(s) = x / (1 + e^-s),  s = sqrt(8/pi) (x + 0.044715 x^3)
// (MindSpore ran it as six elementwise kernels on [B, S, I], its gradient as a dozen).
// The AOT signature and the threading rules: aot.h.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "aot.h"
#include "helper.h"

namespace {

constexpr float kSqrt8OverPi = 1.5957691216057308f;
constexpr float kCubic = 0.044715f;

// s = sqrt(8/pi) (x + 0.044715 x^3): y = x sigmoid(s)
inline float sigmoid_arg(float x) { return kSqrt8OverPi * (x + kCubic * x * x * x); }

}  // namespace

// inputs:  x;  outputs: y (same shape)
extern "C" int gelu_new_forward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                void *stream, void *extra) {
  const float *x = static_cast<const float *>(params[0]);
  float *y = static_cast<float *>(params[1]);
  const int64_t n = aot::element_count(ndims[0], shapes[0]);
  helper::split_range(n, n >= helper::kMinElements, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float v = x[i];
      y[i] = v / (1.0f + aot::exp_approx(-sigmoid_arg(v)));
    }
  });
  return 0;
}

extern "C" std::vector<int64_t> gelu_new_forwardInferShape(int *ndims, int64_t **shapes, void *extra) {
  return aot::shape_of(ndims[0], shapes[0]);
}

// The gradient: dy/dx = sig + x sig (1 - sig) sqrt(8/pi) (1 + 3 * 0.044715 x^2), sig = sigmoid(s).
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
  const int64_t n = aot::element_count(ndims[0], shapes[0]);
  helper::split_range(n, n >= helper::kMinElements, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float v = x[i], s = sigmoid_arg(v);
      const float sig = std::fabs(v) > 1e-4f ? y[i] / v : 0.5f + 0.25f * s;
      dx[i] = dy[i] * (sig + v * sig * (1.0f - sig) * kSqrt8OverPi * (1.0f + 3.0f * kCubic * v * v));
    }
  });
  return 0;
}
