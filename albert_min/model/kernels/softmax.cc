// The gradient of softmax over the last axis (the attention scores'); its forward stays
// MindSpore's. The AOT signature and the threading rules: aot.h.
#include <cstdint>

#include "aot.h"
#include "helper.h"

// Gradient of y = softmax(x), from the forward's output: dx = y * (dy - sum(dy * y)).
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
      const float dot = aot::lane_sum(C, [&](int64_t c) { return dyr[c] * yr[c]; });
      for (int64_t c = 0; c < C; ++c) dxr[c] = yr[c] * (dyr[c] - dot);
    }
  });
  return 0;
}
