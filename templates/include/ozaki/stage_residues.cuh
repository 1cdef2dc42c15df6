// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The residue stages: P_residues and P_residues_strided (trunc(2^shift x) mods m_g as
// int8, on the FP32 pipe: residue_arith.h), P_residues_karatsuba (the same residues of a
// realified complex operand, written as Karatsuba's three parts) and P_pack (a vector set
// copied to contiguous vectors): kernels and host launchers.

#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

#include "ozaki/constants.h"
#include "ozaki/karatsuba_arith.h"
#include "ozaki/residue_arith.h"
#include "ozaki/stage_common.cuh"
#include "ozaki/stage_launch.cuh"

namespace ozaki {
namespace stages {

// --- residues ------------------------------------------------------------------------
// Per modulus: the float constants (FloatModulus, WideModulus) and the table f(e) = 2^e
// mods m for e < kPow2Table, built in shared memory by every block (persistent grid: a few
// per SM; ResidueTables). Each warp takes one path for its 32 x 16 entries, by its largest e: 0 (four
// pieces with the 1/4), <= kWide4MaxExp (four wide pieces, no table), <= kWideMaxExp
// (five), else the table.

// Karatsuba's parts (the residue kernels with kParts): each vector's entries 2l and 2l + 1 are Re and
// Im of complex entry l (Im first where im_first: Bhat's odd columns hold Im b at their even
// rows), and part q (0: Re, 1: Im, 2: Re + Im mods m_g) of complex entry l goes to
// out[q * part_stride + g * plane_stride + v * row_stride + l]: a chunk's 16 entries are 8
// complex ones, three 8-byte stores per modulus. shifts[v * shift_step] is vector v's shift.
struct KaratsubaParts {
  int64_t part_stride;
  int64_t shift_step;
  bool im_first;
};

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
  KaratsubaParts parts;
};

// The three parts of 8 complex entries from the 16 residue bytes of their Re/Im pairs.
__device__ inline void store_parts(const uint32_t (&words)[4], int m, bool im_first, int8_t* dst,
                                   int64_t part_stride) {
  // bytes 0, 2, .. 14 and 1, 3, .. 15 of the chunk, four per word
  const uint32_t even[2] = {__byte_perm(words[0], words[1], 0x6420), __byte_perm(words[2], words[3], 0x6420)};
  const uint32_t odd[2] = {__byte_perm(words[0], words[1], 0x7531), __byte_perm(words[2], words[3], 0x7531)};
  const uint2 re = im_first ? make_uint2(odd[0], odd[1]) : make_uint2(even[0], even[1]);
  const uint2 im = im_first ? make_uint2(even[0], even[1]) : make_uint2(odd[0], odd[1]);
  uint32_t sum[2] = {0u, 0u};
#pragma unroll
  for (int t = 0; t < 8; ++t) {
    const uint32_t rw = t < 4 ? re.x : re.y, iw = t < 4 ? im.x : im.y;
    const int r = static_cast<int8_t>((rw >> (8 * (t % 4))) & 0xffu);
    const int s = static_cast<int8_t>((iw >> (8 * (t % 4))) & 0xffu);
    sum[t / 4] |= (static_cast<uint32_t>(symmetric_sum(r, s, m)) & 0xffu) << (8 * (t % 4));
  }
  *reinterpret_cast<uint2*>(dst) = re;
  *reinterpret_cast<uint2*>(dst + part_stride) = im;
  *reinterpret_cast<uint2*>(dst + 2 * part_stride) = make_uint2(sum[0], sum[1]);
}

// The float at a shared-window address.
__device__ inline float shared_float(uint32_t address) {
  float f;
  asm("ld.shared.f32 %0, [%1];" : "=f"(f) : "r"(address));
  return f;
}

// Modulus g's 16 residue bytes of one chunk (four words), stored at `plane` (the chunk's
// place in g's plane) where the lane is active. kPlain: every lane of the warp is, and
// stores 16 aligned bytes (no test).
template <bool kParts, bool kPlain>
__device__ inline void store_residue_words(const ResidueArgs& a, const uint32_t (&words)[4], int g, int8_t* plane,
                                           bool active, const uint32_t* s_m) {
  if constexpr (kPlain) {
    *reinterpret_cast<uint4*>(plane) = make_uint4(words[0], words[1], words[2], words[3]);
  } else if (!active) {
    return;
  } else if constexpr (kParts) {
    store_parts(words, static_cast<int>(s_m[g]), a.parts.im_first, plane, a.parts.part_stride);
  } else {
    store_chunk(plane, make_uint4(words[0], words[1], words[2], words[3]), a.vector_stores);
  }
}

// The nmod 16-byte stores of one chunk whose warp has every e <= kWideMaxExp (and one
// e > 0): the wide pieces, kPieces - 1 FFMAs and residue_word per entry and modulus
// (kPieces 4: every e <= kWide4MaxExp). kPlain as for store_residue_words.
template <bool kParts, int kPieces, bool kPlain>
__device__ inline void write_wide_planes(const ResidueArgs& a, const WidePieces (&w)[kChunk], int8_t* dst,
                                         bool active, const WideModulus* s_wide, const uint32_t* s_m) {
  int8_t* plane = dst;  // modulus g's, one plane_stride on per modulus
  for (int g = 0; g < a.nmod; ++g, plane += a.plane_stride) {
    const WideModulus k = s_wide[g];
    uint32_t words[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      words[q] = pack_bytes(residue_wide<kPieces>(w[4 * q], k), residue_wide<kPieces>(w[4 * q + 1], k),
                            residue_wide<kPieces>(w[4 * q + 2], k), residue_wide<kPieces>(w[4 * q + 3], k));
    }
    store_residue_words<kParts, kPlain>(a, words, g, plane, active, s_m);
  }
}

// The nmod 16-byte stores of one chunk. kPath 0: every e of the warp is 0 (pieces carry
// the 1/4); 1: every e < kPow2Table; 2: anything (f computed for e >= kPow2Table). kPlain as
// for store_residue_words.
template <int kPath, bool kParts, bool kPlain>
__device__ inline void write_residue_planes(const ResidueArgs& a, const Pieces (&p)[kChunk],
                                            const int (&e)[kChunk], int8_t* dst, bool active,
                                            const FloatModulus* s_mod, const float* s_pow2,
                                            const uint32_t* s_m) {
  // s_pow2 is [e][modulus]: entry i's factor for modulus g is at the shared-window address
  // rows[i] (row e[i], modulus g), which moves on by one float per modulus
  uint32_t rows[kChunk];
#pragma unroll
  for (int i = 0; i < kChunk; ++i) {
    rows[i] = static_cast<uint32_t>(__cvta_generic_to_shared(s_pow2)) +
              static_cast<uint32_t>((e[i] < kPow2Table ? e[i] : 0) * kMaxModuli * sizeof(float));
  }
  int8_t* plane = dst;  // modulus g's, one plane_stride on per modulus
  for (int g = 0; g < a.nmod; ++g, plane += a.plane_stride) {
    const FloatModulus k = s_mod[g];
    uint32_t words[4];
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      uint32_t b[4];
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const int i = 4 * w + t;
        if constexpr (kPath == 0) {
          b[t] = residue_e0(p[i], k);
        } else {
          float f;
          if constexpr (kPath == 1) {
            f = shared_float(rows[i]);
          } else {
            f = e[i] < kPow2Table ? shared_float(rows[i]) : pow2_factor(e[i], s_m[g]);
          }
          b[t] = residue_scaled(p[i], f, k);
        }
      }
      words[w] = pack_bytes(b[0], b[1], b[2], b[3]);
    }
#pragma unroll
    for (int i = 0; i < kChunk; ++i) rows[i] += sizeof(float);
    store_residue_words<kParts, kPlain>(a, words, g, plane, active, s_m);
  }
}

