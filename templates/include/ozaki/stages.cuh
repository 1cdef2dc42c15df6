// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The stage kernels of the staged Ozaki-II pipeline (everything except the INT8 GEMMs),
// and the host launch helpers behind the C ABI that templates/stages.cu.j2 exports
// (ozaki_cutlass.generator.abi.STAGES describes every entry point; the template renders
// their prototypes, the version, the ABI structs and the constants from it).
// Each kernel reproduces a stage function of ozaki_cutlass/reference.py bit for bit:
//
//   P_scan              reference.split_nonfinite (counts only), exponents, fast_shifts
//   P_coarse            reference.coarse_magnitudes (int8 operands of the coarse GEMM)
//   P_accumulate_i64    the int64 sum over k chunks of the coarse GEMM (reference.coarse_bound)
//   P_accurate_shifts   reference.accurate_shifts (a row pass, then a column pass)
//   P_pack              a vector set copied to contiguous vectors (a tiled transpose)
//   P_residues          reference.scale_to_integers + reference.residues (TN int8 layout)
//   P_residues_strided  the same residues in any non-overlapping (plane, row) strides, e.g.
//                       a row's moduli concatenated along k for the fused GEMM
//   P_crt_unscale       reference.modular_products' final "mod m_g" + crt_reconstruct
//                       + the NaN/Inf pattern of reference.split_nonfinite, substituted as
//                       in gemm + unscale
//   P_combine_unscale   the same reconstruction + pattern + unscale from the fused
//                       pipeline's group partials X mod M_group (uint32, or the residue
//                       byte itself for one-modulus groups)
//
// Cost model (H200: 132 SMs at ~1.98 GHz; per SM and clock: 128 FP32 FMA, 64 INT32 or
// FP64 ops, 32 shared-memory words, ~18 bytes of HBM; n = 16384, N = 15 moduli):
//   scan            2 reads of x per vector set (the 2nd mostly from L2 for lanes along
//                   k); ~40 int/fp64 ops per entry. Memory-bound, ~1 ms per operand.
//   coarse          1 read of x (8 B/entry) + 1 B/entry written, 16-byte stores, ~20 ops
//                   per entry: memory-bound, ~0.5 ms per operand.
//   residues        1 read of x (8 B) + N bytes written per entry (16-byte stores), ~30
//                   ops per entry to cut V into float pieces, then per modulus 7 FP32 ops
//                   (every |V| < 2^53 in the warp) or 11 FP32 ops + 1 shared load (the
//                   2^e table), + 3/4 PRMT. 15 moduli: ~1.3 (e = 0) to ~2.4 clk per entry
//                   per SM -> 2.7-4.9 ms for both operands vs a ~3 ms HBM floor (12 GB).
//   crt_unscale     N int32 reads (16-byte loads, evict-first) per entry, per modulus
//                   ~8 INT32 ops (Barrett, no division) + 2L FP64 ops of the limb sums, then
//                   ~40 FP64 ops (crt_finish, ldexp, alpha/beta), 8 B written. ~2.3 clk per
//                   entry per SM issue-bound vs 60 B/entry of HBM (~3.3 ms at 16384^2);
//                   measured ~9.6 ms on an H200 (docs/benchmarks.md): arithmetic-bound.
//   combine_unscale N/G uint32 reads per entry (G moduli per group), ~4 INT32 ops per
//                   modulus: ~1 ms of HBM for N = 15, G = 4; issue ~1.7 clk/entry/SM, ~2 ms.
//   accumulate_i64, accurate_shifts: unchanged (element-wise / row and column passes).

#pragma once

#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include <cuda_pipeline.h>  // __pipeline_memcpy_async (cp.async): the combine's staged loads
#include <cuda_runtime.h>

#include "ozaki/abi.h"
#include "ozaki/constants.h"
#include "ozaki/error_message.h"
#include "ozaki/group_arith.h"  // partial_bytes: how the fused kernels store group partials

namespace ozaki {
namespace stages {

enum Status : int {
  kOk = kStatusOk,
  kBadArgument = kStatusUnsupported,
  kCudaError = kStatusCudaError,
};

// The text behind P_last_error (ozaki/error_message.h).
using Message = ErrorMessage;

// =====================================================================================
// Scalar helpers. __host__ __device__ so that the host checks (tests/host/check_arithmetic.cu,
// run by tests/test_host_arithmetic.py) test them against Python.
// =====================================================================================

// Rounded-to-nearest double operations that the compiler may not contract into FMAs.
__host__ __device__ inline double add_rn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;  // host tests are built with -ffp-contract=off
#endif
}

__host__ __device__ inline double sub_rn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}

__host__ __device__ inline double mul_rn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

