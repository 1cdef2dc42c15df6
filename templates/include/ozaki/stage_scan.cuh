// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The scaling stages of each operand: P_scan (exponent, non-finite count and fast shift
// per vector) and P_coarse (the coarse magnitudes, the int8 operands of the accurate
// bound's GEMM): kernels and host launchers. The bound's own passes: stage_shifts.cuh.

#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

#include "ozaki/constants.h"
#include "ozaki/scaling.h"
#include "ozaki/stage_common.cuh"
#include "ozaki/stage_launch.cuh"

namespace ozaki {
namespace stages {

// --- scan: exponent, non-finite count and fast-bound terms per vector -----------------
// Lanes along k (es the smaller stride; every operand the pipeline packs): scan_along_k_kernel
// below. Lanes along vectors (vs the smaller stride, e.g. the columns of a row-major B):
// scan_kernel, the 32 lanes of a warp read 32 neighbouring vectors and the 8 warps split k.
// Each thread keeps a partial (largest exponent, count, sums of q and q^2); one owner
// thread per vector reduces them from shared memory (max and integer sums do not depend
// on the order). E is the largest frexp exponent of the non-zero entries with their inner
// shifts added (the exponent of max |x 2^s|, no scaled value formed).
struct ScanOutputs {
  int pb;
  int32_t* exps;
  int32_t* fast_shift;      // null: not written (the contract writes it once N is chosen)
  int32_t* nonfinite_count;
  int32_t* logq;            // ceil(log2 Q), -1 for Q = 0; null: not written
  int64_t* abs_sum;         // S1 = sum q; null: not written
  // Null, or a device flag (the contract's P_equilibrate `applied`): where it reads 0, the
  // inner shifts are all 0 and exps and nonfinite_count already hold the first pass's
  // results (P_inner_stats' vector outputs, kNoExponent for no finite non-zero entry), so
  // the scan reads x once, for the second pass.
  const int32_t* given;
};

// The coarse magnitudes written by the scan's second pass (scan_along_k_kernel<kInner,
// true>): out[v*k_pad + l] as coarse_kernel writes them, padding included (rows_pad x
// k_pad, zeros outside nvec x k). out null: not written.
struct CoarseOutput {
  int8_t* out;
  int64_t rows_pad;
  int64_t k_pad;
};

__global__ void __launch_bounds__(kWarp * kRowsPerBlock)
scan_kernel(VectorSet xs, ScanOutputs o) {
  constexpr int kVectors = kWarp;        // per block
  constexpr int kLanes = kRowsPerBlock;  // per vector
  const int vloc = threadIdx.x;
  const int lane = threadIdx.y;

  __shared__ int32_t s_top[kVectors][kLanes];
  __shared__ int32_t s_count[kVectors][kLanes];
  __shared__ uint64_t s_sum[kVectors][kLanes];
  __shared__ uint64_t s_sum1[kVectors][kLanes];
  __shared__ int32_t s_exp[kVectors];

  const int qb = fast_bound_bits(xs.k);
  const bool given = o.given != nullptr && *o.given == 0;  // uniform over the grid
  if (given) xs.inner = nullptr;                          // the shifts are all 0
  const int64_t groups = (xs.nvec + kVectors - 1) / kVectors;
  for (int64_t group = blockIdx.x; group < groups; group += gridDim.x) {
    const int64_t v = group * kVectors + vloc;
    const bool active = v < xs.nvec;

    // Pass 1: the largest exponent over the finite non-zero entries, count of the others.
    if (given) {
      if (lane == 0) {
        const int32_t t = active ? o.exps[v] : kNoExponent;
        s_exp[vloc] = t == kNoExponent ? 0 : t;
        if (active) o.exps[v] = s_exp[vloc];
      }
    } else {
      int32_t top = kNoExponent;
      int32_t nonfinite = 0;
      if (active) {
        for (int64_t l = lane; l < xs.k; l += kLanes) {
          const double a = xs.at(v, l);
          if (!isfinite(a)) {
            ++nonfinite;
          } else if (a != 0.0) {
            const int32_t e = frexp_exponent(a) + xs.shift(l);
            top = e > top ? e : top;
          }
        }
      }
      s_top[vloc][lane] = top;
      s_count[vloc][lane] = nonfinite;
      __syncthreads();
      if (lane == 0) {
        int32_t t = kNoExponent;
        int32_t count = 0;
        for (int p = 0; p < kLanes; ++p) {
          t = s_top[vloc][p] > t ? s_top[vloc][p] : t;
          count += s_count[vloc][p];
        }
        s_exp[vloc] = t == kNoExponent ? 0 : t;
        if (active) {
          o.exps[v] = s_exp[vloc];
          o.nonfinite_count[v] = count;
        }
      }
    }
    __syncthreads();

    // Pass 2: Q = sum q^2 and S1 = sum q, exact in uint64 (fast_bound_bits keeps Q below 2^63).
    const int e = s_exp[vloc];
    uint64_t sum = 0, sum1 = 0;
    if (active) {
      for (int64_t l = lane; l < xs.k; l += kLanes) {
        const double a = xs.at(v, l);
        if (isfinite(a)) {
          const uint64_t q = ceil_scaled_magnitude(a, qb - e + xs.shift(l));
          sum += q * q;
          sum1 += q;
        }
      }
    }
    s_sum[vloc][lane] = sum;
    s_sum1[vloc][lane] = sum1;
    __syncthreads();
    if (lane == 0 && active) {
      uint64_t total = 0, total1 = 0;
      for (int p = 0; p < kLanes; ++p) {
        total += s_sum[vloc][p];
        total1 += s_sum1[vloc][p];
      }
      if (o.fast_shift != nullptr) o.fast_shift[v] = fast_shift_value(total, e, qb, o.pb);
      if (o.logq != nullptr) o.logq[v] = total == 0 ? -1 : ceil_log2(total);
      if (o.abs_sum != nullptr) o.abs_sum[v] = static_cast<int64_t>(total1);
    }
    __syncthreads();  // shared memory is reused by the next group
  }
}

// --- the scan along k: lanes along k --------------------------------------------------
// A team of `team` threads (a power of two, 32 .. kTeamThreads) per vector, thread t the
// entries t + u * team, kScanBatch loads in flight; blocks of kTeamThreads (two per SM).
// The second pass reads the vector again right after the first, from the L2 while the
// vectors in flight fit it (k <= 16384: 2 blocks x 128 KB per SM), streaming (its last use).
// Longer vectors (k > 16384, es == 1, no inner shifts) take a team of kLongTeam threads, a
// block of its own (one per SM), whose second pass runs last batch first (kLongTeam below).
// Without inner shifts each entry costs a few instructions: the first pass takes max |x|
// (its frexp exponent is the largest one), the second q = ceil(|x| 2^(qb - E)) as two exact
// multiplications and one conversion rounding up (ceil_scaled_by). A warp per vector with
// an exponent per entry took 2.5-16x the memory floor (too few vectors at long k, and
// instruction-bound); this kernel 1.8-2.2x (H200; docs/stages/scan.md). The same
// reductions (max, integer sums), so the same bits. kCoarse: the second pass also writes
// the coarse magnitudes (coarse_kernel's bytes; the vector's E and entries are at hand), so
// that accurate mode reads x twice, not three times.
inline constexpr int kTeamThreads = 512;
inline constexpr int kScanBatch = 8;
inline constexpr int kTeamValues = 32;  // values per thread the team size aims at

// At k = 65536 two 512-thread blocks per SM keep 264 vectors of 512 KB in flight, 135 MB
// between a vector's two passes against the 50 MB of the H200's L2, and the second pass,
// in the first one's order, read every entry again from DRAM (1.8x the floor). One team of
// kLongTeam threads per SM halves the vectors in flight with as many loads outstanding, and
// its second pass reads first what the first pass read last, still in the L2 (the stage at
// 1.4-1.5x; docs/stages/scan.md). Below 16384 entries the 512-thread blocks ran faster.
inline constexpr int kLongTeam = 1024;

// The block of the kernel whose team is kTeam (0: a team chosen at run time, <= kTeamThreads).
template <int kTeam>
inline constexpr int kScanBlock = kTeam == kLongTeam ? kLongTeam : kTeamThreads;
static_assert(kFastBoundBits < 32, "q <= 2^qb must fit the uint32 of ceil_scaled_by");

// The team's total of one value per thread: warp shuffles, then one slot per warp in
// shared memory, read back by every thread of the team. Called by the whole block.
template <class T, int kSlots, class Op>
__device__ inline T team_reduce(T v, int team, T (&slots)[kSlots], Op op) {
#pragma unroll
  for (int d = kWarp / 2; d > 0; d /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, d));
  if (threadIdx.x % kWarp == 0) slots[threadIdx.x / kWarp] = v;
  __syncthreads();
  const int first = (threadIdx.x / team) * (team / kWarp);
  T total = slots[first];
  for (int w = 1; w < team / kWarp; ++w) total = op(total, slots[first + w]);
  __syncthreads();  // the slots are reused by the next reduction
  return total;
}

// One pass over a thread's entries of the vector, kScanBatch loads at a time: f(u, x_u),
// x_u at x + u * step. kStep > 0 is step at compile time (es == 1, step = the team): whole
// batches load at immediate offsets from one pointer and call f without a bound check, the
// last part batch with them (nvcc made a 64-bit multiply and a check of every entry).
template <bool kStreaming>
__device__ inline double load_entry(const double* p) {
  return kStreaming ? __ldcs(p) : __ldg(p);
}

template <bool kStreaming, int kStep, class F>
__device__ inline void for_each_entry(const double* x, int64_t step, int n, F f) {
  int b = 0;
  if constexpr (kStep > 0) {
    for (; b + kScanBatch <= n; b += kScanBatch) {
      const double* p = x + int64_t(b) * kStep;
      double a[kScanBatch];
#pragma unroll
      for (int u = 0; u < kScanBatch; ++u) a[u] = load_entry<kStreaming>(p + u * kStep);
#pragma unroll
      for (int u = 0; u < kScanBatch; ++u) f(b + u, a[u]);
    }
  }
  const int64_t s = kStep > 0 ? kStep : step;
  for (; b < n; b += kScanBatch) {
    double a[kScanBatch];
#pragma unroll
    for (int u = 0; u < kScanBatch; ++u) a[u] = b + u < n ? load_entry<kStreaming>(x + (b + u) * s) : 0.0;
#pragma unroll
    for (int u = 0; u < kScanBatch; ++u) {
      if (b + u < n) f(b + u, a[u]);
    }
  }
}

// As for_each_entry with kStep > 0 and streaming loads, the batches last to first (the
// part batch first): a second pass that reads first what the first pass read last, the
// part of a long vector still in the L2 (kLongTeam).
template <int kStep, class F>
__device__ inline void for_each_entry_reversed(const double* x, int n, F f) {
  static_assert(kStep > 0, "the step at compile time");
  int b = n - n % kScanBatch;
  if (b < n) {
    double a[kScanBatch];
#pragma unroll
    for (int u = 0; u < kScanBatch; ++u) a[u] = b + u < n ? __ldcs(x + (b + u) * kStep) : 0.0;
#pragma unroll
    for (int u = 0; u < kScanBatch; ++u) {
      if (b + u < n) f(b + u, a[u]);
    }
  }
  for (b -= kScanBatch; b >= 0; b -= kScanBatch) {
    const double* p = x + int64_t(b) * kStep;
    double a[kScanBatch];
#pragma unroll
    for (int u = 0; u < kScanBatch; ++u) a[u] = __ldcs(p + u * kStep);
#pragma unroll
    for (int u = 0; u < kScanBatch; ++u) f(b + u, a[u]);
  }
}

// kInner: with the contract's inner shifts (per-entry exponents and scales); the grid-
// uniform `given` flag may still turn them off. kCoarse: c.out is written (CoarseOutput);
// the blocks then also cover the padding vectors nvec .. c.rows_pad. kTeam > 0: the team
// at compile time, for es == 1 (for_each_entry's kStep); 0: `team`, any es.
template <bool kInner, bool kCoarse, int kTeam>
__global__ void __launch_bounds__(kScanBlock<kTeam>, 2 * kTeamThreads / kScanBlock<kTeam>)
scan_along_k_kernel(VectorSet xs, ScanOutputs o, CoarseOutput c, int runtime_team) {
  constexpr int kBlock = kScanBlock<kTeam>;
  static_assert(kTeam == 0 || (kTeam >= kWarp && kTeam <= kBlock && (kTeam & (kTeam - 1)) == 0),
                "a team is a power of two from a warp to a block");
  const int team = kTeam > 0 ? kTeam : runtime_team;
  static_assert(!(kInner && kCoarse), "the coarse magnitudes are written without inner shifts only");
  __shared__ double s_f64[kBlock / kWarp];
  __shared__ int32_t s_i32[kBlock / kWarp];
  __shared__ uint64_t s_u64[kBlock / kWarp];
  const auto max_f64 = [](double p, double q) { return fmax(p, q); };
  const auto max_i32 = [](int32_t p, int32_t q) { return p > q ? p : q; };
  const auto add_i32 = [](int32_t p, int32_t q) { return p + q; };
  const auto add_u64 = [](uint64_t p, uint64_t q) { return p + q; };

  const int qb = fast_bound_bits(xs.k);
  const bool given = o.given != nullptr && *o.given == 0;  // uniform over the grid
  const bool shifted = kInner && !given && xs.inner != nullptr;
  const int per_block = kBlock / team;
  const int t = threadIdx.x % team;
  const int64_t vectors = kCoarse && c.rows_pad > xs.nvec ? c.rows_pad : xs.nvec;
  const int64_t groups = (vectors + per_block - 1) / per_block;
  for (int64_t group = blockIdx.x; group < groups; group += gridDim.x) {
    const int64_t v = group * per_block + threadIdx.x / team;
    const bool active = v < xs.nvec;
    // Entry t + u * team for u < n; its inner shift is inner[u * team].
    const int n = active && t < xs.k ? static_cast<int>((xs.k - t + team - 1) / team) : 0;
    const double* x = xs.x + v * xs.vs + t * xs.es;
    const int64_t step = int64_t(team) * xs.es;
    const int32_t* inner = shifted ? xs.inner + t : nullptr;
    int8_t* cq = kCoarse ? c.out + v * c.k_pad + t : nullptr;  // entry t + u * team at cq[u * team]

    // Pass 1: the largest exponent of the finite non-zero entries (with their shifts), the
    // count of the others; or, given, the inner statistics' results.
    int32_t e;
    if (given) {
      const int32_t g = active ? o.exps[v] : kNoExponent;
      e = g == kNoExponent ? 0 : g;
      if (active && t == 0) o.exps[v] = e;
    } else {
      int32_t nonfinite = 0;
      if (kInner && shifted) {
        int32_t top = kNoExponent;
        for_each_entry<false, 0>(x, step, n, [&](int u, double a) {
          if (!isfinite(a)) {
            ++nonfinite;
          } else if (a != 0.0) {
            const int32_t ex = frexp_exponent(a) + __ldg(inner + int64_t(u) * team);
            top = ex > top ? ex : top;
          }
        });
        top = team_reduce(top, team, s_i32, max_i32);
        e = top == kNoExponent ? 0 : top;
      } else {
        double amax = 0.0;
        for_each_entry<false, kTeam>(x, step, n, [&](int, double a) {
          const double m = fabs(a);
          if (m <= DBL_MAX) amax = fmax(amax, m);  // NaN and Inf fail the test
          else ++nonfinite;
        });
        e = frexp_exponent(team_reduce(amax, team, s_f64, max_f64));  // 0 for a zero vector
      }
      nonfinite = team_reduce(nonfinite, team, s_i32, add_i32);
      if (active && t == 0) {
        o.exps[v] = e;
        o.nonfinite_count[v] = nonfinite;
      }
    }

    // Pass 2: Q = sum q^2 and S1 = sum q, exact in uint64.
    uint64_t sum = 0, sum1 = 0;
    if (kInner && shifted) {
      for_each_entry<true, 0>(x, step, n, [&](int u, double a) {
        if (isfinite(a)) {
          const uint64_t q = ceil_scaled_magnitude(a, qb - e + __ldg(inner + int64_t(u) * team));
          sum += q * q;
          sum1 += q;
        }
      });
    } else {
      // The coarse magnitude as the scan's q, with 2^(kCoarseBits - E): ceil_scaled_by is
      // ceil_scaled_magnitude for results below 2^32 (coarse ones are at most 2^kCoarseBits);
      // where qb >= kCoarseBits, from q itself by coarse_from_scan (integer operations).
      const ScaleFactors f = scale_factors(qb - e), fc = scale_factors(kCoarseBits - e);
      const auto pass = [&](auto from_q) {
        const auto entry = [&](int u, double a) {
          const double m = fabs(a) <= DBL_MAX ? fabs(a) : 0.0;  // NaN and Inf: q = 0, no branch
          const uint32_t q = ceil_scaled_by(m, f);
          sum += uint64_t(q) * q;
          sum1 += q;
          if constexpr (kCoarse) {
            const uint32_t qc = decltype(from_q)::value ? coarse_from_scan(q, qb) : ceil_scaled_by(m, fc);
            cq[int64_t(u) * team] = static_cast<int8_t>(qc);
          }
        };
        if constexpr (kTeam == kLongTeam) {
          for_each_entry_reversed<kTeam>(x, n, entry);
        } else {
          for_each_entry<true, kTeam>(x, step, n, entry);
        }
      };
      if (!kCoarse || qb >= kCoarseBits) {
        pass(std::true_type{});
      } else {
        pass(std::false_type{});
      }
    }
    if (kCoarse && v < c.rows_pad) {  // the padding: entries k .. k_pad, or a whole padding vector
      for (int64_t l = (active ? xs.k : 0) + t; l < c.k_pad; l += team) c.out[v * c.k_pad + l] = 0;
    }
    sum = team_reduce(sum, team, s_u64, add_u64);
    if (o.abs_sum != nullptr) sum1 = team_reduce(sum1, team, s_u64, add_u64);
    if (active && t == 0) {
      if (o.fast_shift != nullptr) o.fast_shift[v] = fast_shift_value(sum, e, qb, o.pb);
      if (o.logq != nullptr) o.logq[v] = sum == 0 ? -1 : ceil_log2(sum);
      if (o.abs_sum != nullptr) o.abs_sum[v] = static_cast<int64_t>(sum1);
    }
  }
}

// The team for k entries: a power of two from 32 to `most`, about kTeamValues entries per
// thread.
inline int scan_team(int64_t k, int most) {
  int team = kWarp;
  while (team < most && int64_t(team) * kTeamValues < k) team *= 2;
  return team;
}

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
    int sh[kChunk];
    load_shifts(xs, l0, sh);
    uint32_t words[4];
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      uint32_t word = 0;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        // 2^(kCoarseBits - E) |x 2^s| = 2^(kCoarseBits - (E - s)) |x|; 0 for padding
        const uint32_t q = static_cast<uint8_t>(coarse_value(a[4 * w + b], e - sh[4 * w + b]));
        word |= q << (8 * b);
      }
      words[w] = word;
    }
    store_chunk(out + v * k_pad + l0, make_uint4(words[0], words[1], words[2], words[3]),
                vector_stores);
  }
}

