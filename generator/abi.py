"""The C ABI of every generated library, written once.

Each kind of library (the INT8 GEMM, the fused modulus-group GEMM, the stage kernels, the
prologue prototype) has one `LibraryAbi`: its version and its entry points, each a name,
a return type and an ordered list of (C type, name) parameters, with its contract. From
that one description:

- the templates render every exported prototype (`{{ abi.prototype("run") }}`), the
  number `P_abi_version()` returns (`{{ abi.version }}`) and a prelude placed before our
  headers (`{{ abi.prelude }}`): the export macro, the status codes, the numeric
  constants of ozaki_cutlass.templates.constants where the kind needs them, and the ABI
  structs;
- the runtime binds each entry's ctypes signature (`Entry.argtypes`, `Entry.restype`;
  ozaki_cutlass.kernels.library) and builds host arrays and structs with the ctypes
  types given here.

The vocabulary (types, structs, entries, ``LibraryAbi``) is ``ozaki_cutlass.generator.ffi``;
its names used with these specs are re-exported here.
"""

from __future__ import annotations

from .ffi import (CRT_CONSTANTS, NONFINITE_SOURCE, STATUS_CUDA_ERROR, STATUS_OK, STATUS_UNSUPPORTED, BoundAbi, Entry,
                  LibraryAbi, Struct, entry, identity_entries)

__all__ = [
    "STATUS_OK",
    "STATUS_UNSUPPORTED",
    "STATUS_CUDA_ERROR",
    "Entry",
    "Struct",
    "LibraryAbi",
    "BoundAbi",
    "CRT_CONSTANTS",
    "NONFINITE_SOURCE",
    "INT8_GEMM",
    "GROUP_GEMM",
    "STAGES",
    "PROLOGUE",
    "LIBRARIES",
]


_STATUS_DOC = (f"Returns {STATUS_OK} (ok), {STATUS_UNSUPPORTED} (not supported: checked before any "
               f"CUDA call) or {STATUS_CUDA_ERROR} (a CUDA or CUTLASS error at initialize or launch).")

INT8_GEMM = LibraryAbi(
    kind="int8_gemm",
    version=1,
    doc="The batched INT8 GEMM (templates/int8_gemm_sm90.cu.j2, int8_gemm_sm80.cu.j2).",
    entries=(
        entry("run", "int",
               "int m, int n, int k, int batch, const int8_t* A, int64_t lda, int64_t batch_stride_a, "
               "const int8_t* B, int64_t ldb, int64_t batch_stride_b, int32_t* C, int64_t ldc, "
               "int64_t batch_stride_c, void* workspace, size_t workspace_bytes, cudaStream_t stream",
               f"""\
For b in [0, batch): C[b*sc + i*ldc + j] = sum_l A[b*sa + i*lda + l] * B[b*sb + j*ldb + l]
(sa, sb, sc the batch strides) in int32 with two's-complement wrap-around (no
saturation, no float anywhere). {_STATUS_DOC}"""),
        entry("workspace_size", "size_t", "int m, int n, int k, int batch",
               "Bytes of workspace P_run needs for a packed problem of these sizes (0 for sizes that are "
               "not a problem)."),
        *identity_entries(),
    ),
)

