// The gradient of softmax over the last axis (the attention scores'), whose forward stays MindSpore's;
// masked_softmax, the attention probabilities in one pass (training: layers.py's
// AttentionProbabilitiesWithKernels; prediction: int8.py's Int8Attention), and its gradient. The AOT
// signature and the threading rules: aot.h.
#include <cstdint>

#include "aot.h"
#include "helper.h"

namespace {

// dx = scale * y * (dy - sum(dy * y)) over each row of C: softmax's gradient from its output (scale 1:
// multiplying by 1 changes no bit), or masked_softmax's with its scale.
int softmax_gradient(void **params, int *ndims, int64_t **shapes, float scale, float *dx) {
  const float *y = static_cast<const float *>(params[0]);
  const float *dy = static_cast<const float *>(params[1]);
  const int64_t C = shapes[0][ndims[0] - 1], R = helper::leading_rows(ndims[0], shapes[0]);
  helper::split_range(R, R * C >= helper::kMinElements, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *yr = y + r * C, *dyr = dy + r * C;
      float *dxr = dx + r * C;
      const float dot = aot::lane_sum(C, [&](int64_t c) { return dyr[c] * yr[c]; });
      for (int64_t c = 0; c < C; ++c) dxr[c] = scale * (yr[c] * (dyr[c] - dot));
    }
  });
  return 0;
}

}  // namespace

// Gradient of y = softmax(x), from the forward's output: dx = y * (dy - sum(dy * y)).
// inputs:  y (..., C), dy (..., C)
// outputs: dx (..., C)
extern "C" int softmax_backward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                void *stream, void *extra) {
  return softmax_gradient(params, ndims, shapes, 1.0f, static_cast<float *>(params[2]));
}

// The attention probabilities in one pass: softmax over the keys of scores * scale + mask, where
// MindSpore ran a Mul, a BroadcastTo, an Add and a Softmax (each a pass over [B, N, S, T]).
// e^x: aot::exp_approx (about 1 ulp); the sum: aot::lane_sum (a fixed order, any thread count).
// inputs:  scores (B, N, S, T) float32, mask (B, 1, 1, T) float32 (additive), scale (1) float32
// outputs: probs (B, N, S, T) float32
extern "C" int masked_softmax(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                              void *stream, void *extra) {
  const float *scores = static_cast<const float *>(params[0]);
  const float *mask = static_cast<const float *>(params[1]);
  const float scale = *static_cast<const float *>(params[2]);
  float *probs = static_cast<float *>(params[3]);
  const int64_t B = shapes[0][0], heads = shapes[0][1], S = shapes[0][2], T = shapes[0][3];
  const int64_t rows = B * heads * S;
  helper::split_range(rows, rows * T >= helper::kMinElements, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *in = scores + r * T, *m = mask + (r / (heads * S)) * T;
      float *out = probs + r * T;
      for (int64_t t = 0; t < T; ++t) out[t] = in[t] * scale + m[t];
      const float peak = aot::lane_max(T, out);
      for (int64_t t = 0; t < T; ++t) out[t] = aot::exp_approx(out[t] - peak);
      const float inv = 1.0f / aot::lane_sum(T, [&](int64_t t) { return out[t]; });
      for (int64_t t = 0; t < T; ++t) out[t] *= inv;
    }
  });
  return 0;
}

// Gradient of probs = masked_softmax(scores, mask, scale) with respect to the scores, from the
// forward's output: dscores = scale * probs * (dprobs - sum(dprobs * probs)) (softmax_backward's, times
// the scale, in the same pass). The additive mask is a constant of the batch: its gradient is not computed.
// inputs:  probs (..., T), dprobs (..., T), scale (1) float32
// outputs: dscores (..., T)
extern "C" int masked_softmax_backward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                       void *stream, void *extra) {
  return softmax_gradient(params, ndims, shapes, *static_cast<const float *>(params[2]),
                          static_cast<float *>(params[3]));
}

extern "C" std::vector<int64_t> masked_softmaxInferShape(int *ndims, int64_t **shapes, void *extra) {
  return aot::shape_of(ndims[0], shapes[0]);
}