// --- host launchers (stage_launch.cuh's checks, then the launch) ---------------------
inline int coarse(const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es,
                  const int32_t* inner, const int32_t* exps, int8_t* out, int64_t rows_pad, int64_t k_pad,
                  cudaStream_t stream, Message& err);

// scan_along_k_kernel<kInner, kCoarse, team> where es == 1 and no inner shifts, else <.., 0>.
template <bool kInner, bool kCoarse>
inline void launch_scan_team(const VectorSet& xs, const ScanOutputs& o, const CoarseOutput& c, int team,
                             int64_t blocks, cudaStream_t stream) {
  if constexpr (!kInner) {
    if (xs.es == 1) {
      switch (team) {
        case 32: scan_along_k_kernel<false, kCoarse, 32><<<blocks, kTeamThreads, 0, stream>>>(xs, o, c, team); return;
        case 64: scan_along_k_kernel<false, kCoarse, 64><<<blocks, kTeamThreads, 0, stream>>>(xs, o, c, team); return;
        case 128: scan_along_k_kernel<false, kCoarse, 128><<<blocks, kTeamThreads, 0, stream>>>(xs, o, c, team); return;
        case 256: scan_along_k_kernel<false, kCoarse, 256><<<blocks, kTeamThreads, 0, stream>>>(xs, o, c, team); return;
        case 512: scan_along_k_kernel<false, kCoarse, 512><<<blocks, kTeamThreads, 0, stream>>>(xs, o, c, team); return;
        default: break;
      }
    }
  }
  scan_along_k_kernel<kInner, kCoarse, 0><<<blocks, kTeamThreads, 0, stream>>>(xs, o, c, team);
}

