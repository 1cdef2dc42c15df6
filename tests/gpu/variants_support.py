"""The kernels the GPU tests run one by one: every catalogued variant of both epilogues on
sm_90a and sm_80 (what `ozaki-cutlass build` builds for each arch)."""

from ozaki_cutlass.generator import Arch, Epilogue, catalog

ALL_VARIANTS = [v for e in (Epilogue.INT32_STORE, Epilogue.PARTIAL_CRT)
                for arch in (Arch.SM90A, Arch.SM80) for v in catalog(arch, epilogue=e)]
