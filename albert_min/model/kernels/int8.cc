// int8 inference for a Dense layer (albert_min/model/kernels/int8.py swaps them in):
//   y = x W^T + b  with W quantized once per output channel (symmetric int8, scale sw[n]) and x
//   quantized per row at run time (asymmetric uint8: x ~ sa[m] (q[m, k] - zp[m])), multiplied in
//   int32 by oneDNN's dnnl_gemm_u8s8s32 (MindSpore's bundled libdnnl.so.3; exact integer products,
//   AVX512-VNNI), then dequantized with the bias here:
//   y[m, n] = sa[m] sw[n] (sum_k q[m, k] W[n, k] - zp[m] rowsum(W)[n]) + b[n].
// The gemm's own offset is one number for all of A, so the per-row zero point is taken off
// afterwards with W's row sums, computed once when W is quantized. Rows split over two cores as
// dense_forward's (helper.h): each output computed by one thread, the same bits at any count.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "aot.h"
#include "helper.h"

// oneDNN's public C API (dnnl.h; no headers ship with MindSpore). Weak: a libdnnl without them
// leaves them null, and int8_available() says so instead of the library failing to load.
extern "C" {
typedef int dnnl_status_t;   // an enum in dnnl.h; 0 is dnnl_success
dnnl_status_t dnnl_gemm_u8s8s32(char transa, char transb, char offsetc, int64_t M, int64_t N, int64_t K,
                                float alpha, const uint8_t *A, int64_t lda, uint8_t ao, const int8_t *B,
                                int64_t ldb, int8_t bo, float beta, int32_t *C, int64_t ldc, const int32_t *co)
    __attribute__((weak));
}

namespace {

// acc[rows, N] = q[rows, K] W[N, K]^T in int32: one oneDNN call (sequential here: MindSpore's oneDNN
// runs on a thread pool only when one is handed to it).
int integer_product(int64_t rows, int64_t N, int64_t K, const uint8_t *q, const int8_t *w, int32_t *acc) {
  const int32_t no_offset = 0;
  return dnnl_gemm_u8s8s32('N', 'T', 'F', rows, N, K, 1.0f, q, K, 0, w, K, 0, 0.0f, acc, N, &no_offset);
}

// Row r of x as uint8 with its scale and zero point: the range [min(x, 0), max(x, 0)] in 255 steps
// (0 exactly representable). Returns false when the row holds a NaN or an infinity. The first pass
// keeps a minimum, maximum and NaN flag per lane (aot::for_lanes), combined at the end (min and max are exact: the
// lanes give the scalar loop's lo and hi); a NaN never reaches lo or hi (comparisons with it are
// false), an infinity does.
bool quantize_row(const float *x, int64_t K, uint8_t *q, float *scale, int32_t *zero_point) {
  aot::FloatLanes lo_lanes = {}, hi_lanes = {};
  aot::IntLanes nan_lanes = {};
  aot::for_lanes(x, K, 0.0f, [&](aot::FloatLanes v) {
    lo_lanes = aot::select(v < lo_lanes, v, lo_lanes);
    hi_lanes = aot::select(v > hi_lanes, v, hi_lanes);
    nan_lanes |= v != v;
  });
  float lo = 0.0f, hi = 0.0f;
  int nan = 0;
  for (int l = 0; l < aot::kVectorLanes; ++l) {
    lo = lo_lanes[l] < lo ? lo_lanes[l] : lo;
    hi = hi_lanes[l] > hi ? hi_lanes[l] : hi;
    nan |= nan_lanes[l];
  }
  if (nan || !std::isfinite(lo) || !std::isfinite(hi)) return false;
  const float step = (hi - lo) / 255.0f;
  const float s = step > 0.0f ? step : 1.0f;   // an all-zero row: q = zp = 0
  const float inv = 1.0f / s;
  const float round = 12582912.0f;              // 1.5 * 2^23: adding and subtracting rounds to nearest even
  const float zp = ((-lo * inv + round) - round);
  const float z = zp < 0.0f ? 0.0f : zp > 255.0f ? 255.0f : zp;
  for (int64_t k = 0; k < K; ++k) {
    float v = ((x[k] * inv + round) - round) + z;
    v = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
    q[k] = static_cast<uint8_t>(v);
  }
  *scale = s;
  *zero_point = static_cast<int32_t>(z);
  return true;
}

// Rows [begin, end) of x W^T + b: quantize, one int8 gemm, dequantize with the bias. Output row r's
// columns go in blocks of `block` contiguous floats (a multiple of it divides N) to place(r, c), the
// address of column c of row r: y's row for a Dense layer, the heads' layout for q, k and v.
// Input row r is row(r, buffer): x's row, or one gathered into buffer (K floats).
template <typename Row, typename Place>
void int8_rows(int64_t begin, int64_t end, int64_t N, int64_t K, Row row, const int8_t *w,
               const float *w_scale, const int32_t *w_rowsum, const float *b, int64_t block, Place place) {
  const int64_t rows = end - begin;
  if (rows <= 0) return;
  thread_local std::vector<uint8_t> q;
  thread_local std::vector<int32_t> acc;
  thread_local std::vector<float> gathered;
  gathered.resize(K);
  std::vector<float> scale(rows);
  std::vector<int32_t> zero_point(rows);
  std::vector<char> finite(rows);
  q.resize(rows * K);
  acc.resize(rows * N);
  for (int64_t r = 0; r < rows; ++r)
    finite[r] = quantize_row(row(begin + r, gathered.data()), K, q.data() + r * K, &scale[r], &zero_point[r]);
  const int status = integer_product(rows, N, K, q.data(), w, acc.data());
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t *ar = acc.data() + r * N;
    const bool failed = status != 0 || !finite[r];   // never a plausible number from a failed call or a NaN input
    const float sa = scale[r];
    const int32_t zp = zero_point[r];
    for (int64_t c0 = 0; c0 < N; c0 += block) {
      float *yr = place(begin + r, c0);
      if (failed) {
        for (int64_t c = 0; c < block; ++c) yr[c] = NAN;
        continue;
      }
      for (int64_t c = 0; c < block; ++c)
        yr[c] = static_cast<float>(ar[c0 + c] - zp * w_rowsum[c0 + c]) * (sa * w_scale[c0 + c]) + b[c0 + c];
    }
  }
}

