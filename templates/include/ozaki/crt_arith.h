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

// reference.crt_reconstruct after the limb sums, in its exact operation order, for a limb
// count known at compile time (the CRT kernels' instances: no branch per limb).
template <int kLimbs>
__host__ __device__ inline double crt_finish_limbs(const CrtConstants& k,
                                                   const double (&limb_sums)[kMaxLimbs]) {
  static_assert(1 <= kLimbs && kLimbs <= kMaxLimbs, "1 to kMaxLimbs limbs");
  double x = mul_rn(limb_sums[0], k.quotient_factors[0]);
#pragma unroll
  for (int j = 1; j < kLimbs; ++j) x = add_rn(x, mul_rn(limb_sums[j], k.quotient_factors[j]));
  const double q = rint(x);
  double hi = mul_rn(sub_rn(limb_sums[0], mul_rn(q, k.product_limbs[0])), k.limb_scales[0]);
  double lo = 0.0;
#pragma unroll
  for (int j = 1; j < kLimbs; ++j) {
    const double t = mul_rn(sub_rn(limb_sums[j], mul_rn(q, k.product_limbs[j])),
                            k.limb_scales[j]);
    double err;
    hi = two_sum(hi, t, err);  // hi + lo: the double-word sum
    lo = add_rn(lo, err);
  }
  return add_rn(hi, lo);
}

// ldexp(x, e) bit for bit: where 2^e is a normal double, x 2^e rounded once is one
// multiplication (IEEE rounds the exact product, as ldexp rounds the exact scaling); the
// rest (results that leave the double range from afar) go to ldexp itself.
__host__ __device__ inline double scale_by_power_of_two(double x, int e) {
  return e >= -1022 && e <= 1023 ? mul_rn(x, power_of_two(e)) : ldexp(x, e);
}

// reference.unscale for one entry (c_value is not used when beta == 0).
__host__ __device__ inline double unscale_value(double x, int32_t shift_sum, double alpha,
                                                double beta, double c_value) {
  double y = scale_by_power_of_two(x, -shift_sum);
  y = mul_rn(alpha, y);
  if (beta != 0.0) y = add_rn(y, mul_rn(beta, c_value));
  return y;
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
