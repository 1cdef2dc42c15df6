// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The scalar arithmetic of the accuracy contract's inner statistics (numerics.contract.
// inner_stats mirrors it): per run of kInnerChunk vectors and per inner index l, the
// largest frexp exponent R of the run's entries and the sum of |x| 2^-R in sequence,
// kept relative to the largest exponent so far. Pure __host__ __device__, so
// tests/host/check_arithmetic.cu runs this very source on the CPU against the mirror.

#pragma once

#include <cmath>
#include <cstdint>

#include "ozaki/bits.h"
#include "ozaki/constants.h"
#include "ozaki/double_word.h"
#include "ozaki/scaling.h"

namespace ozaki {
namespace stages {

// x 2^shift for x >= 0 with frexp exponent ex: 0 unless the result's exponent exceeds
// kFlushExponent (then it is a normal double and the scaling is exact).
__host__ __device__ inline double flushed_scale(double x, int ex, int64_t shift) {
  if (ex == kNoExponent || ex + shift <= kFlushExponent) return 0.0;
  const uint64_t bits = double_bits(x);
  if ((bits >> 52) != 0 && ex + shift <= 1024) {  // x >= 0 normal, the result normal: move the exponent field
    return double_from_bits(bits + (static_cast<uint64_t>(shift) << 52));
  }
  return ldexp(x, static_cast<int>(shift));
}

// A NaN/Inf entry adds 1 to *bad where bad is not null (on the GPU a block's shared count
// of the entry's vector, by an atomic: the order of the adds does not matter).
__host__ __device__ inline void count_nonfinite(int32_t* bad) {
  if (bad == nullptr) return;
#ifdef __CUDA_ARCH__
  atomicAdd(bad, 1);
#else
  ++*bad;
#endif
}

struct InnerRun;
__host__ __device__ inline InnerRun inner_add_rare(InnerRun r, double a, int32_t* bad);

// One lane's run: the sum of |x| 2^-top over the entries so far, top the largest frexp
// exponent among them (kNoExponent: none yet); every term and every sum is 0 or a normal
// double >= 2^kFlushExponent, so each scaling moves an exponent field. top_hi (top << 20,
// the scaling's change to a double's high word) and flush (top + kFlushExponent: an entry
// of that exponent or less counts as 0) follow top. e: the last entry's frexp exponent
// (kNoExponent for 0 and NaN/Inf).
struct InnerRun {
  int32_t top = kNoExponent, top_hi = 0, flush = kNoExponent, e = kNoExponent;
  double sum = 0.0;

  // top to `to` > top: the sum scaled by 2^(top - to)
  OZAKI_HD void raise(int32_t to) {
    if (sum > 0.0) {  // a normal double: its exponent field moves, or it flushes
      const int64_t down = int64_t(to) - top;
      const uint64_t s = double_bits(sum);
      sum = int64_t(s >> 52) - 1022 - down <= kFlushExponent ? 0.0 : double_from_bits(s - (uint64_t(down) << 52));
    }
    top = to;
    top_hi = static_cast<int32_t>(static_cast<uint32_t>(to) << 20);
    flush = to + kFlushExponent;
  }

  // The next entry a: flushed_scale(|a|, e, -top) added, for a normal a written out (its
  // high word less top_hi, or 0: an added 0 leaves the sum, >= 0, as it is); 0,
  // subnormals and NaN/Inf through inner_add_rare, out of line so that the kernel's loop
  // stays small. A NaN/Inf counts into *bad (count_nonfinite).
  OZAKI_HD void add(double a, int32_t* bad) {
    const uint64_t bits = double_bits(a);
    const uint32_t hi = static_cast<uint32_t>(bits >> 32) & 0x7fffffffu;
    const int biased = static_cast<int>(hi >> 20);
    if (static_cast<unsigned>(biased - 1) >= 2046u) {
      *this = inner_add_rare(*this, a, bad);
      return;
    }
    e = biased - 1022;
    if (e > top) raise(e);
    if (e > flush) {
      const uint32_t scaled_hi = hi - static_cast<uint32_t>(top_hi);
      sum = add_rn(sum, double_from_bits((uint64_t(scaled_hi) << 32) | (bits & 0xffffffffull)));
    }
  }
};

__host__ __device__ __noinline__ inline InnerRun inner_add_rare(InnerRun r, double a, int32_t* bad) {
  r.e = kNoExponent;
  if (!isfinite(a)) {
    count_nonfinite(bad);
    return r;
  }
  if (a == 0.0) return r;
  r.e = frexp_exponent(a);  // subnormal
  if (r.e > r.top) r.raise(r.e);
  r.sum = add_rn(r.sum, flushed_scale(fabs(a), r.e, -int64_t(r.top)));
  return r;
}

// The runs of one l combined in sequence: each run's sum, scaled from its own top to top
// (the largest of them), added in run order; the kernel loads the runs' values in batches
// and adds them in this order.
__host__ __device__ inline double inner_combine_add(double sum, double partial, int32_t partial_top, int32_t top) {
  return partial > 0.0 ? add_rn(sum, flushed_scale(partial, frexp_exponent(partial), int64_t(partial_top) - top))
                       : sum;
}

}  // namespace stages
}  // namespace ozaki
