// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// Backend for Int8GemmEntry (int8_gemm_entry.h) over a CUTLASS 2.x
// `cutlass::gemm::device::GemmUniversal` (mma.sync m16n8k32, sm_80 and later via PTX):
// maps the C ABI's problem onto CUTLASS arguments in kBatched mode.

#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "cutlass/cutlass.h"
#include "cutlass/arch/mma.h"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/epilogue/thread/scale_type.h"
#include "cutlass/gemm/gemm.h"
#include "cutlass/layout/matrix.h"

#include "ozaki/int8_gemm_entry.h"

namespace ozaki {

// The store-only 2.x epilogue: D = accumulator, converted int32 -> int32 (the identity),
// with no alpha, no beta and no read of C (`ScaleType::Nothing` makes
// `is_source_needed()` false).
template <int kAlignmentC>
using Sm80Int32StoreEpilogue =
    cutlass::epilogue::thread::LinearCombination<int32_t, kAlignmentC, int32_t, int32_t,
                                                 cutlass::epilogue::thread::ScaleType::Nothing>;

template <class Gemm_>
struct Int8GemmSm80 {
  using Gemm = Gemm_;
  using GemmKernel = typename Gemm::GemmKernel;
  using Arguments = typename Gemm::Arguments;

  static_assert(std::is_same_v<typename Gemm::ElementA, int8_t>, "A must be int8");
  static_assert(std::is_same_v<typename Gemm::ElementB, int8_t>, "B must be int8");
  static_assert(std::is_same_v<typename Gemm::ElementC, int32_t>, "C must be int32");
  static_assert(std::is_same_v<typename Gemm::ElementAccumulator, int32_t>,
                "the accumulator must be int32");
  static_assert(std::is_same_v<typename Gemm::LayoutA, cutlass::layout::RowMajor> &&
                    std::is_same_v<typename Gemm::LayoutB, cutlass::layout::ColumnMajor> &&
                    std::is_same_v<typename Gemm::LayoutC, cutlass::layout::RowMajor>,
                "TN layout: A row-major (M x K), B column-major (N x K), C row-major");
  static_assert(std::is_same_v<typename Gemm::Operator, cutlass::arch::OpMultiplyAdd>,
                "use OpMultiplyAdd (wrap-around), never OpMultiplyAddSaturate");
  static_assert(std::is_same_v<typename Gemm::InstructionShape, cutlass::gemm::GemmShape<16, 8, 32>>,
                "ozaki/mma_sm80_s8_wrap.h provides the wrap-around MMA for m16n8k32 only");
  // The instruction the warps actually issue: ours, never the `.satfinite` one.
  static_assert(std::is_same_v<typename GemmKernel::Mma::Operator::MathOperator,
                               cutlass::arch::OpMultiplyAdd>,
                "the warp-level MMA must be the wrap-around s8 MMA");

  static constexpr Int8GemmRequirements kRequirements{
      /*alignment_ab=*/Gemm::kAlignmentA,
      /*alignment_c=*/Gemm::kAlignmentC,
      // 2.x layouts hold leading dimensions in `int` (batch strides are int64).
      /*max_stride=*/std::numeric_limits<int>::max(),
      /*max_stride_bytes=*/std::numeric_limits<int64_t>::max(),
      // kBatched puts the batch on grid.z.
      /*max_batch=*/std::numeric_limits<uint16_t>::max(),
  };
  static_assert(Gemm::kAlignmentA == Gemm::kAlignmentB, "A and B share one alignment rule");

  static Arguments make_arguments(const Int8GemmProblem& p) {
    return Arguments(cutlass::gemm::GemmUniversalMode::kBatched, {p.m, p.n, p.k}, p.batch,
                     typename Gemm::EpilogueOutputOp::Params{},
                     p.a, p.b,
                     // C is never read (store-only epilogue); D aliases it for a valid iterator.
                     p.c, p.c,
                     p.effective_batch_stride_a(), p.effective_batch_stride_b(),
                     p.effective_batch_stride_c(), p.effective_batch_stride_c(),
                     p.lda, p.ldb, p.ldc, p.ldc);
  }

  // Host only. `Gemm::get_workspace_size` computes the same value but first queries the
  // device for occupancy, which the kBatched workspace does not depend on.
  static size_t workspace_size(const Arguments& args) {
    return typename GemmKernel::Params(args, /*device_sms=*/0, /*sm_occupancy=*/0)
        .get_workspace_size();
  }

  // CUTLASS 2.x queries and caches the device itself (per thread) during initialize.
  static Status bind_device(Arguments&, ErrorMessage&) noexcept { return Status::kOk; }
};

}  // namespace ozaki
