"""The Ozaki scheme II in NumPy: the reference every GPU stage is checked against.

``gemm`` is built from stage functions that the GPU stages mirror one to one:

1. :func:`split_nonfinite`            non-finite entries out, their pattern kept;
2. :func:`exponents`                  E_i with max_l |x_il| < 2^E_i (per row of op(A),
                                      per column of op(B));
3. :func:`fast_shifts`                Cauchy-Schwarz shifts from an exact integer norm bound;
   :func:`coarse_magnitudes`          ceil(2^(6-E)|x|) in 0..64 (int8 operands);
   :func:`coarse_bound`               G = |A|~ |B|~ exactly (the extra INT8 GEMM);
   :func:`accurate_shifts`            per-(i, j) bound -> larger shifts, never smaller;
4. :func:`scale_to_integers`          A' = trunc(2^mu a), exact in float64;
5. :func:`residues`                   A' mods m_g as int8, TN layout (modulus, row, k);
6. :func:`modular_products`           (A'_g B'_g^T) mod m_g, k cut into K_CHUNK pieces;
7. :func:`crt_reconstruct`            the integer product A'B' from its residues;
8. :func:`unscale`                    2^-(mu_i + nu_j), then alpha and beta.

All steps up to 7 are exact integer arithmetic; 7 and 8 are a fixed sequence of IEEE
double operations with no fused multiply-add dependence, so the result is bitwise
reproducible. See docs/numerics.md for the proofs of the bounds.
The stage functions check nothing: they take what ``gemm`` passes them (checked,
finite operands of the dtypes and shapes their docstrings name).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .numerics.moduli import COARSE_BITS, K_CHUNK, CRTConstants, crt_constants
from .templates.constants import FAST_BOUND_BITS, NO_CONSTRAINT  # shared with the kernels
from .numerics.contract import (Choice, certificate, choose, equilibration, inner_stats,
                                 warn)
from .numerics.zgemm import (apply_op, as_complex_scalar, host_zgemm, is_complex_dtype, realify_left,
                             realify_right)
from .options import (DEFAULT_MODULI, MODES, as_op, as_scalar, as_trans, check_contract_policy, check_empty_batch,
                      check_host_matrix, check_sizes, refuse_native_settings, resolve_accuracy, validate_policy)

__all__ = ["DEFAULT_MODULI", "MODES", "gemm", "contract", "choose_scaling", "fast_terms", "shifts_from_log", "Scaling", "split_nonfinite", "exponents",
           "fast_shifts", "fast_bound_bits", "coarse_magnitudes", "coarse_bound", "accurate_shifts",
           "scale_to_integers", "residues", "modular_products", "crt_reconstruct", "unscale"]



# --------------------------------------------------------------------------- helpers

def _ceil_log2(x: np.ndarray) -> np.ndarray:
    """ceil(log2(x)) for integers x >= 1 (uint64 or int64), exactly; 0 maps to 0."""
    v = np.asarray(x).astype(np.uint64)
    v = np.where(v > 0, v - np.uint64(1), np.uint64(0))
    bits = np.zeros(v.shape, dtype=np.int64)
    for step in (32, 16, 8, 4, 2, 1):
        big = v >= (np.uint64(1) << np.uint64(step))
        bits += np.where(big, step, 0)
        v = np.where(big, v >> np.uint64(step), v)
    bits += (v > 0).astype(np.int64)
    return bits


def fast_bound_bits(k: int) -> int:
    """Quantization bits q of the fast bound: k * 2^(2q) must fit an unsigned 63-bit sum."""
    return min(FAST_BOUND_BITS, (63 - int(k - 1).bit_length()) // 2) if k > 1 else FAST_BOUND_BITS


# --------------------------------------------------------------------------- stages

def split_nonfinite(a: np.ndarray, b: np.ndarray):
    """Return finite copies of a (m x k) and b (k x n) with NaN/Inf set to 0, and the
    (m x n) NaN/Inf pattern of a @ b (float64 array of nan/+inf/-inf where non-finite,
    0 elsewhere) or None when both inputs are finite.

    A term a_il b_lj is NaN if either is NaN or it is 0 * Inf; it is +-Inf if either is
    infinite and the other is non-zero. An entry is NaN if it has a NaN term or both
    signs of infinite terms, +-Inf if it has infinite terms of one sign. (float64 ``@``
    may also overflow finite terms to Inf; that is the product being out of range, which
    the emulation reproduces through its final scaling instead.)
    """
    fa, fb = np.isfinite(a), np.isfinite(b)
    if fa.all() and fb.all():
        return a, b, None
    ind = lambda mask: mask.astype(np.float64)  # noqa: E731  (0/1 products are exact)
    a_nan, b_nan = np.isnan(a), np.isnan(b)
    a_pinf, a_ninf = a == np.inf, a == -np.inf
    b_pinf, b_ninf = b == np.inf, b == -np.inf
    a_inf, b_inf = a_pinf | a_ninf, b_pinf | b_ninf
    a_pos, a_neg = a > 0, a < 0
    b_pos, b_neg = b > 0, b < 0
    a_zero, b_zero = a == 0, b == 0
    ones_a = np.ones((a.shape[1], b.shape[1]))
    ones_b = np.ones((a.shape[0], a.shape[1]))
    nan = (ind(a_nan) @ ones_a + ones_b @ ind(b_nan)
           + ind(a_zero) @ ind(b_inf) + ind(a_inf) @ ind(b_zero)) > 0
    pinf = (ind(a_pinf) @ ind(b_pos) + ind(a_ninf) @ ind(b_neg)
            + ind(a_pos) @ ind(b_pinf) + ind(a_neg) @ ind(b_ninf)) > 0
    ninf = (ind(a_pinf) @ ind(b_neg) + ind(a_ninf) @ ind(b_pos)
            + ind(a_pos) @ ind(b_ninf) + ind(a_neg) @ ind(b_pinf)) > 0
    pattern = np.zeros((a.shape[0], b.shape[1]))
    pattern[pinf] = np.inf
    pattern[ninf] = -np.inf
    pattern[nan | (pinf & ninf)] = np.nan
    return np.where(fa, a, 0.0), np.where(fb, b, 0.0), pattern


def _along_k(values, axis: int):
    """Per-k values (the inner shifts) broadcast against a matrix whose k runs along ``axis``."""
    return np.expand_dims(values, 1 - axis)


def _inner_or_zero(inner, x: np.ndarray, axis: int):
    return 0 if inner is None else _along_k(np.asarray(inner, dtype=np.int64), axis)


def exponents(x: np.ndarray, axis: int, inner=None) -> np.ndarray:
    """E with max |x 2^s| along ``axis`` < 2^E: the largest frexp exponent of the non-zero
    entries of a vector, with the inner shift s_l of its index l added (``inner``; None:
    0); 0 for a zero vector. Integer arithmetic: no scaled value is ever formed."""
    nz = x != 0
    ex = np.frexp(x)[1].astype(np.int64) + _inner_or_zero(inner, x, axis)
    low = np.iinfo(np.int64).min
    top = np.max(np.where(nz, ex, low), axis=axis) if x.shape[axis] else np.full(x.shape[1 - axis], low)
    return np.where(top == low, 0, top).astype(np.int64)


def fast_terms(x: np.ndarray, axis: int, exps: np.ndarray, inner=None) -> tuple[np.ndarray, np.ndarray]:
    """Per vector: ceil(log2 Q) (-1 where Q = 0) and S1 = sum q, for
    q = ceil(2^(qb - E) |x 2^s|) <= 2^qb (raised to 1 for x != 0), Q = sum q^2 (exact
    unsigned integers). q bounds |x 2^s| 2^(qb - E) from above, so 2^(E - qb) S1 bounds the
    vector's 1-norm and 2^(2(E - qb)) Q its squared 2-norm."""
    k = x.shape[axis]
    qb = fast_bound_bits(k)
    q = np.ceil(np.ldexp(np.abs(x), qb - np.expand_dims(exps, axis) + _inner_or_zero(inner, x, axis)))
    q = np.where((x != 0) & (q == 0), 1.0, q).astype(np.uint64)  # a deep underflow must not drop a bound
    sumsq = np.sum(q ** np.uint64(2), axis=axis, dtype=np.uint64)
    logq = np.where(sumsq > 0, _ceil_log2(sumsq), -1).astype(np.int64)
    return logq, np.sum(q, axis=axis, dtype=np.uint64)