template <bool kCoarse>
inline void launch_scan_along_k(const VectorSet& xs, const ScanOutputs& o, const CoarseOutput& c,
                                cudaStream_t stream) {
  const int64_t vectors = kCoarse && c.rows_pad > xs.nvec ? c.rows_pad : xs.nvec;
  if (xs.es == 1 && xs.inner == nullptr && scan_team(xs.k, kLongTeam) == kLongTeam) {
    const int64_t blocks = resident_blocks(scan_along_k_kernel<false, kCoarse, kLongTeam>, kLongTeam, vectors, 1);
    scan_along_k_kernel<false, kCoarse, kLongTeam><<<blocks, kLongTeam, 0, stream>>>(xs, o, c, kLongTeam);
    return;
  }
  const int team = scan_team(xs.k, kTeamThreads);
  const int64_t blocks = resident_blocks(scan_along_k_kernel<false, kCoarse, 0>, kTeamThreads, vectors,
                                         kTeamThreads / team);
  if constexpr (kCoarse) {  // without inner shifts only (with them the kernel spills)
    launch_scan_team<false, true>(xs, o, c, team, blocks, stream);
  } else if (xs.inner != nullptr) {
    launch_scan_team<true, kCoarse>(xs, o, c, team, blocks, stream);
  } else {
    launch_scan_team<false, kCoarse>(xs, o, c, team, blocks, stream);
  }
}

