// Attention's head split and merge: (B, P, Q, D) -> (B, Q, P, D), rows of D floats copied
// ([B, S, N, D] -> [B, N, S, D] and back), forward and gradient. MindSpore's CPU Transpose
// kernel keeps a vector of one 8-byte index per element for as long as its graph lives (twice
// the float32 tensor; 32 of them in a 4-loop train step, 1.07 GB per graph at batch 64 x 384).
// The AOT signature and the threading rules: aot.h.
#include <cstdint>
#include <cstring>

#include "helper.h"

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
