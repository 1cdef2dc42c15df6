// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The host logic behind the C ABI of a fused modulus-group INT8 GEMM
// (templates/int8_group_gemm_sm90.cu.j2; its entry points, their contract and the ABI
// version are described once by ozaki_cutlass.generator.abi.GROUP_GEMM, which renders
// their prototypes, shared with the sm_80 kernels): argument checks (group_gemm_abi.h),
// the group constants, the CUTLASS arguments of the group mainloop (group_mma_sm90.h) and
// the partial-CRT epilogue (partial_crt.h).
//
// One call takes `groups` consecutive groups of G moduli, every modulus's int8 residues
// concatenated along k: modulus h = q*G + g (group q, g < G) at columns
// [h*k_pad, (h+1)*k_pad) of A's and B's rows. Kernels of one-modulus groups run every
// group in one batched launch; the others launch once per group (in this call, in order,
// on `stream`). `run` neither allocates nor synchronizes.

#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <cuda_runtime_api.h>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/device_kernel.h"
#include "cutlass/gemm/gemm.h"
#include "cutlass/kernel_hardware_info.h"

#include "ozaki/group_arith.h"
#include "ozaki/group_gemm_abi.h"
#include "ozaki/int8_gemm_entry.h"
#include "ozaki/int8_gemm_sm90.h"
#include "ozaki/partial_crt.h"

namespace ozaki {

// Backend of one generated library: `Gemm` is a GemmUniversalAdapter over a kernel whose
// mainloop is GroupMmaSm90<..., G> and whose epilogue runs PartialCrtEvt<G>, or, for
// G = 1, over CUTLASS's own mainloop batched over the groups, with BatchedResidue as its
// epilogue (partial_crt.h).
template <class Gemm_, int G, int TileK, int MaxSwizzle = 1>
struct GroupGemmSm90Entry : Sm90TnGemm<Gemm_, MaxSwizzle> {
  static constexpr bool kBatched = G == 1;  // every group in one launch (L = groups)
  using Base = Sm90TnGemm<Gemm_, MaxSwizzle>;
  using typename Base::Gemm, typename Base::GemmKernel, typename Base::Arguments;

  using ElementX = PartialElement<G>;
  static_assert(std::is_same_v<typename GemmKernel::ElementD, ElementX>, "X must be PartialElement<G>");
  static_assert(TileK == cute::size<2>(typename GemmKernel::TileShape{}), "tile_k mismatch");
  // A split-K or stream-K scheduler would hand one tile's K range to several CTAs; the
  // fold needs each CTA to see every k-tile of every modulus of its output tile.
  static_assert(std::is_void_v<typename GemmKernel::TileSchedulerTag> ||
                    std::is_same_v<typename GemmKernel::TileSchedulerTag, cutlass::gemm::PersistentScheduler>,
                "the fused kernel needs a data-parallel tile scheduler (no split-K, no stream-K)");

  static int run(const GroupGemmProblem& problem, void* workspace, size_t workspace_bytes,
                 cudaStream_t stream, ErrorMessage& err) noexcept {
    return run_guarded(err, [&] { return run_checked(problem, workspace, workspace_bytes, stream, err); });
  }

  // 0 when the sizes are not a valid problem (run() then reports why). A kernel launched
  // once per group needs the workspace of one launch (the launches run in stream order).
  static size_t workspace_size(int m, int n, int k_pad, int group_size, int groups) noexcept {
    try {
      if (m < 1 || n < 1 || k_pad < 1 || group_size != G || k_pad > kMaxKPad || groups < 1 ||
          groups * G > kMaxGroups) {
        return 0;
      }
      static const GroupConstants kNone[kMaxGroups] = {};
      return Gemm::get_workspace_size(
          make_arguments(GroupGemmProblem::packed(m, n, k_pad, group_size, groups), 0, kNone));
    } catch (...) {
      return 0;
    }
  }

