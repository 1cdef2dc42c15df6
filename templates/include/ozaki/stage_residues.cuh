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
// per SM). Each warp takes one path for its 32 x 16 entries, by its largest e: 0 (four
// pieces with the 1/4), <= kWide4MaxExp (four wide pieces, no table), <= kWideMaxExp
// (five), else the table.

// Karatsuba's parts (residues_kernel<true>): each vector's entries 2l and 2l + 1 are Re and
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

// Modulus g's 16 residue bytes of one chunk (four words), stored where the lane is active.
// kPlain: every lane of the warp is, and stores 16 aligned bytes (no test).
template <bool kParts, bool kPlain>
__device__ inline void store_residue_words(const ResidueArgs& a, const uint32_t (&words)[4], int g, int8_t* dst,
                                           bool active, const uint32_t* s_m) {
  if constexpr (kPlain) {
    *reinterpret_cast<uint4*>(dst + g * a.plane_stride) = make_uint4(words[0], words[1], words[2], words[3]);
  } else if (!active) {
    return;
  } else if constexpr (kParts) {
    store_parts(words, static_cast<int>(s_m[g]), a.parts.im_first, dst + g * a.plane_stride, a.parts.part_stride);
  } else {
    store_chunk(dst + g * a.plane_stride, make_uint4(words[0], words[1], words[2], words[3]), a.vector_stores);
  }
}