// The tables every block builds in shared memory: per modulus the float constants
// (FloatModulus, WideModulus), m itself, f(e) = 2^e mods m for e < kPow2Table ([e][modulus])
// and the bases it is built from, 2^(16 j) mod m.
inline constexpr int kPow2Bases = kPow2Table / 16;
static_assert(kPow2Table % 16 == 0, "the table's bases are 16 exponents apart");

struct ResidueTables {
  FloatModulus mod[kMaxModuli];
  WideModulus wide[kMaxModuli];
  uint32_t m[kMaxModuli];
  float pow2[kPow2Table * kMaxModuli];
  uint32_t base[kMaxModuli][kPow2Bases];
};

// Every block builds them, and every warp waits for them (the __syncthreads inside): square
// and multiply once per base, then one remainder per entry (pow2_factor_from_base), the
// constants from the bases.
__device__ inline void build_residue_tables(const ResidueArgs& a, ResidueTables& T) {
  for (int t = threadIdx.x; t < a.nmod * kPow2Bases; t += blockDim.x) {
    T.base[t / kPow2Bases][t % kPow2Bases] =
        pow2_mod(16 * (t % kPow2Bases), static_cast<uint32_t>(a.moduli[t / kPow2Bases]));
  }
  __syncthreads();
  for (int t = threadIdx.x; t < a.nmod * kPow2Table; t += blockDim.x) {
    const int g = t / kPow2Table;
    const int e = t % kPow2Table;
    const uint32_t m = static_cast<uint32_t>(a.moduli[g]);
    T.pow2[e * kMaxModuli + g] = pow2_factor_from_base(T.base[g][e / 16], e, m);
  }
  for (int g = threadIdx.x; g < a.nmod; g += blockDim.x) {
    const uint32_t m = static_cast<uint32_t>(a.moduli[g]);
    const auto factor = [&](int e) { return pow2_factor_from_base(T.base[g][e / 16], e, m); };
    T.mod[g] = float_modulus(m, factor);
    T.wide[g] = wide_modulus(m, factor);
    T.m[g] = m;
  }
  __syncthreads();
}

