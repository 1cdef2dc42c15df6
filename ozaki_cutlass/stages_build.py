"""Finding (building on demand) and loading the stage kernels library of an arch."""

from __future__ import annotations

import logging

from .generator import Arch, StagesVariant, build, find_artifact
from .stages import Stages, load_stages_library

log = logging.getLogger(__name__)


def load_stages(arch: Arch, out_dir=None, *, progress: bool = True) -> Stages:
    variant = StagesVariant(arch=Arch(arch))
    art = find_artifact(variant, out_dir)
    if art is None:
        log.info("building %s", variant.name)
        (art,) = build([variant], out_dir, progress=progress).artifacts
    return load_stages_library(str(art.library_path), art.symbol, variant.name)
