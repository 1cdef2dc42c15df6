// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The stage kernels of the staged Ozaki-II pipeline (everything except the INT8 GEMMs),
// and the host launch helpers behind the C ABI that templates/stages.cu.j2 exports.
// Each kernel reproduces a stage function of ozaki_cutlass/reference.py bit for bit:
//
//   P_scan              reference.split_nonfinite (counts only), exponents, fast_shifts
//   P_coarse            reference.coarse_magnitudes (int8 operands of the coarse GEMM)
//   P_accumulate_i64    the int64 sum over k chunks of the coarse GEMM (reference.coarse_bound)
//   P_accurate_shifts   reference.accurate_shifts (a row pass, then a column pass)
//   P_residues          reference.scale_to_integers + reference.residues (TN int8 layout)
//   P_crt_unscale       reference.modular_products' final "mod m_g" + crt_reconstruct
//                       + the pattern substitution of gemm + unscale
//   P_nonfinite_pattern reference.split_nonfinite (the NaN/Inf pattern)
//
// ABI (version 1), with P = "ozaki_" + variant name. Sizes and strides are int64_t,
// strides in elements. Every function returns 0 (ok), 1 (bad arguments, detected before
// any CUDA call) or 2 (a CUDA error reported by cudaGetLastError after a launch), and
// then P_last_error() holds the message (one per thread). Nothing allocates or
// synchronizes; everything runs on `stream`. Sizes of 0 launch nothing and return 0.
//
// A "vector set" (x, nvec, k, vs, es) is nvec vectors of length k, element l of vector v
// at x[v*vs + l*es]: the rows of op(A) (v = i) or the columns of op(B) (v = j).
// Int8 outputs are (rows_pad x k_pad) row-major per plane; k_pad is a multiple of 16 and
// >= k, rows_pad >= nvec; the padding (l >= k or v >= nvec) is written as 0.
//
//   int P_scan(const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es, int pb,
//              int32_t* exps, int32_t* fast_shift, int32_t* nonfinite_count,
//              cudaStream_t stream);
//       Per vector: nonfinite_count[v] = number of NaN/Inf entries (treated as 0 below);
//       exps[v] = E, the frexp exponent of max |x| (0 for an all-zero vector);
//       fast_shift[v] = reference.fast_shifts with bound exponent pb.
//   int P_coarse(const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es,
//                const int32_t* exps, int8_t* out, int64_t rows_pad, int64_t k_pad,
//                cudaStream_t stream);
//       out[v*k_pad + l] = ceil(2^(6 - E_v) |x_vl|) (1 if that is 0 for x != 0; 0 for NaN/Inf).
//   int P_accumulate_i64(const int32_t* part, int64_t rows, int64_t cols, int64_t ld_part,
//                        int64_t* acc, int first, cudaStream_t stream);
//       acc[i*cols + j] = (first ? 0 : acc[i*cols + j]) + part[i*ld_part + j].
//   int P_accurate_shifts(const int64_t* g, int64_t m, int64_t n, const int32_t* exps_a,
//                         const int32_t* exps_b, const int32_t* mu_fast,
//                         const int32_t* nu_fast, int pb, int32_t* mu, int32_t* nu,
//                         int32_t* workspace_d, cudaStream_t stream);
//       g is m x n row-major (the coarse bound G); workspace_d holds m int32 (the row gains).
//   int P_residues(const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es,
//                  const int32_t* shifts, int nmod, const int32_t* moduli, int8_t* out,
//                  int64_t rows_pad, int64_t k_pad, cudaStream_t stream);
//       moduli: nmod (1..20) device int32 values in [2, 256]. For modulus g:
//       out[g*rows_pad*k_pad + v*k_pad + l] = trunc(2^shift_v x_vl) mods m_g, symmetric, int8.
//   int P_crt_unscale(const int32_t* c, int nmod, int64_t m, int64_t n, int64_t ldc,
//                     int64_t batch_stride_c, int nchunks, int64_t chunk_stride,
//                     const ozaki::CrtConstants* consts, const int32_t* mu, const int32_t* nu,
//                     double alpha, double beta, const double* cin, int64_t cin_rs,
//                     int64_t cin_cs, double* out, int64_t out_rs, int64_t out_cs,
//                     const double* pattern, cudaStream_t stream);
//       c: the raw int32 INT8-GEMM outputs, element (ch, g, i, j) at
//       c[ch*chunk_stride + g*batch_stride_c + i*ldc + j]. consts: a HOST pointer, copied
//       into the launch (nmod must equal consts->count). cin is read only when beta != 0.
//       pattern (may be null): m x n row-major; a non-zero entry (NaN included) replaces X.
//       alpha == 0 and k == 0 are the caller's business (reference.gemm returns early
//       there; this kernel would compute alpha * X, e.g. 0 * Inf = NaN).
//   int P_nonfinite_pattern(const double* a, int64_t m, int64_t k, int64_t a_rs,
//                           int64_t a_cs, const double* b, int64_t n, int64_t b_rs,
//                           int64_t b_cs, const int32_t* row_flags,
//                           const int32_t* col_flags, double* pattern, cudaStream_t stream);
//       a(i, l) = a[i*a_rs + l*a_cs], b(l, j) = b[l*b_rs + j*b_cs]; row_flags / col_flags:
//       non-finite counts per row of op(A) / column of op(B) (P_scan's nonfinite_count).
//       pattern (m x n, row-major) is written fully: 0, NaN, +Inf or -Inf.
//   const char* P_last_error(void);
//   int         P_abi_version(void);           returns 1
//   size_t      P_crt_constants_size(void);    sizeof(ozaki::CrtConstants) = 824, for
//                                              checking the ctypes mirror
//
// ozaki::CrtConstants (standard layout, no padding, 824 bytes; fill from
// numerics.crt_constants(N); unused entries should be 0 and are never read):
//   offset   0  int32_t count                   N, 1..20 (must equal nmod)
//   offset   4  int32_t limbs                   L, 1..4
//   offset   8  int32_t moduli[20]              m_g
//   offset  88  double  weight_limbs[20][4]     d_gj at [g][j]: a FIXED row stride of 4
//                                              (not as_kernel_data's flat g*L + j)
//   offset 728  double  product_limbs[4]        p_j
//   offset 760  double  limb_scales[4]          2^(40(L-1-j))
//   offset 792  double  quotient_factors[4]     f_j
// ctypes: count, limbs: c_int32; moduli: c_int32 * 20; weight_limbs: (c_double * 4) * 20;
// the last three: c_double * 4.

