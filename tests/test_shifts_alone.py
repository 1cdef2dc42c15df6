"""scripts/shifts_alone.py: its floor and its arguments (the timing runs on the GPU)."""

import pytest

from script_modules import SCRIPTS, load_script


@pytest.fixture(scope="module")
def sa():
    return load_script(SCRIPTS / "shifts_alone.py")


def test_floor_is_one_read_of_the_int32_bound(sa):
    # 16384 x 1024 int32 entries read once at 4000 GB/s
    assert sa.floor_ms(16384, 1024, 4000.0) == pytest.approx(4 * 16384 * 1024 / 4e12 * 1e3)
    assert sa.floor_ms(2048, 2048, 2000.0) == pytest.approx(2 * sa.floor_ms(2048, 2048, 4000.0))


@pytest.mark.parametrize("argv", [["--rounds", "0"], ["--moduli", "1"], ["--shapes", "8x8x8"], ["--shapes"]])
def test_refuses_what_measures_nothing(sa, argv):
    with pytest.raises(SystemExit):
        sa.main(argv)
