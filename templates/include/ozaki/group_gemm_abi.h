// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The arch-neutral half of the fused modulus-group GEMM's C ABI (described, with its
// version, by ozaki_cutlass.generator.abi.GROUP_GEMM): one call as received, and every
// check of it that needs no CUDA, parameterized by what the kernel's memory accesses
// demand.
//
// Used by the sm_90a (group_gemm_sm90.h) and the sm_80 (group_gemm_sm80.h) kernels, with
// their own limits (GroupGemmLimits).

#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "ozaki/constants.h"
#include "ozaki/group_arith.h"
#include "ozaki/int8_gemm_entry.h"

namespace ozaki {

// Groups one call takes: every modulus one CRT call takes, in groups of one.
inline constexpr int kMaxGroups = kMaxModuli;

// One call of `P_run`, as received.
struct GroupGemmProblem {
  int m = 0;
  int n = 0;
  int k_pad = 0;
  int group_size = 0;
  int groups = 0;
  const int8_t* a = nullptr;
  int64_t lda = 0;
  const int8_t* b = nullptr;
  int64_t ldb = 0;
  void* x = nullptr;  // PartialElement<G>
  int64_t ldx = 0;
  int64_t stride_x = 0;  // elements from one group's partials to the next (groups > 1)
  const uint32_t* moduli = nullptr;  // host, groups * group_size values

  // A densely packed problem of the given sizes with null pointers: what
  // `P_workspace_size` describes.
  static GroupGemmProblem packed(int m, int n, int k_pad, int group_size, int groups) noexcept {
    GroupGemmProblem p;
    p.m = m;
    p.n = n;
    p.k_pad = k_pad;
    p.group_size = group_size;
    p.groups = groups;
    p.lda = p.ldb = int64_t(groups) * group_size * k_pad;
    p.ldx = n;
    p.stride_x = int64_t(m) * n;
    return p;
  }

  // The partials' batch stride as the kernel sees it: with one group the caller's value
  // is unused (and may be 0), but TMA encodes one, so the checked leading dimension.
  int64_t effective_stride_x() const noexcept { return groups > 1 ? stride_x : ldx; }
};

// What one kernel demands beyond the ABI's own rules.
struct GroupGemmLimits {
  int tile_k;                 // k_pad is a multiple of it (a modulus ends on a k-tile)
  int64_t max_stride_ab;      // largest lda / ldb in elements the kernel indexes
  int64_t max_stride_x;       // largest ldx and stride_x in elements
};

// The limits of a kernel whose A, B (int8) and X (ElementX) go through TMA descriptors.
template <class ElementX>
constexpr GroupGemmLimits tma_group_limits(int tile_k) {
  return GroupGemmLimits{tile_k, kTmaStrideLimitBytes - 1, kTmaStrideLimitBytes / int64_t(sizeof(ElementX)) - 1};
}

// Everything about a call to a kernel folding G moduli that can be checked on the host;
// on success fills `constants[q]` from group q's moduli.
template <int G>
Status check_group_problem(const GroupGemmProblem& p, const GroupGemmLimits& limits,
                           GroupConstants (&constants)[kMaxGroups], ErrorMessage& err) noexcept {
  static_assert(1 <= G && G <= kMaxGroupSize, "a group holds 1 to 4 moduli");
  using ElementX = PartialElement<G>;
  constexpr int kAlignmentAB = 16;                           // int8 per 16-byte access
  constexpr int kAlignmentX = 16 / sizeof(ElementX);         // partials per 16-byte store
  constexpr int kMaxKPad = std::numeric_limits<int>::max() / G;  // G*k_pad fits int

  if (p.group_size != G) {
    return err.set(Status::kNotSupported, "group_size=%d, but this kernel folds exactly %d moduli",
                   p.group_size, G);
  }
  Status status = detail::check_sizes({{"m", p.m}, {"n", p.n}, {"k_pad", p.k_pad}}, err);
  if (status != Status::kOk) {
    return status;
  }
  if (p.groups < 1 || int64_t(p.groups) * G > kMaxGroups) {
    return err.set(Status::kNotSupported, "groups=%d must be in [1, %d] (at most %d moduli per call)",
                   p.groups, kMaxGroups / G, kMaxGroups);
  }
  if (p.k_pad % limits.tile_k != 0) {
    return err.set(Status::kNotSupported,
                   "k_pad=%d must be a multiple of tile_k=%d (a modulus ends on a k-tile)",
                   p.k_pad, limits.tile_k);
  }
  if (p.k_pad > kMaxKPad) {
    return err.set(Status::kNotSupported, "k_pad=%d: group_size * k_pad exceeds INT_MAX", p.k_pad);
  }
  const int64_t k_total = int64_t(p.groups) * G * p.k_pad;  // every group's residues in a row
  if (p.n % kAlignmentX != 0) {
    return err.set(Status::kNotSupported, "n=%d must be a multiple of %d (%d-byte output rows)",
                   p.n, kAlignmentX, static_cast<int>(sizeof(ElementX)));
  }
  if ((status = detail::check_pointers({{"A", p.a}, {"B", p.b}, {"X", p.x}}, err)) != Status::kOk) {
    return status;
  }
  const struct {
    const char* name;
    int64_t value;
    int64_t minimum;
    int alignment;
    int64_t maximum;
  } strides[] = {{"lda", p.lda, k_total, kAlignmentAB, limits.max_stride_ab},
                 {"ldb", p.ldb, k_total, kAlignmentAB, limits.max_stride_ab},
                 {"ldx", p.ldx, p.n, kAlignmentX, limits.max_stride_x}};
  for (const auto& s : strides) {
    if (s.value < s.minimum) {
      return err.set(Status::kNotSupported, "%s=%lld must be >= %lld", s.name,
                     static_cast<long long>(s.value), static_cast<long long>(s.minimum));
    }
    if (s.value % s.alignment != 0) {
      return err.set(Status::kNotSupported, "%s=%lld must be a multiple of %d", s.name,
                     static_cast<long long>(s.value), s.alignment);
    }
    if (s.value > s.maximum) {
      return err.set(Status::kNotSupported, "%s=%lld is too large for this kernel (at most %lld)",
                     s.name, static_cast<long long>(s.value), static_cast<long long>(s.maximum));
    }
  }
  if (p.groups > 1) {  // the groups' partial planes must not overlap
    const int64_t plane = int64_t(p.m - 1) * p.ldx + p.n;
    if (p.stride_x < plane || p.stride_x % kAlignmentX != 0 || p.stride_x > limits.max_stride_x) {
      return err.set(Status::kNotSupported,
                     "stride_x=%lld must be >= (m-1)*ldx+n=%lld, a multiple of %d and at most %lld "
                     "when groups=%d", static_cast<long long>(p.stride_x),
                     static_cast<long long>(plane), kAlignmentX,
                     static_cast<long long>(limits.max_stride_x), p.groups);
    }
  }
  if (p.moduli == nullptr) {
    return err.set(Status::kNotSupported, "moduli is a null pointer");
  }
  for (int q = 0; q < p.groups; ++q) {
    int bad = -1;
    const uint32_t* moduli = p.moduli + q * G;
    const char* why = make_group_constants(moduli, G, constants[q], bad);
    if (why != nullptr) {
      if (bad >= 0) {
        return err.set(Status::kNotSupported, "moduli[%d]=%u: %s", q * G + bad, moduli[bad], why);
      }
      return err.set(Status::kNotSupported, "moduli of group %d: %s", q, why);
    }
  }
  return Status::kOk;
}

}  // namespace ozaki
