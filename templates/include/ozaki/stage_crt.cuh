// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The CRT stages: P_crt_unscale (residues from the raw int32 INT8-GEMM outputs, summed
// over k chunks) and P_combine_unscale (residues from the fused kernels' group partials):
// the residues, reduced by the one Barrett reduction (barrett.h), go through crt_arith.h's
// limb sums and finish; kernels and host launchers.

#pragma once

#include <cstdint>
#include <type_traits>  // std::integral_constant: the combine's fixed counts

#include <cuda_pipeline.h>  // __pipeline_memcpy_async (cp.async): the combine's staged loads
#include <cuda_runtime.h>

#include "ozaki/abi.h"
#include "ozaki/barrett.h"
#include "ozaki/constants.h"
#include "ozaki/crt_arith.h"
#include "ozaki/group_arith.h"  // partial_bytes: how the fused kernels store group partials
#include "ozaki/stage_common.cuh"
#include "ozaki/stage_launch.cuh"

namespace ozaki {
namespace stages {

// --- non-finite pattern --------------------------------------------------------------
// The pattern entry (i, j) of reference.split_nonfinite: 0 unless row i or column j is
// flagged, else from the classes of its k terms. Read by the CRT kernels per entry.
__device__ inline double nonfinite_entry(const NonfiniteSource& s, int64_t i, int64_t j) {
  if (s.row_flags == nullptr || (s.row_flags[i] == 0 && s.col_flags[j] == 0)) return 0.0;
  unsigned flags = 0;
  for (int64_t l = 0; l < s.k; ++l) {
    flags |= classify_term(s.a[i * s.a_rs + l * s.a_cs], s.b[l * s.b_rs + j * s.b_cs]);
  }
  return pattern_value(flags);
}

// --- CRT reconstruction and unscaling ------------------------------------------------
// P_crt_unscale (residues from raw int32 GEMM outputs, summed over k chunks) and
// P_combine_unscale (residues from group partials) differ only in where r_g comes
// from; both then run crt_add_residue in modulus order and crt_output.
//
// Per-launch modulus data built on the host next to CrtConstants.
struct CrtReduce {
  uint32_t magic[kMaxModuli];   // barrett_magic(m_g)
  uint32_t offset[kMaxModuli];  // signed_offset(m_g)
  int64_t plane[kMaxModuli];    // element offset of the plane modulus g reads
  int32_t load[kMaxModuli];     // combine: 1 where g is the first modulus of its group
  int32_t width[kMaxModuli];    // combine: bytes per partial of g's group (1 or 4)
};

struct CrtArgs {
  const int32_t* c;      // crt_unscale: raw int32 outputs
  const unsigned char* x;  // combine: group partials (plane offsets in bytes)
  int64_t m;
  int64_t n;
  int64_t ld;            // ldc or ldx
  int nchunks;           // crt_unscale
  int64_t chunk_stride;  // crt_unscale
  bool vector_loads;     // 16-byte loads of 4 consecutive j
  const int32_t* mu;
  const int32_t* nu;
  double alpha;
  double beta;
  const double* cin;
  int64_t cin_rs;
  int64_t cin_cs;
  double* out;
  int64_t out_rs;
  int64_t out_cs;
  bool vector_stores;    // out_cs == 1 and 16-byte aligned pairs
  NonfiniteSource nf;     // nf.row_flags null: no non-finite input
};

// Planes whose loads one thread issues together before reducing any of them: the
// loads' latencies overlap (one plane at a time left the kernel latency-bound at ~1.5 TB/s).
inline constexpr int kCrtBatch = 8;

// Where the CRT kernel's residues come from: crt_unscale's raw int32 GEMM outputs (each
// reduced modulo its modulus), combine_unscale's group partials (each reduced modulo every
// modulus of its group), or combine_unscale's one-byte partials of one-modulus groups
// (already the residues: nothing to reduce).
inline constexpr int kFromInt32 = 0;
inline constexpr int kFromPartials = 1;
inline constexpr int kFromResidueBytes = 2;

// The 4 entries (row i, columns j0 .. j0 + 3; 0 past n) that modulus g reads, as raw
// 32-bit words: crt_unscale's int32 GEMM outputs of one k chunk (at c + offset), or
// combine's group partials (uint32, or one byte each) at x + plane bytes. One streaming
// load when aligned and complete.
template <int kSource>
__device__ inline void load_entries(const CrtArgs& a, const CrtReduce& red, int g, int64_t offset,
                                    bool full, int64_t j0, uint32_t (&v)[4]) {
  if constexpr (kSource == kFromInt32) {
    const int32_t* src = a.c + offset;
    if (a.vector_loads && full) {
      const int4 w = __ldcs(reinterpret_cast<const int4*>(src));
      v[0] = w.x; v[1] = w.y; v[2] = w.z; v[3] = w.w;
    } else {
#pragma unroll
      for (int t = 0; t < 4; ++t) v[t] = j0 + t < a.n ? static_cast<uint32_t>(src[t]) : 0u;
    }
  } else if (kSource == kFromPartials && red.width[g] == 4) {
    const uint32_t* src = reinterpret_cast<const uint32_t*>(a.x + red.plane[g]) + offset;
    if (a.vector_loads && full) {
      const uint4 w = __ldcs(reinterpret_cast<const uint4*>(src));
      v[0] = w.x; v[1] = w.y; v[2] = w.z; v[3] = w.w;
    } else {
#pragma unroll
      for (int t = 0; t < 4; ++t) v[t] = j0 + t < a.n ? src[t] : 0u;
    }
  } else {  // one byte per partial
    const unsigned char* src = a.x + red.plane[g] + offset;
    if (a.vector_loads && full) {
      const uint32_t w = __ldcs(reinterpret_cast<const unsigned int*>(src));
#pragma unroll
      for (int t = 0; t < 4; ++t) v[t] = (w >> (8 * t)) & 0xffu;
    } else {
#pragma unroll
      for (int t = 0; t < 4; ++t) v[t] = j0 + t < a.n ? src[t] : 0u;
    }
  }
}

// The entries (i, j0 .. j0 + kEntries - 1) (those below n; kEntries 2 or 4) from their
// limb sums: the NaN/Inf pattern, crt_output_limbs (reconstruction, alpha, beta c) and the
// store. What holds for the whole launch (a non-finite source, beta != 0, nu's alignment) is
// tested once for the kEntries entries, not once per entry.
template <int kLimbs, int kEntries>
__device__ inline void store_entries(const CrtArgs& a, const CrtConstants& consts, int64_t i,
                                     int64_t j0, const double (&limb_sums)[kEntries][kMaxLimbs]) {
  static_assert(kEntries == 2 || kEntries == 4, "pairs of entries: 16-byte stores");
  const bool full = j0 + kEntries <= a.n;
  const int32_t mu = a.mu[i];
  int32_t nu[kEntries];
  bool loaded = false;
  if constexpr (kEntries == 4) {  // one 16-byte load where nu's 4 entries are aligned
    if (full && j0 % 4 == 0 && reinterpret_cast<uintptr_t>(a.nu) % 16 == 0) {
      const int4 v = *reinterpret_cast<const int4*>(a.nu + j0);
      nu[0] = v.x; nu[1] = v.y; nu[2] = v.z; nu[3] = v.w;
      loaded = true;
    }
  }
  if (!loaded) {
#pragma unroll
    for (int t = 0; t < kEntries; ++t) nu[t] = j0 + t < a.n ? a.nu[j0 + t] : 0;
  }
  const bool with_c = a.beta != 0.0;
  // Whether row i or one of the columns is flagged: the row's count and the columns' in
  // one 16-byte load where aligned, so that finite inputs cost two loads per kEntries
  // entries, not one or two per entry (nonfinite_entry checks each entry's own flags).
  bool flagged = false;
  if (a.nf.row_flags != nullptr) {
    int32_t any = a.nf.row_flags[i];
    if (kEntries == 4 && full && j0 % 4 == 0 && reinterpret_cast<uintptr_t>(a.nf.col_flags) % 16 == 0) {
      const int4 v = *reinterpret_cast<const int4*>(a.nf.col_flags + j0);
      any |= v.x | v.y | v.z | v.w;
    } else {
#pragma unroll
      for (int t = 0; t < kEntries; ++t) any |= j0 + t < a.n ? a.nf.col_flags[j0 + t] : 0;
    }
    flagged = any != 0;
  }
  double y[kEntries];
#pragma unroll
  for (int t = 0; t < kEntries; ++t) {
    const int64_t j = j0 + t;
    const double pattern = flagged && j < a.n ? nonfinite_entry(a.nf, i, j) : 0.0;
    const double c_value = with_c && j < a.n ? a.cin[i * a.cin_rs + j * a.cin_cs] : 0.0;
    y[t] = crt_output_limbs<kLimbs>(consts, limb_sums[t], pattern, mu + nu[t], a.alpha, a.beta, c_value);
  }
  double* dst = a.out + i * a.out_rs + j0 * a.out_cs;
  if (a.vector_stores && full) {
#pragma unroll
    for (int h = 0; h < kEntries / 2; ++h) {
      reinterpret_cast<double2*>(dst)[h] = make_double2(y[2 * h], y[2 * h + 1]);
    }
  } else {
#pragma unroll
    for (int t = 0; t < kEntries; ++t) {
      if (j0 + t < a.n) dst[t * a.out_cs] = y[t];
    }
  }
}

// One thread per 4 consecutive entries (i, j0 .. j0 + 3) of a row (kSource: kFromInt32 or
// kFromPartials; residue bytes go to crt_residue_bytes_kernel). kLimbs = consts.limbs
// (the launch picks the instance), so the limb loops carry no branches; the moduli go in
// batches of kCrtBatch whose loads are issued together. The residues reach
// crt_add_residue in modulus order whatever the load order.
template <int kSource, int kLimbs>
__global__ void __launch_bounds__(kThreads)
crt_kernel(const __grid_constant__ CrtArgs a, const __grid_constant__ CrtConstants consts,
           const __grid_constant__ CrtReduce red) {
  const int64_t n4 = (a.n + 3) / 4;
  const int64_t total = a.m * n4;
  const int count = consts.count;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = idx / n4;
    const int64_t j0 = (idx - i * n4) * 4;
    const bool full = j0 + 4 <= a.n;
    const int64_t row = i * a.ld + j0;

    constexpr bool kGroups = kSource != kFromInt32;
    double limb_sums[4][kMaxLimbs] = {};
    if (kGroups || a.nchunks == 1) {
      uint32_t x[4] = {0, 0, 0, 0};  // combine: the partials of the current group
#pragma unroll 1
      for (int g0 = 0; g0 < count; g0 += kCrtBatch) {
        const int nb = count - g0 < kCrtBatch ? count - g0 : kCrtBatch;
        uint32_t raw[kCrtBatch][4] = {};
#pragma unroll
        for (int b = 0; b < kCrtBatch; ++b) {
          const int g = g0 + b;
          if (b < nb && (!kGroups || red.load[g])) {
            load_entries<kSource>(a, red, g, kGroups ? row : red.plane[g] + row, full, j0, raw[b]);
          }
        }
#pragma unroll
        for (int b = 0; b < kCrtBatch; ++b) {
          if (b < nb) {
            const int g = g0 + b;
            const uint32_t mod = static_cast<uint32_t>(consts.moduli[g]);
            const uint32_t magic = red.magic[g];
            uint32_t r[4];
            if constexpr (kGroups) {
              if (red.load[g]) {
#pragma unroll
                for (int t = 0; t < 4; ++t) x[t] = raw[b][t];
              }
#pragma unroll
              for (int t = 0; t < 4; ++t) r[t] = barrett_reduce(x[t], mod, magic);
            } else {
              const uint32_t offset = red.offset[g];
#pragma unroll
              for (int t = 0; t < 4; ++t) {
                r[t] = mod_i32(static_cast<int32_t>(raw[b][t]), mod, magic, offset);
              }
            }
#pragma unroll
            for (int t = 0; t < 4; ++t) {
              crt_add_residue_limbs<kLimbs>(consts, g, static_cast<int32_t>(r[t]), limb_sums[t]);
            }
          }
        }
      }
    } else {  // crt_unscale over several k chunks: per modulus, the sum of its chunks' residues
#pragma unroll 1
      for (int g = 0; g < count; ++g) {
        const uint32_t mod = static_cast<uint32_t>(consts.moduli[g]);
        const uint32_t magic = red.magic[g];
        const uint32_t offset = red.offset[g];
        uint32_t r[4] = {0, 0, 0, 0};
        for (int ch = 0; ch < a.nchunks; ++ch) {
          uint32_t v[4];
          load_entries<kFromInt32>(a, red, g, ch * a.chunk_stride + red.plane[g] + row, full, j0, v);
#pragma unroll
          for (int t = 0; t < 4; ++t) {
            const uint32_t s = r[t] + mod_i32(static_cast<int32_t>(v[t]), mod, magic, offset);  // < 2m
            r[t] = s >= mod ? s - mod : s;
          }
        }
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          crt_add_residue_limbs<kLimbs>(consts, g, static_cast<int32_t>(r[t]), limb_sums[t]);
        }
      }
    }