 private:
  static constexpr int kMaxKPad = std::numeric_limits<int>::max() / G;  // K = G*k_pad fits int
  static constexpr GroupGemmLimits kLimits = tma_group_limits<ElementX>(TileK);

  // The CUTLASS arguments of the launch for group q (kBatched: of the one launch, q = 0).
  static Arguments make_arguments(const GroupGemmProblem& p, int q,
                                  const GroupConstants (&constants)[kMaxGroups]) {
    Arguments args{};
    if constexpr (kBatched) {
      // batch l = group l: its residues k_pad columns after the previous group's
      args.mode = cutlass::gemm::GemmUniversalMode::kBatched;
      args.problem_shape = cute::make_shape(p.m, p.n, p.k_pad, p.groups);
      args.mainloop.ptr_A = p.a;
      args.mainloop.dA = cute::make_stride(p.lda, cute::Int<1>{}, int64_t(p.k_pad));
      args.mainloop.ptr_B = p.b;
      args.mainloop.dB = cute::make_stride(p.ldb, cute::Int<1>{}, int64_t(p.k_pad));
      for (int l = 0; l < p.groups; ++l) {
        args.epilogue.thread.fold[l] = constants[l].fold[0];
      }
      args.epilogue.thread.batches = p.groups;
      args.epilogue.ptr_D = static_cast<ElementX*>(p.x);
      args.epilogue.dD = cute::make_stride(p.ldx, cute::Int<1>{}, p.effective_stride_x());
    } else {
      // Batch strides (L = 1) are unused, but TMA encodes one: the leading dimension is valid.
      const int64_t first = int64_t(q) * G * p.k_pad;
      args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
      args.problem_shape = cute::make_shape(p.m, p.n, G * p.k_pad, 1);  // K: the whole group
      args.mainloop.ptr_A = p.a + first;
      args.mainloop.dA = cute::make_stride(p.lda, cute::Int<1>{}, p.lda);
      args.mainloop.ptr_B = p.b + first;
      args.mainloop.dB = cute::make_stride(p.ldb, cute::Int<1>{}, p.ldb);
      for (int g = 0; g < G; ++g) {
        args.mainloop.group.fold[g] = constants[q].fold[g];
      }
      args.mainloop.group.k_tiles_per_modulus = p.k_pad / TileK;
      args.epilogue.thread = partial_crt_arguments<G>(constants[q].crt);
      args.epilogue.ptr_D = static_cast<ElementX*>(p.x) + q * p.stride_x;
      args.epilogue.dD = cute::make_stride(p.ldx, cute::Int<1>{}, p.ldx);
    }
    args.epilogue.ptr_C = nullptr;
    args.epilogue.dC = args.epilogue.dD;
    args.scheduler.max_swizzle_size = MaxSwizzle;
    return args;
  }

  static Status run_checked(const GroupGemmProblem& problem, void* workspace,
                            size_t workspace_bytes, cudaStream_t stream, ErrorMessage& err) {
    GroupConstants constants[kMaxGroups];
    const Status status = check_group_problem<G>(problem, kLimits, constants, err);
    if (status != Status::kOk) {
      return status;
    }
    const int launches = kBatched ? 1 : problem.groups;
    for (int q = 0; q < launches; ++q) {
      Arguments args = make_arguments(problem, q, constants);
      char text[128];
      std::snprintf(text, sizeof(text), "m=%d n=%d k_pad=%d group_size=%d groups=%d (launch %d)",
                    problem.m, problem.n, problem.k_pad, problem.group_size, problem.groups, q);
      const Status s = run_cutlass_gemm<Gemm>(
          args, Gemm::get_workspace_size(args), workspace, workspace_bytes, stream,
          [](Arguments& a, ErrorMessage& e) { return bind_sm90_device<GemmKernel>(a.hw_info, e); },
          text, err);
      if (s != Status::kOk) {
        return s;
      }
    }
    return Status::kOk;
  }
};

}  // namespace ozaki
