"""The kernels' scalar helpers, run on the CPU, against the NumPy reference bit for bit.

The GPU stages are built only from `__host__ __device__` helpers of
templates/include/ozaki/{scaling.h, residue_arith.h, crt_arith.h, barrett.h,
group_arith.h, karatsuba_arith.h, inner_arith.h}. This test compiles tests/host/check_arithmetic.cu for the host with nvcc
(no GPU needed; the stage library's rendered ABI prelude supplies the constants and structs
the headers need), feeds it cases whose expected answers come from
`ozaki_cutlass.reference` (or from exact Python integers where the reference has no
counterpart), and asserts that every case matches. The checker also sweeps millions of
values of the float/Barrett reductions against 64-bit integer arithmetic (the `sweep_*`
lines below name the ranges): the one Barrett reduction exhaustively over every input
either of its call sites gives it.

Deterministic (fixed seed); about 15 s on 2 cores, most of it the compilation (~9 s).
Deselect with `-m "not nvcc"`; skipped where nvcc is missing.
"""

from __future__ import annotations

import math
import re
import struct
import subprocess
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from ozaki_cutlass import reference as ref
from ozaki_cutlass.generator import abi
from ozaki_cutlass.numerics.moduli import MAX_MODULI, MODULI_TABLE, crt_constants
from ozaki_cutlass.numerics.contract import inner_stats
from ozaki_cutlass.numerics.moduli import partial_bytes
from ozaki_cutlass.templates.constants import FLUSH_EXPONENT, INNER_CHUNK, MAX_GROUP_SIZE, MAX_LIMBS
from moduli_groups import random_group_sizes

pytestmark = pytest.mark.nvcc

REPO = Path(__file__).resolve().parents[1]
CHECKER = REPO / "tests" / "host" / "check_arithmetic.cu"
INCLUDE = REPO / "templates" / "include"
SEED = 20261201
#: residue_word's domain |y| < 2^22 (residue_arith.h; the wide pieces reach 4193279): the
#: sweep_y range.
Y_MAX = 2**22 - 1
#: The fold hands the Barrett reduction t = hi (2^16 mod m) + lo + offset in [0, 2^25).
FOLD_RANGE = 2**25
#: karatsuba_arith.h's kKaratsubaNarrowTerms, derived here on its own: the most terms of
#: |r s| <= 2^14 whose P3 - P1 - P2 stays within int32
NARROW_TERMS = (2**31 - 1) // (3 * 2**14)
#: Primes above 256: a stride coprime to every modulus visits every residue class.
STRIDE_WIDE, STRIDE_DENSE = 1009, 97


def hx(x: float) -> str:
    """A double as the hex of its bits (exact through text)."""
    return format(struct.unpack("<Q", struct.pack("<d", float(x)))[0], "x")


def sym(v: int, m: int) -> int:
    """Python's symmetric residue (numerics.symmetric_residue)."""
    r = v % m
    return r - m if r >= (m + 1) // 2 else r


# ------------------------------------------------------------------ case generation
# Each function appends lines "<tag> <fields>" to `out`; see check_arithmetic.cu for the
# format of each tag.

def rand_doubles(rng, n, spread=40, zeros=True):
    x = rng.standard_normal(n) * np.ldexp(1.0, rng.integers(-spread, spread, n))
    if zeros:
        x[rng.random(n) < 0.1] = 0.0
    return x


def gen_integer_helpers(rng, out):
    # ceil_log2: every power-of-two boundary, random 63-bit values and shifted ones.
    vals = [0, 1, 2, 3, 4, 5, 7, 8, 9, 2**63, 2**63 + 1, 2**64 - 1]
    vals += [2**b + d for b in range(1, 64) for d in (-1, 0, 1)]
    vals += [int(v) for v in rng.integers(0, 2**63, 200, dtype=np.uint64)]
    vals += [int(v) >> int(s) for v, s in zip(rng.integers(0, 2**63, 200, dtype=np.uint64),
                                              rng.integers(0, 63, 200))]
    vals = [v for v in vals if 0 <= v < 2**64]
    for v, e in zip(vals, ref._ceil_log2(np.array(vals, dtype=np.uint64))):
        out.append(f"clog2 {v} {int(e)}")
    # floor division (Python //)
    for a in list(range(-40, 41)) + [int(v) for v in rng.integers(-2**40, 2**40, 200)]:
        for b in (1, 2, 3, 7):
            out.append(f"fdiv {a} {b} {a // b}")
    # fast_bound_bits around every power of two
    for k in list(range(0, 70)) + [2**p + d for p in range(6, 40) for d in (-1, 0, 1)]:
        out.append(f"fbb {k} {ref.fast_bound_bits(k)}")
    # positive_mod of raw int32 GEMM outputs
    for c in [int(v) for v in rng.integers(-2**31, 2**31, 300)] + [-2**31, 2**31 - 1, 0, -1, 1]:
        for m in (256, 255, 173):
            out.append(f"pmod {c} {m} {c % m}")


