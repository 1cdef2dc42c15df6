"""scripts/residues_alone.py: its shapes and its floor (the timing runs on the GPU)."""

import argparse

import pytest

from script_modules import SCRIPTS, load_script


@pytest.fixture(scope="module")
def ra():
    return load_script(SCRIPTS / "residues_alone.py")


def test_shapes(ra):
    assert ra.parse_shape("4096") == (4096, 4096)
    assert ra.parse_shape("8192X2048") == (8192, 2048)
    for bad in ("8x8x8", "0x16", "axb", "64x8"):  # 64x8: k not a multiple of 16
        with pytest.raises((argparse.ArgumentTypeError, ValueError)):
            ra.parse_shape(bad)


def test_calls(ra):
    assert ra.parse_call("4096x4096x4096") == (4096, 4096, 4096)
    assert ra.parse_call("8192X8192x2048") == (8192, 8192, 2048)
    assert ra.parse_call("4096") == (4096, 4096, 4096)
    for bad in ("8x8", "0x16x16", "axbxc", "64x64x8", "8"):  # 64x64x8 and 8: k not a multiple of 16
        with pytest.raises((argparse.ArgumentTypeError, ValueError)):
            ra.parse_call(bad)


def test_calls_and_shapes_are_one_or_the_other(ra):
    with pytest.raises(SystemExit):
        ra.main(["--calls", "4096x4096x4096", "--shapes", "4096"])


def test_floor_counts_the_operand_and_one_byte_per_modulus(ra):
    # 8192 x 2048 entries, 8 bytes read and 15 written each, at 4000 GB/s
    assert ra.floor_ms(8192, 2048, 15, 4000.0) == pytest.approx(23 * 8192 * 2048 / 4e12 * 1e3)
    assert ra.floor_ms(8192, 2048, 17, 4000.0) == pytest.approx(25 * 8192 * 2048 / 4e12 * 1e3)


@pytest.mark.parametrize("argv", [["--rounds", "0"], ["--moduli", "40"]])
def test_refuses_what_measures_nothing(ra, argv):
    with pytest.raises(SystemExit):
        ra.main(argv)