// The kernels' common body: W, its scales, row sums and bias from params[1..4] (the AOT inputs after
// x), rows [0, M) split over two cores (helper.h), each output computed by one thread: the same bits
// at any count. row and place as int8_rows takes them. 1 where libdnnl lacks the int8 gemm, else 0.
template <typename Row, typename Place>
int int8_product(void **params, int64_t M, int64_t N, int64_t K, int64_t block, Row row, Place place) {
  if (dnnl_gemm_u8s8s32 == nullptr) return 1;
  const int8_t *w = static_cast<const int8_t *>(params[1]);
  const float *w_scale = static_cast<const float *>(params[2]);
  const int32_t *w_rowsum = static_cast<const int32_t *>(params[3]);
  const float *b = static_cast<const float *>(params[4]);
  helper::split_range(M, M * N * K >= 4 * helper::kMinWork, [&](int64_t begin, int64_t end) {
    int8_rows(begin, end, N, K, row, w, w_scale, w_rowsum, b, block, place);
  });
  return 0;
}

}  // namespace

// 1 where libdnnl has the int8 gemm (the kernel below may run), else 0.
extern "C" int int8_available() { return dnnl_gemm_u8s8s32 != nullptr; }

// The integer part of the kernel, for tests/model/kernels/test_int8.py: out[m, n] = sum_k (a[m, k] - zp[m]) w[n, k],
// through the same gemm and zero-point correction. Returns oneDNN's status (0: success).
extern "C" int int8_matmul_exact(int64_t M, int64_t N, int64_t K, const uint8_t *a, const int32_t *zp,
                                 const int8_t *w, const int32_t *w_rowsum, int32_t *out) {
  const int status = integer_product(M, N, K, a, w, out);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) out[m * N + n] -= zp[m] * w_rowsum[n];
  return status;
}