#pragma once

#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include <cuda_runtime.h>

// Marks the entry points of a generated library (the same spelling as the GEMM ABI's).
#ifndef OZAKI_EXPORT
#define OZAKI_EXPORT extern "C" __attribute__((visibility("default")))
#endif

namespace ozaki {

// The CRT data one launch of P_crt_unscale needs, passed by value. See the layout above.
struct CrtConstants {
  int32_t count;
  int32_t limbs;
  int32_t moduli[20];
  double weight_limbs[20][4];
  double product_limbs[4];
  double limb_scales[4];
  double quotient_factors[4];
};

static_assert(std::is_standard_layout<CrtConstants>::value, "CrtConstants must be standard layout");
static_assert(std::is_trivially_copyable<CrtConstants>::value, "CrtConstants must be trivially copyable");
static_assert(offsetof(CrtConstants, moduli) == 8, "CrtConstants layout");
static_assert(offsetof(CrtConstants, weight_limbs) == 88, "CrtConstants layout");
static_assert(offsetof(CrtConstants, product_limbs) == 728, "CrtConstants layout");
static_assert(offsetof(CrtConstants, limb_scales) == 760, "CrtConstants layout");
static_assert(offsetof(CrtConstants, quotient_factors) == 792, "CrtConstants layout");
static_assert(sizeof(CrtConstants) == 824, "CrtConstants layout");

namespace stages {

inline constexpr int kAbiVersion = 1;
inline constexpr int kMaxModuli = 20;
inline constexpr int kMaxLimbs = 4;
inline constexpr int kCoarseBits = 6;               // numerics.COARSE_BITS
inline constexpr int64_t kNoConstraint = 1 << 30;   // reference._NO_CONSTRAINT
inline constexpr int64_t kKAlignment = 16;          // k_pad must be a multiple of this

enum Status : int {
  kOk = 0,
  kBadArgument = 1,
  kCudaError = 2,
};

// The text behind P_last_error. The template owns one thread_local instance; fixed size,
// so setting it never allocates or throws.
class Message {
 public:
  void clear() noexcept { text_[0] = '\0'; }
  const char* c_str() const noexcept { return text_; }

