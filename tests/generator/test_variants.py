"""Variants: names, legality, the catalog."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from ozaki_cutlass.generator import (
    Arch,
    Epilogue,
    GemmVariant,
    IllegalVariantError,
    Schedule,
    catalog,
    default_variant,
)

FULL = catalog(full=True)
C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def sm90(**fields) -> GemmVariant:
    base = dict(arch=Arch.SM90A, tile_m=128, tile_n=128, tile_k=128,
                schedule=Schedule.COOPERATIVE, stages=0)
    return GemmVariant(**(base | fields))


def sm80(**fields) -> GemmVariant:
    base = dict(arch=Arch.SM80, tile_m=128, tile_n=128, tile_k=64, warp_m=64, warp_n=64,
                warp_k=64, schedule=Schedule.MULTISTAGE, stages=4)
    return GemmVariant(**(base | fields))


def test_full_catalog_names_are_unique():
    names = [v.name for v in FULL]
    assert len(FULL) > 500  # both sweeps, not a stub
    assert len(set(names)) == len(names)
    assert len(set(FULL)) == len(FULL)


def test_names_are_c_identifiers_and_symbols_prefix_them():
    for v in FULL:
        assert C_IDENTIFIER.fullmatch(v.name), v.name
        assert v.symbol == "ozaki_" + v.name


def test_name_examples():
    assert default_variant("sm_90a").name == "i8_sm90a_256x128x128_c1x2_coop_s0_int32_g1"
    assert catalog("sm_90a")[1].name == "i8_sm90a_128x256x128_c1x1_coop_s0_int32_g1"
    assert dataclasses.replace(catalog("sm_90a")[1], swizzle=8).name.endswith("_g1_sw8")
    assert default_variant(Arch.SM80).name == "i8_sm80_128x256x64_w64x64x64_ms_s3_int32_g1"


# Alternative values tried for each field; a legal variant made by changing one field
# must get another name.
ALTERNATIVES = {
    "arch": list(Arch),
    "tile_m": [64, 128, 256],
    "tile_n": [64, 128, 192, 256],
    "tile_k": [32, 64, 128],
    "cluster_m": [1, 2, 4],
    "cluster_n": [1, 2, 4],
    "schedule": list(Schedule),
    "stages": [0, 2, 3, 4, 5, 6],
    "warp_m": [0, 32, 64],
    "warp_n": [0, 32, 64],
    "warp_k": [0, 32, 64],
    "epilogue": list(Epilogue),
    "group_size": [1, 2, 3, 4],
    "swizzle": [1, 2, 4, 8],
}


def test_alternatives_cover_every_field():
    assert set(ALTERNATIVES) == {f.name for f in dataclasses.fields(GemmVariant)}


@pytest.mark.parametrize("base", catalog(epilogue=None), ids=lambda v: v.name)
def test_changing_any_single_field_changes_the_name(base):
    for field, values in ALTERNATIVES.items():
        for value in values:
            if value == getattr(base, field):
                continue
            try:
                changed = dataclasses.replace(base, **{field: value})
            except IllegalVariantError:
                continue
            assert changed.name != base.name, (field, value)


def test_fields_without_a_legal_alternative_today_are_still_in_the_name():
    # int32_store admits only group_size 1 and is the only epilogue; the partial-CRT
    # epilogue will make the check above cover these two as well.
    for v in catalog():
        assert v.name.endswith(f"_int32_g{v.group_size}")


def test_dict_round_trip_is_canonical():
    for v in catalog():
        data = v.to_dict()
        assert json.loads(json.dumps(data)) == data
        assert data["arch"] == v.arch.value and data["schedule"] == v.schedule.value
        assert GemmVariant.from_dict(data) == v
    with pytest.raises(ValueError, match="unknown GemmVariant fields: colour"):
        GemmVariant.from_dict(default_variant("sm_80").to_dict() | {"colour": 1})


def test_variants_are_frozen_and_hashable():
    v = default_variant("sm_90a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.tile_m = 64  # type: ignore[misc]
    assert {v: 1}[default_variant("sm_90a")] == 1


@pytest.mark.parametrize("make, fields, reason", [
    (sm90, dict(tile_m=64), "tile_m=64 must be a multiple of 128"),
    (sm90, dict(tile_m=96, schedule=Schedule.PINGPONG), "tile_m=96 must be a multiple of 64"),
    (sm90, dict(tile_n=24), "tile_n=24 must be a multiple of 16"),
    (sm90, dict(tile_n=512), "tile_n=512"),
    (sm90, dict(tile_k=32), "tile_k=32 must be a multiple of 64"),
    (sm90, dict(cluster_m=3), "cluster_m=3 must be 1, 2, 4 or 8"),
    (sm90, dict(cluster_m=4, cluster_n=4), "exceeds the portable cluster size 8"),
    (sm90, dict(tile_m=256, tile_n=256), "256 int32 accumulator registers"),
    (sm90, dict(stages=1), "stages=1 must be 0 (auto) or at least 2"),
    (sm90, dict(tile_n=256, stages=5), "shared memory: 5 stages x 49152 bytes"),
    (sm90, dict(warp_m=64), "warp_m/warp_n/warp_k are sm_80 fields"),
    (sm90, dict(schedule=Schedule.MULTISTAGE), "schedule multistage belongs to sm_80"),
    (sm90, dict(group_size=2), "group_size must be 1 (got 2)"),
    (sm90, dict(group_size=5), "group_size must be in 1..4"),
    (sm80, dict(schedule=Schedule.PINGPONG), "schedule pingpong belongs to sm_90a"),
    (sm80, dict(cluster_m=2), "no thread block clusters"),
    (sm80, dict(warp_m=0), "needs a warp tile"),
    (sm80, dict(warp_n=12), "multiple of the 16x8x32 mma.sync shape"),
    (sm80, dict(warp_m=48), "multiple of the warp tile"),
    (sm80, dict(tile_k=256, warp_k=256), "tile_k=256 must be 32, 64 or 128"),
    (sm80, dict(tile_m=256, tile_n=256, warp_m=32, warp_n=32), "64 warps per CTA"),
    (sm80, dict(tile_m=256, tile_n=256), "16 warps leave 128 registers"),
    (sm80, dict(stages=2), "stages=2 must be in 3..6"),
    (sm80, dict(tile_n=256, tile_k=128, warp_k=128), "shared memory: 4 stages x 49152 bytes"),
])
def test_illegal_variants_are_rejected_with_a_reason(make, fields, reason):
    with pytest.raises(IllegalVariantError, match=re.escape(reason)):
        make(**fields)


def test_the_error_names_the_variant_fields():
    with pytest.raises(IllegalVariantError, match=r"illegal sm_90a variant arch=sm_90a, tile_m=64"):
        sm90(tile_m=64)


@pytest.mark.parametrize("fields", [dict(arch="sm_90a"), dict(tile_m=True), dict(stages=2.0)])
def test_wrong_field_types_are_type_errors(fields):
    with pytest.raises(TypeError, match="must be"):
        sm90(**fields)


def test_catalog_defaults_are_small_legal_and_in_the_full_sweep():
    assert len(catalog("sm_90a")) == 4 and len(catalog("sm_80")) == 2
    assert catalog() == catalog(Arch.SM90A) + catalog(Arch.SM80)
    full = set(FULL)
    for arch in Arch:
        assert default_variant(arch) == catalog(arch)[0]
        assert all(v.arch is arch for v in catalog(arch, full=True))
        assert set(catalog(arch)) <= full


def test_catalog_pattern_is_a_glob_on_the_name():
    pingpong = catalog(pattern="*_pp_*", full=True)
    assert pingpong and all(v.schedule is Schedule.PINGPONG for v in pingpong)
    assert catalog("sm_80", pattern="*_pp_*", full=True) == []
    one = default_variant("sm_90a")
    assert catalog(pattern=one.name, full=True) == [one]
    assert catalog(full=True) == FULL  # deterministic order