// What a lane reads for its chunk slot c: the position (v, l0), whether it lies inside the
// grid's rows, its 16 entries (0 outside) and its vector's shift (0 past nvec).
struct ChunkInput {
  int64_t v;
  int64_t l0;
  bool active;
  int32_t shift;
  double x[kChunk];
};

template <bool kParts>
__device__ inline void load_chunk_input(const ResidueArgs& a, int64_t c, ChunkInput& in) {
  in.v = 0;
  in.l0 = 0;
  if (c < a.grid.slots) chunk_position(a.grid, c, in.v, in.l0);
  in.active = c < a.grid.slots && in.v < a.grid.rows_pad;
  if (in.active) {
    load_chunk(a.xs, a.grid.vector_loads, in.v, in.l0, in.x);
  } else {
#pragma unroll
    for (int i = 0; i < kChunk; ++i) in.x[i] = 0.0;
  }
  in.shift = in.active && in.v < a.xs.nvec ? a.shifts[kParts ? in.v * a.parts.shift_step : in.v] : 0;
}

// The nmod stores of one chunk from its input: the entries' t (entry_bits) and e
// (entry_exp) first, the route by the warp's largest e, then each entry's integer once the
// route is known (without a branch on the routes of e <= kWideMaxExp). Every lane of the
// warp calls it (warp votes inside).
template <bool kParts>
__device__ __forceinline__ void residue_chunk(const ResidueArgs& a, const ChunkInput& in, const ResidueTables& T) {
  int32_t t[kChunk];
  if (a.xs.inner != nullptr) {
    load_shifts(a.xs, in.l0, t);
#pragma unroll
    for (int i = 0; i < kChunk; ++i) t[i] = clamped_shift(t[i] + in.shift);
  } else {
#pragma unroll
    for (int i = 0; i < kChunk; ++i) t[i] = clamped_shift(in.shift);
  }
  int emax = 0;
#pragma unroll
  for (int i = 0; i < kChunk; ++i) {
    const EntryBits b = entry_bits_clamped(in.x[i], t[i]);
    t[i] = b.t;
    const int e = entry_exp(b);
    emax = e > emax ? e : emax;
  }
#pragma unroll
  for (int d = 1; d < kWarp; d *= 2) {
    const int other = __shfl_xor_sync(0xffffffffu, emax, d);
    emax = other > emax ? other : emax;
  }
  int8_t* dst = a.out + in.v * a.row_stride + (kParts ? in.l0 / 2 : in.l0);
  // every lane of the warp stores whole aligned chunks: the modulus loops without the tests
  const bool plain = !kParts && __all_sync(0xffffffffu, in.active && a.vector_stores);
  const auto stores = [&](const auto& write) {
    if constexpr (!kParts) {
      if (plain) return write(std::true_type{});
    }
    write(std::false_type{});
  };
  if (emax > 0 && emax <= kWideMaxExp) {
    WidePieces w[kChunk];
#pragma unroll
    for (int i = 0; i < kChunk; ++i) w[i] = wide_pieces(wide_integer(entry_bits_at(in.x[i], t[i])));
    if (emax <= kWide4MaxExp) {
      stores([&](auto kPlain) { write_wide_planes<kParts, 4, kPlain>(a, w, dst, in.active, T.wide, T.m); });
    } else {
      stores([&](auto kPlain) { write_wide_planes<kParts, 5, kPlain>(a, w, dst, in.active, T.wide, T.m); });
    }
    return;
  }
  Pieces p[kChunk];
  int e[kChunk];
  if (emax == 0) {
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      p[i] = residue_pieces(scaled_small(entry_bits_at(in.x[i], t[i])), true);  // e == 0: the pieces carry the 1/4
      e[i] = 0;
    }
    stores([&](auto kPlain) { write_residue_planes<0, kParts, kPlain>(a, p, e, dst, in.active, T.mod, T.pow2, T.m); });
    return;
  }
