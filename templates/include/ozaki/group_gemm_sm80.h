// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The fused modulus-group INT8 GEMM for sm_80 (and, through its compute_80 PTX, any later
// GPU): the kernel and the host logic behind templates/int8_group_gemm_sm80.cu.j2. It
// exports the same C ABI (version 2) as the sm_90a kernels, documented at the top of
// group_gemm_sm90.h (one launch per group), and stores bit-identical partials:
//   X[i*ldx + j] = (sum_g c_g (acc_g mod m_g)) mod M, M = prod_g m_g,
//   acc_g = sum_{l < k_pad} A[i*lda + g*k_pad + l] * B[j*ldb + g*k_pad + l] (int32, wrapping).
// It needs no workspace (P_workspace_size returns 0).
//
// Per output tile, one CTA runs, for each modulus g = 0 .. G-1, CUTLASS's 2.x threadblock
// mainloop (MmaMultistage: cp.async stages, mma.sync m16n8k32 through our wrap-around
// operator, mma_sm80_s8_wrap.h) over modulus g's k_pad columns with a fresh accumulator:
// the iterators start at column g * k_pad and see a (rows x k_pad) matrix, so a modulus
// never reads its neighbour's residues. Each mainloop call refills the stage pipeline
// (slower than one continuous K loop by about stages-1 k-tiles of latency per modulus)
// and ends with every cp.async drained and a CTA barrier, so the next modulus may
// overwrite the stages. Then every thread folds its accumulator fragment, element by
// element (the fragment layout is the same for every modulus):
//   r_g = acc mod m_g in [0, m_g)                     (residue(), group_arith.h)
// The first G-1 moduli keep r_g in registers, 4 to a word (byte j of word i/4 for
// element i: (G-1)/4 words per accumulator); after the last, the accumulator holds, per
// element, r_0 | r_1 << 8 | ... | r_{G-1} << 8 (G-1) as int32 bits. The moduli run in a
// loop that is not unrolled (one copy of the mainloop's code: unrolled, ptxas hoisted the
// next modulus's address arithmetic and spilled at 3 and 4 moduli on 64x32 warp tiles).
// The epilogue is CUTLASS's 2.x visitor epilogue (EpilogueWithVisitorCallbacks) with the
// tree of partial_crt_sm80.h: the accumulators go through shared memory into the output
// thread map, our node applies crt_finish<G>, the store node writes PartialElement<G> in
// vectors (16 bytes of uint32, 8 one-byte partials), guarded against (m, n) (n is a
// multiple of the vector by the ABI).
// Sliced-K warp tiles are refused: their epilogue adds the warps' accumulators, which
// must not happen to packed residues.

#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <cuda_runtime_api.h>

#include "cute/tensor.hpp"
#include "cutlass/arch/mma.h"
#include "cutlass/cutlass.h"
#include "cutlass/device_kernel.h"
#include "cutlass/gemm/gemm.h"
#include "cutlass/matrix_coord.h"

#include "ozaki/group_arith.h"
#include "ozaki/group_gemm_abi.h"
#include "ozaki/int8_gemm_entry.h"
#include "ozaki/partial_crt_sm80.h"

namespace ozaki {

// Partials per vector store of the epilogue: 16 bytes of uint32, 8 one-byte partials. A
// step of the 2.x epilogue hands each thread warp_n / 4 columns of one row, so warp_n must
// be at least 4 times this (variants.py checks it; the kernel asserts it).
template <int G>
inline constexpr int kSm80PartialsPerStore = G == 1 ? 8 : 4;

// `Mma`: a CUTLASS 2.x threadblock mainloop (MmaMultistage) over int8 TN tiles with int32
// accumulators; `Epilogue`: an EpilogueWithVisitorCallbacks whose tree ends in our
// partial-CRT node; `Swizzle`: a 2.x threadblock swizzle.
template <class Mma_, class Epilogue_, class Swizzle_, int G>
struct GroupGemmSm80Kernel {
  static_assert(1 <= G && G <= kMaxGroupSize, "a group holds 1 to 4 moduli");
  using Mma = Mma_;
  using Epilogue = Epilogue_;
  using Swizzle = Swizzle_;
  using FusionCallbacks = typename Epilogue::FusionCallbacks;
  using ThreadblockShape = typename Mma::Shape;
  using FragmentC = typename Mma::FragmentC;
  using IteratorA = typename Mma::IteratorA;
  using IteratorB = typename Mma::IteratorB;

