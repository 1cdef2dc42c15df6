// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// Backend for Int8GemmEntry (int8_gemm_entry.h) over a CUTLASS 3.x
// `GemmUniversalAdapter` built for sm_90a (TMA + wgmma s32.s8.s8, TN layout):
// maps the C ABI's problem onto CUTLASS arguments and binds the current device.

#pragma once

#include <cstdint>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/device_kernel.h"
#include "cutlass/gemm/gemm.h"
#include "cutlass/kernel_hardware_info.h"

#include "ozaki/int8_gemm_entry.h"

namespace ozaki {

// Runs before Gemm::initialize, which encodes the TMA descriptors. CUTLASS only prints
// (and, with NDEBUG, ignores) a failed encode, so everything it needs must hold here:
//  - a current context: the kernel query below makes the runtime bind the current
//    device's primary context if none is current (it does not replace a current one),
//    and fails loudly if this sm_90a image cannot run on the device;
//  - the SM count of the *current* device for the persistent scheduler's grid (left
//    at 0, CUTLASS would query device 0 instead).
// Shared by the plain (Int8GemmSm90) and the fused (group_gemm_sm90.h) kernels.
template <class GemmKernel>
Status bind_sm90_device(cutlass::KernelHardwareInfo& hw_info, ErrorMessage& err) noexcept {
  int device = 0;
  cudaError_t cuda = cudaGetDevice(&device);
  if (cuda != cudaSuccess) {
    return cuda_failure("cudaGetDevice", cuda, err);
  }
  cudaFuncAttributes attributes{};
  cuda = cudaFuncGetAttributes(&attributes, cutlass::device_kernel<GemmKernel>);
  if (cuda != cudaSuccess) {
    return cuda_failure("loading the sm_90a kernel (cudaFuncGetAttributes)", cuda, err);
  }
  int sm_count = 0;
  cuda = cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
  if (cuda != cudaSuccess) {
    return cuda_failure("cudaDeviceGetAttribute(MultiProcessorCount)", cuda, err);
  }
  hw_info.device_id = device;
  hw_info.sm_count = sm_count;
  return Status::kOk;
}

// What both sm_90a backends (Int8GemmSm90 below, GroupGemmSm90Entry in
// group_gemm_sm90.h) take of their CUTLASS adapter: its types, int8 operands in the TN
// layout (A M x K and B N x K, both K-contiguous; D M x N row-major, batches along L), no
// source C. MaxSwizzle: the persistent tile scheduler's swizzle (1 = none; 2/4/8 visit
// tiles in groups along the minor raster dimension so operand tiles are reused from L2).
template <class Gemm_, int MaxSwizzle>
struct Sm90TnGemm {
  static_assert(MaxSwizzle == 1 || MaxSwizzle == 2 || MaxSwizzle == 4 || MaxSwizzle == 8,
                "swizzle must be 1, 2, 4 or 8");
  using Gemm = Gemm_;
  using GemmKernel = typename Gemm::GemmKernel;
  using Arguments = typename Gemm::Arguments;
  using StrideA = typename GemmKernel::StrideA;
  using StrideB = typename GemmKernel::StrideB;
  using StrideD = typename GemmKernel::StrideD;

  static_assert(std::is_same_v<typename GemmKernel::ElementA, int8_t>, "A must be int8");
  static_assert(std::is_same_v<typename GemmKernel::ElementB, int8_t>, "B must be int8");
  static_assert(std::is_void_v<typename GemmKernel::ElementC>,
                "the epilogue must not read a source C");
  static_assert(std::is_same_v<StrideA, cute::Stride<int64_t, cute::Int<1>, int64_t>>,
                "A must be row-major (K contiguous)");
  static_assert(std::is_same_v<StrideB, cute::Stride<int64_t, cute::Int<1>, int64_t>>,
                "B must be column-major in CUTLASS terms (N x K, K contiguous)");
  static_assert(std::is_same_v<StrideD, cute::Stride<int64_t, cute::Int<1>, int64_t>>,
                "D must be row-major");
};

template <class Gemm_, int MaxSwizzle = 1>
struct Int8GemmSm90 : Sm90TnGemm<Gemm_, MaxSwizzle> {
  using Base = Sm90TnGemm<Gemm_, MaxSwizzle>;
  using typename Base::Gemm, typename Base::GemmKernel, typename Base::Arguments,
      typename Base::StrideA, typename Base::StrideB, typename Base::StrideD;

  static_assert(std::is_same_v<typename GemmKernel::ElementD, int32_t>, "D must be int32");
  static_assert(std::is_same_v<typename GemmKernel::ElementAccumulator, int32_t>,
                "the accumulator must be int32");
  static_assert(cute::rank(typename GemmKernel::ProblemShape{}) == 4,
                "the problem shape must be (M, N, K, L)");

  // TMA: 16-byte aligned base, 16-byte multiple strides below 2^40 bytes.
  static constexpr Int8GemmRequirements kRequirements{
      /*alignment_ab=*/16,
      /*alignment_c=*/4,
      /*max_stride=*/std::numeric_limits<int64_t>::max(),
      /*max_stride_bytes=*/kTmaStrideLimitBytes,
      /*max_batch=*/std::numeric_limits<int>::max(),
  };

  static Arguments make_arguments(const Int8GemmProblem& p) {
    const StrideA stride_a = cute::make_stride(p.lda, cute::Int<1>{}, p.effective_batch_stride_a());
    const StrideB stride_b = cute::make_stride(p.ldb, cute::Int<1>{}, p.effective_batch_stride_b());
    const StrideD stride_d = cute::make_stride(p.ldc, cute::Int<1>{}, p.effective_batch_stride_c());
    Arguments args{};
    args.mode = cutlass::gemm::GemmUniversalMode::kBatched;
    args.problem_shape = {p.m, p.n, p.k, p.batch};
    args.mainloop.ptr_A = p.a;
    args.mainloop.dA = stride_a;
    args.mainloop.ptr_B = p.b;
    args.mainloop.dB = stride_b;
    args.epilogue.thread = {};  // the store-only epilogue takes no arguments
    args.epilogue.ptr_C = nullptr;
    args.epilogue.dC = stride_d;
    args.epilogue.ptr_D = p.c;
    args.epilogue.dD = stride_d;
    args.scheduler.max_swizzle_size = MaxSwizzle;
    return args;
  }

  // Host only: the persistent tile scheduler's and epilogue's needs depend on sizes alone.
  static size_t workspace_size(const Arguments& args) { return Gemm::get_workspace_size(args); }

  static Status bind_device(Arguments& args, ErrorMessage& err) noexcept {
    return bind_sm90_device<GemmKernel>(args.hw_info, err);
  }
};

}  // namespace ozaki