// The nmod 16-byte stores of one chunk whose warp has every e <= kWideMaxExp (and one
// e > 0): the wide pieces, kPieces - 1 FFMAs and residue_word per entry and modulus
// (kPieces 4: every e <= kWide4MaxExp). kPlain as for store_residue_words.
template <bool kParts, int kPieces, bool kPlain>
__device__ inline void write_wide_planes(const ResidueArgs& a, const WidePieces (&w)[kChunk], int8_t* dst,
                                         bool active, const WideModulus* s_wide, const uint32_t* s_m) {
  for (int g = 0; g < a.nmod; ++g) {
    const WideModulus k = s_wide[g];
    uint32_t words[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      words[q] = pack_bytes(residue_wide<kPieces>(w[4 * q], k), residue_wide<kPieces>(w[4 * q + 1], k),
                            residue_wide<kPieces>(w[4 * q + 2], k), residue_wide<kPieces>(w[4 * q + 3], k));
    }
    store_residue_words<kParts, kPlain>(a, words, g, dst, active, s_m);
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
  for (int g = 0; g < a.nmod; ++g) {
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
    store_residue_words<kParts, kPlain>(a, words, g, dst, active, s_m);
  }
}

// The table's bases per modulus: 2^(16 j) mod m for 16 j < kPow2Table.
inline constexpr int kPow2Bases = kPow2Table / 16;
static_assert(kPow2Table % 16 == 0, "the table's bases are 16 exponents apart");

template <bool kParts>
__global__ void __launch_bounds__(kThreads)
residues_kernel(const __grid_constant__ ResidueArgs a) {
  __shared__ FloatModulus s_mod[kMaxModuli];
  __shared__ WideModulus s_wide[kMaxModuli];
  __shared__ uint32_t s_m[kMaxModuli];
  __shared__ float s_pow2[kPow2Table * kMaxModuli];  // [e][modulus]
  __shared__ uint32_t s_base[kMaxModuli][kPow2Bases];  // 2^(16 j) mod m
  // Every block builds these, and every warp waits for them: square and multiply once per
  // base, then one remainder per entry (pow2_factor_from_base), the constants from the bases.
  for (int t = threadIdx.x; t < a.nmod * kPow2Bases; t += blockDim.x) {
    s_base[t / kPow2Bases][t % kPow2Bases] =
        pow2_mod(16 * (t % kPow2Bases), static_cast<uint32_t>(a.moduli[t / kPow2Bases]));
  }
  __syncthreads();
  for (int t = threadIdx.x; t < a.nmod * kPow2Table; t += blockDim.x) {
    const int g = t / kPow2Table;
    const int e = t % kPow2Table;
    const uint32_t m = static_cast<uint32_t>(a.moduli[g]);
    s_pow2[e * kMaxModuli + g] = pow2_factor_from_base(s_base[g][e / 16], e, m);
  }
  for (int g = threadIdx.x; g < a.nmod; g += blockDim.x) {
    const uint32_t m = static_cast<uint32_t>(a.moduli[g]);
    const auto factor = [&](int e) { return pow2_factor_from_base(s_base[g][e / 16], e, m); };
    s_mod[g] = float_modulus(m, factor);
    s_wide[g] = wide_modulus(m, factor);
    s_m[g] = m;
  }
  __syncthreads();

  OZAKI_FOR_EACH_WARP_SLOT(c, a.grid.slots) {
    int64_t v = 0, l0 = 0;
    if (c < a.grid.slots) chunk_position(a.grid, c, v, l0);
    const bool active = c < a.grid.slots && v < a.grid.rows_pad;
    // the entries and their t (entry_bits); each entry's e (entry_exp) first, its integer
    // once the warp's route is known: without a branch on the routes of e <= kWideMaxExp
    double x[kChunk];
    int32_t t[kChunk];
    int emax = 0;
    {
      if (active) {
        load_chunk(a.xs, a.grid.vector_loads, v, l0, x);
      } else {
#pragma unroll
        for (int i = 0; i < kChunk; ++i) x[i] = 0.0;
      }
      const int32_t shift = active && v < a.xs.nvec ? a.shifts[kParts ? v * a.parts.shift_step : v] : 0;
      if (a.xs.inner != nullptr) {
        load_shifts(a.xs, l0, t);
#pragma unroll
        for (int i = 0; i < kChunk; ++i) t[i] = clamped_shift(t[i] + shift);
      } else {
#pragma unroll
        for (int i = 0; i < kChunk; ++i) t[i] = clamped_shift(shift);
      }
#pragma unroll
      for (int i = 0; i < kChunk; ++i) {
        const EntryBits b = entry_bits_clamped(x[i], t[i]);
        t[i] = b.t;
        const int e = entry_exp(b);
        emax = e > emax ? e : emax;
      }
    }
#pragma unroll
    for (int d = 1; d < kWarp; d *= 2) {
      const int other = __shfl_xor_sync(0xffffffffu, emax, d);
      emax = other > emax ? other : emax;
    }
    int8_t* dst = a.out + v * a.row_stride + (kParts ? l0 / 2 : l0);
    // every lane of the warp stores whole aligned chunks: the modulus loops without the tests
    const bool plain = !kParts && __all_sync(0xffffffffu, active && a.vector_stores);
    const auto stores = [&](const auto& write) {
      if constexpr (!kParts) {
        if (plain) return write(std::true_type{});
      }
      write(std::false_type{});
    };
    if (emax > 0 && emax <= kWideMaxExp) {
      WidePieces w[kChunk];
#pragma unroll
      for (int i = 0; i < kChunk; ++i) w[i] = wide_pieces(wide_integer(entry_bits_at(x[i], t[i])));
      if (emax <= kWide4MaxExp) {
        stores([&](auto kPlain) { write_wide_planes<kParts, 4, kPlain>(a, w, dst, active, s_wide, s_m); });
      } else {
        stores([&](auto kPlain) { write_wide_planes<kParts, 5, kPlain>(a, w, dst, active, s_wide, s_m); });
      }
      continue;
    }
    Pieces p[kChunk];
    int e[kChunk];
    if (emax == 0) {
#pragma unroll
      for (int i = 0; i < kChunk; ++i) {
        p[i] = residue_pieces(scaled_small(entry_bits_at(x[i], t[i])), true);  // e == 0: the pieces carry the 1/4
        e[i] = 0;
      }
      stores([&](auto kPlain) { write_residue_planes<0, kParts, kPlain>(a, p, e, dst, active, s_mod, s_pow2, s_m); });
      continue;
    }
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      const ScaledInteger sv = scaled_integer(x[i], entry_shift(x[i], t[i]));
      p[i] = residue_pieces(sv, false);
      e[i] = sv.exp;
    }
    if (emax < kPow2Table) {
      stores([&](auto kPlain) { write_residue_planes<1, kParts, kPlain>(a, p, e, dst, active, s_mod, s_pow2, s_m); });
    } else {
      stores([&](auto kPlain) { write_residue_planes<2, kParts, kPlain>(a, p, e, dst, active, s_mod, s_pow2, s_m); });
    }
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
  const int64_t blocks = resident_blocks(residues_kernel<false>, kThreads, grid.slots, kThreads);
  residues_kernel<false><<<blocks, kThreads, 0, stream>>>(args);
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
  const int64_t blocks = resident_blocks(residues_kernel<true>, kThreads, grid.slots, kThreads);
  residues_kernel<true><<<blocks, kThreads, 0, stream>>>(args);
  return check_launch(err, what);
}

}  // namespace stages
}  // namespace ozaki
