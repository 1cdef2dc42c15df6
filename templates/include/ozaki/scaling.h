// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The scalar arithmetic of the scaling stages (scan, coarse magnitudes, accurate shifts):
// each function mirrors a step of ozaki_cutlass/reference.py bit for bit and is checked
// against it on the host (tests/host/check_arithmetic.cu).

#pragma once

#include <climits>
#include <cmath>
#include <cstdint>

#include "ozaki/bits.h"
#include "ozaki/constants.h"

namespace ozaki {
namespace stages {

// ceil(log2(v)) for v >= 1, and 0 for v = 0 (reference._ceil_log2).
__host__ __device__ inline int ceil_log2(uint64_t v) { return v <= 1 ? 0 : bit_length(v - 1); }

// Python's a // b for b > 0 (rounds toward minus infinity).
__host__ __device__ inline int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if (a % b != 0 && a < 0) q -= 1;
  return q;
}

__host__ __device__ inline int64_t clip(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : (v > hi ? hi : v);  // np.clip with lo <= hi
}

// The exponent e of frexp(a) = f 2^e, f in [0.5, 1), for finite a (0 for a = 0), read
// from the bits so that subnormals are exact: a normal a has e = biased - 1022, a
// subnormal a = mantissa * 2^-1074 has e = bit_length(mantissa) - 1074.
__host__ __device__ inline int frexp_exponent(double a) {
  const uint64_t magnitude = double_bits(a) & 0x7fffffffffffffffull;
  if (magnitude == 0) return 0;
  const int biased = static_cast<int>(magnitude >> 52);
  if (biased == 0) return bit_length(magnitude) - 1074;
  return biased - 1022;
}

// reference.fast_bound_bits: qb with k * 2^(2 qb) <= 2^63.
__host__ __device__ inline int fast_bound_bits(int64_t k) {
  if (k <= 1) return kFastBoundBits;
  const int qb = (63 - bit_length(static_cast<uint64_t>(k - 1))) / 2;
  return qb < kFastBoundBits ? qb : kFastBoundBits;
}

// ceil(2^e |a|), raised to 1 for a != 0 (a deep underflow must not drop a bound); the
// q of fast_shifts (e = qb - E) and of coarse_magnitudes (e = 6 - E). Finite a only;
// |a| < 2^E keeps the result <= 2^(e + E).
__host__ __device__ inline uint64_t ceil_scaled_magnitude(double a, int e) {
  double q = ceil(ldexp(fabs(a), e));
  if (a != 0.0 && q == 0.0) q = 1.0;
  return static_cast<uint64_t>(q);
}

// 2^s as two powers of two, each a normal double for |s| <= 2044 (s = qb - E spans
// -1024 .. 1093): |x| p1 p2 is |x| 2^s exactly wherever it is >= 2^-1022.
struct ScaleFactors {
  double p1, p2;
};

__host__ __device__ inline ScaleFactors scale_factors(int s) {
  const int half = s / 2;
  return {power_of_two(half), power_of_two(s - half)};
}

// ceil_scaled_magnitude(m, s) for m = |x| finite and a result below 2^32 (the scan's q,
// at most 2^qb <= 2^kFastBoundBits): two exact multiplications and one conversion that
// rounds up. Where |x| 2^s < 1 it returns 1 (0 for x = 0), as the reference does: a
// result that underflowed rounds up to 1 or is 0 and is raised to 1.
__host__ __device__ inline uint32_t ceil_scaled_by(double m, ScaleFactors f) {
  const double y = m * f.p1 * f.p2;
#ifdef __CUDA_ARCH__
  const uint32_t q = __double2uint_ru(y);
#else
  const uint32_t q = static_cast<uint32_t>(std::ceil(y));
#endif
  return q == 0 && m != 0.0 ? 1u : q;
}

// The coarse magnitude ceil(|x| 2^(kCoarseBits - E)) from the scan's q = ceil(|x| 2^(qb -
// E)) (both as ceil_scaled_by gives them) where qb >= kCoarseBits: ceil(ceil(y) / N) =
// ceil(y / N) for an integer N = 2^(qb - kCoarseBits) and y >= 0, and both are 1 where y is
// below 1 and not 0 (q + 2^drop - 1 < 2^(qb + 1) <= 2^32 for qb <= kFastBoundBits < 32).
__host__ __device__ inline uint32_t coarse_from_scan(uint32_t q, int qb) {
  const int drop = qb - kCoarseBits;
  return (q + ((1u << drop) - 1u)) >> drop;
}

// The end of reference.fast_shifts for one vector: Q = sum q^2, E its exponent.
__host__ __device__ inline int32_t fast_shift_value(uint64_t sum_squares, int exponent, int qb,
                                                    int pb) {
  if (sum_squares == 0) return 0;
  const int64_t t = floor_div(static_cast<int64_t>(pb) - ceil_log2(sum_squares), 2);
  return static_cast<int32_t>(t - exponent + qb);
}

// The coarse magnitude as stored (0 for NaN/Inf, reference.coarse_magnitudes otherwise).
__host__ __device__ inline int8_t coarse_value(double a, int exponent) {
  if (!isfinite(a)) return 0;
  return static_cast<int8_t>(ceil_scaled_magnitude(a, kCoarseBits - exponent));
}

// reference.accurate_shifts, slack s_ij (int64 throughout).
__host__ __device__ inline int64_t coarse_slack(int64_t g, int32_t exp_a, int32_t exp_b,
                                                int32_t mu_fast, int32_t nu_fast, int pb) {
  if (g <= 0) return kNoConstraint;
  const int64_t c = static_cast<int64_t>(pb) + 2 * kCoarseBits - exp_a - exp_b -
                    ceil_log2(static_cast<uint64_t>(g));
  return c - mu_fast - nu_fast;
}

// coarse_slack by keys, for the kernels: s_ij = row_key_i + column_key_j - ceil_log2(g_ij)
// for g_ij > 0, in int32 (exponents, fast shifts and pb stay far below 2^28). A minimum
// over no g_ij > 0 stays at kNoSlack and means kNoConstraint.
inline constexpr int32_t kNoSlack = INT32_MAX;

__host__ __device__ inline int32_t slack_row_key(int32_t exp_a, int32_t mu_fast, int pb) {
  return pb + 2 * kCoarseBits - exp_a - mu_fast;
}

__host__ __device__ inline int32_t slack_column_key(int32_t exp_b, int32_t nu_fast) { return -exp_b - nu_fast; }

// ceil(log2(g)) of a positive bound entry (int32: one 32-bit count of leading zeros).
__host__ __device__ inline int32_t ceil_log2_bound(int32_t g) {
#ifdef __CUDA_ARCH__
  return g <= 1 ? 0 : 32 - __clz(g - 1);
#else
  return ceil_log2(static_cast<uint64_t>(g));
#endif
}

__host__ __device__ inline int32_t ceil_log2_bound(int64_t g) { return ceil_log2(static_cast<uint64_t>(g)); }

// key + the minimum of the other terms, or kNoConstraint where there was none.
__host__ __device__ inline int64_t slack_total(int32_t key, int32_t minimum) {
  return minimum == kNoSlack ? kNoConstraint : static_cast<int64_t>(key) + minimum;
}

// The one-read kernel's form (stage_shifts.cuh): every entry is one subtraction and one
// minimum, without a test per entry. An absent entry (g <= 0) counts as the log2
// kAbsentLog2, so its slack key - kAbsentLog2 > kAbsentSlack loses against every present
// one (|key| < 2^28 above, so present slacks stay below kAbsentSlack and nothing
// overflows); present_or_none maps a minimum at or past kAbsentSlack back to kNoSlack.
// The keys carry the -1 of bound_log2_less_one: (key - 1) - (ceil(log2 g) - 1).
inline constexpr int32_t kAbsentLog2 = -(1 << 30);
inline constexpr int32_t kAbsentSlack = 1 << 29;

// ceil(log2(g)) - 1 for g > 0 (the highest set bit of g - 1; -1 for g = 1), kAbsentLog2
// for g <= 0, any int32 g. On the device: PTX bfind (31 where g - 1 wraps to -1), then the
// sign of g - 1 as a mask, no predicate.
__host__ __device__ inline int32_t bound_log2_less_one(int32_t g) {
  const int32_t h = (g > 0 ? g : 0) - 1;  // -1 exactly where g <= 0
#ifdef __CUDA_ARCH__
  int32_t top;
  asm("bfind.u32 %0, %1;" : "=r"(top) : "r"(h));
#else
  const int32_t top = bit_length(static_cast<uint32_t>(h)) - 1;
#endif
  return top + ((h >> 31) & (kAbsentLog2 - 31));  // h = -1: top = 31
}

__host__ __device__ inline int32_t present_or_none(int32_t best) { return best >= kAbsentSlack ? kNoSlack : best; }

// d_i = clip(row_min // 2, 0, max(pb - E_i - mu_fast_i, 0)).
__host__ __device__ inline int64_t row_gain(int64_t row_min, int32_t exp_a, int32_t mu_fast,
                                            int pb) {
  const int64_t cap = static_cast<int64_t>(pb) - exp_a - mu_fast;
  return clip(floor_div(row_min, 2), 0, cap > 0 ? cap : 0);
}

// row_gain(slack_total(key, best), ...) in int32 (|key| < 2^28, best present_or_none's):
// the one-read kernel's per-row step, without 64-bit arithmetic.
__host__ __device__ inline int32_t row_gain_keys(int32_t key, int32_t best, int32_t exp_a, int32_t mu_fast,
                                                 int pb) {
  static_assert(kNoConstraint < (int64_t(1) << 31), "kNoConstraint is an int32");
  const int32_t row_min = best == kNoSlack ? static_cast<int32_t>(kNoConstraint) : key + best;
  const int32_t cap = pb - exp_a - mu_fast;
  const int32_t half = row_min >> 1;  // floor_div(row_min, 2)
  const int32_t low = half > 0 ? half : 0;
  const int32_t high = cap > 0 ? cap : 0;
  return low < high ? low : high;
}

// g_j = clip(col_min, 0, max(pb - F_j - nu_fast_j, 0)).
__host__ __device__ inline int64_t column_gain(int64_t col_min, int32_t exp_b, int32_t nu_fast,
                                               int pb) {
  const int64_t cap = static_cast<int64_t>(pb) - exp_b - nu_fast;
  return clip(col_min, 0, cap > 0 ? cap : 0);
}


}  // namespace stages
}  // namespace ozaki
