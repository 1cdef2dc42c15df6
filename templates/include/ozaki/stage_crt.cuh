// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The CRT stages: P_crt_unscale (residues from the raw int32 INT8-GEMM outputs, summed
// over k chunks) and P_combine_unscale (residues from the fused kernels' group partials):
// the residues, reduced by the one Barrett reduction (barrett.h), go through crt_arith.h's
// limb sums and finish; kernels and host launchers.

#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "ozaki/abi.h"
#include "ozaki/barrett.h"
#include "ozaki/constants.h"
#include "ozaki/crt_arith.h"
#include "ozaki/group_arith.h"  // partial_bytes: how the fused kernels store group partials
#include "ozaki/stage_common.cuh"
#include "ozaki/stage_launch.cuh"

namespace ozaki {
namespace stages {

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

// Whether a CRT launch's output is plain: no c term (beta == 0), 16-byte stores and
// 16-byte loads of nu (store_entries<..., true>, for entries whose row and columns are not
// flagged: any_flagged is the caller's).
__host__ __device__ inline bool plain_output(const CrtArgs& a) {
  return a.beta == 0.0 && a.vector_stores && reinterpret_cast<uintptr_t>(a.nu) % 16 == 0;
}

// Whether row i or one of the columns j0 .. j0 + kEntries - 1 (those below n; full: all of
// them) is flagged by the launch's non-finite source: the row's count and the columns' in
// one 16-byte load where aligned, so that finite inputs cost two loads per kEntries entries,
// not one or two per entry (nonfinite_entry checks each entry's own flags).
template <int kEntries>
__device__ inline bool any_flagged(const CrtArgs& a, int64_t i, int64_t j0, bool full) {
  if (a.nf.row_flags == nullptr) return false;
  int32_t any = a.nf.row_flags[i];
  if (kEntries == 4 && full && j0 % 4 == 0 && reinterpret_cast<uintptr_t>(a.nf.col_flags) % 16 == 0) {
    const int4 v = *reinterpret_cast<const int4*>(a.nf.col_flags + j0);
    any |= v.x | v.y | v.z | v.w;
  } else {
#pragma unroll
    for (int t = 0; t < kEntries; ++t) any |= j0 + t < a.n ? a.nf.col_flags[j0 + t] : 0;
  }
  return any != 0;
}

// Whether the launch's non-finite source flags any of its n columns, for a whole block
// (every thread of it must call this): each thread reads its share of the column counts,
// in 16-byte loads where aligned, and __syncthreads_or joins them (n int32s per block,
// from the L2).
__device__ inline bool columns_flagged(const NonfiniteSource& s, int64_t n) {
  int32_t any = 0;
  int64_t done = 0;
  if (reinterpret_cast<uintptr_t>(s.col_flags) % 16 == 0) {
    const int4* quads = reinterpret_cast<const int4*>(s.col_flags);
    done = n / 4 * 4;
#pragma unroll 4
    for (int64_t v = threadIdx.x; v < n / 4; v += blockDim.x) {
      const int4 w = __ldg(quads + v);
      any |= w.x | w.y | w.z | w.w;
    }
  }
  for (int64_t v = done + threadIdx.x; v < n; v += blockDim.x) any |= __ldg(s.col_flags + v);
  return __syncthreads_or(any != 0) != 0;
}

// Whether any of the rows of a warp's items (item, item + step, ... below items; blocks
// items per row) is flagged: its lanes read those rows' counts, one item in 32 each, and
// __any_sync joins them (every lane of the warp must call this).
__device__ inline bool rows_flagged(const NonfiniteSource& s, int64_t item, int64_t step, int64_t items,
                                    int64_t blocks) {
  int32_t any = 0;
  for (int64_t it = item + (threadIdx.x % 32) * step; it < items; it += 32 * step) {
    any |= __ldg(s.row_flags + it / blocks);
  }
  return __any_sync(0xffffffffu, any != 0);
}

// The entries (i, j0 .. j0 + kEntries - 1) (those below n; kEntries 2 or 4) from their
// limb sums: the NaN/Inf pattern, crt_output_limbs (reconstruction, alpha, beta c) and the
// store. What holds for the whole launch (a non-finite source, beta != 0, nu's alignment) is
// tested once for the kEntries entries, not once per entry. kPlain: the caller knows that
// the launch is plain (plain_output), that the kEntries entries are inside n, j0 a
// multiple of kEntries, and that none of them is flagged (any_flagged); those tests and the
// NaN/Inf patterns compile away.
template <int kLimbs, int kEntries, bool kPlain = false>
__device__ inline void store_entries(const CrtArgs& a, const CrtConstants& consts, int64_t i,
                                     int64_t j0, const double (&limb_sums)[kEntries][kMaxLimbs]) {
  static_assert(kEntries == 2 || kEntries == 4, "pairs of entries: 16-byte stores");
  const bool full = kPlain || j0 + kEntries <= a.n;
  const int32_t mu = a.mu[i];
  int32_t nu[kEntries];
  bool loaded = false;
  if constexpr (kEntries == 4) {  // one 16-byte load where nu's 4 entries are aligned
    if (kPlain || (full && j0 % 4 == 0 && reinterpret_cast<uintptr_t>(a.nu) % 16 == 0)) {
      const int4 v = *reinterpret_cast<const int4*>(a.nu + j0);
      nu[0] = v.x; nu[1] = v.y; nu[2] = v.z; nu[3] = v.w;
      loaded = true;
    }
  }
  if (!loaded) {
#pragma unroll
    for (int t = 0; t < kEntries; ++t) nu[t] = j0 + t < a.n ? a.nu[j0 + t] : 0;
  }
  const bool with_c = !kPlain && a.beta != 0.0;
  const bool flagged = !kPlain && any_flagged<kEntries>(a, i, j0, full);
  double y[kEntries];
  if constexpr (kPlain) {
    // No pattern and beta 0 (plain_output); whether every entry's 2^-(mu + nu) is a
    // normal double is tested once for the kEntries entries rather than once per entry.
    bool normal = true;
#pragma unroll
    for (int t = 0; t < kEntries; ++t) {
      y[t] = crt_finish_limbs<kLimbs>(consts, limb_sums[t]);
      normal = normal && normal_power_of_two(-(mu + nu[t]));
    }
#pragma unroll
    for (int t = 0; t < kEntries; ++t) {
      y[t] = normal ? unscale_normal(y[t], mu + nu[t], a.alpha) : unscale_value(y[t], mu + nu[t], a.alpha, 0.0, 0.0);
    }
  } else {
#pragma unroll
    for (int t = 0; t < kEntries; ++t) {
      const int64_t j = j0 + t;
      const double pattern = flagged && j < a.n ? nonfinite_entry(a.nf, i, j) : 0.0;
      const double c_value = with_c && j < a.n ? a.cin[i * a.cin_rs + j * a.cin_cs] : 0.0;
      y[t] = crt_output_limbs<kLimbs>(consts, limb_sums[t], pattern, mu + nu[t], a.alpha, a.beta, c_value);
    }
  }
  double* dst = a.out + i * a.out_rs + j0 * a.out_cs;
  if (kPlain || (a.vector_stores && full)) {
#pragma unroll
    for (int h = 0; h < kEntries / 2; ++h) {
      reinterpret_cast<double2*>(dst)[h] = make_double2(y[2 * h], y[2 * h + 1]);
    }
  } else {
#pragma unroll
    for (int t = 0; t < kEntries; ++t) {
      if (j0 + t < a.n) dst[t * a.out_cs] = y[t];
    }
  }
}

// One thread per 4 consecutive entries (i, j0 .. j0 + 3) of a row (kSource: kFromInt32 or
// kFromPartials; residue bytes go to crt_residue_mma_kernel). kLimbs = consts.limbs
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
              for (int t = 0; t < 4; ++t) r[t] = barrett_reduce(x[t], mod, magic);
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

