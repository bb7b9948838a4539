// Batched matrix products for attention, q k^T and probs v, forward and gradient: one sgemm per
// matrix of the batch (MindSpore's CPU BatchMatMul took 1-1.4 ms per call on [64, 4, 32, 32]
// operands: 256 products of 32 x 32). The AOT signature and the threading rules: aot.h.
// The batch is every leading dimension; op(a) is M x K, op(b) K x N, out (..., M, N).
#include <cstdint>
#include <vector>

#include "aot.h"
#include "helper.h"
#include "onednn.h"

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

extern "C" std::vector<int64_t> batch_matmul_nnInferShape(int *ndims, int64_t **shapes, void *extra) {
  if (aot::unknown_rank(ndims[0], shapes[0])) return {-2};
  std::vector<int64_t> out = aot::shape_of(ndims[0], shapes[0]);
  out.back() = shapes[1][ndims[1] - 1];        // a (..., M, K), b (..., K, N) -> (..., M, N)
  return out;
}

extern "C" std::vector<int64_t> batch_matmul_ntInferShape(int *ndims, int64_t **shapes, void *extra) {
  if (aot::unknown_rank(ndims[0], shapes[0])) return {-2};
  std::vector<int64_t> out = aot::shape_of(ndims[0], shapes[0]);
  out.back() = shapes[1][ndims[1] - 2];        // a (..., M, K), b (..., N, K) -> (..., M, N)
  return out;
}