def gen_exponents(rng, out):
    xs = np.concatenate([
        rand_doubles(rng, 300, 1000),
        [0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 2.2250738585072009e-308,
         1.7976931348623157e308, 1.0, 0.5, 0.9999999999999999, 2.0, 3.0],
        rng.integers(1, 2**52, 100) * 5e-324,   # subnormals
    ])
    for x in xs:
        out.append(f"frexp {hx(x)} {int(np.frexp(x)[1])}")


def gen_large_residues(rng, out):
    """reference.residues of integer-valued doubles of every size up to 2^170."""
    ints = []
    for bits in range(0, 171):
        for _ in range(3):
            v = (int(rng.integers(0, 2**62)) << 120 | int(rng.integers(0, 2**62)) << 60
                 | int(rng.integers(0, 2**60)))
            v &= (1 << bits) - 1
            ints.append(float(v) * (1 if rng.random() < 0.5 else -1))
    ints += [0.0, -0.0, 2.0**53, -2.0**53, 2.0**53 - 1, 2.0**53 + 2, 2.0**64, 2.0**64 - 2048,
             128.0, -128.0, 255.0, 2.0**1023, -1.7976931348623157e308]
    arr = np.array(ints)
    res = ref.residues(arr[None, :], MODULI_TABLE)  # (20, 1, len)
    for idx, x in enumerate(arr):
        for g, m in enumerate(MODULI_TABLE):
            r = int(res[g, 0, idx])
            assert r == sym(int(x), m)  # the reference itself, against Python integers
            out.append(f"res {hx(x)} {m} {r}")


def gen_scan(rng, out):
    """exponents + fast_shifts (+ the non-finite count) per vector, as choose_scaling."""
    for trial in range(120):
        k = int(rng.choice([1, 2, 3, 16, 17, 100, 1000, 4097]))
        kind = trial % 5
        if kind == 0:
            x = rand_doubles(rng, k, 3)
        elif kind == 1:
            x = rand_doubles(rng, k, 600)          # wide spread
        elif kind == 2:
            x = rng.integers(1, 2**52, k) * 5e-324 * rng.choice([-1, 1], k)  # subnormals
        elif kind == 3:
            x = np.zeros(k)
        else:
            x = rand_doubles(rng, k, 30)
            x[rng.random(k) < 0.2] = rng.choice([np.nan, np.inf, -np.inf])
        pb = int(rng.choice([14, 54, 62, 116, 154]))
        finite = np.where(np.isfinite(x), x, 0.0)[None, :]
        e = ref.exponents(finite, axis=1)
        s = ref.fast_shifts(finite, 1, e, pb)
        nf = int((~np.isfinite(x)).sum())
        out.append(f"scan {pb} {k} {int(e[0])} {int(s[0])} {nf} " + " ".join(hx(v) for v in x))


def gen_inner(rng, out):
    """The contract's inner statistics of one column (numerics.contract.inner_stats): runs
    of INNER_CHUNK entries and their combine, on wide spreads, a new largest exponent at
    every entry (each sum so far scaled down, then flushed), entries at the flush boundary
    below the top, subnormals alone, before and among normals, the largest doubles, zeros
    and NaN/Inf, at lengths around a warp and a run."""
    lengths = [1, 2, 31, 32, 33, INNER_CHUNK - 1, INNER_CHUNK, INNER_CHUNK + 1, 2 * INNER_CHUNK,
               3 * INNER_CHUNK + 5]

    def columns():
        for n in lengths:
            for spread in (3, 60, 600, 1000):
                yield rand_doubles(rng, n, spread)
            i = np.arange(n)
            yield np.ldexp(1.0 + rng.random(n), np.minimum(-1000 + 16 * i, 1000))  # top up at every entry
            yield np.ldexp(1.0 + rng.random(n), np.maximum(1000 - 16 * i, -1070))  # down into the flush
            top = int(rng.integers(-60, 60))
            edge = np.ldexp(1.0 + rng.random(n), top + FLUSH_EXPONENT + rng.integers(-3, 3, n))
            edge[0] = np.ldexp(1.5, top - 1)  # frexp exponent top
            yield edge
            yield rng.integers(1, 2**52, n) * 5e-324 * rng.choice([-1, 1], n)  # subnormals alone
            mixed = np.where(rng.random(n) < 0.5, rng.integers(1, 2**52, n) * 5e-324,
                             np.ldexp(rng.standard_normal(n), rng.integers(-1022, -880, n)))
            yield mixed
            yield np.ldexp(1.0 + rng.random(n), rng.integers(1015, 1024, n))  # the largest doubles
            odd = rand_doubles(rng, n, 30)
            odd[rng.random(n) < 0.2] = rng.choice([np.nan, np.inf, -np.inf, 0.0, -0.0])
            yield odd
        yield np.zeros(5)
        yield np.array([np.nan, np.inf, -np.inf])

    for x in columns():
        x = np.asarray(x, dtype=np.float64)
        e, total = inner_stats(x[:, None])
        nf = int((~np.isfinite(x)).sum())
        out.append(f"inner {len(x)} {int(e[0])} {hx(total[0])} {nf} " + " ".join(hx(v) for v in x))


