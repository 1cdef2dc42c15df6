"""The vocabulary of our C ABIs: scalar and pointer types, structs shared with the
kernels, entry points (each renders its C prototype and gives its ctypes signature) and
the description of one kind of library (``LibraryAbi``). ``ozaki_cutlass.generator.abi``
writes each library's ABI in it, once.

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
    "entry",
    "identity_entries",
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


def entry(name: str, returns: str, params: str, doc: str = "", *, host: Sequence[str] = ()) -> Entry:
    """An entry from its C spelling: ``params`` as written in C, ``host`` the names of
    its host pointers."""
    return Entry(name=name, returns=returns, params=_params(params, host), doc=doc)


def identity_entries() -> tuple[Entry, ...]:
    """The entries every library has."""
    return (
        entry("name", "const char*", "", "The variant name (the runtime checks it)."),
        entry("abi_version", "int", "", "This ABI's version (the runtime refuses another)."),
        entry("last_error", "const char*", "", "The message of this thread's last failed call."),
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