// The scan; with `coarse_out` (not null; scan_coarse below checks its sizes) also the coarse
// magnitudes of the scan's exponents, as `coarse` below writes them: from the scan's second
// pass where lanes run along k and there are no inner shifts, else by coarse_kernel after
// the scan.
inline int scan(const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es,
                const int32_t* inner, int pb, int32_t* exps, int32_t* fast_shift,
                int32_t* nonfinite_count, int32_t* logq, int64_t* abs_sum, const int32_t* given,
                cudaStream_t stream, Message& err, int8_t* coarse_out = nullptr, int64_t rows_pad = 0,
                int64_t k_pad = 0) {
  const char* what = coarse_out != nullptr ? "scan_coarse" : "scan";
  if (int s = check_vector_set(what, x, nvec, k, err)) return s;
  if (pb < 0 || pb > 4096) return err.set(kBadArgument, "%s: pb=%d out of range", what, pb);
  if (nvec > 0 && (exps == nullptr || nonfinite_count == nullptr)) {
    return err.set(kBadArgument, "%s: exps and nonfinite_count must not be null", what);
  }
  if (nvec == 0 && (coarse_out == nullptr || rows_pad == 0 || k_pad == 0)) return kOk;
  const VectorSet xs{x, nvec, k, vs, es, inner};
  const ScanOutputs o{pb, exps, fast_shift, nonfinite_count, logq, abs_sum, given};
  if (lanes_along_k(vs, es) && coarse_out != nullptr && k_pad > 0 && inner == nullptr) {
    launch_scan_along_k<true>(xs, o, CoarseOutput{coarse_out, rows_pad, k_pad}, stream);
    return check_launch(err, what);
  }
  if (nvec > 0) {
    if (lanes_along_k(vs, es)) {
      launch_scan_along_k<false>(xs, o, CoarseOutput{nullptr, 0, 0}, stream);
    } else {
      scan_kernel<<<blocks_for(nvec, kWarp), dim3(kWarp, kRowsPerBlock), 0, stream>>>(xs, o);
    }
    if (int s = check_launch(err, what)) return s;
  }
  // the coarse magnitudes by their own kernel (no vectors: the planes are padding only)
  if (coarse_out != nullptr) return coarse(x, nvec, k, vs, es, inner, exps, coarse_out, rows_pad, k_pad, stream, err);
  return kOk;
}

