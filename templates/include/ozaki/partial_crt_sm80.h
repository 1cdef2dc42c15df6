// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The partial-CRT epilogue of the fused modulus-group GEMM on sm_80: a CUTLASS 2.x
// Epilogue Visitor Tree (cutlass/epilogue/threadblock/fusion) whose compute node is ours,
// the sm_80 twin of partial_crt.h.
//
//   PartialCrtEvtSm80<G, ThreadMap> =
//       Sm80EVT<VisitorAuxStore<ThreadMap, PartialElement<G>, ...>,
//                Sm80EVT<PartialCrtSm80<G>, VisitorAccFetch>>
//
// The accumulators reaching the epilogue hold, per element, the group's residues packed a
// byte each (group_gemm_sm80.h folds them). Our node finishes the group's CRT,
//   x = (sum_g c_g r_g) mod M in [0, M), M = prod m_g < 2^32,
// with crt_finish<G> (group_arith.h), and CUTLASS's store node writes x as PartialElement<G>
// (uint32, or one byte for G = 1) to row-major X, skipping the vectors outside (m, n).
// The node's runtime arguments are the group constants (GroupCrtConstants), made on the host.

#pragma once

#include <cstdint>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/array.h"
#include "cutlass/cutlass.h"
#include "cutlass/gemm/gemm.h"
// The 2.x visitors use these without including them.
#include "cutlass/epilogue/threadblock/default_thread_map_tensor_op.h"
#include "cutlass/numeric_conversion.h"
#include "cutlass/epilogue/threadblock/fusion/visitors.hpp"

#include "ozaki/group_arith.h"

namespace ozaki {

// The compute node: packed residues (int32 bits) -> the group partial.
template <int G>
struct PartialCrtSm80 {
  static_assert(1 <= G && G <= kMaxGroupSize, "a group holds 1 to 4 moduli");
  using Element = PartialElement<G>;

  using Arguments = GroupCrtConstants;
  using Params = GroupCrtConstants;
  struct SharedStorage {};

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args, void*) {
    return args;
  }

  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const& args) {
    return args.product >= kMinModulus;
  }

  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&) {
    return 0;
  }

  CUTLASS_HOST_DEVICE PartialCrtSm80() {}

  CUTLASS_HOST_DEVICE PartialCrtSm80(Params const& params, SharedStorage const&) : params_ptr(&params) {}

  Params const* params_ptr = nullptr;

  struct Callbacks : cutlass::epilogue::threadblock::EmptyCallbacks {
    GroupCrtConstants k;  // a copy: the constants stay in registers across the tile

    CUTLASS_DEVICE explicit Callbacks(GroupCrtConstants const& constants) : k(constants) {}

    template <class ElementAccumulator, class ElementInput, int N>
    CUTLASS_DEVICE cutlass::Array<Element, N> visit(int, int, int, int,
                                                    cutlass::Array<ElementAccumulator, N> const&,
                                                    cutlass::Array<ElementInput, N> const& packed) {
      static_assert(std::is_same_v<ElementInput, int32_t>, "the packed residues arrive as int32 bits");
      cutlass::Array<Element, N> x;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < N; ++i) {
        x[i] = static_cast<Element>(crt_finish<G>(static_cast<uint32_t>(packed[i]), k));  // < M
      }
      return x;
    }
  };

  template <class ProblemShape>
  CUTLASS_DEVICE Callbacks get_callbacks(cutlass::gemm::GemmCoord, int, ProblemShape) {
    return Callbacks(*params_ptr);
  }
};

// X row-major (M, N, L = 1), ldx in elements.
using PartialStrideSm80 = cute::Stride<int64_t, cute::Int<1>, int64_t>;

template <int G, class OutputTileThreadMap>
using PartialCrtEvtSm80 = cutlass::epilogue::threadblock::Sm80EVT<
    cutlass::epilogue::threadblock::VisitorAuxStore<OutputTileThreadMap, PartialElement<G>,
                                                    cutlass::FloatRoundStyle::round_to_nearest,
                                                    PartialStrideSm80>,
    cutlass::epilogue::threadblock::Sm80EVT<PartialCrtSm80<G>,
                                            cutlass::epilogue::threadblock::VisitorAccFetch>>;

// The tree's runtime arguments: the accumulator leaf has none, our node the group
// constants, the store node where X lives.
template <int G, class OutputTileThreadMap>
typename PartialCrtEvtSm80<G, OutputTileThreadMap>::Arguments partial_crt_sm80_arguments(
    const GroupCrtConstants& k, PartialElement<G>* x, int64_t ldx, int m) {
  typename PartialCrtEvtSm80<G, OutputTileThreadMap>::Arguments args{};
  args.op_0.op_1 = k;  // the CRT node (op_0 of its subtree is the accumulator fetch)
  args.op_1.ptr_aux = x;
  args.op_1.dAux = PartialStrideSm80{ldx, cute::Int<1>{}, int64_t(m) * ldx};
  return args;
}

}  // namespace ozaki
