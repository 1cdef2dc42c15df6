"""The generated tile-local prologue GEMM (the opt-in ``path="prologue"`` prototype): CTAs
read float64 tiles, make their modulus' int8 residues on chip, and write int32 planes.
C ABI: ``ozaki_cutlass.generator.abi.PROLOGUE``."""

from __future__ import annotations

from ..generator import abi
from ..generator.prologue import PrologueVariant, default_prologue_variant
from .library import GeneratedLibrary, load_library

__all__ = ["PrologueGemm", "load_prologue_gemm"]


class PrologueGemm(GeneratedLibrary):
    """One built prologue kernel."""

    ABI = abi.PROLOGUE

    def __call__(self, m, n, n_out, k, k_begin, k_len, moduli, a, a_vs, a_es, mu, b, b_vs, b_es, nu,
                 c, ldc, plane_stride, stream=0) -> None:
        """int32 planes c[g] (g < len(moduli)) of the residue products over k in
        [k_begin, k_begin + k_len); pointers and the stream are integer handles."""
        self._call("run", m, n, n_out, k, k_begin, k_len, len(moduli), self._array("run", "moduli", moduli),
                   a, a_vs, a_es, mu, b, b_vs, b_es, nu, c, ldc, plane_stride, stream or None)


def load_prologue_gemm(variant: PrologueVariant | None = None, out_dir=None, *,
                       build_missing: bool = True, progress: bool = True) -> PrologueGemm:
    """The loaded prologue kernel (default: the catalog's one), built first when missing."""
    variant = variant if variant is not None else default_prologue_variant()
    return load_library(PrologueGemm, variant, out_dir, build_missing=build_missing, progress=progress)