    store_entries<kLimbs>(a, consts, i, j0, limb_sums);
  }
}

// combine_unscale of one-modulus groups on the tensor cores: the limb sums as byte products
// (crt_arith.h's limb_from_byte_sums), by mma.sync m16n8k16 (u8 x u8 -> s32, exact), then
// recomposed exactly: the same limb sums as crt_add_value_limbs's, so the same bits.
//
// A warp takes 128 consecutive entries of a row (an item). Lane (q, t) = (lane / 4,
// lane % 4) loads entries 16q .. 16q + 15 of moduli 4t .. 4t + 3 (0 past the count; past
// 16 moduli see kTail below), one 16-byte word each, and transposes them by 4 x 4 bytes
// into A fragments: row q of MMA s (0..7) is entry 16q + 2s, row q + 8 entry 16q + 2s + 1,
// the columns (k) the moduli. The constant B fragments hold the weights' bytes: column q of
// n-tile u is byte tile_byte(u, q % 2) (2u + q % 2 but in the last tile) of limb q / 2.
// So lane (q, t)'s accumulators of MMA s are the byte sums of limb t of entries 16q + 2s
// and 16q + 2s + 1: it recomposes S_t of its group's 16 entries, and the group's 4 lanes
// swap them through shared memory, so that lane (q, t) holds every limb of entries 16q +
// 4t .. 16q + 4t + 3 and stores them (store_entries): a warp's 128 entries contiguous. The
// next item's words are loaded before this item's MMAs.
inline constexpr int kMmaCombineThreads = 128;
inline constexpr int kMmaCombineItem = 128;  // entries of a row per warp and item
inline constexpr int kMmaCombineBytes = 16;  // entries per lane, plane and item

