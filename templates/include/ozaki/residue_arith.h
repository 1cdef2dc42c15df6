// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The residues of the scaled integers (the residues stage and the prologue prototype), on
// the FP32 pipe and without 64-bit division, as pure __host__ __device__ helpers (checked
// on the host against Python: tests/host/check_arithmetic.cu, run by
// tests/test_host_arithmetic.py).
//
// V = trunc(2^shift a) = sign * M * 2^e with M < 2^53, e >= 0 (scaled_integer, read
// from the bits of a, no ldexp). M is cut into four pieces
//     M = p0 + p1 2^14 + p2 2^27 + p3 2^40,   p0 < 2^14, p1, p2, p3 < 2^13,
// carried as exact floats with the sign of V (residue_pieces). For a modulus m with
// symmetric constants c_t = 2^(14, 27, 40) mods m (|c_t| <= 128),
//     x = p0 + p1 c1 + p2 c2 + p3 c3 == sign * M (mod m),   |x| < 2^14 + 3 * 2^20 < 2^22,
// three exact FFMAs (every partial sum is an integer below 2^22, plus 0.25 at most).
// The symmetric residue s in [h - m, h - 1], h = (m + 1) / 2 (integer division) is
//     s = y - m q,   q = rint((y + 1/4) / m),
// because (y + 1/4)/m is at least 1/(4m) away from every half-integer for integer y,
// and rint((y + 1/4)/m) = floor((y + m - h)/m) for odd and even m alike. q is computed
// as t = FFMA(y + 1/4, fl(1/m), 1.5 * 2^23) = 1.5 * 2^23 + q: the only error is fl(1/m)'s,
// |y + 1/4| 2^-24 / m < 1/(4m) for |y| < 2^22, so q is exact. With B = bits(1.5 * 2^23),
// bits(t) = B + q and bits(fl(y + 1/4 + 1.5 * 2^23)) = B + y (the 1/4 rounds away), so
//     bits(y + 1/4 + 1.5 * 2^23) - m bits(t) = s + (1 - m) B   (mod 2^32),
// and B = 0x4B400000 is 0 mod 256: s (two's complement) is the low byte of that word, one
// FADD and one IMAD after t, and no float -> int conversion anywhere (residue_word).
// e > 0: r = x - m rint(x / m) (|r| <= m/2, reduce_near), then y = r f with
// f = 2^e mods m (a shared-memory table), |y| <= 2^14, then residue_word(y + 1/4).
// For m = 256 everything is exact in the same way (fl(1/m) is exact).
//
// 0 < e <= kWideMaxExp (V < 2^69, the wide pieces): V itself is cut into five pieces,
//     V = w0 + w1 2^21 + w2 2^33 + w3 2^45 + w4 2^57,   w0 < 2^21, w1 .. w4 < 2^12,
// with symmetric constants d_t = 2^(21, 33, 45, 57) mods m (|d_t| <= 128), so that
//     x = w0 + w1 d1 + w2 d2 + w3 d3 + w4 d4,  |x| <= 2^21 - 1 + 4 (2^12 - 1) 128 < 2^22,
// four exact FFMAs (w0 carries the 1/4: every partial sum is below 2^22 + 1/4, 24 bits),
// then residue_word directly: 7 operations per modulus, no table, against 10 and a
// table load of the path above, and the same residue (the symmetric residue of V).
// Where e <= kWide4MaxExp (V < 2^57) w4 is 0: three FFMAs and residue_word, 6 operations
// per modulus as on the e == 0 route (residue_wide<4>). Scaled integers of 54-57 bits are
// what accurate mode's shifts give at k <= 8192 (every warp of a 4096^3 call: e <= 4;
// scripts/residue_routes.py).

#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "ozaki/bits.h"

