"""ozaki_cutlass: FP64-accurate GEMM on INT8 tensor cores (Ozaki scheme II).

    ozaki_cutlass.gemm(a, b, ...)             the GPU path (CUTLASS INT8 kernels)
    ozaki_cutlass.contract(a, b, ...)         what the accuracy contract chooses for a call
    ozaki_cutlass.prepare(a, side="left")     an operand quantized once, for many gemm calls
    ozaki_cutlass.reference.gemm(a, b, ...)   the NumPy reference: the same bits on the CPU
    ozaki_cutlass.workspace_bytes(m, n, k)    device memory the emulation keeps for such a call
    ozaki_cutlass.empty_cache()               release it (memory_held() says how much is held)
    ozaki_cutlass.torch_op.matmul(a, b)       torch.ops.ozaki.gemm: autograd, torch.compile

Importing does no work: the public names are loaded on first use (so that importing
``ozaki_cutlass.generator`` loads no runtime module), and the CUDA driver is touched on
the first GPU call.

The layout, by concern: ``api`` (gemm) and ``call`` (a call validated once), ``options``
and ``config`` (settings), ``reference`` and ``numerics`` (the arithmetic, on the CPU),
``device`` (CUDA driver, arrays, cuBLAS), ``kernels`` (the generated libraries),
``operands`` (one operand's stages, ``prepare``), ``paths`` (staged, fused, prologue,
native), ``dispatch`` (which kernel, which table, native or not), ``tools`` (the CLI,
bench, tune, demo); ``generator`` renders and builds the kernels.
"""

from __future__ import annotations

import importlib
from importlib import metadata

try:
    __version__ = metadata.version("ozaki-cutlass")
except metadata.PackageNotFoundError:  # run from a tree that is not installed
    __version__ = "0+unknown"

# public name -> the module that owns it
_PUBLIC = {
    "gemm": "ozaki_cutlass.api",
    "contract": "ozaki_cutlass.api",
    "Choice": "ozaki_cutlass.numerics.contract",
    "AccuracyWarning": "ozaki_cutlass.numerics.contract",
    "prepare": "ozaki_cutlass.operands.prepared",
    "Prepared": "ozaki_cutlass.operands.prepared",
    "DEFAULT_MODULI": "ozaki_cutlass.options",
    "CudaError": "ozaki_cutlass.device.driver",
    "NoGpuError": "ozaki_cutlass.device.driver",
    "KernelError": "ozaki_cutlass.kernels.library",
    "UnsupportedProblem": "ozaki_cutlass.kernels.library",
    "OutOfMemoryError": "ozaki_cutlass.device.driver",
    "empty_cache": "ozaki_cutlass.api",
    "memory_held": "ozaki_cutlass.api",
    "workspace_bytes": "ozaki_cutlass.paths.footprint",
}
_SUBMODULES = ("reference", "dispatch")

__all__ = ["gemm", "contract", "Choice", "AccuracyWarning", "prepare", "Prepared", "reference", "DEFAULT_MODULI", "CudaError", "NoGpuError", "KernelError",
           "UnsupportedProblem", "OutOfMemoryError", "empty_cache", "memory_held", "workspace_bytes"]


def __getattr__(name: str):
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
