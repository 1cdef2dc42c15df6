"""The tile-local prologue prototype as data: naming, legality, rendering, opt-in build
targets and the path argument's refusals (CPU only; the nvcc build is marked `nvcc`)."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess

import jinja2
import numpy as np
import pytest

import ozaki_cutlass
from ozaki_cutlass.generator import Arch, IllegalVariantError, build, catalog, load_metadata, render
from ozaki_cutlass.generator.prologue import (PrologueVariant, default_prologue_variant,
                                              prologue_catalog)
from ozaki_cutlass.generator.render import PROLOGUE_TEMPLATE, context, default_templates_dir, template_name
from ozaki_cutlass.generator.artifact import variant_from_dict

DEFAULT = dict(tile_m=128, tile_n=128, tile_k=64, warp_m=64, warp_n=32)


def test_name_is_derived_from_every_field():
    v = PrologueVariant(**DEFAULT)
    assert v.name == "prologue_sm80_128x128x64_w64x32"
    assert v.symbol == "ozaki_" + v.name
    names = {v.name}
    for field, other in (("tile_m", 64), ("tile_n", 64), ("warp_m", 32), ("warp_n", 16)):
        w = dataclasses.replace(v, **{field: other})
        assert w.name not in names, field
        names.add(w.name)


def test_names_never_collide_with_the_gemm_catalog():
    gemm_names = {v.name for v in catalog(epilogue=None)}
    assert not gemm_names & {v.name for v in prologue_catalog()}


def test_the_default_is_the_catalog_entry():
    v = default_prologue_variant()
    assert prologue_catalog() == [v]
    assert prologue_catalog("i8_*") == []


@pytest.mark.parametrize("changes, words", [
    (dict(tile_k=32), "tile_k=32 must be 64"),
    (dict(warp_m=24), "multiple of the 16x8"),
    (dict(tile_m=96, warp_m=64), "multiple of the warp tile"),
    (dict(warp_m=128, warp_n=128), "registers"),
    (dict(arch=Arch.SM90A), "sm_80"),
    (dict(warp_m=16, tile_n=8, warp_n=8), "split evenly"),
])
def test_illegal_variants_say_why(changes, words):
    with pytest.raises(IllegalVariantError, match=words):
        PrologueVariant(**(DEFAULT | changes))


def test_field_types_are_checked():
    with pytest.raises(TypeError):
        PrologueVariant(**(DEFAULT | dict(tile_m=True)))
    with pytest.raises(TypeError):
        PrologueVariant(**(DEFAULT | dict(arch="sm_80")))


def test_dict_round_trip_through_the_artifact_reader():
    v = default_prologue_variant()
    data = v.to_dict()
    assert data["kind"] == "prologue"
    assert variant_from_dict(data) == v
    with pytest.raises(ValueError, match="unknown"):
        PrologueVariant.from_dict(data | {"stages": 3})


def test_render_is_strict_and_instantiates_the_variant():
    v = PrologueVariant(**(DEFAULT | dict(tile_n=64, warp_n=32)))
    assert template_name(v) == PROLOGUE_TEMPLATE
    ctx = context(v)
    assert set(ctx) == {"generated_by", "name", "symbol", "tile_m", "tile_n", "tile_k", "warp_m", "warp_n"}
    text = render(v)
    assert "ozaki::prologue::Kernel<128, 64, 64, 64, 32>" in text
    for entry in ("run", "abi_version", "name", "last_error"):
        assert f"OZAKI_EXPORT int {v.symbol}_{entry}(" in text or f"{v.symbol}_{entry}(void)" in text
    assert f'return "{v.name}";' in text
    assert render(v) == text  # deterministic
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(default_templates_dir()),
                             undefined=jinja2.StrictUndefined)
    ctx.pop("warp_n")
    with pytest.raises(jinja2.UndefinedError):
        env.get_template(PROLOGUE_TEMPLATE).render(ctx)


@pytest.mark.nvcc
def test_cache_key_covers_the_prologue_header(nvcc_toolchain):
    headers = nvcc_toolchain.headers_included_by(render(default_prologue_variant()))
    assert {"ozaki/prologue_gemm.h", "ozaki/residue_arith.h", "ozaki/stage_launch.cuh",
            "ozaki/mma_sm80_s8_wrap.h"} <= set(headers)


def test_the_default_build_leaves_the_prototype_out_and_a_pattern_brings_it_in():
    from ozaki_cutlass.tools.cli import _build_targets

    assert not [t for t in _build_targets(Arch.SM80, None) if isinstance(t, PrologueVariant)]
    assert not [t for t in _build_targets(Arch.SM90A, None) if isinstance(t, PrologueVariant)]
    assert _build_targets(Arch.SM80, "prologue_*") == [default_prologue_variant()]
    assert _build_targets(Arch.SM90A, "prologue_*") == []  # an sm_80 kernel


# --- the path argument (refused before any GPU work) --------------------------------
def test_an_unknown_path_lists_prologue():
    a = np.ones((2, 2))
    with pytest.raises(ValueError, match="prologue"):
        ozaki_cutlass.gemm(a, a, path="prolog")


def test_prologue_refuses_kernel_choice():
    a = np.ones((2, 2))
    with pytest.raises(ValueError, match="kernel= chooses staged or fused"):
        ozaki_cutlass.gemm(a, a, path="prologue", kernel="i8_sm80_128x128x64_w64x64x64_ms_s4_int32_g1")


def test_prologue_refuses_prepared_operands():
    from ozaki_cutlass.call import prologue_refusal as refusal

    assert "prepared operands" in refusal(prepared=True, kernel=None)
    assert refusal(prepared=False, kernel=None) is None


def test_auto_dispatch_never_names_the_prologue_path():
    from ozaki_cutlass import dispatch

    assert "prologue" not in dispatch.PATHS


# --- one real build -------------------------------------------------------------------
@pytest.mark.nvcc
def test_real_build_of_the_prologue_prototype(tmp_path, capsys, nvcc_toolchain):
    toolchain = nvcc_toolchain
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) not found")
    v = default_prologue_variant()
    report = build([v], tmp_path, toolchain=toolchain)
    (artifact,) = report.artifacts
    assert report.compiled == (v.name,)
    result = subprocess.run(["nm", "-D", "--defined-only", str(artifact.library_path)],
                            capture_output=True, text=True, check=True)
    exported = {line.split()[-1] for line in result.stdout.splitlines() if line.split()[1:2] == ["T"]}
    assert {f"{v.symbol}_{e}" for e in ("run", "name", "abi_version", "last_error")} <= exported
    assert not [s for s in exported if "cutlass" in s.lower()]
    log = (artifact.directory / "build.log").read_text()
    assert "compute_80" in log
    # the library loads without a GPU and refuses, before any CUDA call, what it cannot do
    from ozaki_cutlass.kernels.library import UnsupportedProblem
    from ozaki_cutlass.kernels.prologue import PrologueGemm

    lib = PrologueGemm(artifact)
    ok = dict(m=4, n=4, n_out=4, k=2**18, k_begin=0, k_len=2**17 - 16, moduli=(256, 255), a=16, a_vs=2**18,
              a_es=1, mu=16, b=16, b_vs=2**18, b_es=1, nu=16, c=16, ldc=4, plane_stride=16)
    for bad, words in ((dict(k_len=2**17), "2\\^17"), (dict(moduli=(257,)), "outside"),
                       (dict(n_out=3), "bad sizes"), (dict(ldc=2), "ldc")):
        with pytest.raises(UnsupportedProblem, match=words):
            lib(**(ok | bad))
    with capsys.disabled():
        print(f"\n  real build of {v.name}: {load_metadata(artifact.directory)['build_seconds']:.1f} s")