// fl(a * b + c), one rounding. Used only where a * b and the sum are exact integers below
// 2^53: there it equals add_rn(c, mul_rn(a, b)), in one instruction instead of two.
__host__ __device__ inline double fma_rn(double a, double b, double c) {
#ifdef __CUDA_ARCH__
  return __fma_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

__host__ __device__ inline uint64_t double_bits(double a) {
  uint64_t bits;
  memcpy(&bits, &a, sizeof(bits));
  return bits;
}

// Python's int.bit_length for an unsigned 64-bit value (0 for 0).
__host__ __device__ inline int bit_length(uint64_t v) {
  if (v == 0) return 0;
#ifdef __CUDA_ARCH__
  return 64 - __clzll(static_cast<long long>(v));
#else
  return 64 - __builtin_clzll(v);
#endif
}

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

// d_i = clip(row_min // 2, 0, max(pb - E_i - mu_fast_i, 0)).
__host__ __device__ inline int64_t row_gain(int64_t row_min, int32_t exp_a, int32_t mu_fast,
                                            int pb) {
  const int64_t cap = static_cast<int64_t>(pb) - exp_a - mu_fast;
  return clip(floor_div(row_min, 2), 0, cap > 0 ? cap : 0);
}

// g_j = clip(col_min, 0, max(pb - F_j - nu_fast_j, 0)).
__host__ __device__ inline int64_t column_gain(int64_t col_min, int32_t exp_b, int32_t nu_fast,
                                               int pb) {
  const int64_t cap = static_cast<int64_t>(pb) - exp_b - nu_fast;
  return clip(col_min, 0, cap > 0 ? cap : 0);
}

// 2^e mod m (e >= 0, 2 <= m <= 256) by square and multiply; products stay below 2^16.
__host__ __device__ inline uint32_t pow2_mod(int e, uint32_t m) {
  uint32_t result = 1 % m;
  uint32_t base = 2 % m;
  while (e > 0) {
    if (e & 1) result = result * base % m;
    base = base * base % m;
    e >>= 1;
  }
  return result;
}

// An integer-valued finite double split as in reference.residues: |a| < 2^53 is the
// integer `value`; larger |a| = value * 2^exp with value the 53-bit integer mantissa.
struct IntegerDouble {
  bool negative;
  uint64_t value;
  int exp;  // 0 for |a| < 2^53, else frexp exponent - 53 (> 0)
};

__host__ __device__ inline IntegerDouble decompose_integer(double a) {
  IntegerDouble d;
  d.negative = a < 0.0;
  const double magnitude = fabs(a);
  if (magnitude < 9007199254740992.0) {  // 2^53
    d.value = static_cast<uint64_t>(magnitude);
    d.exp = 0;
  } else {
    const uint64_t bits = double_bits(magnitude);
    d.value = (bits & 0x000fffffffffffffull) | 0x0010000000000000ull;
    d.exp = static_cast<int>(bits >> 52) - 1075;  // (biased - 1022) - 53
  }
  return d;
}

// The residue of the integer in [0, m).
__host__ __device__ inline uint32_t residue(const IntegerDouble& d, uint32_t m) {
  uint32_t r = static_cast<uint32_t>(d.value % m);
  if (d.exp > 0) r = r * pow2_mod(d.exp, m) % m;
  if (d.negative) r = (m - r) % m;
  return r;
}

// The stored (symmetric) residue: r >= (m + 1) / 2 maps to r - m; 256's 128 is -128.
__host__ __device__ inline int8_t symmetric_residue(uint32_t r, uint32_t m) {
  const int32_t s = r >= (m + 1) / 2 ? static_cast<int32_t>(r) - static_cast<int32_t>(m)
                                     : static_cast<int32_t>(r);
  return static_cast<int8_t>(s);
}

// trunc(ldexp(x, shift)) for finite x (reference.scale_to_integers).
__host__ __device__ inline double scale_to_integer(double x, int shift) {
  return trunc(ldexp(x, shift));
}

// c mod m in [0, m) for a raw int32 GEMM output.
__host__ __device__ inline int32_t positive_mod(int32_t c, int32_t m) {
  const int32_t r = c % m;
  return r < 0 ? r + m : r;
}

// (double) r for 0 <= r < 2^31, exactly: the double whose bits are those of 2^52 with r
// in the low word is 2^52 + r, and taking 2^52 off is exact. One FP64 add, where the
// int-to-double conversion runs at a quarter of the FP64 rate on sm_80 and sm_90.
__host__ __device__ inline double small_int_to_double(int32_t r) {
  const uint64_t bits = 0x4330000000000000ull | static_cast<uint32_t>(r);
  double biased;
  memcpy(&biased, &bits, sizeof(biased));
  return sub_rn(biased, 4503599627370496.0);  // 2^52
}

// Adds residue r_g (in [0, m_g)) to the limb sums: S_j += d_gj r_g, for a limb count known
// at compile time (= k.limbs; the CRT kernels have one instance per limb count, so the limb
// loop carries no branch). Every product and partial sum is an integer below 2^53 (the
// static_assert below), so each step is exact: one FMA gives the bits of the rounded
// multiply-then-add, in any order.
// Every limb sum S_j = sum_g d_gj r_g (d_gj < 2^kLimbBits, r_g < 256) stays an integer
// below 2^53 for kMaxModuli moduli, so it is exact in float64 in any order.
static_assert(int64_t(kMaxModuli) * 255 * ((int64_t(1) << kLimbBits) - 1) < (int64_t(1) << 53),
              "the CRT limb sums must stay exact in float64");

template <int kLimbs>
__host__ __device__ inline void crt_add_residue_limbs(const CrtConstants& k, int g, int32_t r,
                                                      double (&limb_sums)[kMaxLimbs]) {
  static_assert(1 <= kLimbs && kLimbs <= kMaxLimbs, "1 to kMaxLimbs limbs");
  const double rd = small_int_to_double(r);
#pragma unroll
  for (int j = 0; j < kLimbs; ++j) {
    limb_sums[j] = fma_rn(k.weight_limbs[g][j], rd, limb_sums[j]);
  }
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

// reference.crt_reconstruct after the limb sums, in its exact operation order.
__host__ __device__ inline double crt_finish(const CrtConstants& k,
                                             const double (&limb_sums)[kMaxLimbs]) {
  double x = mul_rn(limb_sums[0], k.quotient_factors[0]);
#pragma unroll
  for (int j = 1; j < kMaxLimbs; ++j) {
    if (j < k.limbs) x = add_rn(x, mul_rn(limb_sums[j], k.quotient_factors[j]));
  }
  const double q = rint(x);
  double hi = mul_rn(sub_rn(limb_sums[0], mul_rn(q, k.product_limbs[0])), k.limb_scales[0]);
  double lo = 0.0;
#pragma unroll
  for (int j = 1; j < kMaxLimbs; ++j) {
    if (j < k.limbs) {
      const double t = mul_rn(sub_rn(limb_sums[j], mul_rn(q, k.product_limbs[j])),
                              k.limb_scales[j]);
      const double s = add_rn(hi, t);
      const double bb = sub_rn(s, hi);
      const double err = add_rn(sub_rn(hi, sub_rn(s, bb)), sub_rn(t, bb));
      hi = s;
      lo = add_rn(lo, err);
    }
  }
  return add_rn(hi, lo);
}

// reference.unscale for one entry (c_value is not used when beta == 0).
__host__ __device__ inline double unscale_value(double x, int32_t shift_sum, double alpha,
                                                double beta, double c_value) {
  double y = ldexp(x, -shift_sum);
  y = mul_rn(alpha, y);
  if (beta != 0.0) y = add_rn(y, mul_rn(beta, c_value));
  return y;
}

// Everything after the limb sums, shared by P_crt_unscale and P_combine_unscale (one
// function, so their bits cannot drift): reference.crt_reconstruct's end, the pattern
// substitution of reference.gemm (pattern != 0, NaN included, replaces X) and
// reference.unscale.
__host__ __device__ inline double crt_output(const CrtConstants& k,
                                             const double (&limb_sums)[kMaxLimbs],
                                             double pattern, int32_t shift_sum, double alpha,
                                             double beta, double c_value) {
  double x = crt_finish(k, limb_sums);
  if (pattern != 0.0) x = pattern;  // NaN != 0 too
  return unscale_value(x, shift_sum, alpha, beta, c_value);
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

#include "ozaki/stage_fastmod.cuh"

namespace ozaki {
namespace stages {

// =====================================================================================
// Kernels. All loops over work items are grid-stride loops with int64 indices; block
// shapes are fixed: (32, 8) for the tiled kernels, 256 for the element-wise ones.
// =====================================================================================

struct VectorSet {
  const double* x;
  int64_t nvec;
  int64_t k;
  int64_t vs;  // stride between vectors
  int64_t es;  // stride between the elements of one vector

  __device__ double at(int64_t v, int64_t l) const { return x[v * vs + l * es]; }
};

inline constexpr int kWarp = 32;
inline constexpr int kRowsPerBlock = 8;   // blockDim.y of the (32, 8) kernels
inline constexpr int kThreads = 256;      // blockDim.x of the element-wise kernels
inline constexpr int64_t kMaxBlocks = 1 << 20;

// --- scan: exponent, non-finite count and fast shift per vector ----------------------
// Lanes along k (es the smaller stride): each warp reads one vector (8 per block).
// Lanes along vectors (vs the smaller stride, e.g. the columns of a row-major B): the 32
// lanes of a warp read 32 neighbouring vectors and the 8 warps split k.
// Each thread keeps a partial (max, count, sum of squares); one owner thread per vector
// reduces them from shared memory (max and integer sums do not depend on the order).
template <bool kLanesAlongK>
__global__ void __launch_bounds__(kWarp * kRowsPerBlock)
scan_kernel(VectorSet xs, int pb, int32_t* exps, int32_t* fast_shift,
            int32_t* nonfinite_count) {
  constexpr int kVectors = kLanesAlongK ? kRowsPerBlock : kWarp;  // per block
  constexpr int kLanes = kLanesAlongK ? kWarp : kRowsPerBlock;    // per vector
  const int vloc = kLanesAlongK ? threadIdx.y : threadIdx.x;
  const int lane = kLanesAlongK ? threadIdx.x : threadIdx.y;

  __shared__ double s_max[kVectors][kLanes];
  __shared__ int32_t s_count[kVectors][kLanes];
  __shared__ uint64_t s_sum[kVectors][kLanes];
  __shared__ int32_t s_exp[kVectors];

  const int qb = fast_bound_bits(xs.k);
  const int64_t groups = (xs.nvec + kVectors - 1) / kVectors;
  for (int64_t group = blockIdx.x; group < groups; group += gridDim.x) {
    const int64_t v = group * kVectors + vloc;
    const bool active = v < xs.nvec;

    // Pass 1: max |x| over the finite entries, count of the others.
    double vmax = 0.0;
    int32_t nonfinite = 0;
    if (active) {
      for (int64_t l = lane; l < xs.k; l += kLanes) {
        const double a = xs.at(v, l);
        if (!isfinite(a)) {
          ++nonfinite;
        } else if (fabs(a) > vmax) {
          vmax = fabs(a);
        }
      }
    }
    s_max[vloc][lane] = vmax;
    s_count[vloc][lane] = nonfinite;
    __syncthreads();
    if (lane == 0) {
      double m = 0.0;
      int32_t count = 0;
      for (int p = 0; p < kLanes; ++p) {
        m = s_max[vloc][p] > m ? s_max[vloc][p] : m;
        count += s_count[vloc][p];
      }
      s_exp[vloc] = frexp_exponent(m);
      if (active) {
        exps[v] = s_exp[vloc];
        nonfinite_count[v] = count;
      }
    }
    __syncthreads();

    // Pass 2: Q = sum q^2, exact in uint64 (fast_bound_bits keeps it below 2^63).
    const int e = s_exp[vloc];
    uint64_t sum = 0;
    if (active) {
      for (int64_t l = lane; l < xs.k; l += kLanes) {
        const double a = xs.at(v, l);
        if (isfinite(a)) {
          const uint64_t q = ceil_scaled_magnitude(a, qb - e);
          sum += q * q;
        }
      }
    }
    s_sum[vloc][lane] = sum;
    __syncthreads();
    if (lane == 0 && active) {
      uint64_t total = 0;
      for (int p = 0; p < kLanes; ++p) total += s_sum[vloc][p];
      fast_shift[v] = fast_shift_value(total, e, qb, pb);
    }
    __syncthreads();  // shared memory is reused by the next group
  }
}

// --- chunks of a vector set, for the int8 outputs (coarse, residues) ---------------
// One thread owns a chunk: 16 consecutive k entries (l0 .. l0 + 15, l0 a multiple of 16)
// of one vector v, read once and written as one 16-byte store per output plane.
// Lanes along k (es the smaller stride): the 32 lanes of a warp take 32 consecutive
// chunks of one vector (512 contiguous doubles; with es == 1 each thread reads its 128
// bytes as 8 x 16-byte loads, the L1 serving the other half of each sector).
// Lanes along vectors (vs the smaller stride): the 32 lanes take the same chunk of 32
// neighbouring vectors (coalesced 8-byte loads) and the 8 warps of a block the next 8
// chunks, so each 128-byte output row segment is written by one block at once.
// Padding (l >= k, v >= nvec) is the value 0.
inline constexpr int kChunk = 16;

struct ChunkGrid {
  int64_t rows_pad;
  int64_t chunks_k;  // k_pad / kChunk
  int64_t slots;     // thread slots: rows_pad * chunks_k, or ceil(rows_pad / 32) * 32 * chunks_k
  bool lanes_along_k;
  bool vector_loads;  // es == 1, x and vs keep every chunk 16-byte aligned
};

// The (v, l0) of thread slot c; v may be >= rows_pad (then there is nothing to do).
__device__ inline void chunk_position(const ChunkGrid& g, int64_t c, int64_t& v, int64_t& l0) {
  if (g.lanes_along_k) {
    v = c / g.chunks_k;
    l0 = (c - v * g.chunks_k) * kChunk;
  } else {
    const int64_t rest = c >> 5;
    const int64_t block = rest / g.chunks_k;
    l0 = (rest - block * g.chunks_k) * kChunk;
    v = block * kWarp + (c & 31);
  }
}

// a[i] = x(v, l0 + i), 0 outside the vector set. NaN/Inf are passed through (each
// writer maps them to its own zero).
__device__ inline void load_chunk(const VectorSet& xs, bool vector_loads, int64_t v, int64_t l0,
                                  double (&a)[kChunk]) {
  if (v >= xs.nvec) {
#pragma unroll
    for (int i = 0; i < kChunk; ++i) a[i] = 0.0;
    return;
  }
  if (vector_loads && l0 + kChunk <= xs.k) {
    const double2* p = reinterpret_cast<const double2*>(xs.x + v * xs.vs + l0);
#pragma unroll
    for (int i = 0; i < kChunk / 2; ++i) {
      const double2 d = __ldg(p + i);
      a[2 * i] = d.x;
      a[2 * i + 1] = d.y;
    }
    return;
  }
  const double* row = xs.x + v * xs.vs;
#pragma unroll
  for (int i = 0; i < kChunk; ++i) {
    const int64_t l = l0 + i;
    a[i] = l < xs.k ? __ldg(row + l * xs.es) : 0.0;
  }
}

// 16 bytes at dst: one 16-byte store when aligned, else byte stores.
__device__ inline void store_chunk(int8_t* dst, const uint4& w, bool vector_stores) {
  if (vector_stores) {
    *reinterpret_cast<uint4*>(dst) = w;
  } else {
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int i = 0; i < kChunk; ++i) dst[i] = static_cast<int8_t>((words[i / 4] >> (8 * (i % 4))) & 0xff);
  }
}

// Warp-uniform loop over the thread slots: every lane of a warp runs the same
// iterations (the residues kernel votes across the warp).
#define OZAKI_FOR_EACH_WARP_SLOT(c, slots)                                                     \
  for (int64_t c##_base = (int64_t(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp) * \
                          kWarp;                                                             \
       c##_base < (slots); c##_base += int64_t(gridDim.x) * blockDim.x)                        \
    if (const int64_t c = c##_base + (threadIdx.x & (kWarp - 1)); true)

__global__ void __launch_bounds__(kThreads)
coarse_kernel(VectorSet xs, const int32_t* exps, int8_t* out, int64_t k_pad, ChunkGrid grid,
              bool vector_stores) {
  OZAKI_FOR_EACH_WARP_SLOT(c, grid.slots) {
    if (c >= grid.slots) continue;
    int64_t v, l0;
    chunk_position(grid, c, v, l0);
    if (v >= grid.rows_pad) continue;
    double a[kChunk];
    load_chunk(xs, grid.vector_loads, v, l0, a);
    const int e = v < xs.nvec ? exps[v] : 0;
    uint32_t words[4];
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      uint32_t word = 0;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const uint32_t q = static_cast<uint8_t>(coarse_value(a[4 * w + b], e));  // 0 for padding
        word |= q << (8 * b);
      }
      words[w] = word;
    }
    store_chunk(out + v * k_pad + l0, make_uint4(words[0], words[1], words[2], words[3]),
                vector_stores);
  }
}

// --- residues ------------------------------------------------------------------------
// Per modulus: the float constants (FloatModulus) and the table f(e) = 2^e mods m for
// e < kPow2Table, built in shared memory by every block (persistent grid: a few per SM).
inline constexpr int kPow2Table = 128;

struct ResidueArgs {
  VectorSet xs;
  const int32_t* shifts;
  int nmod;
  const int32_t* moduli;
  int8_t* out;
  int64_t row_stride;
  int64_t plane_stride;
  ChunkGrid grid;
  bool vector_stores;
};

// The nmod 16-byte stores of one chunk. kPath 0: every e of the warp is 0 (pieces carry
// the 1/4); 1: every e < kPow2Table; 2: anything (f computed for e >= kPow2Table).
template <int kPath>
__device__ inline void write_residue_planes(const ResidueArgs& a, const Pieces (&p)[kChunk],
                                            const int (&e)[kChunk], int8_t* dst, bool active,
                                            const FloatModulus* s_mod, const float* s_pow2,
                                            const uint32_t* s_m) {
  for (int g = 0; g < a.nmod; ++g) {
    const FloatModulus k = s_mod[g];
    uint32_t words[4];
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      float b[4];
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const int i = 4 * w + t;
        if constexpr (kPath == 0) {
          b[t] = residue_e0(p[i], k);
        } else {
          float f;
          if constexpr (kPath == 1) {
            f = s_pow2[g * kPow2Table + e[i]];
          } else {
            f = e[i] < kPow2Table ? s_pow2[g * kPow2Table + e[i]] : pow2_factor(e[i], s_m[g]);
          }
          b[t] = residue_scaled(p[i], f, k);
        }
      }
      words[w] = pack_bytes(b[0], b[1], b[2], b[3]);
    }
    if (active) {
      store_chunk(dst + g * a.plane_stride, make_uint4(words[0], words[1], words[2], words[3]),
                  a.vector_stores);
    }
  }
}

__global__ void __launch_bounds__(kThreads)
residues_kernel(const __grid_constant__ ResidueArgs a) {
  __shared__ FloatModulus s_mod[kMaxModuli];
  __shared__ uint32_t s_m[kMaxModuli];
  __shared__ float s_pow2[kMaxModuli * kPow2Table];
  for (int t = threadIdx.x; t < a.nmod * kPow2Table; t += blockDim.x) {
    const uint32_t m = static_cast<uint32_t>(a.moduli[t / kPow2Table]);
    const int e = t % kPow2Table;
    s_pow2[t] = pow2_factor(e, m);
    if (e == 0) {
      s_mod[t / kPow2Table] = float_modulus(m);
      s_m[t / kPow2Table] = m;
    }
  }
  __syncthreads();

  OZAKI_FOR_EACH_WARP_SLOT(c, a.grid.slots) {
    int64_t v = 0, l0 = 0;
    if (c < a.grid.slots) chunk_position(a.grid, c, v, l0);
    const bool active = c < a.grid.slots && v < a.grid.rows_pad;
    Pieces p[kChunk];
    int e[kChunk];
    int emax = 0;
    {
      double x[kChunk];
      if (active) {
        load_chunk(a.xs, a.grid.vector_loads, v, l0, x);
      } else {
#pragma unroll
        for (int i = 0; i < kChunk; ++i) x[i] = 0.0;
      }
      const int32_t shift = active && v < a.xs.nvec ? a.shifts[v] : 0;
#pragma unroll
      for (int i = 0; i < kChunk; ++i) {
        const ScaledInteger s = scaled_integer(x[i], shift);
        p[i] = residue_pieces(s, false);
        e[i] = s.exp;
        emax = s.exp > emax ? s.exp : emax;
      }
    }
#pragma unroll
    for (int d = 1; d < kWarp; d *= 2) {
      const int other = __shfl_xor_sync(0xffffffffu, emax, d);
      emax = other > emax ? other : emax;
    }
    int8_t* dst = a.out + v * a.row_stride + l0;
    if (emax == 0) {
#pragma unroll
      for (int i = 0; i < kChunk; ++i) p[i].p0 = add_rn_f(p[i].p0, 0.25f);
      write_residue_planes<0>(a, p, e, dst, active, s_mod, s_pow2, s_m);
    } else if (emax < kPow2Table) {
      write_residue_planes<1>(a, p, e, dst, active, s_mod, s_pow2, s_m);
    } else {
      write_residue_planes<2>(a, p, e, dst, active, s_mod, s_pow2, s_m);
    }
  }
}

// --- coarse bound accumulation and accurate shifts -----------------------------------
__global__ void __launch_bounds__(kThreads)
accumulate_i64_kernel(const int32_t* part, int64_t rows, int64_t cols, int64_t ld_part,
                      int64_t* acc, bool first) {
  const int64_t total = rows * cols;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = idx / cols;
    const int64_t j = idx % cols;
    const int64_t p = part[i * ld_part + j];
    acc[idx] = first ? p : acc[idx] + p;
  }
}

// g: the coarse bound, m x n row-major with leading dimension ldg, int64 (summed over k
// chunks) or int32 (one chunk: the coarse GEMM's own output, no int64 copy).
template <class G>
struct ShiftArgs {
  const G* g;
  int64_t ldg;
  int64_t m;
  int64_t n;
  const int32_t* exps_a;
  const int32_t* exps_b;
  const int32_t* mu_fast;
  const int32_t* nu_fast;
  int pb;
  int32_t* mu;
  int32_t* nu;
  int32_t* d;  // the row gains, m entries
};

// Row pass: one block per row, min_j s_ij by a tree reduction, then d_i and mu_i.
template <class G>
__global__ void __launch_bounds__(kThreads)
accurate_rows_kernel(ShiftArgs<G> a) {
  __shared__ int64_t s_min[kThreads];
  for (int64_t i = blockIdx.x; i < a.m; i += gridDim.x) {
    const int32_t ea = a.exps_a[i];
    const int32_t mf = a.mu_fast[i];
    int64_t row_min = kNoConstraint;  // also the value for an empty row
    for (int64_t j = threadIdx.x; j < a.n; j += kThreads) {
      const int64_t s = coarse_slack(a.g[i * a.ldg + j], ea, a.exps_b[j], mf, a.nu_fast[j], a.pb);
      row_min = s < row_min ? s : row_min;
    }
    s_min[threadIdx.x] = row_min;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
      if (threadIdx.x < half && s_min[threadIdx.x + half] < s_min[threadIdx.x])
        s_min[threadIdx.x] = s_min[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      const int64_t d = row_gain(s_min[0], ea, mf, a.pb);
      a.d[i] = static_cast<int32_t>(d);
      a.mu[i] = static_cast<int32_t>(mf + d);
    }
    __syncthreads();
  }
}

// Column pass: 32 columns per block (coalesced reads of g), the 32 warps split the rows
// (a full SM of warps in flight: the pass is bound by the latency of its loads);
// min_i (s_ij - d_i), then g_j and nu_j.
inline constexpr int kColumnWarps = 32;

template <class G>
__global__ void __launch_bounds__(kWarp * kColumnWarps)
accurate_columns_kernel(ShiftArgs<G> a) {
  __shared__ int64_t s_min[kColumnWarps][kWarp];
  const int64_t groups = (a.n + kWarp - 1) / kWarp;
  for (int64_t group = blockIdx.x; group < groups; group += gridDim.x) {
    const int64_t j = group * kWarp + threadIdx.x;
    int64_t col_min = kNoConstraint;  // also the value for an empty column
    if (j < a.n) {
      const int32_t eb = a.exps_b[j];
      const int32_t nf = a.nu_fast[j];
      for (int64_t i = threadIdx.y; i < a.m; i += kColumnWarps) {
        const int64_t s = coarse_slack(a.g[i * a.ldg + j], a.exps_a[i], eb, a.mu_fast[i], nf, a.pb) -
                          a.d[i];
        col_min = s < col_min ? s : col_min;
      }
    }
    s_min[threadIdx.y][threadIdx.x] = col_min;
    __syncthreads();
    if (threadIdx.y == 0 && j < a.n) {
      for (int p = 1; p < kColumnWarps; ++p) {
        col_min = s_min[p][threadIdx.x] < col_min ? s_min[p][threadIdx.x] : col_min;
      }
      const int64_t gain = column_gain(col_min, a.exps_b[j], a.nu_fast[j], a.pb);
      a.nu[j] = static_cast<int32_t>(a.nu_fast[j] + gain);
    }
    __syncthreads();
  }
}

// --- pack: a vector set copied to contiguous vectors (es = 1) ------------------------
// out[v*k + l] = x[v*vs + l*es], through 32 x 32 shared-memory tiles: the reads run along
// whichever of v and l has the smaller stride, the writes along l. The stages that read
// vectors with a strided k (the columns of a row-major B) then take their fast path.
inline constexpr int kPackTile = 32;

__global__ void __launch_bounds__(kWarp * kRowsPerBlock)
pack_kernel(VectorSet xs, double* out, bool read_along_v) {
  __shared__ double tile[kPackTile][kPackTile + 1];
  const int64_t tiles_v = (xs.nvec + kPackTile - 1) / kPackTile;
  const int64_t tiles_l = (xs.k + kPackTile - 1) / kPackTile;
  for (int64_t t = blockIdx.x; t < tiles_v * tiles_l; t += gridDim.x) {
    const int64_t v0 = (t / tiles_l) * kPackTile;
    const int64_t l0 = (t % tiles_l) * kPackTile;
    // tile[l - l0][v - v0]
    for (int r = threadIdx.y; r < kPackTile; r += kRowsPerBlock) {
      const int64_t v = read_along_v ? v0 + threadIdx.x : v0 + r;
      const int64_t l = read_along_v ? l0 + r : l0 + threadIdx.x;
      if (v < xs.nvec && l < xs.k) {
        const double value = __ldg(xs.x + v * xs.vs + l * xs.es);
        if (read_along_v) {
          tile[r][threadIdx.x] = value;
        } else {
          tile[threadIdx.x][r] = value;
        }
      }
    }
    __syncthreads();
    for (int r = threadIdx.y; r < kPackTile; r += kRowsPerBlock) {
      const int64_t v = v0 + r;
      const int64_t l = l0 + threadIdx.x;
      if (v < xs.nvec && l < xs.k) out[v * xs.k + l] = tile[threadIdx.x][r];
    }
    __syncthreads();
  }
}

// --- non-finite pattern --------------------------------------------------------------
// The pattern entry (i, j) of reference.split_nonfinite: 0 unless row i or column j is
// flagged, else from the classes of its k terms. Read by the CRT kernels per entry.
__device__ inline double nonfinite_entry(const NonfiniteSource& s, int64_t i, int64_t j) {
  if (s.row_flags == nullptr || (s.row_flags[i] == 0 && s.col_flags[j] == 0)) return 0.0;
  unsigned flags = 0;
  for (int64_t l = 0; l < s.k; ++l) {
    flags |= classify_term(s.a[i * s.a_rs + l * s.a_cs], s.b[l * s.b_rs + j * s.b_cs]);
  }
  return pattern_value(flags);
}

// --- CRT reconstruction and unscaling ------------------------------------------------
// P_crt_unscale (residues from raw int32 GEMM outputs, summed over k chunks) and
// P_combine_unscale (residues from group partials) differ only in where r_g comes
// from; both then run crt_add_residue in modulus order and crt_output.
//
// Per-launch modulus data built on the host next to CrtConstants.
struct CrtReduce {
  uint32_t magic[kMaxModuli];   // barrett_magic(m_g)
  uint32_t offset[kMaxModuli];  // signed_offset(m_g)
  int64_t plane[kMaxModuli];    // element offset of the plane modulus g reads
  int32_t load[kMaxModuli];     // combine: 1 where g is the first modulus of its group
  int32_t width[kMaxModuli];    // combine: bytes per partial of g's group (1 or 4)
};

struct CrtArgs {
  const int32_t* c;      // crt_unscale: raw int32 outputs
  const unsigned char* x;  // combine: group partials (plane offsets in bytes)
  int64_t m;
  int64_t n;
  int64_t ld;            // ldc or ldx
  int nchunks;           // crt_unscale
  int64_t chunk_stride;  // crt_unscale
  bool vector_loads;     // 16-byte loads of 4 consecutive j
  const int32_t* mu;
  const int32_t* nu;
  double alpha;
  double beta;
  const double* cin;
  int64_t cin_rs;
  int64_t cin_cs;
  double* out;
  int64_t out_rs;
  int64_t out_cs;
  bool vector_stores;    // out_cs == 1 and 16-byte aligned pairs
  NonfiniteSource nf;     // nf.row_flags null: no non-finite input
};

// Planes whose loads one thread issues together before reducing any of them: the
// loads' latencies overlap (one plane at a time left the kernel latency-bound at ~1.5 TB/s).
inline constexpr int kCrtBatch = 8;

// Where the CRT kernel's residues come from: crt_unscale's raw int32 GEMM outputs (each
// reduced modulo its modulus), combine_unscale's group partials (each reduced modulo every
// modulus of its group), or combine_unscale's one-byte partials of one-modulus groups
// (already the residues: nothing to reduce).
inline constexpr int kFromInt32 = 0;
inline constexpr int kFromPartials = 1;
inline constexpr int kFromResidueBytes = 2;

// The 4 entries (row i, columns j0 .. j0 + 3; 0 past n) that modulus g reads, as raw
// 32-bit words: crt_unscale's int32 GEMM outputs of one k chunk (at c + offset), or
// combine's group partials (uint32, or one byte each) at x + plane bytes. One streaming
// load when aligned and complete.
template <int kSource>
__device__ inline void load_entries(const CrtArgs& a, const CrtReduce& red, int g, int64_t offset,
                                    bool full, int64_t j0, uint32_t (&v)[4]) {
  if constexpr (kSource == kFromInt32) {
    const int32_t* src = a.c + offset;
    if (a.vector_loads && full) {
      const int4 w = __ldcs(reinterpret_cast<const int4*>(src));
      v[0] = w.x; v[1] = w.y; v[2] = w.z; v[3] = w.w;
    } else {
#pragma unroll
      for (int t = 0; t < 4; ++t) v[t] = j0 + t < a.n ? static_cast<uint32_t>(src[t]) : 0u;
    }
  } else if (kSource == kFromPartials && red.width[g] == 4) {
    const uint32_t* src = reinterpret_cast<const uint32_t*>(a.x + red.plane[g]) + offset;
    if (a.vector_loads && full) {
      const uint4 w = __ldcs(reinterpret_cast<const uint4*>(src));
      v[0] = w.x; v[1] = w.y; v[2] = w.z; v[3] = w.w;
    } else {
#pragma unroll
      for (int t = 0; t < 4; ++t) v[t] = j0 + t < a.n ? src[t] : 0u;
    }
  } else {  // one byte per partial
    const unsigned char* src = a.x + red.plane[g] + offset;
    if (a.vector_loads && full) {
      const uint32_t w = __ldcs(reinterpret_cast<const unsigned int*>(src));
#pragma unroll
      for (int t = 0; t < 4; ++t) v[t] = (w >> (8 * t)) & 0xffu;
    } else {
#pragma unroll
      for (int t = 0; t < 4; ++t) v[t] = j0 + t < a.n ? src[t] : 0u;
    }
  }
}

// The entries (i, j0 .. j0 + 3) (those below n) from their limb sums: the NaN/Inf
// pattern, crt_output (reconstruction, alpha, beta c) and the store.
__device__ inline void store_entries(const CrtArgs& a, const CrtConstants& consts, int64_t i,
                                     int64_t j0, const double (&limb_sums)[4][kMaxLimbs]) {
  const bool full = j0 + 4 <= a.n;
  const int32_t mu = a.mu[i];
  double y[4];
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const int64_t j = j0 + t;
    if (j < a.n) {
      const double p = nonfinite_entry(a.nf, i, j);
      const double c_value = a.beta != 0.0 ? a.cin[i * a.cin_rs + j * a.cin_cs] : 0.0;
      y[t] = crt_output(consts, limb_sums[t], p, mu + a.nu[j], a.alpha, a.beta, c_value);
    }
  }
  double* dst = a.out + i * a.out_rs + j0 * a.out_cs;
  if (a.vector_stores && full) {
    reinterpret_cast<double2*>(dst)[0] = make_double2(y[0], y[1]);
    reinterpret_cast<double2*>(dst)[1] = make_double2(y[2], y[3]);
  } else {
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      if (j0 + t < a.n) dst[t * a.out_cs] = y[t];
    }
  }
}

