"""nvcc from NVIDIA's pip wheels (issue 18, item 2): where it stands in the lookup order,
on the CPU with a stand-in, and a real variant compiled with it (marker nvcc; the test
extra installs the wheels, so CI proves it)."""

import importlib
import os
import stat
import sys
import types

import pytest

from ozaki_cutlass.generator import Arch, build, resolve_toolchain
from ozaki_cutlass.generator.toolchain import locate_nvcc
from ozaki_cutlass.generator.variants import StagesVariant


def _exe(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.fixture
def wheel_nvcc(tmp_path, monkeypatch):
    """cuda-pathfinder answering with an nvcc inside a site-packages folder."""
    nvcc = _exe(tmp_path / "lib" / "site-packages" / "nvidia" / "cu13" / "bin" / "nvcc")
    fake = types.SimpleNamespace(find_nvidia_binary_utility=lambda name: str(nvcc))
    monkeypatch.setitem(sys.modules, "cuda.pathfinder", fake)
    monkeypatch.setattr(importlib.import_module("cuda"), "pathfinder", fake, raising=False)
    for name in ("OZAKI_NVCC", "CUDA_HOME"):
        monkeypatch.delenv(name, raising=False)
    return nvcc


def test_the_wheels_come_after_the_overrides_and_before_path(wheel_nvcc, tmp_path, monkeypatch):
    assert locate_nvcc() == (wheel_nvcc.absolute(), "the NVIDIA toolkit wheels (cuda-pathfinder)")
    home = tmp_path / "cuda"
    _exe(home / "bin" / "nvcc")
    monkeypatch.setenv("CUDA_HOME", str(home))
    assert locate_nvcc() == ((home / "bin" / "nvcc").absolute(), "CUDA_HOME")
    mine = _exe(tmp_path / "mine" / "nvcc")
    monkeypatch.setenv("OZAKI_NVCC", str(mine))
    assert locate_nvcc() == (mine.absolute(), "OZAKI_NVCC")


def test_a_toolkit_outside_site_packages_is_left_to_path(wheel_nvcc, tmp_path, monkeypatch):
    elsewhere = _exe(tmp_path / "opt" / "cuda" / "bin" / "nvcc")
    sys.modules["cuda.pathfinder"].find_nvidia_binary_utility = lambda name: str(elsewhere)
    on_path = _exe(tmp_path / "path" / "nvcc")
    monkeypatch.setenv("PATH", str(on_path.parent))
    assert locate_nvcc() == (on_path, "PATH")


def test_no_nvcc_anywhere_names_the_extra(monkeypatch, tmp_path):
    fake = types.SimpleNamespace(find_nvidia_binary_utility=lambda name: None)
    monkeypatch.setitem(sys.modules, "cuda.pathfinder", fake)
    monkeypatch.setattr(importlib.import_module("cuda"), "pathfinder", fake, raising=False)
    for name in ("OZAKI_NVCC", "CUDA_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("ozaki_cutlass.generator.toolchain._FALLBACK_NVCC", tmp_path / "none")
    with pytest.raises(Exception, match=r"pip install 'ozaki-cutlass\[nvcc\]'"):
        locate_nvcc()


@pytest.mark.nvcc
def test_a_variant_compiles_with_the_pip_toolchain(monkeypatch, tmp_path):
    for name in ("OZAKI_NVCC", "CUDA_HOME"):
        monkeypatch.delenv(name, raising=False)
    nvcc, source = locate_nvcc()
    if source != "the NVIDIA toolkit wheels (cuda-pathfinder)":
        pytest.skip(f"the [nvcc] extra is not installed here (nvcc from {source})")
    toolchain = resolve_toolchain()
    assert toolchain.nvcc == nvcc and "release 13.0" in toolchain.nvcc_version
    variant = StagesVariant(arch=Arch.SM80)  # CUDA runtime, CCCL and our headers; quick to build
    (artifact,) = build([variant], tmp_path, toolchain=toolchain, progress=False).artifacts
    assert artifact.library_path.is_file() and os.path.getsize(artifact.library_path) > 0
