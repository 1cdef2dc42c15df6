// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// Accurate mode's passes over the coarse bound G (the coarse GEMM's output):
// P_accumulate_i64 (G summed over k chunks) and P_accurate_shifts (a row pass, a column
// pass and the column gains): kernels and host launchers.

#pragma once

#include <climits>
#include <cstdint>

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
      for (int u = 0; u < kShiftLoads; ++u) {
        const int32_t s = key[u] - ceil_log2_bound(gv[u]);
        if (gv[u] > 0 && s < best) best = s;
      }
    }
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
        for (int u = 0; u < kShiftLoads; ++u) {
          const int32_t s = key[u] - ceil_log2_bound(gv[u]);
          if (gv[u] > 0 && s < best) best = s;
        }
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

// nu_j = nu_fast_j + g_j from the column minimum (column_key_j added back).
template <class G>
__global__ void __launch_bounds__(kThreads)
accurate_columns_finish_kernel(ShiftArgs<G> a) {
  for (int64_t j = blockIdx.x * int64_t(kThreads) + threadIdx.x; j < a.n; j += int64_t(gridDim.x) * kThreads) {
    const int32_t eb = a.exps_b[j];
    const int32_t nf = a.nu_fast[j];
    const int64_t col_min = slack_total(slack_column_key(eb, nf), a.col_min[j]);
    a.nu[j] = static_cast<int32_t>(nf + column_gain(col_min, eb, nf, a.pb));
  }
}

// --- host launchers (stage_launch.cuh's checks, then the launch) ---------------------
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
  if (m > 0 || n > 0) {
    const int64_t rows = blocks_for(m, kThreads / kWarp);
    const int64_t blocks = resident_blocks(accurate_rows_kernel<G>, kThreads, rows > 0 ? rows : 1, 1);
    accurate_rows_kernel<G><<<blocks, kThreads, 0, stream>>>(args);
    if (int s = check_launch(err, "accurate_shifts (rows)")) return s;
  }
  if (n > 0) {
    // Row slices of a multiple of the rows one pass of the block's loads covers, as many as
    // fill the resident blocks.
    const int64_t groups = (n + kWarp - 1) / kWarp;
    const int64_t step = int64_t(kRowsPerBlock) * kShiftLoads;
    const int64_t target = resident_capacity(reinterpret_cast<const void*>(accurate_columns_kernel<G>),
                                             kThreads, 0);
    const int64_t slices = target > groups ? (target + groups - 1) / groups : 1;
    int64_t rows_per_slice = (m + slices - 1) / slices;
    rows_per_slice = rows_per_slice < step ? step : (rows_per_slice + step - 1) / step * step;
    const int64_t items = groups * ((m + rows_per_slice - 1) / rows_per_slice);
    if (m > 0) {
      accurate_columns_kernel<G><<<blocks_for(items, 1), dim3(kWarp, kRowsPerBlock), 0, stream>>>(
          args, rows_per_slice);
      if (int s = check_launch(err, "accurate_shifts (columns)")) return s;
    }
    accurate_columns_finish_kernel<G><<<blocks_for(n, kThreads), kThreads, 0, stream>>>(args);
    if (int s = check_launch(err, "accurate_shifts (column gains)")) return s;
  }
  return kOk;
}

}  // namespace stages
}  // namespace ozaki
