"""The fused modulus-group variants (partial-CRT epilogue): legality, catalog, rendering."""

from __future__ import annotations

import dataclasses
import re

import jinja2
import pytest

from ozaki_cutlass.generator import (
    Arch,
    Epilogue,
    GemmVariant,
    IllegalVariantError,
    Schedule,
    catalog,
    default_variant,
    render,
)
from ozaki_cutlass.generator.render import (
    EPILOGUE_TEMPLATES,
    TEMPLATES,
    context,
    default_templates_dir,
    template_name,
)

FUSED_TEMPLATE = "int8_group_gemm_sm90.cu.j2"
FUSED = catalog("sm_90a", epilogue=Epilogue.PARTIAL_CRT)
FUSED_FULL = catalog(full=True, epilogue=Epilogue.PARTIAL_CRT)
needs_real_template = pytest.mark.skipif(
    not (default_templates_dir() / FUSED_TEMPLATE).is_file(),
    reason=f"{FUSED_TEMPLATE} is not in {default_templates_dir()}",
)


def fused(**fields) -> GemmVariant:
    base = dict(arch=Arch.SM90A, tile_m=128, tile_n=128, tile_k=128,
                schedule=Schedule.COOPERATIVE, stages=0, epilogue=Epilogue.PARTIAL_CRT,
                group_size=4)
    return GemmVariant(**(base | fields))


def test_names_carry_the_epilogue_tag_and_group_size():
    assert fused().name == "i8_sm90a_128x128x128_c1x1_coop_s0_pcrt_g4"
    assert fused(group_size=2, cluster_m=2).name == "i8_sm90a_128x128x128_c2x1_coop_s0_pcrt_g2"
    assert Epilogue("partial_crt") is Epilogue.PARTIAL_CRT


@pytest.mark.parametrize("group_size", [1, 2, 3, 4])
def test_every_group_size_is_legal_on_a_128x128_cooperative_tile(group_size):
    assert fused(group_size=group_size).group_size == group_size


@pytest.mark.parametrize("fields, reason", [
    (dict(group_size=5), "group_size must be in 1..4"),
    (dict(group_size=0), "group_size must be in 1..4"),
    (dict(arch=Arch.SM80, tile_k=64, warp_m=64, warp_n=64, warp_k=64,
          schedule=Schedule.MULTISTAGE, stages=4), "partial_crt epilogue exists on sm_90a only"),
    # 128 accumulators + 32 kept residue registers: ptxas spills (checked with CUDA 13.0).
    (dict(tile_n=256, group_size=2), "keeps 32 residue registers next to 128 accumulators"),
    (dict(tile_n=256, group_size=4), "keeps 96 residue registers next to 128 accumulators"),
    (dict(schedule=Schedule.PINGPONG, group_size=2), "keeps 32 residue registers next to 128 accumulators"),
])
def test_illegal_fused_variants_are_rejected_with_a_reason(fields, reason):
    with pytest.raises(IllegalVariantError, match=re.escape(reason)):
        fused(**fields)


def test_one_modulus_keeps_nothing_so_plain_tiles_fit():
    """G = 1 folds once, at the end: the plain kernel's 128-accumulator tiles are legal."""
    for fields in (dict(tile_m=256, cluster_n=2), dict(tile_n=256), dict(schedule=Schedule.PINGPONG)):
        assert fused(group_size=1, **fields).group_size == 1


def test_the_plain_store_still_takes_one_modulus():
    with pytest.raises(IllegalVariantError, match=re.escape("group_size must be 1 (got 4)")):
        fused(epilogue=Epilogue.INT32_STORE)


def test_fused_catalog_is_separate_and_the_default_catalog_unchanged():
    assert FUSED and all(v.epilogue is Epilogue.PARTIAL_CRT for v in FUSED)
    assert FUSED[0].name == "i8_sm90a_128x128x128_c1x1_coop_s0_pcrt_g4"
    assert catalog("sm_80", epilogue=Epilogue.PARTIAL_CRT) == []
    assert catalog("sm_80", full=True, epilogue="partial_crt") == []
    assert all(v.epilogue is Epilogue.INT32_STORE for v in catalog(full=True))
    assert catalog() == catalog(epilogue=Epilogue.INT32_STORE)
    assert catalog(epilogue=None) == catalog() + FUSED
    assert default_variant("sm_90a").epilogue is Epilogue.INT32_STORE


