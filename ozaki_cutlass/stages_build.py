"""Finding (building on demand) and loading the stage kernels library of an arch."""

from __future__ import annotations

from .generator import Arch, StagesVariant
from .kernels import locate
from .stages import Stages, load_stages_library


def load_stages(arch: Arch, out_dir=None, *, progress: bool = True) -> Stages:
    variant = StagesVariant(arch=Arch(arch))
    art = locate(variant, out_dir, progress=progress)
    return load_stages_library(str(art.library_path), art.symbol, variant.name)
