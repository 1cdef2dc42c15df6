// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The tile-local prologue prototype (issue 6 item 3): one kernel that replaces the staged
// pipeline's "residues" stage and its batched INT8 GEMM. Each CTA owns one output tile and
// one modulus; it reads float64 tiles of the two vector sets (op(A)'s rows, op(B)'s
// columns, K contiguous), applies the row / column shifts, makes the int8 residues of its
// modulus in registers with the stage kernels' own device functions
// (ozaki/residue_arith.h: scaled_integer, residue_pieces, residue_e0, residue_scaled,
// pack_bytes), stores them to shared memory in CUTLASS's crosswise tensor-op layout and
// runs the warp-level mma.sync m16n8k32 s8 (cutlass::gemm::warp::DefaultMmaTensorOp with
// the wrap-around operator of ozaki/mma_sm80_s8_wrap.h). The int32 planes it writes are
// exactly those of the staged path's batched GEMM over one k chunk, so the staged CRT
// stage consumes them unchanged.
//
// Mainloop (2 shared-memory stages of TileK, register prefetch of half a stage): per
// k-tile, for each half (TileK / 2 of k): issue the float64 loads of the next k-tile's
// half, run the warp MMAs of this k-tile's k-group, then turn the loaded doubles into
// residues and store them into the other stage. One __syncthreads per k-tile.
// The residue of each entry does not depend on how the work is split: every path below is
// the exact symmetric residue (residue_arith.h), as in the residues stage kernel.
//
// Cost (why this is a prototype): the residues of an operand entry are made once per
// output tile it meets and per modulus, i.e. (TileM + TileN) / (TileM TileN) conversions
// per multiply-add (1/64 for 128 x 128), ~40 FP32/INT32 instructions each, against one
// tensor-core multiply-add: the kernel is bound by the conversions, not by the MMAs.
//
// C ABI: ozaki_cutlass.generator.abi.PROLOGUE (one P_run; the template renders its
// prototype from that description).

#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

#include "cutlass/cutlass.h"
#include "cutlass/arch/mma.h"
#include "cutlass/gemm/gemm.h"
#include "cutlass/gemm/warp/default_mma_tensor_op.h"
#include "cutlass/layout/matrix.h"
#include "cutlass/layout/tensor_op_multiplicand_sm75.h"
#include "cutlass/matrix_coord.h"

// Must precede the warp MMA instantiation: supplies the wrap-around s8 MMA.
#include "ozaki/mma_sm80_s8_wrap.h"

#include "ozaki/constants.h"
#include "ozaki/residue_arith.h"
#include "ozaki/stage_launch.cuh"

namespace ozaki {
namespace prologue {

inline constexpr int kPow2Table = stages::kPow2Table;
inline constexpr int kChunk = kPrologueChunk;  // consecutive k entries one thread converts at once
inline constexpr int kStages = 2;               // shared-memory stages of TileK
inline constexpr int kHalves = kPrologueHalves;  // register prefetch: half a stage at a time
inline constexpr int kStagingPad = kPrologueStagingPad;  // int32 words per row of the output staging

struct Moduli {
  int32_t value[kMaxModuli];
};

// One launch. Vector sets as in the stage kernels (element l of vector v at x[v*vs + l*es]).
struct Args {
  const double* a;
  int64_t a_vs, a_es;
  const int32_t* mu;
  const double* b;
  int64_t b_vs, b_es;
  const int32_t* nu;
  int64_t m, n, n_out, k;
  int64_t k_begin, k_end;  // k_end = min(k, k_begin + k_len): entries past it are 0
  int64_t k_tiles;         // ceil(k_len / TileK)
  int nmod;
  Moduli moduli;
  int32_t* c;
  int64_t ldc, plane_stride;
  int64_t tiles_n;
  bool vector_loads_a, vector_loads_b;  // es == 1 and every 4-chunk 16-byte aligned
  bool vector_stores;                   // ldc, plane_stride, c: 16-byte int4 stores
};

template <int TileM, int TileN, int TileK, int WarpM, int WarpN>
struct Kernel {
  using Shape = cutlass::gemm::GemmShape<TileM, TileN, TileK>;
  using WarpShape = cutlass::gemm::GemmShape<WarpM, WarpN, TileK>;
  using InstructionShape = cutlass::gemm::GemmShape<16, 8, 32>;

