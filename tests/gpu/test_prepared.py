"""ozaki_cutlass.prepare: an operand quantized once gives the bits of the unprepared call,
and is refused, with the reason, wherever its settings or shape do not fit the call."""

import numpy as np
import pytest

import ozaki_cutlass
from ozaki_cutlass import reference
from ozaki_cutlass.numerics.accuracy import random_matrix, same_bits

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("mode", ["fast", "accurate"])
@pytest.mark.parametrize("count", [9, 15, 20])
def test_left_operand_against_many(rng, mode, count):
    a = random_matrix(130, 300, 1.0, rng)
    pa = ozaki_cutlass.prepare(a, "left", moduli=count, mode=mode)
    for n in (1, 77, 260):
        b = random_matrix(300, n, 2.0, rng)
        want = reference.gemm(a, b, moduli=count, mode=mode)
        assert same_bits(ozaki_cutlass.gemm(pa, b), want)                         # settings inherited
        assert same_bits(ozaki_cutlass.gemm(pa, b, moduli=count, mode=mode), want)


@pytest.mark.parametrize("mode", ["fast", "accurate"])
def test_right_operand_layouts_and_both_prepared(rng, mode):
    cp = pytest.importorskip("cupy")
    a = random_matrix(90, 200, 0.5, rng)
    b = random_matrix(200, 70, 4.0, rng)
    c = random_matrix(90, 70, 1.0, rng)
    want = reference.gemm(a, b, c=c, alpha=0.75, beta=-2.0, moduli=16, mode=mode)
    # row-major B (its columns are packed), Fortran-order B, B given transposed
    for pb in (ozaki_cutlass.prepare(cp.asarray(b), "right", moduli=16, mode=mode),
               ozaki_cutlass.prepare(cp.asfortranarray(cp.asarray(b)), "right", moduli=16, mode=mode),
               ozaki_cutlass.prepare(cp.asarray(b.T.copy()), "right", trans=True, moduli=16, mode=mode)):
        got = ozaki_cutlass.gemm(cp.asarray(a), pb, c=cp.asarray(c), alpha=0.75, beta=-2.0)
        assert same_bits(cp.asnumpy(got), want)
    pa = ozaki_cutlass.prepare(cp.asarray(a), "left", moduli=16, mode=mode)
    pb = ozaki_cutlass.prepare(cp.asarray(b), "right", moduli=16, mode=mode)
    got = ozaki_cutlass.gemm(pa, pb, c=cp.asarray(c), alpha=0.75, beta=-2.0)
    assert isinstance(got, cp.ndarray) and same_bits(cp.asnumpy(got), want)


def test_nonfinite_entries_in_a_prepared_operand(rng):
    a = random_matrix(40, 60, 1.0, rng)
    b = random_matrix(60, 30, 1.0, rng)
    a[3, 7], a[10, 0], b[5, 2] = np.nan, np.inf, -np.inf
    pa = ozaki_cutlass.prepare(a, "left", moduli=14)
    assert same_bits(ozaki_cutlass.gemm(pa, b), reference.gemm(a, b, moduli=14))


def test_mismatches_are_refused(rng):
    a = random_matrix(20, 30, 1.0, rng)
    b = random_matrix(30, 10, 1.0, rng)
    pa = ozaki_cutlass.prepare(a, "left", moduli=15, mode="fast")
    cases = [
        (dict(a=b.T.copy(), b=ozaki_cutlass.prepare(a, "left")), "prepared with side='right'"),
        (dict(a=pa, b=random_matrix(31, 10, 1.0, rng)), "inner dimensions"),
        (dict(a=pa, b=b, moduli=16), "prepared for 15 moduli, the call asks for 16"),
        (dict(a=pa, b=b, mode="accurate"), "prepared for mode='fast'"),
        (dict(a=pa, b=b, trans_a=True), "prepare\\(trans=True\\)"),
        (dict(a=pa, b=b, path="fused"), "staged path"),
        (dict(a=pa, b=b, policy="native"), "not on prepared operands"),
        (dict(a=pa, b=ozaki_cutlass.prepare(b, "right", moduli=15, mode="accurate")), "mode"),
    ]
    for kwargs, match in cases:
        with pytest.raises(ValueError, match=match):
            ozaki_cutlass.gemm(**kwargs)
    with pytest.raises(ValueError, match="side must be one of"):
        ozaki_cutlass.prepare(a, "top")
