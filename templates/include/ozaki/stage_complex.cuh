// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The complex (ZGEMM) layer around the real pipeline (ozaki_cutlass/numerics/zgemm.py
// defines both functions; the NumPy versions there are the reference):
//
//   P_realify        op(X) of a complex128 matrix written as the real matrix the real
//                    pipeline multiplies: the left form [Re, Im] interleaved along the
//                    columns (m x 2k), or the right form of 2 x 2 blocks
//                    [[Re, Im], [-Im, Re]] (2k x 2n), so that left(A) right(B) holds
//                    Re(AB) and Im(AB) interleaved (m x 2n): a complex128 view of C.
//   P_complex_axpby  out = alpha T + beta C in complex128, each real operation rounded on
//                    its own in a fixed order (no FMA contraction), as the NumPy twin.
//
// Both are element-wise copies or a few FP64 operations per entry: bandwidth-bound,
// one grid-stride pass over the output.

#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "ozaki/stage_launch.cuh"

namespace ozaki {
namespace stages {

inline constexpr int kComplexThreads = 256;

// x: interleaved (re, im) doubles, op(X)(i, j) at x[2 (i rs + j cs)] (rs, cs in complex
// elements). Left: out[i (2 cols) + 2j] = re, [.. + 1] = s im. Right: the 2 x 2 block of
// (i, j) at rows 2i, 2i + 1 and columns 2j, 2j + 1 of a (2 rows) x (2 cols) row-major out:
// [[re, s im], [-(s im), re]]. s = -1 for conj (op "C"), else 1; negation is exact.
__global__ void __launch_bounds__(kComplexThreads)
realify_kernel(const double* __restrict__ x, int64_t rows, int64_t cols, int64_t rs, int64_t cs,
               bool conj, bool right, double* __restrict__ out) {
  const int64_t total = rows * cols;
  const int64_t ld = 2 * cols;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e / cols, j = e - i * cols;
    const double* p = x + 2 * (i * rs + j * cs);
    const double re = p[0];
    const double im = conj ? -p[1] : p[1];
    if (right) {
      double* top = out + (2 * i) * ld + 2 * j;
      top[0] = re;
      top[1] = im;
      top[ld] = -im;
      top[ld + 1] = re;
    } else {
      double* row = out + i * ld + 2 * j;
      row[0] = re;
      row[1] = im;
    }
  }
}

// t: m x n complex (interleaved) at t[2 (i ldt + j)], read only when use_t; cin read only
// when use_c. Per entry, in this order, each operation rounded (intrinsics: no FMA):
//   a = !use_t ? (0, 0) : alpha == 1 ? t : (ar tr - ai ti, ar ti + ai tr)
//   b = beta == 1 ? c : (br cr - bi ci, br ci + bi cr)
//   out = use_c ? (a.re + b.re, a.im + b.im) : a
// (alpha == 1 and beta == 1 take the operand as it is: an Inf in one part does not turn
// the other into NaN through 0 * Inf.)
__global__ void __launch_bounds__(kComplexThreads)
complex_axpby_kernel(const double* __restrict__ t, int64_t m, int64_t n, int64_t ldt, bool use_t,
                     double ar, double ai, double br, double bi, bool use_c,
                     const double* __restrict__ cin, int64_t cin_rs, int64_t cin_cs,
                     double* __restrict__ out, int64_t out_rs, int64_t out_cs) {
  const int64_t total = m * n;
  const bool alpha_one = ar == 1.0 && ai == 0.0, beta_one = br == 1.0 && bi == 0.0;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e / n, j = e - i * n;
    double re = 0.0, im = 0.0;
    if (use_t) {
      const double tr = t[2 * (i * ldt + j)], ti = t[2 * (i * ldt + j) + 1];
      if (alpha_one) {
        re = tr;
        im = ti;
      } else {
        re = __dsub_rn(__dmul_rn(ar, tr), __dmul_rn(ai, ti));
        im = __dadd_rn(__dmul_rn(ar, ti), __dmul_rn(ai, tr));
      }
    }
    if (use_c) {
      const double* c = cin + 2 * (i * cin_rs + j * cin_cs);
      const double cr = c[0], ci = c[1];
      if (beta_one) {
        re = __dadd_rn(re, cr);
        im = __dadd_rn(im, ci);
      } else {
        re = __dadd_rn(re, __dsub_rn(__dmul_rn(br, cr), __dmul_rn(bi, ci)));
        im = __dadd_rn(im, __dadd_rn(__dmul_rn(br, ci), __dmul_rn(bi, cr)));
      }
    }
    double* o = out + 2 * (i * out_rs + j * out_cs);
    o[0] = re;
    o[1] = im;
  }
}

inline int realify(const double* x, int64_t rows, int64_t cols, int64_t rs, int64_t cs, int conj,
                   int right, double* out, cudaStream_t stream, Message& err) {
  const char* what = "realify";
  if (rows < 0 || cols < 0) {
    return err.set(kBadArgument, "%s: rows and cols must be >= 0, got %lld x %lld", what,
                   static_cast<long long>(rows), static_cast<long long>(cols));
  }
  if (!product_fits(rows, cols, 8)) return err.set(kBadArgument, "%s: rows*cols overflows", what);
  if (rows == 0 || cols == 0) return kOk;
  if (x == nullptr || out == nullptr) return err.set(kBadArgument, "%s: x or out is null", what);
  const int64_t blocks =
      resident_blocks(realify_kernel, kComplexThreads, rows * cols, kComplexThreads);
  realify_kernel<<<blocks, kComplexThreads, 0, stream>>>(x, rows, cols, rs, cs, conj != 0,
                                                         right != 0, out);
  return check_launch(err, what);
}

inline int complex_axpby(const double* t, int64_t m, int64_t n, int64_t ldt, double alpha_re,
                         double alpha_im, double beta_re, double beta_im, const double* cin,
                         int64_t cin_rs, int64_t cin_cs, double* out, int64_t out_rs,
                         int64_t out_cs, cudaStream_t stream, Message& err) {
  const char* what = "complex_axpby";
  if (m < 0 || n < 0) {
    return err.set(kBadArgument, "%s: m and n must be >= 0, got %lld x %lld", what,
                   static_cast<long long>(m), static_cast<long long>(n));
  }
  if (!product_fits(m, n, 16)) return err.set(kBadArgument, "%s: m*n overflows", what);
  if (m == 0 || n == 0) return kOk;
  const bool use_t = alpha_re != 0.0 || alpha_im != 0.0;
  const bool use_c = beta_re != 0.0 || beta_im != 0.0;
  if (out == nullptr || (use_t && t == nullptr) || (use_c && cin == nullptr)) {
    return err.set(kBadArgument, "%s: out is null, or t (alpha != 0) or cin (beta != 0) is", what);
  }
  if (use_t && ldt < n) return err.set(kBadArgument, "%s: ldt < n", what);
  const int64_t blocks =
      resident_blocks(complex_axpby_kernel, kComplexThreads, m * n, kComplexThreads);
  complex_axpby_kernel<<<blocks, kComplexThreads, 0, stream>>>(
      t, m, n, ldt, use_t, alpha_re, alpha_im, beta_re, beta_im, use_c, cin, cin_rs, cin_cs, out,
      out_rs, out_cs);
  return check_launch(err, what);
}

}  // namespace stages
}  // namespace ozaki
