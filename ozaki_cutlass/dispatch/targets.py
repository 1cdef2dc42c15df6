"""Every kernel the dispatcher may pick on an arch: what ``ozaki-cutlass build`` builds by
default, and what the first call on a GPU builds, in one parallel build, when a kernel it
needs is missing (so that a later shape does not stop a user's run for another compile)."""

from __future__ import annotations

from ..generator import Arch, StagesVariant, catalog
from ..numerics.contract import CONTRACT_MODULI
from ..options import DEFAULT_MODULI
from .candidates import builtin_candidates, candidates_from_table

__all__ = ["kernel_targets"]


def kernel_targets(arch: Arch, table: tuple[dict, str], moduli: int = DEFAULT_MODULI) -> list:
    """The arch's default variants (plain and fused), the kernels of every candidate the
    dispatcher tries on it (the built-in ones with the fused kernels' group-size siblings
    for ``moduli`` and for every count the accuracy contract may choose, then the tuning
    table's: ``table`` is dispatch.load_table()'s (table, source)) and its stage-kernel
    library; each once, in that order."""
    targets = catalog(arch, None, full=False, epilogue=None)
    for cand in list(builtin_candidates(arch)) + candidates_from_table(*table):
        if cand.variant.arch is arch:
            for count in (moduli, *CONTRACT_MODULI):
                targets.extend(v for v in cand.kernels(count) if v not in targets)
    targets.append(StagesVariant(arch=arch))
    return targets