// One thread per 4 consecutive entries (i, j0 .. j0 + 3) of a row (kSource: kFromInt32 or
// kFromPartials; residue bytes go to crt_residue_bytes_kernel). kLimbs = consts.limbs
// (the launch picks the instance), so the limb loops carry no branches; the moduli go in
// batches of kCrtBatch whose loads are issued together. The residues reach
// crt_add_residue in modulus order whatever the load order.
template <int kSource, int kLimbs>
__global__ void __launch_bounds__(kThreads)
crt_kernel(const __grid_constant__ CrtArgs a, const __grid_constant__ CrtConstants consts,
           const __grid_constant__ CrtReduce red) {
  const int64_t n4 = (a.n + 3) / 4;
  const int64_t total = a.m * n4;
  const int count = consts.count;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = idx / n4;
    const int64_t j0 = (idx - i * n4) * 4;
    const bool full = j0 + 4 <= a.n;
    const int64_t row = i * a.ld + j0;

    constexpr bool kGroups = kSource != kFromInt32;
    double limb_sums[4][kMaxLimbs] = {};
    if (kGroups || a.nchunks == 1) {
      uint32_t x[4] = {0, 0, 0, 0};  // combine: the partials of the current group
#pragma unroll 1
      for (int g0 = 0; g0 < count; g0 += kCrtBatch) {
        const int nb = count - g0 < kCrtBatch ? count - g0 : kCrtBatch;
        uint32_t raw[kCrtBatch][4] = {};
#pragma unroll
        for (int b = 0; b < kCrtBatch; ++b) {
          const int g = g0 + b;
          if (b < nb && (!kGroups || red.load[g])) {
            load_entries<kSource>(a, red, g, kGroups ? row : red.plane[g] + row, full, j0, raw[b]);
          }
        }
#pragma unroll
        for (int b = 0; b < kCrtBatch; ++b) {
          if (b < nb) {
            const int g = g0 + b;
            const uint32_t mod = static_cast<uint32_t>(consts.moduli[g]);
            const uint32_t magic = red.magic[g];
            uint32_t r[4];
            if constexpr (kGroups) {
              if (red.load[g]) {
#pragma unroll
                for (int t = 0; t < 4; ++t) x[t] = raw[b][t];
              }
#pragma unroll
              for (int t = 0; t < 4; ++t) r[t] = mod_u32(x[t], mod, magic);
            } else {
              const uint32_t offset = red.offset[g];
#pragma unroll
              for (int t = 0; t < 4; ++t) {
                r[t] = mod_i32(static_cast<int32_t>(raw[b][t]), mod, magic, offset);
              }
            }
#pragma unroll
            for (int t = 0; t < 4; ++t) {
              crt_add_residue_limbs<kLimbs>(consts, g, static_cast<int32_t>(r[t]), limb_sums[t]);
            }
          }
        }
      }
    } else {  // crt_unscale over several k chunks: per modulus, the sum of its chunks' residues
#pragma unroll 1
      for (int g = 0; g < count; ++g) {
        const uint32_t mod = static_cast<uint32_t>(consts.moduli[g]);
        const uint32_t magic = red.magic[g];
        const uint32_t offset = red.offset[g];
        uint32_t r[4] = {0, 0, 0, 0};
        for (int ch = 0; ch < a.nchunks; ++ch) {
          uint32_t v[4];
          load_entries<kFromInt32>(a, red, g, ch * a.chunk_stride + red.plane[g] + row, full, j0, v);
#pragma unroll
          for (int t = 0; t < 4; ++t) {
            const uint32_t s = r[t] + mod_i32(static_cast<int32_t>(v[t]), mod, magic, offset);  // < 2m
            r[t] = s >= mod ? s - mod : s;
          }
        }
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          crt_add_residue_limbs<kLimbs>(consts, g, static_cast<int32_t>(r[t]), limb_sums[t]);
        }
      }
    }

    store_entries(a, consts, i, j0, limb_sums);
  }
}

