// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The tree's double arithmetic with explicit rounding: correctly rounded operations the
// compiler may not contract into FMAs (each with its host twin; the host checks are built
// with -ffp-contract=off) and the error-free transformation the double-word CRT sum is
// built from (two_sum). The CRT kernels' bits depend on every operation here being the
// rounded IEEE operation it names, in the order written.

#pragma once

#include <cmath>

namespace ozaki {

// Rounded-to-nearest double operations that the compiler may not contract into FMAs.
__host__ __device__ inline double add_rn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;  // host tests are built with -ffp-contract=off
#endif
}

__host__ __device__ inline double sub_rn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}

__host__ __device__ inline double mul_rn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

// fl(a * b + c), one rounding. Used only where a * b and the sum are exact integers below
// 2^53: there it equals add_rn(c, mul_rn(a, b)), in one instruction instead of two.
__host__ __device__ inline double fma_rn(double a, double b, double c) {
#ifdef __CUDA_ARCH__
  return __fma_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// Knuth's TwoSum: s = fl(a + b) and err with s + err = a + b exactly (no overflow), in six
// rounded operations and no branch (a and b in any order of magnitude).
__host__ __device__ inline double two_sum(double a, double b, double& err) {
  const double s = add_rn(a, b);
  const double bb = sub_rn(s, a);
  err = add_rn(sub_rn(a, sub_rn(s, bb)), sub_rn(b, bb));
  return s;
}

}  // namespace ozaki
