// Dropout whose mask is a pure function of (key, step, call, element index), for
// MindSpore's ops.Custom(func_type="aot") (the AOT signature: see aot.h).
//
// MindSpore's CPU Dropout draws from one std::default_random_engine shared by the threads
// it launches, so its masks depend on how the threads are scheduled. Here element e of a
// call keeps its value when word e % 4 of Philox4x32-10(counter = (e / 4, call, step),
// key) is below keep * 2^32: no state, so any split of the elements over threads, and a
// recomputation in the backward pass, gives the same mask.
#include <cstdint>
#include <cstring>

#ifdef __AVX2__
#include <immintrin.h>
#endif

#include "helper.h"

namespace {

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), as
// Random123 computes it: 10 rounds, the key bumped by the Weyl constants before rounds 2-10.
inline void philox4x32_10(const uint32_t counter[4], uint32_t k0, uint32_t k1, uint32_t out[4]) {
  uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
  for (int round = 0; round < 10; ++round) {
    if (round) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const uint64_t p0 = uint64_t(0xD2511F53u) * c0, p1 = uint64_t(0xCD9E8D57u) * c2;
    const uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0, n2 = uint32_t(p0 >> 32) ^ c3 ^ k1;
    c0 = n0;
    c1 = uint32_t(p1);
    c2 = n2;
    c3 = uint32_t(p0);
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

// The draw for elements [4 b, 4 b + 4) is Philox of counter (b mod 2^32, b / 2^32, call, step).
inline void block_draws(int64_t block, const uint32_t state[4], uint32_t out[4]) {
  const uint32_t counter[4] = {uint32_t(uint64_t(block)), uint32_t(uint64_t(block) >> 32), state[3], state[2]};
  philox4x32_10(counter, state[0], state[1], out);
}

#ifdef __AVX2__
// The same draws for 8 blocks at once (32 elements), one block per 32-bit lane: 4-10x faster than
// block by block. Returns the keep masks of the 32 elements in order, 8 per vector.
inline void eight_blocks(int64_t first, const uint32_t state[4], __m256i masks[4], uint32_t threshold) {
  __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32(int(uint32_t(uint64_t(first)))),
                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  // the high word is the same for the 8 blocks when they do not straddle a multiple of 2^32 (split there)
  __m256i c1 = _mm256_set1_epi32(int(uint32_t(uint64_t(first) >> 32)));
  __m256i c2 = _mm256_set1_epi32(int(state[3])), c3 = _mm256_set1_epi32(int(state[2]));
  const __m256i m0 = _mm256_set1_epi32(int(0xD2511F53u)), m1 = _mm256_set1_epi32(int(0xCD9E8D57u));
  uint32_t k0 = state[0], k1 = state[1];
  for (int round = 0; round < 10; ++round) {
    if (round) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    // 32 x 32 -> 64-bit products of the even lanes, then of the odd lanes; their low and high halves
    const __m256i p0e = _mm256_mul_epu32(c0, m0), p0o = _mm256_mul_epu32(_mm256_srli_epi64(c0, 32), m0);
    const __m256i p1e = _mm256_mul_epu32(c2, m1), p1o = _mm256_mul_epu32(_mm256_srli_epi64(c2, 32), m1);
    const __m256i lo0 = _mm256_blend_epi32(p0e, _mm256_slli_epi64(p0o, 32), 0xAA);
    const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(p0e, 32), p0o, 0xAA);
    const __m256i lo1 = _mm256_blend_epi32(p1e, _mm256_slli_epi64(p1o, 32), 0xAA);
    const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(p1e, 32), p1o, 0xAA);
    c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(int(k0)));
    c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(int(k1)));
    c1 = lo1;
    c3 = lo0;
  }
  // c0..c3 hold word 0..3 of blocks 0-7; transpose to element order (block 0 words 0-3, block 1 ...)
  const __m256i a = _mm256_unpacklo_epi32(c0, c1), b = _mm256_unpacklo_epi32(c2, c3);
  const __m256i c = _mm256_unpackhi_epi32(c0, c1), d = _mm256_unpackhi_epi32(c2, c3);
  const __m256i b04 = _mm256_unpacklo_epi64(a, b), b15 = _mm256_unpackhi_epi64(a, b);
  const __m256i b26 = _mm256_unpacklo_epi64(c, d), b37 = _mm256_unpackhi_epi64(c, d);
  const __m256i words[4] = {_mm256_permute2x128_si256(b04, b15, 0x20), _mm256_permute2x128_si256(b26, b37, 0x20),
                            _mm256_permute2x128_si256(b04, b15, 0x31), _mm256_permute2x128_si256(b26, b37, 0x31)};
  // draw < threshold, unsigned: AVX2 compares signed, so both sides are offset by 2^31
  const __m256i flip = _mm256_set1_epi32(int(0x80000000u)), limit = _mm256_set1_epi32(int(threshold ^ 0x80000000u));
  for (int q = 0; q < 4; ++q) masks[q] = _mm256_cmpgt_epi32(limit, _mm256_xor_si256(words[q], flip));
}
#endif

