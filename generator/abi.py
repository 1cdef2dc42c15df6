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

`P` below is a library's symbol prefix, "ozaki_" + variant name. Sizes and strides are in
elements. A pointer is a device pointer (ctypes: c_void_p, an integer handle) unless the
entry names it a host pointer (a ctypes array or struct, read during the call). Every
entry that returns a status returns one of STATUS_* (P_last_error() then holds the
message, one per thread); nothing allocates or synchronizes, everything runs on `stream`.
"""

from __future__ import annotations

import ctypes
import functools
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..templates.constants import MAX_LIMBS, MAX_MODULI, cxx_constants

__all__ = [
    "STATUS_OK",
    "STATUS_UNSUPPORTED",
    "STATUS_CUDA_ERROR",
    "Param",
    "Entry",
    "Field",
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

#: The status every entry that launches work returns.
STATUS_OK = 0
#: Bad arguments or a problem the kernel does not handle, found before any CUDA call.
STATUS_UNSUPPORTED = 1
#: A CUDA (or CUTLASS) error at initialize or launch.
STATUS_CUDA_ERROR = 2

_EXPORT = "OZAKI_EXPORT"
_LINE = 100  # prototypes wrap before this column

# C spelling -> ctypes, for values and for what a host pointer points at.
_SCALARS: dict[str, type] = {
    "int": ctypes.c_int,
    "int32_t": ctypes.c_int32,
    "uint32_t": ctypes.c_uint32,
    "int64_t": ctypes.c_int64,
    "size_t": ctypes.c_size_t,
    "double": ctypes.c_double,
    "cudaStream_t": ctypes.c_void_p,  # a handle, passed as an integer
}
_RETURNS: dict[str, type] = {
    "int": ctypes.c_int,
    "size_t": ctypes.c_size_t,
    "const char*": ctypes.c_char_p,
}


# --- structs ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Field:
    ctype: str  # C spelling: a scalar of _SCALARS, or a pointer (a device address)
    name: str
    dims: tuple[int, ...] = ()  # array extents, outermost first
    doc: str = ""

    @property
    def ctypes_type(self) -> type:
        base = ctypes.c_void_p if self.ctype.endswith("*") else _SCALARS[self.ctype]
        for extent in reversed(self.dims):
            base = base * extent
        return base


@dataclass(frozen=True, slots=True)
class Struct:
    """A struct passed by host pointer: its C++ definition (rendered, with its layout
    asserted) and its ctypes twin come from these fields."""

    name: str  # in namespace ozaki
    fields: tuple[Field, ...]
    doc: str

    @property
    def ctypes_type(self) -> type[ctypes.Structure]:
        """The ctypes Structure (one class per struct and process)."""
        return _structure(self)

    def cxx_definition(self) -> str:
        cls = self.ctypes_type
        lines = _comment(self.doc)
        lines.append(f"struct {self.name} {{")
        for f in self.fields:
            extents = "".join(f"[{d}]" for d in f.dims)
            suffix = f"  // {f.doc}" if f.doc else ""
            lines.append(f"  {f.ctype} {f.name}{extents};{suffix}")
        lines.append("};")
        what = '"the layout of its ctypes twin"'
        lines.append(f"static_assert(std::is_standard_layout<{self.name}>::value, {what});")
        lines.append(f"static_assert(std::is_trivially_copyable<{self.name}>::value, {what});")
        lines.append(f"static_assert(sizeof({self.name}) == {ctypes.sizeof(cls)}, {what});")
        for f in self.fields:
            offset = getattr(cls, f.name).offset
            lines.append(f"static_assert(offsetof({self.name}, {f.name}) == {offset}, {what});")
        return "\n".join(lines)


@functools.cache
def _structure(struct: Struct) -> type[ctypes.Structure]:
    return type(struct.name, (ctypes.Structure,), {
        "_fields_": [(f.name, f.ctypes_type) for f in struct.fields],
        "__doc__": struct.doc,
    })


CRT_CONSTANTS = Struct("CrtConstants", (
    Field("int32_t", "count", doc="N, 1..kMaxModuli (must equal the call's nmod)"),
    Field("int32_t", "limbs", doc="L, 1..kMaxLimbs"),
    Field("int32_t", "moduli", (MAX_MODULI,), doc="m_g"),
    Field("double", "weight_limbs", (MAX_MODULI, MAX_LIMBS),
          doc="d_gj at [g][j]: a FIXED row stride (not as_kernel_data's flat g*L + j)"),
    Field("double", "product_limbs", (MAX_LIMBS,), doc="p_j"),
    Field("double", "limb_scales", (MAX_LIMBS,), doc="2^(LIMB_BITS (L-1-j))"),
    Field("double", "quotient_factors", (MAX_LIMBS,), doc="f_j"),
), doc="""\
The CRT data one call of P_crt_unscale or P_combine_unscale needs (a HOST struct, copied
into the launch), filled from ozaki_cutlass.numerics.crt_constants(N); unused entries
should be 0 and are never read.""")

NONFINITE_SOURCE = Struct("NonfiniteSource", (
    Field("const double*", "a"),
    Field("int64_t", "a_rs"),
    Field("int64_t", "a_cs"),
    Field("const double*", "b"),
    Field("int64_t", "b_rs"),
    Field("int64_t", "b_cs"),
    Field("int64_t", "k"),
    Field("const int32_t*", "row_flags"),
    Field("const int32_t*", "col_flags"),
), doc="""\
Where P_crt_unscale and P_combine_unscale find the NaN/Inf pattern (a HOST struct, copied
into the launch; a null pointer for none): op(A) is m x k with a(i, l) = a[i*a_rs +
l*a_cs], op(B) is k x n with b(l, j) = b[l*b_rs + j*b_cs], row_flags / col_flags the
non-finite counts of op(A)'s rows and op(B)'s columns (P_scan's nonfinite_count). An
entry whose row and column are both unflagged has no non-finite term; any other is
classified over its k terms (reference.split_nonfinite). ctypes:
NonfiniteSource(a, a_rs, a_cs, b, b_rs, b_cs, k, row_flags, col_flags).""")

_STRUCTS: dict[str, Struct] = {s.name: s for s in (CRT_CONSTANTS, NONFINITE_SOURCE)}


# --- entry points ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Param:
    ctype: str  # C spelling, e.g. "const int8_t*", "const ozaki::CrtConstants*"
    name: str
    host: bool = False  # a pointer to host memory (a ctypes array or struct)

    @property
    def pointer(self) -> bool:
        return self.ctype.endswith("*")

    @property
    def pointee(self) -> str:
        """What a pointer points at, without const or a namespace: "int32_t", "CrtConstants"."""
        base = self.ctype.removesuffix("*").strip().removeprefix("const ").strip()
        return base.removeprefix("ozaki::")

    @property
    def ctypes_type(self) -> type:
        if not self.pointer:
            return _SCALARS[self.ctype]
        if self.pointee in _STRUCTS:
            if not self.host:
                raise ValueError(f"{self.name}: a struct is passed by host pointer")
            return ctypes.POINTER(_STRUCTS[self.pointee].ctypes_type)
        if self.host:
            return ctypes.POINTER(_SCALARS[self.pointee])
        return ctypes.c_void_p

    def declaration(self) -> str:
        return f"{self.ctype} {self.name}"


@dataclass(frozen=True, slots=True)
class Entry:
    """One exported function, `<symbol>_<name>`."""

    name: str
    returns: str  # C spelling, a key of _RETURNS
    params: tuple[Param, ...]
    doc: str = ""

    @property
    def restype(self) -> type:
        return _RETURNS[self.returns]

    @property
    def argtypes(self) -> list[type]:
        return [p.ctypes_type for p in self.params]

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"{self.name} has no parameter {name!r}")

    def host_array(self, name: str, values: Iterable[int]) -> ctypes.Array:
        """`values` as the ctypes array that host pointer parameter `name` takes."""
        p = self.param(name)
        if not (p.pointer and p.host and p.pointee in _SCALARS):
            raise TypeError(f"{self.name}.{name} is not a host array parameter")
        items = [int(v) for v in values]
        return (_SCALARS[p.pointee] * len(items))(*items)

    def prototype(self, symbol: str) -> str:
        """Its contract as a comment, then `OZAKI_EXPORT <signature>`, wrapped to leave room
        for the " {" that opens the body before column _LINE."""
        pieces = [p.declaration() + "," for p in self.params] or ["void,"]
        pieces[-1] = pieces[-1][:-1] + ")"
        lines, line = [], f"{_EXPORT} {self.returns} {symbol}_{self.name}("
        fresh = True  # nothing on `line` after its opening text yet
        for piece in pieces:
            if not fresh and len(line) + 1 + len(piece) > _LINE - 2:
                lines.append(line)
                line, fresh = "    ", True
            line += piece if fresh else " " + piece
            fresh = False
        lines.append(line)
        return "\n".join(_comment(self.doc) + lines)


def _comment(text: str) -> list[str]:
    """`text` as // lines; a line too long (pieces joined in the spec) is wrapped."""
    lines = []
    for line in textwrap.dedent(text).strip().splitlines():
        indent = line[:len(line) - len(line.lstrip())]
        lines += textwrap.wrap(line, _LINE - 8, subsequent_indent=indent) or [""]
    return [f"// {line}".rstrip() for line in lines]


def _params(spelled: str, host: Sequence[str] = ()) -> tuple[Param, ...]:
    """Parameters from their C spelling, "const double* x, int64_t nvec"; `host` names the
    host pointers."""
    params = []
    for item in (s.strip() for s in spelled.split(",") if s.strip()):
        ctype, _, name = item.rpartition(" ")
        params.append(Param(ctype.strip(), name, host=name in host))
    unknown = set(host) - {p.name for p in params}
    if unknown:
        raise ValueError(f"host pointers {sorted(unknown)} are not parameters of {spelled!r}")
    return tuple(params)


def _entry(name: str, returns: str, params: str, doc: str = "", *, host: Sequence[str] = ()) -> Entry:
    return Entry(name=name, returns=returns, params=_params(params, host), doc=doc)


def _identity() -> tuple[Entry, ...]:
    """The entries every library has."""
    return (
        _entry("name", "const char*", "", "The variant name (the runtime checks it)."),
        _entry("abi_version", "int", "", "This ABI's version (the runtime refuses another)."),
        _entry("last_error", "const char*", "", "The message of this thread's last failed call."),
    )


# --- the libraries --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LibraryAbi:
    """The C ABI of one kind of generated library."""

    kind: str
    version: int
    entries: tuple[Entry, ...]
    doc: str
    kernel_constants: bool = False  # the prelude defines templates/constants.py's constants
    structs: tuple[Struct, ...] = ()

    def entry(self, name: str) -> Entry:
        for e in self.entries:
            if e.name == name:
                return e
        raise KeyError(f"the {self.kind} ABI has no entry {name!r}")

    def prelude(self) -> str:
        """C++ for a translation unit to place before our headers: the export macro, the
        status codes, the kernel constants where this kind needs them, the ABI structs."""
        parts = [
            f"// The C ABI prelude of a {self.kind} library (version {self.version}), rendered\n"
            "// from ozaki_cutlass.generator.abi.\n"
            "#include <cstddef>\n#include <cstdint>\n#include <type_traits>\n\n"
            "#define OZAKI_ABI_RENDERED 1\n"
            f'#define {_EXPORT} extern "C" __attribute__((visibility("default")))\n'
            "namespace ozaki {\n"
            f"inline constexpr int kStatusOk = {STATUS_OK};\n"
            f"inline constexpr int kStatusUnsupported = {STATUS_UNSUPPORTED};\n"
            f"inline constexpr int kStatusCudaError = {STATUS_CUDA_ERROR};\n"
            "}  // namespace ozaki\n"
        ]
        if self.kernel_constants:
            parts.append(cxx_constants())
        if self.structs:
            parts.append("namespace ozaki {\n\n"
                         + "\n\n".join(s.cxx_definition() for s in self.structs)
                         + "\n\n}  // namespace ozaki\n")
        return "\n".join(parts)

    def bound(self, symbol: str) -> BoundAbi:
        return BoundAbi(self, symbol)


@dataclass(frozen=True, slots=True)
class BoundAbi:
    """A LibraryAbi with its symbol prefix: what a template sees as `abi`."""

    spec: LibraryAbi
    symbol: str

    @property
    def version(self) -> int:
        return self.spec.version

    @property
    def prelude(self) -> str:
        return self.spec.prelude()

    def prototype(self, name: str) -> str:
        return self.spec.entry(name).prototype(self.symbol)


_STATUS_DOC = (f"Returns {STATUS_OK} (ok), {STATUS_UNSUPPORTED} (not supported: checked before any "
               f"CUDA call) or {STATUS_CUDA_ERROR} (a CUDA or CUTLASS error at initialize or launch).")

INT8_GEMM = LibraryAbi(
    kind="int8_gemm",
    version=1,
    doc="The batched INT8 GEMM (templates/int8_gemm_sm90.cu.j2, int8_gemm_sm80.cu.j2).",
    entries=(
        _entry("run", "int",
               "int m, int n, int k, int batch, const int8_t* A, int64_t lda, int64_t batch_stride_a, "
               "const int8_t* B, int64_t ldb, int64_t batch_stride_b, int32_t* C, int64_t ldc, "
               "int64_t batch_stride_c, void* workspace, size_t workspace_bytes, cudaStream_t stream",
               f"""\
For b in [0, batch): C[b*sc + i*ldc + j] = sum_l A[b*sa + i*lda + l] * B[b*sb + j*ldb + l]
(sa, sb, sc the batch strides) in int32 with two's-complement wrap-around (no
saturation, no float anywhere). {_STATUS_DOC}"""),
        _entry("workspace_size", "size_t", "int m, int n, int k, int batch",
               "Bytes of workspace P_run needs for a packed problem of these sizes (0 for sizes that are "
               "not a problem)."),
        *_identity(),
    ),
)

GROUP_GEMM = LibraryAbi(
    kind="group_gemm",
    version=2,  # 2: `groups` consecutive groups per call
    doc="The fused modulus-group INT8 GEMM (templates/int8_group_gemm_sm90.cu.j2, _sm80.cu.j2).",
    kernel_constants=True,
    entries=(
        _entry("run", "int",
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
        _entry("workspace_size", "size_t", "int m, int n, int k_pad, int group_size, int groups",
               "Bytes of workspace P_run needs for a packed problem of these sizes."),
        *_identity(),
    ),
)

_VECTOR_SET = """\
A vector set (x, nvec, k, vs, es) is nvec vectors of length k, element l of vector v at
x[v*vs + l*es]: the rows of op(A) (v = i) or the columns of op(B) (v = j)."""
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
    version=2,  # 2: the CRT functions take a NonfiniteSource
    doc="""\
The stage kernels of the staged pipeline (templates/stages.cu.j2). Each reproduces a
function of ozaki_cutlass/reference.py bit for bit. Sizes of 0 launch nothing and
return 0.""",
    kernel_constants=True,
    structs=(CRT_CONSTANTS, NONFINITE_SOURCE),
    entries=(
        _entry("scan", "int",
               "const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es, int pb, int32_t* exps, "
               "int32_t* fast_shift, int32_t* nonfinite_count, cudaStream_t stream",
               f"""\
{_VECTOR_SET}
Per vector: nonfinite_count[v] = the number of NaN/Inf entries (treated as 0 below);
exps[v] = E, the frexp exponent of max |x| (0 for an all-zero vector);
fast_shift[v] = reference.fast_shifts with bound exponent pb."""),
        _entry("coarse", "int",
               "const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es, const int32_t* exps, "
               "int8_t* out, int64_t rows_pad, int64_t k_pad, cudaStream_t stream",
               f"""\
out[v*k_pad + l] = ceil(2^(kCoarseBits - E_v) |x_vl|) (1 if that is 0 for x != 0; 0 for
NaN/Inf): reference.coarse_magnitudes. {_INT8_PLANES}"""),
        _entry("accumulate_i64", "int",
               "const int32_t* part, int64_t rows, int64_t cols, int64_t ld_part, int64_t* acc, int first, "
               "cudaStream_t stream",
               "acc[i*cols + j] = (first ? 0 : acc[i*cols + j]) + part[i*ld_part + j]: the coarse bound "
               "summed over k chunks."),
        _entry("accurate_shifts", "int",
               "const int64_t* g, int64_t m, int64_t n, const int32_t* exps_a, const int32_t* exps_b, "
               "const int32_t* mu_fast, const int32_t* nu_fast, int pb, int32_t* mu, int32_t* nu, "
               "int32_t* workspace_d, cudaStream_t stream",
               "reference.accurate_shifts: g is the m x n row-major coarse bound G; workspace_d holds m "
               "int32 (the row gains)."),
        _entry("accurate_shifts_i32", "int",
               "const int32_t* g, int64_t ldg, int64_t m, int64_t n, const int32_t* exps_a, "
               "const int32_t* exps_b, const int32_t* mu_fast, const int32_t* nu_fast, int pb, int32_t* mu, "
               "int32_t* nu, int32_t* workspace_d, cudaStream_t stream",
               "P_accurate_shifts from an int32 G of leading dimension ldg (one k chunk: the coarse GEMM's "
               "output read in place)."),
        _entry("pack", "int",
               "const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es, double* out, "
               "cudaStream_t stream",
               "out[v*k + l] = x[v*vs + l*es]: the vector set as contiguous vectors (vs = k, es = 1)."),
        _entry("residues", "int",
               "const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es, const int32_t* shifts, "
               "int nmod, const int32_t* moduli, int8_t* out, int64_t rows_pad, int64_t k_pad, "
               "cudaStream_t stream",
               f"""\
moduli: nmod (1..kMaxModuli) device int32 values in [2, 256]. For modulus g:
out[g*rows_pad*k_pad + v*k_pad + l] = trunc(2^shift_v x_vl) mods m_g, symmetric, int8
(reference.scale_to_integers + reference.residues). {_INT8_PLANES} The same as
P_residues_strided with row_stride = k_pad, plane_stride = rows_pad*k_pad."""),
        _entry("residues_strided", "int",
               "const double* x, int64_t nvec, int64_t k, int64_t vs, int64_t es, const int32_t* shifts, "
               "int nmod, const int32_t* moduli, int8_t* out, int64_t rows_pad, int64_t k_pad, "
               "int64_t row_stride, int64_t plane_stride, cudaStream_t stream",
               """\
P_residues at out[g*plane_stride + v*row_stride + l], l < k_pad, v < rows_pad (padding 0
in every plane). Accepted: row_stride >= k_pad and plane_stride >= rows_pad*row_stride
(planes apart), or plane_stride >= k_pad and row_stride >= nmod*plane_stride (a row's
moduli side by side, e.g. plane_stride = k_pad, row_stride = nmod*k_pad: the fused GEMM's
layout); anything else is refused. 16-byte stores when out and both strides are
16-aligned."""),
        _entry("crt_unscale", "int",
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
        _entry("combine_unscale", "int",
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
        _entry("crt_constants_size", "size_t", "",
               "sizeof(ozaki::CrtConstants), for checking the ctypes twin."),
        *_identity(),
    ),
)

PROLOGUE = LibraryAbi(
    kind="prologue",
    version=1,
    doc="The tile-local prologue prototype (templates/prologue_gemm.cu.j2).",
    kernel_constants=True,
    entries=(
        _entry("run", "int",
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
        *_identity(),
    ),
)

#: Every library kind's ABI, by kind.
LIBRARIES: dict[str, LibraryAbi] = {a.kind: a for a in (INT8_GEMM, GROUP_GEMM, STAGES, PROLOGUE)}
