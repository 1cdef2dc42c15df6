// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// What the stage kernels share on the device: the vector sets they read, the launch
// geometry, the chunks of 16 k entries the int8 writers (coarse, residues) own, and the
// L2 prefetch hints (shifts, combine).
// All loops over work items are grid-stride loops with int64 indices; block shapes are
// fixed: (32, 8) for the tiled kernels, 256 for the element-wise ones.

#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace ozaki {
namespace stages {

struct VectorSet {
  const double* x;
  int64_t nvec;
  int64_t k;
  int64_t vs;  // stride between vectors
  int64_t es;  // stride between the elements of one vector
  // The accuracy contract's inner shifts: element l counts as x(v, l) 2^inner[l] (the
  // equilibration, folded into every exponent so that nothing is rounded); null: 0.
  const int32_t* inner = nullptr;

  __device__ double at(int64_t v, int64_t l) const { return x[v * vs + l * es]; }
  __device__ int shift(int64_t l) const { return inner != nullptr ? __ldg(inner + l) : 0; }
};

inline constexpr int kWarp = 32;
inline constexpr int kRowsPerBlock = 8;   // blockDim.y of the (32, 8) kernels
inline constexpr int kThreads = 256;      // blockDim.x of the element-wise kernels
inline constexpr int64_t kMaxBlocks = 1 << 20;

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

// s[i] = the inner shift of l0 + i (0 past k or without inner shifts): four 16-byte loads
// for a whole, aligned chunk.
__device__ inline void load_shifts(const VectorSet& xs, int64_t l0, int (&s)[kChunk]) {
  if (xs.inner == nullptr) {  // apart: else every entry's bounds test and address below run
#pragma unroll
    for (int i = 0; i < kChunk; ++i) s[i] = 0;
    return;
  }
  if (l0 + kChunk <= xs.k && reinterpret_cast<uintptr_t>(xs.inner + l0) % 16 == 0) {
    const int4* p = reinterpret_cast<const int4*>(xs.inner + l0);
#pragma unroll
    for (int q = 0; q < kChunk / 4; ++q) {
      const int4 w = __ldg(p + q);
      s[4 * q] = w.x;
      s[4 * q + 1] = w.y;
      s[4 * q + 2] = w.z;
      s[4 * q + 3] = w.w;
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < kChunk; ++i) s[i] = l0 + i < xs.k ? __ldg(xs.inner + l0 + i) : 0;
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

// --- L2 prefetch hints (sm_90 and newer; nothing before, untimed there) ------------
// No value depends on them. The shifts fetch whole rows of the bound ahead by the
// bulk-copy unit, the combine each plane's bytes of an item by one line prefetch per line.

// Fetches `bytes` bytes at `row` (16-byte aligned, a multiple of 16) into the L2 by the
// bulk-copy unit (one instruction for the row).
__device__ inline void prefetch_row_l2(const void* row, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(row), "r"(bytes) : "memory");
#else
  (void)row;
  (void)bytes;
#endif
}

// Fetches the bytes [p, last] of one row (at most 128 bytes: one line, or two where they
// straddle a line boundary) into the L2, one prefetch.global.L2 per line.
__device__ inline void prefetch_item_l2(const unsigned char* p, const unsigned char* last) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
  if (((reinterpret_cast<uintptr_t>(p) ^ reinterpret_cast<uintptr_t>(last)) & ~uintptr_t(127)) != 0) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(last));
  }
#else
  (void)p;
  (void)last;
#endif
}

// Warp-uniform loop over the thread slots: every lane of a warp runs the same
// iterations (the residues kernel votes across the warp).
#define OZAKI_FOR_EACH_WARP_SLOT(c, slots)                                                     \
  for (int64_t c##_base = (int64_t(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp) * \
                          kWarp;                                                             \
       c##_base < (slots); c##_base += int64_t(gridDim.x) * blockDim.x)                        \
    if (const int64_t c = c##_base + (threadIdx.x & (kWarp - 1)); true)

}  // namespace stages
}  // namespace ozaki
