"""The catalog of GEMM variants: a small default set per arch and kernel family, the full
sweep of every legal combination, and the lookup by name.

Adding a tile to what `ozaki-cutlass build` compiles is one entry in `_DEFAULTS` (or
nothing at all: `catalog(full=True)` sweeps tiles). The fused modulus-group kernels
(`Epilogue.PARTIAL_CRT`, sm_90a and sm_80, group_size 1..4) have a default set of their
own: `catalog(arch, epilogue=...)`. The prologue prototype's catalog is in prologue.py.
"""

from __future__ import annotations

import fnmatch
import functools
import itertools
from collections.abc import Iterable, Mapping

from .arch import Arch
from .errors import IllegalVariantError
from .variants import MAX_GROUP_SIZE, Epilogue, GemmVariant, Schedule

__all__ = ["catalog", "variants_named", "default_variant"]


def _sm90(tile: tuple[int, int, int], cluster: tuple[int, int], schedule: Schedule,
          stages: int = 0, *, epilogue: Epilogue = Epilogue.INT32_STORE,
          group_size: int = 1, swizzle: int = 1) -> GemmVariant:
    return GemmVariant(arch=Arch.SM90A, tile_m=tile[0], tile_n=tile[1], tile_k=tile[2],
                       cluster_m=cluster[0], cluster_n=cluster[1], schedule=schedule,
                       stages=stages, epilogue=epilogue, group_size=group_size, swizzle=swizzle)


def _sm90_fused(tile: tuple[int, int, int], cluster: tuple[int, int], schedule: Schedule,
                group_size: int, stages: int = 0, swizzle: int = 1) -> GemmVariant:
    return _sm90(tile, cluster, schedule, stages, epilogue=Epilogue.PARTIAL_CRT,
                 group_size=group_size, swizzle=swizzle)


def _sm80(tile: tuple[int, int, int], warp: tuple[int, int, int], stages: int, *,
          epilogue: Epilogue = Epilogue.INT32_STORE, group_size: int = 1) -> GemmVariant:
    return GemmVariant(arch=Arch.SM80, tile_m=tile[0], tile_n=tile[1], tile_k=tile[2],
                       warp_m=warp[0], warp_n=warp[1], warp_k=warp[2],
                       schedule=Schedule.MULTISTAGE, stages=stages, epilogue=epilogue,
                       group_size=group_size)


def _sm80_fused(tile: tuple[int, int, int], warp: tuple[int, int, int], stages: int,
                group_size: int) -> GemmVariant:
    return _sm80(tile, warp, stages, epilogue=Epilogue.PARTIAL_CRT, group_size=group_size)


# The small default set per arch: what `ozaki-cutlass build` compiles. The first entry of
# each is the arch's default variant. Every entry is also in the full sweep.
_DEFAULTS: Mapping[Arch, tuple[GemmVariant, ...]] = {
    Arch.SM90A: (
        # first: the fastest measured on an H200 at n = 4096, 8192 and 16384
        # (docs/benchmarks.md): 1490 TOP/s at 8192, 1513 at 16384
        _sm90((256, 128, 128), (1, 2), Schedule.COOPERATIVE),
        _sm90((128, 256, 128), (1, 1), Schedule.COOPERATIVE),
        _sm90((128, 128, 128), (2, 1), Schedule.COOPERATIVE),
        _sm90((128, 128, 128), (1, 1), Schedule.PINGPONG),
    ),
    Arch.SM80: (
        _sm80((128, 256, 64), (64, 64, 64), 3),
        _sm80((128, 128, 64), (64, 64, 64), 4),
    ),
}

# The fused modulus-group kernels (partial-CRT epilogue), a default set of their own:
# `catalog(arch, epilogue=Epilogue.PARTIAL_CRT)`. The first entry is the default.
_FUSED_DEFAULTS: Mapping[Arch, tuple[GemmVariant, ...]] = {
    Arch.SM90A: (
        # one-modulus groups, every group in one batched launch: CUTLASS's mainloop at the
        # plain kernel's 256x128 tile (nothing kept next to the accumulators), the epilogue
        # stores X mod m as one byte, a quarter of the staged path's int32 plane for the
        # CRT to read (97-101 % of the plain kernel's rate, layout_probe, 2026-11-29)
        _sm90_fused((256, 128, 128), (1, 2), Schedule.COOPERATIVE, 1),
        _sm90_fused((128, 128, 128), (1, 1), Schedule.COOPERATIVE, 4),
        # its sibling for the last group of 4k-1 moduli (15 = 4 + 4 + 4 + 3)
        _sm90_fused((128, 128, 128), (1, 1), Schedule.COOPERATIVE, 3),
        _sm90_fused((128, 128, 128), (2, 1), Schedule.COOPERATIVE, 3),
        _sm90_fused((128, 128, 128), (1, 1), Schedule.COOPERATIVE, 2),
    ),
    # mma.sync kernels (correct everywhere, not tuned): one tile for every group size, so
    # any split of the moduli (15 = 4 + 4 + 4 + 3; 2 moduli: one group of 2) finds its
    # siblings built. 64x32 warp tiles: 64 accumulators + 48 kept residue words for 4 moduli.
    Arch.SM80: tuple(_sm80_fused((128, 128, 64), (64, 32, 64), 4, g) for g in (4, 3, 2, 1)),
}