def test_fused_defaults_are_in_the_full_sweep_and_every_group_size_is_swept():
    assert set(FUSED) <= set(FUSED_FULL)
    assert {v.group_size for v in FUSED_FULL} == {1, 2, 3, 4}
    assert all(v.arch is Arch.SM90A for v in FUSED_FULL)


def test_names_are_unique_over_every_family():
    everything = catalog(full=True, epilogue=None)
    names = [v.name for v in everything]
    assert len(everything) == len(catalog(full=True)) + len(FUSED_FULL)
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("base", FUSED, ids=lambda v: v.name)
def test_changing_epilogue_or_group_size_changes_the_name(base):
    for field, values in (("epilogue", list(Epilogue)), ("group_size", [1, 2, 3, 4])):
        for value in values:
            if value == getattr(base, field):
                continue
            try:
                changed = dataclasses.replace(base, **{field: value})
            except IllegalVariantError:
                continue
            assert changed.name != base.name, (field, value)


def test_dict_round_trip():
    for v in FUSED:
        assert v.to_dict()["epilogue"] == "partial_crt"
        assert GemmVariant.from_dict(v.to_dict()) == v


# --- rendering ---------------------------------------------------------------------------
def test_template_and_context():
    v = FUSED[0]
    assert EPILOGUE_TEMPLATES[(Arch.SM90A, Epilogue.PARTIAL_CRT)] == FUSED_TEMPLATE
    assert template_name(v) == FUSED_TEMPLATE
    assert template_name(default_variant("sm_90a")) == TEMPLATES[Arch.SM90A]
    ctx = context(v)
    assert set(ctx) == set(context(default_variant("sm_90a"))) | {"group_size"}
    assert ctx["group_size"] == 4 and ctx["epilogue"] == "partial_crt"
    assert ctx["generated_by"].startswith(f"Generated by ozaki_cutlass.generator from {FUSED_TEMPLATE} ")
    # The plain template's context does not grow a group size.
    assert "group_size" not in context(default_variant("sm_90a"))


def test_the_fused_template_is_strict(templates_dir):
    (templates_dir / FUSED_TEMPLATE).write_text("// {{ generated_by }}\nG = {{ group_sise }};\n")
    with pytest.raises(jinja2.UndefinedError, match="group_sise"):
        render(FUSED[0], templates_dir=templates_dir)
    (templates_dir / FUSED_TEMPLATE).write_text("{{ group_size }} {{ cluster_m }} {{ symbol }}\n")
    assert render(FUSED[0], templates_dir=templates_dir) == f"4 1 {FUSED[0].symbol}\n"
    # The plain sm_90a template cannot use it.
    (templates_dir / TEMPLATES[Arch.SM90A]).write_text("{{ group_size }}\n")
    with pytest.raises(jinja2.UndefinedError, match="group_size"):
        render(default_variant("sm_90a"), templates_dir=templates_dir)


@needs_real_template
@pytest.mark.parametrize("variant", FUSED, ids=lambda v: v.name)
def test_real_template_renders_the_defaults(variant):
    text = render(variant)
    assert text == render(variant)
    assert text.splitlines()[0] == (f"// Generated by ozaki_cutlass.generator from {FUSED_TEMPLATE} "
                                    f"for variant {variant.name}; do not edit.")
    for entry_point in ("run", "workspace_size", "name", "abi_version", "last_error"):
        assert f"{variant.symbol}_{entry_point}(" in text
    assert f"constexpr int kGroupSize = {variant.group_size};" in text
    assert "ozaki::PartialCrtEvt<kGroupSize>" in text and "ozaki::GroupMmaSm90<" in text
    assert "{{" not in text and "{%" not in text and "#error \"" + variant.name + ": unknown" not in text


@needs_real_template
def test_real_template_renders_the_full_fused_sweep():
    for variant in FUSED_FULL:
        text = render(variant)
        assert f"{variant.symbol}_run(" in text, variant.name
        assert f"cute::Int<{variant.tile_m}>, cute::Int<{variant.tile_n}>" in text
