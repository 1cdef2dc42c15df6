// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// Accurate mode's passes over the coarse bound G (the coarse GEMM's output):
// P_accumulate_i64 (G summed over k chunks) and P_accurate_shifts (a row pass, a column
// pass and the column gains): kernels and host launchers.

#pragma once

#include <climits>
#include <cstdint>
#include <type_traits>

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
  // 16-byte loads where the layout allows them (the *_vec kernels)
  const bool vec = std::is_same_v<G, int32_t> && n % 4 == 0 && ldg % 4 == 0 && aligned16(g) &&
                   aligned16(exps_b) && aligned16(nu_fast);
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