  // The shared-memory layouts CUTLASS's sm_80 int8 TN mainloop uses (crosswise = TileK),
  // kStages k-tiles side by side along k.
  using SmemLayoutA = cutlass::layout::RowMajorTensorOpMultiplicandCrosswise<8, TileK>;
  using SmemLayoutB = cutlass::layout::ColumnMajorTensorOpMultiplicandCrosswise<8, TileK>;

  using WarpMma = typename cutlass::gemm::warp::DefaultMmaTensorOp<
      WarpShape, InstructionShape, int8_t, SmemLayoutA, int8_t, SmemLayoutB, int32_t,
      cutlass::layout::RowMajor, cutlass::arch::OpMultiplyAdd>::Type;
  static_assert(std::is_same_v<typename WarpMma::MathOperator, cutlass::arch::OpMultiplyAdd>,
                "the warp-level MMA must be the wrap-around s8 MMA, never the saturating one");

  static constexpr int kWarpsM = TileM / WarpM;
  static constexpr int kWarpsN = TileN / WarpN;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kWarpGemmIterations = TileK / InstructionShape::kK;
  static constexpr int kHalfK = TileK / kHalves;
  static constexpr int kChunksPerRow = kHalfK / kChunk;
  static constexpr int kRows = TileM + TileN;  // A's rows then B's rows of one k-tile
  static constexpr int kSlots = kRows * kChunksPerRow / kThreads;  // chunks per thread per half
  static constexpr int kSlotsA = TileM * kChunksPerRow / kThreads;
  static constexpr int kRowStep = kThreads / kChunksPerRow;  // rows between a thread's slots

  static_assert(TileM % WarpM == 0 && TileN % WarpN == 0, "tile must be a multiple of the warp tile");
  static_assert(kWarpGemmIterations == kHalves, "one warp k-group per register half");
  static_assert(kThreads % kChunksPerRow == 0, "a thread keeps its k chunk across its rows");
  static_assert((TileM * kChunksPerRow) % kThreads == 0 && (TileN * kChunksPerRow) % kThreads == 0,
                "each slot of a warp is all A or all B (warp-uniform loads and votes)");
  static_assert(TileN % 4 == 0, "int4 output stores");

  static constexpr int kSmemA = TileM * TileK * kStages;  // bytes
  static constexpr int kSmemB = TileN * TileK * kStages;
  static constexpr int kStagingStride = TileN + kStagingPad;
  static constexpr int kSmemStaging = TileM * kStagingStride * 4;
  static constexpr int kSmemBytes = (kSmemA + kSmemB) > kSmemStaging ? (kSmemA + kSmemB) : kSmemStaging;

  using FragmentC = typename WarpMma::FragmentC;

  // The double entries of one half k-tile this thread converts: kSlots chunks of kChunk.
  struct Prefetch {
    double x[kSlots][kChunk];
  };

  // row r of the CTA's k-tile rows (A rows 0..TileM-1, then B rows): its vector set.
  __device__ static void load_half(const Args& p, int64_t row_a0, int64_t row_b0, int64_t l0,
                                   int thread, Prefetch& pf) {
    const int chunk = thread % kChunksPerRow;
    const int64_t l = l0 + chunk * kChunk;
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      const bool is_a = s < kSlotsA;  // warp-uniform
      const int r = thread / kChunksPerRow + s * kRowStep - (is_a ? 0 : TileM);
      const int64_t v = (is_a ? row_a0 : row_b0) + r;
      const int64_t nvec = is_a ? p.m : p.n;
      const double* x = is_a ? p.a : p.b;
      const int64_t vs = is_a ? p.a_vs : p.b_vs;
      const int64_t es = is_a ? p.a_es : p.b_es;
      const bool vector_loads = is_a ? p.vector_loads_a : p.vector_loads_b;
      if (v < nvec && vector_loads && l + kChunk <= p.k_end) {
        const double2* q = reinterpret_cast<const double2*>(x + v * vs + l);
        const double2 d0 = __ldg(q);
        const double2 d1 = __ldg(q + 1);
        pf.x[s][0] = d0.x;
        pf.x[s][1] = d0.y;
        pf.x[s][2] = d1.x;
        pf.x[s][3] = d1.y;
      } else {
#pragma unroll
        for (int t = 0; t < kChunk; ++t) {
          pf.x[s][t] = (v < nvec && l + t < p.k_end) ? __ldg(x + v * vs + (l + t) * es) : 0.0;
        }
      }
    }
  }

