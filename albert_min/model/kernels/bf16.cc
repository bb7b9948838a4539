// bf16 matrix products for training (albert_min/model/kernels/bf16.py swaps them in): the Dense layer's
// forward and gradient and attention's three batched products, with float32 tensors in and out.
// Inside, each operand is rounded to bfloat16 (round to nearest even: 8 bits of mantissa, float32's
// range) and multiplied by oneDNN's dnnl_gemm_bf16bf16f32, which accumulates and writes float32
// (AVX512-BF16: about twice sgemm's rate here). The bias, the bias's gradient (column sums of dy) and
// everything outside these kernels stay float32, and so do the weights the optimizer updates.
//
// The same rules as the float32 kernels (helper.h): rows (or matrices of the batch) in two halves,
// each half one gemm call whatever the thread count, so the bits do not depend on it; the rounding
// is elementwise, so which thread rounds what does not matter either.
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

#if defined(__AVX512BF16__) && defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "aot.h"
#include "helper.h"
#include "onednn.h"

// oneDNN's public C API (dnnl.h, as in onednn.h). Weak: a libdnnl without it leaves it null and
// bf16_available() says so, instead of the whole library failing to load.
extern "C" {
int dnnl_gemm_bf16bf16f32(char transa, char transb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A,
                          int64_t lda, const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc)
    __attribute__((weak));
}

namespace {

// float32 -> bfloat16 bits, rounded to nearest even, as AVX512-BF16's vcvtneps2bf16 does it: a
// subnormal input becomes a zero of its sign, a NaN stays a (quiet) NaN.
inline uint16_t to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7f800000u) == 0) return static_cast<uint16_t>((bits >> 16) & 0x8000u);   // zero, subnormal
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);   // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

void round_range(const float *src, uint16_t *dst, int64_t begin, int64_t end) {
  int64_t i = begin;
#if defined(__AVX512BF16__) && defined(__AVX512F__)
  for (; i + 16 <= end; i += 16) {
    const __m256bh packed = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst + i), (__m256i)packed);
  }
#endif
  for (; i < end; ++i) dst[i] = to_bf16(src[i]);
}

// Operands to round: float32 source, its element count, the bfloat16 destination.
struct Operand {
  const float *src;
  int64_t count;
  uint16_t *dst;
};

// Every operand rounded, the elements of all of them in two halves (one per core when worth it).
void round_all(std::initializer_list<Operand> operands) {
  int64_t total = 0;
  for (const Operand &op : operands) total += op.count;
  helper::split_range(total, total >= helper::kMinElements, [&](int64_t begin, int64_t end) {
    int64_t offset = 0;                                 // the operands as one index space
    for (const Operand &op : operands) {
      const int64_t lo = begin > offset ? begin - offset : 0;
      const int64_t hi = end - offset < op.count ? end - offset : op.count;
      if (lo < hi) round_range(op.src, op.dst, lo, hi);
      offset += op.count;
    }
  });
}

// C (M x N, ldc) = op(A) op(B) from bfloat16 operands, float32 result; oneDNN's status (0: success).
int gemm(char ta, char tb, int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t lda, const uint16_t *B,
         int64_t ldb, float *C, int64_t ldc) {
  if (onednn::empty_product(M, N, K, C, ldc)) return 0;
  return dnnl_gemm_bf16bf16f32(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
}

// Per-call scratch for the rounded operands: one set per calling thread (MindSpore may run two
// kernels at once, each on its own thread), grown as needed and kept.
uint16_t *scratch(int slot, int64_t count) {
  thread_local std::vector<uint16_t> buffers[3];
  std::vector<uint16_t> &buffer = buffers[slot];
  if (static_cast<int64_t>(buffer.size()) < count) buffer.resize(count);
  return buffer.data();
}

}  // namespace

// 1 where libdnnl has the bf16 gemm (the kernels below may run), else 0.
extern "C" int bf16_available() { return dnnl_gemm_bf16bf16f32 != nullptr; }

// The rounding alone, for tests/model/kernels/test_bf16.py: n float32 -> n bfloat16 bits.
extern "C" void round_to_bf16(const float *src, int64_t n, uint16_t *dst) { round_all({{src, n, dst}}); }