  static_assert(std::is_same_v<typename IteratorA::Element, int8_t>, "A must be int8");
  static_assert(std::is_same_v<typename IteratorB::Element, int8_t>, "B must be int8");
  static_assert(std::is_same_v<typename IteratorA::Layout, cutlass::layout::RowMajor>,
                "A: M x K, K contiguous");
  static_assert(std::is_same_v<typename IteratorB::Layout, cutlass::layout::ColumnMajor>,
                "B: K x N, K contiguous");
  static_assert(std::is_same_v<typename FragmentC::Element, int32_t>, "the fold reduces int32 accumulators");
  static_assert(std::is_same_v<typename Mma::Operator::MathOperator, cutlass::arch::OpMultiplyAdd>,
                "the warp-level MMA must be the wrap-around s8 MMA, never the saturating one");
  static_assert(Mma::WarpCount::kK == 1,
                "sliced-K would add the warps' packed residues in the epilogue");
  static_assert(Epilogue::kPartitionsK == 1, "one warp per output element");
  static_assert(Epilogue::kAccumulatorFragmentCount >= 1,
                "the epilogue's vector is wider than a warp tile's row slice (warp_n too small)");

  static constexpr int kThreadCount = 32 * Mma::WarpCount::kCount;
  static constexpr int MaxThreadsPerBlock = kThreadCount;  // cutlass::device_kernel's bounds
  static constexpr int MinBlocksPerMultiprocessor = 1;
  static constexpr int kElements = FragmentC::kElements;
  static_assert(kElements % 4 == 0, "residues are packed four to a register");
  static constexpr int kWords = kElements / 4;

  struct Params {
    cutlass::gemm::GemmCoord problem_size;  // (m, n, k_pad)
    cutlass::gemm::GemmCoord grid_tiled_shape;
    int swizzle_log_tile = 0;
    int k_tiles_per_modulus = 0;  // k_pad / tile_k
    typename IteratorA::Params params_a;
    typename IteratorB::Params params_b;
    int8_t* a = nullptr;
    int8_t* b = nullptr;
    ModulusFold fold[G] = {};
    typename FusionCallbacks::Params output;
  };

  union SharedStorage {
    typename Mma::SharedStorage main_loop;
    typename Epilogue::SharedStorage epilogue;
  };

  static constexpr int kSharedStorageBytes = static_cast<int>(sizeof(SharedStorage));

