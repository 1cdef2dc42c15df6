// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// Accurate mode's passes over the coarse bound G (the coarse GEMM's output):
// P_accumulate_i64 (G summed over k chunks) and P_accurate_shifts: one read of G where an
// int32 G's rows fit a block's registers (1024 <= n <= 16384, 16-byte rows), else a row
// pass and a column pass; then the column gains. Kernels and host launchers.

#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <mutex>
#include <type_traits>
#include <vector>

#include <cooperative_groups.h>  // the one-launch form's grid-wide barrier
#include <cuda_runtime.h>

#include "ozaki/constants.h"
#include "ozaki/scaling.h"
#include "ozaki/stage_common.cuh"
#include "ozaki/stage_launch.cuh"

namespace ozaki {
namespace stages {

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
// work: m + n int32, the row keys after the row gains (row_key - d_i) and the column minima.
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
  int32_t* row_key;  // work[0, m)
  int32_t* col_min;  // work[m, m + n)
};

// Both passes read g by keys (scaling.h): s_ij = row_key_i + column_key_j - ceil_log2(g_ij),
// in int32, kShiftLoads loads of g in flight per thread. The minima do not depend on the
// order (atomicMin included), so the bits are reference.accurate_shifts'.
inline constexpr int kShiftLoads = 8;

// best = min(best, key - ceil_log2(g)) over the entries with g > 0.
template <class G>
__device__ inline void keep_min_slack(int32_t& best, int32_t key, G g) {
  const int32_t s = key - ceil_log2_bound(g);
  if (g > 0 && s < best) best = s;
}

// The warp's row minimum, then d_i and mu_i, and the row key less d_i (lane 0 writes).
template <class G>
__device__ inline void finish_row(const ShiftArgs<G>& a, int64_t i, int lane, int32_t best) {
  best = __reduce_min_sync(0xffffffffu, best);
  if (lane == 0) {
    const int32_t ea = a.exps_a[i];
    const int32_t mf = a.mu_fast[i];
    const int32_t key = slack_row_key(ea, mf, a.pb);
    const int64_t d = row_gain(slack_total(key, best), ea, mf, a.pb);
    a.mu[i] = static_cast<int32_t>(mf + d);
    a.row_key[i] = static_cast<int32_t>(key - d);
  }
}

// Row pass: one warp per row, min_j (column_key_j - L_ij), then d_i and mu_i; the row key
// less d_i for the column pass. Its threads also set the column minima to kNoSlack.
template <class G>
__global__ void __launch_bounds__(kThreads)
accurate_rows_kernel(ShiftArgs<G> a) {
  for (int64_t j = blockIdx.x * int64_t(kThreads) + threadIdx.x; j < a.n; j += int64_t(gridDim.x) * kThreads) {
    a.col_min[j] = kNoSlack;
  }
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = int64_t(gridDim.x) * (kThreads / kWarp);
  for (int64_t i = blockIdx.x * int64_t(kThreads / kWarp) + threadIdx.x / kWarp; i < a.m; i += warps) {
    const G* row = a.g + i * a.ldg;
    int32_t best = kNoSlack;
    for (int64_t j0 = lane; j0 < a.n; j0 += kWarp * kShiftLoads) {
      G gv[kShiftLoads];
      int32_t key[kShiftLoads];
#pragma unroll
      for (int u = 0; u < kShiftLoads; ++u) {
        const int64_t j = j0 + u * kWarp;
        const bool in = j < a.n;
        gv[u] = in ? row[j] : G(0);
        key[u] = in ? slack_column_key(__ldg(a.exps_b + j), __ldg(a.nu_fast + j)) : 0;
      }
#pragma unroll
      for (int u = 0; u < kShiftLoads; ++u) keep_min_slack(best, key[u], gv[u]);
    }
    finish_row(a, i, lane, best);
  }
}

// Column pass: blocks of (32, 8) threads take 32 columns (coalesced reads of g) and a
// slice of rows_per_slice rows, the 8 warps interleaved; min_i (row_key_i - d_i - L_ij)
// per column and slice, then one atomicMin per column into the column minima. Slicing
// the rows fills the GPU where n is small (n = 1024: 32 column groups).
template <class G>
__global__ void __launch_bounds__(kThreads)
accurate_columns_kernel(ShiftArgs<G> a, int64_t rows_per_slice) {
  __shared__ int32_t s_min[kRowsPerBlock][kWarp];
  const int64_t groups = (a.n + kWarp - 1) / kWarp;
  const int64_t items = groups * ((a.m + rows_per_slice - 1) / rows_per_slice);
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t j = (item % groups) * kWarp + threadIdx.x;
    const int64_t r0 = (item / groups) * rows_per_slice;
    const int64_t r1 = r0 + rows_per_slice < a.m ? r0 + rows_per_slice : a.m;
    int32_t best = kNoSlack;
    if (j < a.n) {
      for (int64_t i0 = r0 + threadIdx.y; i0 < r1; i0 += kRowsPerBlock * kShiftLoads) {
        G gv[kShiftLoads];
        int32_t key[kShiftLoads];
#pragma unroll
        for (int u = 0; u < kShiftLoads; ++u) {
          const int64_t i = i0 + u * kRowsPerBlock;
          const bool in = i < r1;
          gv[u] = in ? __ldcs(a.g + i * a.ldg + j) : G(0);  // the bound's last use
          key[u] = in ? a.row_key[i] : 0;
        }
#pragma unroll
        for (int u = 0; u < kShiftLoads; ++u) keep_min_slack(best, key[u], gv[u]);
      }
    }
    s_min[threadIdx.y][threadIdx.x] = best;
    __syncthreads();
    if (threadIdx.y == 0 && j < a.n) {
      for (int p = 1; p < kRowsPerBlock; ++p) best = s_min[p][threadIdx.x] < best ? s_min[p][threadIdx.x] : best;
      if (best != kNoSlack) atomicMin(a.col_min + j, best);
    }
    __syncthreads();
  }
}

