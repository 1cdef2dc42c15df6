// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The partial-CRT epilogue of the fused modulus-group GEMM (sm_90a): a CUTLASS Epilogue
// Visitor Tree whose only compute node is ours.
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

namespace ozaki {

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
