// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The arch-neutral logic behind the C ABI of every generated INT8 GEMM translation unit
// (templates/int8_gemm_sm90.cu.j2, templates/int8_gemm_sm80.cu.j2; the entry points, their
// contract and the ABI version are described once by ozaki_cutlass.generator.abi.INT8_GEMM,
// which renders their prototypes): argument checking, error messages, and the
// initialize/launch sequence. The arch headers (int8_gemm_sm90.h, int8_gemm_sm80.h) supply
// a *Backend* with the CUTLASS-specific parts; a template only names the CUTLASS types and
// forwards its entry points to `Int8GemmEntry`.
// `run` neither allocates nor synchronizes; all problem checks happen before any CUDA call.

#pragma once

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>

#include <cuda_runtime_api.h>

#include "cutlass/cutlass.h"

#include "ozaki/abi.h"
#include "ozaki/error_message.h"

namespace ozaki {

// Values of the `int` returned by `P_run` (the ABI's status codes).
enum class Status : int {
  kOk = kStatusOk,
  kNotSupported = kStatusUnsupported,  // the problem is outside what this kernel handles
  kCudaError = kStatusCudaError,       // CUDA or CUTLASS failed at initialize or launch
};

// One call of `P_run`, as received (strides and batch strides in elements).
struct Int8GemmProblem {
  int m = 0;
  int n = 0;
  int k = 0;
  int batch = 0;
  const int8_t* a = nullptr;
  int64_t lda = 0;
  int64_t batch_stride_a = 0;
  const int8_t* b = nullptr;
  int64_t ldb = 0;
  int64_t batch_stride_b = 0;
  int32_t* c = nullptr;
  int64_t ldc = 0;
  int64_t batch_stride_c = 0;

  // A densely packed problem of the given size with null pointers: what
  // `P_workspace_size` describes (the workspace depends on the sizes only).
  static Int8GemmProblem packed(int m, int n, int k, int batch) noexcept {
    Int8GemmProblem p;
    p.m = m;
    p.n = n;
    p.k = k;
    p.batch = batch;
    p.lda = k;
    p.ldb = k;
    p.ldc = n;
    p.batch_stride_a = int64_t(m) * k;
    p.batch_stride_b = int64_t(n) * k;
    p.batch_stride_c = int64_t(m) * n;
    return p;
  }