// y = x W^T + b with x and W rounded to bfloat16, float32 accumulation; the bias added in float32.
// inputs:  x (..., K), W (N, K), b (N)
// outputs: y (..., N)
extern "C" int dense_forward_bf16(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                  void *stream, void *extra) {
  const float *x = static_cast<const float *>(params[0]);
  const float *w = static_cast<const float *>(params[1]);
  const float *b = static_cast<const float *>(params[2]);
  float *y = static_cast<float *>(params[3]);
  if (dnnl_gemm_bf16bf16f32 == nullptr) return 1;
  const int64_t K = shapes[0][ndims[0] - 1], M = helper::leading_rows(ndims[0], shapes[0]), N = shapes[1][0];
  uint16_t *xh = scratch(0, M * K), *wh = scratch(1, N * K);
  round_all({{x, M * K, xh}, {w, N * K, wh}});
  int status[2] = {0, 0};
  helper::split_range(M, M * N * K >= helper::kMinWork, [&](int64_t begin, int64_t end) {
    if (end == begin) return;
    status[begin > 0] = gemm('N', 'T', end - begin, N, K, xh + begin * K, K, wh, K, y + begin * N, N);
    for (int64_t r = begin; r < end; ++r) {
      float *yr = y + r * N;
      for (int64_t c = 0; c < N; ++c) yr[c] += b[c];
    }
  });
  return status[0] | status[1];
}

// Gradient of y = x W^T + b: dx = dy W and dW = dy^T x from bfloat16 operands (float32 results);
// db = column sums of dy in float32, in the float32 kernel's order.
// inputs:  x (..., K), W (N, K), dy (..., N)
// outputs: dx (..., K), dW (N, K), db (N)
extern "C" int dense_backward_bf16(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                   void *stream, void *extra) {
  const float *x = static_cast<const float *>(params[0]);
  const float *w = static_cast<const float *>(params[1]);
  const float *dy = static_cast<const float *>(params[2]);
  float *dx = static_cast<float *>(params[3]);
  float *dw = static_cast<float *>(params[4]);
  float *db = static_cast<float *>(params[5]);
  if (dnnl_gemm_bf16bf16f32 == nullptr) return 1;
  const int64_t K = shapes[0][ndims[0] - 1], M = helper::leading_rows(ndims[0], shapes[0]), N = shapes[1][0];
  uint16_t *xh = scratch(0, M * K), *wh = scratch(1, N * K), *dyh = scratch(2, M * N);
  round_all({{x, M * K, xh}, {w, N * K, wh}, {dy, M * N, dyh}});
  int status[2] = {0, 0};
  helper::run_pair(M * N * K >= helper::kMinWork,      // dx and dW cost the same: one on each core
      [&] {
        status[0] = gemm('N', 'N', M, K, N, dyh, N, wh, K, dx, K);
        helper::column_sums(dy, M, N, 0, N / 2, db);
      },
      [&] {
        status[1] = gemm('T', 'N', N, K, M, dyh, N, xh, K, dw, K);
        helper::column_sums(dy, M, N, N / 2, N, db);
      });
  return status[0] | status[1];
}

namespace {

// One (batch, head) matrix of rows x cols inside a tensor: "split" [B, N, rows, cols] (scores,
// probabilities; a batch of contiguous matrices with N = 1) or "merged" [B, rows, N, cols] (q, k, v,
// context).
struct HeadMatrix {
  int64_t rows, cols, heads;
  bool split;
  int64_t offset(int64_t b, int64_t n) const {
    return split ? (b * heads + n) * rows * cols : b * rows * heads * cols + n * cols;
  }
  int64_t ld() const { return split ? cols : heads * cols; }
};

// out(b, n) = op(a(b, n)) op(b(b, n)) for every batch and head, one gemm each, the (batch, head)
// matrices in two halves; both inputs rounded to bfloat16 first.
// inputs: params[0] (a), params[1] (b); output params[2]; heads: out's.
int heads_gemm(char ta, char tb, HeadMatrix a, HeadMatrix b, HeadMatrix out, int64_t batch, void **params) {
  if (dnnl_gemm_bf16bf16f32 == nullptr) return 1;
  const float *a32 = static_cast<const float *>(params[0]);
  const float *b32 = static_cast<const float *>(params[1]);
  float *c = static_cast<float *>(params[2]);
  const int64_t heads = out.heads, a_size = batch * heads * a.rows * a.cols, b_size = batch * heads * b.rows * b.cols;
  const int64_t M = ta == 'T' ? a.cols : a.rows, K = ta == 'T' ? a.rows : a.cols, N = tb == 'T' ? b.rows : b.cols;
  uint16_t *ah = scratch(0, a_size), *bh = scratch(1, b_size);
  round_all({{a32, a_size, ah}, {b32, b_size, bh}});
  int status[2] = {0, 0};
  helper::split_range(batch * heads, batch * heads * M * N * K >= helper::kMinWork, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t bi = i / heads, n = i % heads;
      status[begin > 0] |= gemm(ta, tb, M, N, K, ah + a.offset(bi, n), a.ld(), bh + b.offset(bi, n), b.ld(),
                                c + out.offset(bi, n), out.ld());
    }
  });
  return status[0] | status[1];
}

