"""The runtime finds artifacts: current ones through the cache key, and, on a machine
without a toolchain, ones built elsewhere (with a warning)."""

import logging

import pytest

from ozaki_cutlass.generator import Arch, ToolchainError, build, default_variant
from ozaki_cutlass.kernels.library import locate


def test_locate_current_then_without_toolchain(make_toolchain, out_dir, monkeypatch, caplog):
    variant = default_variant(Arch.SM80)
    toolchain = make_toolchain()
    (built,) = build([variant], out_dir, toolchain=toolchain, progress=False).artifacts
    # no nvcc on this "machine": the artifact built elsewhere is still found
    monkeypatch.setenv("OZAKI_NVCC", str(out_dir / "no-such-nvcc"))
    with caplog.at_level(logging.WARNING):
        found = locate(variant, out_dir, build_missing=False)
    assert found.directory == built.directory
    assert "without checking it is current" in caplog.text


def test_locate_missing_without_toolchain_says_so(out_dir, monkeypatch):
    monkeypatch.setenv("OZAKI_NVCC", str(out_dir / "no-such-nvcc"))
    with pytest.raises(ToolchainError, match="is not built and cannot be built here"):
        locate(default_variant(Arch.SM80), out_dir)