  // Batch strides as the kernel should see them. With batch == 1 the caller's values
  // are meaningless (and may be 0 or unaligned); TMA still encodes an L stride, so use
  // the leading dimension, which the checks below already proved valid.
  int64_t effective_batch_stride_a() const noexcept { return batch > 1 ? batch_stride_a : lda; }
  int64_t effective_batch_stride_b() const noexcept { return batch > 1 ? batch_stride_b : ldb; }
  int64_t effective_batch_stride_c() const noexcept { return batch > 1 ? batch_stride_c : ldc; }
};

// What a kernel demands beyond the ABI's own rules; each arch header fills one in.
struct Int8GemmRequirements {
  int alignment_ab;          // elements of A and B per vector access (K, lda, ldb, sa, sb)
  int alignment_c;           // elements of C per vector access (N, ldc, sc)
  int64_t max_stride;        // largest ld / batch stride in elements the kernel indexes
  int64_t max_stride_bytes;  // largest ld / batch stride in bytes (TMA descriptors: < 2^40)
  int max_batch;             // largest batch (grid.z for 2.x kernels)
};

// TMA descriptors (the sm_90 kernels) take strides below this many bytes.
inline constexpr int64_t kTmaStrideLimitBytes = int64_t(1) << 40;

inline constexpr int kPointerAlignmentBytes = 16;

namespace detail {

inline bool is_aligned(const void* p, int bytes) noexcept {
  return reinterpret_cast<std::uintptr_t>(p) % static_cast<std::uintptr_t>(bytes) == 0;
}

struct NamedSize {
  const char* name;
  int value;
};

struct NamedPointer {
  const char* name;
  const void* ptr;
};

// Every size >= 1 (the GEMM and the fused ABIs alike), else the first that is not.
template <size_t N>
Status check_sizes(const NamedSize (&sizes)[N], ErrorMessage& err) noexcept {
  for (const auto& s : sizes) {
    if (s.value < 1) {
      return err.set(Status::kNotSupported, "%s=%d must be >= 1", s.name, s.value);
    }
  }
  return Status::kOk;
}

// Every pointer non-null and 16-byte aligned (TMA, vector accesses), else the first that is not.
template <size_t N>
Status check_pointers(const NamedPointer (&pointers)[N], ErrorMessage& err) noexcept {
  for (const auto& q : pointers) {
    if (q.ptr == nullptr) {
      return err.set(Status::kNotSupported, "%s is a null pointer", q.name);
    }
    if (!is_aligned(q.ptr, kPointerAlignmentBytes)) {
      return err.set(Status::kNotSupported, "%s=%p must be %d-byte aligned", q.name, q.ptr,
                     kPointerAlignmentBytes);
    }
  }
  return Status::kOk;
}

inline Status check_stride(const char* what, int64_t value, int64_t minimum, int alignment,
                           int element_bytes, const Int8GemmRequirements& req,
                           ErrorMessage& err) noexcept {
  if (value < minimum) {
    return err.set(Status::kNotSupported, "%s=%lld must be >= %lld", what,
                   static_cast<long long>(value), static_cast<long long>(minimum));
  }
  if (value % alignment != 0) {
    return err.set(Status::kNotSupported, "%s=%lld must be a multiple of %d", what,
                   static_cast<long long>(value), alignment);
  }
  if (value > req.max_stride || value >= req.max_stride_bytes / element_bytes) {
    return err.set(Status::kNotSupported,
                   "%s=%lld is too large for this kernel (max %lld elements, < %lld bytes)", what,
                   static_cast<long long>(value), static_cast<long long>(req.max_stride),
                   static_cast<long long>(req.max_stride_bytes));
  }
  return Status::kOk;
}

}  // namespace detail

// Everything about a problem that can be checked on the host without CUDA. Returns
// kNotSupported with a message naming the first offending argument.
inline Status check_problem(const Int8GemmProblem& p, const Int8GemmRequirements& req,
                            ErrorMessage& err) noexcept {
  Status s = detail::check_sizes({{"m", p.m}, {"n", p.n}, {"k", p.k}, {"batch", p.batch}}, err);
  if (s != Status::kOk) {
    return s;
  }
  if (p.batch > req.max_batch) {
    return err.set(Status::kNotSupported, "batch=%d exceeds this kernel's limit of %d", p.batch,
                   req.max_batch);
  }
  if (p.k % req.alignment_ab != 0) {
    return err.set(Status::kNotSupported, "k=%d must be a multiple of %d", p.k, req.alignment_ab);
  }
  if (p.n % req.alignment_c != 0) {
    return err.set(Status::kNotSupported, "n=%d must be a multiple of %d (int32 output rows)",
                   p.n, req.alignment_c);
  }

  if ((s = detail::check_pointers({{"A", p.a}, {"B", p.b}, {"C", p.c}}, err)) != Status::kOk) {
    return s;
  }
  if ((s = detail::check_stride("lda", p.lda, p.k, req.alignment_ab, 1, req, err)) != Status::kOk ||
      (s = detail::check_stride("ldb", p.ldb, p.k, req.alignment_ab, 1, req, err)) != Status::kOk ||
      (s = detail::check_stride("ldc", p.ldc, p.n, req.alignment_c, 4, req, err)) != Status::kOk) {
    return s;
  }
  if (p.batch == 1) {
    return Status::kOk;  // batch strides unused (see effective_batch_stride_*)
  }
  // Positive: a zero stride would make the batched C writes race, and TMA wants
  // non-degenerate strides; the Ozaki runtime never broadcasts an operand.
  const struct {
    const char* name;
    int64_t value;
  } batch_strides[] = {{"batch_stride_a", p.batch_stride_a},
                       {"batch_stride_b", p.batch_stride_b},
                       {"batch_stride_c", p.batch_stride_c}};
  for (const auto& bs : batch_strides) {
    if (bs.value <= 0) {
      return err.set(Status::kNotSupported, "%s=%lld must be > 0 when batch=%d", bs.name,
                     static_cast<long long>(bs.value), p.batch);
    }
  }
  if ((s = detail::check_stride("batch_stride_a", p.batch_stride_a, 1, req.alignment_ab, 1, req,
                                err)) != Status::kOk ||
      (s = detail::check_stride("batch_stride_b", p.batch_stride_b, 1, req.alignment_ab, 1, req,
                                err)) != Status::kOk ||
      (s = detail::check_stride("batch_stride_c", p.batch_stride_c, 1, req.alignment_c, 4, req,
                                err)) != Status::kOk) {
    return s;
  }
  return Status::kOk;
}

inline Status check_workspace(size_t needed, const void* workspace, size_t workspace_bytes,
                              ErrorMessage& err) noexcept {
  if (needed == 0) {
    return Status::kOk;
  }
  if (workspace_bytes < needed) {
    return err.set(Status::kNotSupported,
                   "workspace_bytes=%zu is smaller than the %zu bytes this problem needs",
                   workspace_bytes, needed);
  }
  if (workspace == nullptr) {
    return err.set(Status::kNotSupported, "workspace is a null pointer (%zu bytes needed)", needed);
  }
  if (!detail::is_aligned(workspace, kPointerAlignmentBytes)) {
    return err.set(Status::kNotSupported, "workspace=%p must be %d-byte aligned", workspace,
                   kPointerAlignmentBytes);
  }
  return Status::kOk;
}

// A CUTLASS failure at initialize/launch, with the CUDA error CUTLASS may have left
// pending (reading it also clears it).
inline Status cutlass_failure(const char* stage, cutlass::Status status,
                              ErrorMessage& err) noexcept {
  const cudaError_t cuda = cudaGetLastError();
  if (cuda != cudaSuccess) {
    return err.set(Status::kCudaError, "CUTLASS %s failed: %s (CUDA %s: %s)", stage,
                   cutlass::cutlassGetStatusString(status), cudaGetErrorName(cuda),
                   cudaGetErrorString(cuda));
  }
  return err.set(Status::kCudaError, "CUTLASS %s failed: %s", stage,
                 cutlass::cutlassGetStatusString(status));
}

inline Status cuda_failure(const char* stage, cudaError_t cuda, ErrorMessage& err) noexcept {
  return err.set(Status::kCudaError, "%s failed: %s: %s", stage, cudaGetErrorName(cuda),
                 cudaGetErrorString(cuda));
}

// `run` of every generated entry point: clears the message, runs `body` (which returns a
// Status) and turns an escaping C++ exception into status 2 with a message.
template <class Body>
int run_guarded(ErrorMessage& err, Body&& body) noexcept {
  err.clear();
  try {
    return static_cast<int>(body());
  } catch (...) {
    return static_cast<int>(
        err.set(Status::kCudaError, "unexpected C++ exception in the kernel entry point"));
  }
}

// What every CUTLASS device-level GEMM entry runs after its own checks: CUTLASS's
// can_implement (`problem` names the call in its message), the workspace check, the
// backend's `bind_device(args, err)`, initialize, run, and the launch's CUDA error.
template <class Gemm, class BindDevice>
Status run_cutlass_gemm(typename Gemm::Arguments& args, size_t workspace_needed, void* workspace,
                        size_t workspace_bytes, cudaStream_t stream, BindDevice&& bind_device,
                        const char* problem, ErrorMessage& err) {
  cutlass::Status cs = Gemm::can_implement(args);
  if (cs != cutlass::Status::kSuccess) {
    return err.set(Status::kNotSupported, "CUTLASS can_implement rejected %s: %s", problem,
                   cutlass::cutlassGetStatusString(cs));
  }
  Status status = check_workspace(workspace_needed, workspace, workspace_bytes, err);
  if (status != Status::kOk) {
    return status;
  }
  status = bind_device(args, err);
  if (status != Status::kOk) {
    return status;
  }
  Gemm gemm;
  cs = gemm.initialize(args, workspace, stream);
  if (cs != cutlass::Status::kSuccess) {
    return cutlass_failure("initialize", cs, err);
  }
  cs = gemm.run(stream);
  if (cs != cutlass::Status::kSuccess) {
    return cutlass_failure("launch", cs, err);
  }
  const cudaError_t cuda = cudaGetLastError();
  if (cuda != cudaSuccess) {
    return cuda_failure("kernel launch", cuda, err);
  }
  return Status::kOk;
}

// The entry points of one generated library. `Backend` (see int8_gemm_sm90.h,
// int8_gemm_sm80.h) provides:
//   using Gemm;                                        // a CUTLASS device-level GEMM
//   static constexpr Int8GemmRequirements kRequirements;
//   static Gemm::Arguments make_arguments(const Int8GemmProblem&);   // host only
//   static size_t workspace_size(const Gemm::Arguments&);           // host only
//   static Status bind_device(Gemm::Arguments&, ErrorMessage&);      // may call CUDA
template <class Backend>
struct Int8GemmEntry {
  using Gemm = typename Backend::Gemm;
  using Arguments = typename Gemm::Arguments;