// --- 16-byte loads: an int32 bound whose rows are 16-byte aligned (g and ldg), n % 4 == 0,
// exps_b and nu_fast aligned: four columns per load, kShiftVecLoads loads in flight per
// thread (16 bytes each, against 4 of the kernels above). The same minima, so the same bits.
inline constexpr int kShiftVecLoads = 4;

__global__ void __launch_bounds__(kThreads)
accurate_rows_vec_kernel(ShiftArgs<int32_t> a) {
  for (int64_t j = blockIdx.x * int64_t(kThreads) + threadIdx.x; j < a.n; j += int64_t(gridDim.x) * kThreads) {
    a.col_min[j] = kNoSlack;
  }
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = int64_t(gridDim.x) * (kThreads / kWarp);
  const int64_t n4 = a.n / 4;
  const int4* eb = reinterpret_cast<const int4*>(a.exps_b);
  const int4* nf = reinterpret_cast<const int4*>(a.nu_fast);
  for (int64_t i = blockIdx.x * int64_t(kThreads / kWarp) + threadIdx.x / kWarp; i < a.m; i += warps) {
    const int4* row = reinterpret_cast<const int4*>(a.g + i * a.ldg);
    int32_t best = kNoSlack;
    for (int64_t j0 = lane; j0 < n4; j0 += kWarp * kShiftVecLoads) {
      int4 gv[kShiftVecLoads];
#pragma unroll
      for (int u = 0; u < kShiftVecLoads; ++u) {
        const int64_t j = j0 + u * kWarp;
        gv[u] = j < n4 ? row[j] : make_int4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kShiftVecLoads; ++u) {
        const int64_t j = j0 + u * kWarp;
        if (j < n4) {
          const int4 e = __ldg(eb + j), f = __ldg(nf + j);
          keep_min_slack(best, slack_column_key(e.x, f.x), gv[u].x);
          keep_min_slack(best, slack_column_key(e.y, f.y), gv[u].y);
          keep_min_slack(best, slack_column_key(e.z, f.z), gv[u].z);
          keep_min_slack(best, slack_column_key(e.w, f.w), gv[u].w);
        }
      }
    }
    finish_row(a, i, lane, best);
  }
}