  CUTLASS_DEVICE void operator()(Params const& params, char* smem) {
    SharedStorage& shared = *reinterpret_cast<SharedStorage*>(smem);
    Swizzle swizzle;
    const cutlass::gemm::GemmCoord tile = swizzle.get_tile_offset(params.swizzle_log_tile);
    if (tile.m() >= params.grid_tiled_shape.m() || tile.n() >= params.grid_tiled_shape.n()) {
      return;
    }
    const int thread_idx = threadIdx.x;
    const int warp_idx = cutlass::canonical_warp_idx_sync();
    const int lane_idx = threadIdx.x % 32;
    const int m = params.problem_size.m();
    const int n = params.problem_size.n();
    const int k_pad = params.problem_size.k();

    FragmentC accum;
    // Residues of the moduli folded so far but the last, newest first: kept[h] holds
    // modulus g-1-h after modulus g, byte (i % 4) of word i / 4 for accumulator element i.
    // Shifting the words (constant indices) rather than indexing by g keeps them in
    // registers under a loop that is not unrolled (one copy of the mainloop's code).
    uint32_t kept[G > 1 ? G - 1 : 1][kWords] = {};

    CUTLASS_PRAGMA_NO_UNROLL
    for (int g = 0; g < G; ++g) {
      // Modulus g's columns, as a matrix of their own: (m x k_pad) for A, (k_pad x n) for B.
      IteratorA iterator_a(params.params_a, params.a + int64_t(g) * k_pad, {m, k_pad}, thread_idx,
                           cutlass::MatrixCoord{tile.m() * ThreadblockShape::kM, 0});
      IteratorB iterator_b(params.params_b, params.b + int64_t(g) * k_pad, {k_pad, n}, thread_idx,
                           cutlass::MatrixCoord{0, tile.n() * ThreadblockShape::kN});
      Mma mma(shared.main_loop, thread_idx, warp_idx, lane_idx);
      accum.clear();
      // Ends with every cp.async drained and __syncthreads(): the stages are free again.
      mma(params.k_tiles_per_modulus, accum, iterator_a, iterator_b, accum);
      if (g == G - 1) {
        break;  // the last modulus is folded straight into the packed words below
      }
      const ModulusFold fold = params.fold[g];
      CUTLASS_PRAGMA_UNROLL
      for (int h = G - 2; h > 0; --h) {
        CUTLASS_PRAGMA_UNROLL
        for (int w = 0; w < kWords; ++w) {
          kept[h][w] = kept[h - 1][w];
        }
      }
      CUTLASS_PRAGMA_UNROLL
      for (int w = 0; w < kWords; ++w) {
        uint32_t word = 0;
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < 4; ++j) {
          word |= residue(accum[4 * w + j], fold) << (8 * j);
        }
        kept[0][w] = word;
      }
    }

    // accum holds modulus G-1's sums: pack r_0 | r_1 << 8 | ... | r_{G-1} << 8 (G-1).
    const ModulusFold last = params.fold[G - 1];
    CUTLASS_PRAGMA_UNROLL
    for (int w = 0; w < kWords; ++w) {
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < 4; ++j) {
        uint32_t packed = residue(accum[4 * w + j], last) << (8 * (G - 1));
        CUTLASS_PRAGMA_UNROLL
        for (int h = 0; h < G - 1; ++h) {  // kept[h]: modulus G-2-h
          packed |= ((kept[h][w] >> (8 * j)) & 0xffu) << (8 * (G - 2 - h));
        }
        accum[4 * w + j] = static_cast<int32_t>(packed);
      }
    }

    // The mainloop's last barrier has passed: the epilogue may reuse its shared memory.
    Epilogue epilogue(params.output, shared.epilogue, thread_idx, warp_idx, lane_idx);
    epilogue(accum, tile, cute::make_shape(m, n, 1), thread_idx);
  }
};

// The host side of one generated library: checks, parameters, launch. `OutputTileThreadMap`
// is the one the epilogue tree's store node was made with (PartialCrtEvtSm80).
template <class Kernel, class OutputTileThreadMap, int G>
struct GroupGemmSm80Entry {
  using Params = typename Kernel::Params;
  using Swizzle = typename Kernel::Swizzle;
  using ThreadblockShape = typename Kernel::ThreadblockShape;
  using FusionCallbacks = typename Kernel::FusionCallbacks;
  using ElementX = PartialElement<G>;
  static_assert(std::is_same_v<FusionCallbacks, PartialCrtEvtSm80<G, OutputTileThreadMap>>,
                "the epilogue must run the partial-CRT tree of partial_crt_sm80.h");

  static constexpr GroupGemmLimits kLimits{
      /*tile_k=*/ThreadblockShape::kK,
      // 2.x pitch-linear layouts hold the leading dimension in `int`.
      /*max_stride_ab=*/std::numeric_limits<int>::max(),
      // X is indexed in 64 bits (row * ldx for rows < 2^31 must not overflow).
      /*max_stride_x=*/std::numeric_limits<int64_t>::max() >> 32,
  };
  static constexpr int kMaxGridY = 65535;