GROUP_GEMM = LibraryAbi(
    kind="group_gemm",
    version=2,  # 2: `groups` consecutive groups per call
    doc="The fused modulus-group INT8 GEMM (templates/int8_group_gemm_sm90.cu.j2, _sm80.cu.j2).",
    kernel_constants=True,
    entries=(
        entry("run", "int",
               "int m, int n, int k_pad, int group_size, int groups, const int8_t* A, int64_t lda, "
               "const int8_t* B, int64_t ldb, void* X, int64_t ldx, int64_t stride_x, "
               "const uint32_t* moduli, void* workspace, size_t workspace_bytes, cudaStream_t stream",
               f"""\
One call takes `groups` consecutive groups of G = group_size moduli, every modulus's int8
residues concatenated along k: modulus h = q*G + g (group q, g < G) at columns
[h*k_pad, (h+1)*k_pad) of A's and B's rows. For i < m, j < n:
  acc_h = sum_(l < k_pad) A[i*lda + h*k_pad + l] * B[j*ldb + h*k_pad + l]
(int32, two's-complement wrap-around), and
  X[q*stride_x + i*ldx + j] = (sum_g c_g (acc_(qG+g) mod m_(qG+g))) mod M_q in [0, M_q),
M_q = the product of group q's moduli: the unique value in [0, M_q) congruent to each
acc_h modulo m_h, stored as kPartialBytes[G] bytes (uint32, or one byte for G = 1: then
X is acc_h mod m_h). `moduli` is a HOST array of groups*G values in [2, 256], each
group's pairwise coprime (copied into the launch). Kernels of one-modulus groups run
every group in one batched launch; the others launch once per group, in order.
Requirements: group_size = the variant's G; 1 <= groups, groups*G <= kMaxModuli; k_pad a
positive multiple of tile_k; lda, ldb >= groups*G*k_pad and multiples of 16; n, ldx and
(for groups > 1) stride_x multiples of 16 / (bytes of a partial), ldx >= n,
stride_x >= (m-1)*ldx + n; A, B, X 16-byte aligned. {_STATUS_DOC}""",
               host=("moduli",)),
        entry("workspace_size", "size_t", "int m, int n, int k_pad, int group_size, int groups",
               "Bytes of workspace P_run needs for a packed problem of these sizes."),
        *identity_entries(),
    ),
)

_VECTOR_SET = """\
A vector set (x, nvec, k, vs, es) is nvec vectors of length k, element l of vector v at
x[v*vs + l*es]: the rows of op(A) (v = i) or the columns of op(B) (v = j)."""
_INNER = """\
inner: null, or k device int32 inner shifts s_l (the contract's equilibration): entry l
of every vector counts as x_vl 2^s_l, folded into each exponent (nothing is rounded)."""
_INT8_PLANES = """\
Int8 outputs are (rows_pad x k_pad) row-major per plane; k_pad is a multiple of
kKAlignment and >= k, rows_pad >= nvec; the padding (l >= k or v >= nvec) is written as 0."""
_CRT_TAIL = """\
consts: a HOST CrtConstants, copied into the launch. cin is read only when beta != 0.
nf (a HOST NonfiniteSource, copied into the launch; null when both operands are finite):
an entry of a flagged row or column gets the NaN/Inf pattern of its k terms
(reference.split_nonfinite), which, when non-zero, replaces X. Then
out[i*out_rs + j*out_cs] = alpha * 2^-(mu_i + nu_j) X + beta cin[i*cin_rs + j*cin_cs].
alpha == 0 and k == 0 are the caller's business (reference.gemm returns early there;
this kernel would compute alpha * X, e.g. 0 * Inf = NaN)."""