    store_entries<kLimbs>(a, consts, i, j0, limb_sums);
  }
}

// combine_unscale of one-modulus groups: the partials are the residues themselves, one byte
// each, so nothing is reduced (43 % fewer instructions than crt_kernel on int32 outputs,
// ncu at 8192^2). One thread per 8 consecutive entries (i, j0 .. j0 + 7) of a row; two
// passes of 4 entries add the residues to the limb sums in modulus order and store, as
// crt_kernel does; the same bits. (16 entries per thread kept 154 registers: one block per
// SM, 12.5 % occupancy, slower than crt_kernel.)
//
// The 8-byte words of every modulus's plane come through shared memory, one item ahead:
// while a thread combines item idx it has item idx + stride's words in flight (cp.async,
// no registers held). Loaded straight into registers, the loads of the next item waited
// for the arithmetic of this one: at 25 % occupancy ncu saw 47 % of issue slots used and
// 24 % of DRAM bandwidth (8192^2, 1.31 ms). A thread copies only its own words and reads
// only those, so waiting for its own copies is enough (no barrier).
inline constexpr int kResidueBytesPerThread = 8;
inline constexpr int kResidueBytesThreads = 128;  // stages: 2 x planes x 128 x 8 bytes

// cp.async of 8 bytes to a shared-window address (what __pipeline_memcpy_async issues,
// without converting a generic pointer per copy); committed and awaited with
// __pipeline_commit and __pipeline_wait_prior.
__device__ inline void copy8_async(uint32_t shared_dst, const void* global_src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(shared_dst), "l"(global_src) : "memory");
}

