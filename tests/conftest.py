import zlib

import numpy as np
import pytest

from ozaki_cutlass import dispatch

# What the package reads from the environment (ozaki_cutlass/config.py lists them all):
# settings that change what it chooses or computes, never taken from the developer's
# environment, and where nvcc and the built kernels are, which CPU tests pass themselves
# and GPU tests take as given (they build and load real kernels).
SETTINGS = ("OZAKI_TUNING_TABLE", "OZAKI_OVERLAP", "OZAKI_KARATSUBA_MIN", "OZAKI_SPECULATE", "OZAKI_GRAPHS")
TOOLCHAIN = ("OZAKI_NVCC", "OZAKI_CACHE_DIR", "OZAKI_BUILD_JOBS")

# Test modules read settings at collection too (tests/gpu/test_pipeline.py loads the
# tuning table): cleared for the whole session, before collection, restored after it.
_SESSION_ENV = pytest.MonkeyPatch()


def pytest_configure(config):
    for name in SETTINGS:
        _SESSION_ENV.delenv(name, raising=False)


def pytest_unconfigure(config):
    _SESSION_ENV.undo()


def _gpu_capability():
    from ozaki_cutlass.device.arch import compute_capability

    return compute_capability()


def pytest_collection_modifyitems(config, items):
    """GPU tests skip cleanly, with the reason, where no CUDA GPU is visible."""
    if not any("gpu" in item.keywords for item in items):
        return
    cc = _gpu_capability()
    if cc is not None:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU visible (GPU tests run on the device machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def nvcc_toolchain():
    """The toolchain the tests marked ``nvcc`` compile with. The README's test command
    installs it (the ``test`` extra brings the nvcc wheels and nvidia-cutlass), so where
    it cannot be resolved they fail, saying why, rather than skip: a skip would hide a
    broken toolchain on CI. Deselect them with ``-m "not nvcc"``."""
    from ozaki_cutlass.generator import ToolchainError, resolve_toolchain

    try:
        return resolve_toolchain()
    except ToolchainError as exc:
        pytest.fail(f"no toolchain for the tests marked nvcc: {exc} (install the test extra, or deselect "
                    "them with -m 'not nvcc')", pytrace=False)


@pytest.fixture
def rng(request):
    """A generator seeded from the test id: different data in every test, reproducible."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture(autouse=True)
def _package_defaults(request, monkeypatch):
    """Every test starts from the package's defaults, whatever the developer has set (a
    test that sets a variable itself still does, through monkeypatch), with no tuning
    table or auto-policy decision remembered from another test."""
    gpu = "gpu" in request.keywords
    for name in SETTINGS + (() if gpu else TOOLCHAIN):
        monkeypatch.delenv(name, raising=False)
    dispatch.forget_tables()