  // The residues of the prefetched half into stage `stage`, half `half` of shared memory.
  __device__ static void convert_half(const Args& p, const Prefetch& pf, const int32_t (&shift)[kSlots],
                                      int8_t* smem_a, int8_t* smem_b, int stage, int half,
                                      int thread, const stages::FloatModulus& fm,
                                      const float* s_pow2, uint32_t modulus) {
    const SmemLayoutA layout_a = SmemLayoutA::packed({TileM, TileK * kStages});
    const SmemLayoutB layout_b = SmemLayoutB::packed({TileK * kStages, TileN});
    const int chunk = thread % kChunksPerRow;
    const int kk = stage * TileK + half * kHalfK + chunk * kChunk;
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      stages::Pieces pieces[kChunk];
      int e[kChunk];
      int emax = 0;
#pragma unroll
      for (int t = 0; t < kChunk; ++t) {
        const stages::ScaledInteger si = stages::scaled_integer(pf.x[s][t], shift[s]);
        pieces[t] = stages::residue_pieces(si, false);
        e[t] = si.exp;
        emax = si.exp > emax ? si.exp : emax;
      }
      uint32_t bytes[kChunk];
      if (!__any_sync(0xffffffffu, emax > 0)) {  // warp-uniform, as in residues_kernel
#pragma unroll
        for (int t = 0; t < kChunk; ++t) {
          pieces[t].p0 = stages::add_rn_f(pieces[t].p0, 0.25f);
          bytes[t] = stages::residue_e0(pieces[t], fm);
        }
      } else {
#pragma unroll
        for (int t = 0; t < kChunk; ++t) {
          const float f = e[t] < kPow2Table ? s_pow2[e[t]] : stages::pow2_factor(e[t], modulus);
          bytes[t] = stages::residue_scaled(pieces[t], f, fm);
        }
      }
      const uint32_t word = stages::pack_bytes(bytes[0], bytes[1], bytes[2], bytes[3]);
      const bool is_a = s < kSlotsA;
      const int r = thread / kChunksPerRow + s * kRowStep - (is_a ? 0 : TileM);
      if (is_a) {
        *reinterpret_cast<uint32_t*>(smem_a + layout_a(cutlass::MatrixCoord(r, kk))) = word;
      } else {
        *reinterpret_cast<uint32_t*>(smem_b + layout_b(cutlass::MatrixCoord(kk, r))) = word;
      }
    }
  }

  __device__ static void run(const Args& p, char* smem) {
    __shared__ stages::FloatModulus s_fm;
    __shared__ float s_pow2[kPow2Table];

    const int thread = threadIdx.x;
    const int warp = thread / 32;  // uniform
    const int lane = thread % 32;
    const int64_t cta = blockIdx.x;
    const int g = static_cast<int>(cta % p.nmod);
    const int64_t tile = cta / p.nmod;
    const int64_t tile_n = tile % p.tiles_n;
    const int64_t tile_m = tile / p.tiles_n;
    const int64_t row_a0 = tile_m * TileM;
    const int64_t row_b0 = tile_n * TileN;
    const uint32_t modulus = static_cast<uint32_t>(p.moduli.value[g]);

    for (int e = thread; e < kPow2Table; e += kThreads) s_pow2[e] = stages::pow2_factor(e, modulus);
    if (thread == 0) s_fm = stages::float_modulus(modulus);

    int8_t* smem_a = reinterpret_cast<int8_t*>(smem);
    int8_t* smem_b = smem_a + kSmemA;

    int32_t shift[kSlots];
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      const bool is_a = s < kSlotsA;
      const int r = thread / kChunksPerRow + s * kRowStep - (is_a ? 0 : TileM);
      const int64_t v = (is_a ? row_a0 : row_b0) + r;
      shift[s] = v < (is_a ? p.m : p.n) ? (is_a ? p.mu : p.nu)[v] : 0;
    }

