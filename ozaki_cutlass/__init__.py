"""ozaki_cutlass: FP64-accurate GEMM on INT8 tensor cores (Ozaki scheme II).

    ozaki_cutlass.gemm(a, b, ...)             the GPU path (CUTLASS INT8 kernels)
    ozaki_cutlass.prepare(a, side="left")     an operand quantized once, for many gemm calls
    ozaki_cutlass.reference.gemm(a, b, ...)   the NumPy reference: the same bits on the CPU

Importing does no work: the CUDA driver is touched on the first GPU call.
"""

from . import reference
from ._cuda import CudaError, NoGpuError
from .kernels import KernelError, UnsupportedProblem
from .pipeline import gemm
from .prepared import Prepared, prepare
from .reference import DEFAULT_MODULI

__all__ = ["gemm", "prepare", "Prepared", "reference", "DEFAULT_MODULI", "CudaError", "NoGpuError", "KernelError",
           "UnsupportedProblem"]
__version__ = "0.1.0"
