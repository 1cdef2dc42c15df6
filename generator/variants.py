"""Kernel variants as data: every choice that changes a generated INT8 GEMM.

A `GemmVariant` is one CUTLASS instantiation of C = A B^T with A (m x k) and B (n x k)
int8, K contiguous (the TN layout INT8 tensor cores need), and C int32. Its fields are the
only inputs of its template; its legality is checked when it is made; its `name` is derived
from every field and names the source file, the exported symbol and the cache entry.

Adding an epilogue is one `Epilogue` member, its row in `EPILOGUE_TAGS`, its legality rule
here and the template code that wires it. Which variants are built is gemm_catalog.py's;
`StagesVariant` names the stage kernels' library of an arch.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..templates.constants import MAX_GROUP_SIZE  # moduli per kernel: a product of 4 fits 32 bits
from .arch import (
    ARCH_TAGS,
    MAX_REGISTERS_PER_THREAD,
    REGISTER_FILE,
    SM80_MMA_SHAPE,
    SM80_SMEM_BYTES,
    Arch,
)
from .errors import IllegalVariantError

__all__ = [
    # a variant's vocabulary, owned by arch.py and named here too for the templates' context
    "Arch",
    "ARCH_TAGS",
    "SM80_MMA_SHAPE",
    # owned here
    "Schedule",
    "Epilogue",
    "ScheduleSpelling",
    "SCHEDULES",
    "EPILOGUE_TAGS",
    "GemmVariant",
    "StagesVariant",
    "Variant",
    "MAX_GROUP_SIZE",
]


class Schedule(str, enum.Enum):
    """How the kernel's warps share the work of a tile."""

    COOPERATIVE = "cooperative"  # sm_90a: two consumer warpgroups split each tile along M
    PINGPONG = "pingpong"  # sm_90a: two consumer warpgroups alternate whole tiles
    MULTISTAGE = "multistage"  # sm_80: CUTLASS 2.x cp.async multistage mainloop


class Epilogue(str, enum.Enum):
    """What the kernel does with the int32 accumulators of a tile."""

    INT32_STORE = "int32_store"  # store them as they are: one modulus per launch
    # fold group_size moduli on chip and store the group's partial CRT value (uint32);
    # templates/int8_group_gemm_sm90.cu.j2 (sm_90a), int8_group_gemm_sm80.cu.j2 (sm_80)
    PARTIAL_CRT = "partial_crt"


@dataclass(frozen=True, slots=True)
class ScheduleSpelling:
    """A schedule's arch, its short form in variant names and its CUTLASS C++ tags."""

    arch: Arch
    short: str
    kernel: str  # CUTLASS 3.x kernel schedule tag; "" where the arch has none
    epilogue: str  # CUTLASS 3.x epilogue schedule tag; "" where the arch has none
    consumer_warpgroups: int  # warpgroups sharing one tile's accumulators (sm_90a)


# The one table from schedule to C++ (the sm_80 template needs no schedule tag: CUTLASS
# 2.x picks its multistage mainloop from the stage count).
SCHEDULES: Mapping[Schedule, ScheduleSpelling] = {
    Schedule.COOPERATIVE: ScheduleSpelling(
        arch=Arch.SM90A,
        short="coop",
        kernel="cutlass::gemm::KernelTmaWarpSpecializedCooperative",
        epilogue="cutlass::epilogue::TmaWarpSpecializedCooperative",
        consumer_warpgroups=2,
    ),
    Schedule.PINGPONG: ScheduleSpelling(
        arch=Arch.SM90A,
        short="pp",
        kernel="cutlass::gemm::KernelTmaWarpSpecializedPingpong",
        epilogue="cutlass::epilogue::TmaWarpSpecialized",
        consumer_warpgroups=1,
    ),
    Schedule.MULTISTAGE: ScheduleSpelling(
        arch=Arch.SM80, short="ms", kernel="", epilogue="", consumer_warpgroups=0,
    ),
}

# Short forms in variant names (the arch's are in arch.py).
EPILOGUE_TAGS: Mapping[Epilogue, str] = {Epilogue.INT32_STORE: "int32", Epilogue.PARTIAL_CRT: "pcrt"}

