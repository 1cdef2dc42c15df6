"""Accuracy harness: test inputs, high-precision reference products and error measures.

* :func:`random_matrix`  a_ij = (U - 0.5) exp(phi N(0, 1)), the usual Ozaki test family
  (phi = 0.5 well scaled ... phi = 4 wide exponent spread).
* :func:`exact_product`  the exact product with Python integers (every double is a dyadic
  rational), returned as a double-double (hi, lo) rounded from the exact value. For small
  sizes (it costs m n k big-integer operations).
* :func:`dd_product`     a double-double product (TwoProduct + TwoSum accumulation,
  about 2^-100 relative per entry unless the entry cancels) for medium sizes.
* :func:`normwise_error`, :func:`elementwise_error`  against a (hi, lo) reference.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np



def same_bits(x, y) -> bool:
    """Whether two float64 (or two complex128) arrays (NumPy, or anything ``np.asarray`` takes) hold the same
    bits: the same shape and, entry by entry, the same 64-bit pattern (so -0.0 differs
    from 0.0 and NaNs compare by payload). How the GPU results are checked against
    ozaki_cutlass.reference.gemm."""
    x, y = np.ascontiguousarray(x), np.ascontiguousarray(y)
    if x.dtype.kind == "c" or y.dtype.kind == "c":  # complex128: both parts, bit for bit
        if x.dtype != np.complex128 or y.dtype != np.complex128:
            return False
        x, y = x.view(np.float64), y.view(np.float64)
    x, y = x.astype(np.float64, copy=False), y.astype(np.float64, copy=False)
    return x.shape == y.shape and bool(np.array_equal(x.view(np.int64), y.view(np.int64)))


def random_matrix(m: int, n: int, phi: float, rng: np.random.Generator) -> np.ndarray:
    """(U - 0.5) * exp(phi * N(0, 1)), float64, shape (m, n)."""
    return (rng.random((m, n)) - 0.5) * np.exp(phi * rng.standard_normal((m, n)))


# --------------------------------------------------------------------------- exact

def _to_scaled_ints(x: np.ndarray) -> tuple[np.ndarray, int]:
    """Integers X and an exponent e with x = X * 2^e exactly (object array)."""
    finite = x[np.isfinite(x) & (x != 0)]
    if finite.size == 0:
        return np.zeros(x.shape, dtype=object), 0
    emin = int(np.min(np.frexp(finite)[1])) - 53
    out = np.empty(x.shape, dtype=object)
    for idx, v in np.ndenumerate(x):
        if v == 0:
            out[idx] = 0
        else:
            mant, e = math.frexp(float(v))
            out[idx] = int(mant * 2**53) << (e - 53 - emin)
    return out, emin


def _int_to_dd(value: int, exp: int) -> tuple[float, float]:
    """Round value * 2^exp to a double-double (hi, lo)."""
    exact = Fraction(value) * (Fraction(2) ** exp)
    try:
        hi = float(exact)
    except OverflowError:
        return (math.inf if value > 0 else -math.inf), 0.0
    if math.isinf(hi):
        return hi, 0.0
    return hi, float(exact - Fraction(hi))


def exact_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The exact a @ b for finite float64 inputs, as a double-double (hi, lo)."""
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("exact_product needs finite inputs")
    ai, ea = _to_scaled_ints(a)
    bi, eb = _to_scaled_ints(b)
    ci = ai.dot(bi) if a.shape[1] else np.zeros((a.shape[0], b.shape[1]), dtype=object)
    hi = np.empty(ci.shape)
    lo = np.empty(ci.shape)
    for idx, v in np.ndenumerate(ci):
        hi[idx], lo[idx] = _int_to_dd(int(v), ea + eb)
    return hi, lo


# --------------------------------------------------------------------------- double-double

_SPLITTER = 134217729.0  # 2^27 + 1


def _two_sum(x, y):
    s = x + y
    bb = s - x
    return s, (x - (s - bb)) + (y - bb)


def _split(x):
    t = _SPLITTER * x
    hi = t - (t - x)
    return hi, x - hi


def _two_prod(x, y):
    p = x * y
    xh, xl = _split(x)
    yh, yl = _split(y)
    return p, ((xh * yh - p) + xh * yl + xl * yh) + xl * yl


def dd_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """a @ b accumulated in double-double arithmetic: (hi, lo), loop over k.

    Accurate to about 2^-100 relative per term; products that underflow (subnormal
    results) or whose splitting overflows (|x| > 2^996) lose that guarantee.
    """
    m, k = a.shape
    n = b.shape[1]
    hi = np.zeros((m, n))
    lo = np.zeros((m, n))
    with np.errstate(over="ignore", invalid="ignore"):
        for l in range(k):
            p, e = _two_prod(a[:, l:l + 1], b[l:l + 1, :])
            hi, s_err = _two_sum(hi, p)
            lo = lo + (s_err + e)
            hi, lo = _two_sum(hi, lo)
    return hi, lo


# --------------------------------------------------------------------------- errors

def _scaled_fro(x: np.ndarray) -> float:
    """Frobenius norm without overflow or underflow (power-of-two scaling, exact)."""
    x = np.asarray(x, dtype=np.float64)
    amax = float(np.max(np.abs(x))) if x.size else 0.0
    if amax == 0.0 or not math.isfinite(amax):
        return amax
    e = math.frexp(amax)[1]
    try:
        return math.ldexp(float(np.sqrt(np.sum(np.ldexp(x, -e) ** 2))), e)
    except OverflowError:  # a norm of finite entries beyond float64's range
        return math.inf


def _diff(c, ref_hi, ref_lo):
    with np.errstate(invalid="ignore", over="ignore"):
        d = (np.asarray(c, dtype=np.float64) - ref_hi) - (0.0 if ref_lo is None else ref_lo)
    return d


def normwise_error(c, ref_hi, ref_lo=None) -> float:
    """||c - ref||_F / ||ref||_F (0 when both are zero; inf when ref is zero and c is not)."""
    d = _diff(c, ref_hi, ref_lo)
    if not np.isfinite(d).all():
        return math.inf
    num = _scaled_fro(d)
    den = _scaled_fro(ref_hi)
    if math.isinf(num) or math.isinf(den):  # finite entries, norms beyond float64's range: one scale for both
        e = math.frexp(max(float(np.max(np.abs(d))), float(np.max(np.abs(ref_hi)))))[1]
        num, den = (float(np.sqrt(np.sum(np.ldexp(np.asarray(x, dtype=np.float64), -e) ** 2))) for x in (d, ref_hi))
    if den == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return num / den


def elementwise_error(c, ref_hi, ref_lo=None) -> float:
    """max_ij |c - ref| / |ref| (an entry with ref = 0 counts as 0 if c is 0, else inf)."""
    d = np.abs(_diff(c, ref_hi, ref_lo))
    if not np.isfinite(d).all():
        return math.inf
    ref = np.abs(ref_hi)
    zero = ref == 0
    if np.any(d[zero] != 0):
        return math.inf
    if zero.all():
        return 0.0
    with np.errstate(over="ignore"):
        return float(np.max(d[~zero] / ref[~zero]))


# --------------------------------------------------------------------------- tables
