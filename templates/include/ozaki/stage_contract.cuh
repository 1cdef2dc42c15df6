// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The accuracy contract's stages (ozaki_cutlass/numerics/contract.py mirrors each one):
// P_inner_stats (per inner index: largest exponent E and a fixed-order sum of |x| 2^-E; per
// vector, from the same read, the scan's first pass),
// P_equilibrate (the inner shifts of both operands), P_certificate (the dozen sums the
// host's choice of the moduli count needs, in one fixed order) and P_fast_shifts (the fast
// shifts for the chosen count): kernels and host launchers. Every float operation is an
// explicit round-to-nearest intrinsic in a fixed order, so the bits match the NumPy mirror.

#pragma once

#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

#include "ozaki/constants.h"
#include "ozaki/inner_arith.h"
#include "ozaki/scaling.h"
#include "ozaki/stage_common.cuh"
#include "ozaki/stage_launch.cuh"

namespace ozaki {
namespace stages {

// --- inner stats: per run of kInnerChunk vectors its largest exponent R and the sum of
// |x| 2^-R in sequence (InnerRun, inner_arith.h); then per l the runs in sequence, each
// scaled by 2^(R - E_l) -------------------------------------------------------------
// One pass: each lane keeps an InnerRun. Work item b of the grid takes run b / slices
// and, in each of its 8 warps, chunks of 32 consecutive l (every slices * 8-th from its
// own); lane t of a warp takes l = 32 c + t over the run's vectors in sequence, loading
// kInnerBatch entries at a time, the next batch's loads issued before this batch's
// arithmetic (one load at a time, each waited for, the pass ran at 1.6-1.9 TB/s). With
// vector outputs (vec_exps not null) each warp also reduces, per vector, the largest frexp
// exponent over its 32 l (lane j keeps vector t0 + j's of each 32 and adds it to the
// block's shared maximum after them), and each NaN/Inf adds 1 to the block's shared count
// of its vector; the block then adds its maxima and counts to vec_exps and vec_nonfinite
// (set to kNoExponent and 0 by inner_init_kernel) with one atomic per vector:
// integer maxima and counts, so the order does not matter. That is the scan's first pass
// (no inner shifts), from the same read of x.
inline constexpr int kInnerWarps = kThreads / kWarp;
inline constexpr int kInnerBatch = 8;  // loads in flight per lane
static_assert(kInnerChunk % kWarp == 0 && kWarp % kInnerBatch == 0, "whole batches per 32 vectors");

__device__ __forceinline__ void inner_load(double (&batch)[kInnerBatch], const double* p, int64_t vs, int t,
                                           int entries) {
#pragma unroll
  for (int u = 0; u < kInnerBatch; ++u) batch[u] = t + u < entries ? __ldg(p + (t + u) * vs) : 0.0;
}

template <bool kVectors>
__device__ __forceinline__ InnerRun inner_lane(const double* p, int64_t vs, bool live, int count, int lane,
                                               int32_t* s_max, int32_t* s_bad) {
  InnerRun run;
  const int entries = live ? count : 0;
  double cur[kInnerBatch];
  inner_load(cur, p, vs, 0, entries);
  for (int t0 = 0; t0 < count; t0 += kWarp) {
    int32_t mine = kNoExponent;  // the largest exponent of vector t0 + lane
#pragma unroll
    for (int b = 0; b < kWarp; b += kInnerBatch) {
      double next[kInnerBatch];
      inner_load(next, p, vs, t0 + b + kInnerBatch, entries);
#pragma unroll
      for (int u = 0; u < kInnerBatch; ++u) {
        run.add(cur[u], kVectors ? s_bad + t0 + b + u : nullptr);
        if (kVectors) {
          const int vmax = __reduce_max_sync(0xffffffffu, run.e);
          if (lane == b + u) mine = vmax;
        }
        cur[u] = next[u];
      }
    }
    if (kVectors && mine != kNoExponent) atomicMax(s_max + t0 + lane, mine);
  }
  return run;
}

template <bool kVectors>
__global__ void __launch_bounds__(kThreads, 4)
inner_partials_kernel(VectorSet xs, int64_t runs, int64_t slices, double* partial, int32_t* partial_exp,
                      int32_t* exps, int32_t* vec_exps, int32_t* vec_nonfinite) {
  __shared__ int32_t s_max[kInnerChunk];
  __shared__ int32_t s_bad[kInnerChunk];
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const int warp = static_cast<int>(threadIdx.x / kWarp);
  const int64_t chunks = (xs.k + kWarp - 1) / kWarp;
  for (int64_t item = blockIdx.x; item < runs * slices; item += gridDim.x) {
    const int64_t run = item / slices;
    const int64_t v0 = run * kInnerChunk;
    const int64_t count = v0 + kInnerChunk < xs.nvec ? kInnerChunk : xs.nvec - v0;
    if (kVectors) {
      for (int t = threadIdx.x; t < kInnerChunk; t += kThreads) {
        s_max[t] = kNoExponent;
        s_bad[t] = 0;
      }
      __syncthreads();
    }
    for (int64_t c = (item - run * slices) * kInnerWarps + warp; c < chunks; c += slices * kInnerWarps) {
      const int64_t l = c * kWarp + lane;
      const bool live = l < xs.k;
      const InnerRun lane_run = inner_lane<kVectors>(xs.x + v0 * xs.vs + (live ? l : 0) * xs.es, xs.vs, live,
                                                     static_cast<int>(count), lane, s_max, s_bad);
      if (live) {
        partial[run * xs.k + l] = lane_run.sum;
        partial_exp[run * xs.k + l] = lane_run.top;
        if (lane_run.top != kNoExponent) atomicMax(exps + l, lane_run.top);  // E_l: the runs' largest
      }
    }
    if (kVectors) {
      __syncthreads();
      for (int t = threadIdx.x; t < count; t += kThreads) {
        if (s_max[t] != kNoExponent) atomicMax(vec_exps + v0 + t, s_max[t]);
        if (s_bad[t] != 0) atomicAdd(vec_nonfinite + v0 + t, s_bad[t]);
      }
      __syncthreads();  // the next item sets s_max and s_bad again
    }
  }
}

// Work items of inner_partials_kernel per run: enough for about kInnerItems in all (a few
// waves of the largest GPUs), but no more than give each warp a chunk; each item adds one
// global atomic per vector of its run (the per-warp atomics of an earlier version, m k / 32
// of them on m words, ran the pass at 0.9-1.5 TB/s on an H200).
inline constexpr int64_t kInnerItems = 2048;

inline int64_t inner_slices(int64_t runs, int64_t k) {
  const int64_t per_item = int64_t(kInnerWarps) * kWarp;  // l per item and pass
  const int64_t most = (k + per_item - 1) / per_item;
  const int64_t want = runs > 0 ? (kInnerItems + runs - 1) / runs : 1;
  const int64_t slices = want < most ? want : most;
  return slices > 0 ? slices : 1;
}

// Before the pass: each vector's outputs (nvec of them; 0 where there are none) and each
// l's largest exponent E_l, which the pass raises by atomics.
__global__ void __launch_bounds__(kThreads)
inner_init_kernel(int64_t nvec, int32_t* vec_exps, int32_t* vec_nonfinite, int64_t k, int32_t* exps) {
  const int64_t n = nvec > k ? nvec : k;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    if (i < nvec) {
      vec_exps[i] = kNoExponent;
      vec_nonfinite[i] = 0;
    }
    if (i < k) exps[i] = kNoExponent;
  }
}

// Per l, its runs' sums in run order, each scaled from its run's top to E_l; two kernels,
// the same adds in the same order. Few l (k < kCombineLanesFrom): a block takes 32
// consecutive l and the runs kCombineRuns at a time: its 8 warps load them into shared
// memory, every load of a warp at once (one thread per l loading its runs itself left a
// few warps each waiting on a chain of DRAM round trips), and warp 0 adds them in order.
// Many l: one thread per l loads its own runs kCombineBatch at a time (there the block
// per 32 l, 7 of its 8 warps idle while warp 0 adds, took twice as long: 45 against 24 us
// for both operands at 4096 x 4096 x 65536, ncu, H200, 2026-12-04).
inline constexpr int kCombineBatch = 16;

__global__ void __launch_bounds__(kThreads)
inner_combine_lanes_kernel(int64_t runs, int64_t k, const double* partial, const int32_t* partial_exp,
                           const int32_t* exps, double* sums) {
  for (int64_t l = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; l < k;
       l += int64_t(gridDim.x) * blockDim.x) {
    const int32_t top = exps[l];
    double sum = 0.0;
    for (int64_t r0 = 0; r0 < runs; r0 += kCombineBatch) {
      double p[kCombineBatch];
      int32_t e[kCombineBatch];
#pragma unroll
      for (int u = 0; u < kCombineBatch; ++u) {
        const bool in = r0 + u < runs;
        p[u] = in ? __ldg(partial + (r0 + u) * k + l) : 0.0;
        e[u] = in ? __ldg(partial_exp + (r0 + u) * k + l) : kNoExponent;
      }
#pragma unroll
      for (int u = 0; u < kCombineBatch; ++u) sum = inner_combine_add(sum, p[u], e[u], top);
    }
    sums[l] = sum;
  }
}

inline constexpr int kCombineRuns = 64;
inline constexpr int kCombineLoads = kCombineRuns / kInnerWarps;  // per lane and chunk
static_assert(kCombineRuns % kInnerWarps == 0, "whole loads per warp");

__global__ void __launch_bounds__(kThreads)
inner_combine_kernel(int64_t runs, int64_t k, const double* partial, const int32_t* partial_exp,
                     const int32_t* exps, double* sums) {
  __shared__ double s_term[kCombineRuns][kWarp];
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const int warp = static_cast<int>(threadIdx.x / kWarp);
  for (int64_t l0 = blockIdx.x * int64_t(kWarp); l0 < k; l0 += int64_t(gridDim.x) * kWarp) {
    const int64_t l = l0 + lane;
    const bool live = l < k;
    const int32_t top = live ? exps[l] : kNoExponent;
    double sum = 0.0;
    for (int64_t r0 = 0; r0 < runs; r0 += kCombineRuns) {
      const int chunk = static_cast<int>(runs - r0 < kCombineRuns ? runs - r0 : kCombineRuns);
      double p[kCombineLoads];
      int32_t e[kCombineLoads];
#pragma unroll
      for (int j = 0; j < kCombineLoads; ++j) {
        const int r = warp + j * kInnerWarps;
        const bool in = live && r < chunk;
        p[j] = in ? __ldg(partial + (r0 + r) * k + l) : 0.0;
        e[j] = in ? __ldg(partial_exp + (r0 + r) * k + l) : kNoExponent;
      }
      // Each warp scales its runs' sums to E_l (an added 0 leaves the sum, >= 0, as it is:
      // the same as inner_combine_add's skip); warp 0 then only adds, in run order.
#pragma unroll
      for (int j = 0; j < kCombineLoads; ++j) {
        const int r = warp + j * kInnerWarps;
        if (r < chunk) s_term[r][lane] = inner_combine_add(0.0, p[j], e[j], top);
      }
      __syncthreads();
      if (warp == 0 && live) {
#pragma unroll 8
        for (int r = 0; r < chunk; ++r) sum = add_rn(sum, s_term[r][lane]);
      }
      __syncthreads();  // the next chunk overwrites them
    }
    if (warp == 0 && live) sums[l] = sum;
  }
}

// --- equilibrate: e_l = floor((Ea_l - Eb_l) / 2), applied when it spreads enough ------
// This kernel and the certificate's are one block each: their cost is the latency of
// their loads, so each lane issues kLatencyBatch of them at once (one at a time, at
// k = 65536 the two took 0.33 ms: 2026-12-04) and then uses them in its own order.
inline constexpr int kLatencyBatch = 8;

__device__ inline int32_t inner_exponent(int32_t ea, int32_t eb) {
  return ea == kNoExponent || eb == kNoExponent ? 0 : static_cast<int32_t>(floor_div(int64_t(ea) - eb, 2));
}

__global__ void __launch_bounds__(kReduceLanes)
equilibrate_kernel(const int32_t* ea, const int32_t* eb, int64_t k, int32_t* shift_a,
                   int32_t* shift_b, int32_t* applied) {
  __shared__ int32_t s_lo[kReduceLanes];
  __shared__ int32_t s_hi[kReduceLanes];
  constexpr int64_t kStep = int64_t(kLatencyBatch) * kReduceLanes;
  int32_t lo = INT32_MAX, hi = INT32_MIN;  // over no l: no spread
  for (int64_t l0 = threadIdx.x; l0 < k; l0 += kStep) {
    int32_t a[kLatencyBatch], b[kLatencyBatch];
#pragma unroll
    for (int u = 0; u < kLatencyBatch; ++u) {
      const int64_t l = l0 + int64_t(u) * kReduceLanes;
      a[u] = l < k ? __ldg(ea + l) : kNoExponent;
      b[u] = l < k ? __ldg(eb + l) : kNoExponent;
    }
#pragma unroll
    for (int u = 0; u < kLatencyBatch; ++u) {
      if (l0 + int64_t(u) * kReduceLanes >= k) break;
      const int32_t e = inner_exponent(a[u], b[u]);
      lo = e < lo ? e : lo;
      hi = e > hi ? e : hi;
    }
  }
  s_lo[threadIdx.x] = lo;
  s_hi[threadIdx.x] = hi;
  __syncthreads();
  for (int half = kReduceLanes / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      s_lo[threadIdx.x] = s_lo[threadIdx.x + half] < s_lo[threadIdx.x] ? s_lo[threadIdx.x + half] : s_lo[threadIdx.x];
      s_hi[threadIdx.x] = s_hi[threadIdx.x + half] > s_hi[threadIdx.x] ? s_hi[threadIdx.x + half] : s_hi[threadIdx.x];
    }
    __syncthreads();
  }
  const bool apply = int64_t(s_hi[0]) - s_lo[0] >= kEquilibrationSpread;
  for (int64_t l0 = threadIdx.x; l0 < k; l0 += kStep) {
    int32_t e[kLatencyBatch];
#pragma unroll
    for (int u = 0; u < kLatencyBatch; ++u) {  // not applied: zeros, nothing read
      const int64_t l = l0 + int64_t(u) * kReduceLanes;
      e[u] = apply && l < k ? inner_exponent(__ldg(ea + l), __ldg(eb + l)) : 0;
    }
#pragma unroll
    for (int u = 0; u < kLatencyBatch; ++u) {
      const int64_t l = l0 + int64_t(u) * kReduceLanes;
      if (l < k) {
        shift_a[l] = -e[u];
        shift_b[l] = e[u];
      }
    }
  }
  if (threadIdx.x == 0) applied[0] = apply ? 1 : 0;
}