#pragma unroll
  for (int i = 0; i < kChunk; ++i) {
    const ScaledInteger sv = scaled_integer(in.x[i], entry_shift(in.x[i], t[i]));
    p[i] = residue_pieces(sv, false);
    e[i] = sv.exp;
  }
  if (emax < kPow2Table) {
    stores([&](auto kPlain) { write_residue_planes<1, kParts, kPlain>(a, p, e, dst, in.active, T.mod, T.pow2, T.m); });
  } else {
    stores([&](auto kPlain) { write_residue_planes<2, kParts, kPlain>(a, p, e, dst, in.active, T.mod, T.pow2, T.m); });
  }
}

// The residues, one chunk per lane and pass: each warp's 32 chunks read, then their
// arithmetic (16 warps per SM at 128 registers). Launched where the grid has few passes
// (launch_residues).
template <bool kParts>
__global__ void __launch_bounds__(kThreads)
residues_kernel(const __grid_constant__ ResidueArgs a) {
  __shared__ ResidueTables T;
  build_residue_tables(a, T);
  OZAKI_FOR_EACH_WARP_SLOT(c, a.grid.slots) {
    ChunkInput in;
    load_chunk_input<kParts>(a, c, in);
    residue_chunk<kParts>(a, in, T);
  }
}

// The same with the next pass's chunk read before this pass's arithmetic, so that its load
// latency overlaps the arithmetic: 32 registers more (168 in all), 12 warps per SM. 3-7 %
// faster where each warp makes many passes; with few, the kernel of more warps is faster
// (2026-12-04, docs/stages/residues.md).
inline constexpr int kAheadThreads = 128;
inline constexpr int kAheadBlocksPerSm = 3;

