// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// Accurate mode's passes over the coarse bound G (the coarse GEMM's output):
// P_accumulate_i64 (G summed over k chunks) and P_accurate_shifts (a row pass, then a
// column pass): kernels and host launchers.

#pragma once

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

// Both passes issue kShiftLoads loads of g before using any: with one load at a time in
// flight the two passes took 2.26 ms at 16384^2 (2.15 GB, 0.95 TB/s; ncu), now 1.86 ms.
// The column pass is the bound's last use (streaming loads). The minima do not depend on
// the order.
inline constexpr int kShiftLoads = 8;

// Row pass: one block per row, min_j s_ij by a tree reduction, then d_i and mu_i.
template <class G>
__global__ void __launch_bounds__(kThreads)
accurate_rows_kernel(ShiftArgs<G> a) {
  __shared__ int64_t s_min[kThreads];
  for (int64_t i = blockIdx.x; i < a.m; i += gridDim.x) {
    const int32_t ea = a.exps_a[i];
    const int32_t mf = a.mu_fast[i];
    int64_t row_min = kNoConstraint;  // also the value for an empty row
    const G* row = a.g + i * a.ldg;
    for (int64_t j0 = threadIdx.x; j0 < a.n; j0 += kThreads * kShiftLoads) {
      G gv[kShiftLoads];
#pragma unroll
      for (int u = 0; u < kShiftLoads; ++u) {
        const int64_t j = j0 + u * kThreads;
        gv[u] = j < a.n ? row[j] : G(0);
      }
#pragma unroll
      for (int u = 0; u < kShiftLoads; ++u) {
        const int64_t j = j0 + u * kThreads;
        if (j < a.n) {
          const int64_t s = coarse_slack(gv[u], ea, a.exps_b[j], mf, a.nu_fast[j], a.pb);
          row_min = s < row_min ? s : row_min;
        }
      }
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
      for (int64_t i0 = threadIdx.y; i0 < a.m; i0 += kColumnWarps * kShiftLoads) {
        G gv[kShiftLoads];
#pragma unroll
        for (int u = 0; u < kShiftLoads; ++u) {
          const int64_t i = i0 + u * kColumnWarps;
          gv[u] = i < a.m ? __ldcs(a.g + i * a.ldg + j) : G(0);
        }
#pragma unroll
        for (int u = 0; u < kShiftLoads; ++u) {
          const int64_t i = i0 + u * kColumnWarps;
          if (i < a.m) {
            const int64_t s = coarse_slack(gv[u], a.exps_a[i], eb, a.mu_fast[i], nf, a.pb) - a.d[i];
            col_min = s < col_min ? s : col_min;
          }
        }
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

}  // namespace stages
}  // namespace ozaki
