"""The numeric constants that the kernels and the runtime share: their one home.

They live here, with the templates and headers of the kernels that need them, in a module
of plain data that imports nothing: the generator (which must not import the runtime)
renders them into every translation unit that needs them (`cxx_constants()`, placed by
each template's ABI prelude before our headers, generator/abi.py), and the runtime
(`ozaki_cutlass.numerics.moduli`, the NumPy reference) imports them from here without
loading the generator. No header spells a number that Python also holds. Rendered sources
are part of the artifact cache key: changing a value here rebuilds exactly the libraries
that see it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "MODULI_TABLE",
    "MAX_MODULI",
    "LIMB_BITS",
    "LIMBS_OF_COUNT",
    "MAX_LIMBS",
    "EXACT_K_LIMIT",
    "K_CHUNK",
    "K_ALIGNMENT",
    "N_ALIGNMENT",
    "FUSED_N_ALIGNMENT",
    "padded_k",
    "padded_n",
    "k_chunks",
    "COARSE_BITS",
    "FAST_BOUND_BITS",
    "NO_CONSTRAINT",
    "MAX_GROUP_SIZE",
    "INNER_CHUNK",
    "REDUCE_LANES",
    "NO_EXPONENT",
    "EQUILIBRATION_SPREAD",
    "FLUSH_EXPONENT",
    "PROLOGUE_CHUNK",
    "PROLOGUE_HALVES",
    "PROLOGUE_STAGING_PAD",
    "partial_bytes",
    "SHIFT_PARTIALS",
    "shift_work_words",
    "KernelConstant",
    "KERNEL_CONSTANTS",
    "cxx_constants",
]

#: Pairwise coprime moduli, largest first; a count N uses the first N.
MODULI_TABLE: tuple[int, ...] = (
    256, 255, 253, 251, 247, 241, 239, 233, 229, 227,
    223, 217, 211, 199, 197, 193, 191, 181, 179, 173,
)
MAX_MODULI = len(MODULI_TABLE)

#: Bits per limb of the fixed-point CRT weights.
LIMB_BITS = 40

#: Limbs of the product of the first c moduli, by count c: the limbs a CRT call of c
#: moduli takes.
LIMBS_OF_COUNT: tuple[int, ...] = tuple(-(-math.prod(MODULI_TABLE[:c]).bit_length() // LIMB_BITS)
                                        for c in range(MAX_MODULI + 1))

#: Limbs of the largest product of moduli (all of MODULI_TABLE): the fixed size of the
#: CRT kernels' limb arrays.
MAX_LIMBS = LIMBS_OF_COUNT[MAX_MODULI]

#: k must stay below this for one int32 accumulation of int8 products to be exact:
#: |r_a r_b| <= 128 * 128 = 2^14, so k * 2^14 < 2^31.
EXACT_K_LIMIT = 2**17

#: Longest k one int32 accumulation covers exactly: larger k is cut into chunks of this
#: length (a multiple of 128 below EXACT_K_LIMIT, so chunks stay aligned for the INT8
#: kernels).
K_CHUNK = EXACT_K_LIMIT - 128

#: The stage kernels' int8 outputs have rows of k_pad entries, k_pad a multiple of this
#: (16-byte rows for the INT8 GEMMs' vector loads).
K_ALIGNMENT = 16

#: The staged path's int32 products have rows of n_pad entries (and B's residues n_pad
#: rows), n_pad a multiple of this: 16-byte rows of int32 (the INT8 GEMMs' stores, the
#: CRT's 16-byte loads).
N_ALIGNMENT = 4

#: The fused path's one-byte residue planes have rows of n_pad entries, a multiple of
#: this: the combine's 16-byte loads (crt_residue_mma_kernel, kMmaCombineBytes entries).
FUSED_N_ALIGNMENT = 16


def padded_k(k: int) -> int:
    """k_pad: k rounded up to K_ALIGNMENT (the int8 operands' row length)."""
    return -(-k // K_ALIGNMENT) * K_ALIGNMENT


def padded_n(n: int, fused: bool = False) -> int:
    """n_pad: n rounded up to N_ALIGNMENT (the staged int32 products' row length), or to
    FUSED_N_ALIGNMENT on the fused path (its residue planes' row length)."""
    align = FUSED_N_ALIGNMENT if fused else N_ALIGNMENT
    return -(-n // align) * align


def k_chunks(k_pad: int) -> int:
    """The int32 accumulations a product over k_pad is cut into (K_CHUNK long, the last
    one shorter)."""
    return -(-k_pad // K_CHUNK)

#: Coarse magnitudes for the accurate bound are ceil(2^(COARSE_BITS - E) |x|) <= 2^COARSE_BITS.
COARSE_BITS = 6

#: The fast bound quantizes magnitudes to at most this many bits (fewer where k * 2^(2 qb)
#: would not fit an unsigned 63-bit sum).
FAST_BOUND_BITS = 20

#: Slack of an (i, j) pair the coarse bound does not constrain (G_ij = 0): larger than
#: any shift gain, so it never decides a minimum that a constrained pair takes part in.
NO_CONSTRAINT = 1 << 30

#: Moduli one fused kernel folds: the product of 4 moduli <= 256 fits 32 bits.
MAX_GROUP_SIZE = 4

# --- the accuracy contract (ozaki_cutlass.numerics.contract, docs/numerics.md) ----------
#: The inner sums sum_v |x(v, l)| of the contract run in a fixed order, so that every
#: kernel, layout and the reference give the same bits: in sequence over runs of this
#: many vectors, then in sequence over the runs.
INNER_CHUNK = 128

#: The certificate's sums over vectors and over k: lane t adds the entries t, t + LANES,
#: ... in sequence, then the lanes are added pairwise (t + h into t, h = LANES/2 .. 1).
REDUCE_LANES = 1024

#: The exponent of an inner column with no finite non-zero entry.
NO_EXPONENT = -(1 << 30)

#: The inner sums' combine (stage_contract.cuh) takes one thread per inner index l from
#: this many on (fewer: a block per 32 l sharing the loads); the same adds either way.
INNER_COMBINE_LANES_FROM = 16384

#: The inner equilibration is applied only when its exponents spread over at least this
#: many (well-scaled inputs keep their unequilibrated bits).
EQUILIBRATION_SPREAD = 3

#: The contract's terms scaled below 2^FLUSH_EXPONENT are dropped (they are below 2^-900
#: of the largest), so that every term is a normal double and every scaling is exact.
FLUSH_EXPONENT = -960

#: The tile-local prologue prototype (prologue_gemm.h; its variants' limits in
#: generator/prologue.py): consecutive k entries one thread converts at once, the register
#: prefetch's share of a k-tile (half), and the int32 words of padding per row of the
#: output staging.
PROLOGUE_CHUNK = 4
PROLOGUE_HALVES = 2
PROLOGUE_STAGING_PAD = 4


#: The most blocks of the accurate shifts' one-read kernel (stage_shifts.cuh): each writes
#: one row of n column minima into the shifts' workspace, the column gains reduce them.
SHIFT_PARTIALS = 512


def shift_work_words(m: int, n: int) -> int:
    """int32 words of the accurate shifts' workspace for an m x n bound: the row keys and
    column minima of the two-pass kernels (m + n), or the one-read kernel's partial
    column minima (SHIFT_PARTIALS rows of n rounded up to 4), whichever is larger."""
    return max(m + n, SHIFT_PARTIALS * -(-n // 4) * 4)


def partial_bytes(group_size: int) -> int:
    """Bytes of one stored group partial X mod M: 1 for a group of one modulus (M <= 256),
    else 4 (M < 2^32). The fused kernels store partials so, the combine kernel reads them
    so (rendered as kPartialBytes)."""
    return 1 if group_size == 1 else 4


# --- rendering for the kernels ----------------------------------------------------------
@dataclass(frozen=True, slots=True)
class KernelConstant:
    """One constant as the kernels see it: `inline constexpr <cxx_type> <cxx_name>` in
    namespace ozaki, its value computed from this module."""

    cxx_name: str
    cxx_type: str
    value: int | tuple[int, ...]
    doc: str

    def definition(self) -> str:
        if isinstance(self.value, int):
            return f"inline constexpr {self.cxx_type} {self.cxx_name} = {self.value};"
        items = ", ".join(str(v) for v in self.value)
        return f"inline constexpr {self.cxx_type} {self.cxx_name}[{len(self.value)}] = {{{items}}};"


KERNEL_CONSTANTS: tuple[KernelConstant, ...] = (
    KernelConstant("kMaxModuli", "int", MAX_MODULI, "moduli one CRT call takes (MAX_MODULI)"),
    KernelConstant("kLimbBits", "int", LIMB_BITS, "bits per CRT weight limb (LIMB_BITS)"),
    KernelConstant("kMaxLimbs", "int", MAX_LIMBS, "limbs of the largest product (MAX_LIMBS)"),
    KernelConstant("kLimbsOfCount", "int", LIMBS_OF_COUNT,
                   "limbs of the product of the first c moduli, by count c (LIMBS_OF_COUNT)"),
    KernelConstant("kExactKLimit", "int64_t", EXACT_K_LIMIT,
                   "k of one exact int32 sum of int8 products is below this (EXACT_K_LIMIT)"),
    KernelConstant("kKAlignment", "int64_t", K_ALIGNMENT,
                   "k_pad of the int8 outputs is a multiple of this (K_ALIGNMENT)"),
    KernelConstant("kCoarseBits", "int", COARSE_BITS, "coarse magnitudes are <= 2^kCoarseBits (COARSE_BITS)"),
    KernelConstant("kFastBoundBits", "int", FAST_BOUND_BITS,
                   "the fast bound's quantization bits are at most this (FAST_BOUND_BITS)"),
    KernelConstant("kNoConstraint", "int64_t", NO_CONSTRAINT,
                   "slack of an unconstrained (i, j) pair (NO_CONSTRAINT)"),
    KernelConstant("kMaxGroupSize", "int", MAX_GROUP_SIZE, "moduli one fused kernel folds (MAX_GROUP_SIZE)"),
    KernelConstant("kInnerChunk", "int", INNER_CHUNK, "vectors per run of an inner sum (INNER_CHUNK)"),
    KernelConstant("kCombineLanesFrom", "int64_t", INNER_COMBINE_LANES_FROM,
                   "k from which the inner combine takes one thread per l (INNER_COMBINE_LANES_FROM)"),
    KernelConstant("kReduceLanes", "int", REDUCE_LANES, "lanes of the certificate's sums (REDUCE_LANES)"),
    KernelConstant("kNoExponent", "int", NO_EXPONENT, "exponent of an all-zero inner column (NO_EXPONENT)"),
    KernelConstant("kEquilibrationSpread", "int", EQUILIBRATION_SPREAD,
                   "least spread of applied equilibration exponents (EQUILIBRATION_SPREAD)"),
    KernelConstant("kFlushExponent", "int", FLUSH_EXPONENT,
                   "contract terms below 2^kFlushExponent are dropped (FLUSH_EXPONENT)"),
    KernelConstant("kPrologueChunk", "int", PROLOGUE_CHUNK,
                   "k entries one prologue thread converts at once (PROLOGUE_CHUNK)"),
    KernelConstant("kPrologueHalves", "int", PROLOGUE_HALVES,
                   "the prologue's register prefetch holds 1/this of a k-tile (PROLOGUE_HALVES)"),
    KernelConstant("kPrologueStagingPad", "int", PROLOGUE_STAGING_PAD,
                   "int32 words of padding per row of the prologue's output staging (PROLOGUE_STAGING_PAD)"),
    KernelConstant("kShiftPartials", "int", SHIFT_PARTIALS,
                   "most blocks (rows of partial column minima) of the one-read shifts kernel (SHIFT_PARTIALS)"),
    KernelConstant("kPartialBytes", "int",
                   (0, *(partial_bytes(g) for g in range(1, MAX_GROUP_SIZE + 1))),
                   "bytes of a stored group partial, by group size (partial_bytes)"),
)


def cxx_constants() -> str:
    """The C++ definitions of KERNEL_CONSTANTS (namespace ozaki), for a template to place
    before our headers; `OZAKI_KERNEL_CONSTANTS` tells ozaki/constants.h they are there."""
    lines = [
        "// The kernels' numeric constants, rendered from ozaki_cutlass.templates.constants.",
        "#define OZAKI_KERNEL_CONSTANTS 1",
        "namespace ozaki {",
    ]
    for constant in KERNEL_CONSTANTS:
        lines.append(f"// {constant.doc}")
        lines.append(constant.definition())
    lines.append("}  // namespace ozaki")
    return "\n".join(lines) + "\n"