// Attention's batched products from bfloat16 operands, one gemm per matrix of the batch (contiguous
// matrices: heads_gemm with one head); op(a) is M x K, op(b) K x N, out (..., M, N) float32.
int batched_gemm(char ta, char tb, void **params, int *ndims, int64_t **shapes) {
  const int nd = ndims[0];
  const int64_t a_rows = shapes[0][nd - 2], a_cols = shapes[0][nd - 1];
  const int64_t b_rows = shapes[1][nd - 2], b_cols = shapes[1][nd - 1];
  const int64_t M = ta == 'T' ? a_cols : a_rows, N = tb == 'T' ? b_rows : b_cols;
  return heads_gemm(ta, tb, {a_rows, a_cols, 1, true}, {b_rows, b_cols, 1, true}, {M, N, 1, true},
                    helper::leading_rows(nd - 1, shapes[0]), params);
}

}  // namespace

// out = a b    inputs: a (..., M, K), b (..., K, N)
extern "C" int batch_matmul_nn_bf16(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                    void *stream, void *extra) {
  return batched_gemm('N', 'N', params, ndims, shapes);
}

// out = a b^T  inputs: a (..., M, K), b (..., N, K)
extern "C" int batch_matmul_nt_bf16(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                    void *stream, void *extra) {
  return batched_gemm('N', 'T', params, ndims, shapes);
}

// out = a^T b  inputs: a (..., K, M), b (..., K, N)
extern "C" int batch_matmul_tn_bf16(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                    void *stream, void *extra) {
  return batched_gemm('T', 'N', params, ndims, shapes);
}


// Attention's products in training with q, k, v and the context left in the Dense layers' layout
// [B, S, N, D] (N heads of D): each head's matrix is read and written in place, rows N * D apart, where
// the float32 path moves every head into [B, N, S, D] and back (four transposes forward, four in the
// gradient). One bf16 gemm per (batch, head) (heads_gemm).

// scores = q k^T per head     inputs: q (B, S, N, D), k (B, T, N, D)   output: (B, N, S, T)
extern "C" int attention_scores_bf16(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                     void *stream, void *extra) {
  const int64_t B = shapes[0][0], S = shapes[0][1], N = shapes[0][2], D = shapes[0][3], T = shapes[1][1];
  return heads_gemm('N', 'T', {S, D, N, false}, {T, D, N, false}, {S, T, N, true}, B, params);
}

// context = p v per head      inputs: p (B, N, S, T), v (B, T, N, D)   output: (B, S, N, D)
extern "C" int attention_context_bf16(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                      void *stream, void *extra) {
  const int64_t B = shapes[0][0], N = shapes[0][1], S = shapes[0][2], T = shapes[0][3], D = shapes[1][3];
  return heads_gemm('N', 'N', {S, T, N, true}, {T, D, N, false}, {S, D, N, false}, B, params);
}

// p^T x per head (the gradients dk = dS^T q, dv = p^T dcontext)
// inputs: p (B, N, S, T), x (B, S, N, D)   output: (B, T, N, D)
extern "C" int attention_context_tn_bf16(int nparam, void **params, int *ndims, int64_t **shapes,
                                         const char **dtypes, void *stream, void *extra) {
  const int64_t B = shapes[0][0], N = shapes[0][1], S = shapes[0][2], T = shapes[0][3], D = shapes[1][3];
  return heads_gemm('T', 'N', {S, T, N, true}, {S, D, N, false}, {T, D, N, false}, B, params);
}

// Output shapes for the graph compiler (dense.cc's and batch_matmul.cc's, under these kernels' names):
// the first input's shape with its last dimension ``last`` ([-2]: an unknown rank stays unknown).
namespace {
std::vector<int64_t> first_with_last(int *ndims, int64_t **shapes, int64_t last) {
  if (aot::unknown_rank(ndims[0], shapes[0])) return {-2};
  std::vector<int64_t> out = aot::shape_of(ndims[0], shapes[0]);
  out.back() = last;
  return out;
}
}  // namespace

extern "C" std::vector<int64_t> dense_forward_bf16InferShape(int *ndims, int64_t **shapes, void *extra) {
  return first_with_last(ndims, shapes, shapes[1][0]);              // x (..., K), W (N, K) -> (..., N)
}

extern "C" std::vector<int64_t> batch_matmul_nn_bf16InferShape(int *ndims, int64_t **shapes, void *extra) {
  return first_with_last(ndims, shapes, shapes[1][ndims[1] - 1]);   // a (..., M, K), b (..., K, N) -> (..., M, N)
}

extern "C" std::vector<int64_t> batch_matmul_nt_bf16InferShape(int *ndims, int64_t **shapes, void *extra) {
  return first_with_last(ndims, shapes, shapes[1][ndims[1] - 2]);   // a (..., M, K), b (..., N, K) -> (..., M, N)
}
