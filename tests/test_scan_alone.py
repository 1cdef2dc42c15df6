"""scripts/scan_alone.py: its floor and its arguments (the timing runs on the GPU)."""

import pytest

from script_modules import SCRIPTS, load_script


@pytest.fixture(scope="module")
def sa():
    return load_script(SCRIPTS / "scan_alone.py")


def test_floor_counts_both_operands_and_the_coarse_byte_in_accurate_mode(sa):
    # 4096 x 4096 x 65536: 8 bytes read per entry of both operands (+ 1 written, accurate)
    entries = (4096 + 4096) * 65536
    assert sa.floor_ms(4096, 4096, 65536, True, 4000.0) == pytest.approx(9 * entries / 4e12 * 1e3)
    assert sa.floor_ms(4096, 4096, 65536, False, 4000.0) == pytest.approx(8 * entries / 4e12 * 1e3)


@pytest.mark.parametrize("argv", [["--rounds", "0"], ["--calls", "8x8"], ["--mode", "exact"], ["--moduli", "1"],
                                  ["--stage", "combine"]])
def test_refuses_what_measures_nothing(sa, argv):
    with pytest.raises(SystemExit):
        sa.main(argv)


def test_inner_outputs_are_contract_buffers(sa):
    """The buffers --stage inner compares are the contract's own (a renamed buffer fails here,
    not on the device), and exclude the two the inner pass does not write."""
    from ozaki_cutlass.paths.contract import contract_buffers

    names = set(contract_buffers("a", 300, 70))
    assert set(sa.INNER_OUTPUTS) <= names
    assert names - set(sa.INNER_OUTPUTS) == {"logq_a", "s1_a"}