    typename WarpMma::IteratorA iter_a(
        {smem_a, SmemLayoutA::packed({TileM, TileK * kStages})}, lane);
    typename WarpMma::IteratorB iter_b(
        {smem_b, SmemLayoutB::packed({TileK * kStages, TileN})}, lane);
    const int warp_m = warp % kWarpsM;
    const int warp_n = warp / kWarpsM;
    iter_a.add_tile_offset({warp_m, 0});
    iter_b.add_tile_offset({0, warp_n});

    FragmentC accum;
    accum.clear();
    WarpMma mma;

    Prefetch pf;
    __syncthreads();  // s_fm, s_pow2
    const stages::FloatModulus fm = s_fm;

    // Prologue: k-tile 0 into stage 0.
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      load_half(p, row_a0, row_b0, p.k_begin + h * kHalfK, thread, pf);
      convert_half(p, pf, shift, smem_a, smem_b, 0, h, thread, fm, s_pow2, modulus);
    }
    __syncthreads();

    for (int64_t kt = 0; kt < p.k_tiles; ++kt) {
      const int stage = static_cast<int>(kt & 1);
      const bool next = kt + 1 < p.k_tiles;  // uniform
      const int64_t l_next = p.k_begin + (kt + 1) * TileK;
#pragma unroll
      for (int h = 0; h < kHalves; ++h) {
        if (next) load_half(p, row_a0, row_b0, l_next + h * kHalfK, thread, pf);
        typename WarpMma::FragmentA frag_a;
        typename WarpMma::FragmentB frag_b;
        iter_a.set_kgroup_index(h);
        iter_b.set_kgroup_index(h);
        iter_a.load(frag_a);
        iter_b.load(frag_b);
        ++iter_a;
        ++iter_b;
        mma(accum, frag_a, frag_b, accum);
        if (next) convert_half(p, pf, shift, smem_a, smem_b, stage ^ 1, h, thread, fm, s_pow2, modulus);
      }
      if (stage == 1) {  // both stages read: back to stage 0
        iter_a.add_tile_offset({0, -kStages * kWarpGemmIterations});
        iter_b.add_tile_offset({-kStages * kWarpGemmIterations, 0});
      }
      __syncthreads();
    }

    // Epilogue: accumulators -> shared staging (row-major) -> predicated global stores.
    int32_t* staging = reinterpret_cast<int32_t*>(smem);
    typename WarpMma::IteratorC iter_c({staging, kStagingStride}, lane);
    iter_c.add_tile_offset({warp_m, warp_n});
    iter_c.store(accum);
    __syncthreads();

    int32_t* plane = p.c + g * p.plane_stride;
    constexpr int kVectorsPerRow = TileN / 4;
    for (int idx = thread; idx < TileM * kVectorsPerRow; idx += kThreads) {
      const int r = idx / kVectorsPerRow;
      const int col = (idx % kVectorsPerRow) * 4;
      const int64_t i = row_a0 + r;
      const int64_t j = row_b0 + col;
      if (i >= p.m || j >= p.n_out) continue;
      const int32_t* src = staging + r * kStagingStride + col;
      int32_t* dst = plane + i * p.ldc + j;
      if (p.vector_stores && j + 4 <= p.n_out) {
        *reinterpret_cast<int4*>(dst) = make_int4(src[0], src[1], src[2], src[3]);
      } else {
        for (int t = 0; t < 4 && j + t < p.n_out; ++t) dst[t] = src[t];
      }
    }
  }
};

template <class K>
__global__ void __launch_bounds__(K::kThreads, 1) prologue_gemm_kernel(const __grid_constant__ Args p) {
  extern __shared__ __align__(16) char smem[];
  K::run(p, smem);
}

