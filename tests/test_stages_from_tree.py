"""kernels.stages.stages_from_tree: the stage kernels of another checkout's templates, built
with a toolchain of that tree and cached under their own key (the build and the loading are
stubbed here; the device scripts' --other runs them)."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from ozaki_cutlass.generator import Arch, StagesVariant
from ozaki_cutlass.kernels import stages


def test_a_folder_without_the_templates_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="stages.cu.j2"):
        stages.stages_from_tree(Arch.SM90A, tmp_path)


def test_the_tree_s_templates_are_built_and_loaded(tmp_path, monkeypatch):
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "stages.cu.j2").write_text("")
    seen = {}

    def resolve(*, templates_dir=None, **kw):
        seen["templates_dir"] = Path(templates_dir)
        return "toolchain of the tree"

    def build(variants, out_dir=None, *, progress=True, toolchain=None, **kw):
        seen["variants"], seen["out_dir"], seen["toolchain"] = list(variants), out_dir, toolchain
        return SimpleNamespace(artifacts=["artifact of the tree"])

    monkeypatch.setattr(stages, "resolve_toolchain", resolve)
    monkeypatch.setattr(stages, "build", build)
    monkeypatch.setattr(stages, "Stages", lambda art: ("Stages", art))
    got = stages.stages_from_tree("sm_90a", tmp_path, "/cache")
    assert got == ("Stages", "artifact of the tree")
    assert seen == {"templates_dir": tmp_path / "templates", "variants": [StagesVariant(arch=Arch.SM90A)],
                    "out_dir": "/cache", "toolchain": "toolchain of the tree"}


def test_stage_libraries_names_this_checkouts_and_the_others_where_given(monkeypatch):
    monkeypatch.setattr(stages, "load_stages", lambda arch: ("this", arch))
    monkeypatch.setattr(stages, "stages_from_tree", lambda arch, tree: ("tree", arch, tree))
    assert stages.stage_libraries("sm_90a") == {"this": ("this", "sm_90a")}
    assert stages.stage_libraries("sm_90a", ["/t"]) == {"this": ("this", "sm_90a"), "other": ("tree", "sm_90a", "/t")}
    # several trees: each by its path as given, in the order given
    libs = stages.stage_libraries("sm_90a", ["/t", "b/u"])
    assert list(libs) == ["this", "/t", "b/u"] and libs["b/u"] == ("tree", "sm_90a", "b/u")
    # one tree given alone is that tree, not its characters
    assert stages.stage_libraries("sm_90a", "/t") == stages.stage_libraries("sm_90a", ["/t"])
    assert stages.stage_libraries("sm_90a", Path("/t"))["other"] == ("tree", "sm_90a", Path("/t"))


@pytest.mark.parametrize("others", [["/t", "/t"], ["this"], ["/t", "this"]])
def test_stage_libraries_refuses_a_tree_twice_or_named_this(monkeypatch, others):
    monkeypatch.setattr(stages, "load_stages", lambda arch: ("this", arch))
    monkeypatch.setattr(stages, "stages_from_tree", lambda arch, tree: ("tree", arch, tree))
    with pytest.raises(ValueError, match="distinct and none named 'this'"):
        stages.stage_libraries("sm_90a", others)