// combine_unscale of one-modulus groups: the partials are the residues themselves, one byte
// each, so nothing is reduced (43 % fewer instructions than crt_kernel on int32 outputs,
// ncu at 8192^2). One thread per 8 consecutive entries (i, j0 .. j0 + 7) of a row; two
// passes of 4 entries add the residues to the limb sums in modulus order and store, as
// crt_kernel does; the same bits. (16 entries per thread kept 154 registers: one block per
// SM, 12.5 % occupancy, slower than crt_kernel.)
//
// The 8-byte words of every modulus's plane come through shared memory, one item ahead:
// while a thread combines item idx it has item idx + stride's words in flight (cp.async,
// no registers held). Loaded straight into registers, the loads of the next item waited
// for the arithmetic of this one: at 25 % occupancy ncu saw 47 % of issue slots used and
// 24 % of DRAM bandwidth (8192^2, 1.31 ms). A thread copies only its own words and reads
// only those, so waiting for its own copies is enough (no barrier).
inline constexpr int kResidueBytesPerThread = 8;
inline constexpr int kResidueBytesThreads = 128;  // 2 x kMaxModuli x 128 x 8 bytes of stages

// Adds the 8 one-byte residues of entries j0 .. j0 + 7 of row i and stores them;
// word(g, q) is modulus g's 4 bytes of entries j0 + 4q .. j0 + 4q + 3 (byte t: entry + t).
template <int kLimbs, class Word>
__device__ inline void combine_residue_bytes(const CrtArgs& a, const CrtConstants& consts, int64_t i,
                                             int64_t j0, Word word) {
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    if (j0 + 4 * q < a.n) {
      double limb_sums[4][kMaxLimbs] = {};
#pragma unroll
      for (int g = 0; g < kMaxModuli; ++g) {
        if (g < consts.count) {
          const uint32_t w = word(g, q);
#pragma unroll
          for (int t = 0; t < 4; ++t) {
            crt_add_residue_limbs<kLimbs>(consts, g, static_cast<int32_t>((w >> (8 * t)) & 0xffu),
                                          limb_sums[t]);
          }
        }
      }
      store_entries(a, consts, i, j0 + 4 * q, limb_sums);
    }
  }
}

