// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// Bit-level views and integer bit operations for the arithmetic headers, each device
// intrinsic with an exact host twin, so that the host checks
// (tests/host/check_arithmetic.cu, run by tests/test_host_arithmetic.py) run the same
// source as the kernels.

#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define OZAKI_HD __host__ __device__ __forceinline__
#else
#define OZAKI_HD inline
#endif

namespace ozaki {

__host__ __device__ inline uint64_t double_bits(double a) {
  uint64_t bits;
  memcpy(&bits, &a, sizeof(bits));
  return bits;
}

__host__ __device__ inline double double_from_bits(uint64_t bits) {
  double a;
  memcpy(&a, &bits, sizeof(a));
  return a;
}

// 2^s, a normal double, for -1022 <= s <= 1023: its exponent field alone.
__host__ __device__ inline double power_of_two(int s) {
  return double_from_bits(static_cast<uint64_t>(s + 1023) << 52);
}

// Python's int.bit_length for an unsigned 64-bit value (0 for 0).
__host__ __device__ inline int bit_length(uint64_t v) {
  if (v == 0) return 0;
#ifdef __CUDA_ARCH__
  return 64 - __clzll(static_cast<long long>(v));
#else
  return 64 - __builtin_clzll(v);
#endif
}

// The high 32 (64) bits of the 64-bit (128-bit) product a * b.
OZAKI_HD uint32_t mulhi(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((uint64_t(a) * b) >> 32);
#endif
}

OZAKI_HD uint64_t mulhi(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}

// PRMT: bytes of the pair (y, x) picked by the four low selector nibbles (0-3 bytes of x,
// 4-7 bytes of y; the sign-replicating selectors are not used here).
OZAKI_HD uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(x, y, s);
#else
  const uint64_t pair = (uint64_t(y) << 32) | x;
  uint32_t r = 0;
  for (int t = 0; t < 4; ++t) r |= uint32_t((pair >> (8 * ((s >> (4 * t)) & 7u))) & 0xffu) << (8 * t);
  return r;
#endif
}

}  // namespace ozaki