// D += A B for m16n8k16 with u8 A (two words) and B (one word), s32 accumulators.
__device__ inline void mma_u8_m16n8k16(int32_t (&d)[4], uint32_t a0, uint32_t a1, uint32_t b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.u8.u8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
               "{%0,%1,%2,%3};\n"
               : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
               : "r"(a0), "r"(a1), "r"(b));
}

// The limb sums' swap: limb l of entry e of lane group q at word swap_word(q, e, l) =
// kSwapGroupWords q + 17 (e / 4) + 4 (e % 4) + l of the warp's share. A lane writes its
// limb t of entries e = 0..15 from one base (kSwapGroupWords q + t) and reads limbs l of
// entries 4t + r from another (kSwapGroupWords q + 17 t), each word at a constant offset.
// Bank pairs (8 bytes each, 16 of them): a write of one e puts lane (q, t) on 4q + t +
// const, a read of one (r, l) on 4q + t + const (mod 16, since 68 = 4 and 17 = 1 mod 16):
// each half-warp's 16 lanes on 16 different pairs, both ways.
inline constexpr int kSwapGroupWords = 68;  // 4 blocks of 17 words: 16 entries x 4 limbs + 3

__host__ __device__ constexpr int swap_word(int q, int e, int l) {
  return kSwapGroupWords * q + 17 * (e / 4) + 4 * (e % 4) + l;
}

// The layout's claims, checked by the compiler: no two (q, e, l) share a word, the warp's
// share holds them all, and each half-warp's 16 lanes fall on 16 different bank pairs in
// every write (one e, lane (q, t) writing limb t) and every read (one r and l, lane (q, t)
// reading entry 4t + r).
constexpr bool swap_layout_holds() {
  bool used[8 * kSwapGroupWords] = {};
  for (int q = 0; q < 8; ++q) {
    for (int e = 0; e < 16; ++e) {
      for (int l = 0; l < 4; ++l) {
        const int w = swap_word(q, e, l);
        if (w < 0 || w >= 8 * kSwapGroupWords || used[w]) return false;
        used[w] = true;
      }
    }
  }
  for (int half = 0; half < 2; ++half) {
    for (int e = 0; e < 16; ++e) {  // a write
      unsigned pairs = 0;
      for (int lane = 16 * half; lane < 16 * half + 16; ++lane) pairs |= 1u << (swap_word(lane / 4, e, lane % 4) % 16);
      if (pairs != 0xffffu) return false;
    }
    for (int r = 0; r < 4; ++r) {  // a read
      for (int l = 0; l < 4; ++l) {
        unsigned pairs = 0;
        for (int lane = 16 * half; lane < 16 * half + 16; ++lane) {
          pairs |= 1u << (swap_word(lane / 4, 4 * (lane % 4) + r, l) % 16);
        }
        if (pairs != 0xffffu) return false;
      }
    }
  }
  return true;
}
static_assert(swap_layout_holds(), "the swap's words are distinct and conflict-free");

// The weight byte of column 2l + h of n-tile u (l: the limb): bytes 2u and 2u + 1, but the
// last tile of an odd byte count puts its one byte in the odd column, so that each byte sum
// T_j4 sits in the high half of an accumulator pair (the free low half takes T_j0 + 2^8
// T_j1 for limb_from_byte_sums's 64-bit addend, without a move).
__host__ __device__ constexpr int tile_byte(int u, int h) {
  return kLimbBytes % 2 == 1 && 2 * u + 1 == kLimbBytes ? 2 * u + 1 - h : 2 * u + h;
}