STAGES = LibraryAbi(
    kind="stages",
    version=13,  # 2: the CRT functions take a NonfiniteSource; 3: the accuracy contract; 4: complex;
    # 5: Karatsuba; 6: crt_unscale_karatsuba takes k_chunk; 7: residues_karatsuba replaces karatsuba_split;
    # 8: inner_stats writes the scan's first pass (vec_exps, vec_nonfinite), scan takes `given`;
    # 9: the accurate shifts' workspace is m + n int32; 10: scan_coarse;
    # 11: the accurate shifts' workspace is shift_work_words(m, n) int32 (one read of the bound);
    # 12: the one read takes n % 4 != 0, its partials' rows ceil(n / 4) * 4 apart (shift_work_words);
    # 13: the certificate writes 14 doubles (RA and RB after the 12 sums)
    doc="""\
The stage kernels of the staged pipeline (templates/stages.cu.j2). Each reproduces a
function of ozaki_cutlass/reference.py bit for bit. Sizes of 0 launch nothing and
return 0.""",
    kernel_constants=True,
    structs=(CRT_CONSTANTS, NONFINITE_SOURCE),
    entries=(
        entry("scan", "int",
               "const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es, const int32_t* inner, int pb, "
               "int32_t* exps, int32_t* fast_shift, int32_t* nonfinite_count, int32_t* logq, int64_t* abs_sum, "
               "const int32_t* given, cudaStream_t stream",
               f"""\
{_VECTOR_SET} {_INNER}
Per vector: nonfinite_count[v] = the number of NaN/Inf entries (treated as 0 below);
exps[v] = E, the largest frexp exponent of the non-zero x 2^s (0 for an all-zero vector);
where not null: fast_shift[v] = reference.fast_shifts with bound exponent pb, logq[v] and
abs_sum[v] = reference.fast_terms (ceil(log2 Q) or -1, and S1). given: null, or a device
flag (P_equilibrate's applied); where it holds 0, inner is taken as all 0 and exps and
nonfinite_count as already holding P_inner_stats' vec_exps and vec_nonfinite of these
vectors (kNoExponent becomes 0 in exps): x is then read once, not twice."""),
        entry("scan_coarse", "int",
               "const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es, const int32_t* inner, int pb, "
               "int32_t* exps, int32_t* fast_shift, int32_t* nonfinite_count, int8_t* out, int64_t rows_pad, "
               "int64_t k_pad, cudaStream_t stream",
               f"""\
scan (no logq, abs_sum or given), then coarse of the exps it wrote, in one entry: where the
elements of a vector are contiguous (es the smaller stride) and inner is null, the scan's
second pass writes the coarse magnitudes: x is read twice instead of three times. Same
outputs, same bits.
{_INT8_PLANES}"""),
        entry("coarse", "int",
               "const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es, const int32_t* inner, "
               "const int32_t* exps, int8_t* out, int64_t rows_pad, int64_t k_pad, cudaStream_t stream",
               f"""\
out[v*k_pad + l] = ceil(2^(kCoarseBits - E_v) |x_vl 2^s_l|) (1 if that is 0 for x != 0; 0
for NaN/Inf): reference.coarse_magnitudes. {_INNER} {_INT8_PLANES}"""),
        entry("accumulate_i64", "int",
               "const int32_t* part, int64_t rows, int64_t cols, int64_t ld_part, int64_t* acc, int first, "
               "cudaStream_t stream",
               "acc[i*cols + j] = (first ? 0 : acc[i*cols + j]) + part[i*ld_part + j]: the coarse bound "
               "summed over k chunks."),
        entry("accurate_shifts", "int",
               "const int64_t* g, int64_t m, int64_t n, const int32_t* exps_a, const int32_t* exps_b, "
               "const int32_t* mu_fast, const int32_t* nu_fast, int pb, int32_t* mu, int32_t* nu, "
               "int32_t* workspace, cudaStream_t stream",
               "reference.accurate_shifts: g is the m x n row-major coarse bound G; workspace holds "
               "shift_work_words(m, n) int32 (templates/constants.py; 16-byte aligned for the one-read kernel)."),
        entry("accurate_shifts_i32", "int",
               "const int32_t* g, int64_t ldg, int64_t m, int64_t n, const int32_t* exps_a, "
               "const int32_t* exps_b, const int32_t* mu_fast, const int32_t* nu_fast, int pb, int32_t* mu, "
               "int32_t* nu, int32_t* workspace, cudaStream_t stream",
               "P_accurate_shifts from an int32 G of leading dimension ldg (one k chunk: the coarse GEMM's "
               "output read in place)."),
        entry("inner_stats", "int",
               "const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es, double* partial, "
               "int32_t* partial_exp, int32_t* exps, double* sums, int32_t* vec_exps, int32_t* vec_nonfinite, "
               "cudaStream_t stream",
               """\
numerics.contract.inner_stats over the vectors of a vector set, per l < k: exps[l] = E_l
(the largest frexp exponent of the finite non-zero x_vl, kNoExponent if none) and sums[l]
(the fixed-order sum of |x_vl| 2^-E_l). partial and partial_exp: workspace of
ceil(nvec / kInnerChunk) * k entries each. vec_exps and vec_nonfinite (both null, or both
nvec int32), from the same read: per vector, the largest frexp exponent of its finite
non-zero entries (kNoExponent if none) and its count of NaN/Inf, i.e. P_scan's first pass
without inner shifts (see P_scan's given)."""),
        entry("equilibrate", "int",
               "const int32_t* exps_a, const int32_t* exps_b, int64_t k, int32_t* shift_a, int32_t* shift_b, "
               "int32_t* applied, cudaStream_t stream",
               """\
numerics.contract.equilibration from P_inner_stats' exponents of op(A)'s columns and op(B)'s
rows: shift_a[l] = -e_l, shift_b[l] = e_l (all 0 when not applied); applied[0] = 1 or 0."""),
        entry("certificate", "int",
               "const int32_t* exps_a, const int32_t* logq_a, const int64_t* s1_a, int64_t m, "
               "const int32_t* exps_b, const int32_t* logq_b, const int64_t* s1_b, int64_t n, "
               "const int32_t* inner_exp_a, const double* inner_a, const int32_t* inner_exp_b, "
               "const double* inner_b, int64_t k, const int32_t* applied, double* out, cudaStream_t stream",
               """\
numerics.contract.certificate: out[0..13] = x2[0], x2[1], xz[0], xz[1], z2, w2[0], w2[1],
wy[0], wy[1], y2, l1, applied (0.0 or 1.0, from applied[0]; applied may be null), RA, RB
(the largest exponents of the live rows of op(A) and columns of op(B)), from the
scan's exps, logq, abs_sum of op(A)'s rows and op(B)'s columns and P_inner_stats' exps and
sums of op(A)'s columns and op(B)'s rows."""),
        entry("fast_shifts", "int",
               "const int32_t* exps, const int32_t* logq, int64_t nvec, int64_t k, int pb, int32_t* shifts, "
               "cudaStream_t stream",
               "reference.shifts_from_log: the fast shifts for bound exponent pb from the scan's exps and logq."),
        entry("pack", "int",
               "const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es, double* out, "
               "cudaStream_t stream",
               "out[v*k + l] = x[v*vs + l*es]: the vector set as contiguous vectors (vs = k, es = 1)."),
        entry("residues", "int",
               "const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es, const int32_t* inner, "
               "const int32_t* shifts, int nmod, const int32_t* moduli, int8_t* out, int64_t rows_pad, "
               "int64_t k_pad, cudaStream_t stream",
               f"""\
moduli: nmod (1..kMaxModuli) device int32 values in [2, 256]. For modulus g:
out[g*rows_pad*k_pad + v*k_pad + l] = trunc(2^(shift_v + s_l) x_vl) mods m_g, symmetric, int8
(reference.scale_to_integers + reference.residues). {_INT8_PLANES} The same as
P_residues_strided with row_stride = k_pad, plane_stride = rows_pad*k_pad."""),
        entry("residues_strided", "int",
               "const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es, const int32_t* inner, "
               "const int32_t* shifts, int nmod, const int32_t* moduli, int8_t* out, int64_t rows_pad, "
               "int64_t k_pad, int64_t row_stride, int64_t plane_stride, cudaStream_t stream",
               """\
P_residues at out[g*plane_stride + v*row_stride + l], l < k_pad, v < rows_pad (padding 0
in every plane). Accepted: row_stride >= k_pad and plane_stride >= rows_pad*row_stride
(planes apart), or plane_stride >= k_pad and row_stride >= nmod*plane_stride (a row's
moduli side by side, e.g. plane_stride = k_pad, row_stride = nmod*k_pad: the fused GEMM's
layout); anything else is refused. 16-byte stores when out and both strides are
16-aligned."""),
        entry("residues_karatsuba", "int",
               "const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es, const int32_t* shifts, "
               "int64_t shift_step, int nmod, const int32_t* moduli, int8_t* out, int64_t rows_pad, int64_t k_pad, "
               "int im_first, int64_t plane, int64_t part, cudaStream_t stream",
               """\
P_residues of a realified complex operand (vector v's entries 2l and 2l + 1 are Re and Im
of complex entry l, Im first where im_first; vector v's shift at shifts[v*shift_step]),
written as Karatsuba's parts: out[q*part + g*plane + v*k_pad + l] for v < rows_pad,
l < k_pad is, for q = 0, 1, 2, the residue of Re, of Im, and their sum mods m_g
(symmetric int8); 0 where v >= nvec or 2l >= k. k_pad a multiple of 16 with 2*k_pad >= k;
out, plane and part 16-byte aligned, plane >= rows_pad*k_pad, part >= nmod*plane."""),
        entry("crt_unscale", "int",
               "const int32_t* c, int nmod, int64_t m, int64_t n, int64_t ldc, int64_t batch_stride_c, "
               "int nchunks, int64_t chunk_stride, const ozaki::CrtConstants* consts, const int32_t* mu, "
               "const int32_t* nu, double alpha, double beta, const double* cin, int64_t cin_rs, "
               "int64_t cin_cs, double* out, int64_t out_rs, int64_t out_cs, "
               "const ozaki::NonfiniteSource* nf, cudaStream_t stream",
               f"""\
c: the raw int32 INT8-GEMM outputs, element (ch, g, i, j) at
c[ch*chunk_stride + g*batch_stride_c + i*ldc + j] (c 4-byte aligned, ldc >= n, strides
>= 1 where used); r_g = (sum over chunks of c) mod m_g, then X = the symmetric CRT
reconstruction (reference.modular_products' final mod m_g + crt_reconstruct; nmod must
equal consts->count). {_CRT_TAIL}""",
               host=("consts", "nf")),
        entry("combine_unscale", "int",
               "const void* x, int ngroups, const int32_t* group_sizes, int64_t m, int64_t n, int64_t ldx, "
               "int64_t group_stride, const ozaki::CrtConstants* consts, const int32_t* mu, "
               "const int32_t* nu, double alpha, double beta, const double* cin, int64_t cin_rs, "
               "int64_t cin_cs, double* out, int64_t out_rs, int64_t out_cs, "
               "const ozaki::NonfiniteSource* nf, cudaStream_t stream",
               f"""\
The fused pipeline's end: group gr = the next group_sizes[gr] moduli of consts (a HOST
array, sizes >= 1 summing to consts->count, each group's product < 2^32). Group gr's
plane starts at byte sum_(h < gr) kPartialBytes[size_h] * group_stride of x and holds
X_ij mod M_gr at element i*ldx + j, as a uint32 (any value of that class works) or, for a
group of one modulus, a byte (a uint32 plane must start 4-byte aligned). r_g = x mod m_g,
then exactly P_crt_unscale's reconstruction. {_CRT_TAIL}""",
               host=("group_sizes", "consts", "nf")),
        entry("realify", "int",
               "const double* x, int64_t rows, int64_t cols, int64_t rs, int64_t cs, int conj, int right, "
               "double* out, cudaStream_t stream",
               """\
numerics.zgemm.realify_left (right == 0) or realify_right (right == 1) of the complex128
matrix op(X)(i, j) = x[2(i*rs + j*cs)] + i x[2(i*rs + j*cs) + 1] (strides in complex
elements), its imaginary part negated when conj != 0: out is row-major, rows x 2 cols
(left) or 2 rows x 2 cols (right)."""),
        entry("complex_axpby", "int",
               "const double* t, int64_t m, int64_t n, int64_t ldt, double alpha_re, double alpha_im, "
               "double beta_re, double beta_im, const double* cin, int64_t cin_rs, int64_t cin_cs, "
               "double* out, int64_t out_rs, int64_t out_cs, cudaStream_t stream",
               """\
numerics.zgemm.complex_axpby: out = alpha T + beta cin in complex128, every real operation
rounded on its own in the NumPy twin's order. t: m x n complex, element (i, j) at
t[2(i*ldt + j)] (read only when alpha != 0); cin and out strided in complex elements (cin
read only when beta != 0)."""),
        entry("crt_unscale_karatsuba", "int",
               "const int32_t* c, int nmod, int64_t m, int64_t n, int64_t ldc, int64_t plane, int64_t part, "
               "int nchunks, int64_t k_chunk, int64_t chunk_stride, const ozaki::CrtConstants* consts, "
               "const int32_t* mu, "
               "const int32_t* nu, double alpha, double beta, const double* cin, int64_t cin_rs, "
               "int64_t cin_cs, double* out, int64_t out_rs, int64_t out_cs, "
               "const ozaki::NonfiniteSource* nf, cudaStream_t stream",
               f"""\
P_crt_unscale of an m x n realified output (n even) from the three int32 products per
modulus P_q (q = 0, 1, 2: Ar Br, Ai Bi, (Ar + Ai)(Br + Bi)) at
c[ch*chunk_stride + q*part + g*plane + i*ldc + jc] (jc < n/2): the residue of entry
(i, 2jc) is P_0 - P_1, of (i, 2jc + 1) P_2 - P_0 - P_1, mod m_g (summed over chunks), then
exactly P_crt_unscale's reconstruction. k_chunk: the most terms any chunk's products sum
(the longest chunk's k); at most 43690 lets each difference be formed in int32. {_CRT_TAIL}""",
               host=("consts", "nf")),
        entry("crt_constants_size", "size_t", "",
               "sizeof(ozaki::CrtConstants), for checking the ctypes twin."),
        *identity_entries(),
    ),
)

