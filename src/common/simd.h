// common/simd.h: the vector helpers of tclm's hot loops (internal).
//
// * 16-lane float vectors and the elementwise math of the inference engine (src/infer).
//   Written with GCC/Clang vector extensions: with -march=native on an AVX-512 CPU one vector is one
//   zmm register; elsewhere the compiler splits it into narrower registers (same results, slower).
//   Every function here is plain float32 math that follows the libtorch model's definitions:
//     exp        range reduction x = k ln2 + r (|r| <= ln2/2, ln2 split in two parts so k ln2 is exact)
//                and the degree-7 Taylor polynomial of e^r (truncation < 6e-9 relative), times 2^k.
//     log1p      for arguments in [0, 1]: u = 1 + y, log u = k ln2 + 2 atanh(s), s = (m-1)/(m+1) with
//                m in [sqrt(1/2), sqrt(2)), plus the rounding correction ((u - 1) - y) / u.
//     softplus   torch::softplus (beta 1, threshold 20): x for x > 20, else max(x, 0) + log1p(exp(-|x|)).
//     silu       x / (1 + exp(-x)).
// * sq_dist: the squared L2 distance of two rows, vectorised by the compiler (OpenMP simd), for the
//   samplers' distance passes (src/sample).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__AVX512F__)
#include <immintrin.h>
#else
// Without AVX-512 a 64-byte vector is passed differently than with it; these functions are all inline
// and internal to tclm (no V crosses a library boundary), so the ABI note does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#if !defined(__GNUC__)
#error "common/simd.h uses GCC/Clang vector extensions"
#endif

namespace tclm::simd {

inline constexpr int kLanes = 16;  // floats per vector (one AVX-512 register)

typedef float V __attribute__((vector_size(kLanes * sizeof(float))));
typedef int32_t VI __attribute__((vector_size(kLanes * sizeof(int32_t))));

inline V splat(float v) { return V{} + v; }

inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}

inline void store(float* p, V v) { std::memcpy(p, &v, sizeof(V)); }

/// Lanes where `m` is true (-1) take a, others b.
inline V select(VI m, V a, V b) { return (V)((m & (VI)a) | (~m & (VI)b)); }

inline V vmax(V a, V b) { return select(a > b, a, b); }

inline float hsum(V v) {
  // Pairwise halving: the compiler turns this into shuffles + adds.
  float s = 0.0f;
  for (int j = 0; j < kLanes; ++j) s += v[j];
  return s;
}

/// e^x. Inputs below -87.3 give 0 (where expf is subnormal or 0); inputs above 88 give e^88 = 1.65e38
/// (finite; only reached by silu(-x) for x < -88, where the result is ~0 either way); NaN stays NaN.
#if defined(__AVX512F__)
// AVX-512: the same polynomial; rounding with vrndscaleps and scaling by 2^k with vscalefps (no
// exponent-field arithmetic), zero-masked where x < -87.3.
inline V vexp(V x) {
  const __m512 xv = (__m512)x;
  const __mmask16 keep = _mm512_cmp_ps_mask(xv, _mm512_set1_ps(-87.33654f), _CMP_NLT_UQ);  // NaN: keep
  // No lower clamp: lanes below -87.3 (even -inf, where r is NaN) are zeroed by the mask.
  const __m512 xc = _mm512_mask_min_ps(xv, 0xFFFF, _mm512_set1_ps(88.0f), xv);  // NaN (2nd operand) passes through
  // (The masked forms with an explicit source avoid GCC 12's -Wmaybe-uninitialized on the plain ones.)
  const __m512 k = _mm512_mask_roundscale_ps(xc, 0xFFFF, _mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693145751953125f), xc);  // x - k ln2 (two parts)
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(1.42860682030941723212e-6f), r);
  __m512 p = _mm512_fmadd_ps(r, _mm512_set1_ps(1.0f / 5040.0f), _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return (V)_mm512_maskz_scalef_ps(keep, p, k);
}
#else
inline V vexp(V x) {
  constexpr float kMin = -87.33654f;  // ln(FLT_MIN)
  constexpr float kMax = 88.0f;       // keeps round(x / ln2) <= 127
  constexpr float kInvLn2 = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;  // 16 significant bits: k * kLn2Hi is exact for |k| < 256
  constexpr float kLn2Lo = 1.42860682030941723212e-6f;
  constexpr float kShifter = 12582912.0f;      // 1.5 * 2^23: x + kShifter rounds x to an integer
  const VI low = x < kMin;
  V xc = select(low, splat(kMin), x);
  xc = select(xc > kMax, splat(kMax), xc);
  const V t = xc * kInvLn2 + kShifter;
  const V k = t - kShifter;                       // round(x / ln2)
  const VI ki = (VI)t - (VI)splat(kShifter);      // the same as an integer
  const V r = (xc - k * kLn2Hi) - k * kLn2Lo;     // |r| <= ln2 / 2
  // e^r = sum r^i / i!, i <= 7 (Horner).
  V p = r * (1.0f / 5040.0f) + (1.0f / 720.0f);
  p = p * r + (1.0f / 120.0f);
  p = p * r + (1.0f / 24.0f);
  p = p * r + (1.0f / 6.0f);
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^k as a float (k + 127 in the exponent field; k <= 127 since x <= 88).
  const V scale = (V)((ki + 127) << 23);
  p = p * scale;
  return select(low, V{}, p);
}
#endif

/// log(1 + y) for y in [0, 1] (NaN stays NaN).
inline V vlog1p_unit(V y) {
  const V u = y + 1.0f;  // in [1, 2]
  // u = m * 2^e with m in [sqrt(1/2), sqrt(2)): here e is 0 or 1.
  const VI hi = u > 1.41421356237f;
  const V m = select(hi, u * 0.5f, u);
  const V e = select(hi, splat(1.0f), V{});
  const V s = (m - 1.0f) / (m + 1.0f);  // |s| <= 0.1716
  const V s2 = s * s;
  // 2 atanh(s) = 2s (1 + s^2/3 + s^4/5 + s^6/7 + s^8/9 + s^10/11); next term < 3e-10 relative.
  V q = s2 * (1.0f / 11.0f) + (1.0f / 9.0f);
  q = q * s2 + (1.0f / 7.0f);
  q = q * s2 + (1.0f / 5.0f);
  q = q * s2 + (1.0f / 3.0f);
  q = q * s2 + 1.0f;
  const V log_m = 2.0f * s * q;
  // u = 1 + y rounded; log(1 + y) = log(u) - (u - 1 - y) / u to first order.
  const V corr = ((u - 1.0f) - y) / u;
  return e * 0.693147180559945309f + log_m - corr;
}

/// torch::softplus(x) with beta 1 and threshold 20.
inline V vsoftplus(V x) {
  const V ax = select(x < 0.0f, -x, x);
  const V r = vmax(x, V{}) + vlog1p_unit(vexp(-ax));
  return select(x > 20.0f, x, r);
}

/// x * sigmoid(x).
inline V vsilu(V x) { return x / (1.0f + vexp(-x)); }

/// Squared L2 distance of two rows of length d.
inline float sq_dist(const float* a, const float* b, int d) {
  float s = 0.f;
#ifdef _OPENMP  // (tests include this header without -fopenmp)
#pragma omp simd reduction(+ : s)
#endif
  for (int j = 0; j < d; ++j) {
    const float t = a[j] - b[j];
    s += t * t;
  }
  return s;
}

}  // namespace tclm::simd