// --- certificate: the sums of numerics.contract.certificate, in its fixed order ------
struct CertificateSide {
  const int32_t* exps;
  const int32_t* logq;
  const int64_t* s1;
  int64_t nvec;
};

// x 2^e, or 0 below 2^kFlushExponent (x >= 1/4: never subnormal, the scaling is exact).
__device__ inline double scaled_term(double x, int64_t e) {
  if (e < kFlushExponent) return 0.0;
  const uint64_t bits = double_bits(x);
  if ((bits >> 52) != 0 && e <= 900) {  // x >= 1/4 normal, the result normal and finite
    return __longlong_as_double(static_cast<long long>(bits + (static_cast<uint64_t>(e) << 52)));
  }
  return ldexp(x, static_cast<int>(e));
}

// Lanes' partials (s[lane]) added pairwise: t + h into t, h = kReduceLanes/2 .. 1.
__device__ inline double lane_tree(double* s) {
  __syncthreads();
  for (int half = kReduceLanes / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) s[threadIdx.x] = __dadd_rn(s[threadIdx.x], s[threadIdx.x + half]);
    __syncthreads();
  }
  const double total = s[0];
  __syncthreads();
  return total;
}

__device__ inline int32_t side_top(const CertificateSide& c, int32_t* s_top) {
  int32_t top = kNoExponent;
  constexpr int64_t kStep = int64_t(kLatencyBatch) * kReduceLanes;
  for (int64_t i0 = threadIdx.x; i0 < c.nvec; i0 += kStep) {
    int32_t lq[kLatencyBatch], ex[kLatencyBatch];
#pragma unroll
    for (int u = 0; u < kLatencyBatch; ++u) {
      const int64_t i = i0 + int64_t(u) * kReduceLanes;
      lq[u] = i < c.nvec ? __ldg(c.logq + i) : -1;
      ex[u] = i < c.nvec ? __ldg(c.exps + i) : kNoExponent;
    }
#pragma unroll
    for (int u = 0; u < kLatencyBatch; ++u) {
      if (lq[u] >= 0 && ex[u] > top) top = ex[u];
    }
  }
  s_top[threadIdx.x] = top;
  __syncthreads();
  for (int half = kReduceLanes / 2; half > 0; half /= 2) {
    if (threadIdx.x < half && s_top[threadIdx.x + half] > s_top[threadIdx.x]) s_top[threadIdx.x] = s_top[threadIdx.x + half];
    __syncthreads();
  }
  const int32_t t = s_top[0] == kNoExponent ? 0 : s_top[0];
  __syncthreads();
  return t;
}

