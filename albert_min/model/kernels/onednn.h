// oneDNN's GEMMs, from the library MindSpore ships (<mindspore>/lib/libdnnl.so.3, linked by build.py).
//
// MindSpore ships no oneDNN headers: these are the prototypes of oneDNN's public C API (dnnl.h),
// row-major, dnnl_dim_t = int64_t, dnnl_status_t an enum whose 0 is dnnl_success. This build of
// oneDNN uses the "threadpool" runtime with no threadpool passed, so each call runs on the calling
// thread (ldd shows no OpenMP): the kernels' own second core (helper.h) stays the only other one.
#pragma once

#include <cstdint>
#include <cstring>

extern "C" {
int dnnl_sgemm(char transa, char transb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
               const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
int dnnl_gemm_bf16bf16f32(char transa, char transb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A,
                          int64_t lda, const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc);
int dnnl_gemm_u8s8s32(char transa, char transb, char offsetc, int64_t M, int64_t N, int64_t K, float alpha,
                      const uint8_t *A, int64_t lda, uint8_t ao, const int8_t *B, int64_t ldb, int8_t bo, float beta,
                      int32_t *C, int64_t ldc, const int32_t *co);
int dnnl_gemm_s8s8s32(char transa, char transb, char offsetc, int64_t M, int64_t N, int64_t K, float alpha,
                      const int8_t *A, int64_t lda, int8_t ao, const int8_t *B, int64_t ldb, int8_t bo, float beta,
                      int32_t *C, int64_t ldc, const int32_t *co);
}

namespace onednn {

// Empty products, which oneDNN refuses (a K = 0 operand has a leading dimension of 0): true when
// C (M x N, leading dimension ldc) is already the product, nothing or zeros, and no gemm is needed.
inline bool empty_product(int64_t M, int64_t N, int64_t K, float *C, int64_t ldc) {
  if (M == 0 || N == 0) return true;
  if (K != 0) return false;
  for (int64_t r = 0; r < M; ++r) std::memset(C + r * ldc, 0, N * sizeof(float));
  return true;
}

// C (M x N, leading dimension ldc) = op(A) op(B), float32, row-major; 'N' or 'T' for op. Returns
// oneDNN's status (0: success).
inline int sgemm(char ta, char tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                 int64_t ldb, float *C, int64_t ldc) {
  if (empty_product(M, N, K, C, ldc)) return 0;
  return dnnl_sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
}

}  // namespace onednn