// P_scan_coarse: scan (no logq, abs_sum or given), then the coarse magnitudes of its
// exponents into out (rows_pad x k_pad, padding written), from one kernel where it can.
inline int scan_coarse(const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es, const int32_t* inner,
                       int pb, int32_t* exps, int32_t* fast_shift, int32_t* nonfinite_count, int8_t* out,
                       int64_t rows_pad, int64_t k_pad, cudaStream_t stream, Message& err) {
  const char* what = "scan_coarse";
  if (int s = check_vector_set(what, x, nvec, k, err)) return s;
  if (int s = check_padding(what, nvec, k, rows_pad, k_pad, 1, err)) return s;
  if (rows_pad > 0 && k_pad > 0 && out == nullptr) return err.set(kBadArgument, "%s: out is null", what);
  return scan(x, nvec, k, vs, es, inner, pb, exps, fast_shift, nonfinite_count, nullptr, nullptr, nullptr, stream,
              err, out, rows_pad, k_pad);
}

inline int coarse(const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es,
                  const int32_t* inner, const int32_t* exps, int8_t* out, int64_t rows_pad, int64_t k_pad,
                  cudaStream_t stream, Message& err) {
  const char* what = "coarse";
  if (int s = check_vector_set(what, x, nvec, k, err)) return s;
  if (int s = check_padding(what, nvec, k, rows_pad, k_pad, 1, err)) return s;
  if (nvec > 0 && exps == nullptr) return err.set(kBadArgument, "%s: exps is null", what);
  if (rows_pad > 0 && k_pad > 0 && out == nullptr)
    return err.set(kBadArgument, "%s: out is null", what);
  const VectorSet xs{x, nvec, k, vs, es, inner};
  const ChunkGrid grid = chunk_grid(xs, rows_pad, k_pad);
  if (grid.slots == 0) return kOk;
  const int64_t blocks = resident_blocks(coarse_kernel, kThreads, grid.slots, kThreads);
  coarse_kernel<<<blocks, kThreads, 0, stream>>>(xs, exps, out, k_pad, grid, aligned16(out));
  return check_launch(err, what);
}

}  // namespace stages
}  // namespace ozaki
