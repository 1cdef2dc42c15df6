// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The one Barrett reduction of the tree: u mod m for an unsigned word u of 32 or 64 bits,
// without division. It reduces the stage kernels' raw int32 GEMM outputs and uint32 group
// partials (stage_crt.cuh), the fused kernels' int32 accumulators (the fold of
// group_arith.h, after it brings them into [0, 2^25)) and their 64-bit partial CRT sums
// (crt_finish<G>, group_arith.h).
//
// With w the word width and magic = floor((2^w - 1) / m), m >= 2: 2^w - 1 = magic m + e
// with 0 <= e < m, so for any u < 2^w
//   u magic / 2^w = u / m - u (e + 1) / (m 2^w),  and  0 <= u (e + 1) / (m 2^w) < u / 2^w < 1:
// the quotient estimate q' = mulhi(u, magic) is floor(u / m) or one less, u - q' m is in
// [0, 2m), and one conditional subtraction finishes. Checked on the host over the whole
// range either call site feeds it (tests/host/check_arithmetic.cu, sweep_barrett*).

#pragma once

#include <cstdint>

#include "ozaki/bits.h"

namespace ozaki {

// floor((2^w - 1) / m) for the w-bit word U and 2 <= m < 2^w.
template <class U>
OZAKI_HD constexpr U barrett_magic(U m) {
  return static_cast<U>(~U(0)) / m;
}

// u mod m in [0, m) for any w-bit u (2 <= m <= 2^(w-1), magic = barrett_magic(m)).
template <class U>
OZAKI_HD U barrett_reduce(U u, U m, U magic) {
  const U r = u - mulhi(u, magic) * m;  // in [0, 2m)
  return r >= m ? r - m : r;
}

// (m - 2^31 mod m) mod m: the correction of mod_i32.
OZAKI_HD uint32_t signed_offset(uint32_t m) {
  return (m - static_cast<uint32_t>(0x80000000ull % m)) % m;
}

// c mod m in [0, m) for any int32 c (Python's c % m): u = c + 2^31 is a uint32, reduced,
// then shifted back by -2^31 mod m (magic = barrett_magic(m), offset = signed_offset(m)).
OZAKI_HD uint32_t mod_i32(int32_t c, uint32_t m, uint32_t magic, uint32_t offset) {
  const uint32_t u = static_cast<uint32_t>(c) ^ 0x80000000u;  // c + 2^31
  const uint32_t r = barrett_reduce(u, m, magic) + offset;    // in [0, 2m)
  return r >= m ? r - m : r;
}

}  // namespace ozaki