# --- hardware and CUTLASS limits the legality rules use -------------------------------
# (those the prologue prototype checks too, the sm_80 MMA shape among them, are in arch.py)
_SM90_WGMMA_M = 64  # one warpgroup's wgmma M
_SM90_TILE_K_MULTIPLE = 64  # two wgmma k=32 steps: at least a 64-byte swizzle row of int8
_SM90_SMEM_BYTES = 232448  # 227 KiB: sm_90 dynamic shared memory per block
_SM90_BARRIER_BYTES_PER_STAGE = 16  # full + empty mbarrier of PipelineTmaAsync
_SM90_SMEM_SLACK_BYTES = 1024  # epilogue and scheduler barriers, load-order barrier
_SM90_MAX_CLUSTER = 8  # portable cluster size
_SM80_STAGES = range(3, 7)
_SM80_MAX_WARPS = 16
_SM80_LOAD_BYTES = 16  # one cp.async vector of int8
_MAX_ACCUMULATOR_REGISTERS = 128  # int32 accumulators per thread before registers spill
_SM80_OTHER_REGISTERS = 64  # operand fragments, addresses and loop state besides accumulators
# sm_90a partial-CRT fold: accumulators + kept residue words per consumer thread. ptxas
# (CUDA 13.0, 168 registers per thread in a 384-thread CTA) compiles 64 + 48 (128x128
# cooperative, group_size 4) without spilling; 128 + 32 (128x256, group_size 2) spills.
_MAX_FOLD_REGISTERS = 112
# sm_80 partial-CRT fold: accumulators + kept residue words per thread. ptxas (CUDA 13.0,
# sm_80, 255 registers) compiles 64 + 48 (64x32 warp tile, group_size 4) and 32 + 24
# without spilling; 128 + 32 (64x64, group_size 2) spills.
_SM80_MAX_FOLD_REGISTERS = 112