_DEFAULTS_BY_EPILOGUE: Mapping[Epilogue, Mapping[Arch, tuple[GemmVariant, ...]]] = {
    Epilogue.INT32_STORE: _DEFAULTS,
    Epilogue.PARTIAL_CRT: _FUSED_DEFAULTS,
}

# The full sweep: the product of these axes, keeping the legal combinations.
_SM90_SWEEP = {
    "tile_m": (64, 128, 256),
    "tile_n": (64, 128, 192, 256),
    "tile_k": (64, 128),
    "cluster": ((1, 1), (2, 1), (1, 2), (2, 2)),
    "schedule": (Schedule.COOPERATIVE, Schedule.PINGPONG),
    "stages": (0, 3, 4, 5, 6),
    "swizzle": (1, 8),
}
_SM80_SWEEP = {
    "tile_m": (64, 128, 256),
    "tile_n": (64, 128, 256),
    "tile_k": (32, 64, 128),
    "warp_m": (32, 64),
    "warp_n": (32, 64),
    "stages": (3, 4, 5, 6),
}


_GROUP_SIZES = tuple(range(1, MAX_GROUP_SIZE + 1))


@functools.cache
def _full_sweep(arch: Arch, epilogue: Epilogue = Epilogue.INT32_STORE) -> tuple[GemmVariant, ...]:
    candidates: Iterable[GemmVariant | None]
    if arch is Arch.SM90A:
        # the plain store takes one modulus; the fused family every group size (last axis)
        groups = _GROUP_SIZES if epilogue is Epilogue.PARTIAL_CRT else (1,)
        candidates = (
            _legal_or_none(_sm90, (m, n, k), cluster, schedule, stages, epilogue=epilogue, group_size=g,
                           swizzle=sw)
            for m, n, k, cluster, schedule, stages, sw, g in itertools.product(*_SM90_SWEEP.values(), groups)
        )
    else:
        # as on sm_90a: the fused family is the plain sweep with a group-size axis (last)
        groups = _GROUP_SIZES if epilogue is Epilogue.PARTIAL_CRT else (1,)
        candidates = (
            _legal_or_none(_sm80, (m, n, k), (wm, wn, k), stages, epilogue=epilogue, group_size=g)
            for m, n, k, wm, wn, stages, g in itertools.product(*_SM80_SWEEP.values(), groups)
        )
    return tuple(v for v in candidates if v is not None)


def _legal_or_none(make, *args, **kwargs) -> GemmVariant | None:
    try:
        return make(*args, **kwargs)
    except IllegalVariantError:
        return None


def catalog(arch: Arch | str | None = None, pattern: str | None = None, *,
            full: bool = False,
            epilogue: Epilogue | str | None = Epilogue.INT32_STORE) -> list[GemmVariant]:
    """The catalogued variants, in a fixed order.

    `arch` restricts to one architecture (all by default); `full` swaps the small default
    set for the sweep of every legal tile x cluster x schedule x stages (x group size)
    combination; `pattern` keeps the variants whose name matches an fnmatch glob (e.g.
    "*_coop_*"). `epilogue` picks the kernel family: the plain int32 store (default), the
    fused modulus-group kernels (`Epilogue.PARTIAL_CRT`), or every family (None).
    """
    arches = list(Arch) if arch is None else [Arch(arch)]
    epilogues = list(Epilogue) if epilogue is None else [Epilogue(epilogue)]
    variants = [
        v
        for e in epilogues
        for a in arches
        for v in (_full_sweep(a, e) if full else _DEFAULTS_BY_EPILOGUE[e][a])
    ]
    if pattern is not None:
        variants = [v for v in variants if fnmatch.fnmatchcase(v.name, pattern)]
    return variants


@functools.cache
def _names() -> dict[str, tuple[GemmVariant, ...]]:
    index: dict[str, list[GemmVariant]] = {}
    for e in Epilogue:
        for a in Arch:
            for v in dict.fromkeys(_full_sweep(a, e) + tuple(_DEFAULTS_BY_EPILOGUE[e][a])):
                index.setdefault(v.name, []).append(v)
    return {name: tuple(vs) for name, vs in index.items()}


def variants_named(name: str) -> tuple[GemmVariant, ...]:
    """The catalogued variants (any arch, epilogue, default or full sweep) called `name`:
    one, or none. Indexed once per process; a lookup costs no catalog walk."""
    return _names().get(name, ())


def default_variant(arch: Arch | str) -> GemmVariant:
    """The variant to build when only the arch is known."""
    return _DEFAULTS[Arch(arch)][0]