def gen_csm(rng, out):
    """ceil_scaled_magnitude(x, e) = ceil(2^e |x|), 1 for x != 0 below 1, in exact fractions:
    normal and subnormal x, results from 0 up to 2^62, and r = -(shift) past 64."""
    xs = list(rand_doubles(rng, 60, 300)) + list(rng.integers(1, 2**52, 40) * 5e-324)
    xs += [0.0, -0.0, 5e-324, -5e-324, 2.0**-1022, np.nextafter(1.0, 2.0), 1.0, 0.75, -(2.0**1023)]
    for x in xs:
        fx = Fraction(float(x)) if x != 0 else Fraction(0)
        _, ex = math.frexp(float(x))
        for e in {0, 1, 52, 53, 62 - ex, 30 - ex, 20 - ex, 19 - ex, 6 - ex, -ex, -ex - 11, -ex - 70, 1100, -1100}:
            exact = abs(fx) * Fraction(2) ** e
            if exact >= 2**62:
                continue
            q = 0 if x == 0 else max(1, math.ceil(exact))
            out.append(f"csm {hx(x)} {e} {q}")


def gen_coarse(rng, out):
    for trial in range(60):
        x = rand_doubles(rng, 50, 300 if trial % 2 else 5)
        if trial % 3 == 0:
            x[:5] = [np.nan, np.inf, -np.inf, 5e-324, -5e-324]
        finite = np.where(np.isfinite(x), x, 0.0)[None, :]
        e = ref.exponents(finite, axis=1)
        q = ref.coarse_magnitudes(finite, 1, e)[0]
        for v, qq in zip(x, q):
            out.append(f"coarse {hx(v)} {int(e[0])} {int(qq)}")


def gen_scale(rng, out):
    """scale_to_integers + residues with the shifts the reference itself chooses."""
    for trial in range(40):
        x = rand_doubles(rng, 30, 300 if trial % 2 else 10)
        if trial % 4 == 0:
            x[:3] = [5e-324, -2.5e-310, 1e300]
        count = int(rng.integers(2, MAX_MODULI + 1))
        consts = crt_constants(count)
        e = ref.exponents(x[None, :], axis=1)
        mu = ref.fast_shifts(x[None, :], 1, e, consts.bound_exponent) + int(rng.integers(0, 3))
        xi = ref.scale_to_integers(x[None, :], mu, axis=1)
        r = ref.residues(xi, consts.moduli)
        for l, v in enumerate(x):
            out.append(f"scale {hx(v)} {int(mu[0])} {count} "
                       + " ".join(str(int(r[g, 0, l])) for g in range(count)))


def _scaled_exact(a: float, s: int) -> int:
    """trunc(2^s a) with Python integers; NaN/Inf -> 0, an ldexp overflow -> +-2^1024."""
    if not math.isfinite(a):
        return 0
    num, den = a.as_integer_ratio()  # den is a power of two
    mag = abs(num)
    if s >= 0:
        mag <<= s
    else:
        den <<= -s
    v = mag // den
    if a != 0 and math.frexp(a)[1] + s > 1024:
        v = 1 << 1024
    return -v if a < 0 else v


def gen_scaled_extremes(rng, out):
    """The fastmod residue path far outside the reference's range (huge/negative shifts,
    overflow to Inf, subnormals), and for extra moduli, against Python integers."""
    mods = list(MODULI_TABLE) + [2, 3, 4, 5, 7, 8, 16, 64, 127, 128, 129, 131, 250, 254]
    out.append("sres_moduli " + " ".join(map(str, mods)))
    cases = []
    for _ in range(3000):
        kind = int(rng.integers(0, 6))
        if kind == 0:    # ordinary magnitudes, results 0 .. 2^160
            a = float(rng.standard_normal()) * 2.0 ** int(rng.integers(-40, 40))
            e = math.frexp(a)[1]
            s = int(rng.integers(-e - 5, 160 - e))
        elif kind == 1:  # near 2^53 and 2^64
            a = float(rng.standard_normal())
            e = math.frexp(a)[1]
            s = int(rng.choice([52, 53, 54, 63, 64, 65, 11, 12])) - e + int(rng.integers(-1, 2))
        elif kind == 2:  # subnormals scaled up
            a = float(int(rng.integers(1, 2**52))) * 5e-324 * float(rng.choice([-1, 1]))
            s = int(rng.integers(1000, 1250))
        elif kind == 3:  # extremes: huge shifts, overflow, tiny results
            a = float(rng.standard_normal()) * 2.0 ** int(rng.integers(-1000, 1000))
            s = int(rng.integers(-2200, 2200))
        elif kind == 4:  # integers exactly
            a = float(int(rng.integers(-2**53, 2**53)))
            s = int(rng.integers(-3, 60))
        else:
            a = float(rng.choice([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.75,
                                  5e-324, 1.7976931348623157e308, -2.0**1023]))
            s = int(rng.choice([0, 1, 52, 53, 100, 1074, 2000, -1, -60, 1025]))
        cases.append((a, s))
    for a, s in cases:
        v = _scaled_exact(a, s)
        out.append(f"sres {hx(a)} {s} " + " ".join(str(sym(v, m)) for m in mods))
    # _scaled_exact agrees with the reference where the reference is defined.
    sel = [(a, s) for a, s in cases
           if math.isfinite(a) and a != 0 and abs(math.frexp(a)[1] + s) < 150][:300]
    xi = ref.scale_to_integers(np.array([[a for a, _ in sel]]), np.array([s for _, s in sel]), axis=0)
    res = ref.residues(xi, MODULI_TABLE)
    for idx, (a, s) in enumerate(sel):
        for g, m in enumerate(MODULI_TABLE):
            assert res[g, 0, idx] == sym(_scaled_exact(a, s), m)


