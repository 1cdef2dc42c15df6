// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The partial-CRT epilogues of the fused modulus-group GEMM (sm_90a).
//
// Groups of one modulus (BatchedResidue): the partial of a one-modulus group is the
// residue itself, X = acc mod m in [0, m), one byte. The kernel is CUTLASS's plain
// mainloop, batched over the groups (L = groups, modulus l in batch l), and this node, a
// leaf of our own, reduces each int32 accumulator modulo the modulus of its tile's batch
// (residue(), group_arith.h, the fold of the larger groups) and hands the bytes to the
// collective's TMA store.
//
// Groups of 2 to 4 moduli (PartialCrtEvt<G>): a CUTLASS Epilogue Visitor Tree whose only
// compute node is ours.
//
//   PartialCrtEvt<G> = Sm90EVT<Sm90Compute<PartialCrt<G>::Fn, uint32_t, int32_t>, Sm90AccFetch>
//
// The accumulator fragment reaching the epilogue holds, per element, the group's residues
// packed a byte each (group_mma_sm90.h). The node finishes the group's CRT,
//   x = (sum_g c_g r_g) mod M in [0, M), M = prod m_g < 2^32,
// exactly (64-bit integer sum and a Barrett reduction, group_arith.h), and the collective
// epilogue stores x through TMA as PartialElement<G>: uint32, or one byte for G = 1. The constants c_g, M and the Barrett factor are
// the node's runtime Arguments (GroupCrtConstants), made on the host from the moduli.

#pragma once

#include <cstdint>

#include "cutlass/array.h"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_compute_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_load_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_tma_warpspecialized.hpp"

#include "ozaki/group_arith.h"
#include "ozaki/group_gemm_abi.h"

namespace ozaki {

// The epilogue callbacks of a batched one-modulus-group kernel (see above): a complete
// fusion-callbacks type for CUTLASS's sm_90 collective epilogue (no source, no producer
// loads, no shared memory). Its runtime arguments are the fold constants of every batch.
struct BatchedResidue {
  struct SharedStorage {};

  struct Arguments {
    ModulusFold fold[kMaxGroups] = {};  // batch l: acc mod fold[l].modulus
    int batches = 0;
  };
  using Params = Arguments;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args, void*) {
    return args;
  }

  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem_shape, Arguments const& args) {
    const auto l = cute::get<3>(problem_shape);
    return 1 <= args.batches && args.batches <= kMaxGroups && int(l) == args.batches;
  }

  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&) {
    return 0;
  }

  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*, cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }

  CUTLASS_HOST_DEVICE BatchedResidue() {}
  CUTLASS_HOST_DEVICE BatchedResidue(Params const& params, SharedStorage const&) : params_ptr(&params) {}

  Params const* params_ptr = nullptr;

  CUTLASS_DEVICE bool is_producer_load_needed() const { return false; }
  CUTLASS_DEVICE bool is_C_load_needed() const { return false; }

  template <class... Args>
  CUTLASS_DEVICE auto get_producer_load_callbacks(
      cutlass::epilogue::fusion::ProducerLoadArgs<Args...> const&) {
    return cutlass::epilogue::fusion::EmptyProducerLoadCallbacks{};
  }

  struct ConsumerStoreCallbacks : cutlass::epilogue::fusion::EmptyConsumerStoreCallbacks {
    CUTLASS_DEVICE explicit ConsumerStoreCallbacks(ModulusFold const& fold) : fold(fold) {}

    ModulusFold fold;  // of this tile's batch

    template <typename ElementAccumulator, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<uint8_t, FragmentSize> visit(
        cutlass::Array<ElementAccumulator, FragmentSize> const& frg_acc, int, int, int) {
      static_assert(cute::is_same_v<ElementAccumulator, int32_t>, "int32 accumulators");
      cutlass::Array<uint8_t, FragmentSize> x;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < FragmentSize; ++i) {
        x[i] = static_cast<uint8_t>(residue(frg_acc[i], fold));  // < m <= 256
      }
      return x;
    }
  };

  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(
      cutlass::epilogue::fusion::ConsumerStoreArgs<Args...> const& args) {
    const int l = static_cast<int>(cute::get<3>(args.tile_coord_mnkl));
    return ConsumerStoreCallbacks(params_ptr->fold[l]);
  }
};

template <int G>
struct PartialCrt {
  static_assert(1 <= G && G <= kMaxGroupSize, "a group holds 1 to 4 moduli");

  // Sm90Compute instantiates `Fn<ElementCompute>` (for its Arguments) and
  // `Fn<Array<ElementCompute, N>>` (to compute): both take the packed residues as int32 bits.
  using Element = PartialElement<G>;

  template <class T>
  struct Fn {
    using Arguments = GroupCrtConstants;

    CUTLASS_HOST_DEVICE Element operator()(int32_t packed, Arguments const& k) const {
      return static_cast<Element>(crt_finish<G>(static_cast<uint32_t>(packed), k));
    }

    template <int N>
    CUTLASS_HOST_DEVICE cutlass::Array<Element, N> operator()(
        cutlass::Array<int32_t, N> const& packed, Arguments const& k) const {
      cutlass::Array<Element, N> x;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < N; ++i) {
        x[i] = static_cast<Element>(crt_finish<G>(static_cast<uint32_t>(packed[i]), k));  // < M
      }
      return x;
    }
  };
};

template <int G>
using PartialCrtEvt = cutlass::epilogue::fusion::Sm90EVT<
    cutlass::epilogue::fusion::Sm90Compute<PartialCrt<G>::template Fn, /*ElementOutput=*/PartialElement<G>,
                                           /*ElementCompute=*/int32_t,
                                           cutlass::FloatRoundStyle::round_to_nearest>,
    cutlass::epilogue::fusion::Sm90AccFetch>;

// The EVT's runtime arguments: the accumulator leaf has none, the node the group constants.
template <int G>
typename PartialCrtEvt<G>::Arguments partial_crt_arguments(const GroupCrtConstants& k) {
  typename PartialCrtEvt<G>::Arguments args{};
  args.op_1 = k;
  return args;
}

}  // namespace ozaki
