"""The command line's argument types: each refuses a bad value with one line, checked
where the library checks it."""

from __future__ import annotations

import argparse

from ..numerics.moduli import validate_moduli_count

__all__ = ["positive_int", "nonnegative_int", "moduli_count", "shape", "parse_shape"]


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