// out[0..4] (or out[5..9]): the x2[0], x2[1], xz[0], xz[1], z2 sums of one side.
__device__ inline void side_sums(const CertificateSide& c, int32_t top, int qb, double* s, double* out) {
  double acc[5] = {0.0, 0.0, 0.0, 0.0, 0.0};
  constexpr int64_t kStep = int64_t(kLatencyBatch) * kReduceLanes;
  for (int64_t i0 = threadIdx.x; i0 < c.nvec; i0 += kStep) {
    int32_t lqs[kLatencyBatch], ex[kLatencyBatch];
    int64_t s1s[kLatencyBatch];
#pragma unroll
    for (int u = 0; u < kLatencyBatch; ++u) {
      const int64_t i = i0 + int64_t(u) * kReduceLanes;
      const bool in = i < c.nvec;
      lqs[u] = in ? __ldg(c.logq + i) : -1;
      ex[u] = in ? __ldg(c.exps + i) : 0;
      s1s[u] = in ? __ldg(reinterpret_cast<const long long*>(c.s1) + i) : 0;
    }
#pragma unroll
    for (int u = 0; u < kLatencyBatch; ++u) {
      const int32_t lq = lqs[u];
      if (lq < 0) continue;
      const int64_t d = static_cast<int64_t>(ex[u]) - top - qb;
      const int64_t h = lq >> 1;
      const int p = lq & 1;
      const double s1 = static_cast<double>(s1s[u]);
      acc[p] = __dadd_rn(acc[p], scaled_term(1.0, 2 * (h + d)));
      acc[2 + p] = __dadd_rn(acc[2 + p], scaled_term(s1, h + 2 * d));
      acc[4] = __dadd_rn(acc[4], scaled_term(__dmul_rn(s1, s1), 2 * d));
    }
  }
  for (int q = 0; q < 5; ++q) {
    s[threadIdx.x] = acc[q];
    const double total = lane_tree(s);
    if (threadIdx.x == 0) out[q] = total;
  }
}