// Adds the 8 one-byte residues of entries j0 .. j0 + 7 of row i and stores them;
// word(g, q) is modulus g's 4 bytes of entries j0 + 4q .. j0 + 4q + 3 (byte t: entry + t).
template <int kLimbs, int kCount, class Word>
__device__ inline void combine_residue_bytes(const CrtArgs& a, const CrtConstants& consts, int64_t i,
                                             int64_t j0, Word word) {
  const int count = kCount > 0 ? kCount : consts.count;
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    if (j0 + 4 * q < a.n) {
      double limb_sums[4][kMaxLimbs] = {};
#pragma unroll
      for (int g = 0; g < (kCount > 0 ? kCount : kMaxModuli); ++g) {
        if (g < count) {
          const uint32_t w = word(g, q);
          // Bytes 0 and 3 go through the conversion unit (I2F), bytes 1 and 2 through the
          // 2^52 bias (an FP64 add): the limb sums' FMAs keep the FP64 pipe about as busy
          // as instruction issue, and each residue is the same exact double either way.
          crt_add_value_limbs<kLimbs>(consts, g, static_cast<double>(w & 0xffu), limb_sums[0]);
          crt_add_residue_limbs<kLimbs>(consts, g, static_cast<int32_t>(__byte_perm(w, 0u, 0x4441)), limb_sums[1]);
          crt_add_residue_limbs<kLimbs>(consts, g, static_cast<int32_t>(__byte_perm(w, 0u, 0x4442)), limb_sums[2]);
          crt_add_value_limbs<kLimbs>(consts, g, static_cast<double>(w >> 24), limb_sums[3]);
        }
      }
      store_entries<kLimbs>(a, consts, i, j0 + 4 * q, limb_sums);
    }
  }
}