template <bool kParts>
__global__ void __launch_bounds__(kAheadThreads, kAheadBlocksPerSm)
residues_ahead_kernel(const __grid_constant__ ResidueArgs a) {
  __shared__ ResidueTables T;
  build_residue_tables(a, T);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int lane = threadIdx.x % kWarp;
  int64_t base = (int64_t(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp) * kWarp;  // the warp's
  if (base >= a.grid.slots) return;
  ChunkInput in;
  load_chunk_input<kParts>(a, base + lane, in);
  for (; base < a.grid.slots; base += stride) {
    ChunkInput next;  // past the last pass: inactive, nothing read
    load_chunk_input<kParts>(a, base + stride + lane, next);
    residue_chunk<kParts>(a, in, T);
    in = next;
  }
}

// A residues grid launched: the look-ahead kernel where its warps make at least
// kAheadMinPasses passes (measured: 5 passes faster, 2.6 slower at 15 moduli), else the
// kernel of more warps.
inline constexpr int64_t kAheadMinPasses = 4;

template <bool kParts>
inline void launch_residues(const ResidueArgs& args, cudaStream_t stream) {
  // its resident blocks: from kAheadMinPasses passes on, the work always fills them
  const int64_t capacity = resident_capacity(reinterpret_cast<const void*>(residues_ahead_kernel<kParts>),
                                             kAheadThreads, 0);
  if (args.grid.slots >= kAheadMinPasses * capacity * kAheadThreads) {
    residues_ahead_kernel<kParts><<<capacity, kAheadThreads, 0, stream>>>(args);
  } else {
    const int64_t blocks = resident_blocks(residues_kernel<kParts>, kThreads, args.grid.slots, kThreads);
    residues_kernel<kParts><<<blocks, kThreads, 0, stream>>>(args);
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

// --- host launchers (stage_launch.cuh's checks, then the launch) ---------------------
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
                            const int32_t* inner, const int32_t* shifts, int nmod, const int32_t* moduli, int8_t* out,
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
  const VectorSet xs{x, nvec, k, vs, es, inner};
  const ChunkGrid grid = chunk_grid(xs, rows_pad, k_pad);
  if (grid.slots == 0) return kOk;
  ResidueArgs args{xs, shifts, nmod, moduli, out, row_stride, plane_stride, grid,
                   aligned16(out) && row_stride % 16 == 0 && plane_stride % 16 == 0, KaratsubaParts{}};
  launch_residues<false>(args, stream);
  return check_launch(err, what);
}

inline int residues(const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es,
                    const int32_t* inner, const int32_t* shifts, int nmod, const int32_t* moduli, int8_t* out,
                    int64_t rows_pad, int64_t k_pad, cudaStream_t stream, Message& err) {
  if (!product_fits(rows_pad > 0 ? rows_pad : 0, k_pad > 0 ? k_pad : 0, nmod > 0 ? nmod : 1)) {
    return err.set(kBadArgument, "residues: output size rows_pad*k_pad*nmod overflows int64");
  }
  return residues_strided(x, nvec, k, vs, es, inner, shifts, nmod, moduli, out, rows_pad, k_pad, k_pad,
                          rows_pad * k_pad, stream, err);
}

// Karatsuba's parts of a realified operand (x: nvec vectors of k = 2 x complex length,
// Re and Im interleaved): out[q*part + g*plane + v*k_pad + l] for v < rows_pad, l < k_pad
// (k_pad: the complex length padded, a multiple of 16), 0 where v >= nvec or 2l >= k.
inline int residues_karatsuba(const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es,
                              const int32_t* shifts, int64_t shift_step, int nmod, const int32_t* moduli,
                              int8_t* out, int64_t rows_pad, int64_t k_pad, int im_first, int64_t plane,
                              int64_t part, cudaStream_t stream, Message& err) {
  const char* what = "residues_karatsuba";
  if (int s = check_vector_set(what, x, nvec, k, err)) return s;
  if (nmod < 1 || nmod > kMaxModuli) {
    return err.set(kBadArgument, "%s: nmod=%d outside [1, %d]", what, nmod, kMaxModuli);
  }
  if (rows_pad < nvec || k_pad < 0 || k_pad % kKAlignment != 0 || 2 * k_pad < k || shift_step < 1 ||
      plane < rows_pad * k_pad || part < int64_t(nmod) * plane || !product_fits(3, part > 0 ? part : 1)) {
    return err.set(kBadArgument, "%s: inconsistent sizes (nvec=%lld k=%lld rows_pad=%lld k_pad=%lld "
                   "shift_step=%lld plane=%lld part=%lld)", what, static_cast<long long>(nvec),
                   static_cast<long long>(k), static_cast<long long>(rows_pad), static_cast<long long>(k_pad),
                   static_cast<long long>(shift_step), static_cast<long long>(plane), static_cast<long long>(part));
  }
  if (rows_pad == 0 || k_pad == 0) return kOk;
  if ((nvec > 0 && shifts == nullptr) || moduli == nullptr || out == nullptr) {
    return err.set(kBadArgument, "%s: null pointer", what);
  }
  if (!aligned16(out) || plane % 16 != 0 || part % 16 != 0) {
    return err.set(kBadArgument, "%s: out and its plane and part strides must be 16-byte aligned", what);
  }
  const VectorSet xs{x, nvec, k, vs, es};
  const ChunkGrid grid = chunk_grid(xs, rows_pad, 2 * k_pad);
  if (grid.slots == 0) return kOk;
  ResidueArgs args{xs, shifts, nmod, moduli, out, k_pad, plane, grid, false,
                   KaratsubaParts{part, shift_step, im_first != 0}};
  launch_residues<true>(args, stream);
  return check_launch(err, what);
}

}  // namespace stages
}  // namespace ozaki
