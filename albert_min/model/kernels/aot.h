// What the kernel files share: MindSpore's AOT calling convention, the output-shape helpers of
// their <kernel>InferShape functions, and the fixed-order sum the row kernels use.
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

}  // namespace aot
