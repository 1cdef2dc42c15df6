"""Moduli, CRT constants and scaling bounds: the one source of truth.

Everything here is computed exactly with Python integers and exposed as plain data
(ints, floats, tuples) that the NumPy reference and the GPU kernels both use.

Notation (see docs/numerics.md for the derivation):

* ``moduli``      m_1..m_N, pairwise coprime, each <= 256.
* ``product``     P = m_1 * ... * m_N.
* ``weights``     w_g = (P/m_g) * ((P/m_g)^-1 mod m_g) mod P, so that for residues
                  r_g = X mod m_g, X = sum_g w_g r_g (mod P).
* limbs           Each w_g (and P) is cut into ``limbs`` fixed-point digits of
                  ``LIMB_BITS`` bits: w_g = sum_j d[g][j] * 2^(LIMB_BITS*(L-1-j)).
                  With d < 2^40, r_g < 256 and N <= 20, every limb sum
                  S_j = sum_g d[g][j] r_g stays below 2^53, so it is computed exactly
                  in float64 in any order (the "error-free accumulation" property that
                  a double-word split gives for the high part, extended to all bits).
* ``quotient_factors``  f_j = fl(2^(LIMB_BITS*(L-1-j)) / P); sum_j S_j f_j approximates
                  S / P closely enough that rint() of it is the exact quotient.
* ``bound_exponent``  pb: the scaling guarantees sum_l |A'_il||B'_lj| <= 2^pb, and
                  2^pb * (1 + 2^-20) <= P/2, so the symmetric reconstruction is unique and
                  the quotient is never near a rounding tie.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from functools import lru_cache

# The constants the kernels share (MODULI_TABLE, MAX_MODULI, LIMB_BITS, LIMBS_OF_COUNT,
# K_CHUNK, COARSE_BITS, partial_bytes, shift_work_words, the paddings) live with the kernels;
# the generator renders them in.
from ..templates.constants import (COARSE_BITS, K_CHUNK, LIMB_BITS, LIMBS_OF_COUNT,  # noqa: F401
                                   MAX_MODULI, MODULI_TABLE, k_chunks, padded_k, padded_n, partial_bytes,
                                   shift_work_words)

MIN_MODULI = 2

#: Relative safety margin between the scaling bound and P/2.
BOUND_MARGIN_BITS = 20


def _check_pairwise_coprime(moduli: tuple[int, ...]) -> None:
    for i, a in enumerate(moduli):
        for b in moduli[i + 1:]:
            if math.gcd(a, b) != 1:
                raise AssertionError(f"moduli {a} and {b} are not coprime")


@dataclass(frozen=True, slots=True)
class CRTConstants:
    """Exact CRT data for the first ``count`` moduli of :data:`MODULI_TABLE`."""

    count: int
    moduli: tuple[int, ...]
    product: int
    weights: tuple[int, ...]
    limbs: int
    weight_limbs: tuple[tuple[float, ...], ...]  # [g][j], exact integers < 2^LIMB_BITS
    product_limbs: tuple[float, ...]             # [j], exact integers < 2^LIMB_BITS
    limb_scales: tuple[float, ...]               # [j] = 2^(LIMB_BITS*(L-1-j)), exact
    quotient_factors: tuple[float, ...]          # [j] = fl(limb_scales[j] / P)
    bound_exponent: int                          # pb, see module docstring

    def as_kernel_data(self) -> dict:
        """The constants a GPU kernel needs, as flat lists (row-major [g][j])."""
        return {
            "count": self.count,
            "limbs": self.limbs,
            "moduli": list(self.moduli),
            "weight_limbs": [d for row in self.weight_limbs for d in row],
            "product_limbs": list(self.product_limbs),
            "limb_scales": list(self.limb_scales),
            "quotient_factors": list(self.quotient_factors),
            "bound_exponent": self.bound_exponent,
        }


def _split_limbs(value: int, limbs: int) -> tuple[float, ...]:
    mask = (1 << LIMB_BITS) - 1
    digits = []
    for j in range(limbs):
        shift = LIMB_BITS * (limbs - 1 - j)
        digits.append(float((value >> shift) & mask))
    assert sum(int(d) << (LIMB_BITS * (limbs - 1 - j)) for j, d in enumerate(digits)) == value
    return tuple(digits)


def _bound_exponent(product: int) -> int:
    """Largest pb with 2^pb * (1 + 2^-BOUND_MARGIN_BITS) <= P / 2, i.e.
    2^(pb+1) * (2^M + 1) <= P * 2^M, checked with integers."""
    pb = product.bit_length() - 2
    scale = 1 << BOUND_MARGIN_BITS
    while (1 << (pb + 1)) * (scale + 1) > product * scale:
        pb -= 1
    return pb


@lru_cache(maxsize=None)
def crt_constants(count: int) -> CRTConstants:
    """CRT constants for ``count`` moduli (MIN_MODULI..MAX_MODULI)."""
    count = validate_moduli_count(count)
    moduli = MODULI_TABLE[:count]
    _check_pairwise_coprime(moduli)
    product = math.prod(moduli)
    weights = []
    for m in moduli:
        cofactor = product // m
        weights.append(cofactor * pow(cofactor % m, -1, m) % product)
    limbs = LIMBS_OF_COUNT[count]
    # The limb sums S_j = sum_g d r_g must stay exact in float64.
    assert count * (2**LIMB_BITS - 1) * 255 < 2**53
    scales = tuple(float(2 ** (LIMB_BITS * (limbs - 1 - j))) for j in range(limbs))
    # Python's int / int is correctly rounded.
    factors = tuple((1 << (LIMB_BITS * (limbs - 1 - j))) / product for j in range(limbs))
    return CRTConstants(
        count=count,
        moduli=moduli,
        product=product,
        weights=tuple(weights),
        limbs=limbs,
        weight_limbs=tuple(_split_limbs(w, limbs) for w in weights),
        product_limbs=_split_limbs(product, limbs),
        limb_scales=scales,
        quotient_factors=factors,
        bound_exponent=_bound_exponent(product),
    )


def validate_moduli_count(count: object, *, name: str = "moduli") -> int:
    """Return ``count`` as an int or raise a ValueError/TypeError naming the argument."""
    try:  # an int or NumPy integer (bool and numpy.bool are not counts)
        value = None if isinstance(count, bool) else operator.index(count)
    except TypeError:
        value = None
    if value is None:
        raise TypeError(
            f"{name} must be an int number of moduli in [{MIN_MODULI}, {MAX_MODULI}], "
            f"got {type(count).__name__}"
        )
    if not MIN_MODULI <= value <= MAX_MODULI:
        raise ValueError(f"{name}={value} is outside the supported range [{MIN_MODULI}, {MAX_MODULI}]")
    return value


def symmetric_residue(value: int, modulus: int) -> int:
    """value mods m in the int8 range: [-(m-1)/2, (m-1)/2] for odd m, [-128, 127] for 256."""
    r = value % modulus
    return r - modulus if r >= (modulus + 1) // 2 else r


# --- modulus groups of the fused kernels -----------------------------------------------
def group_sizes(count: int, group: int) -> list[int]:
    """``count`` moduli in ceil(count / group) groups whose sizes differ by at most one."""
    ngroups = -(-count // group)
    base, extra = divmod(count, ngroups)
    return [base + 1] * extra + [base] * (ngroups - extra)