// The fewest items a warp of crt_residue_mma_kernel has for it to prefetch: at 1000 x 1024
// (3.8 a warp) the prefetch ran 1-5 % slower on an H100.
inline constexpr int64_t kCombinePrefetchMinRounds = 4;

// kTail: moduli 17-20 (kMaxModuli <= 20): the 16 of the first MMA as above, and a tail MMA
// whose lane (q, t) holds one modulus, 16 + t (k column 4t; columns 4t + 1 .. 4t + 3 are 0:
// the order of the moduli along k does not change an exact integer sum), so that a lane
// loads and keeps one 16-byte word for them rather than four (two chunks of four words, the
// next item's too, took 168 registers, 3 blocks per SM and 12 bytes of spills, and ran the
// kernel at 2.0x its floor at 17 moduli; the tail takes 128 registers, no spills, at 4).
// 4 blocks per SM is what the registers allow; asking for it lets ptxas use up to 128
// registers (116-122 without the tail; without the bound 4-7 % slower when the swap
// changed, 10e13e3).
// Without the tail, lane g < count also fetches plane g's bytes of the item after next
// into the L2 (prefetch_item_l2), so that each SM has more of the planes on the way than
// its warps hold in registers (one item ahead), where each warp has at least
// kCombinePrefetchMinRounds items. In the tail instances its registers spill (8 bytes) and
// it ran 1-6 % slower on an H100 where the rows are line-aligned.
template <int kLimbs, bool kTail>
__global__ void __launch_bounds__(kMmaCombineThreads, 4)
crt_residue_mma_kernel(const __grid_constant__ CrtArgs a, const __grid_constant__ CrtConstants consts,
                       const __grid_constant__ CrtReduce red) {
  constexpr int kWarps = kMmaCombineThreads / 32;
  constexpr int kTiles = (kLimbBytes + 1) / 2;  // n-tiles of 8 columns: 2 bytes of 4 limbs
  constexpr int kRows = kMmaCombineBytes;       // entries of a lane group
  static_assert(kMaxLimbs <= 4 && kTiles <= 4, "a limb per lane of a group, 2 bytes per n-tile");
  static_assert(kMmaCombineItem == 8 * kRows, "8 lane groups per item");
  static_assert(kMaxLimbs == 4 && kRows == 16, "the swap's offsets: 4 limbs, 4 x 4 entries");
  static_assert(kMaxModuli <= 20, "16 moduli and a tail of one per lane");
  __shared__ double swap[kWarps][8 * kSwapGroupWords];
  const int lane = threadIdx.x % 32;
  const int q = lane / 4;
  const int t = lane % 4;
  const int count = consts.count;
  auto weight = [&](int g, int u) {  // the weight byte of modulus g in column q of n-tile u
    return g < count && q / 2 < kLimbs ? crt_weight_byte(consts, g, q / 2, tile_byte(u, q % 2)) : 0u;
  };
  uint32_t weights[kTiles];
  uint32_t tail_weights[kTiles];
  const unsigned char* planes[4];
  bool real[4];  // modulus 4t + p < count (else its bytes are 0)
#pragma unroll
  for (int u = 0; u < kTiles; ++u) {
    uint32_t w = 0;
#pragma unroll
    for (int p = 0; p < 4; ++p) w |= weight(4 * t + p, u) << (8 * p);
    weights[u] = w;
    tail_weights[u] = kTail ? weight(16 + t, u) : 0u;
  }
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const int g = 4 * t + p;
    real[p] = g < count;
    planes[p] = a.x + red.plane[g < count ? g : 0];
  }
  const bool tail_real = kTail && 16 + t < count;
  const unsigned char* const tail_plane = a.x + red.plane[tail_real ? 16 + t : 0];
  const bool plain = plain_output(a);
  double* const put = &swap[threadIdx.x / 32][swap_word(q, 0, t)];       // + swap_word(0, e, 0)
  const double* const get = &swap[threadIdx.x / 32][swap_word(q, 4 * t, 0)];  // + swap_word(0, r, l)
  const int64_t blocks = (a.n + kMmaCombineItem - 1) / kMmaCombineItem;  // items per row
  const int64_t items = a.m * blocks;
  const int64_t step = int64_t(gridDim.x) * kWarps;
  const int64_t step_rows = step / blocks;
  const int64_t step_cols = step - step_rows * blocks;
  // The item this warp loads next, as (row, column block), stepped without a division.
  int64_t item = blockIdx.x * int64_t(kWarps) + threadIdx.x / 32;
  // Whether an item must test its row's and columns' non-finite counts (any_flagged, two
  // loads per lane that wait at the store): not where the launch is plain and neither
  // the block's columns (all n) nor the rows of the warp's items are flagged, found once
  // up front. Launches that are not plain test in store_entries; so do the tail's
  // instances (one more live value spilled there).
  bool flagged = kTail || a.nf.row_flags != nullptr;
  if (!kTail && plain && flagged) flagged = columns_flagged(a.nf, a.n) || rows_flagged(a.nf, item, step, items, blocks);
  int64_t i = item / blocks;
  int64_t jb = item - i * blocks;
  // Each plane's 16 bytes of entries j .. j + 15 (0 where its modulus is not real).
  auto gather = [&](const unsigned char* plane, bool is_real, int64_t offset, int64_t j) {
    uint32_t v[4] = {0u, 0u, 0u, 0u};
    if (item < items && is_real) {
      const unsigned char* src = plane + offset;
      for (int e = 0; e < kRows && j + e < a.n; ++e) v[e / 4] |= uint32_t(src[e]) << (8 * (e % 4));
    }
    return make_uint4(v[0], v[1], v[2], v[3]);
  };
  auto load = [&](uint4 (&w)[4], uint4& tail) {
    const int64_t j = jb * kMmaCombineItem + kRows * q;
    const int64_t offset = i * a.ld + j;
    if (item < items && a.vector_loads && j + kRows <= a.n) {
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        w[p] = real[p] ? __ldcs(reinterpret_cast<const uint4*>(planes[p] + offset)) : make_uint4(0u, 0u, 0u, 0u);
      }
      if (kTail) {
        tail = tail_real ? __ldcs(reinterpret_cast<const uint4*>(tail_plane + offset)) : make_uint4(0u, 0u, 0u, 0u);
      }
    } else {
#pragma unroll
      for (int p = 0; p < 4; ++p) w[p] = gather(planes[p], real[p], offset, j);
      if (kTail) tail = gather(tail_plane, tail_real, offset, j);
    }
  };
  const bool prefetcher = !kTail && lane < count && items >= kCombinePrefetchMinRounds * step;
  const unsigned char* const prefetch_plane = a.x + red.plane[prefetcher ? lane : 0];
  uint4 words[4];
  uint4 tail_word = make_uint4(0u, 0u, 0u, 0u);
  load(words, tail_word);
  while (item < items) {
    const int64_t row = i;
    const int64_t j0 = jb * kMmaCombineItem;
    item += step;  // the next item
    i += step_rows;
    jb += step_cols;
    if (jb >= blocks) {
      jb -= blocks;
      ++i;
    }
    uint4 next[4];
    uint4 next_tail = make_uint4(0u, 0u, 0u, 0u);
    load(next, next_tail);
    if (!kTail) {  // the item after next: its planes' bytes into the L2
      int64_t i2 = i + step_rows;
      int64_t jb2 = jb + step_cols;
      if (jb2 >= blocks) {
        jb2 -= blocks;
        ++i2;
      }
      if (prefetcher && item + step < items) {
        const int64_t j2 = jb2 * kMmaCombineItem;
        const unsigned char* p = prefetch_plane + i2 * a.ld + j2;
        prefetch_item_l2(p, p + (j2 + kMmaCombineItem <= a.n ? kMmaCombineItem : a.n - j2) - 1);
      }
    }
    double sums[kRows];  // S_t of the group's entries 16q + e
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      uint32_t x[4];
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const uint4& w = words[p];
        x[p] = h == 0 ? w.x : h == 1 ? w.y : h == 2 ? w.z : w.w;
      }
      transpose_bytes_4x4(x);  // x[e]: entry 16q + 4h + e's moduli 4t ..
      uint32_t xt[4] = {0u, 0u, 0u, 0u};  // the tail: entry 16q + 4h + e's modulus 16 + t in byte 0
      if (kTail) {
        const uint32_t w = h == 0 ? tail_word.x : h == 1 ? tail_word.y : h == 2 ? tail_word.z : tail_word.w;
#pragma unroll
        for (int e = 0; e < 4; ++e) xt[e] = (w >> (8 * e)) & 0xffu;
      }