// Column pass, as accurate_columns_kernel with four columns per thread: a block takes
// 4 x 32 columns and a slice of rows.
__global__ void __launch_bounds__(kThreads)
accurate_columns_vec_kernel(ShiftArgs<int32_t> a, int64_t rows_per_slice) {
  __shared__ int4 s_min[kRowsPerBlock][kWarp];
  const int64_t n4 = a.n / 4;
  const int64_t groups = (n4 + kWarp - 1) / kWarp;
  const int64_t items = groups * ((a.m + rows_per_slice - 1) / rows_per_slice);
  const int4* g4 = reinterpret_cast<const int4*>(a.g);
  const int64_t ld4 = a.ldg / 4;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t j = (item % groups) * kWarp + threadIdx.x;  // columns 4j .. 4j + 3
    const int64_t r0 = (item / groups) * rows_per_slice;
    const int64_t r1 = r0 + rows_per_slice < a.m ? r0 + rows_per_slice : a.m;
    int32_t best[4] = {kNoSlack, kNoSlack, kNoSlack, kNoSlack};
    if (j < n4) {
      for (int64_t i0 = r0 + threadIdx.y; i0 < r1; i0 += kRowsPerBlock * kShiftVecLoads) {
        int4 gv[kShiftVecLoads];
        int32_t key[kShiftVecLoads];
#pragma unroll
        for (int u = 0; u < kShiftVecLoads; ++u) {
          const int64_t i = i0 + u * kRowsPerBlock;
          const bool in = i < r1;
          gv[u] = in ? __ldcs(g4 + i * ld4 + j) : make_int4(0, 0, 0, 0);  // the bound's last use
          key[u] = in ? a.row_key[i] : 0;
        }
#pragma unroll
        for (int u = 0; u < kShiftVecLoads; ++u) {
          keep_min_slack(best[0], key[u], gv[u].x);
          keep_min_slack(best[1], key[u], gv[u].y);
          keep_min_slack(best[2], key[u], gv[u].z);
          keep_min_slack(best[3], key[u], gv[u].w);
        }
      }
    }
    s_min[threadIdx.y][threadIdx.x] = make_int4(best[0], best[1], best[2], best[3]);
    __syncthreads();
    if (threadIdx.y == 0 && j < n4) {
      for (int p = 1; p < kRowsPerBlock; ++p) {
        const int4 o = s_min[p][threadIdx.x];
        best[0] = o.x < best[0] ? o.x : best[0];
        best[1] = o.y < best[1] ? o.y : best[1];
        best[2] = o.z < best[2] ? o.z : best[2];
        best[3] = o.w < best[3] ? o.w : best[3];
      }
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        if (best[c] != kNoSlack) atomicMin(a.col_min + 4 * j + c, best[c]);
      }
    }
    __syncthreads();
  }
}

// nu_j = nu_fast_j + g_j from the column minimum (column_key_j added back), given column
// j's exponent eb and fast shift nf.
template <class G>
__device__ inline void finish_column(const ShiftArgs<G>& a, int64_t j, int32_t best, int32_t eb, int32_t nf) {
  const int64_t col_min = slack_total(slack_column_key(eb, nf), best);
  a.nu[j] = static_cast<int32_t>(nf + column_gain(col_min, eb, nf, a.pb));
}

template <class G>
__device__ inline void finish_column(const ShiftArgs<G>& a, int64_t j, int32_t best) {
  finish_column(a, j, best, a.exps_b[j], a.nu_fast[j]);
}

template <class G>
__global__ void __launch_bounds__(kThreads)
accurate_columns_finish_kernel(ShiftArgs<G> a) {
  for (int64_t j = blockIdx.x * int64_t(kThreads) + threadIdx.x; j < a.n; j += int64_t(gridDim.x) * kThreads) {
    finish_column(a, j, a.col_min[j]);
  }
}