def gen_accurate_shifts(rng, out):
    for trial in range(40):
        m, n, k = (int(v) for v in rng.integers(1, 12, 3))
        spread = int(rng.choice([2, 50, 400]))
        a = rand_doubles(rng, m * k, spread).reshape(m, k)
        b = rand_doubles(rng, k * n, spread).reshape(k, n)
        if trial % 5 == 0:
            a[0, :] = 0.0
        if trial % 7 == 0:
            b[:, 0] *= 1e-310
        pb = crt_constants(int(rng.integers(2, MAX_MODULI + 1))).bound_exponent
        ea, eb = ref.exponents(a, 1), ref.exponents(b, 0)
        muf, nuf = ref.fast_shifts(a, 1, ea, pb), ref.fast_shifts(b, 0, eb, pb)
        g = ref.coarse_bound(ref.coarse_magnitudes(a, 1, ea), ref.coarse_magnitudes(b, 0, eb))
        if trial % 6 == 0:
            g[:, -1] = 0  # an unconstrained column
        mu, nu = ref.accurate_shifts(g, ea, eb, muf, nuf, pb)
        fields = [m, n, pb, *g.ravel(), *ea, *eb, *muf, *nuf, *mu, *nu]
        out.append("acc " + " ".join(str(int(v)) for v in fields))


def gen_crt(rng, out, trials=1500):
    """crt_reconstruct + the pattern substitution + unscale, for 2..20 moduli."""
    pad = lambda v: list(v) + [0.0] * (MAX_LIMBS - len(v))  # noqa: E731
    for count in range(2, MAX_MODULI + 1):
        c = crt_constants(count)
        wl = []
        for g in range(MAX_MODULI):
            wl += pad(c.weight_limbs[g]) if g < count else pad([])
        out.append(f"crt_const {count} {c.limbs} "
                   + " ".join(map(str, list(c.moduli) + [0] * (MAX_MODULI - count))) + " "
                   + " ".join(hx(v) for v in wl + pad(c.product_limbs) + pad(c.limb_scales)
                              + pad(c.quotient_factors)))
    specials = [np.nan, np.inf, -np.inf]
    for trial in range(trials):
        count = 2 + trial % 19
        c = crt_constants(count)
        if trial % 3 == 0:  # arbitrary residues: the operation sequence must match even then
            r = [int(rng.integers(0, m)) for m in c.moduli]
            X = None
        else:               # a genuine |X| <= 2^pb
            bits = int(rng.integers(0, c.bound_exponent + 1))
            X = (int(rng.integers(0, 2**62)) << 100 | int(rng.integers(0, 2**62)) << 40
                 | int(rng.integers(0, 2**40)))
            X = (X & ((1 << bits) - 1)) * (1 if rng.random() < 0.5 else -1)
            r = [X % m for m in c.moduli]
        xr = ref.crt_reconstruct(np.array(r, dtype=np.int32).reshape(count, 1, 1), c)
        if X is not None:
            assert xr[0, 0] == float(X), (X, xr)
        pattern = specials[trial % 3] if trial % 11 == 0 else 0.0
        x = np.where(pattern == 0, xr, pattern)  # reference.gemm's substitution
        mu = np.array([int(rng.integers(-60, 200))])
        nu = np.array([int(rng.integers(-60, 1000 if trial % 10 == 0 else 200))])
        alpha = float(rng.choice([1.0, -1.0, 0.3, 1e-300, 3.7e200]))
        beta = float(rng.choice([0.0, 0.0, 1.0, -0.7, 2.5e-200]))
        cin = np.array([[float(rng.standard_normal())]])
        y = ref.unscale(x, mu, nu, alpha, beta, cin if beta != 0 else None)
        out.append(f"crt {count} " + " ".join(map(str, r)) + f" {int(mu[0] + nu[0])} {hx(alpha)}"
                   f" {hx(beta)} {hx(cin[0, 0])} {hx(pattern)} {hx(xr[0, 0])} {hx(y[0, 0])}")


