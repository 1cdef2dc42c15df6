"""The first call that finds a kernel missing builds every kernel the dispatcher may pick
on its arch, in one parallel build (issue 18, item 1): the orchestration with the loaders
replaced, and kernels.library.build_missing against a fake nvcc."""

import logging

import pytest

from ozaki_cutlass import dispatch
from ozaki_cutlass.generator import Arch, StagesVariant, catalog, default_variant
from ozaki_cutlass.kernels.library import build_missing
from ozaki_cutlass.paths import launch

NO_TABLE = ({"entries": []}, "no table")


@pytest.fixture
def nvcc_env(fake_nvcc, cutlass_root, tmp_path, monkeypatch):
    """The fake nvcc and CUTLASS found through the environment, as a user's call finds them."""
    monkeypatch.setenv("OZAKI_NVCC", str(fake_nvcc.path))
    monkeypatch.setenv("CUTLASS_PATH", str(cutlass_root))
    monkeypatch.setenv("OZAKI_CACHE_DIR", str(tmp_path / "cache"))
    return fake_nvcc


def test_the_targets_are_what_the_dispatcher_may_pick():
    targets = dispatch.kernel_targets(Arch.SM90A, NO_TABLE)
    assert len(targets) == len(set(targets))
    assert targets[-1] == StagesVariant(arch=Arch.SM90A)
    assert default_variant(Arch.SM90A) in targets
    for cand in dispatch.builtin_candidates(Arch.SM90A):
        assert set(cand.kernels(15)) <= set(targets)   # fused kernels with their group siblings
    assert set(catalog(Arch.SM90A)) <= set(targets)
    assert all(v.arch is Arch.SM90A for v in targets)


class Loaders:
    """Stand-ins for the kernel loaders: missing until ``build_missing`` ran."""

    def __init__(self, monkeypatch):
        self.built, self.builds, self.loaded = False, [], []
        for name in ("load_stages", "load_int8_gemm", "load_group_gemm"):
            monkeypatch.setattr(launch, name, self._loader(name))
        monkeypatch.setattr(launch, "build_missing", self._build)

    def _loader(self, name):
        def load(variant, build_missing=True):
            if not self.built and not build_missing:
                raise FileNotFoundError(f"{variant} is not built")
            self.loaded.append((name, variant))
            return object()
        return load

    def _build(self, variants):
        self.builds.append(list(variants))
        self.built = True
        return len(variants)


@pytest.mark.parametrize("path", ["staged", "fused"])
def test_a_missing_kernel_builds_them_all_once(monkeypatch, path):
    loaders = Loaders(monkeypatch)
    problem = dispatch.Problem(4096, 4096, 4096, 15, Arch.SM90A)
    kern = launch.resolve_kernels(None, path, Arch.SM90A, problem, NO_TABLE)
    assert kern.path == path
    assert loaders.builds == [dispatch.kernel_targets(Arch.SM90A, NO_TABLE, 15)]
    if path == "fused":  # after the build, every group size the call launches is loaded too
        sizes = {v.group_size for name, v in loaders.loaded if name == "load_group_gemm"}
        assert sizes == {v.group_size for v in dispatch.Candidate(path="fused", variant=kern.variant).kernels(15)}
    launch.resolve_kernels(None, path, Arch.SM90A, problem, NO_TABLE)
    assert len(loaders.builds) == 1  # built: nothing more


def test_build_missing_builds_only_what_is_missing_and_says_so_first(nvcc_env, caplog):
    variants = [default_variant(Arch.SM80), StagesVariant(arch=Arch.SM80)]
    with caplog.at_level(logging.WARNING, logger="ozaki_cutlass.kernels.library"):
        assert build_missing(variants, progress=False) == 2
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("building 2 kernels for sm_80, ") and "about" in line and "ozaki-cutlass build" in line
    assert sorted(nvcc_env.compiled()) == sorted(v.name for v in variants)
    caplog.clear()
    assert build_missing(variants + [catalog(Arch.SM80)[1]], progress=False) == 1  # the others are cached
    assert "building 1 kernel for sm_80" in caplog.text
