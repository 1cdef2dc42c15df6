"""The command line's argument types: each refuses a bad value with one line, checked
where the library checks it."""

from __future__ import annotations

import argparse
import math

from ..numerics.moduli import validate_moduli_count

__all__ = ["ARRAY_CHOICES", "CPU_DEFAULT_N", "CPU_MAX_N", "GPU_DEMO_N", "PHI_MAX", "positive_int", "nonnegative_int",
           "nonnegative_float", "cpu_matrix_size", "cpu_size_problem",
           "spread", "moduli_count", "shape", "parse_shape", "batch_shape"]

#: The device arrays the measuring commands (demo, bench, tune) take: "cupy", "own" (our
#: DeviceArrays, native DGEMM through gemm(policy="native"); no CuPy needed), or "auto"
#: (CuPy where installed). ozaki_cutlass.tools.measure.arrays_for makes them.
ARRAY_CHOICES = ("auto", "cupy", "own")

#: The largest n x n x n product the CPU reference commands take (``accuracy``, and
#: ``demo`` where it runs without a GPU): their memory grows as n^2 and their time as n^3
#: (the double-double reference loops over k), and beyond this both are unreasonable.
CPU_MAX_N = 4096

#: The n of ``demo`` on a GPU, and of the CPU reference commands (``demo`` without a GPU,
#: ``accuracy``) where --n is not given.
GPU_DEMO_N = 8192
CPU_DEFAULT_N = 256

#: The largest phi (spread of the inputs' exponents) the commands take. Entries are
#: (U - 0.5) exp(phi N(0, 1)); the normal draws of the largest inputs (2 x 2^28 of them in
#: `bench`) stay within +-6.5 (p = 8e-11 per draw beyond), so at phi = 50 entries stay
#: within about 10^+-141 and products of two within 10^+-282, inside float64's 10^308.
#: Not far beyond, products overflow, then exp itself (above 709.8), and the error
#: measured means nothing.
PHI_MAX = 50.0


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def nonnegative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text}")
    return value


def _number(text: str) -> float:
    """``text`` as a float; NaN where it is not a number (the callers' checks refuse it)."""
    try:
        return float(text)
    except ValueError:
        return math.nan


def nonnegative_float(text: str) -> float:
    """A finite number, 0 or more (seconds)."""
    value = _number(text)
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number, 0 or more, got {text}")
    return value


def cpu_size_problem(n: int) -> str | None:
    """Why the CPU reference cannot take an n x n x n product (above CPU_MAX_N), or None."""
    if n <= CPU_MAX_N:
        return None
    return (f"{n} is above {CPU_MAX_N}, the largest n the CPU reference takes (its memory grows "
            f"as n^2 and its time as n^3); pass --n {CPU_MAX_N} or less")


def cpu_matrix_size(text: str) -> int:
    """A matrix size for the CPU reference: 1 .. CPU_MAX_N."""
    value = positive_int(text)
    why = cpu_size_problem(value)
    if why is not None:
        raise argparse.ArgumentTypeError(why)
    return value


def spread(text: str) -> float:
    """phi, the spread of the inputs' exponents: a number from 0 to PHI_MAX (see there)."""
    value = _number(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number from 0 to {PHI_MAX:g}, got {text}")
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"must be from 0 to {PHI_MAX:g}, got {text} (a spread: -phi draws from the same "
            "distribution as phi)")
    if value > PHI_MAX:
        raise argparse.ArgumentTypeError(
            f"{text} is above {PHI_MAX:g}: entries are (U - 0.5) exp(phi N(0,1)), about 10^+-141 "
            f"at phi = {PHI_MAX:g}, and not far beyond their products overflow float64; pass "
            f"{PHI_MAX:g} or less")
    return value


def moduli_count(text: str) -> int:
    """A moduli count the emulation takes (2..20), checked where the library checks it."""
    try:
        return validate_moduli_count(int(text))
    except (TypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_shape(text: str) -> tuple[int, int, int]:
    """'N' (square) or 'MxNxK'."""
    parts = text.lower().split("x")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        raise ValueError(f"shape {text!r}: expected N or MxNxK with integers") from None
    if len(dims) == 1:
        dims = dims * 3
    if len(dims) != 3 or min(dims) < 1:
        raise ValueError(f"shape {text!r}: expected N or MxNxK with positive integers")
    return dims


def shape(text: str) -> tuple[int, int, int]:
    """'N' or 'MxNxK' (the benchmark's shapes)."""
    try:
        return parse_shape(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def matrix_shape(text: str) -> tuple[int, int]:
    """'N' (square) or 'MxN': an m x n matrix (the stage-alone scripts' shapes)."""
    parts = text.lower().split("x")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape {text!r}: expected N or MxN with integers") from None
    if len(dims) == 1:
        dims = dims * 2
    if len(dims) != 2 or min(dims) < 1:
        raise argparse.ArgumentTypeError(f"shape {text!r}: expected N or MxN with positive integers")
    return dims


def batch_shape(text: str) -> tuple[int, int]:
    """'BxN': a batch of B products n x n x n (the batched rows)."""
    parts = text.lower().split("x")
    try:
        batch, n = (int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"batch shape {text!r}: expected BxN with integers") from None
    if batch < 1 or n < 1:
        raise argparse.ArgumentTypeError(f"batch shape {text!r}: expected BxN with positive integers")
    return batch, n
