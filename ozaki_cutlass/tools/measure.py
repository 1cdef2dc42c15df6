"""What the measuring commands (bench, tune, demo) share: timing in alternation, native
DGEMM through CuPy, and the error of sampled rows against a double-double product."""

from __future__ import annotations

import importlib.util
import statistics

import numpy as np

from ..api import gemm
from ..device import driver
from ..numerics.accuracy import dd_product, normwise_error

__all__ = ["native_dgemm", "missing_tools", "discarding", "time_alternately", "sample_reference", "sample_error"]


def native_dgemm(xa, xb, warmup, reps):
    """cuBLAS DGEMM through CuPy (the arrays are CuPy's): (median ms, result)."""
    (times,), (out,) = driver.event_times([lambda: xa @ xb], warmup, reps)
    return statistics.median(times), out


def missing_tools(command: str, plot: bool) -> str | None:
    """Why ``command`` (bench, tune) cannot run here, said before any GPU work, or None."""
    if importlib.util.find_spec("cupy") is None:
        return (f"ozaki-cutlass {command} needs CuPy (e.g. pip install cupy-cuda13x): it makes the "
                "inputs on the GPU and times native DGEMM through it")
    if plot and importlib.util.find_spec("matplotlib") is None:
        return "--plot needs matplotlib: pip install -e '.[bench]' (or leave out --plot)"
    return None


def discarding(a, b, **kwargs) -> None:
    """One gemm call whose result is dropped (so timed rounds do not keep every output)."""
    gemm(a, b, **kwargs)


def time_alternately(first, second, warmup: int, reps: int) -> tuple[float, float]:
    """Median ms of ``first()`` and of ``second()``, timed in alternation (events around
    each call on the legacy default stream)."""
    times, _ = driver.event_times([first, second], warmup, reps)
    return statistics.median(times[0]), statistics.median(times[1])


def sample_reference(a_rows: np.ndarray, b: np.ndarray):
    """Sampled rows of A @ B in double-double: (hi, lo)."""
    return dd_product(a_rows, b)


def sample_error(got_rows: np.ndarray, ref) -> float:
    """Normwise error of sampled rows of C against their double-double product ``ref``."""
    return normwise_error(got_rows, *ref)