__global__ void __launch_bounds__(kReduceLanes)
certificate_kernel(CertificateSide a, CertificateSide b, const int32_t* inner_exp_a, const double* inner_a,
                   const int32_t* inner_exp_b, const double* inner_b, int64_t k, int qb,
                   const int32_t* applied, double* out) {
  __shared__ double s[kReduceLanes];
  __shared__ int32_t s_top[kReduceLanes];
  const int32_t ra = side_top(a, s_top);
  const int32_t rb = side_top(b, s_top);
  side_sums(a, ra, qb, s, out);
  side_sums(b, rb, qb, s, out + 5);
  double acc = 0.0;
  constexpr int64_t kStep = int64_t(kLatencyBatch) * kReduceLanes;
  for (int64_t l0 = threadIdx.x; l0 < k; l0 += kStep) {
    double va[kLatencyBatch], vb[kLatencyBatch];
    int32_t xa[kLatencyBatch], xb[kLatencyBatch];
#pragma unroll
    for (int u = 0; u < kLatencyBatch; ++u) {
      const int64_t l = l0 + int64_t(u) * kReduceLanes;
      const bool in = l < k;
      va[u] = in ? __ldg(inner_a + l) : 0.0;
      vb[u] = in ? __ldg(inner_b + l) : 0.0;
      xa[u] = in ? __ldg(inner_exp_a + l) : 0;
      xb[u] = in ? __ldg(inner_exp_b + l) : 0;
    }
#pragma unroll
    for (int u = 0; u < kLatencyBatch; ++u) {
      if (!(va[u] > 0.0 && vb[u] > 0.0)) continue;
      int ea, eb;
      const double fa = frexp(va[u], &ea);
      const double fb = frexp(vb[u], &eb);
      acc = __dadd_rn(acc, scaled_term(__dmul_rn(fa, fb), static_cast<int64_t>(ea) + eb + xa[u] + xb[u] - ra - rb));
    }
  }
  s[threadIdx.x] = acc;
  const double l1 = lane_tree(s);
  if (threadIdx.x == 0) {
    out[10] = l1;
    out[11] = applied != nullptr && applied[0] != 0 ? 1.0 : 0.0;
    out[12] = static_cast<double>(ra);  // RA and RB: Certificate.may_overflow
    out[13] = static_cast<double>(rb);
  }
}

