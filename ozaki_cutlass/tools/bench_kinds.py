"""The complex and batched rows of ``ozaki-cutlass bench`` (``--zgemm N ...``, ``--batched
BxN ...``): ``ozaki_cutlass.gemm`` on complex128 n x n x n products against cuBLAS's ZGEMM,
and on (batch, n, n) x (batch, n, n) float64 batches against cuBLAS's strided-batched
DGEMM, both through CuPy (``a @ b``, ``matmul``).

Each row: native, the default call (``policy="auto"``, the accuracy contract: what it ran
and with how many moduli) and the emulation at the bench's explicit moduli count and mode,
each of the last two timed in alternation with native (A/B; CUDA events around each whole
call, warm-up first, medians; "x native" against the native of its own A/B run) on fresh
random inputs made on the GPU (tools.measure.CupyArrays). Errors: complex rows
on 8 x 8 sampled entries against the exact product (numerics.zgemm.sampled_error); batched
rows on 2 sampled rows of the first and last element against a double-double product (the
larger). TFLOP/s counts 8 n^3 per complex product, 2 batch n^3 per batch."""

from __future__ import annotations

import functools
import statistics

import numpy as np

from ..api import gemm
from ..device import driver
from ..numerics.zgemm import sampled_error
from .measure import sample_error, sample_reference

__all__ = ["zgemm_row", "batched_row", "print_kind_row"]


def _time(native, others: dict, warmup: int, reps: int, stream: int) -> tuple[dict, dict, dict]:
    """Each of ``others`` timed in alternation with ``native`` (A/B, as bench's auto row:
    a call's clock and power state depend on the call before it, so three calls in a
    round would favour whichever follows the lighter one). Returns (median ms, the native
    median of its own A/B run, the last result) per label, native's own first."""
    ms, native_ms, outs = {}, {}, {}
    for label, call in others.items():
        (t, tn), (out, nout) = driver.event_times([call, native], warmup, reps, stream)
        ms[label], native_ms[label], outs[label] = statistics.median(t), statistics.median(tn), out
        outs.setdefault("native", nout)
    first = next(iter(others))
    return {"native": native_ms[first]} | ms, {"native": native_ms[first]} | native_ms, outs


def _row(kind: str, shape: dict, flops: float, timed: tuple, errors: dict, chose: dict, moduli: int, mode: str,
         native_label: str) -> dict:
    ms, native_ms, _ = timed
    return {"kind": kind, **shape, "native": native_label, "moduli": moduli, "mode": mode, "chose": chose,
            "calls": {label: {"ms": t, "tflops": flops / t / 1e9, "x_native": native_ms[label] / t,
                              "native_ms": native_ms[label], "error": errors[label]}
                      for label, t in ms.items()}}


def _chose(timings: dict) -> dict:
    """What the default call ran, from its ``timings``."""
    c = timings.get("contract") or {}
    return {"path": timings.get("path"), "kernel": timings.get("kernel"), "policy": timings.get("policy"),
            "moduli": None if timings.get("path") == "native" else timings.get("moduli"),
            "mode": None if timings.get("path") == "native" else timings.get("mode"),
            "bound": c.get("bound") if c and not c.get("native") else None,
            "products": timings.get("products")}   # "karatsuba: 3 per modulus" where it ran


def zgemm_row(arrays, n: int, moduli: int, mode: str, phi: float, warmup: int, reps: int, seed: int) -> dict:
    """One complex row: CuPy's ``a @ b`` (cuBLAS ZGEMM), gemm's default call and the
    emulation at ``moduli`` in ``mode``, on n x n complex128 operands."""
    cp = arrays.cp
    a, b = arrays.complex_pair(n, phi, seed)
    stream = int(cp.cuda.get_current_stream().ptr)
    timings: dict = {}
    gemm(a, b, timings=timings)  # builds, decides and (under the contract) chooses first
    timed = _time(lambda: a @ b, {"auto": lambda: gemm(a, b),
                                  "emulation": functools.partial(gemm, a, b, moduli=moduli, mode=mode)},
                  warmup, reps, stream)
    outs = timed[2]
    rng = np.random.default_rng(seed)
    rows, cols = (np.sort(rng.choice(n, min(n, 8), replace=False)) for _ in range(2))
    a_rows, b_cols = cp.asnumpy(a[cp.asarray(rows)]), cp.asnumpy(b[:, cp.asarray(cols)])
    errors = {label: sampled_error(cp.asnumpy(out[cp.asarray(rows)][:, cp.asarray(cols)]), a_rows, b_cols)
              for label, out in outs.items()}
    return _row("zgemm", {"m": n, "n": n, "k": n}, 8.0 * n**3, timed, errors, _chose(timings), moduli, mode,
                "cuBLAS ZGEMM via CuPy's a @ b")


def batched_row(arrays, batch: int, n: int, moduli: int, mode: str, phi: float, warmup: int, reps: int,
                seed: int) -> dict:
    """One batched row: CuPy's ``matmul`` (cuBLAS strided-batched DGEMM), gemm's default
    call and the emulation at ``moduli`` in ``mode`` (its INT8 products in shared launches
    where the element shape runs staged, else one call per element: ozaki_cutlass.batched),
    on (batch, n, n) float64 operands."""
    cp = arrays.cp
    a, b = arrays.batch_pair(batch, n, phi, seed)
    stream = int(cp.cuda.get_current_stream().ptr)
    timings: dict = {}
    gemm(a, b, timings=timings)
    timed = _time(lambda: cp.matmul(a, b), {"auto": lambda: gemm(a, b),
                                            "emulation": functools.partial(gemm, a, b, moduli=moduli, mode=mode)},
                  warmup, reps, stream)
    outs = timed[2]
    sample = np.arange(0, n, max(1, n // 2))[:2]
    refs = {e: sample_reference(cp.asnumpy(a[e][cp.asarray(sample)]), cp.asnumpy(b[e])) for e in {0, batch - 1}}
    errors = {label: max(sample_error(cp.asnumpy(out[e][cp.asarray(sample)]), ref) for e, ref in refs.items())
              for label, out in outs.items()}
    chose = _chose(timings) | {"batched": timings.get("batched")}
    return _row("batched", {"batch": batch, "m": n, "n": n, "k": n}, 2.0 * batch * n**3, timed, errors, chose,
                moduli, mode, "cuBLAS strided-batched DGEMM via CuPy's matmul")


def print_kind_row(row: dict) -> None:
    """The row's three lines: native, auto (with what it ran), emulation."""
    shape = (f"{row['batch']} x {row['n']}^3" if row["kind"] == "batched" else f"complex {row['n']}^3")
    c = row["chose"]
    ran = c["path"] if c["path"] == "native" else f"{c['path']}, {c['moduli']} moduli {c['mode']}"
    ran += f", {c['kernel']}" if c.get("kernel") else ""
    ran += f", {c['batched']}" if c.get("batched") else ""
    ran += f", {c['products']}" if c.get("products") else ""
    notes = {"native": row["native"], "auto": f"-> {ran}" + (f" ({c['policy']})" if c.get("policy") else ""),
             "emulation": f"{row['moduli']} moduli {row['mode']}"}
    for label, e in row["calls"].items():
        ab = "" if label == "native" else f"; native {e['native_ms']:.4g} ms in its A/B run"
        print(f"{shape:>19} {label:>10} {e['tflops']:7.1f} {e['x_native']:8.3f} {e['ms']:9.2f} ms "
              f"{e['error']:9.2e}  {notes[label]}{ab}", flush=True)
