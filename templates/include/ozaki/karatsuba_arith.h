// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The modular arithmetic of Karatsuba's three products (stage_karatsuba.cuh), as pure
// __host__ __device__ helpers checked on the host (tests/host/check_arithmetic.cu:
// every residue pair of every modulus, and int32 products against Python's %):
//   symmetric_sum        Re + Im of two symmetric int8 residues, back in their range;
//   karatsuba_residues   Re = P1 - P2 and Im = P3 - P1 - P2 (mod m) in [0, m) from the
//                        raw int32 products P1 = Ar Br, P2 = Ai Bi, P3 = (Ar + Ai)(Br + Bi);
//   karatsuba_residues_narrow  the same for products of at most kKaratsubaNarrowTerms
//                        terms: the differences are exact in int32, one reduction each.

#pragma once

#include <cstdint>

#include "ozaki/barrett.h"
#include "ozaki/bits.h"

namespace ozaki {

// r + s for symmetric residues r, s in [h - m, h - 1] (h = (m + 1) / 2, 2 <= m <= 256),
// reduced into the same range: an int8 again.
OZAKI_HD int8_t symmetric_sum(int r, int s, int m) {
  const int h = (m + 1) / 2;
  int t = r + s;
  if (t > h - 1) t -= m;
  if (t < h - m) t += m;
  return static_cast<int8_t>(t);
}

// (a + b) mod m and (a - b) mod m for a, b in [0, m).
OZAKI_HD uint32_t add_mod(uint32_t a, uint32_t b, uint32_t m) {
  const uint32_t s = a + b;
  return s >= m ? s - m : s;
}

OZAKI_HD uint32_t sub_mod(uint32_t a, uint32_t b, uint32_t m) {
  return a >= b ? a - b : a + m - b;
}

// Re = (p1 - p2) mod m and Im = (p3 - p1 - p2) mod m in [0, m) for any int32 products
// (magic = barrett_magic(m), offset = signed_offset(m), as mod_i32 takes them).
OZAKI_HD void karatsuba_residues(int32_t p1, int32_t p2, int32_t p3, uint32_t m, uint32_t magic,
                                 uint32_t offset, uint32_t& re, uint32_t& im) {
  const uint32_t r1 = mod_i32(p1, m, magic, offset);
  const uint32_t r2 = mod_i32(p2, m, magic, offset);
  const uint32_t r3 = mod_i32(p3, m, magic, offset);
  re = sub_mod(r1, r2, m);
  im = sub_mod(sub_mod(r3, r1, m), r2, m);
}

// The longest sum of int8 residue products (each of magnitude at most 128 * 128 = 2^14:
// symmetric residues lie in [h - m, h - 1] with m <= 256) whose P3 - P1 - P2 cannot
// overflow int32: 3 k 2^14 <= 2^31 - 1.
inline constexpr int64_t kKaratsubaNarrowTerms = ((int64_t(1) << 31) - 1) / (3 * 128 * 128);

// karatsuba_residues for |p1|, |p2|, |p3| <= (2^31 - 1) / 3 (products of at most
// kKaratsubaNarrowTerms terms): P1 - P2 and P3 - P1 - P2 are exact int32, so one mod_i32
// each gives the same residues.
OZAKI_HD void karatsuba_residues_narrow(int32_t p1, int32_t p2, int32_t p3, uint32_t m, uint32_t magic,
                                        uint32_t offset, uint32_t& re, uint32_t& im) {
  re = mod_i32(p1 - p2, m, magic, offset);
  im = mod_i32(p3 - p1 - p2, m, magic, offset);
}

}  // namespace ozaki
