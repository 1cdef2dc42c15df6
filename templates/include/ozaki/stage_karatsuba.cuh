// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// Karatsuba on the staged path of a complex call (ozaki_cutlass/paths/karatsuba.py says
// when it runs and why it gives the realified product's bits):
//
//   (the parts' residue planes, Re, Im and Re + Im (mod m_g) of each complex operand, come
//   from P_residues_karatsuba: stage_residues.cuh)
//   P_crt_unscale_karatsuba P_crt_unscale of the realified output from the three products
//                           P1 = Ar Br, P2 = Ai Bi, P3 = (Ar + Ai)(Br + Bi) per modulus:
//                           Re = P1 - P2 and Im = P3 - P1 - P2 (mod m_g) formed as they are
//                           loaded, then the same limb sums, pattern and unscale (one k
//                           chunk: karatsuba_crt_kernel; several: karatsuba_crt_chunks_kernel).

#pragma once

#include <cstdint>

#include <cuda_pipeline.h>  // __pipeline_memcpy_async (cp.async): the staged loads
#include <cuda_runtime.h>

#include "ozaki/karatsuba_arith.h"
#include "ozaki/stage_crt.cuh"

namespace ozaki {
namespace stages {

// --- the CRT of the three products ------------------------------------------------------
struct KaratsubaPlanes {
  int64_t plane;  // elements between moduli g and g + 1 of one part
  int64_t part;   // elements between parts (P1, P2, P3) of one modulus
};

inline constexpr int kKaratsubaBatch = 8;  // moduli whose loads one thread issues together

__device__ inline int2 load_pair(const int32_t* p, bool two, bool vector) {
  if (vector && two) return __ldcs(reinterpret_cast<const int2*>(p));
  return make_int2(p[0], two ? p[1] : 0);
}

// Products: a.c holds element (ch, part, g, i, jc) at c[ch * chunk_stride + part * part +
// g * plane + i * ld + jc] (a.ld: the planes' leading dimension, in complex columns); a.n
// is the realified width, twice the complex one: entries 2 jc and 2 jc + 1 are Re and Im
// of complex column jc.
//
// One k chunk (karatsuba_crt_kernel): one thread per complex entry (i, jc), its 3 x count
// words (P1, P2, P3 per modulus) copied into shared memory one entry ahead (cp.async):
// while a thread reduces entry idx, entry idx + stride's words are in flight and hold no
// registers. A thread copies and reads only its own words
// (no barrier). The stages hold 2 x 3 x count words per thread (dynamic shared memory):
// 24 KB per block of 64 threads at 16 moduli, 9 blocks per SM. (Two complex entries per
// thread and stages sized for kMaxModuli left 7 warps per SM, latency-bound at 1.85 TB/s;
// registers in batches (the chunks kernel) 173 registers, ~1.1 TB/s: docs/benchmarks.md.)
// kNarrow: every product sums at most kKaratsubaNarrowTerms terms (one reduction per
// residue). The residues reach the limb sums in modulus order, as in the chunks kernel.
inline constexpr int kKaratsubaThreads = 64;

constexpr size_t karatsuba_stage_bytes(int count) {
  return size_t(2) * 3 * count * kKaratsubaThreads * sizeof(int32_t);
}
static_assert(karatsuba_stage_bytes(kMaxModuli) <= 48 * 1024, "dynamic shared memory without an opt-in");

template <int kLimbs, bool kNarrow>
__global__ void __launch_bounds__(kKaratsubaThreads)
karatsuba_crt_kernel(const __grid_constant__ CrtArgs a, const __grid_constant__ KaratsubaPlanes p,
                     const __grid_constant__ CrtConstants consts, const __grid_constant__ CrtReduce red) {
  extern __shared__ int32_t words[];  // [2][3 * count][kKaratsubaThreads]
  const int64_t nc = a.n / 2;
  const int64_t total = a.m * nc;
  const int count = consts.count;
  const int tid = threadIdx.x;
  const int stage = 3 * count * kKaratsubaThreads;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  // Starts the copies of entry idx's words into stage `buf` (none past the end); one
  // commit group either way.
  auto prefetch = [&](int64_t idx, int buf) {
    if (idx < total) {
      const int64_t i = idx / nc;
      const int32_t* src = a.c + i * a.ld + (idx - i * nc);
      int32_t* dst = words + buf * stage + tid;
#pragma unroll 1
      for (int q = 0; q < 3; ++q, src += p.part) {
        const int32_t* s = src;
#pragma unroll 4
        for (int g = 0; g < count; ++g, s += p.plane, dst += kKaratsubaThreads) {
          __pipeline_memcpy_async(dst, s, sizeof(int32_t));
        }
      }
    }
    __pipeline_commit();
  };
  int buf = 0;
  int64_t idx = blockIdx.x * int64_t(blockDim.x) + tid;
  prefetch(idx, buf);
  for (; idx < total; idx += step, buf ^= 1) {
    prefetch(idx + step, buf ^ 1);
    __pipeline_wait_prior(1);  // this entry's copies (the group before the one just started)
    const int64_t i = idx / nc;
    const int64_t jc = idx - i * nc;
    const int32_t* w = words + buf * stage + tid;
    double limb_sums[2][kMaxLimbs] = {};
#pragma unroll
    for (int g = 0; g < kMaxModuli; ++g) {
      if (g < count) {
        const uint32_t mod = static_cast<uint32_t>(consts.moduli[g]);
        const uint32_t magic = red.magic[g], offset = red.offset[g];
        const int32_t p1 = w[g * kKaratsubaThreads], p2 = w[(count + g) * kKaratsubaThreads],
                      p3 = w[(2 * count + g) * kKaratsubaThreads];
        uint32_t re, im;
        if constexpr (kNarrow) {
          karatsuba_residues_narrow(p1, p2, p3, mod, magic, offset, re, im);
        } else {
          karatsuba_residues(p1, p2, p3, mod, magic, offset, re, im);
        }
        crt_add_residue_limbs<kLimbs>(consts, g, static_cast<int32_t>(re), limb_sums[0]);
        crt_add_residue_limbs<kLimbs>(consts, g, static_cast<int32_t>(im), limb_sums[1]);
      }
    }
    store_entries<kLimbs>(a, consts, i, 2 * jc, limb_sums);
  }
  __pipeline_wait_prior(0);  // no copy outlives the block
}

// Several k chunks (a complex k longer than one chunk): one thread per 4 consecutive realified
// entries, its moduli in batches of kKaratsubaBatch whose loads go out together, each
// modulus's residues summed over the chunks before its limb sums (173 registers, one
// block per SM: the one-chunk kernel above is the fast one).
template <int kLimbs>
__global__ void __launch_bounds__(kThreads)
karatsuba_crt_chunks_kernel(const __grid_constant__ CrtArgs a, const __grid_constant__ KaratsubaPlanes p,
                     const __grid_constant__ CrtConstants consts, const __grid_constant__ CrtReduce red) {
  const int64_t n4 = (a.n + 3) / 4;
  const int64_t nc = a.n / 2;
  const int64_t total = a.m * n4;
  const int count = consts.count;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = idx / n4;
    const int64_t j0 = (idx - i * n4) * 4;
    const int64_t jc = j0 / 2;
    const bool two = jc + 1 < nc;
    const int32_t* row = a.c + i * a.ld + jc;
    double limb_sums[4][kMaxLimbs] = {};
#pragma unroll 1
    for (int g0 = 0; g0 < count; g0 += kKaratsubaBatch) {
      const int nb = count - g0 < kKaratsubaBatch ? count - g0 : kKaratsubaBatch;
      uint32_t re[kKaratsubaBatch][2] = {}, im[kKaratsubaBatch][2] = {};
#pragma unroll 1
      for (int ch = 0; ch < a.nchunks; ++ch) {
        int2 v[kKaratsubaBatch][3];
#pragma unroll
        for (int b = 0; b < kKaratsubaBatch; ++b) {
#pragma unroll
          for (int q = 0; q < 3; ++q) {
            v[b][q] = b < nb ? load_pair(row + ch * a.chunk_stride + q * p.part + (g0 + b) * p.plane, two,
                                         a.vector_loads)
                             : make_int2(0, 0);
          }
        }
#pragma unroll
        for (int b = 0; b < kKaratsubaBatch; ++b) {
          if (b < nb) {
            const int g = g0 + b;
            const uint32_t mod = static_cast<uint32_t>(consts.moduli[g]);
            const uint32_t magic = red.magic[g], offset = red.offset[g];
#pragma unroll
            for (int t = 0; t < 2; ++t) {
              uint32_t r, i;
              karatsuba_residues(t ? v[b][0].y : v[b][0].x, t ? v[b][1].y : v[b][1].x,
                                 t ? v[b][2].y : v[b][2].x, mod, magic, offset, r, i);
              re[b][t] = add_mod(re[b][t], r, mod);   // summed over the k chunks
              im[b][t] = add_mod(im[b][t], i, mod);
            }
          }
        }
      }
#pragma unroll
      for (int b = 0; b < kKaratsubaBatch; ++b) {
        if (b < nb) {
          const int g = g0 + b;
          crt_add_residue_limbs<kLimbs>(consts, g, static_cast<int32_t>(re[b][0]), limb_sums[0]);
          crt_add_residue_limbs<kLimbs>(consts, g, static_cast<int32_t>(im[b][0]), limb_sums[1]);
          crt_add_residue_limbs<kLimbs>(consts, g, static_cast<int32_t>(re[b][1]), limb_sums[2]);
          crt_add_residue_limbs<kLimbs>(consts, g, static_cast<int32_t>(im[b][1]), limb_sums[3]);
        }
      }
    }
    store_entries<kLimbs>(a, consts, i, j0, limb_sums);
  }
}

// --- host launchers ----------------------------------------------------------------------
template <int kLimbs>
inline void launch_karatsuba_crt(const CrtArgs& args, const KaratsubaPlanes& planes,
                                 const CrtConstants& consts, const CrtReduce& red, bool narrow,
                                 cudaStream_t stream) {
  if (args.nchunks == 1) {
    const auto kernel = narrow ? karatsuba_crt_kernel<kLimbs, true> : karatsuba_crt_kernel<kLimbs, false>;
    const size_t smem = karatsuba_stage_bytes(consts.count);
    const int64_t entries = args.m * (args.n / 2);
    const int64_t blocks = resident_blocks(kernel, kKaratsubaThreads, entries, kKaratsubaThreads, smem);
    kernel<<<blocks, kKaratsubaThreads, smem, stream>>>(args, planes, consts, red);
  } else {
    const int64_t work = args.m * ((args.n + 3) / 4);
    const int64_t blocks = resident_blocks(karatsuba_crt_chunks_kernel<kLimbs>, kThreads, work, kThreads);
    karatsuba_crt_chunks_kernel<kLimbs><<<blocks, kThreads, 0, stream>>>(args, planes, consts, red);
  }
}

inline int crt_unscale_karatsuba(const int32_t* c, int nmod, int64_t m, int64_t n, int64_t ldc,
                                 int64_t plane, int64_t part, int nchunks, int64_t k_chunk,
                                 int64_t chunk_stride, const CrtConstants* consts, const int32_t* mu, const int32_t* nu,
                                 double alpha, double beta, const double* cin, int64_t cin_rs,
                                 int64_t cin_cs, double* out, int64_t out_rs, int64_t out_cs,
                                 const NonfiniteSource* nf, cudaStream_t stream, Message& err) {
  const char* what = "crt_unscale_karatsuba";
  if (m < 0 || n < 0 || n % 2 != 0 || !product_fits(m, n)) {
    return err.set(kBadArgument, "%s: bad sizes m=%lld n=%lld (n: the realified width, even)", what,
                   static_cast<long long>(m), static_cast<long long>(n));
  }
  if (int s = check_constants(what, consts, err)) return s;
  if (consts->count != nmod) {
    return err.set(kBadArgument, "%s: consts->count=%d must equal nmod=%d", what, consts->count,
                   nmod);
  }
  if (nchunks < 1) return err.set(kBadArgument, "%s: nchunks=%d must be >= 1", what, nchunks);
  if (k_chunk < 0) {
    return err.set(kBadArgument, "%s: k_chunk=%lld must be >= 0", what, static_cast<long long>(k_chunk));
  }
  if (m == 0 || n == 0) return kOk;
  if (c == nullptr) return err.set(kBadArgument, "%s: null pointer (c)", what);
  if (reinterpret_cast<uintptr_t>(c) % alignof(int32_t) != 0) {
    return err.set(kBadArgument, "%s: c=%p is not 4-byte aligned", what, static_cast<const void*>(c));
  }
  if (ldc < n / 2 || plane < m * ldc || part < int64_t(nmod) * plane ||
      (nchunks > 1 && chunk_stride < 3 * part)) {
    return err.set(kBadArgument, "%s: need ldc >= n/2, plane >= m*ldc, part >= nmod*plane and, for "
                   "several chunks, chunk_stride >= 3*part; got ldc=%lld plane=%lld part=%lld "
                   "chunk_stride=%lld", what, static_cast<long long>(ldc),
                   static_cast<long long>(plane), static_cast<long long>(part),
                   static_cast<long long>(chunk_stride));
  }
  if (int s = check_output(what, m, n, mu, nu, beta, cin, out, err)) return s;
  if (int s = check_nonfinite(what, nf, err)) return s;
  const CrtReduce red = crt_reduce(*consts);
  const bool vector_loads = reinterpret_cast<uintptr_t>(c) % 8 == 0 && ldc % 2 == 0 && plane % 2 == 0 &&
                            part % 2 == 0 && (nchunks == 1 || chunk_stride % 2 == 0);
  const bool vector_stores = out_cs == 1 && out_rs % 2 == 0 && aligned16(out);
  const CrtArgs args{c, nullptr, m, n, ldc, nchunks, chunk_stride, vector_loads, mu, nu, alpha,
                     beta, cin, cin_rs, cin_cs, out, out_rs, out_cs, vector_stores,
                     nf != nullptr ? *nf : NonfiniteSource{}};
  const KaratsubaPlanes planes{plane, part};
  const bool narrow = k_chunk <= kKaratsubaNarrowTerms;
  static_assert(kMaxLimbs == 4, "one instance per limb count below");
  switch (consts->limbs) {  // check_constants proved limbs == kLimbsOfCount[count], in [1, kMaxLimbs]
    case 1: launch_karatsuba_crt<1>(args, planes, *consts, red, narrow, stream); break;
    case 2: launch_karatsuba_crt<2>(args, planes, *consts, red, narrow, stream); break;
    case 3: launch_karatsuba_crt<3>(args, planes, *consts, red, narrow, stream); break;
    default: launch_karatsuba_crt<4>(args, planes, *consts, red, narrow, stream); break;
  }
  return check_launch(err, what);
}

}  // namespace stages
}  // namespace ozaki
