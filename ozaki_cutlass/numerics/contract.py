"""The accuracy contract: per call, the fewest moduli whose rigorous error bound meets the
target, after an exact inner-dimension equilibration; native DGEMM (or a warning) where
20 moduli cannot meet it. docs/numerics.md states and proves it; docs/accuracy.md
measures it.

The stages here run on the device (templates/include/ozaki/stage_contract.cuh) and, as
their NumPy mirrors below, in ``ozaki_cutlass.reference``; every sum runs in one fixed
order on both, so the choice, and so the bits, are the same everywhere:

1. :func:`inner_stats`      per inner index l: E_l, the exponent of max_v |x(v, l)|, and
                            sum_v |x(v, l)| 2^-E_l (op(A)'s columns, op(B)'s rows);
2. :func:`equilibration`    e_l = floor((Ea_l - Eb_l) / 2): A 2^-e and 2^e B have balanced
                            inner sizes; A B is unchanged (the scaling is folded into
                            the shifts, so nothing is rounded);
3. the scan of the equilibrated operands (reference.exponents / fast_terms): per vector
   E, ceil(log2 Q) and S1 = sum q, the fast bound's quantities;
4. :func:`certificate`      a dozen sums from which the bound of every moduli count
                            follows (:class:`Certificate`);
5. :func:`choose`           on the host, from those numbers: the moduli count, the mode,
                            or the fallback (:class:`Choice`).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import warnings

import numpy as np

from ..templates.constants import EQUILIBRATION_SPREAD, FLUSH_EXPONENT, INNER_CHUNK, NO_EXPONENT, REDUCE_LANES
from .moduli import MAX_MODULI, crt_constants

__all__ = ["ACCURACY_DEFAULT", "AccuracyWarning", "CONTRACT_MODULI", "Certificate", "Choice", "OVERFLOW_EXPONENT",
           "U", "certificate", "choose", "equilibration", "fixed_order_sum", "inner_stats", "rounding_margin",
           "target_of", "warn"]

#: The unit roundoff of float64.
U = 2.0**-53

#: ``accuracy="dgemm"``: the certified normwise bound is at most u || |A||B| ||_F.
ACCURACY_DEFAULT = "dgemm"

#: The moduli counts the contract chooses from (fewer than 8 never meets a useful target
#: on float64 data, and would need more kernels).
CONTRACT_MODULI = range(8, MAX_MODULI + 1)

#: A product whose entries may reach 2^(this + 1) may overflow float64 (its largest
#: finite value is below 2^1024; one more bit covers the rounding near it).
OVERFLOW_EXPONENT = 1023

def rounding_margin(m: int, n: int, k: int) -> float:
    """A relative margin that covers the rounding of the certificate's float64 sums of
    nonnegative terms, and of the few products and the square root that combine them.
    A lane's sequential sum of s terms is within (s - 1) u of the exact one, a pairwise tree
    of 2^t lanes adds t u; the inner sums run INNER_CHUNK terms per run, then one per run.
    The bound side is raised and the lower bound lowered by it; 16x covers the
    combination. Terms dropped below 2^-960 of the largest add at most (m + n + k) 2^-900."""
    lanes = REDUCE_LANES.bit_length()
    terms = max(m, n, k) / REDUCE_LANES + lanes + INNER_CHUNK + max(m, n) / INNER_CHUNK
    return 16.0 * U * (terms + 16.0) + (m + n + k) * 2.0**-900


class AccuracyWarning(UserWarning):
    """The emulation ran with a certified error bound above the requested target (the
    ``policy="emulate"`` answer where 20 moduli cannot meet it). The message names the
    bound reached."""


def target_of(accuracy: object) -> float:
    """The target of ``accuracy``: "dgemm" (u = 2^-53, the default) or a float t in
    [2^-100, 1): the certified bound ||C - AB||_F <= t || |A||B| ||_F (plus the final
    rounding, u ||C||_F). Anything else: TypeError or ValueError."""
    if isinstance(accuracy, str):
        if accuracy == ACCURACY_DEFAULT:
            return U
        raise ValueError(f'accuracy must be "dgemm" or a number in [2^-100, 1), got {accuracy!r}')
    if isinstance(accuracy, (bool, np.bool_)) or not isinstance(accuracy, (int, float, np.integer, np.floating)):
        raise TypeError(f'accuracy must be "dgemm" or a number, got {type(accuracy).__name__}')
    t = float(accuracy)
    if not (2.0**-100 <= t < 1.0):
        raise ValueError(f"accuracy={t!r} is out of range: a relative error target in [2^-100, 1) "
                         '(accuracy="dgemm" is 2^-53)')
    return t


# --------------------------------------------------------------------------- stages

def fixed_order_sum(terms: np.ndarray) -> float:
    """The certificate kernel's sum of float64 ``terms``: lane t adds entries t, t + LANES,
    ... in sequence from 0.0, then lanes are added pairwise (t + h into t, h = LANES/2 ..
    1), LANES = REDUCE_LANES.
    Padding with zeros changes nothing (x + 0.0 == x)."""
    t = np.asarray(terms, dtype=np.float64).ravel()
    rows = -(-t.size // REDUCE_LANES)
    pad = np.zeros(rows * REDUCE_LANES)
    pad[:t.size] = t
    grid = pad.reshape(rows, REDUCE_LANES)
    acc = np.zeros(REDUCE_LANES)
    for r in range(rows):
        acc = acc + grid[r]
    h = REDUCE_LANES // 2
    while h:
        acc = acc[:h] + acc[h:2 * h]
        h //= 2
    return float(acc[0])


def _frexp_exponents(x: np.ndarray) -> np.ndarray:
    return np.frexp(x)[1].astype(np.int64)


def _scaled(x, e):
    """x 2^e for x >= 1/4 (or 0), 0 where e < FLUSH_EXPONENT: exact, never subnormal."""
    e = np.asarray(e, dtype=np.int64)
    return np.where(e < FLUSH_EXPONENT, 0.0, np.ldexp(x, np.maximum(e, FLUSH_EXPONENT)))


def inner_stats(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per column l of ``v`` (nvec x k: op(A) itself, or op(B) transposed): E_l, the frexp
    exponent of max_v |v(v, l)| over its finite non-zero entries (NO_EXPONENT if none),
    and sum_v |v(v, l)| 2^-E_l over them (0 for none), in a fixed order: per run of
    INNER_CHUNK vectors, in sequence, a sum relative to the largest exponent R seen so far
    (when R grows, the sum so far is scaled down to it first); then the runs in sequence,
    each scaled by 2^(R - E_l). Every scaling is exact; a term or sum it would take below
    2^FLUSH_EXPONENT counts as 0 (a lower bound: the sums feed the certificate's lower
    bound of || |A||B| ||_F)."""
    nvec, k = v.shape
    mag = np.where(np.isfinite(v), np.abs(v), 0.0)
    ex = np.where(mag > 0, _frexp_exponents(mag), NO_EXPONENT)
    runs = -(-nvec // INNER_CHUNK)
    pad_m = np.zeros((runs * INNER_CHUNK, k))
    pad_e = np.full((runs * INNER_CHUNK, k), NO_EXPONENT, dtype=np.int64)
    pad_m[:nvec], pad_e[:nvec] = mag, ex
    gm, ge = pad_m.reshape(runs, INNER_CHUNK, k), pad_e.reshape(runs, INNER_CHUNK, k)
    top = np.full((runs, k), NO_EXPONENT, dtype=np.int64)
    part = np.zeros((runs, k))
    for r in range(INNER_CHUNK):
        e = ge[:, r, :]
        grown = e > top
        part = np.where(grown & (part > 0), _scaled_by(part, np.where(part > 0, _frexp_exponents(part), NO_EXPONENT),
                                                       np.where(grown, e, top), top), part)
        top = np.where(grown, e, top)
        part = part + _scaled_by(gm[:, r, :], e, top)
    exps = top.max(axis=0) if runs else np.full(k, NO_EXPONENT, dtype=np.int64)
    sums = np.zeros(k)
    for run in range(runs):
        sums = sums + _scaled_by(part[run], np.where(part[run] > 0, _frexp_exponents(part[run]), NO_EXPONENT),
                                 exps, top[run])
    return exps.astype(np.int64), sums


def _scaled_by(x, ex, top, base=None):
    """x 2^-(top - base) (base None: 0, i.e. x 2^-top) for x >= 0 with frexp exponent ex
    (NO_EXPONENT for 0): 0 where the result's exponent would not exceed FLUSH_EXPONENT,
    else exact (a normal double)."""
    shift = (0 if base is None else base) - top
    keep = (ex != NO_EXPONENT) & (ex + shift > FLUSH_EXPONENT)
    return np.where(keep, np.ldexp(x, np.where(keep, shift, 0)), 0.0)


def equilibration(exps_a: np.ndarray, exps_b: np.ndarray) -> np.ndarray:
    """e_l = floor((Ea_l - Eb_l) / 2) from the inner exponents of op(A)'s columns and op(B)'s
    rows (0 where either is all zero), or all zeros when max e - min e is below
    EQUILIBRATION_SPREAD. The emulation then multiplies A 2^-e by 2^e B."""
    ok = (exps_a != NO_EXPONENT) & (exps_b != NO_EXPONENT)
    e = np.where(ok, (exps_a - exps_b) // 2, 0).astype(np.int64)
    if e.size == 0 or int(e.max()) - int(e.min()) < EQUILIBRATION_SPREAD:
        return np.zeros(e.shape, dtype=np.int64)
    return e


@dataclasses.dataclass(frozen=True, slots=True)
class Certificate:
    """What the bound of every moduli count needs, relative to 2^(RA + RB) (RA, RB: the
    largest exponents of op(A)'s rows and op(B)'s columns after equilibration). With the
    fast shifts mu_i(N) = floor((pb(N) - c_i) / 2) - E_i + qb (c_i = ceil(log2 Q_i), parity
    p_i), x_i = 2^-mu_i, z_i = 2^(E_i - qb) S1_i >= sum_l |a_il| and likewise w_j, y_j,
    the error of entry (i, j) is at most x_i y_j + z_i w_j; its Frobenius norm is
    |x|^2 |y|^2 + |z|^2 |w|^2 + 2 (x.z)(y.w), each factor a sum over two parity classes:
    x2[p] = sum 2^(2(h_i + E_i - RA - qb)), xz[p], z2, and w2, wy, y2 for B. ``l1`` is
    sum_l (sum_i |a_il|)(sum_j |b_lj|) 2^-(RA + RB) = 1'|A||B|1 2^-(RA + RB) (from below).
    Terms below 2^-960 (relative) are dropped on both sides: the bound may miss up to
    m n 2^-960 of its relative size, which no moduli count resolves anyway. ``top``:
    RA + RB itself (every |(AB)_ij| < k 2^top), for :attr:`may_overflow`."""

    x2: tuple[float, float]
    xz: tuple[float, float]
    z2: float
    w2: tuple[float, float]
    wy: tuple[float, float]
    y2: float
    l1: float
    m: int
    n: int
    k: int
    equilibrated: bool
    top: int

    @classmethod
    def from_values(cls, values, m: int, n: int, k: int) -> "Certificate":
        """From the certificate kernel's 14 doubles (x2[0], x2[1], xz[0], xz[1], z2, w2[0],
        w2[1], wy[0], wy[1], y2, l1, equilibrated, RA, RB)."""
        v = [float(x) for x in values]
        return cls((v[0], v[1]), (v[2], v[3]), v[4], (v[5], v[6]), (v[7], v[8]), v[9], v[10], m, n, k, v[11] != 0.0,
                   int(v[12]) + int(v[13]))

    @property
    def may_overflow(self) -> bool:
        """Whether an entry of AB may lie beyond float64's range (k 2^top > 2^1023). The
        bound is normwise: such an entry far below its row's and column's scales can be
        truncated to 0 (or the wrong sign) instead of overflowing to the infinity float64
        ``@`` gives (docs/accuracy.md), which no moduli count prevents."""
        return self.top + (self.k - 1).bit_length() > OVERFLOW_EXPONENT

    def relative_bound(self, count: int) -> float:
        """A certified upper bound of ||C - AB||_F / || |A||B| ||_F at ``count`` moduli in
        fast mode (accurate mode's shifts are never smaller, so its error is below it too),
        not counting the final rounding (u ||C||_F). 0 for a zero product; inf where the
        lower bound of || |A||B| ||_F is 0 and the bound is not."""
        pb = crt_constants(count).bound_exponent
        f = (math.ldexp(1.0, -((pb - 0) // 2)), math.ldexp(1.0, -((pb - 1) // 2)))
        xx = f[0] * f[0] * self.x2[0] + f[1] * f[1] * self.x2[1]
        ww = f[0] * f[0] * self.w2[0] + f[1] * f[1] * self.w2[1]
        xz = f[0] * self.xz[0] + f[1] * self.xz[1]
        wy = f[0] * self.wy[0] + f[1] * self.wy[1]
        s = xx * self.y2 + self.z2 * ww + 2.0 * (xz * wy)
        if s == 0.0:
            return 0.0
        margin = rounding_margin(self.m, self.n, self.k)
        lower = self.l1 * (1.0 - margin) / math.sqrt(float(self.m) * float(self.n))
        if lower == 0.0:
            return math.inf
        return math.sqrt(s) * (1.0 + margin) / lower


def certificate(exps_a, logq_a, s1_a, exps_b, logq_b, s1_b, inner_a, inner_b, qb: int,
                equilibrated: bool) -> Certificate:
    """The certificate kernel's sums (every one by :func:`fixed_order_sum`). exps, logq
    (ceil(log2 Q), -1 where Q = 0) and s1 per vector of each side (the scan's, on the
    equilibrated operands); inner_a, inner_b: :func:`inner_stats`' (exponents, sums) of
    op(A)'s columns and op(B)'s rows; qb: reference.fast_bound_bits(k)."""

    def side(exps, logq, s1):
        live = logq >= 0
        top = int(exps[live].max()) if live.any() else 0
        d = np.where(live, exps - top - qb, 0)
        h, p = np.where(live, logq >> 1, 0), logq & 1
        s1f = np.asarray(s1, dtype=np.float64)
        xx = np.where(live, _scaled(1.0, 2 * (h + d)), 0.0)
        xz = np.where(live, _scaled(s1f, h + 2 * d), 0.0)
        zz = np.where(live, _scaled(s1f * s1f, 2 * d), 0.0)
        return (top, (fixed_order_sum(np.where(p == 0, xx, 0.0)), fixed_order_sum(np.where(p == 1, xx, 0.0))),
                (fixed_order_sum(np.where(p == 0, xz, 0.0)), fixed_order_sum(np.where(p == 1, xz, 0.0))),
                fixed_order_sum(zz))

    ra, x2, xz, z2 = side(np.asarray(exps_a, np.int64), np.asarray(logq_a, np.int64), s1_a)
    rb, w2, wy, y2 = side(np.asarray(exps_b, np.int64), np.asarray(logq_b, np.int64), s1_b)
    (ca, sa), (cb, sb) = inner_a, inner_b
    fa, ea = np.frexp(sa)
    fb, eb = np.frexp(sb)
    live = (sa > 0) & (sb > 0)
    e = np.where(live, ea.astype(np.int64) + eb + ca + cb - ra - rb, FLUSH_EXPONENT - 1)
    terms = np.where(live, _scaled(fa * fb, e), 0.0)
    return Certificate(x2, xz, z2, w2, wy, y2, fixed_order_sum(terms), len(exps_a), len(exps_b),
                       len(sa), equilibrated, ra + rb)


# --------------------------------------------------------------------------- choice

@dataclasses.dataclass(frozen=True, slots=True)
class Choice:
    """What a call under the contract chose. ``moduli``/``mode``: the emulation run (None
    when native DGEMM runs instead); ``bound``: the certified relative normwise bound at
    that count (see Certificate.relative_bound); ``target``: the requested one;
    ``equilibrated``: whether an inner equilibration was applied; ``native``: the call
    falls back to native DGEMM; ``reason``: why, when it falls back or warns."""

    moduli: int | None
    mode: str | None
    bound: float
    target: float
    equilibrated: bool
    native: bool = False
    reason: str = ""

    @classmethod
    def of_empty_product(cls, mode: str, target: float) -> "Choice":
        """The choice for m, n or k zero: nothing to bound, the fewest moduli."""
        return cls(CONTRACT_MODULI[0], mode, 0.0, target, False)

    def as_dict(self) -> dict:
        return {"moduli": self.moduli, "mode": self.mode, "bound": self.bound, "target": self.target,
                "equilibrated": self.equilibrated, "native": self.native, "reason": self.reason}


def choose(cert: Certificate, target: float, mode: str, may_fall_back: bool) -> Choice:
    """The fewest moduli in CONTRACT_MODULI whose bound meets ``target``. Where 20 do not:
    native DGEMM when ``may_fall_back`` (policy "auto" with no kernel or path asked for)
    and 20 moduli do not reach DGEMM's own target u either; else 20 moduli, with
    ``reason`` set (the caller warns). Where the product may overflow float64
    (Certificate.may_overflow): native DGEMM when ``may_fall_back``, else the count the
    bound takes, with ``reason`` set."""
    if not cert.may_overflow:
        return _by_bound(cert, target, mode, may_fall_back)
    why = (f"the product's entries may lie beyond float64's range (k 2^{cert.top} > 2^{OVERFLOW_EXPONENT}), "
           "where an entry far below its row's and column's scales can come out 0 or the other infinity")
    if may_fall_back:
        return Choice(None, None, cert.relative_bound(CONTRACT_MODULI[-1]), target, cert.equilibrated,
                      native=True, reason=f"accuracy contract: {why}; native DGEMM ran")
    chosen = _by_bound(cert, target, mode, False)
    return dataclasses.replace(chosen, reason=f"accuracy contract not met: {why}"
                               + (f"; also {chosen.reason}" if chosen.reason else ""))


def _by_bound(cert: Certificate, target: float, mode: str, may_fall_back: bool) -> Choice:
    """choose() by the bound alone."""
    bounds = {}
    for count in CONTRACT_MODULI:
        bounds[count] = b = cert.relative_bound(count)
        if b <= target:
            return Choice(count, mode, b, target, cert.equilibrated)
    top = CONTRACT_MODULI[-1]
    reached = bounds[top]
    if may_fall_back and not reached <= max(target, U):
        return Choice(None, None, reached, target, cert.equilibrated, native=True,
                      reason=f"accuracy contract: {top} moduli certify only {reached:.3g} "
                             f"(target {target:.3g}); native DGEMM ran")
    return Choice(top, mode, reached, target, cert.equilibrated,
                  reason=f"accuracy contract not met: {top} moduli certify {reached:.3g} "
                         f"relative to || |A||B| ||_F, above the target {target:.3g}")


def warn(choice: Choice) -> None:
    """Issue the AccuracyWarning of a choice that runs below its target, attributed to the
    first caller outside this package (the user's line, whichever entry point led here:
    gemm, a complex or batched call, the reference)."""
    if choice.reason and not choice.native:
        frame, level = sys._getframe(0), 1   # level 1: this function's own frame
        while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] == _PACKAGE:
            frame, level = frame.f_back, level + 1
        warnings.warn(choice.reason, AccuracyWarning, stacklevel=level)


_PACKAGE = __name__.split(".")[0]