// y[i] = x[i] * scale where draw(i) < threshold, else 0, for i in [begin, end) (begin a multiple of 4).
void apply_mask(const float *x, float *y, int64_t begin, int64_t end, const uint32_t state[4], uint32_t threshold,
                float scale) {
  int64_t i = begin;
#ifdef __AVX2__
  const __m256 factor = _mm256_set1_ps(scale);
  for (; i + 32 <= end && uint32_t(uint64_t(i / 4)) <= 0xFFFFFFFFu - 7; i += 32) {
    __m256i masks[4];
    eight_blocks(i / 4, state, masks, threshold);
    for (int q = 0; q < 4; ++q) {
      const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * q), factor);
      _mm256_storeu_ps(y + i + 8 * q, _mm256_and_ps(v, _mm256_castsi256_ps(masks[q])));
    }
  }
#endif
  for (; i < end; i += 4) {   // block by block: the rest (and all of it without AVX2)
    uint32_t draws[4];
    block_draws(i / 4, state, draws);
    for (int64_t j = i; j < i + 4 && j < end; ++j) y[j] = draws[j - i] < threshold ? x[j] * scale : 0.0f;
  }
}

}  // namespace

// y = x * mask / keep, mask[i] = 1 where the element's Philox draw is below keep * 2^32.
// The same kernel is the gradient: dx = dy * mask / keep, with the forward's state.
// inputs:  x (any shape, float32), state (4, int32: key0, key1, step, call), keep (1, float32)
// outputs: y (x's shape)
extern "C" int dropout_apply(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                             void *stream, void *extra) {
  const uint32_t *state = static_cast<const uint32_t *>(params[1]);
  const float keep = static_cast<const float *>(params[2])[0];
  int64_t n = 1;
  for (int i = 0; i < ndims[0]; ++i) n *= shapes[0][i];
  if (keep >= 1.0f) {   // nothing dropped (albert_min never calls it so)
    std::memcpy(params[3], params[0], n * sizeof(float));
    return 0;
  }
  // P(draw < threshold) = threshold / 2^32 = keep, to within 2^-32
  const uint32_t threshold = uint32_t(double(keep) * 4294967296.0);
  const float scale = 1.0f / keep;
  const float *x = static_cast<const float *>(params[0]);
  float *y = static_cast<float *>(params[3]);
  helper::split_range((n + 3) / 4, n >= helper::kMinElements, [&](int64_t begin, int64_t end) {
    apply_mask(x, y, begin * 4, end * 4 < n ? end * 4 : n, state, threshold, scale);
  });
  return 0;
}

// Philox4x32-10 of one counter and key, for the known-answer test (tests/model/kernels/test_dropout.py).
extern "C" void philox4x32_10_block(const uint32_t *counter, const uint32_t *key, uint32_t *out) {
  philox4x32_10(counter, key[0], key[1], out);
}