def gen_ldexp(rng, out):
    """scale_by_power_of_two (crt_arith.h) against np.ldexp: x subnormal, normal, near the
    top, zero, Inf and NaN; e on both sides of every edge of its one-multiplication range
    (-1022 .. 1023) and far outside it, so results overflow, underflow or land subnormal."""
    xs = [5e-324, 2.5e-308, 1e-300, 0.75, 1.0, 3.0, 1e300, 1.7976931348623157e308, 0.0, -0.0,
          np.inf, -np.inf, np.nan]
    edges = [-2200, -2100, -1100, -1075, -1074, -1023, -1022, -1021, -1000, -60, -1, 0, 1, 60,
             1000, 1022, 1023, 1024, 1100, 2100, 2200]
    with np.errstate(over="ignore"):
        for x in xs:
            for e in edges:
                out.append(f"ldx {hx(x)} {e} {hx(np.ldexp(x, e))}")
    for _ in range(4000):
        x = float(np.frombuffer(rng.integers(0, 2**63, dtype=np.int64).tobytes(), np.float64)[0])
        x = x if np.isfinite(x) else 1.5
        x = -x if rng.random() < 0.5 else x
        e = int(rng.integers(-2200, 2201))
        with np.errstate(over="ignore"):
            out.append(f"ldx {hx(x)} {e} {hx(np.ldexp(x, e))}")


def gen_pattern(rng, out):
    """The NaN/Inf pattern of one (i, j) entry over k terms (reference.split_nonfinite)."""
    vals = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -2.0, 5e-324])
    for _ in range(600):
        k = int(rng.integers(1, 5))
        a = rng.choice(vals, (1, k))
        b = rng.choice(vals, (k, 1))
        _, _, p = ref.split_nonfinite(a, b)
        pv = 0.0 if p is None else p[0, 0]
        out.append(f"pat {k} " + " ".join(hx(v) for v in a[0]) + " "
                   + " ".join(hx(v) for v in b[:, 0]) + f" {hx(pv)}")