// --- one read of the bound: an int32 bound with 16-byte rows (g 16-byte aligned, ldg % 4
// == 0; n need not be a multiple of 4: the columns past n in a row's last 16 bytes count
// as absent, never as entries) and kOneReadMinColumns <= n <= kOneReadMaxColumns. A block
// of T threads takes R rows at a time; thread t holds the four columns of vectors t,
// t + T, ..., t + (V - 1) T of each, and their running column minima in its registers (the
// column keys in shared memory).
// Per row group: each row's minimum (warp, then block through shared memory), d_i and
// mu_i, then the column minima updated from the same registers, while the next group's
// loads are in flight. Each block ends with one row of partial column minima
// (partial[blockIdx.x * n4 * 4 + j], n4 = ceil(n / 4)); the column gains take the minimum
// of those. The same minima, so the same bits as the two passes. Each entry costs one
// bound_log2_less_one and, per minimum it enters, one subtraction and one min (absent
// entries by kAbsentLog2, scaling.h): the column keys in shared memory and the row keys
// carry its -1, so every slack is exact; present_or_none reads a minimum back, and d_i is
// int32 (row_gain_keys). T = 256 asks for two blocks per SM (at most 128 registers).
// In the one-launch form (kFinish) with at most kPrefetchMaxRounds groups per block: while
// group g is reduced and group g + B's loads are in flight (B blocks), the rows of group
// g + 2B are fetched into the L2 (prefetch_row_l2), so that each SM has more of the bound
// on its way than the registers of its blocks hold (docs/stages/shifts.md: on an H100 6 %
// faster at 16 groups per block, 13 % at 8; 3 % slower at 62, and 4-9 % in the two-launch
// form at n = 8192 and 16384, where it is not taken).

// Column j's gain from `parts` rows of partial column minima (rows ceil(n / 4) * 4 apart), by
// a slice of kCols columns x kGroups row groups: thread (c, g) takes rows g, g + kGroups, ..
// of its column, then group 0 takes the minimum over the groups (s_min: kGroups x kCols)
// and finishes. kL2: the partials were written in this launch by other SMs (__ldcg), else
// they are read once (__ldcs). Every thread of the slice calls it (a block barrier).
template <int kCols, int kGroups, bool kL2>
__device__ inline void finish_slice(const ShiftArgs<int32_t>& a, const int32_t* partial, int parts, int64_t j,
                                    bool live, int c, int g, int32_t* s_min) {
  const int64_t stride = (a.n + 3) / 4 * 4;
  int32_t best = kNoSlack;
  int32_t eb = 0, nf = 0;
  if (live) {
    if (g == 0) {  // loaded with the partials, not after them
      eb = __ldg(a.exps_b + j);
      nf = __ldg(a.nu_fast + j);
    }
#pragma unroll 8
    for (int p = g; p < parts; p += kGroups) {
      const int32_t v = kL2 ? __ldcg(partial + p * stride + j) : __ldcs(partial + p * stride + j);
      best = v < best ? v : best;
    }
  }
  s_min[g * kCols + c] = best;
  __syncthreads();
  if (g == 0 && live) {
#pragma unroll
    for (int h = 1; h < kGroups; ++h) best = s_min[h * kCols + c] < best ? s_min[h * kCols + c] : best;
    finish_column(a, j, present_or_none(best), eb, nf);
  }
}

inline constexpr int64_t kPrefetchMaxRounds = 32;

inline constexpr int64_t kOneReadMinColumns = 1024;
inline constexpr int64_t kOneReadMaxColumns = 16384;

// The one-launch form (kFinish, a cooperative launch): once every block wrote its partial
// row (a grid-wide barrier), block b finishes columns [b C, b C + C), C = ceil(n / blocks)
// rounded up to kFinishColumns, with T / kFinishColumns row groups per column; the
// partials come from the L2 (written by other SMs: __ldcg). Taken only where no block
// finishes more than kFinishMaxSlices slices: with fewer blocks (few rows) the separate
// finish kernel, spread over ceil(n / 32) blocks, is faster (64 x 4096: 10.9 us in one
// launch, 10.3 in two; docs/stages/shifts.md).
inline constexpr int kFinishColumns = 16;
inline constexpr int64_t kFinishMaxSlices = 2;

