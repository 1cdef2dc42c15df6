// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The mainloop of the fused modulus-group INT8 GEMM for sm_90a: CUTLASS's TMA
// warp-specialized collective (as CollectiveBuilder makes it), with our own consumer
// `mma()` that folds one modulus after another.
//
// The group's residues are concatenated along k: K = G * k_pad, and k-tiles
// [g * T, (g + 1) * T) with T = k_pad / tile_k belong to modulus g. The producer side
// (load_init, load, load_tail) and mma_tail are CUTLASS's, unchanged. mma() runs T k-tiles
// per modulus with a fresh accumulator (the first wgmma of a modulus with ScaleOut::Zero),
// then drains the wgmma pipe (warpgroup_wait<0>) and folds: r_g = acc mod m_g (exact,
// group_arith.h) goes to byte g. The first G-1 moduli keep their residues 4 to a register
// (byte j of word i/4 for element i: (G-1)/4 extra registers per accumulator), so a
// 128-accumulator tile needs 128 + 32 (G-1) registers, not 256. After the last modulus
// the accumulator fragment holds, per element, the uint32 (bits as int32)
//   r_0 | r_1 << 8 | ... | r_{G-1} << 8 (G-1)
// which the partial-CRT epilogue node (partial_crt.h) turns into the group partial.
//
// Pipeline bookkeeping as in CUTLASS's collective (one wgmma batch in flight, a stage
// released one k-tile late), except that each modulus releases its own last stage after
// the drain, so our mma_tail releases nothing. The kernel layer needs nothing new.

#pragma once

#include <cstdint>
#include <utility>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/gemm/dispatch_policy.hpp"

#include "ozaki/group_arith.h"

namespace ozaki {

namespace detail {

// f(Int<0>{}), ..., f(Int<N-1>{}), each call inlined (cute::for_each goes through a lambda
// of its own that nvcc does not inline, which sends the accumulators to local memory).
template <class F, int... I>
CUTLASS_DEVICE void static_for(F&& f, std::integer_sequence<int, I...>) {
  (f(cute::Int<I>{}), ...);
}

}  // namespace detail

// What mma() needs besides CUTLASS's mainloop parameters.
struct GroupFoldParams {
  ModulusFold fold[kMaxGroupSize] = {};
  int k_tiles_per_modulus = 0;  // k_pad / tile_k
};

template <class Base, int G>
struct GroupMmaSm90 : Base {
  static_assert(1 <= G && G <= kMaxGroupSize, "a group holds 1 to 4 moduli");
  static_assert(cute::is_same_v<typename Base::ElementAccumulator, int32_t>,
                "the fold reduces int32 accumulators");
  static_assert(Base::K_PIPE_MMAS == 1, "the fold assumes one wgmma batch in flight");

  using typename Base::MainloopPipeline;
  using typename Base::PipelineState;
  using typename Base::TensorStorage;
  using typename Base::TiledMma;
  using typename Base::SmemLayoutA;
  using typename Base::SmemLayoutB;
  using typename Base::DispatchPolicy;
  using BaseArguments = typename Base::Arguments;
  using BaseParams = typename Base::Params;

  struct Arguments : BaseArguments {
    GroupFoldParams group;
  };