template <int kLimbs>
__global__ void __launch_bounds__(kResidueBytesThreads, 4)
crt_residue_bytes_kernel(const __grid_constant__ CrtArgs a, const __grid_constant__ CrtConstants consts,
                         const __grid_constant__ CrtReduce red) {
  constexpr int kPer = kResidueBytesPerThread;
  __shared__ uint2 words[2][kMaxModuli][kResidueBytesThreads];
  const int64_t nv = (a.n + kPer - 1) / kPer;
  const int64_t total = a.m * nv;
  const int count = consts.count;
  const int tid = threadIdx.x;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  // Starts the copies of item idx's words into stage `buf` (none for an item past the end
  // or a partial one, which is read byte by byte below); one commit group either way.
  auto prefetch = [&](int64_t idx, int buf) {
    if (idx < total && a.vector_loads) {
      const int64_t i = idx / nv;
      const int64_t j0 = (idx - i * nv) * kPer;
      if (j0 + kPer <= a.n) {
        const unsigned char* src = a.x + i * a.ld + j0;
#pragma unroll
        for (int g = 0; g < kMaxModuli; ++g) {
          if (g < count) __pipeline_memcpy_async(&words[buf][g][tid], src + red.plane[g], sizeof(uint2));
        }
      }
    }
    __pipeline_commit();
  };
  int buf = 0;
  int64_t idx = blockIdx.x * int64_t(blockDim.x) + tid;
  prefetch(idx, buf);
  for (; idx < total; idx += step, buf ^= 1) {
    prefetch(idx + step, buf ^ 1);
    __pipeline_wait_prior(1);  // this item's copies (the group before the one just started)
    const int64_t i = idx / nv;
    const int64_t j0 = (idx - i * nv) * kPer;
    if (a.vector_loads && j0 + kPer <= a.n) {
      const int b = buf;
      combine_residue_bytes<kLimbs>(a, consts, i, j0, [&](int g, int q) {
        const uint2 w = words[b][g][tid];
        return q == 0 ? w.x : w.y;
      });
    } else {
      uint2 raw[kMaxModuli];
#pragma unroll
      for (int g = 0; g < kMaxModuli; ++g) {
        if (g < count) {
          const unsigned char* src = a.x + red.plane[g] + i * a.ld + j0;
          uint32_t w[2] = {0, 0};
          for (int t = 0; t < kPer && j0 + t < a.n; ++t) w[t / 4] |= uint32_t(src[t]) << (8 * (t % 4));
          raw[g] = make_uint2(w[0], w[1]);
        }
      }
      combine_residue_bytes<kLimbs>(a, consts, i, j0, [&](int g, int q) { return q == 0 ? raw[g].x : raw[g].y; });
    }
  }
  __pipeline_wait_prior(0);  // no copy outlives the block
}