template <int T>
__device__ inline void finish_columns_in_grid(const ShiftArgs<int32_t>& a, const int32_t* partial, int parts,
                                              int32_t* s_min) {
  const int64_t per_block = ((a.n + gridDim.x - 1) / gridDim.x + kFinishColumns - 1) / kFinishColumns * kFinishColumns;
  const int64_t end = (blockIdx.x + 1) * per_block < a.n ? (blockIdx.x + 1) * per_block : a.n;
  for (int64_t c0 = blockIdx.x * per_block; c0 < end; c0 += kFinishColumns) {
    const int64_t j = c0 + threadIdx.x % kFinishColumns;
    finish_slice<kFinishColumns, T / kFinishColumns, true>(a, partial, parts, j, j < end, threadIdx.x % kFinishColumns,
                                                           threadIdx.x / kFinishColumns, s_min);
    __syncthreads();
  }
}

template <int V, int R, int T, bool Ragged, bool kFinish = false>
__global__ void __launch_bounds__(T, T == 256 ? 2 : 1)
accurate_one_read_kernel(ShiftArgs<int32_t> a, int32_t* partial) {
  constexpr int kWarps = T / kWarp;
  extern __shared__ int4 s_key[];  // V * T vectors of four column keys
  __shared__ __align__(16) int32_t s_best[2][R][kWarps];
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  const int64_t n4 = (a.n + 3) / 4;
  const int64_t groups = (a.m + R - 1) / R;
  // a group's bound entries, and its rows' exponents and fast shifts (for d_i)
  auto load = [&](int4 (&gv)[R][V], int32_t (&ea)[R], int32_t (&mf)[R], int64_t grp) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t i = grp * R + r;
      const bool row_in = grp < groups && i < a.m;
      const int4* row = reinterpret_cast<const int4*>(a.g + i * a.ldg);
#pragma unroll
      for (int v = 0; v < V; ++v) {
        const int64_t j = int64_t(v) * T + threadIdx.x;
        gv[r][v] = row_in && j < n4 ? __ldcs(row + j) : make_int4(0, 0, 0, 0);  // read once
      }
      ea[r] = row_in ? __ldg(a.exps_a + i) : 0;
      mf[r] = row_in ? __ldg(a.mu_fast + i) : 0;
    }
  };
  int4 next[R][V];
  int32_t next_ea[R], next_mf[R];
  load(next, next_ea, next_mf, blockIdx.x);  // before the keys: its latency overlaps theirs
  int32_t cmin[V][4];
  uint32_t inside = 0;  // bit 4 v + c: column 4 j + c of vector v is < n (the rest: absent)
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const int64_t j = int64_t(v) * T + threadIdx.x;
    int32_t key[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int64_t col = 4 * j + c;  // once per block: 4-byte loads, any alignment
      key[c] = col < a.n ? slack_column_key(__ldg(a.exps_b + col), __ldg(a.nu_fast + col)) - 1 : 0;
      inside |= col < a.n ? 1u << (4 * v + c) : 0u;
    }
    s_key[v * T + threadIdx.x] = make_int4(key[0], key[1], key[2], key[3]);
