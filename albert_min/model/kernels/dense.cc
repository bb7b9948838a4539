// A Dense layer, y = x W^T + b (W stored [out, in] as in PyTorch), forward and gradient, through
// oneDNN's sgemm (MindSpore's CPU MatMul ran ALBERT's shapes at 0.13-0.31 of the sgemm peak; its
// gradient's transposed MatMuls and BiasAddGrad took 2.2-8.6 ms per call). The AOT signature and
// the threading rules: aot.h.
#include <cstdint>
#include <vector>

#include "aot.h"
#include "helper.h"
#include "onednn.h"

// y = x W^T + b: one sgemm per half of the rows.
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

extern "C" std::vector<int64_t> dense_forwardInferShape(int *ndims, int64_t **shapes, void *extra) {
  if (aot::unknown_rank(ndims[0], shapes[0])) return {-2};
  std::vector<int64_t> out = aot::shape_of(ndims[0], shapes[0]);
  out.back() = shapes[1][0];                   // x (..., K), W (N, K) -> (..., N)
  return out;
}

// Gradient of y = x W^T + b.
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
  // dx and dW cost the same (M N K multiply-adds each): one on each core, then half of db's columns
  int status[2] = {0, 0};
  helper::run_pair(M * N * K >= helper::kMinWork,
      [&] {
        status[0] = onednn::sgemm('N', 'N', M, K, N, dy, N, w, K, dx, K);
        helper::column_sums(dy, M, N, 0, N / 2, db);
      },
      [&] {
        status[1] = onednn::sgemm('T', 'N', N, K, M, dy, N, x, K, dw, K);
        helper::column_sums(dy, M, N, N / 2, N, db);
      });
  return status[0] | status[1];
}
