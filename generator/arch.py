"""The target architectures, their short names, and the hardware facts of each arch that
the kernel families' legality rules check against.

The base of the generator: it imports nothing of the package. The GEMM variants
(variants.py) and the prologue prototype (prologue.py) both read their limits here, so
they cannot disagree about a machine.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

__all__ = [
    "Arch",
    "ARCH_TAGS",
    "SM80_MMA_SHAPE",
    "SM80_SMEM_BYTES",
    "REGISTER_FILE",
    "MAX_REGISTERS_PER_THREAD",
]


class Arch(str, enum.Enum):
    """Target architecture, spelled as nvcc's `code=` names it."""

    SM90A = "sm_90a"
    SM80 = "sm_80"


# Short forms in variant names.
ARCH_TAGS: Mapping[Arch, str] = {Arch.SM90A: "sm90a", Arch.SM80: "sm80"}

# --- hardware facts -------------------------------------------------------------------
SM80_MMA_SHAPE = (16, 8, 32)  # mma.sync.m16n8k32.s32.s8.s8
SM80_SMEM_BYTES = 166912  # 163 KiB: sm_80 dynamic shared memory per block
REGISTER_FILE = 65536  # 32-bit registers per SM (one CTA must fit)
MAX_REGISTERS_PER_THREAD = 255