PROLOGUE = LibraryAbi(
    kind="prologue",
    version=1,
    doc="The tile-local prologue prototype (templates/prologue_gemm.cu.j2).",
    kernel_constants=True,
    entries=(
        entry("run", "int",
               "int64_t m, int64_t n, int64_t n_out, int64_t k, int64_t k_begin, int64_t k_len, int nmod, "
               "const int32_t* moduli, const double* a, int64_t a_vs, int64_t a_es, const int32_t* mu, "
               "const double* b, int64_t b_vs, int64_t b_es, const int32_t* nu, int32_t* c, int64_t ldc, "
               "int64_t plane_stride, cudaStream_t stream",
               f"""\
moduli: a HOST array of nmod (1..kMaxModuli) values in [2, 256], copied into the launch.
a(i, l) = a[i*a_vs + l*a_es] (i < m), b(j, l) = b[j*b_vs + l*b_es] (j < n); entries
outside (i >= m, j >= n, l >= k) are 0. For g < nmod, i < m, j < n_out:
  c[g*plane_stride + i*ldc + j] = sum over l in [k_begin, k_begin + k_len) of
    (trunc(2^mu_i a(i,l)) mods m_g) * (trunc(2^nu_j b(j,l)) mods m_g)
in int32 with wrap-around, exact: k_len < kExactKLimit is required. {_STATUS_DOC}""",
               host=("moduli",)),
        *identity_entries(),
    ),
)

#: Every library kind's ABI, by kind.
LIBRARIES: dict[str, LibraryAbi] = {a.kind: a for a in (INT8_GEMM, GROUP_GEMM, STAGES, PROLOGUE)}