#pragma unroll
      for (int v = 0; v < 2; ++v) {
        uint32_t bytes[2][kLimbBytes];
#pragma unroll
        for (int u = 0; u < kTiles; ++u) {
          int32_t d[4] = {0, 0, 0, 0};
          mma_u8_m16n8k16(d, x[2 * v], x[2 * v + 1], weights[u]);
          if (kTail) mma_u8_m16n8k16(d, xt[2 * v], xt[2 * v + 1], tail_weights[u]);
#pragma unroll
          for (int r = 0; r < 2; ++r) {
#pragma unroll
            for (int col = 0; col < 2; ++col) {
              if (tile_byte(u, col) < kLimbBytes) bytes[r][tile_byte(u, col)] = static_cast<uint32_t>(d[2 * r + col]);
            }
          }
        }
        sums[4 * h + 2 * v] = limb_from_byte_sums(bytes[0]);
        sums[4 * h + 2 * v + 1] = limb_from_byte_sums(bytes[1]);
      }
    }
#pragma unroll
    for (int e = 0; e < kRows; ++e) put[swap_word(0, e, 0)] = sums[e];
    __syncwarp();
    double limb_sums[4][kMaxLimbs] = {};
#pragma unroll
    for (int r = 0; r < 4; ++r) {
#pragma unroll
      for (int l = 0; l < kLimbs; ++l) limb_sums[r][l] = get[swap_word(0, r, l)];
    }
    __syncwarp();  // every lane read its limbs before the next item's writes
    const int64_t j = j0 + 4 * lane;
    if (plain && j + 4 <= a.n && (!flagged || !any_flagged<4>(a, row, j, true))) {
      store_entries<kLimbs, 4, true>(a, consts, row, j, limb_sums);
    } else if (j < a.n) {
      store_entries<kLimbs, 4>(a, consts, row, j, limb_sums);
    }
