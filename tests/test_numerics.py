import math

import pytest

from ozaki_cutlass.numerics.moduli import (
    BOUND_MARGIN_BITS, LIMB_BITS, MAX_MODULI, MIN_MODULI, MODULI_TABLE,
    crt_constants, symmetric_residue, validate_moduli_count,
)


def test_table_pairwise_coprime_and_int8_sized():
    assert len(MODULI_TABLE) >= 20
    for i, a in enumerate(MODULI_TABLE):
        assert 2 <= a <= 256
        for b in MODULI_TABLE[i + 1:]:
            assert math.gcd(a, b) == 1, (a, b)


@pytest.mark.parametrize("count", range(MIN_MODULI, MAX_MODULI + 1))
def test_crt_constants_exact(count):
    c = crt_constants(count)
    assert c.product == math.prod(MODULI_TABLE[:count])
    for g, (m, w) in enumerate(zip(c.moduli, c.weights)):
        assert 0 <= w < c.product
        for h, other in enumerate(c.moduli):
            assert w % other == (1 if h == g else 0)
        # limbs recombine to the weight, each below 2^LIMB_BITS and an exact float
        value = sum(int(d) << (LIMB_BITS * (c.limbs - 1 - j)) for j, d in enumerate(c.weight_limbs[g]))
        assert value == w
        assert all(0 <= d < 2**LIMB_BITS and d == int(d) for d in c.weight_limbs[g])
    assert sum(int(p) << (LIMB_BITS * (c.limbs - 1 - j)) for j, p in enumerate(c.product_limbs)) == c.product
    # exact float64 limb sums: N * max digit * max residue < 2^53
    assert count * (2**LIMB_BITS - 1) * (max(c.moduli) - 1) < 2**53
    # the bound keeps a 2^-20 margin under P/2 and is the largest such power of two
    pb = c.bound_exponent
    assert 2 ** (pb + 1) * (2**BOUND_MARGIN_BITS + 1) <= c.product * 2**BOUND_MARGIN_BITS
    assert 2 ** (pb + 2) * (2**BOUND_MARGIN_BITS + 1) > c.product * 2**BOUND_MARGIN_BITS
    for j, f in enumerate(c.quotient_factors):
        assert f == (2 ** (LIMB_BITS * (c.limbs - 1 - j))) / c.product


def test_kernel_data_is_flat_and_consistent():
    c = crt_constants(16)
    data = c.as_kernel_data()
    assert len(data["weight_limbs"]) == 16 * c.limbs
    assert data["weight_limbs"][c.limbs] == c.weight_limbs[1][0]


@pytest.mark.parametrize("bad", [1, 0, -3, MAX_MODULI + 1])
def test_moduli_range(bad):
    with pytest.raises(ValueError, match="moduli"):
        validate_moduli_count(bad)


@pytest.mark.parametrize("bad", [2.0, "14", True, None])
def test_moduli_type(bad):
    with pytest.raises(TypeError, match="moduli"):
        validate_moduli_count(bad)


def test_symmetric_residue_ranges():
    assert symmetric_residue(128, 256) == -128
    assert symmetric_residue(-128, 256) == -128
    assert symmetric_residue(127, 255) == 127
    assert symmetric_residue(128, 255) == -127
    for m in MODULI_TABLE:
        values = {symmetric_residue(v, m) for v in range(-600, 600)}
        assert min(values) >= -128 and max(values) <= 127 and len(values) == m


@pytest.mark.parametrize("count", range(2, 21))
@pytest.mark.parametrize("group", [1, 2, 3, 4])
def test_group_sizes_and_the_fused_calls(count, group):
    """The moduli split into groups of at most `group`, sizes differing by at most one,
    larger first; the fused path makes one kernel call per run of equal sizes (so one
    batched call for one-modulus groups) and the runs cover the moduli in order."""
    from ozaki_cutlass.numerics.moduli import group_sizes
    from ozaki_cutlass.paths.fused import runs as _runs

    sizes = group_sizes(count, group)
    assert sum(sizes) == count and max(sizes) <= group and max(sizes) - min(sizes) <= 1
    assert sizes == sorted(sizes, reverse=True)
    runs = _runs(sizes)
    assert [s for s, n in runs for _ in range(n)] == sizes
    assert len(runs) == len(set(sizes)) <= 2
    if group == 1:
        assert runs == [(1, count)]


def test_the_error_of_finite_entries_whose_norm_overflows():
    """normwise_error's Frobenius norms scale by a power of two; finite entries whose norm
    is beyond float64's range give an inf norm (it raised OverflowError)."""
    import numpy as np

    from ozaki_cutlass.numerics.accuracy import normwise_error

    big = np.full((2, 2), 1.5e308)
    assert normwise_error(big, big) == 0.0
    assert normwise_error(np.zeros((2, 2)), big) == 1.0
    assert normwise_error(big / 2, big) == 0.5