namespace ozaki {
namespace stages {

// 2^e mod m (e >= 0, 2 <= m <= 256) by square and multiply; products stay below 2^16.
__host__ __device__ inline uint32_t pow2_mod(int e, uint32_t m) {
  uint32_t result = 1 % m;
  uint32_t base = 2 % m;
  while (e > 0) {
    if (e & 1) result = result * base % m;
    base = base * base % m;
    e >>= 1;
  }
  return result;
}


// --- float building blocks ---------------------------------------------------------
inline constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to integers
inline constexpr float kTwo23 = 8388608.0f;         // 2^23
inline constexpr uint32_t kTwo23Bits = 0x4B000000u; // bits of 2^23
inline constexpr uint32_t kRoundMagicBits = 0x4B400000u;  // bits of 1.5 * 2^23
inline constexpr uint32_t kSignBit = 0x80000000u;        // a float's, or a double's high word's
inline constexpr uint32_t kOneBits = 0x3f800000u;        // bits of 1.0f
static_assert(kRoundMagicBits % 256 == 0, "residue_word reads s from the low byte");

__host__ __device__ inline float fma_rn_f(float a, float b, float c) {
#ifdef __CUDA_ARCH__
  return __fmaf_rn(a, b, c);
#else
  return fmaf(a, b, c);  // correctly rounded (host tests: -ffp-contract=off)
#endif
}

__host__ __device__ inline float add_rn_f(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

__host__ __device__ inline float float_from_bits(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
#endif
}

__host__ __device__ inline uint32_t float_to_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t bits;
  memcpy(&bits, &f, sizeof(bits));
  return bits;
#endif
}

// The symmetric representative of r in [0, m): r - m when r > m / 2 (|result| <= m / 2).
__host__ __device__ inline int32_t centered(uint32_t r, uint32_t m) {
  return 2 * r > m ? static_cast<int32_t>(r) - static_cast<int32_t>(m) : static_cast<int32_t>(r);
}

// The factor f = 2^e mods m of the e > 0 path, as a float.
__host__ __device__ inline float pow2_factor(int e, uint32_t m) {
  return static_cast<float>(centered(pow2_mod(e, m), m));
}

// pow2_factor(e, m) from the base r16 = pow2_mod(e - e % 16, m): one remainder of a product
// below 2^23 (2 <= m <= 256). The residues kernel builds its table from kPow2Table / 16
// bases per modulus.
__host__ __device__ inline float pow2_factor_from_base(uint32_t r16, int e, uint32_t m) {
  return static_cast<float>(centered((r16 << (e & 15)) % m, m));
}

// The per-modulus constants of the float residue path.
struct FloatModulus {
  float neg_m;       // -m
  float inv;         // fl(1 / m)
  float c1;          // 2^14 mods m (centered)
  float c2;          // 2^27 mods m
  float c3;          // 2^40 mods m
  uint32_t minus_m;  // -m mod 2^32
  float pad0, pad1;  // 32 bytes: two 16-byte shared-memory loads
};

// factor(e): 2^e mods m as pow2_factor gives it (a table's entry, say).
template <class Factor>
__host__ __device__ inline FloatModulus float_modulus(uint32_t m, const Factor& factor) {
  FloatModulus k;
  k.neg_m = -static_cast<float>(m);
  k.inv = 1.0f / static_cast<float>(m);  // correctly rounded division
  k.c1 = factor(14);
  k.c2 = factor(27);
  k.c3 = factor(40);
  k.minus_m = 0u - m;
  k.pad0 = k.pad1 = 0.0f;
  return k;
}

__host__ __device__ inline FloatModulus float_modulus(uint32_t m) {
  return float_modulus(m, [m](int e) { return pow2_factor(e, m); });
}

// The per-modulus constants of the wide pieces (0 < e <= kWideMaxExp; w4 = 0 where
// e <= kWide4MaxExp, V < 2^57).
inline constexpr int kWideMaxExp = 16;
inline constexpr int kWide4MaxExp = 4;

struct WideModulus {
  float inv;    // fl(1 / m)
  float d1;     // 2^21 mods m (centered)
  float d2;     // 2^33 mods m
  float d3;     // 2^45 mods m
  float d4;     // 2^57 mods m
  uint32_t minus_m;  // -m mod 2^32
  float pad0, pad1;  // 32 bytes: two 16-byte shared-memory loads
};

template <class Factor>
__host__ __device__ inline WideModulus wide_modulus(uint32_t m, const Factor& factor) {
  WideModulus k;
  k.inv = 1.0f / static_cast<float>(m);
  k.d1 = factor(21);
  k.d2 = factor(33);
  k.d3 = factor(45);
  k.d4 = factor(57);
  k.minus_m = 0u - m;
  k.pad0 = k.pad1 = 0.0f;
  return k;
}

__host__ __device__ inline WideModulus wide_modulus(uint32_t m) {
  return wide_modulus(m, [m](int e) { return pow2_factor(e, m); });
}

// A word whose low byte is s, the symmetric residue of the integer y, given yq = y + 1/4
// exactly (|y| < 2^22): FFMA, FADD, IMAD (see the top). Modulus: FloatModulus or
// WideModulus (inv and minus_m).
template <class Modulus>
__host__ __device__ inline uint32_t residue_word(float yq, const Modulus& k) {
  const float t = fma_rn_f(yq, k.inv, kRoundMagic);
  return float_to_bits(add_rn_f(yq, kRoundMagic)) + k.minus_m * float_to_bits(t);
}

// x - m rint(x / m) for an integer |x| < 2^22: exact, in [-m/2, m/2].
__host__ __device__ inline float reduce_near(float x, const FloatModulus& k) {
  const float t = fma_rn_f(x, k.inv, kRoundMagic);
  const float q = add_rn_f(t, -kRoundMagic);
  return fma_rn_f(q, k.neg_m, x);
}

// The int8 residue in the low byte of a residue_word result.
__host__ __device__ inline int8_t residue_byte(uint32_t word) {
  return static_cast<int8_t>(static_cast<uint8_t>(word & 0xffu));
}

// V = trunc(2^shift a) as sign * value * 2^exp, value < 2^53, exp >= 0, from the bits of
// a: the same integer as decompose_integer(scale_to_integer(a, shift)), including the
// overflow of ldexp to +-Inf (value 2^52, exp 972, as decompose_integer(+-Inf) reads it).
// NaN and Inf inputs give 0 (the kernels treat them as 0).
struct ScaledInteger {
  bool negative;
  uint64_t value;
  int exp;
};

__host__ __device__ inline ScaledInteger scaled_integer(double a, int32_t shift) {
  const uint64_t bits = double_bits(a);
  ScaledInteger s{false, 0, 0};
  const int biased = static_cast<int>((bits >> 52) & 0x7ff);
  if (biased == 0x7ff) return s;
  uint64_t mant = bits & 0x000fffffffffffffull;
  int e2 = -1074;
  if (biased != 0) {
    mant |= 0x0010000000000000ull;
    e2 = biased - 1075;
  }
  if (mant == 0) return s;
  s.negative = (bits >> 63) != 0;
  const int64_t t = static_cast<int64_t>(e2) + shift;          // a = mant 2^e2
  if (static_cast<int64_t>(bit_length(mant)) + t > 1024) {    // |2^shift a| >= 2^1024: Inf
    s.value = 0x0010000000000000ull;
    s.exp = 972;
    return s;
  }
  if (t >= 0) {
    s.value = mant;
    s.exp = static_cast<int>(t);
  } else {
    s.value = t <= -64 ? 0 : mant >> (-t);
    if (s.value == 0) s.negative = false;
  }
  return s;
}

// The residue kernel's decomposition in two steps, cheaper than scaled_integer where a
// warp's entries are small (its early returns, its overflow test and its shifts past 64
// bits serve exps that no fast route takes). entry_bits(a, shift) reads a's bits:
// - entry_exp(b) is scaled_integer(a, shift).exp wherever either is below kPow2Table, and
//   at least kPow2Table wherever the other is (the ldexp overflow gives 972 there, t >= 972
//   here): the kernel's route by a warp's largest e is the same;
// - scaled_small(b) is scaled_integer(a, shift) wherever that exp is at most kWideMaxExp,
//   except the sign of a zero value (its pieces are +0 either way); wide_integer(b) is
//   its V in two words there.
// A shift outside [-2^24, 2^24] gives V = 0 or an exp far above kPow2Table whether or not
// it is clamped there (scaled_integer too: V = 0, or the overflow's 972); clamped, t stays
// in int32. The kernel keeps t alone between the steps: entry_bits_at(a, t) is entry_bits
// again, and entry_shift(a, t) the clamped shift, for scaled_integer on the table route.
struct EntryBits {
  uint64_t mant;  // a's integer mantissa (0 for NaN and Inf)
  int32_t t;      // trunc(2^shift a) = sign * mant * 2^t (t < 0: mant >> -t)
  bool live;      // finite and nonzero
  uint32_t sign;  // a's sign bit: 0 or kSignBit
};

__host__ __device__ inline int entry_biased(uint64_t bits) { return static_cast<int>((bits >> 52) & 0x7ff); }

// a = mant 2^(entry_e2(biased)) for finite a
__host__ __device__ inline int32_t entry_e2(int biased) { return (biased > 0 ? biased : 1) - 1075; }

__host__ __device__ inline EntryBits entry_bits_at(double a, int32_t t) {
  const uint64_t bits = double_bits(a);
  const uint32_t high = static_cast<uint32_t>(bits >> 32);  // the word ops: nvcc made 64-bit ones
  const int biased = entry_biased(bits);
  const uint32_t mant_high = (high & 0x000fffffu) | (biased != 0 ? 0x00100000u : 0u);
  EntryBits b;
  b.live = biased != 0x7ff && (bits << 1) != 0;
  b.mant = biased == 0x7ff ? 0 : (static_cast<uint64_t>(mant_high) << 32) | static_cast<uint32_t>(bits);
  b.t = t;
  b.sign = high & kSignBit;
  return b;
}

__host__ __device__ inline int32_t clamped_shift(int32_t shift) {
  return shift < -(1 << 24) ? -(1 << 24) : (shift > (1 << 24) ? (1 << 24) : shift);
}

// entry_bits with its shift already clamped (clamped_shift): the residue kernel clamps a
// vector's shift once per chunk where no inner shifts vary it per entry.
__host__ __device__ inline EntryBits entry_bits_clamped(double a, int32_t clamped) {
  return entry_bits_at(a, entry_e2(entry_biased(double_bits(a))) + clamped);
}

__host__ __device__ inline EntryBits entry_bits(double a, int32_t shift) {
  return entry_bits_clamped(a, clamped_shift(shift));
}

__host__ __device__ inline int32_t entry_shift(double a, int32_t t) {
  return t - entry_e2(entry_biased(double_bits(a)));
}

__host__ __device__ inline int entry_exp(const EntryBits& b) { return b.live && b.t > 0 ? b.t : 0; }

// x >> n, x << n for n >= 0, 0 where n >= 64 (PTX's shr.b64 and shl.b64 clamp n at 64).
__host__ __device__ inline uint64_t shr64(uint64_t x, uint32_t n) {
#ifdef __CUDA_ARCH__
  uint64_t r;
  asm("shr.b64 %0, %1, %2;" : "=l"(r) : "l"(x), "r"(n));
  return r;
#else
  return n >= 64 ? 0 : x >> n;
#endif
}

__host__ __device__ inline uint64_t shl64(uint64_t x, uint32_t n) {
#ifdef __CUDA_ARCH__
  uint64_t r;
  asm("shl.b64 %0, %1, %2;" : "=l"(r) : "l"(x), "r"(n));
  return r;
#else
  return n >= 64 ? 0 : x << n;
#endif
}

// -t where t < 0, else 0
__host__ __device__ inline uint32_t right_shift_of(int32_t t) { return t < 0 ? static_cast<uint32_t>(-t) : 0u; }

__host__ __device__ inline ScaledInteger scaled_small(const EntryBits& b) {
  ScaledInteger s;
  s.negative = b.sign != 0;
  s.exp = entry_exp(b);
  s.value = shr64(b.mant, right_shift_of(b.t));
  return s;
}

// V = trunc(2^shift |a|) = hi 2^64 + lo where entry_exp(b) <= kWideMaxExp (V < 2^69; for a
// NaN, an Inf or a zero, mant = 0 and V = 0 whatever t is), without a branch.
struct WideInteger {
  uint64_t lo;
  uint32_t hi;
  uint32_t sign;  // 0 or kSignBit
};

__host__ __device__ inline WideInteger wide_integer(const EntryBits& b) {
  const uint32_t left = b.t > 0 ? static_cast<uint32_t>(b.t) : 0u;
  const uint64_t v = shr64(b.mant, right_shift_of(b.t));
  WideInteger w;
  w.lo = shl64(v, left);
  w.hi = static_cast<uint32_t>(shr64(v, 64u - left));  // left = 0: nothing (shifts past 64 give 0)
  w.sign = b.sign;
  return w;
}

// (x & kMask) | bits(2^23) in one LOP3 (nvcc makes two of it, the constant being an
// immediate): the bits of float(2^23 + p) for the piece p = x & kMask < 2^23.
template <uint32_t kMask>
__host__ __device__ inline uint32_t piece_bits(uint32_t x) {
  static_assert(kMask < (1u << 23), "a piece is below 2^23");
#ifdef __CUDA_ARCH__
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(x), "n"(kMask), "r"(kTwo23Bits));
  return r;
#else
  return (x & kMask) | kTwo23Bits;
#endif
}

// sign * p as an exact float for the piece p = x & kMask < 2^23: float(2^23 + p) from the
// bits, then sign * (2^23 + p) - sign * 2^23 (one FFMA). Both piece sets are made with it.
// sign and offset from the sign bit by bit operations (a predicate cost nvcc two compares
// and two selects per entry).
struct SignedPiece {
  float sign;    // +-1
  float offset;  // -sign * 2^23
  __host__ __device__ explicit SignedPiece(uint32_t sign_bit)
      : sign(float_from_bits(sign_bit | kOneBits)), offset(float_from_bits(sign_bit ^ (kSignBit | kTwo23Bits))) {}
  template <uint32_t kMask>
  __host__ __device__ float of(uint32_t x) const {
    return fma_rn_f(float_from_bits(piece_bits<kMask>(x)), sign, offset);
  }
};

// The four signed float pieces of sign * value (see the top); `quarter` adds 1/4 to p0
// (the e == 0 path feeds x + 1/4 straight into residue_word).
struct Pieces {
  float p0, p1, p2, p3;
};

__host__ __device__ inline Pieces residue_pieces(const ScaledInteger& v, bool quarter) {
  const SignedPiece piece(v.negative ? kSignBit : 0u);
  const uint64_t m = v.value;
  Pieces out;
  out.p0 = piece.of<0x3fffu>(static_cast<uint32_t>(m));
  out.p1 = piece.of<0x1fffu>(static_cast<uint32_t>(m >> 14));
  out.p2 = piece.of<0x1fffu>(static_cast<uint32_t>(m >> 27));
  out.p3 = piece.of<0x1fffu>(static_cast<uint32_t>(m >> 40));
  if (quarter) out.p0 = add_rn_f(out.p0, 0.25f);
  return out;
}

// The five signed float pieces of sign * V, V = hi 2^64 + lo < 2^69 (see the top), w0
// + 1/4 in w0.
struct WidePieces {
  float w0, w1, w2, w3, w4;
};

__host__ __device__ inline WidePieces wide_pieces(const WideInteger& v) {
  const SignedPiece piece(v.sign);
  WidePieces out;
  out.w0 = add_rn_f(piece.of<0x1fffffu>(static_cast<uint32_t>(v.lo)), 0.25f);
  out.w1 = piece.of<0xfffu>(static_cast<uint32_t>(v.lo >> 21));
  out.w2 = piece.of<0xfffu>(static_cast<uint32_t>(v.lo >> 33));
  out.w3 = piece.of<0xfffu>(static_cast<uint32_t>(v.lo >> 45));
  out.w4 = piece.of<0xfffu>(static_cast<uint32_t>(v.lo >> 57) | (v.hi << 7));
  return out;
}

// The stored residue from the wide pieces: kPieces 5 where exp <= kWideMaxExp, 4 where
// exp <= kWide4MaxExp (w4 = 0, left out: the same x, which is never zero).
template <int kPieces>
__host__ __device__ inline uint32_t residue_wide(const WidePieces& w, const WideModulus& k) {
  static_assert(kPieces == 4 || kPieces == 5, "four or five wide pieces");
  float x = fma_rn_f(w.w1, k.d1, w.w0);
  x = fma_rn_f(w.w2, k.d2, x);
  x = fma_rn_f(w.w3, k.d3, x);
  if constexpr (kPieces == 5) x = fma_rn_f(w.w4, k.d4, x);
  return residue_word(x, k);
}

// x = p0 + p1 c1 + p2 c2 + p3 c3 (exact).
__host__ __device__ inline float combine_pieces(const Pieces& p, const FloatModulus& k) {
  float x = fma_rn_f(p.p1, k.c1, p.p0);
  x = fma_rn_f(p.p2, k.c2, x);
  return fma_rn_f(p.p3, k.c3, x);
}

// The stored residue, e == 0 path: pieces built with quarter = true.
__host__ __device__ inline uint32_t residue_e0(const Pieces& pq, const FloatModulus& k) {
  return residue_word(combine_pieces(pq, k), k);
}

// The stored residue, any e: pieces built with quarter = false, f = pow2_factor(e, m).
__host__ __device__ inline uint32_t residue_scaled(const Pieces& p, float f, const FloatModulus& k) {
  const float r = reduce_near(combine_pieces(p, k), k);
  return residue_word(fma_rn_f(r, f, 0.25f), k);
}

// Four residue bytes (low bytes of four residue_word results) in one word, b0 lowest.
__host__ __device__ inline uint32_t pack_bytes(uint32_t b0, uint32_t b1, uint32_t b2, uint32_t b3) {
#ifdef __CUDA_ARCH__
  const uint32_t lo = __byte_perm(b0, b1, 0x0040);
  const uint32_t hi = __byte_perm(b2, b3, 0x0040);
  return __byte_perm(lo, hi, 0x5410);
#else
  return (b0 & 0xffu) | ((b1 & 0xffu) << 8) | ((b2 & 0xffu) << 16) | ((b3 & 0xffu) << 24);
#endif
}

// The residues kernel and the prologue keep f(e) = 2^e mods m for e < kPow2Table in shared
// memory (per modulus); larger e is computed.
inline constexpr int kPow2Table = 128;

}  // namespace stages
}  // namespace ozaki
