"""Complex GEMM (ZGEMM) as one real product: the definitions, in NumPy.

C = alpha op(A) op(B) + beta C for complex128 operands is computed as
  1. Ahat = realify_left(op(A)):  m x 2k, Re and Im of op(A) interleaved along the columns;
     Bhat = realify_right(op(B)): 2k x 2n, the 2 x 2 block [[Re, Im], [-Im, Re]] per entry;
  2. That = Ahat Bhat by the real emulation (alpha 1, beta 0; its accuracy contract, moduli
     and bits): an m x 2n real matrix whose columns 2j and 2j + 1 are Re and Im of
     (op(A) op(B))_:j exactly as the real product defines them,
       Re = sum_l Re a_il Re b_lj + Im a_il (-Im b_lj),  Im = sum_l Re a_il Im b_lj + Im a_il Re b_lj,
     so it is a complex128 m x n matrix T in memory;
  3. C = complex_axpby(T, alpha, beta, C): every real operation rounded on its own, in a
     fixed order.
Each step is exact or defined to the bit (the realification only copies and negates), so
the GPU (kernels P_realify and P_complex_axpby, the real pipeline between) and
``ozaki_cutlass.reference`` give the same bits.

Accuracy: the real product's bound is per entry of |Ahat| |Bhat|, i.e.
(|Re A| |Re B| + |Im A| |Im B|)_ij for Re C and (|Re A| |Im B| + |Im A| |Re B|)_ij for Im C,
the quantities native ZGEMM's classical bound is stated in; the real contract certifies
its bound against them, so the complex call carries the same contract. This is the
four-real-products form (one real GEMM of twice the k and twice the n); the GPU's staged
path runs it as Karatsuba's three products per modulus where that gives these bits
(ozaki_cutlass.paths.karatsuba).

``op`` is "N" (op(X) = X), "T" (X^T) or "C" (X^H, the conjugate transpose), as BLAS's
transa/transb (``ozaki_cutlass.options.as_op`` reads the flags).
"""

from __future__ import annotations

import numpy as np

from .accuracy import exact_product

__all__ = ["is_complex_dtype", "apply_op", "realify_left", "realify_right", "complex_axpby",
           "as_complex_scalar", "host_zgemm", "sampled_error"]

def is_complex_dtype(dtype) -> bool:
    """Whether ``dtype`` is a complex floating type (only complex128 is computed; the
    caller refuses the others by name)."""
    return np.dtype(dtype).kind == "c"


def apply_op(x: np.ndarray, op: str) -> np.ndarray:
    """op(x) for op in OPS (a view for "N" and "T")."""
    return x if op == "N" else x.T if op == "T" else x.conj().T


def realify_left(x: np.ndarray) -> np.ndarray:
    """The m x 2k float64 matrix of a complex m x k: [Re x_:0, Im x_:0, Re x_:1, ...]."""
    out = np.empty((x.shape[0], 2 * x.shape[1]))
    out[:, 0::2] = x.real
    out[:, 1::2] = x.imag
    return out


def realify_right(x: np.ndarray) -> np.ndarray:
    """The 2k x 2n float64 matrix of a complex k x n: entry (l, j) becomes the block
    [[Re, Im], [-Im, Re]] at rows 2l, 2l + 1 and columns 2j, 2j + 1."""
    out = np.empty((2 * x.shape[0], 2 * x.shape[1]))
    out[0::2, 0::2] = x.real
    out[0::2, 1::2] = x.imag
    out[1::2, 0::2] = -x.imag
    out[1::2, 1::2] = x.real
    return out


def as_complex_scalar(x, name: str) -> complex:
    """``x`` (a Python or NumPy real or complex number, not bool) as a Python complex;
    TypeError naming ``name`` otherwise."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, complex, np.number)):
        raise TypeError(f"{name} must be a real or complex number, got {type(x).__name__}")
    return complex(x)


def complex_axpby(t: np.ndarray | None, alpha: complex, beta: complex, c: np.ndarray | None) -> np.ndarray:
    """alpha t + beta c for complex128 m x n matrices, each real operation rounded on its
    own (the order P_complex_axpby follows): a = 0 when alpha == 0 (t unread), t itself
    when alpha == 1, else (ar tr - ai ti, ar ti + ai tr); then, when beta != 0 (c unread
    otherwise), a + c when beta == 1, else a + (br cr - bi ci, br ci + bi cr). (alpha == 1
    and beta == 1 take the operand as it is, so an Inf in one part does not turn the other
    into NaN through 0 * Inf.)"""
    with np.errstate(invalid="ignore", over="ignore"):  # NaN/Inf follow IEEE arithmetic, as on the GPU
        return _axpby(t, alpha, beta, c)


def _axpby(t, alpha: complex, beta: complex, c) -> np.ndarray:
    shape = (t if t is not None else c).shape
    re, im = np.zeros(shape), np.zeros(shape)
    ar, ai, br, bi = alpha.real, alpha.imag, beta.real, beta.imag
    if alpha == 1:
        re, im = np.array(t.real, dtype=np.float64), np.array(t.imag, dtype=np.float64)
    elif alpha != 0:
        tr, ti = np.ascontiguousarray(t.real), np.ascontiguousarray(t.imag)
        re = np.subtract(np.multiply(ar, tr), np.multiply(ai, ti))
        im = np.add(np.multiply(ar, ti), np.multiply(ai, tr))
    if beta == 1:
        re, im = np.add(re, c.real), np.add(im, c.imag)
    elif beta != 0:
        cr, ci = np.ascontiguousarray(c.real), np.ascontiguousarray(c.imag)
        re = np.add(re, np.subtract(np.multiply(br, cr), np.multiply(bi, ci)))
        im = np.add(im, np.add(np.multiply(br, ci), np.multiply(bi, cr)))
    out = np.empty(shape, dtype=np.complex128)
    out.real, out.imag = re, im
    return out


def host_zgemm(a0: np.ndarray, b0: np.ndarray, c: np.ndarray | None, alpha: complex, beta: complex,
               real_product) -> np.ndarray:
    """The three steps on host arrays op(A) = ``a0`` and op(B) = ``b0`` (complex128), with
    ``real_product(ahat, bhat)`` the real m x 2n product (the reference's, or the GPU's on
    uploaded operands). alpha == 0 or an empty product reads neither operand: C = beta C."""
    m, k = a0.shape
    n = b0.shape[1]
    if alpha != 0 and k and m and n:
        t = np.ascontiguousarray(real_product(realify_left(a0), realify_right(b0))).view(np.complex128)
        return complex_axpby(t, alpha, beta, c)
    if beta != 0:
        return complex_axpby(None, 0j, beta, c)
    return np.zeros((m, n), dtype=np.complex128)


def sampled_error(got: np.ndarray, a_rows: np.ndarray, b_cols: np.ndarray) -> float:
    """The error of sampled entries of a complex product: ``got`` (r x c, complex) against
    the exact product of ``a_rows`` (r x k) and ``b_cols`` (k x c), normwise over the same
    entries of |Re A||Re B| + |Im A||Im B| (and likewise for Im): the quantities native
    ZGEMM's bound is stated in. Exact: Python integers (numerics.accuracy.exact_product)."""
    a_hat, b_hat = realify_left(a_rows), realify_right(b_cols)
    hi, lo = exact_product(a_hat, b_hat)
    diff = (np.ascontiguousarray(got, dtype=np.complex128).view(np.float64) - hi) - lo
    return float(np.linalg.norm(diff) / np.linalg.norm(np.abs(a_hat) @ np.abs(b_hat)))