  static int run(const GroupGemmProblem& problem, void* workspace, size_t workspace_bytes,
                 cudaStream_t stream, ErrorMessage& err) noexcept {
    return run_guarded(err, [&] { return run_checked(problem, workspace, workspace_bytes, stream, err); });
  }

  // No workspace: each partial is written once, by the CTA that owns its tile.
  static size_t workspace_size(int, int, int, int, int) noexcept { return 0; }

 private:
  // The launch of group q: its moduli's residues start q*G*k_pad columns into A's and
  // B's rows, its partials q*stride_x elements into X.
  static Params make_params(const GroupGemmProblem& p, int q, const GroupConstants& constants) {
    Params params;
    params.problem_size = cutlass::gemm::GemmCoord(p.m, p.n, p.k_pad);
    params.grid_tiled_shape = Swizzle::get_tiled_shape(
        params.problem_size,
        cutlass::gemm::GemmCoord(ThreadblockShape::kM, ThreadblockShape::kN, ThreadblockShape::kK),
        /*split_k_slices=*/1);
    params.swizzle_log_tile = Swizzle::get_log_tile(params.grid_tiled_shape);
    params.k_tiles_per_modulus = p.k_pad / ThreadblockShape::kK;
    params.params_a = typename Kernel::IteratorA::Params(cutlass::layout::RowMajor(static_cast<int>(p.lda)));
    params.params_b = typename Kernel::IteratorB::Params(cutlass::layout::ColumnMajor(static_cast<int>(p.ldb)));
    const int64_t first = int64_t(q) * G * p.k_pad;
    params.a = const_cast<int8_t*>(p.a) + first;
    params.b = const_cast<int8_t*>(p.b) + first;
    for (int g = 0; g < G; ++g) {
      params.fold[g] = constants.fold[g];
    }
    const auto arguments = partial_crt_sm80_arguments<G, OutputTileThreadMap>(
        constants.crt, static_cast<ElementX*>(p.x) + q * p.stride_x, p.ldx, p.m);
    params.output = FusionCallbacks::to_underlying_arguments(cute::make_shape(p.m, p.n, 1), arguments,
                                                             /*workspace=*/nullptr);
    return params;
  }

  static Status run_checked(const GroupGemmProblem& problem, void* workspace, size_t workspace_bytes,
                            cudaStream_t stream, ErrorMessage& err) {
    GroupConstants constants[kMaxGroups];
    const Status status = check_group_problem<G>(problem, kLimits, constants, err);
    if (status != Status::kOk) {
      return status;
    }
    const dim3 grid = Swizzle::get_grid_shape(make_params(problem, 0, constants[0]).grid_tiled_shape);
    if (grid.y > static_cast<unsigned>(kMaxGridY)) {
      return err.set(Status::kNotSupported, "n=%d needs %u rows of CTAs in the grid (at most %d)",
                     problem.n, grid.y, kMaxGridY);
    }
    const int smem = Kernel::kSharedStorageBytes;
    cudaError_t cuda = cudaSuccess;
    if (smem >= (48 << 10)) {
      cuda = cudaFuncSetAttribute(cutlass::device_kernel<Kernel>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      if (cuda != cudaSuccess) {
        return cuda_failure("cudaFuncSetAttribute(MaxDynamicSharedMemorySize)", cuda, err);
      }
    }
    for (int q = 0; q < problem.groups; ++q) {
      const Params params = make_params(problem, q, constants[q]);
      cutlass::device_kernel<Kernel><<<grid, Kernel::kThreadCount, smem, stream>>>(params);
      cuda = cudaGetLastError();
      if (cuda != cudaSuccess) {
        return cuda_failure("kernel launch", cuda, err);
      }
    }
    return Status::kOk;
  }
};

}  // namespace ozaki