def shifts_from_log(exps: np.ndarray, logq: np.ndarray, k: int, bound_exponent: int) -> np.ndarray:
    """The fast shifts from fast_terms' ceil(log2 Q): s = floor((pb - ceil(log2 Q)) / 2) - E + qb
    (0 for a zero vector). Then ||2^s x||^2 <= 2^(2(s + E - qb)) Q <= 2^pb, and by
    Cauchy-Schwarz sum_l |A'_il||B'_lj| <= 2^pb for every (i, j)."""
    qb = fast_bound_bits(k)
    return np.where(logq >= 0, (bound_exponent - logq) // 2 - exps + qb, 0).astype(np.int64)


def fast_shifts(x: np.ndarray, axis: int, exps: np.ndarray, bound_exponent: int, inner=None) -> np.ndarray:
    """Shifts s with ||2^s x||_2 <= 2^(pb/2) per row (axis=1) or column (axis=0):
    :func:`fast_terms`, then :func:`shifts_from_log`."""
    logq, _ = fast_terms(x, axis, exps, inner)
    return shifts_from_log(exps, logq, x.shape[axis], bound_exponent)


def coarse_magnitudes(x: np.ndarray, axis: int, exps: np.ndarray, inner=None) -> np.ndarray:
    """ceil(2^(COARSE_BITS - E) |x 2^s|) as integers in [0, 2^COARSE_BITS], zero only for zeros."""
    e = np.expand_dims(exps, axis)
    q = np.ceil(np.ldexp(np.abs(x), COARSE_BITS - e + _inner_or_zero(inner, x, axis)))
    q = np.where((x != 0) & (q == 0), 1.0, q)
    return q.astype(np.int8)


def coarse_bound(abar: np.ndarray, bbar: np.ndarray) -> np.ndarray:
    """G = abar @ bbar exactly (int64). Entries <= 2^12 each, so float64 sums are exact."""
    return (abar.astype(np.float64) @ bbar.astype(np.float64)).astype(np.int64)


def accurate_shifts(g, exps_a, exps_b, mu_fast, nu_fast, bound_exponent):
    """Raise the fast shifts using the per-(i, j) coarse bound G.

    sum_l |a_il||b_lj| <= 2^(E_i + F_j - 2*COARSE_BITS) G_ij, so (mu_i, nu_j) is safe
    when mu_i + nu_j <= c_ij = pb + 2*COARSE_BITS - E_i - F_j - ceil(log2 G_ij).
    With slack s_ij = c_ij - mu_fast_i - nu_fast_j, rows gain d_i = max(0, floor(min_j
    s_ij / 2)) and columns gain g_j = max(0, min_i (s_ij - d_i)). Each pair then satisfies
    either the coarse bound (d_i + g_j <= s_ij) or, where d_i = g_j = 0, the fast one.
    Gains are capped so that 2^mu |a| and 2^nu |b| stay below 2^pb.
    """
    logg = _ceil_log2(g)
    c = bound_exponent + 2 * COARSE_BITS - exps_a[:, None] - exps_b[None, :] - logg
    slack = np.where(g > 0, c - mu_fast[:, None] - nu_fast[None, :], NO_CONSTRAINT)
    m, n = g.shape
    row_min = slack.min(axis=1) if n else np.full(m, NO_CONSTRAINT)
    cap_a = bound_exponent - exps_a - mu_fast
    cap_b = bound_exponent - exps_b - nu_fast
    d = np.clip(row_min // 2, 0, np.maximum(cap_a, 0))
    col_min = (slack - d[:, None]).min(axis=0) if m else np.full(n, NO_CONSTRAINT)
    gcol = np.clip(col_min, 0, np.maximum(cap_b, 0))
    return mu_fast + d, nu_fast + gcol


def scale_to_integers(x: np.ndarray, shifts: np.ndarray, axis: int, inner=None) -> np.ndarray:
    """trunc(2^(s + s_l) x): integer-valued float64, exact (|result| < 2^pb, 53 significant
    bits); s_l the inner shift of the entry's k index (``inner``; None: 0)."""
    return np.trunc(np.ldexp(x, np.expand_dims(shifts, axis) + _inner_or_zero(inner, x, axis)))


@lru_cache(maxsize=None)
def _pow2_mod_table(modulus: int, max_exp: int) -> np.ndarray:
    table = np.empty(max_exp + 1, dtype=np.int64)
    v = 1 % modulus
    for e in range(max_exp + 1):
        table[e] = v
        v = (v * 2) % modulus
    return table


def residues(x_int: np.ndarray, moduli: tuple[int, ...]) -> np.ndarray:
    """Symmetric residues of integer-valued float64 ``x_int`` (rows x k) as int8,
    shape (len(moduli), rows, k).

    |x| < 2^53 converts to int64 directly; larger x = M 2^e (M a 53-bit integer, e > 0)
    uses (M mod m)(2^e mod m) mod m. r >= (m+1)//2 maps to r - m, so 256's class of 128
    is stored as -128.
    """
    ax = np.abs(x_int)
    small = ax < 2.0**53
    mant, ex = np.frexp(np.where(small, 0.0, ax))
    big_m = np.ldexp(mant, 53).astype(np.int64)
    big_e = np.where(small, 0, ex - 53).astype(np.int64)
    mag = np.where(small, ax, 0.0).astype(np.int64)
    out = np.empty((len(moduli),) + x_int.shape, dtype=np.int8)
    max_e = int(big_e.max()) if big_e.size else 0
    neg = x_int < 0
    for g, m in enumerate(moduli):
        p2 = _pow2_mod_table(m, max_e)
        r = np.where(small, mag % m, (big_m % m) * p2[big_e] % m)
        r = np.where(neg, (m - r) % m, r)
        out[g] = np.where(r >= (m + 1) // 2, r - m, r)
    return out


def modular_products(ra: np.ndarray, rb: np.ndarray, moduli: tuple[int, ...]) -> np.ndarray:
    """(ra_g @ rb_g^T) mod m_g in [0, m_g), shape (N, m, n), int32.

    ra is (N, m, k) and rb is (N, n, k) (the TN layout of the INT8 kernels). k is cut into
    K_CHUNK pieces so that each piece is an exact int32 sum, as on the GPU; float64 GEMM
    sums of |values| <= 2^14 * K_CHUNK < 2^31 are exact in any order.
    """
    n_mod, m, k = ra.shape
    n = rb.shape[1]
    out = np.empty((n_mod, m, n), dtype=np.int32)
    for g, mod in enumerate(moduli):
        acc = np.zeros((m, n), dtype=np.int64)
        for k0 in range(0, k, K_CHUNK):
            part = ra[g, :, k0:k0 + K_CHUNK].astype(np.float64) @ rb[g, :, k0:k0 + K_CHUNK].astype(np.float64).T
            acc = (acc + part.astype(np.int64)) % mod
        out[g] = acc
    return out


def crt_reconstruct(r: np.ndarray, consts: CRTConstants) -> np.ndarray:
    """The integer X = A'B' (|X| < P/2) from residues r_g = X mod m_g, rounded to float64.

    S_j = sum_g d[g][j] r_g            exact (each < 2^53)
    Q   = rint(sum_j S_j f_j)          the exact quotient round(S / P) (margin 2^-20)
    R_j = S_j - Q p_j                  exact
    X   = sum_j R_j 2^(40(L-1-j))      summed top-down with TwoSum into (hi, lo); hi + lo.
    """
    L = consts.limbs
    rf = r.astype(np.float64)
    limb_sums = []
    for j in range(L):
        s = np.zeros(r.shape[1:])
        for g in range(consts.count):
            s = s + consts.weight_limbs[g][j] * rf[g]
        limb_sums.append(s)
    x = limb_sums[0] * consts.quotient_factors[0]
    for j in range(1, L):
        x = x + limb_sums[j] * consts.quotient_factors[j]
    q = np.rint(x)
    hi = (limb_sums[0] - q * consts.product_limbs[0]) * consts.limb_scales[0]
    lo = np.zeros_like(hi)
    for j in range(1, L):
        t = (limb_sums[j] - q * consts.product_limbs[j]) * consts.limb_scales[j]
        s = hi + t
        bb = s - hi
        err = (hi - (s - bb)) + (t - bb)
        hi = s
        lo = lo + err
    return hi + lo


def unscale(x, mu, nu, alpha: float, beta: float, c) -> np.ndarray:
    """alpha * 2^-(mu_i + nu_j) x_ij + beta * c_ij (c not read when beta == 0)."""
    y = np.ldexp(x, -(mu[:, None] + nu[None, :]))
    y = alpha * y
    if beta != 0.0:
        y = y + beta * c
    return y


# --------------------------------------------------------------------------- plan

@dataclass(frozen=True, slots=True)
class Scaling:
    """The shifts and (for inspection) the bound that chose them."""
    mu: np.ndarray
    nu: np.ndarray
    exps_a: np.ndarray
    exps_b: np.ndarray


def choose_scaling(a: np.ndarray, b: np.ndarray, consts: CRTConstants, mode: str, inner=None) -> Scaling:
    """Stages 2-3 for finite a (m x k) and b (k x n); ``inner``: the equilibration e (op(A)
    is scaled by 2^-e, op(B) by 2^e) or None."""
    pb = consts.bound_exponent
    sa, sb = (None, None) if inner is None else (-inner, inner)
    ea = exponents(a, 1, sa)
    eb = exponents(b, 0, sb)
    mu = fast_shifts(a, 1, ea, pb, sa)
    nu = fast_shifts(b, 0, eb, pb, sb)
    if mode == "accurate" and a.shape[0] and b.shape[1]:
        g = coarse_bound(coarse_magnitudes(a, 1, ea, sa), coarse_magnitudes(b, 0, eb, sb))
        mu, nu = accurate_shifts(g, ea, eb, mu, nu, pb)
    return Scaling(mu=mu, nu=nu, exps_a=ea, exps_b=eb)


def _contract(a: np.ndarray, b: np.ndarray, target: float, mode: str, may_fall_back: bool):
    """The contract's stages on finite op(A) (m x k, m, k >= 1) and op(B): its Choice and
    the equilibration e."""
    inner_a, inner_b = inner_stats(a), inner_stats(b.T)
    e = equilibration(inner_a[0], inner_b[0])
    ea, eb = exponents(a, 1, -e), exponents(b, 0, e)
    logq_a, s1_a = fast_terms(a, 1, ea, -e)
    logq_b, s1_b = fast_terms(b, 0, eb, e)
    cert = certificate(ea, logq_a, s1_a, eb, logq_b, s1_b, inner_a, inner_b, fast_bound_bits(a.shape[1]),
                       bool(e.any()))
    return choose(cert, target, mode, may_fall_back), e


def _batched(a, b, c, settings: dict) -> np.ndarray:
    """gemm over a batch (ozaki_cutlass.batched): the loop of single calls, stacked."""
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, np.ndarray) or x.ndim not in (2, 3):
            check_host_matrix(x, name)  # says what is wrong
    sizes = [x.shape[0] if x.ndim == 3 else None for x in (a, b)]
    if None not in sizes and sizes[0] != sizes[1]:
        raise ValueError(f"batch sizes differ: a has {sizes[0]}, b has {sizes[1]}")
    batch = sizes[0] if sizes[0] is not None else sizes[1]
    if c is not None:
        if not isinstance(c, np.ndarray):
            raise TypeError(f"c must be a numpy.ndarray, got {type(c).__name__}")
        if c.ndim != 3:
            raise ValueError(f"c of a batched call must be 3-D (batch, m, n), got {c.ndim}-D")
        if c.shape[0] != batch:
            raise ValueError(f"c must have batch size {batch}, got {c.shape[0]}")
    results = [gemm(a[i] if a.ndim == 3 else a, b[i] if b.ndim == 3 else b, c=None if c is None else c[i],
                    **settings) for i in range(batch)]
    if results:
        return np.stack(results)
    dtype = check_empty_batch({n: x.dtype for n, x in (("a", a), ("b", b), ("c", c)) if x is not None},
                              settings["alpha"], settings["beta"])
    x, y = (a[:1] if a.ndim == 3 else a[None]), (b[:1] if b.ndim == 3 else b[None])
    m = x.shape[2] if as_trans(settings["trans_a"], "trans_a") else x.shape[1]
    n = y.shape[1] if as_trans(settings["trans_b"], "trans_b") else y.shape[2]
    if c is not None and c.shape[1:] != (m, n):
        raise ValueError(f"c must have shape {(m, n)}, got {c.shape[1:]}")
    if c is None and settings["beta"] != 0:
        raise ValueError("beta != 0 needs c")
    return np.empty((0, m, n), dtype=dtype)


def _complex_call(a, b) -> bool:
    return any(isinstance(x, np.ndarray) and is_complex_dtype(x.dtype) for x in (a, b))


def _complex_operands(a, b, trans_a, trans_b):
    """op(a), op(b) of complex128 operands (trans: "N", "T", "C", False, True), checked."""
    a = apply_op(check_host_matrix(a, "a", np.complex128), as_op(trans_a, "trans_a"))
    b = apply_op(check_host_matrix(b, "b", np.complex128), as_op(trans_b, "trans_b"))
    if b.shape[0] != a.shape[1]:
        raise ValueError(f"inner dimensions differ: op(a) is {a.shape}, op(b) is {b.shape}")
    return a, b


def _zgemm(a, b, c, alpha, beta, trans_a, trans_b, real: dict) -> np.ndarray:
    """gemm of complex128 operands (numerics.zgemm): the real reference on the realified
    operands, then alpha T + beta C in complex."""
    alpha, beta = as_complex_scalar(alpha, "alpha"), as_complex_scalar(beta, "beta")
    a0, b0 = _complex_operands(a, b, trans_a, trans_b)
    m, n = a0.shape[0], b0.shape[1]
    check_sizes(**{"2m": 2 * m, "2n": 2 * n, "2k": 2 * a0.shape[1]})  # the realified product
    if c is not None:
        c = check_host_matrix(c, "c", np.complex128)
        if c.shape != (m, n):
            raise ValueError(f"c must have shape {(m, n)}, got {c.shape}")
    elif beta != 0:
        raise ValueError("beta != 0 needs c")
    return host_zgemm(a0, b0, c, alpha, beta, lambda a_hat, b_hat: gemm(a_hat, b_hat, **real))


def _operands(a, b, trans_a, trans_b):
    a = check_host_matrix(a, "a")
    b = check_host_matrix(b, "b")
    a = a.T if as_trans(trans_a, "trans_a") else a
    b = b.T if as_trans(trans_b, "trans_b") else b
    if b.shape[0] != a.shape[1]:
        raise ValueError(f"inner dimensions differ: op(a) is {a.shape}, op(b) is {b.shape}")
    return a, b


def contract(a: np.ndarray, b: np.ndarray, *, trans_a: bool = False, trans_b: bool = False,
             accuracy: str | float | None = None, mode: str | None = None, policy: str = "auto") -> Choice:
    """What :func:`gemm` (and ``ozaki_cutlass.gemm``) with these settings and no explicit
    ``moduli`` chooses: the :class:`~ozaki_cutlass.numerics.contract.Choice` (moduli, mode,
    equilibration, certified bound, or the native fallback and why). An empty product
    (m, n or k zero) chooses the fewest moduli with bound 0. ``policy="native"`` runs no
    contract: ValueError."""
    policy = check_contract_policy(policy)
    if _complex_call(a, b):  # the realified product's contract (numerics.zgemm)
        a0, b0 = _complex_operands(a, b, trans_a, trans_b)
        return contract(realify_left(a0), realify_right(b0), accuracy=accuracy, mode=mode, policy=policy)
    a, b = _operands(a, b, trans_a, trans_b)
    _, mode, target = resolve_accuracy(None, accuracy, mode)
    if not (a.shape[0] and b.shape[1] and a.shape[1]):
        return Choice.of_empty_product(mode, target)
    a, b, _ = split_nonfinite(a, b)
    return _contract(a, b, target, mode, policy == "auto")[0]


def gemm(a: np.ndarray, b: np.ndarray, *, c: np.ndarray | None = None, alpha: float = 1.0, beta: float = 0.0,
         trans_a: bool = False, trans_b: bool = False, moduli: int | None = None,
         mode: str | None = None, accuracy: str | float | None = None, policy: str = "auto") -> np.ndarray:
    """C = alpha op(A) op(B) + beta C with the Ozaki scheme II, in NumPy.

    a, b (and c): 2-D float64 NumPy arrays (other dtypes and masked arrays are refused,
    as ``ozaki_cutlass.gemm`` refuses them). ``trans_a``, ``trans_b``: True or False.

    ``moduli=None`` (the default) runs the accuracy contract (docs/numerics.md): the
    fewest moduli (8..20) whose certified bound ||C - AB||_F <= t || |A||B| ||_F meets
    ``accuracy`` (t = 2^-53 for "dgemm", the default, or a number in [2^-100, 1)), after
    an exact inner equilibration; ``mode`` defaults to "fast" there. Where 20 moduli do
    not meet it: ``policy="auto"`` returns float64 ``@`` (where the GPU runs native
    DGEMM) unless 20 moduli still certify 2^-53, ``policy="emulate"`` runs 20 moduli with
    an AccuracyWarning; ``policy="native"`` always returns float64 ``@``. An explicit
    ``moduli`` (2..20) runs exactly that count, no contract (``accuracy`` must then be
    unset), ``mode`` defaulting to "accurate" (extra coarse GEMM, larger shifts) or
    "fast" (Cauchy-Schwarz bound only). Both bounds are rigorous: the integer product is
    always reconstructed exactly. alpha == 0 does not read a or b; beta == 0 does not
    read c. Returns a new float64 array; c is not modified. ``policy="native"`` takes no
    ``moduli``, ``mode`` or ``accuracy`` (ValueError: they set the emulation).
    """
    policy = validate_policy(policy)
    refuse_native_settings(policy, moduli=moduli, mode=mode, accuracy=accuracy)
    resolve_accuracy(moduli, accuracy, mode)  # checked here too for calls that compute nothing
    if any(isinstance(x, np.ndarray) and x.ndim == 3 for x in (a, b)):
        return _batched(a, b, c, dict(alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b, moduli=moduli,
                                      mode=mode, accuracy=accuracy, policy=policy))
    if _complex_call(a, b):
        return _zgemm(a, b, c, alpha, beta, trans_a, trans_b,
                      dict(moduli=moduli, mode=mode, accuracy=accuracy, policy=policy))
    alpha = as_scalar(alpha, "alpha")
    beta = as_scalar(beta, "beta")
    a0, b0 = _operands(a, b, trans_a, trans_b)
    count, mode, target = resolve_accuracy(moduli, accuracy, mode)
    m, k = a0.shape
    n = b0.shape[1]
    if c is not None:
        c = check_host_matrix(c, "c")
        if c.shape != (m, n):
            raise ValueError(f"c must have shape {(m, n)}, got {c.shape}")
    elif beta != 0.0:
        raise ValueError("beta != 0 needs c")
    if alpha == 0.0 or k == 0 or m == 0 or n == 0:
        y = np.zeros((m, n))
        return y + beta * c if beta != 0.0 else y
    if policy == "native":
        return _float64(a0, b0, alpha, beta, c)

    a, b, pattern = split_nonfinite(a0, b0)
    inner = None
    if count is None:
        choice, e = _contract(a, b, target, mode, policy == "auto")
        if choice.native:
            return _float64(a0, b0, alpha, beta, c)
        warn(choice)
        count, mode, inner = choice.moduli, choice.mode, (e if e.any() else None)
    consts = crt_constants(count)
    sc = choose_scaling(a, b, consts, mode, inner)
    sa, sb = (None, None) if inner is None else (-inner, inner)
    a_int = scale_to_integers(a, sc.mu, 1, sa)
    b_int = scale_to_integers(b, sc.nu, 0, sb)
    ra = residues(a_int, consts.moduli)
    rb = residues(b_int.T, consts.moduli)
    r = modular_products(ra, rb, consts.moduli)
    x = crt_reconstruct(r, consts)
    if pattern is not None:
        x = np.where(pattern == 0, x, pattern)
    return unscale(x, sc.mu, sc.nu, alpha, beta, c)


def _float64(a, b, alpha: float, beta: float, c) -> np.ndarray:
    """alpha a @ b + beta c in float64 (where the GPU runs native DGEMM)."""
    y = alpha * (a @ b)
    return y + beta * c if beta != 0.0 else y