// --- fast shifts of the chosen count -------------------------------------------------
__global__ void __launch_bounds__(kThreads)
fast_shifts_kernel(const int32_t* exps, const int32_t* logq, int64_t nvec, int qb, int pb,
                   int32_t* shifts) {
  for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < nvec;
       v += int64_t(gridDim.x) * blockDim.x) {
    shifts[v] = logq[v] < 0 ? 0 : static_cast<int32_t>(floor_div(static_cast<int64_t>(pb) - logq[v], 2) - exps[v] + qb);
  }
}

// --- host launchers ------------------------------------------------------------------
inline int64_t inner_runs(int64_t nvec) { return (nvec + kInnerChunk - 1) / kInnerChunk; }

inline int inner_stats(const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es,
                       double* partial, int32_t* partial_exp, int32_t* exps, double* sums,
                       int32_t* vec_exps, int32_t* vec_nonfinite, cudaStream_t stream, Message& err) {
  const char* what = "inner_stats";
  if (int s = check_vector_set(what, x, nvec, k, err)) return s;
  const int64_t runs = inner_runs(nvec);
  if (!product_fits(runs, k)) return err.set(kBadArgument, "%s: size overflows", what);
  if ((vec_exps == nullptr) != (vec_nonfinite == nullptr))
    return err.set(kBadArgument, "%s: vec_exps and vec_nonfinite must be both null or both set", what);
  if (k > 0 && (exps == nullptr || sums == nullptr || (nvec > 0 && (partial == nullptr || partial_exp == nullptr))))
    return err.set(kBadArgument, "%s: null pointer", what);
  const int64_t vectors = vec_exps != nullptr ? nvec : 0;  // k == 0 too: the vectors' values are written
  if (vectors > 0 || k > 0) {
    inner_init_kernel<<<blocks_for(vectors > k ? vectors : k, kThreads), kThreads, 0, stream>>>(
        vectors, vec_exps, vec_nonfinite, k, exps);
    if (int s = check_launch(err, what)) return s;
  }
  if (k == 0) return kOk;
  if (runs > 0) {
    const VectorSet xs{x, nvec, k, vs, es};
    const int64_t slices = inner_slices(runs, k);
    if (vec_exps != nullptr) {
      inner_partials_kernel<true><<<blocks_for(runs * slices, 1), kThreads, 0, stream>>>(
          xs, runs, slices, partial, partial_exp, exps, vec_exps, vec_nonfinite);
    } else {
      inner_partials_kernel<false><<<blocks_for(runs * slices, 1), kThreads, 0, stream>>>(
          xs, runs, slices, partial, partial_exp, exps, nullptr, nullptr);
    }
    if (int s = check_launch(err, what)) return s;
  }
  if (k < kCombineLanesFrom) {
    inner_combine_kernel<<<blocks_for(k, kWarp), kThreads, 0, stream>>>(runs, k, partial, partial_exp, exps,
                                                                        sums);
  } else {
    inner_combine_lanes_kernel<<<blocks_for(k, kThreads), kThreads, 0, stream>>>(runs, k, partial, partial_exp,
                                                                                 exps, sums);
  }
  return check_launch(err, what);
}