  struct Params : BaseParams {
    GroupFoldParams group;
  };

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& problem_shape, Arguments const& args,
                                        void* workspace) {
    Params params;
    static_cast<BaseParams&>(params) = Base::to_underlying_arguments(
        problem_shape, static_cast<BaseArguments const&>(args), workspace);
    params.group = args.group;
    return params;
  }

  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem_shape, Arguments const& args) {
    auto [M, N, K, L] = cute::append<4>(problem_shape, 1);
    constexpr int kTileK = cute::size<2>(typename Base::TileShape{});
    const bool folds = args.group.k_tiles_per_modulus >= 1 &&
                       int64_t(K) == int64_t(G) * args.group.k_tiles_per_modulus * kTileK;
    return folds && Base::can_implement(problem_shape, static_cast<BaseArguments const&>(args));
  }

  // Consumer: k_tile_count must be G * k_tiles_per_modulus (the whole K of the tile: the
  // data-parallel persistent schedulers never split K).
  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(MainloopPipeline pipeline, PipelineState smem_pipe_read, FrgTensorC& accum,
                          int k_tile_count, int thread_idx, TensorStorage& shared_tensors,
                          Params const& params) {
    using namespace cute;
    static_assert(is_rmem<FrgTensorC>::value, "C tensor must be rmem resident.");
    static_assert(cute::is_void_v<typename Base::SmemCopyAtomA> &&
                  cute::is_void_v<typename Base::SmemCopyAtomB>,
                  "wgmma reads both operands from shared memory");
    constexpr int kElements = decltype(size(accum))::value;
    static_assert(kElements % 4 == 0, "residues are packed four to a register");
    constexpr int kWords = kElements / 4;
    (void)k_tile_count;

    Tensor sA = make_tensor(make_smem_ptr(shared_tensors.smem_A.data()), SmemLayoutA{});  // (BLK_M,BLK_K,PIPE)
    Tensor sB = make_tensor(make_smem_ptr(shared_tensors.smem_B.data()), SmemLayoutB{});  // (BLK_N,BLK_K,PIPE)

    constexpr int kMmaWarpGroups = size(TiledMma{}) / cutlass::NumThreadsPerWarpGroup;
    Layout warp_group_thread_layout = make_layout(Int<kMmaWarpGroups>{}, Int<cutlass::NumThreadsPerWarpGroup>{});
    const int warp_group_idx = __shfl_sync(0xFFFFFFFF, thread_idx / cutlass::NumThreadsPerWarpGroup, 0);

    TiledMma tiled_mma;
    auto thread_mma = tiled_mma.get_slice(warp_group_thread_layout(warp_group_idx));
    Tensor tCsA = thread_mma.partition_A(sA);  // (MMA,MMA_M,MMA_K,PIPE)
    Tensor tCsB = thread_mma.partition_B(sB);  // (MMA,MMA_N,MMA_K,PIPE)
    Tensor tCrA = thread_mma.make_fragment_A(tCsA);
    Tensor tCrB = thread_mma.make_fragment_B(tCsB);
    CUTE_STATIC_ASSERT_V(size<1>(tCsA) == size<1>(accum));
    CUTE_STATIC_ASSERT_V(size<1>(tCsB) == size<2>(accum));
    CUTE_STATIC_ASSERT_V(size<2>(tCsA) == size<2>(tCsB));

    PipelineState smem_pipe_release = smem_pipe_read;
    const int tiles_per_modulus = params.group.k_tiles_per_modulus;

    // Residues of moduli 0 .. G-2, byte (i % 4) of word i / 4 for accumulator element i.
    uint32_t kept[G > 1 ? G - 1 : 1][kWords];

    // One pass per modulus, unrolled at compile time: `kept` is indexed by constants only,
    // so it stays in registers. Each pass consumes and releases its own k-tiles; no
    // branch depends on the tile index, so ptxas sees warpgroup-uniform wgmma code.
    detail::static_for([&](auto modulus) CUTLASS_LAMBDA_FUNC_INLINE {
      constexpr int g = decltype(modulus)::value;
      {  // the first k-tile of modulus g: a fresh accumulator (ScaleOut::Zero)
        auto barrier_token = pipeline.consumer_try_wait(smem_pipe_read);
        pipeline.consumer_wait(smem_pipe_read, barrier_token);
        const int read_stage = smem_pipe_read.index();
        warpgroup_fence_operand(accum);
        warpgroup_arrive();
        tiled_mma.accumulate_ = GMMA::ScaleOut::Zero;
        CUTLASS_PRAGMA_UNROLL
        for (int k_block = 0; k_block < size<2>(tCrA); ++k_block) {
          cute::gemm(tiled_mma, tCrA(_, _, k_block, read_stage), tCrB(_, _, k_block, read_stage), accum);
          tiled_mma.accumulate_ = GMMA::ScaleOut::One;
        }
        warpgroup_commit_batch();
        ++smem_pipe_read;
        warpgroup_fence_operand(accum);
      }
      CUTLASS_PRAGMA_NO_UNROLL
      for (int t = 1; t < tiles_per_modulus; ++t) {
        auto barrier_token = pipeline.consumer_try_wait(smem_pipe_read);
        pipeline.consumer_wait(smem_pipe_read, barrier_token);
        const int read_stage = smem_pipe_read.index();
        warpgroup_fence_operand(accum);
        warpgroup_arrive();
        cute::gemm(tiled_mma, tCrA(_, _, _, read_stage), tCrB(_, _, _, read_stage), accum);
        warpgroup_commit_batch();
        ++smem_pipe_read;
        // The previous k-tile's wgmma are done: give its stage back to the producer.
        warpgroup_wait<1>();
        warpgroup_fence_operand(accum);
        pipeline.consumer_release(smem_pipe_release);
        ++smem_pipe_release;
      }
      // Modulus g is complete once its last wgmma batch is: release its last stage, fold.
      warpgroup_wait<0>();
      warpgroup_fence_operand(accum);
      pipeline.consumer_release(smem_pipe_release);
      ++smem_pipe_release;

      const ModulusFold fold = params.group.fold[g];
      if constexpr (g < G - 1) {
        CUTLASS_PRAGMA_UNROLL
        for (int w = 0; w < kWords; ++w) {
          uint32_t word = 0;
          CUTLASS_PRAGMA_UNROLL
          for (int j = 0; j < 4; ++j) {
            word |= residue(static_cast<int32_t>(accum(4 * w + j)), fold) << (8 * j);
          }
          kept[g][w] = word;
        }
      } else {
        CUTLASS_PRAGMA_UNROLL
        for (int w = 0; w < kWords; ++w) {
          CUTLASS_PRAGMA_UNROLL
          for (int j = 0; j < 4; ++j) {
            uint32_t packed = residue(static_cast<int32_t>(accum(4 * w + j)), fold) << (8 * g);
            CUTLASS_PRAGMA_UNROLL
            for (int h = 0; h < G - 1; ++h) {
              packed |= ((kept[h][w] >> (8 * j)) & 0xffu) << (8 * h);
            }
            accum(4 * w + j) = static_cast<int32_t>(packed);
          }
        }
      }
      warpgroup_fence_operand(accum);
    }, std::make_integer_sequence<int, G>{});
  }

  // mma() has released every stage it read (CUTLASS's releases the last one here).
  CUTLASS_DEVICE void mma_tail(MainloopPipeline, PipelineState, int) { cute::warpgroup_wait<0>(); }
};

}  // namespace ozaki
