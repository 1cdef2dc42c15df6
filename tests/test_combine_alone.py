"""scripts/combine_alone.py: its floor and which runs it compares (the timing runs on the
GPU; its shapes: tools.arguments.matrix_shape, tests/test_bench_output.py)."""

import pytest

from script_modules import SCRIPTS, load_script


@pytest.fixture(scope="module")
def ca():
    return load_script(SCRIPTS / "combine_alone.py")


def test_floor_counts_the_residue_bytes_the_output_and_c(ca):
    # 8192^2 entries, 15 residue bytes read and 8 written each, at 4000 GB/s
    assert ca.floor_ms(8192, 8192, 15, "calls", 4000.0) == pytest.approx(23 * 8192**2 / 4e12 * 1e3)
    assert ca.floor_ms(8192, 8192, 15, "no-source", 4000.0) == ca.floor_ms(8192, 8192, 15, "calls", 4000.0)
    assert ca.floor_ms(8192, 8192, 16, "beta", 4000.0) == pytest.approx(32 * 8192**2 / 4e12 * 1e3)


def test_differing_runs_compares_each_run_with_this_checkouts_and_calls_with_no_source(ca):
    outs = {("this", "calls"): 1, ("this", "no-source"): 1, ("this", "beta"): 7,
            ("other", "calls"): 1, ("other", "no-source"): 1, ("other", "beta"): 7}
    eq = lambda a, b: a == b  # noqa: E731
    assert ca.differing_runs(outs, eq) == set()
    assert ca.differing_runs({**outs, ("other", "beta"): 8}, eq) == {("other", "beta")}
    # the other library's calls differ from this one's and from its own no-source run
    assert ca.differing_runs({**outs, ("other", "calls"): 2}, eq) == {("other", "calls"), ("other", "no-source")}
    # one library alone: calls against no-source only (beta has its c term)
    alone = {("this", "calls"): 1, ("this", "no-source"): 2, ("this", "beta"): 9}
    assert ca.differing_runs(alone, eq) == {("this", "calls"), ("this", "no-source")}
    assert ca.differing_runs({("this", "beta"): 9}, eq) == set()


@pytest.mark.parametrize("argv", [["--rounds", "0"], ["--moduli", "15", "1"]])
def test_refuses_what_measures_nothing(ca, argv):
    with pytest.raises(SystemExit):
        ca.main(argv)
