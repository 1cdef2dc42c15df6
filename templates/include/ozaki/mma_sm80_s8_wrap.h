// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// Wrap-around (non-saturating) INT8 tensor-core MMA for CUTLASS 2.x on sm_80+.
//
// CUTLASS 2.x defines `cutlass::arch::Mma` for s8 x s8 -> s32 m16n8k32 only with
// `OpMultiplyAddSaturate` (PTX `.satfinite`: clamps to [INT32_MIN, INT32_MAX]). The
// Ozaki scheme needs the exact two's-complement sum, so this header adds the missing
// `OpMultiplyAdd` specialization: the same instruction without `.satfinite`, which the
// PTX ISA defines as wrap-around. Selecting `cutlass::arch::OpMultiplyAdd` as the GEMM's
// math operator routes every warp-level MMA here.
//
// Include after "cutlass/arch/mma_sm80.h" and before instantiating a GEMM. Should a
// future CUTLASS add this specialization itself, the redefinition is a compile error
// (never a silent switch of semantics); drop this header then.

#pragma once

#include <cstdint>

#include "cutlass/arch/mma.h"
#include "cutlass/arch/mma_sm80.h"
#include "cutlass/array.h"
#include "cutlass/gemm/gemm.h"
#include "cutlass/layout/matrix.h"

namespace cutlass {
namespace arch {

/// S32 = S8 * S8 + S32, m16n8k32, wrap-around on overflow.
template <>
struct Mma<gemm::GemmShape<16, 8, 32>, 32, int8_t, layout::RowMajor, int8_t,
           layout::ColumnMajor, int, layout::RowMajor, OpMultiplyAdd> {
  using Shape = gemm::GemmShape<16, 8, 32>;

  using ElementA = int8_t;
  using LayoutA = layout::RowMajor;
  using FragmentA = Array<int8_t, 16>;

  using ElementB = int8_t;
  using LayoutB = layout::ColumnMajor;
  using FragmentB = Array<int8_t, 8>;

  using ElementC = int;
  using LayoutC = layout::RowMajor;
  using FragmentC = Array<int, 4>;

  using Operator = OpMultiplyAdd;
  using ArchTag = arch::Sm80;

  CUTLASS_HOST_DEVICE
  void operator()(FragmentC& d, FragmentA const& a, FragmentB const& b,
                  FragmentC const& c) const {
#if defined(CUTLASS_ARCH_MMA_SM80_ENABLED)
    uint32_t const* a_regs = reinterpret_cast<uint32_t const*>(&a);
    uint32_t const* b_regs = reinterpret_cast<uint32_t const*>(&b);
    int const* c_regs = reinterpret_cast<int const*>(&c);
    int* d_regs = reinterpret_cast<int*>(&d);

    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, "
        "{%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
        : "=r"(d_regs[0]), "=r"(d_regs[1]), "=r"(d_regs[2]), "=r"(d_regs[3])
        : "r"(a_regs[0]), "r"(a_regs[1]), "r"(a_regs[2]), "r"(a_regs[3]), "r"(b_regs[0]),
          "r"(b_regs[1]), "r"(c_regs[0]), "r"(c_regs[1]), "r"(c_regs[2]), "r"(c_regs[3]));
#else
    CUTLASS_UNUSED(d);
    CUTLASS_UNUSED(a);
    CUTLASS_UNUSED(b);
    CUTLASS_UNUSED(c);
    CUTLASS_NOT_IMPLEMENTED();
#endif
  }
};

}  // namespace arch
}  // namespace cutlass