// Host side: checks, then one launch.
template <class K>
int run(int64_t m, int64_t n, int64_t n_out, int64_t k, int64_t k_begin, int64_t k_len, int nmod,
        const int32_t* moduli, const double* a, int64_t a_vs, int64_t a_es, const int32_t* mu,
        const double* b, int64_t b_vs, int64_t b_es, const int32_t* nu, int32_t* c, int64_t ldc,
        int64_t plane_stride, cudaStream_t stream, stages::Message& err) {
  using stages::kBadArgument;
  const char* what = "prologue_gemm";
  if (m < 0 || n < 0 || n_out < n || k < 0 || k_begin < 0 || k_len < 0) {
    return err.set(kBadArgument, "%s: bad sizes m=%lld n=%lld n_out=%lld k=%lld k_begin=%lld k_len=%lld",
                   what, (long long)m, (long long)n, (long long)n_out, (long long)k,
                   (long long)k_begin, (long long)k_len);
  }
  static_assert((kExactKLimit & (kExactKLimit - 1)) == 0, "kExactKLimit is a power of two");
  if (k_len >= kExactKLimit) {  // kExactKLimit products of (-128)^2 = 2^14 reach 2^31
    return err.set(kBadArgument, "%s: k_len=%lld reaches 2^%d, where the int32 sum of int8 "
                   "products stops being exact (cut k into chunks)",
                   what, (long long)k_len, bit_length(static_cast<uint64_t>(kExactKLimit)) - 1);
  }
  if (nmod < 1 || nmod > kMaxModuli || moduli == nullptr) {
    return err.set(kBadArgument, "%s: nmod=%d outside [1, %d] or moduli null", what, nmod, kMaxModuli);
  }
  Args p{};
  for (int g = 0; g < nmod; ++g) {
    if (moduli[g] < 2 || moduli[g] > 256) {
      return err.set(kBadArgument, "%s: moduli[%d]=%d outside [2, 256]", what, g, moduli[g]);
    }
    p.moduli.value[g] = moduli[g];
  }
  if (m == 0 || n_out == 0) return stages::kOk;
  if (c == nullptr || ldc < n_out || plane_stride < (nmod > 1 ? m * ldc : 0)) {
    return err.set(kBadArgument, "%s: c null or ldc=%lld < n_out=%lld or plane_stride=%lld < m*ldc",
                   what, (long long)ldc, (long long)n_out, (long long)plane_stride);
  }
  if ((m > 0 && k > 0 && (a == nullptr || mu == nullptr)) ||
      (n > 0 && k > 0 && (b == nullptr || nu == nullptr))) {
    return err.set(kBadArgument, "%s: null operand or shift pointer", what);
  }
  constexpr int kTileM = K::Shape::kM, kTileN = K::Shape::kN, kTileK = K::Shape::kK;
  p.a = a; p.a_vs = a_vs; p.a_es = a_es; p.mu = mu;
  p.b = b; p.b_vs = b_vs; p.b_es = b_es; p.nu = nu;
  p.m = m; p.n = n; p.n_out = n_out; p.k = k;
  p.k_begin = k_begin;
  p.k_end = k < k_begin + k_len ? k : k_begin + k_len;
  p.k_tiles = k_len > 0 ? (k_len + kTileK - 1) / kTileK : 0;
  p.nmod = nmod;
  p.c = c; p.ldc = ldc; p.plane_stride = plane_stride;
  p.tiles_n = (n_out + kTileN - 1) / kTileN;
  const int64_t tiles = ((m + kTileM - 1) / kTileM) * p.tiles_n;
  if (tiles > (int64_t(1) << 31) / nmod - 1) {
    return err.set(kBadArgument, "%s: %lld tiles x %d moduli exceed the grid", what, (long long)tiles, nmod);
  }
  p.vector_loads_a = a_es == 1 && stages::aligned16(a) && a_vs % 2 == 0 && k_begin % 2 == 0;
  p.vector_loads_b = b_es == 1 && stages::aligned16(b) && b_vs % 2 == 0 && k_begin % 2 == 0;
  p.vector_stores = stages::aligned16(c) && ldc % 4 == 0 && plane_stride % 4 == 0;
  // k_tiles == 0 (an empty chunk) still writes zero planes: the prologue converts zeros.
  if (p.k_tiles == 0) p.k_tiles = 1, p.k_end = k_begin;
  cudaError_t e = cudaFuncSetAttribute(prologue_gemm_kernel<K>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, K::kSmemBytes);
  if (e != cudaSuccess) {
    return err.set(stages::kCudaError, "%s: cudaFuncSetAttribute: %s", what, cudaGetErrorString(e));
  }
  prologue_gemm_kernel<K><<<static_cast<unsigned>(tiles * nmod), K::kThreads, K::kSmemBytes, stream>>>(p);
  e = cudaGetLastError();
  if (e != cudaSuccess) {
    return err.set(stages::kCudaError, "%s: launch: %s: %s", what, cudaGetErrorName(e), cudaGetErrorString(e));
  }
  return stages::kOk;
}

}  // namespace prologue
}  // namespace ozaki