// =====================================================================================
// Host launch helpers: check arguments (status 1, no CUDA call), launch, check the
// launch (status 2). The exported functions of templates/stages.cu.j2 forward here.
// =====================================================================================

inline int64_t blocks_for(int64_t work_items, int64_t items_per_block) {
  const int64_t blocks = (work_items + items_per_block - 1) / items_per_block;
  return blocks < kMaxBlocks ? blocks : kMaxBlocks;
}

inline int check_launch(Message& err, const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    return err.set(kCudaError, "%s: kernel launch failed: %s (%s)", what, cudaGetErrorName(e),
                   cudaGetErrorString(e));
  }
  return kOk;
}

// a * b * c fits int64 (all >= 0).
inline bool product_fits(int64_t a, int64_t b, int64_t c = 1) {
  const int64_t limit = INT64_MAX;
  if (a == 0 || b == 0 || c == 0) return true;
  if (a > limit / b) return false;
  return a * b <= limit / c;
}

inline int check_vector_set(const char* what, const double* x, int64_t nvec, int64_t k,
                            Message& err) {
  if (nvec < 0 || k < 0) {
    return err.set(kBadArgument, "%s: nvec and k must be >= 0, got nvec=%lld k=%lld", what,
                   static_cast<long long>(nvec), static_cast<long long>(k));
  }
  if (x == nullptr && nvec > 0 && k > 0) return err.set(kBadArgument, "%s: x is null", what);
  return kOk;
}

inline int check_padding(const char* what, int64_t nvec, int64_t k, int64_t rows_pad,
                         int64_t k_pad, int64_t planes, Message& err) {
  if (rows_pad < nvec || k_pad < k || k_pad % kKAlignment != 0) {
    return err.set(kBadArgument,
                   "%s: need rows_pad >= nvec and k_pad >= k, k_pad a multiple of %lld; got "
                   "nvec=%lld rows_pad=%lld k=%lld k_pad=%lld",
                   what, static_cast<long long>(kKAlignment), static_cast<long long>(nvec),
                   static_cast<long long>(rows_pad), static_cast<long long>(k),
                   static_cast<long long>(k_pad));
  }
  if (!product_fits(rows_pad, k_pad, planes)) {
    return err.set(kBadArgument, "%s: output size rows_pad*k_pad*planes overflows int64", what);
  }
  return kOk;
}

inline bool lanes_along_k(int64_t vs, int64_t es) {
  const int64_t avs = vs < 0 ? -vs : vs;
  const int64_t aes = es < 0 ? -es : es;
  return aes <= avs;
}

