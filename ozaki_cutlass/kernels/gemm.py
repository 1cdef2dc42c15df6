"""The generated INT8 GEMM libraries: the plain batched GEMM (``Int8Gemm``, the staged
path and the accurate bound's coarse product) and the fused modulus-group GEMM
(``GroupGemm``, the fused path), with their loaders. Their C ABIs:
``ozaki_cutlass.generator.abi`` (INT8_GEMM, GROUP_GEMM)."""

from __future__ import annotations

from ..generator import abi
from ..generator.variants import GemmVariant
from .library import GeneratedLibrary, UnsupportedProblem, load_library

__all__ = ["Int8Gemm", "GroupGemm", "load_int8_gemm", "load_group_gemm"]


class Int8Gemm(GeneratedLibrary):
    """One generated INT8 GEMM (int8 x int8 -> int32, TN, batched), ready to launch."""

    ABI = abi.INT8_GEMM

    def workspace_size(self, m: int, n: int, k: int, batch: int = 1) -> int:
        return int(self._fn["workspace_size"](m, n, k, batch))

    def __call__(self, m, n, k, batch, a, lda, stride_a, b, ldb, stride_b, c, ldc, stride_c,
                 workspace=0, workspace_bytes=0, stream=0) -> None:
        """C[b] = A[b] B[b]^T; pointers and the stream are integer handles."""
        self._call("run", m, n, k, batch, a, lda, stride_a, b, ldb, stride_b, c, ldc, stride_c,
                   workspace or None, workspace_bytes, stream or None)


def load_int8_gemm(variant: GemmVariant, out_dir=None, *, build_missing: bool = True,
                   progress: bool = True) -> Int8Gemm:
    """The loaded kernel of ``variant``, building it first (with progress) when missing."""
    return load_library(Int8Gemm, variant, out_dir, build_missing=build_missing, progress=progress)


class GroupGemm(GeneratedLibrary):
    """One generated fused modulus-group GEMM (partial-CRT epilogue; sm_90a or sm_80, one C
    ABI): for consecutive groups of G moduli, every modulus's residues concatenated along
    k, group q's X = CRT of (A_h B_h^T mod m_h over its moduli h) mod their product,
    q * stride_x elements into x. One launch for all groups where the kernel batches them
    (sm_90a, G = 1), else one per group."""

    ABI = abi.GROUP_GEMM

    @property
    def group_size(self) -> int:
        return self.variant.group_size

    def workspace_size(self, m: int, n: int, k_pad: int, groups: int = 1) -> int:
        return int(self._fn["workspace_size"](m, n, k_pad, self.group_size, groups))

    def __call__(self, m, n, k_pad, moduli, a, lda, b, ldb, x, ldx, stride_x=0, workspace=0,
                 workspace_bytes=0, stream=0) -> None:
        """``moduli``: groups * G values, group q's G moduli at [q*G, (q+1)*G)."""
        groups, rest = divmod(len(moduli), self.group_size)
        if rest or not groups:
            raise UnsupportedProblem(f"{self.name}: {len(moduli)} moduli do not make whole groups of "
                                     f"{self.group_size}")
        self._call("run", m, n, k_pad, self.group_size, groups, a, lda, b, ldb, x, ldx, stride_x,
                   self._array("run", "moduli", moduli), workspace or None, workspace_bytes,
                   stream or None)


def load_group_gemm(variant: GemmVariant, out_dir=None, *, build_missing: bool = True,
                    progress: bool = True) -> GroupGemm:
    """The loaded fused kernel of ``variant``, building it first (with progress) when missing."""
    return load_library(GroupGemm, variant, out_dir, build_missing=build_missing, progress=progress)