// y = x W^T + b with W int8 per output channel.
// inputs:  x (..., K) float32, W (N, K) int8, w_scale (N) float32, w_rowsum (N) int32, b (N) float32
// outputs: y (..., N) float32
extern "C" int dense_int8_forward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                  void *stream, void *extra) {
  const float *x = static_cast<const float *>(params[0]);
  float *y = static_cast<float *>(params[5]);
  const int64_t K = shapes[0][ndims[0] - 1], M = helper::leading_rows(ndims[0], shapes[0]), N = shapes[1][0];
  return int8_product(params, M, N, K, N, [&](int64_t r, float *) { return x + r * K; },
                      [&](int64_t r, int64_t c) { return y + r * N + c; });
}

extern "C" std::vector<int64_t> dense_int8_forwardInferShape(int *ndims, int64_t **shapes, void *extra) {
  if (aot::unknown_rank(ndims[0], shapes[0])) return {-2};
  std::vector<int64_t> out(shapes[0], shapes[0] + ndims[0]);
  out.back() = shapes[1][0];                                // x (..., K), W (N, K) -> (..., N)
  return out;
}

// Attention's q, k and v from one int8 product over their concatenated weights: each row of x is
// quantized once (not once per projection), and the results are written in the heads' layout, so
// no head split follows. Per-output-channel weights and per-row activations make every output the
// same bits as three dense_int8_forward calls followed by the head split.
// inputs:  x (B, S, H) float32, W (3, N, D, H) int8 (the query's, key's and value's rows), w_scale (3 N D)
//          float32, w_rowsum (3 N D) int32, b (3 N D) float32
// outputs: qkv (3, B, N, S, D) float32: q, k, v each [B, N, S, D]
extern "C" int qkv_int8_forward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                void *stream, void *extra) {
  const float *x = static_cast<const float *>(params[0]);
  float *out = static_cast<float *>(params[5]);
  const int64_t B = shapes[0][0], S = shapes[0][1], K = shapes[0][2];
  const int64_t heads = shapes[1][1], D = shapes[1][2], N = 3 * heads * D;
  return int8_product(params, B * S, N, K, D, [&](int64_t r, float *) { return x + r * K; },
                      [&](int64_t r, int64_t c) {
                        const int64_t part_head = c / D, part = part_head / heads, head = part_head % heads;
                        const int64_t batch = r / S, position = r % S;          // c = (part, head, d), r = (b, s)
                        return out + (((part * B + batch) * heads + head) * S + position) * D;
                      });
}

extern "C" std::vector<int64_t> qkv_int8_forwardInferShape(int *ndims, int64_t **shapes, void *extra) {
  if (aot::unknown_rank(ndims[0], shapes[0])) return {-2};
  return {3, shapes[0][0], shapes[1][1], shapes[0][1], shapes[1][2]};   // x (B, S, H), W (3, N, D, H)
}

// Attention's output projection straight from the heads' layout: y = merge(x) W^T + b, merge(x)[b, s] the
// N heads' D floats of position s side by side, gathered as each row is quantized (no Transpose
// before it); the same bits as dense_int8_forward on the merged tensor.
// inputs:  x (B, N, S, D) float32, W (Nout, N D) int8, w_scale (Nout), w_rowsum (Nout), b (Nout)
// outputs: y (B, S, Nout) float32
extern "C" int dense_int8_heads_forward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                        void *stream, void *extra) {
  const float *x = static_cast<const float *>(params[0]);
  float *y = static_cast<float *>(params[5]);
  const int64_t B = shapes[0][0], heads = shapes[0][1], S = shapes[0][2], D = shapes[0][3];
  const int64_t K = heads * D, N = shapes[1][0];
  return int8_product(params, B * S, N, K, N,
                      [&](int64_t r, float *buffer) {
                        const int64_t batch = r / S, position = r % S;
                        for (int64_t h = 0; h < heads; ++h)
                          std::memcpy(buffer + h * D, x + ((batch * heads + h) * S + position) * D, D * sizeof(float));
                        return static_cast<const float *>(buffer);
                      },
                      [&](int64_t r, int64_t c) { return y + r * N + c; });
}

extern "C" std::vector<int64_t> dense_int8_heads_forwardInferShape(int *ndims, int64_t **shapes, void *extra) {
  if (aot::unknown_rank(ndims[0], shapes[0])) return {-2};
  return {shapes[0][0], shapes[0][2], shapes[1][0]};        // x (B, N, S, D), W (Nout, N D) -> (B, S, Nout)
}