// kCount > 0: consts.count is kCount (the guards per modulus fold away, the stages hold
// kCount planes); 0: any count up to kMaxModuli.
template <int kLimbs, int kCount>
__global__ void __launch_bounds__(kResidueBytesThreads, 4)
crt_residue_bytes_kernel(const __grid_constant__ CrtArgs a, const __grid_constant__ CrtConstants consts,
                         const __grid_constant__ CrtReduce red) {
  constexpr int kPer = kResidueBytesPerThread;
  constexpr int kPlanes = kCount > 0 ? kCount : kMaxModuli;
  __shared__ uint2 words[2][kPlanes][kResidueBytesThreads];
  const int64_t nv = (a.n + kPer - 1) / kPer;
  const int64_t total = a.m * nv;
  if (total == 0) return;  // no item (and no division by nv = 0 below)
  const int count = kCount > 0 ? kCount : consts.count;
  const int tid = threadIdx.x;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  // This thread's word of stage 0 and modulus 0 as a shared-window address, converted once:
  // every other word of the thread is a constant offset from it.
  const uint32_t s_word = static_cast<uint32_t>(__cvta_generic_to_shared(&words[0][0][tid]));
  constexpr uint32_t kPlaneBytes = kResidueBytesThreads * sizeof(uint2);
  constexpr uint32_t kStageBytes = kPlanes * kPlaneBytes;
  // Starts the copies of item (i, j0)'s words into stage `buf` (none for an item past the
  // end or a partial one, which is read byte by byte below); one commit group either way.
  auto prefetch = [&](bool inside, int64_t i, int64_t j0, int buf) {
    if (inside && a.vector_loads && j0 + kPer <= a.n) {
      const unsigned char* src = a.x + i * a.ld + j0;
      const uint32_t dst = s_word + buf * kStageBytes;
#pragma unroll
      for (int g = 0; g < kPlanes; ++g) {
        if (g < count) copy8_async(dst + g * kPlaneBytes, src + red.plane[g]);
      }
    }
    __pipeline_commit();
  };
  int buf = 0;
  int64_t idx = blockIdx.x * int64_t(blockDim.x) + tid;
  int64_t i = idx / nv;  // (i, j0): item idx's row and first column; the next item's come
  int64_t j0 = (idx - i * nv) * kPer;  // from the one division per item in the loop
  prefetch(idx < total, i, j0, buf);
  for (; idx < total; idx += step, buf ^= 1) {
    const int64_t next = idx + step;
    const int64_t i_next = next / nv;
    const int64_t j_next = (next - i_next * nv) * kPer;
    prefetch(next < total, i_next, j_next, buf ^ 1);
    __pipeline_wait_prior(1);  // this item's copies (the group before the one just started)
    if (a.vector_loads && j0 + kPer <= a.n) {
      const int b = buf;
      combine_residue_bytes<kLimbs, kCount>(a, consts, i, j0, [&](int g, int q) {
        const uint2 w = words[b][g][tid];
        return q == 0 ? w.x : w.y;
      });
    } else {
      uint2 raw[kPlanes];
#pragma unroll
      for (int g = 0; g < kPlanes; ++g) {
        if (g < count) {
          const unsigned char* src = a.x + red.plane[g] + i * a.ld + j0;
          uint32_t w[2] = {0, 0};
          for (int t = 0; t < kPer && j0 + t < a.n; ++t) w[t / 4] |= uint32_t(src[t]) << (8 * (t % 4));
          raw[g] = make_uint2(w[0], w[1]);
        }
      }
      combine_residue_bytes<kLimbs, kCount>(a, consts, i, j0,
                                            [&](int g, int q) { return q == 0 ? raw[g].x : raw[g].y; });
    }
    i = i_next;
    j0 = j_next;
  }
  __pipeline_wait_prior(0);  // no copy outlives the block
}

