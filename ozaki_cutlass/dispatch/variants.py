"""Facts about kernel variants that the dispatcher and the tuning table share: which
path a variant runs, where its machine code runs, and variants by name."""

from __future__ import annotations

from ..generator import Arch, Epilogue, GemmVariant, catalog, variants_named

__all__ = ["PATHS", "runs_on", "path_of", "variant_by_name"]

PATHS = ("staged", "fused")


def runs_on(built: Arch, gpu: Arch) -> bool:
    """sm_90a code runs on sm_90 only; sm_80 code (with its compute_80 PTX) on any 8.0+."""
    return built is gpu or built is Arch.SM80


def path_of(variant: GemmVariant) -> str:
    """The pipeline a variant runs: "fused" for a partial-CRT epilogue, else "staged"."""
    return "fused" if variant.epilogue is Epilogue.PARTIAL_CRT else "staged"


def variant_by_name(name: str, who: str) -> GemmVariant:
    """The one catalogued variant (any arch, any epilogue) called ``name``; ``who`` says
    where the name came from, for the error when it names none or several."""
    matches = variants_named(name)
    if len(matches) != 1:
        matches = matches or catalog(None, name, full=True, epilogue=None)  # a glob: count it
        raise ValueError(f"{who} {name!r}, which matches {len(matches)} catalogued variants; "
                         "give one exact name (see `ozaki-cutlass list --full`)")
    return matches[0]