inline int equilibrate(const int32_t* exps_a, const int32_t* exps_b, int64_t k, int32_t* shift_a,
                       int32_t* shift_b, int32_t* applied, cudaStream_t stream, Message& err) {
  const char* what = "equilibrate";
  if (k < 0) return err.set(kBadArgument, "%s: k=%lld < 0", what, static_cast<long long>(k));
  if (applied == nullptr || (k > 0 && (exps_a == nullptr || exps_b == nullptr || shift_a == nullptr ||
                                       shift_b == nullptr)))
    return err.set(kBadArgument, "%s: null pointer", what);
  equilibrate_kernel<<<1, kReduceLanes, 0, stream>>>(exps_a, exps_b, k, shift_a, shift_b, applied);
  return check_launch(err, what);
}

inline int certificate(const int32_t* exps_a, const int32_t* logq_a, const int64_t* s1_a, int64_t m,
                       const int32_t* exps_b, const int32_t* logq_b, const int64_t* s1_b, int64_t n,
                       const int32_t* inner_exp_a, const double* inner_a, const int32_t* inner_exp_b,
                       const double* inner_b, int64_t k, const int32_t* applied, double* out,
                       cudaStream_t stream, Message& err) {
  const char* what = "certificate";
  if (m < 0 || n < 0 || k < 0) return err.set(kBadArgument, "%s: negative size", what);
  if (out == nullptr || (m > 0 && (exps_a == nullptr || logq_a == nullptr || s1_a == nullptr)) ||
      (n > 0 && (exps_b == nullptr || logq_b == nullptr || s1_b == nullptr)) ||
      (k > 0 && (inner_a == nullptr || inner_b == nullptr || inner_exp_a == nullptr || inner_exp_b == nullptr)))
    return err.set(kBadArgument, "%s: null pointer", what);
  certificate_kernel<<<1, kReduceLanes, 0, stream>>>(CertificateSide{exps_a, logq_a, s1_a, m},
                                                     CertificateSide{exps_b, logq_b, s1_b, n}, inner_exp_a,
                                                     inner_a, inner_exp_b, inner_b, k, fast_bound_bits(k),
                                                     applied, out);
  return check_launch(err, what);
}

inline int fast_shifts(const int32_t* exps, const int32_t* logq, int64_t nvec, int64_t k, int pb,
                       int32_t* shifts, cudaStream_t stream, Message& err) {
  const char* what = "fast_shifts";
  if (nvec < 0) return err.set(kBadArgument, "%s: nvec < 0", what);
  if (pb < 0 || pb > 4096) return err.set(kBadArgument, "%s: pb=%d out of range", what, pb);
  if (nvec == 0) return kOk;
  if (exps == nullptr || logq == nullptr || shifts == nullptr)
    return err.set(kBadArgument, "%s: null pointer", what);
  fast_shifts_kernel<<<blocks_for(nvec, kThreads), kThreads, 0, stream>>>(exps, logq, nvec,
                                                                         fast_bound_bits(k), pb, shifts);
  return check_launch(err, what);
}

}  // namespace stages
}  // namespace ozaki