// --- host launchers (stage_launch.cuh's checks, then the launch) ---------------------
inline int check_constants(const char* what, const CrtConstants* consts, Message& err) {
  if (consts == nullptr) return err.set(kBadArgument, "%s: consts is null", what);
  if (consts->count < 1 || consts->count > kMaxModuli) {
    return err.set(kBadArgument, "%s: consts->count=%d outside [1, %d]", what, consts->count,
                   kMaxModuli);
  }
  if (consts->limbs < 1 || consts->limbs > kMaxLimbs) {
    return err.set(kBadArgument, "%s: consts->limbs=%d outside [1, %d]", what, consts->limbs,
                   kMaxLimbs);
  }
  for (int g = 0; g < consts->count; ++g) {
    if (consts->moduli[g] < 2 || consts->moduli[g] > 256) {
      return err.set(kBadArgument, "%s: consts->moduli[%d]=%d outside [2, 256]", what, g,
                     consts->moduli[g]);
    }
  }
  return kOk;
}

// The output half of CrtArgs (shared by crt_unscale and combine_unscale).
inline int check_output(const char* what, int64_t m, int64_t n, const int32_t* mu,
                        const int32_t* nu, double beta, const double* cin, double* out,
                        Message& err) {
  if (mu == nullptr || nu == nullptr || out == nullptr) {
    return err.set(kBadArgument, "%s: null pointer (mu, nu or out)", what);
  }
  if (beta != 0.0 && cin == nullptr) {
    return err.set(kBadArgument, "%s: beta != 0 needs cin", what);
  }
  (void)m;
  (void)n;
  return kOk;
}

