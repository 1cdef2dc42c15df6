// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// Exact small-modulus arithmetic of the fused modulus-group GEMM, shared by the mainloop
// fold (group_mma_sm90.h) and the partial-CRT epilogue node (partial_crt.h). Plain C++
// usable on the host and the device (no CUTLASS; the kernel constants come from the
// rendered prelude), so it can be tested on a CPU (tests/host/check_arithmetic.cu).
//
// A group is G <= 4 pairwise coprime moduli m_g in [2, 256]:
//  - the fold maps modulus g's int32 accumulator (two's complement, wrapped) to
//    r_g = acc mod m_g in [0, m_g) and packs it into byte g of a uint32;
//  - the epilogue finishes the group's CRT:
//      x = (sum_g c_g r_g) mod M,  M = prod_g m_g (< 2^32),
//      c_g = (M / m_g) * ((M / m_g)^-1 mod m_g) mod M,
//    so x is the unique value in [0, M) congruent to r_g modulo every m_g.
// Every constant is derived on the host by `make_group_constants`, which also validates
// the moduli; the device only multiplies and adds.

#pragma once

#include <cstdint>
#include <type_traits>

#include "ozaki/barrett.h"
#include "ozaki/bits.h"
#include "ozaki/constants.h"

namespace ozaki {

inline constexpr uint32_t kMinModulus = 2;
inline constexpr uint32_t kMaxModulus = 256;

// How a group partial X mod M is stored: kPartialBytes[G] bytes, one for a group of one
// modulus (M <= 256), else 4 (M < 2^32). The fused kernels store it so, the combine kernel
// reads it so.
template <int G>
using PartialElement = std::conditional_t<kPartialBytes[G] == 1, uint8_t, uint32_t>;

constexpr int partial_bytes(int group_size) { return kPartialBytes[group_size]; }

constexpr bool partials_are_bytes_or_words() {
  for (int g = 1; g <= kMaxGroupSize; ++g) {
    if (partial_bytes(g) != 1 && partial_bytes(g) != 4) return false;
  }
  return partial_bytes(1) == 1;  // a one-modulus partial is its residue byte
}
static_assert(partials_are_bytes_or_words(), "a group partial is stored as uint8_t or uint32_t");

// Everything the fold needs to reduce an int32 modulo m (m in [2, 256]) with 32-bit
// integer multiplies only (few live registers: the fold runs next to the accumulators).
// With x = hi * 2^16 + lo (hi = x >> 16 arithmetic, lo = x & 0xffff):
//   t = hi * (2^16 mod m) + lo + offset  ≡ x (mod m),  0 <= t < 2^25,
// where offset = m * ceil(2^23 / m) keeps t non-negative (|hi * (2^16 mod m)| < 2^23).
// Then t mod m by the tree's one Barrett reduction (barrett.h).
struct ModulusFold {
  uint32_t magic = 0;     // barrett_magic(m)
  uint32_t modulus = 0;   // m
  uint32_t two16_mod = 0; // 2^16 mod m
  uint32_t offset = 0;    // m * ceil(2^23 / m)

  static ModulusFold make(uint32_t m) {
    ModulusFold f;
    f.magic = barrett_magic(m);
    f.modulus = m;
    f.two16_mod = (uint32_t(1) << 16) % m;
    f.offset = m * (((uint32_t(1) << 23) + m - 1) / m);
    return f;
  }
};

// acc mod m in [0, m) for a (wrapped) int32 accumulator; see ModulusFold.
OZAKI_HD uint32_t residue(int32_t acc, const ModulusFold& f) {
  const int32_t hi = acc >> 16;  // arithmetic shift: floor(acc / 2^16)
  const uint32_t lo = static_cast<uint32_t>(acc) & 0xffffu;
  const uint32_t t = static_cast<uint32_t>(hi * static_cast<int32_t>(f.two16_mod)) + lo + f.offset;
  return barrett_reduce(t, f.modulus, f.magic);
}

// The epilogue's constants of one group.
struct GroupCrtConstants {
  uint32_t weight[kMaxGroupSize] = {};  // c_g (< M); 0 beyond the group size
  uint32_t product = 1;                 // M = prod m_g
  uint64_t barrett = 0;                 // barrett_magic(M) (64-bit)
};

// x = (sum_g c_g byte_g(packed)) mod M in [0, M). The sum is < 4 * 2^32 * 2^8 = 2^42,
// reduced by the tree's one Barrett reduction (barrett.h) on 64-bit words.
template <int G>
OZAKI_HD uint32_t crt_finish(uint32_t packed, const GroupCrtConstants& k) {
  uint64_t s = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int g = 0; g < G; ++g) {
    s += uint64_t(k.weight[g]) * ((packed >> (8 * g)) & 0xffu);
  }
  return static_cast<uint32_t>(barrett_reduce(s, uint64_t(k.product), k.barrett));
}

// The constants of a whole group, validated. Host only in practice.
struct GroupConstants {
  ModulusFold fold[kMaxGroupSize] = {};
  GroupCrtConstants crt = {};
};

namespace detail {

inline uint32_t gcd_u32(uint32_t a, uint32_t b) {
  while (b != 0) {
    const uint32_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// a^-1 mod m for gcd(a, m) == 1 and m <= 256 (a search: m is tiny).
inline uint32_t inverse_mod_small(uint32_t a, uint32_t m) {
  a %= m;
  for (uint32_t x = 1; x < m; ++x) {
    if (a * x % m == 1) {
      return x;
    }
  }
  return m == 1 ? 0 : 1;  // m == 2 with a == 1 was found above; unreachable for valid input
}

}  // namespace detail

// Why `moduli[0..count)` is not a valid group, as a static string, or nullptr when it is;
// on success fills `out`. `bad_index` receives the offending position (or -1).
inline const char* make_group_constants(const uint32_t* moduli, int count, GroupConstants& out,
                                        int& bad_index) {
  bad_index = -1;
  if (count < 1 || count > kMaxGroupSize) {
    return "group size out of range";
  }
  for (int g = 0; g < count; ++g) {
    if (moduli[g] < kMinModulus || moduli[g] > kMaxModulus) {
      bad_index = g;
      return "modulus outside [2, 256]";
    }
    for (int h = 0; h < g; ++h) {
      if (detail::gcd_u32(moduli[g], moduli[h]) != 1) {
        bad_index = g;
        return "moduli not pairwise coprime";
      }
    }
  }
  GroupConstants k;
  uint64_t product = 1;
  for (int g = 0; g < count; ++g) {
    product *= moduli[g];
  }
  // 256 * 255 * 253 * 251 < 2^32; pairwise coprime values <= 256 never reach 2^32.
  if (product > UINT32_MAX) {
    return "product of the moduli does not fit 32 bits";
  }
  for (int g = 0; g < count; ++g) {
    const uint64_t m = moduli[g];
    const uint64_t cofactor = product / m;
    const uint64_t inverse = detail::inverse_mod_small(static_cast<uint32_t>(cofactor % m),
                                                       static_cast<uint32_t>(m));
    k.fold[g] = ModulusFold::make(static_cast<uint32_t>(m));
    k.crt.weight[g] = static_cast<uint32_t>(cofactor * inverse % product);  // < 2^40 before %
  }
  k.crt.product = static_cast<uint32_t>(product);
  k.crt.barrett = barrett_magic(product);
  out = k;
  return nullptr;
}

}  // namespace ozaki