  __attribute__((format(printf, 3, 4)))
  int set(int status, const char* format, ...) noexcept {
    va_list args;
    va_start(args, format);
    std::vsnprintf(text_, sizeof(text_), format, args);
    va_end(args);
    return status;
  }

 private:
  char text_[512] = {};
};

// =====================================================================================
// Scalar helpers. __host__ __device__ so that host unit tests can check them against
// Python (.dev/stages/); the kernels below are built only from these.
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
  if (k <= 1) return 20;
  const int qb = (63 - bit_length(static_cast<uint64_t>(k - 1))) / 2;
  return qb < 20 ? qb : 20;
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

// Adds residue r_g (in [0, m_g)) to the limb sums: S_j += d_gj r_g (exact in any order).
__host__ __device__ inline void crt_add_residue(const CrtConstants& k, int g, int32_t r,
                                                double (&limb_sums)[kMaxLimbs]) {
  const double rd = static_cast<double>(r);
#pragma unroll
  for (int j = 0; j < kMaxLimbs; ++j) {
    if (j < k.limbs) limb_sums[j] = add_rn(limb_sums[j], mul_rn(k.weight_limbs[g][j], rd));
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

// --- tiles of a vector set, for the int8 outputs (coarse, residues) -----------------
// A 32 x 32 tile (32 vectors x 32 k entries) is read with coalesced loads along
// whichever stride is smaller, kept in shared memory with NaN/Inf and out-of-range
// entries as 0, and written with lanes along k (coalesced int8 stores).
inline constexpr int kTile = 32;

struct TileGrid {
  int64_t rows_pad;
  int64_t k_pad;
  int64_t tiles_k;  // ceil(k_pad / kTile)
  int64_t tiles;    // ceil(rows_pad / kTile) * tiles_k
};

__device__ inline void load_tile(double (&tile)[kTile][kTile + 1], const VectorSet& xs,
                                 int64_t v0, int64_t l0, bool lanes_along_k) {
  for (int r = threadIdx.y; r < kTile; r += kRowsPerBlock) {
    const int vloc = lanes_along_k ? r : threadIdx.x;
    const int lloc = lanes_along_k ? threadIdx.x : r;
    const int64_t v = v0 + vloc;
    const int64_t l = l0 + lloc;
    double a = 0.0;
    if (v < xs.nvec && l < xs.k) {
      a = xs.at(v, l);
      if (!isfinite(a)) a = 0.0;
    }
    tile[vloc][lloc] = a;
  }
}

__global__ void __launch_bounds__(kWarp * kRowsPerBlock)
coarse_kernel(VectorSet xs, bool lanes_along_k, const int32_t* exps, int8_t* out,
              TileGrid grid) {
  __shared__ double tile[kTile][kTile + 1];
  for (int64_t t = blockIdx.x; t < grid.tiles; t += gridDim.x) {
    const int64_t v0 = (t / grid.tiles_k) * kTile;
    const int64_t l0 = (t % grid.tiles_k) * kTile;
    load_tile(tile, xs, v0, l0, lanes_along_k);
    __syncthreads();
    for (int r = threadIdx.y; r < kTile; r += kRowsPerBlock) {
      const int64_t v = v0 + r;
      const int64_t l = l0 + threadIdx.x;
      if (v < grid.rows_pad && l < grid.k_pad) {
        const int8_t q = v < xs.nvec ? coarse_value(tile[r][threadIdx.x], exps[v]) : 0;
        out[v * grid.k_pad + l] = q;
      }
    }
    __syncthreads();
  }
}

__global__ void __launch_bounds__(kWarp * kRowsPerBlock)
residues_kernel(VectorSet xs, bool lanes_along_k, const int32_t* shifts, int nmod,
                const int32_t* moduli, int8_t* out, TileGrid grid) {
  __shared__ double tile[kTile][kTile + 1];
  __shared__ uint32_t s_moduli[kMaxModuli];
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  if (tid < nmod) s_moduli[tid] = static_cast<uint32_t>(moduli[tid]);
  __syncthreads();

  const int64_t plane = grid.rows_pad * grid.k_pad;
  for (int64_t t = blockIdx.x; t < grid.tiles; t += gridDim.x) {
    const int64_t v0 = (t / grid.tiles_k) * kTile;
    const int64_t l0 = (t % grid.tiles_k) * kTile;
    load_tile(tile, xs, v0, l0, lanes_along_k);
    __syncthreads();
    for (int r = threadIdx.y; r < kTile; r += kRowsPerBlock) {
      const int64_t v = v0 + r;
      const int64_t l = l0 + threadIdx.x;
      if (v < grid.rows_pad && l < grid.k_pad) {
        // One read of x, nmod stores. Padding (v >= nvec, l >= k) is the integer 0.
        const double a = v < xs.nvec ? scale_to_integer(tile[r][threadIdx.x], shifts[v]) : 0.0;
        const IntegerDouble d = decompose_integer(a);
        int8_t* dst = out + v * grid.k_pad + l;
        for (int g = 0; g < nmod; ++g) {
          dst[g * plane] = symmetric_residue(residue(d, s_moduli[g]), s_moduli[g]);
        }
      }
    }
    __syncthreads();
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

struct ShiftArgs {
  const int64_t* g;  // m x n, row-major
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
__global__ void __launch_bounds__(kThreads)
accurate_rows_kernel(ShiftArgs a) {
  __shared__ int64_t s_min[kThreads];
  for (int64_t i = blockIdx.x; i < a.m; i += gridDim.x) {
    const int32_t ea = a.exps_a[i];
    const int32_t mf = a.mu_fast[i];
    int64_t row_min = kNoConstraint;  // also the value for an empty row
    for (int64_t j = threadIdx.x; j < a.n; j += kThreads) {
      const int64_t s = coarse_slack(a.g[i * a.n + j], ea, a.exps_b[j], mf, a.nu_fast[j], a.pb);
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

// Column pass: 32 columns per block (coalesced reads of g), the 8 warps split the rows;
// min_i (s_ij - d_i), then g_j and nu_j.
__global__ void __launch_bounds__(kWarp * kRowsPerBlock)
accurate_columns_kernel(ShiftArgs a) {
  __shared__ int64_t s_min[kRowsPerBlock][kWarp];
  const int64_t groups = (a.n + kWarp - 1) / kWarp;
  for (int64_t group = blockIdx.x; group < groups; group += gridDim.x) {
    const int64_t j = group * kWarp + threadIdx.x;
    int64_t col_min = kNoConstraint;  // also the value for an empty column
    if (j < a.n) {
      const int32_t eb = a.exps_b[j];
      const int32_t nf = a.nu_fast[j];
      for (int64_t i = threadIdx.y; i < a.m; i += kRowsPerBlock) {
        const int64_t s = coarse_slack(a.g[i * a.n + j], a.exps_a[i], eb, a.mu_fast[i], nf, a.pb) -
                          a.d[i];
        col_min = s < col_min ? s : col_min;
      }
    }
    s_min[threadIdx.y][threadIdx.x] = col_min;
    __syncthreads();
    if (threadIdx.y == 0 && j < a.n) {
      for (int p = 1; p < kRowsPerBlock; ++p) {
        col_min = s_min[p][threadIdx.x] < col_min ? s_min[p][threadIdx.x] : col_min;
      }
      const int64_t gain = column_gain(col_min, a.exps_b[j], a.nu_fast[j], a.pb);
      a.nu[j] = static_cast<int32_t>(a.nu_fast[j] + gain);
    }
    __syncthreads();
  }
}

// --- CRT reconstruction and unscaling ------------------------------------------------
struct CrtArgs {
  const int32_t* c;
  int64_t m;
  int64_t n;
  int64_t ldc;
  int64_t batch_stride_c;
  int nchunks;
  int64_t chunk_stride;
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
  const double* pattern;  // may be null
};

// One thread per (i, j). The moduli loop is unrolled to kMaxModuli with a guard so that
// every index into the constants is static (no local-memory copy of the struct).
__global__ void __launch_bounds__(kThreads)
crt_unscale_kernel(CrtArgs a, const __grid_constant__ CrtConstants consts) {
  const int64_t total = a.m * a.n;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = idx / a.n;
    const int64_t j = idx % a.n;
    const int32_t* cij = a.c + i * a.ldc + j;

    double limb_sums[kMaxLimbs] = {0.0, 0.0, 0.0, 0.0};
#pragma unroll
    for (int g = 0; g < kMaxModuli; ++g) {
      if (g < consts.count) {
        const int32_t mod = consts.moduli[g];
        int64_t sum = 0;
        for (int ch = 0; ch < a.nchunks; ++ch) {
          sum += positive_mod(cij[ch * a.chunk_stride + g * a.batch_stride_c], mod);
        }
        crt_add_residue(consts, g, static_cast<int32_t>(sum % mod), limb_sums);
      }
    }
    double x = crt_finish(consts, limb_sums);

    if (a.pattern != nullptr) {
      const double p = a.pattern[i * a.n + j];
      if (p != 0.0) x = p;  // NaN != 0 too
    }
    const double c_value = a.beta != 0.0 ? a.cin[i * a.cin_rs + j * a.cin_cs] : 0.0;
    a.out[i * a.out_rs + j * a.out_cs] =
        unscale_value(x, a.mu[i] + a.nu[j], a.alpha, a.beta, c_value);
  }
}

// --- non-finite pattern --------------------------------------------------------------
struct PatternArgs {
  const double* a;
  int64_t m;
  int64_t k;
  int64_t a_rs;
  int64_t a_cs;
  const double* b;
  int64_t n;
  int64_t b_rs;
  int64_t b_cs;
  const int32_t* row_flags;
  const int32_t* col_flags;
  double* pattern;
};

__global__ void __launch_bounds__(kThreads)
nonfinite_pattern_kernel(PatternArgs p) {
  const int64_t total = p.m * p.n;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = idx / p.n;
    const int64_t j = idx % p.n;
    unsigned flags = 0;
    if (p.row_flags[i] != 0 || p.col_flags[j] != 0) {
      for (int64_t l = 0; l < p.k; ++l) {
        flags |= classify_term(p.a[i * p.a_rs + l * p.a_cs], p.b[l * p.b_rs + j * p.b_cs]);
      }
    }
    p.pattern[idx] = pattern_value(flags);
  }
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

inline TileGrid tile_grid(int64_t rows_pad, int64_t k_pad) {
  TileGrid t;
  t.rows_pad = rows_pad;
  t.k_pad = k_pad;
  t.tiles_k = (k_pad + kTile - 1) / kTile;
  t.tiles = ((rows_pad + kTile - 1) / kTile) * t.tiles_k;
  return t;
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
  const TileGrid grid = tile_grid(rows_pad, k_pad);
  if (grid.tiles == 0) return kOk;
  coarse_kernel<<<blocks_for(grid.tiles, 1), dim3(kWarp, kRowsPerBlock), 0, stream>>>(
      VectorSet{x, nvec, k, vs, es}, lanes_along_k(vs, es), exps, out, grid);
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

inline int accurate_shifts(const int64_t* g, int64_t m, int64_t n, const int32_t* exps_a,
                           const int32_t* exps_b, const int32_t* mu_fast,
                           const int32_t* nu_fast, int pb, int32_t* mu, int32_t* nu,
                           int32_t* workspace_d, cudaStream_t stream, Message& err) {
  const char* what = "accurate_shifts";
  if (m < 0 || n < 0 || !product_fits(m, n)) {
    return err.set(kBadArgument, "%s: bad sizes m=%lld n=%lld", what, static_cast<long long>(m),
                   static_cast<long long>(n));
  }
  if (pb < 0 || pb > 4096) return err.set(kBadArgument, "%s: pb=%d out of range", what, pb);
  if ((m > 0 && (exps_a == nullptr || mu_fast == nullptr || mu == nullptr ||
                 workspace_d == nullptr)) ||
      (n > 0 && (exps_b == nullptr || nu_fast == nullptr || nu == nullptr)) ||
      (m > 0 && n > 0 && g == nullptr)) {
    return err.set(kBadArgument, "%s: null pointer", what);
  }
  const ShiftArgs args{g, m, n, exps_a, exps_b, mu_fast, nu_fast, pb, mu, nu, workspace_d};
  if (m > 0) {
    accurate_rows_kernel<<<blocks_for(m, 1), kThreads, 0, stream>>>(args);
    if (int s = check_launch(err, "accurate_shifts (rows)")) return s;
  }
  if (n > 0) {
    accurate_columns_kernel<<<blocks_for(n, kWarp), dim3(kWarp, kRowsPerBlock), 0, stream>>>(
        args);
    if (int s = check_launch(err, "accurate_shifts (columns)")) return s;
  }
  return kOk;
}

inline int residues(const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es,
                    const int32_t* shifts, int nmod, const int32_t* moduli, int8_t* out,
                    int64_t rows_pad, int64_t k_pad, cudaStream_t stream, Message& err) {
  const char* what = "residues";
  if (int s = check_vector_set(what, x, nvec, k, err)) return s;
  if (nmod < 1 || nmod > kMaxModuli) {
    return err.set(kBadArgument, "%s: nmod=%d outside [1, %d]", what, nmod, kMaxModuli);
  }
  if (int s = check_padding(what, nvec, k, rows_pad, k_pad, nmod, err)) return s;
  if (nvec > 0 && shifts == nullptr) return err.set(kBadArgument, "%s: shifts is null", what);
  if (moduli == nullptr) return err.set(kBadArgument, "%s: moduli is null", what);
  if (rows_pad > 0 && k_pad > 0 && out == nullptr)
    return err.set(kBadArgument, "%s: out is null", what);
  const TileGrid grid = tile_grid(rows_pad, k_pad);
  if (grid.tiles == 0) return kOk;
  residues_kernel<<<blocks_for(grid.tiles, 1), dim3(kWarp, kRowsPerBlock), 0, stream>>>(
      VectorSet{x, nvec, k, vs, es}, lanes_along_k(vs, es), shifts, nmod, moduli, out, grid);
  return check_launch(err, what);
}

inline int crt_unscale(const int32_t* c, int nmod, int64_t m, int64_t n, int64_t ldc,
                       int64_t batch_stride_c, int nchunks, int64_t chunk_stride,
                       const CrtConstants* consts, const int32_t* mu, const int32_t* nu,
                       double alpha, double beta, const double* cin, int64_t cin_rs,
                       int64_t cin_cs, double* out, int64_t out_rs, int64_t out_cs,
                       const double* pattern, cudaStream_t stream, Message& err) {
  const char* what = "crt_unscale";
  if (m < 0 || n < 0 || !product_fits(m, n)) {
    return err.set(kBadArgument, "%s: bad sizes m=%lld n=%lld", what, static_cast<long long>(m),
                   static_cast<long long>(n));
  }
  if (consts == nullptr) return err.set(kBadArgument, "%s: consts is null", what);
  if (consts->count < 1 || consts->count > kMaxModuli || consts->count != nmod) {
    return err.set(kBadArgument, "%s: consts->count=%d must be in [1, %d] and equal nmod=%d",
                   what, consts->count, kMaxModuli, nmod);
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
  if (nchunks < 1) return err.set(kBadArgument, "%s: nchunks=%d must be >= 1", what, nchunks);
  if (m == 0 || n == 0) return kOk;
  if (c == nullptr || mu == nullptr || nu == nullptr || out == nullptr) {
    return err.set(kBadArgument, "%s: null pointer (c, mu, nu or out)", what);
  }
  if (beta != 0.0 && cin == nullptr) {
    return err.set(kBadArgument, "%s: beta != 0 needs cin", what);
  }
  const CrtArgs args{c, m, n, ldc, batch_stride_c, nchunks, chunk_stride, mu, nu, alpha, beta,
                     cin, cin_rs, cin_cs, out, out_rs, out_cs, pattern};
  crt_unscale_kernel<<<blocks_for(m * n, kThreads), kThreads, 0, stream>>>(args, *consts);
  return check_launch(err, what);
}

inline int nonfinite_pattern(const double* a, int64_t m, int64_t k, int64_t a_rs, int64_t a_cs,
                             const double* b, int64_t n, int64_t b_rs, int64_t b_cs,
                             const int32_t* row_flags, const int32_t* col_flags,
                             double* pattern, cudaStream_t stream, Message& err) {
  const char* what = "nonfinite_pattern";
  if (m < 0 || n < 0 || k < 0 || !product_fits(m, n)) {
    return err.set(kBadArgument, "%s: bad sizes m=%lld n=%lld k=%lld", what,
                   static_cast<long long>(m), static_cast<long long>(n),
                   static_cast<long long>(k));
  }
  if (m == 0 || n == 0) return kOk;
  if (pattern == nullptr || row_flags == nullptr || col_flags == nullptr ||
      (k > 0 && (a == nullptr || b == nullptr))) {
    return err.set(kBadArgument, "%s: null pointer", what);
  }
  const PatternArgs args{a, m, k, a_rs, a_cs, b, n, b_rs, b_cs, row_flags, col_flags, pattern};
  nonfinite_pattern_kernel<<<blocks_for(m * n, kThreads), kThreads, 0, stream>>>(args);
  return check_launch(err, what);
}

}  // namespace stages
}  // namespace ozaki
