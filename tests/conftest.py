import zlib

import numpy as np
import pytest


def _gpu_capability():
    from ozaki_cutlass._device import compute_capability

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


@pytest.fixture
def rng(request):
    """A generator seeded from the test id: different data in every test, reproducible."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