inline ChunkGrid chunk_grid(const VectorSet& xs, int64_t rows_pad, int64_t k_pad) {
  ChunkGrid g;
  g.rows_pad = rows_pad;
  g.chunks_k = k_pad / kChunk;
  g.lanes_along_k = lanes_along_k(xs.vs, xs.es);
  g.slots = g.lanes_along_k ? rows_pad * g.chunks_k
                            : (rows_pad + kWarp - 1) / kWarp * kWarp * g.chunks_k;
  g.vector_loads = g.lanes_along_k && xs.es == 1 && xs.vs % 2 == 0 &&
                   reinterpret_cast<uintptr_t>(xs.x) % 16 == 0;
  return g;
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Blocks for a grid-stride kernel: enough to fill every SM (as many as are resident at
// once), never more than the work needs. Falls back to a fixed count if the queries fail.
template <class Kernel>
inline int64_t resident_blocks(Kernel kernel, int threads, int64_t work_items,
                               int64_t items_per_block) {
  const int64_t needed = (work_items + items_per_block - 1) / items_per_block;
  int device = 0, sms = 0, per_sm = 0;
  int64_t limit = 1024;
  if (cudaGetDevice(&device) == cudaSuccess &&
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess &&
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0) == cudaSuccess &&
      sms > 0 && per_sm > 0) {
    limit = static_cast<int64_t>(sms) * per_sm;
  } else {
    (void)cudaGetLastError();  // not sticky; the launch itself is checked
  }
  return needed < limit ? (needed > 0 ? needed : 1) : limit;
}

inline int scan(const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es, int pb,
                int32_t* exps, int32_t* fast_shift, int32_t* nonfinite_count,
                cudaStream_t stream, Message& err) {
  const char* what = "scan";
  if (int s = check_vector_set(what, x, nvec, k, err)) return s;
  if (pb < 0 || pb > 4096) return err.set(kBadArgument, "%s: pb=%d out of range", what, pb);
  if (nvec > 0 && (exps == nullptr || fast_shift == nullptr || nonfinite_count == nullptr)) {
    return err.set(kBadArgument, "%s: exps, fast_shift and nonfinite_count must not be null",
                   what);
  }
  if (nvec == 0) return kOk;
  const VectorSet xs{x, nvec, k, vs, es};
  const dim3 block(kWarp, kRowsPerBlock);
  if (lanes_along_k(vs, es)) {
    scan_kernel<true><<<blocks_for(nvec, kRowsPerBlock), block, 0, stream>>>(
        xs, pb, exps, fast_shift, nonfinite_count);
  } else {
    scan_kernel<false><<<blocks_for(nvec, kWarp), block, 0, stream>>>(
        xs, pb, exps, fast_shift, nonfinite_count);
  }
  return check_launch(err, what);
}

inline int coarse(const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es,
                  const int32_t* exps, int8_t* out, int64_t rows_pad, int64_t k_pad,
                  cudaStream_t stream, Message& err) {
  const char* what = "coarse";
  if (int s = check_vector_set(what, x, nvec, k, err)) return s;
  if (int s = check_padding(what, nvec, k, rows_pad, k_pad, 1, err)) return s;
  if (nvec > 0 && exps == nullptr) return err.set(kBadArgument, "%s: exps is null", what);
  if (rows_pad > 0 && k_pad > 0 && out == nullptr)
    return err.set(kBadArgument, "%s: out is null", what);
  const VectorSet xs{x, nvec, k, vs, es};
  const ChunkGrid grid = chunk_grid(xs, rows_pad, k_pad);
  if (grid.slots == 0) return kOk;
  const int64_t blocks = resident_blocks(coarse_kernel, kThreads, grid.slots, kThreads);
  coarse_kernel<<<blocks, kThreads, 0, stream>>>(xs, exps, out, k_pad, grid, aligned16(out));
  return check_launch(err, what);
}

inline int accumulate_i64(const int32_t* part, int64_t rows, int64_t cols, int64_t ld_part,
                          int64_t* acc, int first, cudaStream_t stream, Message& err) {
  const char* what = "accumulate_i64";
  if (rows < 0 || cols < 0 || ld_part < cols) {
    return err.set(kBadArgument, "%s: need rows, cols >= 0 and ld_part >= cols; got %lld %lld %lld",
                   what, static_cast<long long>(rows), static_cast<long long>(cols),
                   static_cast<long long>(ld_part));
  }
  if (!product_fits(rows, ld_part)) return err.set(kBadArgument, "%s: size overflows", what);
  if (rows == 0 || cols == 0) return kOk;
  if (part == nullptr || acc == nullptr) return err.set(kBadArgument, "%s: null pointer", what);
  accumulate_i64_kernel<<<blocks_for(rows * cols, kThreads), kThreads, 0, stream>>>(
      part, rows, cols, ld_part, acc, first != 0);
  return check_launch(err, what);
}

template <class G>
inline int accurate_shifts(const G* g, int64_t ldg, int64_t m, int64_t n, const int32_t* exps_a,
                           const int32_t* exps_b, const int32_t* mu_fast,
                           const int32_t* nu_fast, int pb, int32_t* mu, int32_t* nu,
                           int32_t* workspace_d, cudaStream_t stream, Message& err) {
  const char* what = "accurate_shifts";
  if (m < 0 || n < 0 || ldg < n || !product_fits(m, ldg)) {
    return err.set(kBadArgument, "%s: bad sizes m=%lld n=%lld ldg=%lld", what,
                   static_cast<long long>(m), static_cast<long long>(n),
                   static_cast<long long>(ldg));
  }
  if (pb < 0 || pb > 4096) return err.set(kBadArgument, "%s: pb=%d out of range", what, pb);
  if ((m > 0 && (exps_a == nullptr || mu_fast == nullptr || mu == nullptr ||
                 workspace_d == nullptr)) ||
      (n > 0 && (exps_b == nullptr || nu_fast == nullptr || nu == nullptr)) ||
      (m > 0 && n > 0 && g == nullptr)) {
    return err.set(kBadArgument, "%s: null pointer", what);
  }
  const ShiftArgs<G> args{g, ldg, m, n, exps_a, exps_b, mu_fast, nu_fast, pb, mu, nu, workspace_d};
  if (m > 0) {
    accurate_rows_kernel<G><<<blocks_for(m, 1), kThreads, 0, stream>>>(args);
    if (int s = check_launch(err, "accurate_shifts (rows)")) return s;
  }
  if (n > 0) {
    accurate_columns_kernel<G><<<blocks_for(n, kWarp), dim3(kWarp, kColumnWarps), 0, stream>>>(
        args);
    if (int s = check_launch(err, "accurate_shifts (columns)")) return s;
  }
  return kOk;
}

inline int pack(const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es, double* out,
                cudaStream_t stream, Message& err) {
  const char* what = "pack";
  if (int s = check_vector_set(what, x, nvec, k, err)) return s;
  if (!product_fits(nvec, k)) return err.set(kBadArgument, "%s: nvec*k overflows", what);
  if (nvec == 0 || k == 0) return kOk;
  if (out == nullptr) return err.set(kBadArgument, "%s: out is null", what);
  const VectorSet xs{x, nvec, k, vs, es};
  const int64_t tiles = ((nvec + kPackTile - 1) / kPackTile) * ((k + kPackTile - 1) / kPackTile);
  const int64_t blocks = resident_blocks(pack_kernel, kWarp * kRowsPerBlock, tiles, 1);
  pack_kernel<<<blocks, dim3(kWarp, kRowsPerBlock), 0, stream>>>(xs, out, !lanes_along_k(vs, es));
  return check_launch(err, what);
}

// Output planes must not overlap: either the (modulus, row, k) layout
// (row_stride >= k_pad, plane_stride >= rows_pad * row_stride) or the concatenated one
// (plane_stride >= k_pad, row_stride >= nmod * plane_stride).
inline int residues_strided(const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es,
                            const int32_t* shifts, int nmod, const int32_t* moduli, int8_t* out,
                            int64_t rows_pad, int64_t k_pad, int64_t row_stride,
                            int64_t plane_stride, cudaStream_t stream, Message& err) {
  const char* what = "residues";
  if (int s = check_vector_set(what, x, nvec, k, err)) return s;
  if (nmod < 1 || nmod > kMaxModuli) {
    return err.set(kBadArgument, "%s: nmod=%d outside [1, %d]", what, nmod, kMaxModuli);
  }
  if (int s = check_padding(what, nvec, k, rows_pad, k_pad, 1, err)) return s;
  const bool planes_outside = row_stride >= k_pad && rows_pad <= INT64_MAX / (row_stride > 0 ? row_stride : 1) &&
                              plane_stride >= rows_pad * row_stride;
  const bool planes_inside = plane_stride >= k_pad && nmod <= INT64_MAX / (plane_stride > 0 ? plane_stride : 1) &&
                             row_stride >= nmod * plane_stride;
  if (row_stride < 1 || plane_stride < 1 || !(planes_outside || planes_inside)) {
    return err.set(kBadArgument,
                   "%s: overlapping planes: need row_stride >= k_pad and plane_stride >= "
                   "rows_pad*row_stride, or plane_stride >= k_pad and row_stride >= "
                   "nmod*plane_stride; got rows_pad=%lld k_pad=%lld nmod=%d row_stride=%lld "
                   "plane_stride=%lld",
                   what, static_cast<long long>(rows_pad), static_cast<long long>(k_pad), nmod,
                   static_cast<long long>(row_stride), static_cast<long long>(plane_stride));
  }
  // The last byte written, (nmod-1)*plane_stride + (rows_pad-1)*row_stride + k_pad - 1,
  // must fit int64.
  if (rows_pad > 0 && k_pad > 0) {
    const int64_t rows_part = rows_pad - 1;
    if ((rows_part > 0 && row_stride > (INT64_MAX - k_pad) / rows_part) ||
        (nmod > 1 && plane_stride > (INT64_MAX - k_pad - rows_part * row_stride) / (nmod - 1))) {
      return err.set(kBadArgument, "%s: output extent overflows int64", what);
    }
  }
  if (nvec > 0 && shifts == nullptr) return err.set(kBadArgument, "%s: shifts is null", what);
  if (moduli == nullptr) return err.set(kBadArgument, "%s: moduli is null", what);
  if (rows_pad > 0 && k_pad > 0 && out == nullptr)
    return err.set(kBadArgument, "%s: out is null", what);
  const VectorSet xs{x, nvec, k, vs, es};
  const ChunkGrid grid = chunk_grid(xs, rows_pad, k_pad);
  if (grid.slots == 0) return kOk;
  ResidueArgs args{xs, shifts, nmod, moduli, out, row_stride, plane_stride, grid,
                   aligned16(out) && row_stride % 16 == 0 && plane_stride % 16 == 0};
  const int64_t blocks = resident_blocks(residues_kernel, kThreads, grid.slots, kThreads);
  residues_kernel<<<blocks, kThreads, 0, stream>>>(args);
  return check_launch(err, what);
}

inline int residues(const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es,
                    const int32_t* shifts, int nmod, const int32_t* moduli, int8_t* out,
                    int64_t rows_pad, int64_t k_pad, cudaStream_t stream, Message& err) {
  if (!product_fits(rows_pad > 0 ? rows_pad : 0, k_pad > 0 ? k_pad : 0, nmod > 0 ? nmod : 1)) {
    return err.set(kBadArgument, "residues: output size rows_pad*k_pad*nmod overflows int64");
  }
  return residues_strided(x, nvec, k, vs, es, shifts, nmod, moduli, out, rows_pad, k_pad, k_pad,
                          rows_pad * k_pad, stream, err);
}

inline int check_constants(const char* what, const CrtConstants* consts, Message& err) {
  if (consts == nullptr) return err.set(kBadArgument, "%s: consts is null", what);
  if (consts->count < 1 || consts->count > kMaxModuli) {
    return err.set(kBadArgument, "%s: consts->count=%d outside [1, %d]", what, consts->count,
                   kMaxModuli);
  }
  if (consts->limbs < 1 || consts->limbs > kMaxLimbs) {
    return err.set(kBadArgument, "%s: consts->limbs=%d outside [1, %d]", what, consts->limbs,
                   kMaxLimbs);
  }
  for (int g = 0; g < consts->count; ++g) {
    if (consts->moduli[g] < 2 || consts->moduli[g] > 256) {
      return err.set(kBadArgument, "%s: consts->moduli[%d]=%d outside [2, 256]", what, g,
                     consts->moduli[g]);
    }
  }
  return kOk;
}

// The output half of CrtArgs (shared by crt_unscale and combine_unscale).
inline int check_output(const char* what, int64_t m, int64_t n, const int32_t* mu,
                        const int32_t* nu, double beta, const double* cin, double* out,
                        Message& err) {
  if (mu == nullptr || nu == nullptr || out == nullptr) {
    return err.set(kBadArgument, "%s: null pointer (mu, nu or out)", what);
  }
  if (beta != 0.0 && cin == nullptr) {
    return err.set(kBadArgument, "%s: beta != 0 needs cin", what);
  }
  (void)m;
  (void)n;
  return kOk;
}

// A NonfiniteSource the CRT kernels can read (null: none).
inline int check_nonfinite(const char* what, const NonfiniteSource* nf, Message& err) {
  if (nf == nullptr) return kOk;
  if (nf->row_flags == nullptr || nf->col_flags == nullptr) {
    return err.set(kBadArgument, "%s: the non-finite source needs row_flags and col_flags", what);
  }
  if (nf->k < 0 || (nf->k > 0 && (nf->a == nullptr || nf->b == nullptr))) {
    return err.set(kBadArgument, "%s: the non-finite source needs k >= 0 and, for k > 0, a and b "
                   "(k=%lld)", what, static_cast<long long>(nf->k));
  }
  return kOk;
}

inline CrtReduce crt_reduce(const CrtConstants& consts) {
  CrtReduce red{};
  for (int g = 0; g < consts.count; ++g) {
    const uint32_t mod = static_cast<uint32_t>(consts.moduli[g]);
    red.magic[g] = barrett_magic(mod);
    red.offset[g] = signed_offset(mod);
  }
  return red;
}

template <int kSource, int kLimbs>
inline void launch_crt_kernel(const CrtArgs& args, const CrtConstants& consts, const CrtReduce& red,
                              cudaStream_t stream) {
  if constexpr (kSource == kFromResidueBytes) {
    const int64_t work = args.m * ((args.n + kResidueBytesPerThread - 1) / kResidueBytesPerThread);
    const int64_t blocks = resident_blocks(crt_residue_bytes_kernel<kLimbs>, kResidueBytesThreads, work,
                                           kResidueBytesThreads);
    crt_residue_bytes_kernel<kLimbs><<<blocks, kResidueBytesThreads, 0, stream>>>(args, consts, red);
  } else {
    const int64_t work = args.m * ((args.n + 3) / 4);
    const int64_t blocks = resident_blocks(crt_kernel<kSource, kLimbs>, kThreads, work, kThreads);
    crt_kernel<kSource, kLimbs><<<blocks, kThreads, 0, stream>>>(args, consts, red);
  }
}

template <int kLimbs>
inline void launch_crt_limbs(int source, const CrtArgs& args, const CrtConstants& consts,
                             const CrtReduce& red, cudaStream_t stream) {
  switch (source) {
    case kFromPartials: launch_crt_kernel<kFromPartials, kLimbs>(args, consts, red, stream); break;
    case kFromResidueBytes: launch_crt_kernel<kFromResidueBytes, kLimbs>(args, consts, red, stream); break;
    default: launch_crt_kernel<kFromInt32, kLimbs>(args, consts, red, stream); break;
  }
}

inline int launch_crt(int source, const CrtArgs& args, const CrtConstants& consts,
                      const CrtReduce& red, cudaStream_t stream, Message& err, const char* what) {
  static_assert(kMaxLimbs == 4, "one instance per limb count below");
  switch (consts.limbs) {  // check_constants proved 1 <= limbs <= kMaxLimbs
    case 1: launch_crt_limbs<1>(source, args, consts, red, stream); break;
    case 2: launch_crt_limbs<2>(source, args, consts, red, stream); break;
    case 3: launch_crt_limbs<3>(source, args, consts, red, stream); break;
    default: launch_crt_limbs<4>(source, args, consts, red, stream); break;
  }
  return check_launch(err, what);
}

inline int crt_unscale(const int32_t* c, int nmod, int64_t m, int64_t n, int64_t ldc,
                       int64_t batch_stride_c, int nchunks, int64_t chunk_stride,
                       const CrtConstants* consts, const int32_t* mu, const int32_t* nu,
                       double alpha, double beta, const double* cin, int64_t cin_rs,
                       int64_t cin_cs, double* out, int64_t out_rs, int64_t out_cs,
                       const NonfiniteSource* nf, cudaStream_t stream, Message& err) {
  const char* what = "crt_unscale";
  if (m < 0 || n < 0 || !product_fits(m, n)) {
    return err.set(kBadArgument, "%s: bad sizes m=%lld n=%lld", what, static_cast<long long>(m),
                   static_cast<long long>(n));
  }
  if (int s = check_constants(what, consts, err)) return s;
  if (consts->count != nmod) {
    return err.set(kBadArgument, "%s: consts->count=%d must equal nmod=%d", what, consts->count,
                   nmod);
  }
  if (nchunks < 1) return err.set(kBadArgument, "%s: nchunks=%d must be >= 1", what, nchunks);
  if (m == 0 || n == 0) return kOk;
  if (c == nullptr) return err.set(kBadArgument, "%s: null pointer (c)", what);
  if (reinterpret_cast<uintptr_t>(c) % alignof(int32_t) != 0) {
    return err.set(kBadArgument, "%s: c=%p is not 4-byte aligned", what, static_cast<const void*>(c));
  }
  if (ldc < n) {
    return err.set(kBadArgument, "%s: ldc=%lld must be >= n=%lld", what,
                   static_cast<long long>(ldc), static_cast<long long>(n));
  }
  if (nmod > 1 && batch_stride_c < 1) {
    return err.set(kBadArgument, "%s: batch_stride_c=%lld must be >= 1 for %d moduli", what,
                   static_cast<long long>(batch_stride_c), nmod);
  }
  if (nchunks > 1 && chunk_stride < 1) {
    return err.set(kBadArgument, "%s: chunk_stride=%lld must be >= 1 for %d chunks", what,
                   static_cast<long long>(chunk_stride), nchunks);
  }
  if (int s = check_output(what, m, n, mu, nu, beta, cin, out, err)) return s;
  CrtReduce red = crt_reduce(*consts);
  for (int g = 0; g < nmod; ++g) red.plane[g] = g * batch_stride_c;
  const bool vector_loads = aligned16(c) && ldc % 4 == 0 && batch_stride_c % 4 == 0 &&
                            (nchunks == 1 || chunk_stride % 4 == 0);
  const bool vector_stores = out_cs == 1 && out_rs % 2 == 0 && aligned16(out);
  if (int s = check_nonfinite(what, nf, err)) return s;
  const CrtArgs args{c, nullptr, m, n, ldc, nchunks, chunk_stride, vector_loads, mu, nu, alpha,
                     beta, cin, cin_rs, cin_cs, out, out_rs, out_cs, vector_stores,
                     nf != nullptr ? *nf : NonfiniteSource{}};
  return launch_crt(kFromInt32, args, *consts, red, stream, err, what);
}

inline int combine_unscale(const void* x_bytes, int ngroups, const int32_t* group_sizes,
                           int64_t m, int64_t n, int64_t ldx, int64_t group_stride,
                           const CrtConstants* consts, const int32_t* mu, const int32_t* nu,
                           double alpha, double beta, const double* cin, int64_t cin_rs,
                           int64_t cin_cs, double* out, int64_t out_rs, int64_t out_cs,
                           const NonfiniteSource* nf, cudaStream_t stream, Message& err) {
  const char* what = "combine_unscale";
  if (m < 0 || n < 0 || !product_fits(m, n)) {
    return err.set(kBadArgument, "%s: bad sizes m=%lld n=%lld", what, static_cast<long long>(m),
                   static_cast<long long>(n));
  }
  if (int s = check_constants(what, consts, err)) return s;
  if (ngroups < 1 || ngroups > consts->count || group_sizes == nullptr) {
    return err.set(kBadArgument, "%s: ngroups=%d must be in [1, consts->count=%d] with group_sizes",
                   what, ngroups, consts->count);
  }
  CrtReduce red = crt_reduce(*consts);
  const auto* x = static_cast<const unsigned char*>(x_bytes);
  int g = 0;
  int64_t offset = 0;  // bytes
  for (int gr = 0; gr < ngroups; ++gr) {
    const int size = group_sizes[gr];
    if (size < 1 || size > consts->count - g) {
      return err.set(kBadArgument, "%s: group_sizes[%d]=%d does not fit the %d moduli", what, gr,
                     size, consts->count);
    }
    uint64_t product = 1;
    for (int t = 0; t < size; ++t, ++g) {
      product *= static_cast<uint64_t>(consts->moduli[g]);  // <= 256^20 never reached: checked
      if (product > 0xffffffffull) {
        return err.set(kBadArgument, "%s: group %d's moduli product exceeds 2^32 - 1", what, gr);
      }
      red.plane[g] = offset;
      red.load[g] = t == 0;
      red.width[g] = partial_bytes(size);
    }
    offset += partial_bytes(size) * group_stride;
  }
  if (g != consts->count) {
    return err.set(kBadArgument, "%s: group_sizes sum to %d, consts->count is %d", what, g,
                   consts->count);
  }
  if (m == 0 || n == 0) return kOk;
  if (x == nullptr) return err.set(kBadArgument, "%s: null pointer (x)", what);
  if (ldx < n || (ngroups > 1 && group_stride < 1)) {
    return err.set(kBadArgument, "%s: need ldx >= n and group_stride >= 1; got ldx=%lld "
                   "group_stride=%lld", what, static_cast<long long>(ldx),
                   static_cast<long long>(group_stride));
  }
  for (int h = 0; h < consts->count; ++h) {  // uint32 partials are read as words
    if (red.width[h] == 4 && (reinterpret_cast<uintptr_t>(x) + red.plane[h]) % 4 != 0) {
      return err.set(kBadArgument, "%s: the uint32 plane of modulus %d starts at byte %lld of "
                     "x=%p, not 4-byte aligned (group_stride=%lld)", what, h,
                     static_cast<long long>(red.plane[h]), x_bytes,
                     static_cast<long long>(group_stride));
    }
  }
  if (int s = check_output(what, m, n, mu, nu, beta, cin, out, err)) return s;
  // every group of one modulus: the partials are the residues themselves
  const bool residue_bytes = ngroups == consts->count;
  // 16-byte loads of 4 uint32 partials, 4-byte loads of 4 one-byte partials; residue
  // bytes: 8-byte loads of 8
  const bool vector_loads = aligned16(x) && ldx % (residue_bytes ? kResidueBytesPerThread : 4) == 0 &&
                            (ngroups == 1 || group_stride % 16 == 0);
  const bool vector_stores = out_cs == 1 && out_rs % 2 == 0 && aligned16(out);
  if (int s = check_nonfinite(what, nf, err)) return s;
  const CrtArgs args{nullptr, x, m, n, ldx, 1, 0, vector_loads, mu, nu, alpha, beta, cin, cin_rs,
                     cin_cs, out, out_rs, out_cs, vector_stores,
                     nf != nullptr ? *nf : NonfiniteSource{}};
  return launch_crt(residue_bytes ? kFromResidueBytes : kFromPartials, args, *consts, red, stream,
                    err, what);
}


}  // namespace stages
}  // namespace ozaki
