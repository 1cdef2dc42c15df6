"""Real nvcc builds of the default variants (slow: ~45 s for sm_90a, ~15 s for sm_80).

Deselect with `-m "not nvcc"`; skipped where nvcc, CUTLASS or the templates are missing.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess

import pytest

from ozaki_cutlass.generator import build, default_variant, find_artifact, load_metadata
from ozaki_cutlass.generator.render import library_abi


def entry_points(variant) -> set[str]:
    """The functions the variant's library must export: every entry of its kind's ABI."""
    return {f"{variant.symbol}_{e.name}" for e in library_abi(variant).entries}


@pytest.fixture(scope="module")
def real_toolchain(nvcc_toolchain):
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) not found")
    return nvcc_toolchain


def exported_functions(library) -> set[str]:
    result = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True,
                            text=True, check=True)
    return {line.split()[-1] for line in result.stdout.splitlines() if line.split()[1:2] == ["T"]}


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_real_build_exports_the_entry_points(real_toolchain, tmp_path, arch, capsys):
    variant = default_variant(arch)
    report = build([variant], tmp_path, toolchain=real_toolchain)
    (artifact,) = report.artifacts
    assert report.compiled == (variant.name,)
    assert artifact.library_path.is_file()
    exported = exported_functions(artifact.library_path)
    assert entry_points(variant) <= exported
    # Hidden visibility: the library exports our entry points and nothing of CUTLASS's.
    assert not [s for s in exported if "cutlass" in s.lower()]
    seconds = load_metadata(artifact.directory)["build_seconds"]
    with capsys.disabled():
        print(f"\n  real {arch} build of {variant.name}: {seconds:.1f} s")

    again = build([variant], tmp_path, toolchain=real_toolchain, progress=False)
    assert again.compiled == () and again.artifacts == report.artifacts
    assert find_artifact(variant, tmp_path, toolchain=real_toolchain) == artifact

    # The runtime's ctypes binding loads it, checks ABI and name, and a problem the kernel
    # cannot run is refused with the library's own message before any CUDA call.
    from ozaki_cutlass.kernels.gemm import Int8Gemm
    from ozaki_cutlass.kernels.library import UnsupportedProblem

    kernel = Int8Gemm(artifact)
    assert kernel.name == variant.name
    with pytest.raises(UnsupportedProblem, match="k=13 must be a multiple of 16"):
        kernel(4, 4, 13, 1, 1 << 20, 16, 0, 1 << 20, 16, 0, 1 << 20, 4, 0)


@pytest.mark.nvcc
def test_real_stage_library_binds(real_toolchain, tmp_path):
    """The stage kernels: ctypes mirror of CrtConstants checked against the library,
    argument errors reported before any CUDA call."""
    from ozaki_cutlass.generator import Arch, StagesVariant
    from ozaki_cutlass.kernels.library import UnsupportedProblem
    from ozaki_cutlass.kernels.stages import Stages
    from ozaki_cutlass.numerics.moduli import crt_constants

    variant = StagesVariant(arch=Arch.SM90A)
    (artifact,) = build([variant], tmp_path, toolchain=real_toolchain, progress=False).artifacts
    assert entry_points(variant) <= exported_functions(artifact.library_path)
    st = Stages(artifact)  # binds every entry of the stages ABI, checks CrtConstants' size
    with pytest.raises(UnsupportedProblem, match="k"):
        st.scan(1 << 20, 4, -1, 1, 1, 100, 1 << 20, 1 << 20, 1 << 20, 0)
    with pytest.raises(UnsupportedProblem, match="scan_coarse: out is null"):
        st.scan_coarse(1 << 20, 4, 64, 64, 1, 100, 1 << 20, 0, 1 << 20, 0, 4, 64, 0)
    with pytest.raises(UnsupportedProblem, match="scan_coarse: need rows_pad >= nvec"):
        st.scan_coarse(1 << 20, 4, 64, 64, 1, 100, 1 << 20, 0, 1 << 20, 1 << 20, 4, 56, 0)
    with pytest.raises(UnsupportedProblem, match="vec_exps and vec_nonfinite must be both null or both set"):
        st.inner_stats(1 << 20, 4, 64, 64, 1, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 0, vec_exps=1 << 20)
    with pytest.raises(UnsupportedProblem, match="inner_stats: null pointer"):  # before its first launch
        st.inner_stats(1 << 20, 4, 64, 64, 1, 1 << 20, 1 << 20, 0, 1 << 20, 0, vec_exps=1 << 20, vec_nonfinite=1 << 20)
    # The CRT entries take the limbs to be the count's (the launchers' instances rely on it:
    # the combine's tail MMA exists only for the limbs of 17-20 moduli) and refuse others.
    for count, limbs in [(17, 3), (15, 4), (2, 2)]:
        consts = crt_constants(count)

        def fit(values):  # `limbs` entries, the last one kept (the last limb's scale is 1)
            return (tuple(values[:-1]) + (0,) * limbs)[:limbs - 1] + (values[-1],)

        bad = dataclasses.replace(consts, limbs=limbs, product_limbs=fit(consts.product_limbs),
                                  limb_scales=fit(consts.limb_scales), quotient_factors=fit(consts.quotient_factors))
        why = rf"consts->limbs={limbs}, but the product of {count} moduli takes {consts.limbs} limbs"
        with pytest.raises(UnsupportedProblem, match=why):
            st.crt_unscale(1 << 20, count, 4, 4, 4, 16, 1, 0, bad, 1 << 20, 1 << 20, 1.0, 0.0, 0, 0, 0, 1 << 20, 4,
                           1, None, 0)
        with pytest.raises(UnsupportedProblem, match=why):
            st.combine_unscale(1 << 20, [1] * count, 4, 4, 4, 16, bad, 1 << 20, 1 << 20, 1.0, 0.0, 0, 0, 0,
                               1 << 20, 4, 1, None, 0)
    # Karatsuba's parts (x, nvec, k, vs, es, shifts, shift_step, nmod, moduli, out, rows_pad,
    # k_pad, im_first, plane, part): each inconsistency named before any CUDA call
    ok = dict(nvec=4, k=64, rows_pad=4, k_pad=32, shift_step=1, plane=4 * 32, part=3 * 4 * 32, out=1 << 20)

    def parts(**kw):
        a = ok | kw
        st.residues_karatsuba(1 << 20, a["nvec"], a["k"], 64, 1, 1 << 20, a["shift_step"], 3, 1 << 20, a["out"],
                              a["rows_pad"], a["k_pad"], False, a["plane"], a["part"], 0)

    for bad, words in [(dict(k_pad=24), "inconsistent sizes"), (dict(k=80), "inconsistent sizes"),
                       (dict(rows_pad=3), "inconsistent sizes"), (dict(shift_step=0), "inconsistent sizes"),
                       (dict(part=2 * 4 * 32), "inconsistent sizes"), (dict(nvec=-1), "nvec and k must be >= 0"),
                       (dict(out=(1 << 20) + 8), "16-byte aligned"),
                       (dict(plane=4 * 32 + 8, part=416), "16-byte aligned")]:
        with pytest.raises(UnsupportedProblem, match=words):
            parts(**bad)


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_real_fused_build_binds(real_toolchain, tmp_path, arch):
    """A fused modulus-group kernel of each arch (its default: the batched one-modulus
    kernel on sm_90a) compiles, speaks the fused ABI version, and its binding refuses a
    second group's modulus outside [2, 256] before any CUDA call, naming its position."""
    from ozaki_cutlass.generator import Epilogue, catalog
    from ozaki_cutlass.kernels.gemm import GroupGemm
    from ozaki_cutlass.kernels.library import UnsupportedProblem

    variant = catalog(arch, epilogue=Epilogue.PARTIAL_CRT)[0]
    (artifact,) = build([variant], tmp_path, toolchain=real_toolchain, progress=False).artifacts
    assert not [s for s in exported_functions(artifact.library_path) if "cutlass" in s.lower()]
    assert entry_points(variant) <= exported_functions(artifact.library_path)
    kernel = GroupGemm(artifact)  # opening it checks the ABI version (2) and the name
    g, kp = variant.group_size, variant.tile_k
    n = 16  # a whole TMA store row for one-byte and for uint32 partials
    moduli = [256, 255, 253, 251][:g] + [1] * g  # two groups; the second's first modulus is 1
    with pytest.raises(UnsupportedProblem, match=rf"moduli\[{g}\]=1: modulus outside \[2, 256\]"):
        kernel(4, n, kp, moduli, 1 << 20, 2 * g * kp, 1 << 20, 2 * g * kp, 1 << 20, n, 4 * n)
