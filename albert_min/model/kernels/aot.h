// What the kernel files share: MindSpore's AOT calling convention, the output-shape helpers of
// their <kernel>InferShape functions, the fixed-order sum the row kernels use, float vectors (the int8
// quantizing pass's minima and maxima, the masked softmax's maximum) and e^x (GELU's, the masked softmax's).
//
// Every kernel has MindSpore's AOT signature (ops.Custom(func_type="aot")):
//   extern "C" int name(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
//                       void *stream, void *extra)
// params holds the inputs, then the outputs; shapes[i] / ndims[i] describe params[i]; 0 is success.
// All tensors are contiguous float32 unless a kernel says otherwise. Results depend only on the
// inputs, not on the thread count: oneDNN's sgemm runs on the calling thread, and where a kernel
// uses the second core (helper.h) each output element is still computed by one thread, in the same
// order, so a run repeats bit for bit.
//
// Output shapes for MindSpore's graph compiler: a graph whose input shapes are dynamic
// (prediction_engine.dynamic_graph, [None, None] ids) needs them in C++ (``<kernel>InferShape``; Python
// ``out_shape`` functions fail there). -1 is an unknown dimension, [-2] an unknown rank.
#pragma once

#include <cstdint>
#include <cmath>
#include <cstring>
#include <vector>

namespace aot {

inline std::vector<int64_t> shape_of(int ndim, const int64_t *shape) {
  return std::vector<int64_t>(shape, shape + ndim);
}

inline bool unknown_rank(int ndim, const int64_t *shape) { return ndim > 0 && shape[0] == -2; }

// the number of elements of a tensor of that shape
inline int64_t element_count(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

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

// kVectorLanes floats as one vector (the GCC and clang vector extension; -march=native picks the registers:
// one AVX-512 register, two AVX2 ones, ...). The running minima and maxima of a row are kept so: a
// single running minimum is a reduction the compiler leaves scalar without -ffast-math, and an array
// of lanes (an elementwise loop) measured 8x slower than this (8.6 against 1.0 ms for 2048 x 3072).
constexpr int kVectorLanes = 16;
typedef float FloatLanes __attribute__((vector_size(kVectorLanes * sizeof(float))));
typedef int32_t IntLanes __attribute__((vector_size(kVectorLanes * sizeof(float))));

inline FloatLanes select(IntLanes mask, FloatLanes a, FloatLanes b) {   // a where mask, else b
  return (FloatLanes)(((IntLanes)a & mask) | ((IntLanes)b & ~mask));
}

// body(v) for x[0, n) in vectors of kVectorLanes, the last one filled up with fill.
template <typename Body>
void for_lanes(const float *x, int64_t n, float fill, Body body) {
  FloatLanes v;
  int64_t i = 0;
  for (; i + kVectorLanes <= n; i += kVectorLanes) {
    std::memcpy(&v, x + i, sizeof v);
    body(v);
  }
  if (i < n) {
    float tail[kVectorLanes];
    for (int l = 0; l < kVectorLanes; ++l) tail[l] = i + l < n ? x[i + l] : fill;
    std::memcpy(&v, tail, sizeof v);
    body(v);
  }
}

// max of x[0, n) (-inf for n = 0; a NaN is passed over), a running maximum per lane (for_lanes).
inline float lane_max(int64_t n, const float *x) {
  FloatLanes lanes = FloatLanes{} - INFINITY;
  for_lanes(x, n, -INFINITY, [&](FloatLanes v) { lanes = select(v > lanes, v, lanes); });
  float peak = -INFINITY;
  for (int l = 0; l < kVectorLanes; ++l) peak = lanes[l] > peak ? lanes[l] : peak;
  return peak;
}

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

}  // namespace aot