// A NonfiniteSource the CRT kernels can read (null: none).
inline int check_nonfinite(const char* what, const NonfiniteSource* nf, Message& err) {
  if (nf == nullptr) return kOk;
  if (nf->row_flags == nullptr || nf->col_flags == nullptr) {
    return err.set(kBadArgument, "%s: the non-finite source needs row_flags and col_flags", what);
  }
  if (nf->k < 0 || (nf->k > 0 && (nf->a == nullptr || nf->b == nullptr))) {
    return err.set(kBadArgument, "%s: the non-finite source needs k >= 0 and, for k > 0, a and b "
                   "(k=%lld)", what, static_cast<long long>(nf->k));
  }
  return kOk;
}

inline CrtReduce crt_reduce(const CrtConstants& consts) {
  CrtReduce red{};
  for (int g = 0; g < consts.count; ++g) {
    const uint32_t mod = static_cast<uint32_t>(consts.moduli[g]);
    red.magic[g] = barrett_magic(mod);
    red.offset[g] = signed_offset(mod);
  }
  return red;
}

template <int kSource, int kLimbs>
inline void launch_crt_kernel(const CrtArgs& args, const CrtConstants& consts, const CrtReduce& red,
                              cudaStream_t stream) {
  if constexpr (kSource == kFromResidueBytes) {
    const int64_t work = args.m * ((args.n + kResidueBytesPerThread - 1) / kResidueBytesPerThread);
    // The counts the accuracy contract and the benches run most (15 moduli: accurate
    // mode's bench count; 16 and 17: the contract's default call) with the count at compile
    // time, each in the instance of the limbs it takes (kLimbsOfCount, rendered from
    // templates/constants.py); any other count with the count read at run time.
    auto launch = [&](auto kernel) {
      const int64_t blocks = resident_blocks(kernel, kResidueBytesThreads, work, kResidueBytesThreads);
      kernel<<<blocks, kResidueBytesThreads, 0, stream>>>(args, consts, red);
    };
    auto fixed = [&](auto count) {
      constexpr int kCount = decltype(count)::value;
      if constexpr (kLimbsOfCount[kCount] == kLimbs) {
        if (consts.count == kCount) {
          launch(crt_residue_bytes_kernel<kLimbs, kCount>);
          return true;
        }
      }
      return false;
    };
    if (fixed(std::integral_constant<int, 15>{}) || fixed(std::integral_constant<int, 16>{}) ||
        fixed(std::integral_constant<int, 17>{})) {
      return;
    }
    launch(crt_residue_bytes_kernel<kLimbs, 0>);
  } else {
    const int64_t work = args.m * ((args.n + 3) / 4);
    const int64_t blocks = resident_blocks(crt_kernel<kSource, kLimbs>, kThreads, work, kThreads);
    crt_kernel<kSource, kLimbs><<<blocks, kThreads, 0, stream>>>(args, consts, red);
  }
}

template <int kLimbs>
inline void launch_crt_limbs(int source, const CrtArgs& args, const CrtConstants& consts,
                             const CrtReduce& red, cudaStream_t stream) {
  switch (source) {
    case kFromPartials: launch_crt_kernel<kFromPartials, kLimbs>(args, consts, red, stream); break;
    case kFromResidueBytes: launch_crt_kernel<kFromResidueBytes, kLimbs>(args, consts, red, stream); break;
    default: launch_crt_kernel<kFromInt32, kLimbs>(args, consts, red, stream); break;
  }
}

