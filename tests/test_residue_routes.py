"""scripts/residue_routes.py: the warps' largest e and the route shares (CPU)."""

import numpy as np
import pytest

from script_modules import SCRIPTS, load_script

routes_script = load_script(SCRIPTS / "residue_routes.py")


def test_a_warp_is_512_entries_of_the_padded_vectors_laid_end_to_end():
    # k = 20 pads to 32: 16 vectors fill one warp of 512 entries; the 17th starts the next
    ints = np.ones((17, 20))
    ints[3, 19] = 2.0**55 + 2.0**3      # 56 bits: e = 3, in the first warp
    ints[16, 0] = -(2.0**60)            # 61 bits: e = 8, alone in the second warp
    assert routes_script.warp_exponents(ints).tolist() == [3, 8]


def test_integers_below_2_to_53_have_e_0_and_zeros_count_as_0():
    ints = np.zeros((2, 512))
    ints[0, :5] = [2.0**53 - 1, -(2.0**52), 1.0, 0.0, -3.0]
    assert routes_script.warp_exponents(ints).tolist() == [0, 0]


def test_route_shares_split_at_the_header_thresholds():
    text = SCRIPTS.parent.joinpath(*routes_script.HEADER).read_text()
    wide4 = routes_script.header_constant("kWide4MaxExp", text)
    wide5 = routes_script.header_constant("kWideMaxExp", text)
    assert 0 < wide4 < wide5
    emax = np.array([0, 0, wide4, wide4 + 1, wide5, wide5 + 1, 200, 1])
    assert list(routes_script.routes(emax, wide4, wide5).values()) == [0.25, 0.25, 0.25, 0.25]


def test_a_constant_missing_from_the_header_is_an_error():
    with pytest.raises(SystemExit, match="kNoSuchConstant"):
        routes_script.header_constant("kNoSuchConstant", "inline constexpr int kOther = 1;")
