// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The stage kernels of the staged Ozaki-II pipeline (everything except the INT8 GEMMs),
// behind the C ABI that templates/stages.cu.j2 exports (ozaki_cutlass.generator.abi.STAGES
// describes every entry point; the template renders their prototypes from it). Each
// kernel reproduces a stage function of ozaki_cutlass/reference.py bit for bit:
//
//   P_scan              reference.split_nonfinite (counts only), exponents, fast_shifts
//   P_coarse            reference.coarse_magnitudes (int8 operands of the coarse GEMM)
//   P_scan_coarse       P_scan, then P_coarse of its exponents, in one kernel where it can
//   P_accumulate_i64    the int64 sum over k chunks of the coarse GEMM (reference.coarse_bound)
//   P_accurate_shifts   reference.accurate_shifts (one read of G, or a row pass then a column pass)
//   P_pack              a vector set copied to contiguous vectors (a tiled transpose)
//   P_residues          reference.scale_to_integers + reference.residues (TN int8 layout)
//   P_residues_strided  the same residues in any non-overlapping (plane, row) strides, e.g.
//                       a row's moduli concatenated along k for the fused GEMM
//   P_residues_karatsuba  the same residues of a realified complex operand, written as
//                       Karatsuba's parts: the planes of Re, Im and Re + Im (mod m_g)
//   P_crt_unscale       reference.modular_products' final "mod m_g" + crt_reconstruct
//                       + the NaN/Inf pattern of reference.split_nonfinite, substituted as
//                       in gemm + unscale
//   P_combine_unscale   the same reconstruction + pattern + unscale from the fused
//                       pipeline's group partials X mod M_group (uint32, or the residue
//                       byte itself for one-modulus groups)
//   P_realify,          the complex layer around the pipeline (numerics/zgemm.py):
//   P_complex_axpby     complex operands as real matrices, and alpha T + beta C in complex
//   P_crt_unscale_karatsuba  the CRT of Karatsuba's three products per modulus on the
//                       staged path of a complex call (stage_karatsuba.cuh)
//
// Where each idea lives:
//   scaling.h, residue_arith.h, crt_arith.h,  the scalar arithmetic of the stages, pure
//   inner_arith.h                             __host__ __device__ (checked on the host)
//   barrett.h, double_word.h, bits.h          the one Barrett reduction, the one
//                                             double-word library, bit-level helpers
//   stage_common.cuh, stage_launch.cuh        device plumbing and host launch helpers
//   stage_scan.cuh, stage_shifts.cuh,         each stage's kernels and launchers
//   stage_residues.cuh, stage_crt.cuh,
//   stage_contract.cuh, stage_complex.cuh,
//   stage_karatsuba.cuh
//
// Cost model (H200: 132 SMs at ~1.98 GHz; per SM and clock: 128 FP32 FMA, 64 INT32 or
// FP64 ops, 32 shared-memory words, ~18 bytes of HBM; n = 16384, N = 15 moduli):
//   scan            2 reads of x per vector set (the 2nd mostly from L2 for lanes along
//                   k); ~10 int/fp64 ops per entry; measured 0.9 ms per operand (1.8x HBM).
//   coarse          1 read of x (8 B/entry) + 1 B/entry written, 16-byte stores, ~20 ops
//                   per entry: memory-bound, ~0.5 ms per operand. scan_coarse writes
//                   the same bytes from the scan's second read (no third read of x).
//   residues        1 read of x (8 B) + N bytes written per entry (16-byte stores); per
//                   modulus 7 FP32 ops (every |V| < 2^53 in the warp), 8 (every V < 2^69:
//                   five wide pieces) or 11 FP32 ops + 1 shared load (the 2^e table), + 3/4
//                   PRMT. Measured (ncu, 8192^3, 15 moduli, wide route; docs/stages/residues.md,
//                   "each entry's exp first"): 240 instructions per entry, ~150 of them the
//                   modulus loop, ~90 the exponents, the pieces and the loads; issue-bound
//                   at 72 % of the issue slots, 1.84x the HBM floor for both operands.
//   crt_unscale     N int32 reads (16-byte loads, evict-first) per entry, per modulus
//                   ~8 INT32 ops (Barrett, no division) + 2L FP64 ops of the limb sums, then
//                   ~40 FP64 ops (crt_finish, ldexp, alpha/beta), 8 B written. ~2.3 clk per
//                   entry per SM issue-bound vs 60 B/entry of HBM (~3.3 ms at 16384^2);
//                   measured ~9.6 ms on an H200 (docs/benchmarks.md): arithmetic-bound.
//   combine_unscale N/G uint32 reads per entry (G moduli per group), ~4 INT32 ops per
//                   modulus: ~1 ms of HBM for N = 15, G = 4; issue ~1.7 clk/entry/SM, ~2 ms.
//   accumulate_i64  element-wise (int64 G over k chunks).
//   accurate_shifts 1 read of G (1024 <= n <= 16384, int32, 16-byte rows; else 2: a row
//                   pass, a column pass), ~8 int32 ops per entry.

#pragma once

// In the order the pipeline runs them.
#include "ozaki/stage_scan.cuh"
#include "ozaki/stage_shifts.cuh"
#include "ozaki/stage_residues.cuh"
#include "ozaki/stage_crt.cuh"
#include "ozaki/stage_contract.cuh"
#include "ozaki/stage_complex.cuh"
#include "ozaki/stage_karatsuba.cuh"