inline int launch_crt(int source, const CrtArgs& args, const CrtConstants& consts,
                      const CrtReduce& red, cudaStream_t stream, Message& err, const char* what) {
  static_assert(kMaxLimbs == 4, "one instance per limb count below");
  switch (consts.limbs) {  // check_constants proved 1 <= limbs <= kMaxLimbs
    case 1: launch_crt_limbs<1>(source, args, consts, red, stream); break;
    case 2: launch_crt_limbs<2>(source, args, consts, red, stream); break;
    case 3: launch_crt_limbs<3>(source, args, consts, red, stream); break;
    default: launch_crt_limbs<4>(source, args, consts, red, stream); break;
  }
  return check_launch(err, what);
}

inline int crt_unscale(const int32_t* c, int nmod, int64_t m, int64_t n, int64_t ldc,
                       int64_t batch_stride_c, int nchunks, int64_t chunk_stride,
                       const CrtConstants* consts, const int32_t* mu, const int32_t* nu,
                       double alpha, double beta, const double* cin, int64_t cin_rs,
                       int64_t cin_cs, double* out, int64_t out_rs, int64_t out_cs,
                       const NonfiniteSource* nf, cudaStream_t stream, Message& err) {
  const char* what = "crt_unscale";
  if (m < 0 || n < 0 || !product_fits(m, n)) {
    return err.set(kBadArgument, "%s: bad sizes m=%lld n=%lld", what, static_cast<long long>(m),
                   static_cast<long long>(n));
  }
  if (int s = check_constants(what, consts, err)) return s;
  if (consts->count != nmod) {
    return err.set(kBadArgument, "%s: consts->count=%d must equal nmod=%d", what, consts->count,
                   nmod);
  }
  if (nchunks < 1) return err.set(kBadArgument, "%s: nchunks=%d must be >= 1", what, nchunks);
  if (m == 0 || n == 0) return kOk;
  if (c == nullptr) return err.set(kBadArgument, "%s: null pointer (c)", what);
  if (reinterpret_cast<uintptr_t>(c) % alignof(int32_t) != 0) {
    return err.set(kBadArgument, "%s: c=%p is not 4-byte aligned", what, static_cast<const void*>(c));
  }
  if (ldc < n) {
    return err.set(kBadArgument, "%s: ldc=%lld must be >= n=%lld", what,
                   static_cast<long long>(ldc), static_cast<long long>(n));
  }
  if (nmod > 1 && batch_stride_c < 1) {
    return err.set(kBadArgument, "%s: batch_stride_c=%lld must be >= 1 for %d moduli", what,
                   static_cast<long long>(batch_stride_c), nmod);
  }
  if (nchunks > 1 && chunk_stride < 1) {
    return err.set(kBadArgument, "%s: chunk_stride=%lld must be >= 1 for %d chunks", what,
                   static_cast<long long>(chunk_stride), nchunks);
  }
  if (int s = check_output(what, m, n, mu, nu, beta, cin, out, err)) return s;
  CrtReduce red = crt_reduce(*consts);
  for (int g = 0; g < nmod; ++g) red.plane[g] = g * batch_stride_c;
  const bool vector_loads = aligned16(c) && ldc % 4 == 0 && batch_stride_c % 4 == 0 &&
                            (nchunks == 1 || chunk_stride % 4 == 0);
  const bool vector_stores = out_cs == 1 && out_rs % 2 == 0 && aligned16(out);
  if (int s = check_nonfinite(what, nf, err)) return s;
  const CrtArgs args{c, nullptr, m, n, ldc, nchunks, chunk_stride, vector_loads, mu, nu, alpha,
                     beta, cin, cin_rs, cin_cs, out, out_rs, out_cs, vector_stores,
                     nf != nullptr ? *nf : NonfiniteSource{}};
  return launch_crt(kFromInt32, args, *consts, red, stream, err, what);
}