#pragma unroll
    for (int c = 0; c < 4; ++c) cmin[v][c] = kNoSlack;
  }  // each thread reads back only the keys it wrote: no barrier
  const bool prefetch = kFinish && groups <= kPrefetchMaxRounds * int64_t(gridDim.x);
  int buf = 0;
  for (int64_t grp = blockIdx.x; grp < groups; grp += gridDim.x, buf ^= 1) {
    int32_t lg[R][V][4], ea[R], mf[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      ea[r] = next_ea[r];
      mf[r] = next_mf[r];
#pragma unroll
      for (int v = 0; v < V; ++v) {
        const int32_t g[4] = {next[r][v].x, next[r][v].y, next[r][v].z, next[r][v].w};
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          // Ragged: the columns past n (the row's last 16 bytes) read as absent
          lg[r][v][c] = bound_log2_less_one(Ragged ? g[c] & -static_cast<int32_t>(inside >> (4 * v + c) & 1u) : g[c]);
        }
      }
    }
    load(next, next_ea, next_mf, grp + gridDim.x);  // in flight while this group is reduced
    static_assert(R <= kWarps, "one warp's lane 0 per prefetched row");
    if (const int64_t i = (grp + 2 * int64_t(gridDim.x)) * R + warp;
        prefetch && warp < R && lane == 0 && i < a.m) {
      prefetch_row_l2(a.g + i * a.ldg, static_cast<uint32_t>(n4 * 16));  // the row's 16-byte vectors
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      int32_t best = kNoSlack;
#pragma unroll
      for (int v = 0; v < V; ++v) {
        const int4 key = s_key[v * T + threadIdx.x];
        best = min(best, key.x - lg[r][v][0]);
        best = min(best, key.y - lg[r][v][1]);
        best = min(best, key.z - lg[r][v][2]);
        best = min(best, key.w - lg[r][v][3]);
      }
      best = __reduce_min_sync(0xffffffffu, best);
      if (lane == 0) s_best[buf][r][warp] = best;
    }
    // One barrier per group: s_best alternates, so a warp that runs ahead writes the
    // other buffer, and it cannot pass the next barrier before every warp has read this one.
    __syncthreads();
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t i = grp * R + r;
      if (i >= a.m) break;
      int32_t best = kNoSlack;
      static_assert(kWarps % 4 == 0, "the warps' minima in 16-byte loads");
#pragma unroll
      for (int w = 0; w < kWarps; w += 4) {
        const int4 b = *reinterpret_cast<const int4*>(&s_best[buf][r][w]);
        best = min(min(best, b.x), min(b.y, min(b.z, b.w)));
      }
      const int32_t key = slack_row_key(ea[r], mf[r], a.pb);
      const int32_t d = row_gain_keys(key, present_or_none(best), ea[r], mf[r], a.pb);
      if (threadIdx.x == 0) a.mu[i] = mf[r] + d;
      const int32_t row_key = key - d - 1;  // the -1 of bound_log2_less_one
#pragma unroll
      for (int v = 0; v < V; ++v) {
#pragma unroll
        for (int c = 0; c < 4; ++c) cmin[v][c] = min(cmin[v][c], row_key - lg[r][v][c]);
      }
    }
  }
  int4* out = reinterpret_cast<int4*>(partial + blockIdx.x * n4 * 4);
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const int64_t j = int64_t(v) * T + threadIdx.x;
    if (j < n4) out[j] = make_int4(cmin[v][0], cmin[v][1], cmin[v][2], cmin[v][3]);
  }
  if constexpr (kFinish) {
    __shared__ int32_t s_min[T];
    cooperative_groups::this_grid().sync();  // every block's partial row written
    finish_columns_in_grid<T>(a, partial, static_cast<int>(gridDim.x), s_min);
  }
}

// The column gains from `parts` rows of partial column minima (rows ceil(n / 4) * 4 apart):
// blocks of (32, 32) threads take 32 columns, the 32 warps split the rows, then one warp
// finishes.
inline constexpr int kPartialRowsPerBlock = 32;

__global__ void __launch_bounds__(kWarp * kPartialRowsPerBlock)
accurate_partials_finish_kernel(ShiftArgs<int32_t> a, const int32_t* partial, int parts) {
  __shared__ int32_t s_min[kPartialRowsPerBlock * kWarp];
  const int64_t j = blockIdx.x * int64_t(kWarp) + threadIdx.x;
  finish_slice<kWarp, kPartialRowsPerBlock, false>(a, partial, parts, j, j < a.n, threadIdx.x, threadIdx.y, s_min);
}

