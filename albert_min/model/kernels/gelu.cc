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
      y[i] = v / (1.0f + exp_approx(-sigmoid_arg(v)));
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