inline int combine_unscale(const void* x_bytes, int ngroups, const int32_t* group_sizes,
                           int64_t m, int64_t n, int64_t ldx, int64_t group_stride,
                           const CrtConstants* consts, const int32_t* mu, const int32_t* nu,
                           double alpha, double beta, const double* cin, int64_t cin_rs,
                           int64_t cin_cs, double* out, int64_t out_rs, int64_t out_cs,
                           const NonfiniteSource* nf, cudaStream_t stream, Message& err) {
  const char* what = "combine_unscale";
  if (m < 0 || n < 0 || !product_fits(m, n)) {
    return err.set(kBadArgument, "%s: bad sizes m=%lld n=%lld", what, static_cast<long long>(m),
                   static_cast<long long>(n));
  }
  if (int s = check_constants(what, consts, err)) return s;
  if (ngroups < 1 || ngroups > consts->count || group_sizes == nullptr) {
    return err.set(kBadArgument, "%s: ngroups=%d must be in [1, consts->count=%d] with group_sizes",
                   what, ngroups, consts->count);
  }
  CrtReduce red = crt_reduce(*consts);
  const auto* x = static_cast<const unsigned char*>(x_bytes);
  int g = 0;
  int64_t offset = 0;  // bytes
  for (int gr = 0; gr < ngroups; ++gr) {
    const int size = group_sizes[gr];
    if (size < 1 || size > consts->count - g) {
      return err.set(kBadArgument, "%s: group_sizes[%d]=%d does not fit the %d moduli", what, gr,
                     size, consts->count);
    }
    uint64_t product = 1;
    for (int t = 0; t < size; ++t, ++g) {
      product *= static_cast<uint64_t>(consts->moduli[g]);  // <= 256^20 never reached: checked
      if (product > 0xffffffffull) {
        return err.set(kBadArgument, "%s: group %d's moduli product exceeds 2^32 - 1", what, gr);
      }
      red.plane[g] = offset;
      red.load[g] = t == 0;
      red.width[g] = partial_bytes(size);
    }
    offset += partial_bytes(size) * group_stride;
  }
  if (g != consts->count) {
    return err.set(kBadArgument, "%s: group_sizes sum to %d, consts->count is %d", what, g,
                   consts->count);
  }
  if (m == 0 || n == 0) return kOk;
  if (x == nullptr) return err.set(kBadArgument, "%s: null pointer (x)", what);
  if (ldx < n || (ngroups > 1 && group_stride < 1)) {
    return err.set(kBadArgument, "%s: need ldx >= n and group_stride >= 1; got ldx=%lld "
                   "group_stride=%lld", what, static_cast<long long>(ldx),
                   static_cast<long long>(group_stride));
  }
  for (int h = 0; h < consts->count; ++h) {  // uint32 partials are read as words
    if (red.width[h] == 4 && (reinterpret_cast<uintptr_t>(x) + red.plane[h]) % 4 != 0) {
      return err.set(kBadArgument, "%s: the uint32 plane of modulus %d starts at byte %lld of "
                     "x=%p, not 4-byte aligned (group_stride=%lld)", what, h,
                     static_cast<long long>(red.plane[h]), x_bytes,
                     static_cast<long long>(group_stride));
    }
  }
  if (int s = check_output(what, m, n, mu, nu, beta, cin, out, err)) return s;
  // every group of one modulus: the partials are the residues themselves
  const bool residue_bytes = ngroups == consts->count;
  // 16-byte loads of 4 uint32 partials, 4-byte loads of 4 one-byte partials; residue
  // bytes: 8-byte loads of 8
  const bool vector_loads = aligned16(x) && ldx % (residue_bytes ? kResidueBytesPerThread : 4) == 0 &&
                            (ngroups == 1 || group_stride % 16 == 0);
  const bool vector_stores = out_cs == 1 && out_rs % 2 == 0 && aligned16(out);
  if (int s = check_nonfinite(what, nf, err)) return s;
  const CrtArgs args{nullptr, x, m, n, ldx, 1, 0, vector_loads, mu, nu, alpha, beta, cin, cin_rs,
                     cin_cs, out, out_rs, out_cs, vector_stores,
                     nf != nullptr ? *nf : NonfiniteSource{}};
  return launch_crt(residue_bytes ? kFromResidueBytes : kFromPartials, args, *consts, red, stream,
                    err, what);
}


}  // namespace stages
}  // namespace ozaki
