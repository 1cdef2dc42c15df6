"""The tile-local prologue prototype (issue 6 item 3) as data: one variant per tile shape.

A `PrologueVariant` is one instantiation of templates/prologue_gemm.cu.j2: a kernel whose
CTAs read float64 tiles of op(A)'s rows and op(B)'s columns, make the int8 residues of
their modulus on chip and run mma.sync m16n8k32 (wrap-around), writing the same int32
planes as the staged path's batched INT8 GEMM. Opt-in only: never in the default build
(`catalog()` does not list it), never chosen by the dispatcher;
`ozaki-cutlass build --arch sm_80 --variants 'prologue_*'` builds it, and
`ozaki_cutlass.gemm(..., path="prologue")` runs it.

sm_80 code (compute_80 PTX included), so it also runs, JIT-compiled, on sm_90.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..templates.constants import PROLOGUE_CHUNK, PROLOGUE_HALVES, PROLOGUE_STAGING_PAD
from .arch import ARCH_TAGS, MAX_REGISTERS_PER_THREAD, REGISTER_FILE, SM80_MMA_SHAPE, SM80_SMEM_BYTES, Arch
from .errors import IllegalVariantError

__all__ = ["PrologueVariant", "prologue_catalog", "default_prologue_variant"]

_MMA_M, _MMA_N, _MMA_K = SM80_MMA_SHAPE
_HALVES = PROLOGUE_HALVES  # the register prefetch holds half a k-tile
_CHUNK = PROLOGUE_CHUNK  # k entries one thread converts at once
_MAX_THREADS = 1024
_OTHER_REGISTERS = 64  # operand fragments, shifts, addresses, residue pieces
_STAGING_PAD = PROLOGUE_STAGING_PAD  # int32 words per row of the output staging


@dataclass(frozen=True, slots=True, kw_only=True)
class PrologueVariant:
    """One prologue kernel: CTA tile tile_m x tile_n over k-tiles of tile_k, warps of
    warp_m x warp_n (each warp spans tile_k: one warp k-group per register half)."""

    arch: Arch = Arch.SM80
    tile_m: int
    tile_n: int
    tile_k: int
    warp_m: int
    warp_n: int

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            expected = Arch if field.name == "arch" else int
            if not isinstance(value, expected) or isinstance(value, bool):
                raise TypeError(f"PrologueVariant.{field.name} must be {expected.__name__}, got {value!r}")
        reason = _illegal_reason(self)
        if reason:
            fields = ", ".join(f"{k}={v}" for k, v in self.to_dict().items() if k != "kind")
            raise IllegalVariantError(f"illegal prologue variant {fields}: {reason}")

    @property
    def name(self) -> str:
        """e.g. prologue_sm80_128x128x64_w64x32."""
        return (f"prologue_{ARCH_TAGS[self.arch]}_{self.tile_m}x{self.tile_n}x{self.tile_k}"
                f"_w{self.warp_m}x{self.warp_n}")

    @property
    def symbol(self) -> str:
        return "ozaki_" + self.name

    @property
    def threads(self) -> int:
        return 32 * (self.tile_m // self.warp_m) * (self.tile_n // self.warp_n)

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory: two int8 stages of both tiles, or the int32 output
        staging, whichever is larger (they share it)."""
        operands = 2 * (self.tile_m + self.tile_n) * self.tile_k
        staging = self.tile_m * (self.tile_n + _STAGING_PAD) * 4
        return max(operands, staging)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "prologue", "arch": self.arch.value, "tile_m": self.tile_m,
                "tile_n": self.tile_n, "tile_k": self.tile_k, "warp_m": self.warp_m,
                "warp_n": self.warp_n}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PrologueVariant:
        values = {k: v for k, v in data.items() if k != "kind"}
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown PrologueVariant fields: {', '.join(unknown)}")
        if "arch" in values:
            values["arch"] = Arch(values["arch"])
        return cls(**values)


def _illegal_reason(v: PrologueVariant) -> str:
    if v.arch is not Arch.SM80:
        return "the prototype is an sm_80 (mma.sync) kernel; arch must be sm_80"
    if min(v.tile_m, v.tile_n, v.tile_k, v.warp_m, v.warp_n) < 1:
        return "sizes must be positive"
    if v.tile_k != _HALVES * _MMA_K:
        return (f"tile_k={v.tile_k} must be {_HALVES * _MMA_K}: two warp k-groups of the "
                f"m16n8k32 MMA, one per register half")
    if v.warp_m % _MMA_M or v.warp_n % _MMA_N:
        return f"warp tile {v.warp_m}x{v.warp_n} must be a multiple of the {_MMA_M}x{_MMA_N} MMA"
    if v.tile_m % v.warp_m or v.tile_n % v.warp_n:
        return f"tile {v.tile_m}x{v.tile_n} must be a multiple of the warp tile {v.warp_m}x{v.warp_n}"
    if v.tile_n % 4:
        return f"tile_n={v.tile_n} must be a multiple of 4 (int4 output stores)"
    if v.threads > _MAX_THREADS:
        return f"{v.threads} threads per CTA exceed {_MAX_THREADS}"
    chunks_per_row = v.tile_k // _HALVES // _CHUNK
    if v.threads % chunks_per_row or (v.tile_m * chunks_per_row) % v.threads \
            or (v.tile_n * chunks_per_row) % v.threads:
        return (f"the {v.tile_m}+{v.tile_n} rows x {chunks_per_row} chunks of a half k-tile do not "
                f"split evenly over {v.threads} threads (A and B apart)")
    accumulators = v.warp_m * v.warp_n // 32
    prefetch = 2 * (v.tile_m + v.tile_n) * (v.tile_k // _HALVES) // v.threads  # doubles, 2 regs each
    budget = min(MAX_REGISTERS_PER_THREAD, REGISTER_FILE // v.threads)
    if accumulators + prefetch + _OTHER_REGISTERS > budget:
        return (f"{accumulators} accumulator + {prefetch} prefetch registers + ~{_OTHER_REGISTERS} others "
                f"per thread exceed the {budget} a {v.threads}-thread CTA has")
    if v.smem_bytes > SM80_SMEM_BYTES:
        return f"shared memory {v.smem_bytes} bytes exceeds the sm_80 limit of {SM80_SMEM_BYTES}"
    return ""


# The prototype's one default: 128x128 tiles, 8 warps of 64x32 (255 registers, no spill
# with CUDA 13.0), k-tiles of 64 filled in halves of 32.
_DEFAULTS: tuple[PrologueVariant, ...] = (
    PrologueVariant(tile_m=128, tile_n=128, tile_k=64, warp_m=64, warp_n=32),
)


def prologue_catalog(pattern: str | None = None) -> list[PrologueVariant]:
    """The catalogued prologue variants (fnmatch `pattern` over names)."""
    return [v for v in _DEFAULTS if pattern is None or fnmatch.fnmatchcase(v.name, pattern)]


def default_prologue_variant() -> PrologueVariant:
    return _DEFAULTS[0]

