// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The scalar arithmetic of the CRT stage kernels (crt_unscale, combine_unscale): the exact
// fixed-point limb sums, reference.crt_reconstruct's double-word finish, reference.unscale
// and the NaN/Inf pattern of reference.split_nonfinite, each bit for bit (checked on the
// host: tests/host/check_arithmetic.cu). The kernels (stage_crt.cuh) only load, reduce
// (barrett.h) and store around these.

#pragma once

#include <cmath>
#include <cstdint>

#include "ozaki/abi.h"
#include "ozaki/bits.h"
#include "ozaki/constants.h"
#include "ozaki/double_word.h"

namespace ozaki {
namespace stages {

// Every limb sum S_j = sum_g d_gj r_g (d_gj < 2^kLimbBits, r_g < 256) stays an integer
// below 2^53 for kMaxModuli moduli, so it is exact in float64 in any order.
static_assert(int64_t(kMaxModuli) * 255 * ((int64_t(1) << kLimbBits) - 1) < (int64_t(1) << 53),
              "the CRT limb sums must stay exact in float64");

// (double) r for 0 <= r < 2^31, exactly: the double whose bits are those of 2^52 with r
// in the low word is 2^52 + r, and taking 2^52 off is exact. One FP64 add, where the
// int-to-double conversion runs at a quarter of the FP64 rate on sm_80 and sm_90.
__host__ __device__ inline double small_int_to_double(int32_t r) {
  const double biased = double_from_bits(0x4330000000000000ull | static_cast<uint32_t>(r));
  return sub_rn(biased, 4503599627370496.0);  // 2^52
}

// Adds a residue r_g (in [0, m_g)), given as an exact double, to the limb sums:
// S_j += d_gj r_g, for a limb count known at compile time (= k.limbs; the CRT kernels have
// one instance per limb count, so the limb loop carries no branch). Every product and
// partial sum is an integer below 2^53 (the static_assert above), so each step is exact:
// one FMA gives the bits of the rounded multiply-then-add, in any order.
template <int kLimbs>
__host__ __device__ inline void crt_add_value_limbs(const CrtConstants& k, int g, double rd,
                                                    double (&limb_sums)[kMaxLimbs]) {
  static_assert(1 <= kLimbs && kLimbs <= kMaxLimbs, "1 to kMaxLimbs limbs");
#pragma unroll
  for (int j = 0; j < kLimbs; ++j) {
    limb_sums[j] = fma_rn(k.weight_limbs[g][j], rd, limb_sums[j]);
  }
}

// The same for an integer residue, converted by small_int_to_double.
template <int kLimbs>
__host__ __device__ inline void crt_add_residue_limbs(const CrtConstants& k, int g, int32_t r,
                                                      double (&limb_sums)[kMaxLimbs]) {
  crt_add_value_limbs<kLimbs>(k, g, small_int_to_double(r), limb_sums);
}

// The same for k.limbs known at run time (the host checks call this): the kernels' code.
__host__ __device__ inline void crt_add_residue(const CrtConstants& k, int g, int32_t r,
                                                double (&limb_sums)[kMaxLimbs]) {
  static_assert(kMaxLimbs == 4, "one case per limb count below");
  switch (k.limbs) {
    case 1: crt_add_residue_limbs<1>(k, g, r, limb_sums); break;
    case 2: crt_add_residue_limbs<2>(k, g, r, limb_sums); break;
    case 3: crt_add_residue_limbs<3>(k, g, r, limb_sums); break;
    default: crt_add_residue_limbs<4>(k, g, r, limb_sums); break;
  }
}

// --- the limb sums from byte products (the combine on the tensor cores) ----------------
// Each limb weight d_gj < 2^kLimbBits is kLimbBytes bytes, so
//   S_j = sum_g d_gj r_g = sum_b 2^(8b) T_jb,   T_jb = sum_g byte_b(d_gj) r_g,
// and every T_jb (kMaxModuli products of two bytes) is what an INT8 MMA of residue bytes
// with weight bytes gives exactly. Recomposed in 64-bit integers, S_j is the same integer
// below 2^53 as crt_add_value_limbs's sum, hence the same double: the same bits.
inline constexpr int kLimbBytes = (kLimbBits + 7) / 8;
static_assert(int64_t(kMaxModuli) * 255 * 255 < (int64_t(1) << 31),
              "each byte-product sum T_jb must fit an int32 accumulator");

// Byte b of limb j of modulus g's CRT weight (0 for b >= kLimbBytes).
__host__ __device__ inline uint32_t crt_weight_byte(const CrtConstants& k, int g, int j, int b) {
  if (b >= kLimbBytes) return 0;
  return static_cast<uint32_t>(static_cast<uint64_t>(k.weight_limbs[g][j]) >> (8 * b)) & 0xffu;
}

// S_j from its byte sums t[b] = T_jb: exact, S_j < 2^53. Two byte sums make one 32-bit
// word first (T_jb + 2^8 T_j,b+1 < 2^32), then the words are added at their places in 64 bits.
static_assert(int64_t(kMaxModuli) * 255 * 255 * 257 < (int64_t(1) << 32),
              "two byte-product sums must fit one 32-bit word");
static_assert(kLimbBytes == 5, "limb_from_byte_sums is written for five weight bytes per limb");
__host__ __device__ inline double limb_from_byte_sums(const uint32_t (&t)[kLimbBytes]) {
  // T_j0 + 2^8 T_j1 and T_j4 as the low and high words of one 64-bit addend, then one
  // 32 x 32 -> 64-bit multiply-add (an IMAD.WIDE) brings in T_j2 + 2^8 T_j3 at 2^16
  const uint32_t low = t[0] + (t[1] << 8);
  const uint32_t mid = t[2] + (t[3] << 8);
  return static_cast<double>(static_cast<uint64_t>(mid) * 0x10000u + ((static_cast<uint64_t>(t[4]) << 32) | low));
}

// The 4 x 4 byte transpose: on entry byte e of w[p] is element (p, e); on return byte p of
// w[e] is. Eight PRMTs.
__host__ __device__ inline void transpose_bytes_4x4(uint32_t (&w)[4]) {
  const uint32_t lo01 = byte_perm(w[0], w[1], 0x5140);  // (0,0) (1,0) (0,1) (1,1)
  const uint32_t hi01 = byte_perm(w[0], w[1], 0x7362);  // (0,2) (1,2) (0,3) (1,3)
  const uint32_t lo23 = byte_perm(w[2], w[3], 0x5140);
  const uint32_t hi23 = byte_perm(w[2], w[3], 0x7362);
  w[0] = byte_perm(lo01, lo23, 0x5410);
  w[1] = byte_perm(lo01, lo23, 0x7632);
  w[2] = byte_perm(hi01, hi23, 0x5410);
  w[3] = byte_perm(hi01, hi23, 0x7632);
}

// reference.crt_reconstruct after the limb sums, in its exact operation order, for a limb
// count known at compile time (the CRT kernels' instances: no branch per limb).
//
// Three of its operations are left out or fused where the reference's do not round, so the
// bits stay the same:
// - S_j - q P_j is one FMA where the reference has sub(S_j, mul(q, P_j)): x approximates
//   sum_g r_g w_g / P < count 255 (r_g < m_g <= 256, w_g < P) so closely that q = rint(x)
//   <= count 255, hence q P_j < count 255 2^kLimbBits < 2^53 (the limb sums'
//   static_assert above) is exact, and so is S_j - q P_j, a difference of two integers in
//   [0, 2^53) (+0 where they are equal, in both);
// - the last limb's scale is 1 (check_constants holds the launches to it), and x * 1 is x;
// - lo starts as the first TwoSum's error rather than 0 + it: 0 + e is e but for e = -0,
//   and no error here is -0 (a difference above is never -0, so neither is a term, nor a
//   TwoSum's sum of two of them, nor its b - bb, and an error is -0 only where both its
//   addends are).
template <int kLimbs>
__host__ __device__ inline double crt_finish_limbs(const CrtConstants& k,
                                                   const double (&limb_sums)[kMaxLimbs]) {
  static_assert(1 <= kLimbs && kLimbs <= kMaxLimbs, "1 to kMaxLimbs limbs");
  double x = mul_rn(limb_sums[0], k.quotient_factors[0]);
#pragma unroll
  for (int j = 1; j < kLimbs; ++j) x = add_rn(x, mul_rn(limb_sums[j], k.quotient_factors[j]));
  const double q = rint(x);
  auto term = [&](int j) {  // (S_j - q P_j) 2^(kLimbBits (kLimbs - 1 - j))
    const double d = fma_rn(-q, k.product_limbs[j], limb_sums[j]);
    return j == kLimbs - 1 ? d : mul_rn(d, k.limb_scales[j]);
  };
  double hi = term(0);
  double lo = 0.0;
#pragma unroll
  for (int j = 1; j < kLimbs; ++j) {
    double err;
    hi = two_sum(hi, term(j), err);  // hi + lo: the double-word sum
    lo = j == 1 ? err : add_rn(lo, err);
  }
  return add_rn(hi, lo);
}

// ldexp(x, e) bit for bit: where 2^e is a normal double, x 2^e rounded once is one
// multiplication (IEEE rounds the exact product, as ldexp rounds the exact scaling); the
// rest (results that leave the double range from afar) go to ldexp itself.
__host__ __device__ inline bool normal_power_of_two(int e) { return e >= -1022 && e <= 1023; }

__host__ __device__ inline double scale_by_power_of_two(double x, int e) {
  return normal_power_of_two(e) ? mul_rn(x, power_of_two(e)) : ldexp(x, e);
}

// reference.unscale for one entry (c_value is not used when beta == 0).
__host__ __device__ inline double unscale_value(double x, int32_t shift_sum, double alpha,
                                                double beta, double c_value) {
  double y = scale_by_power_of_two(x, -shift_sum);
  y = mul_rn(alpha, y);
  if (beta != 0.0) y = add_rn(y, mul_rn(beta, c_value));
  return y;
}

// unscale_value for beta == 0 where the caller knows normal_power_of_two(-shift_sum)
// (tested once for several entries): the same bits without the range test.
__host__ __device__ inline double unscale_normal(double x, int32_t shift_sum, double alpha) {
  return mul_rn(alpha, mul_rn(x, power_of_two(-shift_sum)));
}

// Everything after the limb sums, shared by P_crt_unscale and P_combine_unscale (one
// function, so their bits cannot drift): reference.crt_reconstruct's end, the pattern
// substitution of reference.gemm (pattern != 0, NaN included, replaces X) and
// reference.unscale.
template <int kLimbs>
__host__ __device__ inline double crt_output_limbs(const CrtConstants& k,
                                                   const double (&limb_sums)[kMaxLimbs],
                                                   double pattern, int32_t shift_sum, double alpha,
                                                   double beta, double c_value) {
  double x = crt_finish_limbs<kLimbs>(k, limb_sums);
  if (pattern != 0.0) x = pattern;  // NaN != 0 too
  return unscale_value(x, shift_sum, alpha, beta, c_value);
}

// The two for k.limbs known at run time (the host checks call these): the kernels' code.
__host__ __device__ inline double crt_finish(const CrtConstants& k,
                                             const double (&limb_sums)[kMaxLimbs]) {
  static_assert(kMaxLimbs == 4, "one case per limb count below");
  switch (k.limbs) {
    case 1: return crt_finish_limbs<1>(k, limb_sums);
    case 2: return crt_finish_limbs<2>(k, limb_sums);
    case 3: return crt_finish_limbs<3>(k, limb_sums);
    default: return crt_finish_limbs<4>(k, limb_sums);
  }
}

__host__ __device__ inline double crt_output(const CrtConstants& k,
                                             const double (&limb_sums)[kMaxLimbs],
                                             double pattern, int32_t shift_sum, double alpha,
                                             double beta, double c_value) {
  switch (k.limbs) {
    case 1: return crt_output_limbs<1>(k, limb_sums, pattern, shift_sum, alpha, beta, c_value);
    case 2: return crt_output_limbs<2>(k, limb_sums, pattern, shift_sum, alpha, beta, c_value);
    case 3: return crt_output_limbs<3>(k, limb_sums, pattern, shift_sum, alpha, beta, c_value);
    default: return crt_output_limbs<4>(k, limb_sums, pattern, shift_sum, alpha, beta, c_value);
  }
}

// Classes of one term a*b (reference.split_nonfinite), as bit flags.
inline constexpr unsigned kTermNan = 1u;
inline constexpr unsigned kTermPosInf = 2u;
inline constexpr unsigned kTermNegInf = 4u;

__host__ __device__ inline unsigned classify_term(double a, double b) {
  const bool a_inf = isinf(a), b_inf = isinf(b);
  unsigned flags = 0;
  if (isnan(a) || isnan(b) || (a == 0.0 && b_inf) || (a_inf && b == 0.0)) flags |= kTermNan;
  const bool a_pinf = a_inf && a > 0, a_ninf = a_inf && a < 0;
  const bool b_pinf = b_inf && b > 0, b_ninf = b_inf && b < 0;
  if ((a_pinf && b > 0) || (a_ninf && b < 0) || (a > 0 && b_pinf) || (a < 0 && b_ninf))
    flags |= kTermPosInf;
  if ((a_pinf && b < 0) || (a_ninf && b > 0) || (a > 0 && b_ninf) || (a < 0 && b_pinf))
    flags |= kTermNegInf;
  return flags;
}

// The pattern entry from the union of its terms' flags.
__host__ __device__ inline double pattern_value(unsigned flags) {
  const bool pinf = flags & kTermPosInf, ninf = flags & kTermNegInf;
  if ((flags & kTermNan) || (pinf && ninf)) return NAN;
  if (pinf) return INFINITY;
  if (ninf) return -INFINITY;
  return 0.0;
}

}  // namespace stages
}  // namespace ozaki
