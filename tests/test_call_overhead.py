"""scripts/call_overhead.py: its shapes and its arithmetic (the timing runs on the GPU)."""

import argparse

import pytest

from script_modules import SCRIPTS, load_script


@pytest.fixture(scope="module")
def co():
    return load_script(SCRIPTS / "call_overhead.py")


def test_shapes(co):
    assert co.parse_shape("4096") == (4096, 4096, 4096)
    assert co.parse_shape("8192x8192X2048") == (8192, 8192, 2048)
    for bad in ("8x8", "0x1x1", "axbxc"):
        with pytest.raises((argparse.ArgumentTypeError, ValueError)):
            co.parse_shape(bad)


def test_row_sets_the_wait_against_the_back_to_back_time(co):
    r = co.row((1000, 2000, 500), [3.0, 2.0, 9.0], 1.5, [1.4, 1.6, 1.5], [0.5, 0.3, 0.4])
    assert (r["alone_ms"], r["phases_ms"], r["enqueue_ms"]) == (3.0, 1.5, 0.4)
    assert r["waiting_ms"] == pytest.approx(1.5)
    assert r["alone_tflops"] == pytest.approx(2e9 / 3.0 / 1e9)
    assert r["back_to_back_tflops"] == pytest.approx(2e9 / 1.5 / 1e9)
    assert "waits 1.500 ms" in co.format_row(r)