@dataclass(frozen=True, slots=True, kw_only=True)
class GemmVariant:
    """One INT8 GEMM kernel: int8 x int8 -> int32, TN layout.

    `stages` = 0 on sm_90a lets CUTLASS fit as many mainloop stages as shared memory
    allows once the epilogue is carved out. `warp_*` are sm_80's warp tile (0 on sm_90a,
    where the collective builder derives it). `group_size` is the number of moduli one
    launch folds; the plain int32 store handles exactly one.
    """

    arch: Arch
    tile_m: int
    tile_n: int
    tile_k: int
    cluster_m: int = 1
    cluster_n: int = 1
    schedule: Schedule
    stages: int
    warp_m: int = 0
    warp_n: int = 0
    warp_k: int = 0
    epilogue: Epilogue = Epilogue.INT32_STORE
    group_size: int = 1
    swizzle: int = 1

    def __post_init__(self) -> None:
        _check_types(self)
        reason = _illegal_reason(self)
        if reason:
            raise IllegalVariantError(f"illegal {self.arch.value} variant {self._fields_text()}: {reason}")

    # --- identity ----------------------------------------------------------------------
    @property
    def name(self) -> str:
        """A C-identifier-safe name from every field, e.g. i8_sm90a_128x256x128_c1x1_coop_s0_int32_g1.

        sm_90a names leave out the warp tile (always 0 there) and sm_80 names the cluster
        (always 1x1 there): the legality rules fix those fields, so no two variants share
        a name. The tile-scheduler swizzle appears as a `_sw{N}` suffix when it is not 1.
        """
        tile = f"{self.tile_m}x{self.tile_n}x{self.tile_k}"
        if self.arch is Arch.SM90A:
            layout = f"c{self.cluster_m}x{self.cluster_n}"
        else:
            layout = f"w{self.warp_m}x{self.warp_n}x{self.warp_k}"
        return "_".join((
            "i8",
            ARCH_TAGS[self.arch],
            tile,
            layout,
            SCHEDULES[self.schedule].short,
            f"s{self.stages}",
            EPILOGUE_TAGS[self.epilogue],
            f"g{self.group_size}",
        )) + (f"_sw{self.swizzle}" if self.swizzle != 1 else "")

    @property
    def symbol(self) -> str:
        """Prefix of the C entry points the variant's library exports (`<symbol>_run`, ...)."""
        return "ozaki_" + self.name

    def to_dict(self) -> dict[str, Any]:
        """Every field, enums as their values: the canonical form for hashing and JSON."""
        return {
            field.name: _plain(getattr(self, field.name)) for field in dataclasses.fields(self)
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GemmVariant:
        """The inverse of `to_dict` (legality is checked again)."""
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown GemmVariant fields: {', '.join(unknown)}")
        values = dict(data)
        for key, enum_type in (("arch", Arch), ("schedule", Schedule), ("epilogue", Epilogue)):
            if key in values:
                values[key] = enum_type(values[key])
        return cls(**values)

    # --- derived quantities ------------------------------------------------------------
    @property
    def warps(self) -> int:
        """sm_80: warps per CTA (sliced-K warps included)."""
        if self.arch is not Arch.SM80:
            raise AttributeError("warps is an sm_80 quantity")
        return (self.tile_m // self.warp_m) * (self.tile_n // self.warp_n) * (self.tile_k // self.warp_k)

    @property
    def smem_stage_bytes(self) -> int:
        """Shared memory of one mainloop stage (one A tile and one B tile of int8)."""
        return (self.tile_m + self.tile_n) * self.tile_k

    def _fields_text(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.to_dict().items())


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


def _check_types(v: GemmVariant) -> None:
    for field in dataclasses.fields(v):
        value = getattr(v, field.name)
        expected = {"arch": Arch, "schedule": Schedule, "epilogue": Epilogue}.get(field.name, int)
        # bool is an int subclass: reject it so that True never becomes a tile size.
        if not isinstance(value, expected) or isinstance(value, bool):
            raise TypeError(
                f"GemmVariant.{field.name} must be {expected.__name__}, got {value!r}"
            )


# --- legality ---------------------------------------------------------------------------
def _illegal_reason(v: GemmVariant) -> str:
    """Why CUTLASS cannot build `v`, or "" when it can."""
    spelling = SCHEDULES[v.schedule]
    if spelling.arch is not v.arch:
        return f"schedule {v.schedule.value} belongs to {spelling.arch.value}"
    if not 1 <= v.group_size <= MAX_GROUP_SIZE:
        return f"group_size must be in 1..{MAX_GROUP_SIZE} (got {v.group_size})"
    if v.epilogue is Epilogue.INT32_STORE and v.group_size != 1:
        return (f"the {v.epilogue.value} epilogue stores one modulus per launch: "
                f"group_size must be 1 (got {v.group_size})")
    if v.swizzle not in (1, 2, 4, 8):
        return f"swizzle must be 1, 2, 4 or 8 (got {v.swizzle})"
    if v.arch is Arch.SM80 and v.swizzle != 1:
        return "swizzle is a setting of the sm_90a persistent tile scheduler: it must be 1 on sm_80"
    if min(v.tile_m, v.tile_n, v.tile_k) < 1:
        return "tile sizes must be positive"
    if v.arch is Arch.SM90A:
        return _sm90_reason(v)
    return _sm80_reason(v)


def _sm90_reason(v: GemmVariant) -> str:
    spelling = SCHEDULES[v.schedule]
    if (v.warp_m, v.warp_n, v.warp_k) != (0, 0, 0):
        return "warp_m/warp_n/warp_k are sm_80 fields and must be 0 on sm_90a"
    m_multiple = _SM90_WGMMA_M * spelling.consumer_warpgroups
    if v.tile_m % m_multiple:
        return (f"tile_m={v.tile_m} must be a multiple of {m_multiple} "
                f"({spelling.consumer_warpgroups} consumer warpgroup(s) x wgmma M={_SM90_WGMMA_M})")
    if not (16 <= v.tile_n <= 256 and v.tile_n % 16 == 0):
        return f"tile_n={v.tile_n} must be a multiple of 16 in [16, 256] (wgmma s8 N)"
    if v.tile_k % _SM90_TILE_K_MULTIPLE:
        return (f"tile_k={v.tile_k} must be a multiple of {_SM90_TILE_K_MULTIPLE} "
                "(int8 wgmma K=32, at least a 64-byte swizzled row)")
    for axis, size in (("cluster_m", v.cluster_m), ("cluster_n", v.cluster_n)):
        if size not in (1, 2, 4, 8):
            return f"{axis}={size} must be 1, 2, 4 or 8"
    if v.cluster_m * v.cluster_n > _SM90_MAX_CLUSTER:
        return (f"cluster {v.cluster_m}x{v.cluster_n} exceeds the portable cluster size "
                f"{_SM90_MAX_CLUSTER}")
    # TMA multicast splits a tile among the CTAs that share it, in whole 8-row swizzle atoms.
    if v.tile_n % (8 * v.cluster_m) or v.tile_m % (8 * v.cluster_n):
        return (f"tile {v.tile_m}x{v.tile_n} cannot be split into 8-row slices for TMA "
                f"multicast over a {v.cluster_m}x{v.cluster_n} cluster")
    registers = v.tile_m * v.tile_n // (128 * spelling.consumer_warpgroups)
    if registers > _MAX_ACCUMULATOR_REGISTERS:
        return (f"a {v.schedule.value} {v.tile_m}x{v.tile_n} tile needs {registers} int32 "
                f"accumulator registers per consumer thread (at most {_MAX_ACCUMULATOR_REGISTERS} "
                "before spilling)")
    if v.epilogue is Epilogue.PARTIAL_CRT:
        # The fold keeps the residues of the first G-1 moduli next to the accumulators,
        # a byte each (templates/include/ozaki/group_mma_sm90.h).
        # One modulus keeps nothing: the plain kernel's accumulator limit applies.
        kept = registers * (v.group_size - 1) // 4
        if v.group_size > 1 and registers + kept > _MAX_FOLD_REGISTERS:
            return (f"the {v.epilogue.value} fold of {v.group_size} moduli keeps {kept} residue "
                    f"registers next to {registers} accumulators per consumer thread "
                    f"(at most {_MAX_FOLD_REGISTERS} together before spilling)")
    if v.stages == 0:
        fitting = sm90_auto_stages(v)
        if fitting < 2:
            return (f"shared memory: only {fitting} mainloop stage(s) of "
                    f"{v.smem_stage_bytes} bytes fit next to the epilogue, at least 2 needed")
        return ""
    if v.stages < 2:
        return f"stages={v.stages} must be 0 (auto) or at least 2"
    needed = v.stages * _sm90_stage_bytes(v) + _sm90_epilogue_smem_bytes(v) + _SM90_SMEM_SLACK_BYTES
    if needed > _SM90_SMEM_BYTES:
        return (f"shared memory: {v.stages} stages x {v.smem_stage_bytes} bytes + epilogue "
                f"{_sm90_epilogue_smem_bytes(v)} bytes = {needed} bytes exceeds the sm_90 "
                f"limit of {_SM90_SMEM_BYTES}")
    return ""


def _sm90_stage_bytes(v: GemmVariant) -> int:
    # As CUTLASS's StageCountAutoCarveout counts it: tiles rounded to 128 bytes + barriers.
    return -(-v.smem_stage_bytes // 128) * 128 + _SM90_BARRIER_BYTES_PER_STAGE


def _sm90_epilogue_smem_bytes(v: GemmVariant) -> int:
    """Shared memory of the TMA store epilogue (EpilogueTileAuto, int32 D, no source C)."""
    cooperative = SCHEDULES[v.schedule].consumer_warpgroups == 2
    epi_m = min(128 if cooperative else 64, v.tile_m)
    epi_n = math.gcd(min(32, v.tile_n), v.tile_n)
    epi_tiles = (v.tile_m // epi_m) * (v.tile_n // epi_n)
    stages_d = min(epi_tiles, 2)
    return stages_d * epi_m * epi_n * 4


def sm90_auto_stages(v: GemmVariant) -> int:
    """The mainloop stage count CUTLASS picks for `stages=0` (StageCountAutoCarveout with
    the epilogue's shared storage carved out), as CUTLASS 4.2 computes it."""
    carveout = -(-_sm90_epilogue_smem_bytes(v) // 128) * 128
    return (_SM90_SMEM_BYTES - carveout) // _sm90_stage_bytes(v)


def _sm80_reason(v: GemmVariant) -> str:
    inst_m, inst_n, inst_k = SM80_MMA_SHAPE
    if (v.cluster_m, v.cluster_n) != (1, 1):
        return "sm_80 has no thread block clusters: cluster must be 1x1"
    if min(v.warp_m, v.warp_n, v.warp_k) < 1:
        return "sm_80 needs a warp tile (warp_m, warp_n, warp_k > 0)"
    if v.warp_m % inst_m or v.warp_n % inst_n or v.warp_k % inst_k:
        return (f"warp tile {v.warp_m}x{v.warp_n}x{v.warp_k} must be a multiple of the "
                f"{inst_m}x{inst_n}x{inst_k} mma.sync shape")
    if v.tile_m % v.warp_m or v.tile_n % v.warp_n or v.tile_k % v.warp_k:
        return (f"tile {v.tile_m}x{v.tile_n}x{v.tile_k} must be a multiple of the warp tile "
                f"{v.warp_m}x{v.warp_n}x{v.warp_k}")
    if v.tile_k not in (32, 64, 128):
        return f"tile_k={v.tile_k} must be 32, 64 or 128 (the crosswise int8 smem layout)"
    k_steps = v.warp_k // inst_k
    if k_steps < 2 or k_steps % 2:
        return (f"warp_k={v.warp_k} gives {k_steps} mma.sync k-step(s) per stage; CUTLASS's "
                "multistage mainloop needs an even number, at least 2 (warp_k 64 or 128)")
    if not 1 <= v.warps <= _SM80_MAX_WARPS:
        return f"{v.warps} warps per CTA, must be 1..{_SM80_MAX_WARPS}"
    # Each warp of the cp.async loader moves whole 16-byte rows of the tile, the same
    # number of them per warp.
    rows_per_warp_access = 32 * _SM80_LOAD_BYTES // v.tile_k
    for operand, rows in (("A", v.tile_m), ("B", v.tile_n)):
        if (rows // rows_per_warp_access) % v.warps:
            return (f"the {operand} tile ({rows}x{v.tile_k} int8) does not split evenly over "
                    f"{v.warps} warps loading {rows_per_warp_access} rows at a time")
    registers = v.warp_m * v.warp_n // 32
    if registers > _MAX_ACCUMULATOR_REGISTERS:
        return (f"a {v.warp_m}x{v.warp_n} warp tile needs {registers} int32 accumulator "
                f"registers per thread (at most {_MAX_ACCUMULATOR_REGISTERS} before spilling)")
    budget = min(MAX_REGISTERS_PER_THREAD, REGISTER_FILE // (32 * v.warps))
    if registers + _SM80_OTHER_REGISTERS > budget:
        return (f"{v.warps} warps leave {budget} registers per thread, fewer than the "
                f"{registers} accumulators + ~{_SM80_OTHER_REGISTERS} others a "
                f"{v.warp_m}x{v.warp_n} warp tile needs")
    if v.epilogue is Epilogue.PARTIAL_CRT:
        reason = _sm80_fold_reason(v, registers, budget)
        if reason:
            return reason
    if v.stages not in _SM80_STAGES:
        return (f"stages={v.stages} must be in {_SM80_STAGES.start}..{_SM80_STAGES.stop - 1} "
                "for the multistage mainloop")
    needed = v.stages * v.smem_stage_bytes
    if needed > SM80_SMEM_BYTES:
        return (f"shared memory: {v.stages} stages x {v.smem_stage_bytes} bytes = {needed} "
                f"bytes exceeds the sm_80 limit of {SM80_SMEM_BYTES}")
    return ""


def _sm80_fold_reason(v: GemmVariant, registers: int, budget: int) -> str:
    """Why the sm_80 partial-CRT fold (templates/include/ozaki/group_gemm_sm80.h) cannot run
    on `v`'s warp tile, or ""."""
    if v.warp_k != v.tile_k:
        return (f"the {v.epilogue.value} epilogue needs whole-K warp tiles (warp_k = tile_k = "
                f"{v.tile_k}, got {v.warp_k}): sliced-K would add the warps' packed residues")
    # A step of the 2.x visitor epilogue hands each thread warp_n / 4 columns of a row; the
    # partials leave in vectors of 4 (uint32) or 8 (bytes, one modulus).
    vector = 8 if v.group_size == 1 else 4
    if v.warp_n < 4 * vector:
        return (f"the {v.epilogue.value} epilogue stores {vector} partials per vector: warp_n "
                f"must be at least {4 * vector} (got {v.warp_n})")
    # The fold keeps the residues of the first G-1 moduli next to the accumulators, a byte
    # each; one modulus keeps nothing.
    kept = registers * (v.group_size - 1) // 4
    limit = min(budget - _SM80_OTHER_REGISTERS, _SM80_MAX_FOLD_REGISTERS)
    if v.group_size > 1 and registers + kept > limit:
        return (f"the {v.epilogue.value} fold of {v.group_size} moduli keeps {kept} residue "
                f"registers next to {registers} accumulators per thread (at most {limit} "
                f"together with {v.warps} warps before spilling)")
    return ""


# --- the stage kernels ------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class StagesVariant:
    """The stage kernels of the staged pipeline (scan, coarse, residues, CRT, ...) for one
    arch: plain CUDA, one library per arch, rendered from templates/stages.cu.j2."""

    arch: Arch

    def __post_init__(self) -> None:
        if not isinstance(self.arch, Arch):
            raise IllegalVariantError(f"StagesVariant.arch must be an Arch, got {self.arch!r}")

    @property
    def name(self) -> str:
        return f"stages_{ARCH_TAGS[self.arch]}"

    @property
    def symbol(self) -> str:
        return "ozaki_" + self.name

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "stages", "arch": self.arch.value}


Variant = GemmVariant | StagesVariant