  static int run(const Int8GemmProblem& problem, void* workspace, size_t workspace_bytes,
                 cudaStream_t stream, ErrorMessage& err) noexcept {
    return run_guarded(err, [&] { return run_checked(problem, workspace, workspace_bytes, stream, err); });
  }

  // 0 when the sizes are not a valid problem (run() then reports why).
  static size_t workspace_size(int m, int n, int k, int batch) noexcept {
    try {
      const Int8GemmProblem problem = Int8GemmProblem::packed(m, n, k, batch);
      if (m < 1 || n < 1 || k < 1 || batch < 1) {
        return 0;
      }
      return Backend::workspace_size(Backend::make_arguments(problem));
    } catch (...) {
      return 0;
    }
  }

 private:
  static Status run_checked(const Int8GemmProblem& problem, void* workspace,
                            size_t workspace_bytes, cudaStream_t stream, ErrorMessage& err) {
    const Status status = check_problem(problem, Backend::kRequirements, err);
    if (status != Status::kOk) {
      return status;
    }
    Arguments args = Backend::make_arguments(problem);
    char text[96];
    std::snprintf(text, sizeof(text), "m=%d n=%d k=%d batch=%d", problem.m, problem.n, problem.k,
                  problem.batch);
    return run_cutlass_gemm<Gemm>(args, Backend::workspace_size(args), workspace, workspace_bytes,
                                  stream, Backend::bind_device, text, err);
  }
};

}  // namespace ozaki