#pragma unroll
    for (int p = 0; p < 4; ++p) words[p] = next[p];
    tail_word = next_tail;
  }
}

// --- host launchers (stage_launch.cuh's checks, then the launch) ---------------------
inline int check_constants(const char* what, const CrtConstants* consts, Message& err) {
  if (consts == nullptr) return err.set(kBadArgument, "%s: consts is null", what);
  if (consts->count < 1 || consts->count > kMaxModuli) {
    return err.set(kBadArgument, "%s: consts->count=%d outside [1, %d]", what, consts->count,
                   kMaxModuli);
  }
  if (consts->limbs != kLimbsOfCount[consts->count]) {  // the launchers' instances rely on it
    return err.set(kBadArgument, "%s: consts->limbs=%d, but the product of %d moduli takes %d limbs", what,
                   consts->limbs, consts->count, kLimbsOfCount[consts->count]);
  }
  if (consts->limb_scales[consts->limbs - 1] != 1.0) {  // crt_finish_limbs leaves it out
    return err.set(kBadArgument, "%s: consts->limb_scales[%d]=%g, not 1 (the last limb's scale)", what,
                   consts->limbs - 1, consts->limb_scales[consts->limbs - 1]);
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

// Whether a count with a tail (moduli 17 and up) takes `limbs` limbs: check_constants proved
// limbs == kLimbsOfCount[count], so the tail instances of other limb counts never run.
constexpr bool tail_takes(int limbs) {
  for (int count = 17; count <= kMaxModuli; ++count) {
    if (kLimbsOfCount[count] == limbs) return true;
  }
  return false;
}

template <int kSource, int kLimbs>
inline void launch_crt_kernel(const CrtArgs& args, const CrtConstants& consts, const CrtReduce& red,
                              cudaStream_t stream) {
  if constexpr (kSource == kFromResidueBytes) {
    const int64_t items = args.m * ((args.n + kMmaCombineItem - 1) / kMmaCombineItem);
    auto launch = [&](auto kernel) {
      const int64_t blocks = resident_blocks(kernel, kMmaCombineThreads, items, kMmaCombineThreads / 32);
      kernel<<<blocks, kMmaCombineThreads, 0, stream>>>(args, consts, red);
    };
    if constexpr (tail_takes(kLimbs)) {  // else no count of this kLimbs has a tail
      if (consts.count > 16) {
        launch(crt_residue_mma_kernel<kLimbs, true>);
        return;
      }
    }
    launch(crt_residue_mma_kernel<kLimbs, false>);
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
  switch (consts.limbs) {  // check_constants proved limbs == kLimbsOfCount[count], in [1, kMaxLimbs]
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
  // bytes: 16-byte loads of 16 (crt_residue_mma_kernel)
  const bool vector_loads = aligned16(x) && ldx % (residue_bytes ? kMmaCombineBytes : 4) == 0 &&
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
