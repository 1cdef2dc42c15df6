"""Fixtures for generator tests: fakes only, so no test here needs CUDA or minutes."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator_fakes import FakeNvcc, write_cutlass_stub, write_templates
from ozaki_cutlass.generator import resolve_toolchain


@pytest.fixture
def fake_nvcc(tmp_path: Path) -> FakeNvcc:
    return FakeNvcc(tmp_path / "bin")


@pytest.fixture
def templates_dir(tmp_path: Path) -> Path:
    return write_templates(tmp_path / "templates")


@pytest.fixture
def cutlass_root(tmp_path: Path) -> Path:
    return write_cutlass_stub(tmp_path / "cutlass")


@pytest.fixture
def make_toolchain(fake_nvcc, templates_dir, cutlass_root):
    """Resolve a toolchain of fakes; call again after changing a file to see the change."""

    def make(**overrides):
        arguments = {"nvcc": fake_nvcc.path, "templates_dir": templates_dir,
                     "cutlass_root": cutlass_root} | overrides
        return resolve_toolchain(**arguments)

    return make


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    return tmp_path / "out"


@pytest.fixture(autouse=True)
def _no_ambient_settings(monkeypatch):
    # Tests pass their settings explicitly; the developer's environment must not leak in.
    for name in ("OZAKI_NVCC", "CUDA_HOME", "CUTLASS_PATH", "OZAKI_CACHE_DIR",
                 "OZAKI_BUILD_JOBS"):
        monkeypatch.delenv(name, raising=False)