// --- host launchers (stage_launch.cuh's checks, then the launch) ---------------------
// Launches the one-read kernel of V vectors per thread and R rows per group (its column
// keys in V * T * 16 bytes of dynamic shared memory; Ragged where n % 4 != 0), then the
// column gains.
template <int V, int R, int T, bool Ragged>
inline int launch_one_read(const ShiftArgs<int32_t>& a, int32_t* partial, cudaStream_t stream, Message& err) {
  constexpr size_t kSmem = sizeof(int4) * V * T;
  if constexpr (kSmem + sizeof(int32_t) * 2 * R * (T / kWarp) > 48 * 1024) {
    // past the 48 KB a kernel gets without asking: asked once per device
    static std::mutex mutex;
    static std::vector<int> configured;
    int device = 0;
    if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) {
      return err.set(kCudaError, "accurate_shifts (one read): %s", cudaGetErrorString(e));
    }
    std::lock_guard<std::mutex> lock(mutex);
    if (std::find(configured.begin(), configured.end(), device) == configured.end()) {
      const cudaError_t e = cudaFuncSetAttribute(accurate_one_read_kernel<V, R, T, Ragged>,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem));
      if (e != cudaSuccess) return err.set(kCudaError, "accurate_shifts (one read): %s", cudaGetErrorString(e));
      configured.push_back(device);
    }
  }
  const int64_t groups = (a.m + R - 1) / R;
  if constexpr (V <= 4) {  // n <= 4096: one cooperative launch where enough blocks share the finish
    constexpr auto kernel = accurate_one_read_kernel<V, R, T, Ragged, true>;
    int64_t blocks = resident_blocks(kernel, T, groups, 1, kSmem);
    blocks = blocks < kShiftPartials ? blocks : kShiftPartials;
    if (a.n <= blocks * kFinishColumns * kFinishMaxSlices) {
      ShiftArgs<int32_t> args = a;
      void* params[] = {&args, &partial};
      if (cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), dim3(static_cast<unsigned>(blocks)),
                                      dim3(T), params, kSmem, stream) == cudaSuccess) {
        return kOk;
      }
      (void)cudaGetLastError();  // not one wave after all, or no cooperative launch: two launches
    }
  }
  int64_t blocks = resident_blocks(accurate_one_read_kernel<V, R, T, Ragged>, T, groups, 1, kSmem);
  blocks = blocks < kShiftPartials ? blocks : kShiftPartials;
  accurate_one_read_kernel<V, R, T, Ragged><<<blocks, T, kSmem, stream>>>(a, partial);
  if (int s = check_launch(err, "accurate_shifts (one read)")) return s;
  accurate_partials_finish_kernel<<<blocks_for(a.n, kWarp), dim3(kWarp, kPartialRowsPerBlock), 0, stream>>>(
      a, partial, static_cast<int>(blocks));
  return check_launch(err, "accurate_shifts (column gains)");
}