def gen_fastmod(rng, out):
    """pow2_mod, 32-bit Barrett (barrett_reduce, mod_i32), byte packing, group partials."""
    exps = list(range(0, 70)) + [971, 972, 973, 1023, 1024, 1074, 1100, 2047]
    for m in range(2, 257):
        for e in exps + [int(v) for v in rng.integers(70, 1200, 10)]:
            out.append(f"p2 {m} {e} {pow(2, e, m)}")
    mods = list(MODULI_TABLE) + [2, 3, 4, 5, 7, 8, 16, 64, 127, 128, 129, 131, 250, 254, 257,
                                 1000, 65535, 65536]
    for _ in range(3000):
        m = int(rng.choice(mods))
        u = int(rng.choice([rng.integers(0, 2**32), 2**32 - 1 - int(rng.integers(0, 1000)),
                            int(rng.integers(0, 1000)), (2**32 // m) * m - int(rng.integers(-3, 4))]))
        u = min(max(u, 0), 2**32 - 1)
        out.append(f"bmod {u} {m} {u % m}")
        c = int(rng.choice([rng.integers(-2**31, 2**31), -2**31 + int(rng.integers(0, 1000)),
                            2**31 - 1 - int(rng.integers(0, 1000))]))
        out.append(f"imod {c} {m} {c % m}")
    for _ in range(200):
        s = [int(v) for v in rng.integers(-128, 128, 4)]
        out.append("pack " + " ".join(map(str, s)) + f" {sum((v & 0xff) << (8 * i) for i, v in enumerate(s))}")
    # group partials: X mod M_gr for random groupings of consecutive moduli (M_gr < 2^32)
    for _ in range(1000):
        count = int(rng.integers(2, MAX_MODULI + 1))
        mods = MODULI_TABLE[:count]
        sizes = random_group_sizes(count, rng)
        X = (int(rng.integers(0, 2**62)) << 100 | int(rng.integers(0, 2**62)) << 40
             | int(rng.integers(0, 2**40)))
        parts, g = [], 0
        for size in sizes:
            parts.append(X % math.prod(mods[g:g + size]))
            g += size
        out.append(f"grp {count} {len(sizes)} "
                   + " ".join(map(str, sizes + [X % m for m in mods] + parts)))


def _coprime_group(rng, size):
    while True:
        m = [int(v) for v in rng.integers(2, 257, size)]
        if all(math.gcd(a, b) == 1 for i, a in enumerate(m) for b in m[:i]):
            return m


def gen_group_arith(rng, out):
    """group_arith.h: the int32 fold, the group constants and the partial CRT."""
    edges = [0, 1, -1, 2, -2, 2**31 - 1, -2**31, 2**31 - 2, -2**31 + 1, 2**16, -2**16,
             2**16 - 1, -2**16 - 1, 2**23, -2**23]
    for m in range(2, 257):
        for x in edges + [m, -m, m - 1, 1 - m, m + 1, -m - 1] + [int(v) for v in rng.integers(-2**31, 2**31, 8)]:
            x = max(min(x, 2**31 - 1), -2**31)
            out.append(f"gfold {m} {x} {x % m}")
    groups = [list(MODULI_TABLE[i:i + g]) for g in range(1, MAX_GROUP_SIZE + 1) for i in range(0, MAX_MODULI + 1 - g)]
    groups = [grp for grp in groups if math.prod(grp) < 2**32]
    groups += [[2, 3, 5, 7], [256], [2], [3, 2], [255, 2], [256, 255, 253, 251]]
    groups += [_coprime_group(rng, int(rng.integers(1, 5))) for _ in range(60)]
    for grp in groups:
        M = math.prod(grp)
        weights = [(M // m) * pow(M // m % m, -1, m) % M for m in grp]
        out.append(f"gconst {len(grp)} " + " ".join(map(str, grp + weights)) + f" {M} {(2**64 - 1) // M}")
        # crt_finish<G>'s sum of G weights (< M) times bytes (<= 255): all of [0, G 255 M)
        out.append(f"sweep_barrett64 {M} {len(grp) * 255 * M}")
        rs = [[0] * len(grp), [m - 1 for m in grp]]
        rs += [[int(rng.integers(0, m)) for m in grp] for _ in range(40)]
        for r in rs:
            x = sum(w * v for w, v in zip(weights, r)) % M
            assert all(x % m == v for m, v in zip(grp, r))
            out.append(f"gcrt {len(grp)} " + " ".join(map(str, grp + r)) + f" {x}")
    out += [f"gbytes {g} {partial_bytes(g)}" for g in (1, 2, 3, 4)]
    out += [
        "gbad 0 -1 group size out of range",
        "gbad 5 2 3 5 7 11 -1 group size out of range",
        "gbad 2 256 1 1 modulus outside [2, 256]",
        "gbad 1 257 0 modulus outside [2, 256]",
        "gbad 3 255 253 0 2 modulus outside [2, 256]",
        "gbad 2 256 254 1 moduli not pairwise coprime",
        "gbad 4 256 255 253 11 3 moduli not pairwise coprime",
    ]


def sweep_lines():
    """Ranges the checker sweeps against 64-bit integer arithmetic (see the .cu file)."""
    out = []
    for m in range(2, 257):
        w = 4 * m + 64
        dense = m in MODULI_TABLE
        y_stride = 1 if m in (256, 255, 173) else STRIDE_DENSE if dense else STRIDE_WIDE
        out += [f"sweep_y {m} {-Y_MAX} {-Y_MAX + w} 1", f"sweep_y {m} {-w} {w} 1",
                f"sweep_y {m} {Y_MAX - w} {Y_MAX} 1", f"sweep_y {m} {-Y_MAX} {Y_MAX} {y_stride}",
                f"sweep_rf {m}"]
        step = 4093 if dense else 65521                     # primes: every residue class
        near = (2**32 // m) * m                              # the last full period of u
        for lo, hi in [(0, 4 * m), (2**31 - 4 * m, 2**31 + 4 * m), (near - 2 * m, 2**32),
                       (2**32 - 70000 if dense else 2**32 - 1000, 2**32), (0, 2**32)]:
            out.append(f"sweep_u32 {m} {max(lo, 0)} {min(hi, 2**32)} {1 if hi - lo < 10**6 else step}")
        # int32 hi/lo boundaries of the fold (x = hi 2^16 + lo) around +-2^16 and +-2^23.
        for centre in (2**16, 2**32 - 2**16, 2**23, 2**32 - 2**23, 2**24):
            out.append(f"sweep_u32 {m} {centre - 2 * m} {centre + 2 * m} 1")
        # The one Barrett reduction, exhaustively: every t < 2^25 the fold gives it, the top
        # of the uint32 range (where its quotient estimate is furthest off) for every
        # modulus, and all of it for the table's moduli (the CRT stages' inputs).
        out.append(f"sweep_barrett32 {m} 0 {FOLD_RANGE}")
        out.append(f"sweep_barrett32 {m} {0 if dense else 2**32 - 2**22} {2**32}")
    return out


def gen_karatsuba(rng, out):
    """karatsuba_arith.h: the three products' residues against Python's %, and (the
    sweep) every residue pair of every table modulus and 256."""
    edges = [-2**31, -2**31 + 1, -1, 0, 1, 2**31 - 1]
    for m in list(MODULI_TABLE) + [2, 3, 256]:
        out.append(f"sweep_karatsuba {m}")
        for _ in range(300):
            p = [int(rng.choice([rng.integers(-2**31, 2**31), rng.choice(edges), rng.integers(-3 * m, 3 * m)]))
                 for _ in range(3)]
            out.append(f"kres {p[0]} {p[1]} {p[2]} {m} {(p[0] - p[1]) % m} {(p[2] - p[0] - p[1]) % m}")
        # the narrow form, for products of at most NARROW_TERMS terms of |r s| <= 2^14: its
        # bound's edges (the differences' extremes: +-3 bound) and random triples within it
        bound = NARROW_TERMS * 128 * 128
        for _ in range(300):
            p = [int(rng.choice([rng.integers(-bound, bound + 1), rng.choice([-bound, bound, 0, -1, 1])]))
                 for _ in range(3)]
            out.append(f"kresn {p[0]} {p[1]} {p[2]} {m} {(p[0] - p[1]) % m} {(p[2] - p[0] - p[1]) % m}")
        out.append(f"kresn {-bound} {bound} {bound} {m} {(-2 * bound) % m} {(bound) % m}")
        out.append(f"kresn {bound} {bound} {-bound} {m} 0 {(-3 * bound) % m}")
        out.append(f"kresn {-bound} {-bound} {bound} {m} 0 {(3 * bound) % m}")


def gen_routes(rng, out):
    """The residue kernel's two-step decomposition (entry_bits and entry_bits_at by t,
    entry_exp, entry_shift, scaled_small, wide_integer) against scaled_integer: t = e2 +
    shift around every route's edges (-64, 0, 16, kPow2Table, the ldexp overflow), shifts at
    the +-2^24 clamp and the int32 ends, and the specials."""
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2250738585072014e-308,
              1.7976931348623157e308, 1.0, -1.0, -0.75, 2.0**-1074 * 3]
    values += [float(rng.standard_normal()) * 2.0 ** int(rng.integers(-1060, 1020)) for _ in range(60)]
    values += [float(int(rng.integers(1, 2**52))) * 5e-324 * float(rng.choice([-1, 1])) for _ in range(10)]
    for a in values:
        e2 = math.frexp(a)[1] - 53 if math.isfinite(a) and a != 0 else 0
        for t in (-70, -65, -64, -63, -40, -1, 0, 1, 2, 15, 16, 17, 40, 127, 128, 129, 971, 972, 1030):
            s = t - e2
            if -2**31 <= s < 2**31:
                out.append(f"route {hx(a)} {s}")
        for s in (2**24 - 1, 2**24, 2**24 + 1, -2**24 + 1, -2**24, -2**24 - 1, 2**31 - 1, -2**31,
                  int(rng.integers(-2**31, 2**31))):
            out.append(f"route {hx(a)} {s}")


def gen_wide_pieces(rng, out):
    """The wide pieces' extremes (residue_arith.h, e <= 16, V < 2^69; four pieces where e <=
    4, V < 2^57): every piece at its largest (all-ones mantissas), single bits at each
    piece's edges, random mantissas, both signs, every e, against every table modulus."""
    mantissas = [2**53 - 1, 2**52, 2**52 + 1, int("10" * 26 + "1", 2), int("01" * 26 + "1", 2) | 2**52]
    mantissas += [2**52 | int(rng.integers(0, 2**52)) for _ in range(4)]
    for e in range(0, 17):
        for mant in mantissas:
            for sign in (1, -1):
                v = sign * (mant << e)
                for m in MODULI_TABLE:
                    out.append(f"res {hx(float(v))} {m} {sym(v, m)}")


def generate_cases() -> list[str]:
    rng = np.random.default_rng(SEED)
    out: list[str] = []
    for gen in (gen_integer_helpers, gen_exponents, gen_large_residues, gen_scan, gen_inner, gen_csm, gen_coarse,
                gen_scale, gen_scaled_extremes, gen_accurate_shifts, gen_crt, gen_ldexp, gen_pattern,
                gen_fastmod, gen_group_arith, gen_karatsuba, gen_wide_pieces, gen_routes):
        gen(rng, out)
    return out + sweep_lines()


#: Every tag the checker must have checked at least once.
TAGS = ("clog2", "fdiv", "fbb", "pmod", "frexp", "res", "scan", "csm", "coarse", "scale", "sres", "route",
        "acc", "crt", "ldx", "pat", "p2", "bmod", "imod", "pack", "grp", "gfold", "gconst", "gcrt",
        "gbad", "gbytes", "sweep_y", "sweep_rf", "sweep_u32", "sweep_barrett32", "sweep_barrett64",
        "kres", "kresn", "sweep_karatsuba", "inner")


# ------------------------------------------------------------------ running the checker

@dataclass
class CheckerRun:
    returncode: int
    output: str
    counts: dict[str, tuple[int, int]]   # tag -> (cases, mismatches)
    total: tuple[int, int] | None
    mismatches: list[str]                # the MISMATCH / ERROR lines

    def report(self, limit: int = 12) -> str:
        lines = self.mismatches[:limit]
        more = len(self.mismatches) - len(lines)
        tail = [f"... and {more} more reported"] if more > 0 else []
        return "\n".join([f"checker exit status {self.returncode}, total {self.total}", *lines, *tail])


def run_checker(binary: Path, lines: list[str], cases_path: Path) -> CheckerRun:
    cases_path.write_text("\n".join(lines) + "\n")
    proc = subprocess.run([str(binary), str(cases_path)], capture_output=True, text=True, timeout=300)
    counts, total, bad = {}, None, []
    for line in proc.stdout.splitlines():
        if m := re.fullmatch(r"COUNT (\S+) (\d+) (\d+)", line):
            counts[m[1]] = (int(m[2]), int(m[3]))
        elif m := re.fullmatch(r"TOTAL (\d+) (\d+)", line):
            total = (int(m[1]), int(m[2]))
        elif line.startswith(("MISMATCH", "ERROR")):
            bad.append(line)
    return CheckerRun(proc.returncode, proc.stdout + proc.stderr, counts, total, bad)


@pytest.fixture(scope="module")
def checker(tmp_path_factory, nvcc_toolchain) -> Path:
    """The checker, compiled once per session for the host (no GPU code)."""
    toolchain = nvcc_toolchain
    nvcc = toolchain.nvcc
    folder = tmp_path_factory.mktemp("host_checker")
    binary = folder / "check_arithmetic"
    prelude = folder / "prelude.h"  # what stages.cu.j2 renders before the headers, and the moduli
    moduli = ", ".join(f"{m}u" for m in MODULI_TABLE)
    prelude.write_text(abi.STAGES.prelude() + "\n// The moduli table (templates/constants.py), for the checker.\n"
                       f"static const uint32_t kModuliTable[ozaki::kMaxModuli] = {{{moduli}}};\n")
    cmd = [str(nvcc), "-x", "cu", "-std=c++17", "-O2", "-Xcompiler", "-ffp-contract=off",
           "-I", str(INCLUDE), *(f"-L{d}" for d in toolchain.library_dirs), "-include", str(prelude),
           str(CHECKER), "-o", str(binary)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.fail(f"compiling the checker failed:\n{' '.join(cmd)}\n{proc.stderr[-4000:]}")
    return binary


@pytest.fixture(scope="module")
def cases() -> list[str]:
    return generate_cases()


@pytest.fixture(scope="module")
def checked(checker, cases, tmp_path_factory) -> CheckerRun:
    return run_checker(checker, cases, tmp_path_factory.mktemp("host_cases") / "cases.txt")


# ------------------------------------------------------------------ tests

def test_every_case_matches_the_reference(checked):
    assert checked.total is not None, checked.output[-4000:]
    assert checked.returncode == 0 and checked.total[1] == 0 and not checked.mismatches, checked.report()


@pytest.mark.parametrize("tag", TAGS)
def test_family(checked, tag):
    """Per family: it ran (nothing silently dropped) and matched."""
    cases, bad = checked.counts.get(tag, (0, 0))
    assert cases > 0, f"no {tag} case was checked\n{checked.report()}"
    mine = [line for line in checked.mismatches if line.startswith(f"MISMATCH {tag} ")]
    assert bad == 0, f"{bad} of {cases} {tag} cases differ:\n" + "\n".join(mine)


def test_a_wrong_expected_value_is_reported(checker, cases, tmp_path):
    """The checker can fail: corrupt three expected values, expect exactly those three."""
    lines = list(cases)
    targets = {}
    for tag in ("clog2", "crt", "gcrt"):
        # (a crt line with a zero pattern entry: a NaN Y would stay NaN)
        idx = next(i for i, line in enumerate(lines)
                   if line.startswith(tag + " ") and (tag != "crt" or line.split()[-3] == "0"))
        parts = lines[idx].split()
        if tag == "crt":  # flip the last bit of Y
            parts[-1] = format(int(parts[-1], 16) ^ 1, "x")
        else:             # the expected value, plus one
            parts[-1] = str(int(parts[-1]) + 1)
        lines[idx] = " ".join(parts)
        targets[tag] = idx + 1  # the checker counts lines from 1
    run = run_checker(checker, lines, tmp_path / "tampered.txt")
    assert run.returncode == 1, run.output[-2000:]
    assert run.total is not None and run.total[1] == 3, run.report()
    for tag, lineno in targets.items():
        assert run.counts[tag][1] == 1, run.report()
        assert any(line.startswith(f"MISMATCH {tag} line {lineno}:") for line in run.mismatches), run.report()


def test_a_malformed_line_is_an_error(checker, tmp_path):
    run = run_checker(checker, ["clog2 5 3", "clog2 5", "clog2 7 3"], tmp_path / "bad.txt")
    assert run.returncode == 2 and run.mismatches == [
        "ERROR line 2: malformed clog2 line: clog2 5"], run.output