template <bool Ragged>
inline int accurate_shifts_one_read(const ShiftArgs<int32_t>& a, int32_t* partial, cudaStream_t stream,
                                    Message& err) {
  const int64_t per_thread = ((a.n + 3) / 4 + kThreads - 1) / kThreads;  // 16-byte vectors per row, 256 threads
  if (per_thread <= 1) return launch_one_read<1, 4, kThreads, Ragged>(a, partial, stream, err);
  if (per_thread <= 2) return launch_one_read<2, 4, kThreads, Ragged>(a, partial, stream, err);
  if (per_thread <= 4) return launch_one_read<4, 2, kThreads, Ragged>(a, partial, stream, err);
  if (per_thread <= 8) return launch_one_read<8, 1, kThreads, Ragged>(a, partial, stream, err);
  return launch_one_read<8, 1, 2 * kThreads, Ragged>(a, partial, stream, err);
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
                           int32_t* workspace, cudaStream_t stream, Message& err) {
  const char* what = "accurate_shifts";
  if (m < 0 || n < 0 || ldg < n || !product_fits(m, ldg)) {
    return err.set(kBadArgument, "%s: bad sizes m=%lld n=%lld ldg=%lld", what,
                   static_cast<long long>(m), static_cast<long long>(n),
                   static_cast<long long>(ldg));
  }
  if (pb < 0 || pb > 4096) return err.set(kBadArgument, "%s: pb=%d out of range", what, pb);
  if ((m > 0 && (exps_a == nullptr || mu_fast == nullptr || mu == nullptr)) ||
      (n > 0 && (exps_b == nullptr || nu_fast == nullptr || nu == nullptr)) ||
      (m + n > 0 && workspace == nullptr) || (m > 0 && n > 0 && g == nullptr)) {
    return err.set(kBadArgument, "%s: null pointer", what);
  }
  const ShiftArgs<G> args{g, ldg, m, n, exps_a, exps_b, mu_fast, nu_fast, pb, mu, nu, workspace, workspace + m};
  // 16-byte loads where the layout allows them (the *_vec kernels)
  const bool vec = std::is_same_v<G, int32_t> && n % 4 == 0 && ldg % 4 == 0 && aligned16(g) &&
                   aligned16(exps_b) && aligned16(nu_fast);
  if constexpr (std::is_same_v<G, int32_t>) {
    // one read of the bound where its rows fit the registers of a block (16-byte rows; the
    // workspace holds the partial column minima)
    if (m > 0 && n >= kOneReadMinColumns && n <= kOneReadMaxColumns && ldg % 4 == 0 && aligned16(g) &&
        aligned16(workspace)) {
      return n % 4 == 0 ? accurate_shifts_one_read<false>(args, workspace, stream, err)
                        : accurate_shifts_one_read<true>(args, workspace, stream, err);
    }
  }
  if (m > 0 || n > 0) {
    const int64_t rows = blocks_for(m, kThreads / kWarp);
    if constexpr (std::is_same_v<G, int32_t>) {
      if (vec) {
        const int64_t blocks = resident_blocks(accurate_rows_vec_kernel, kThreads, rows > 0 ? rows : 1, 1);
        accurate_rows_vec_kernel<<<blocks, kThreads, 0, stream>>>(args);
      }
    }
    if (!vec) {
      const int64_t blocks = resident_blocks(accurate_rows_kernel<G>, kThreads, rows > 0 ? rows : 1, 1);
      accurate_rows_kernel<G><<<blocks, kThreads, 0, stream>>>(args);
    }
    if (int s = check_launch(err, "accurate_shifts (rows)")) return s;
  }
  if (n > 0) {
    // Row slices of a multiple of the rows one pass of the block's loads covers, as many as
    // fill the resident blocks.
    const void* columns = vec ? reinterpret_cast<const void*>(accurate_columns_vec_kernel)
                              : reinterpret_cast<const void*>(accurate_columns_kernel<G>);
    const int64_t width = vec ? 4 * kWarp : kWarp;  // columns per block
    const int64_t groups = (n + width - 1) / width;
    const int64_t step = int64_t(kRowsPerBlock) * (vec ? kShiftVecLoads : kShiftLoads);
    const int64_t target = resident_capacity(columns, kThreads, 0);
    const int64_t slices = target > groups ? (target + groups - 1) / groups : 1;
    int64_t rows_per_slice = (m + slices - 1) / slices;
    rows_per_slice = rows_per_slice < step ? step : (rows_per_slice + step - 1) / step * step;
    const int64_t items = groups * ((m + rows_per_slice - 1) / rows_per_slice);
    if (m > 0) {
      if constexpr (std::is_same_v<G, int32_t>) {
        if (vec) {
          accurate_columns_vec_kernel<<<blocks_for(items, 1), dim3(kWarp, kRowsPerBlock), 0, stream>>>(
              args, rows_per_slice);
        }
      }
      if (!vec) {
        accurate_columns_kernel<G><<<blocks_for(items, 1), dim3(kWarp, kRowsPerBlock), 0, stream>>>(
            args, rows_per_slice);
      }
      if (int s = check_launch(err, "accurate_shifts (columns)")) return s;
    }
    accurate_columns_finish_kernel<G><<<blocks_for(n, kThreads), kThreads, 0, stream>>>(args);
    if (int s = check_launch(err, "accurate_shifts (column gains)")) return s;
  }
  return kOk;
}

}  // namespace stages
}  // namespace ozaki
