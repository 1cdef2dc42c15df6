"""``ozaki-cutlass bench``: where the emulation wins and where it loses, against every
alternative a user has: native DGEMM, cuBLAS's own FP64 emulation, and our staged, fused
and auto paths.

The staged and fused rows run an explicit moduli count (``--moduli``, default 15); the auto
row calls ``ozaki_cutlass.gemm(a, b)`` as a user does, under the accuracy contract, and
shows the moduli count, mode and bound it chose. The cuBLAS row is cuBLAS 13.1+'s FP64
emulation (fixed-point INT8 slices, strategy eager, dynamic mantissa control: as many bits
as FP64 accuracy needs), skipped with the reason where the libcublas in use lacks it or
runs native DGEMM instead.

Each shape: fresh random inputs (CuPy on the GPU where installed, else our own device
arrays filled from the host), native DGEMM, cuBLAS's emulation and every path timed in
alternating rounds (CUDA events around each whole call, warm-up first, medians), the phase
breakdown from ``timings=``, the error of sampled rows against a double-double product,
whether every path gave the same bits, and energy: GFLOP per joule from NVML's
total-energy counter over a loop of the same call lasting ``--energy-seconds`` (1 s) or
more. The timed calls repeat one call on the same arrays, so from its second call on a path
replays its launches as a CUDA graph (ozaki_cutlass.device.graphs) unless ``OZAKI_GRAPHS=0``,
and on CuPy arrays from its third call on through the replay lane
(ozaki_cutlass.paths.replay_lane); the header and the JSON say which. Method and results:
docs/benchmarks.md.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import statistics

import numpy as np

from .. import config
from ..api import gemm
from ..device import cublas, driver, energy
from ..device.cublas_emulation import EmulationUnavailable, emulation_problem, forget_emulation
from ..device.arch import compute_capability
from ..options import resolve_moduli
from ..paths.launch import PHASES
from .arguments import (ARRAY_CHOICES, PHI_MAX, batch_shape, moduli_count, nonnegative_float, nonnegative_int,
                        positive_int, shape, spread)
from .bench_kinds import batched_row, print_kind_row, zgemm_row
from .measure import (ENERGY_SECONDS, ArraysUnavailable, CublasEmulation, arrays_for, deciding_reps, measure_energy,
                      plot_unavailable, results_header, sample_error, sample_reference)

__all__ = ["DEFAULT_SHAPES", "CSV_FIELDS", "CUBLAS_ROW", "bench_main", "add_bench_parser", "csv_rows", "write_csv",
           "write_plot"]

log = logging.getLogger(__name__)


DEFAULT_SHAPES = (
    # squares
    (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
    (16384, 16384, 16384),
    # small k, large k, tall-skinny
    (16384, 16384, 1024), (4096, 4096, 65536), (65536, 1024, 4096),
)

#: The cuBLAS emulation's key in a row, and its path in the CSV.
CUBLAS_ROW, CUBLAS_PATH = "cublas", "cublas_emulation"

CSV_FIELDS = ("m", "n", "k", "path", "kernel", "ms", "tflops", "ratio_to_native", "scale_ms",
              "residues_ms", "int8_gemm_ms", "crt_ms", "error", "native_error", "bit_identical",
              "gflop_per_joule", "watts", "mantissa_bits")


#: The bench's array kinds whose repeated calls go through the replay lane (paths.replay_lane
#: takes CuPy arrays and PyTorch tensors; the bench's own arrays take the general path).
LANE_ARRAYS = ("cupy",)


def graphs_line(arrays_name: str) -> str:
    """The header's word on replays, graphs on, for the bench's arrays ``arrays_name``."""
    line = "a path's repeated call replays its launches as a CUDA graph (OZAKI_GRAPHS=0: off)"
    if arrays_name in LANE_ARRAYS:
        return line + ", from its third call through the replay lane (no checks in front)"
    return line + "; the replay lane takes CuPy or PyTorch arrays only"


def _energy_fields(e) -> dict:
    if not e:
        return {}
    return {"gflop_per_joule": e["gflop_per_joule"], "watts": e["watts"]}


def csv_rows(rows, paths):
    """Flatten benchmark rows (one per shape) into one CSV record per shape and path."""
    out = []
    for r in rows:
        base = {"m": r["m"], "n": r["n"], "k": r["k"], "native_error": r["native_error"],
                "bit_identical": r.get("bit_identical", "")}
        out.append(base | {"path": "native", "kernel": r.get("native_kernel", "cuBLAS DGEMM"), "ms": r["native_ms"],
                           "tflops": r["native_tflops"], "ratio_to_native": 1.0, "error": r["native_error"]}
                   | _energy_fields(r.get("native_energy")))
        if CUBLAS_ROW in r:
            e = r[CUBLAS_ROW]
            if "skipped" in e:
                out.append(base | {"path": CUBLAS_PATH, "kernel": f"skipped: {e['skipped']}"})
            else:
                out.append(base | {"path": CUBLAS_PATH, "kernel": e["kernel"], "ms": e["ms"], "tflops": e["tflops"],
                                   "ratio_to_native": e["tflops"] / r["native_tflops"] if r["native_tflops"] else "",
                                   "error": e["error"], "mantissa_bits": e["mantissa_bits"]}
                           | _energy_fields(e.get("energy")))
        for path in paths:
            e = r[path]
            p = e["phases_ms"]
            out.append(base | {"path": path, "kernel": e["kernel"], "ms": e["ms"], "tflops": e["tflops"],
                               "ratio_to_native": e["tflops"] / r["native_tflops"] if r["native_tflops"] else "",
                               "scale_ms": p["scale"], "residues_ms": p["residues"],
                               "int8_gemm_ms": p["int8_gemm"], "crt_ms": p["crt"], "error": e["error"]}
                       | _energy_fields(e.get("energy")))
        if "auto" in r:
            e = r["auto"]
            c = e.get("contract") or {}
            chosen = f" ({c['moduli']} moduli {c['mode']})" if c and not c["native"] else ""
            out.append(base | {"path": "auto", "kernel": f"{e['chose']}{_auto_kernel(e)}: {e['why']}{chosen}",
                               "ms": e["ms"], "tflops": e["tflops"], "ratio_to_native": e["ratio"],
                               "error": e.get("error", "")}
                       | _energy_fields(e.get("energy")))
    return out


def write_csv(rows, paths, out_file) -> None:
    import csv

    with open(out_file, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS, restval="")
        writer.writeheader()
        writer.writerows(csv_rows(rows, paths))


def _series(rows, paths):
    """(label, style, [row -> (tflops, error, energy dict or None)] getter) of each line the
    plot draws, in legend order; a line only where every square row has it."""
    lines = [("native DGEMM (cuBLAS)", "k-o",
              lambda r: (r["native_tflops"], r["native_error"], r.get("native_energy")))]
    if rows and all(CUBLAS_ROW in r and "skipped" not in r[CUBLAS_ROW] for r in rows):
        lines.append(("cuBLAS FP64 emulation", "m-s",
                      lambda r: (r[CUBLAS_ROW]["tflops"], r[CUBLAS_ROW]["error"], r[CUBLAS_ROW].get("energy"))))
    for name in paths:
        lines.append((f"ozaki, {name}", "-o",
                      lambda r, name=name: (r[name]["tflops"], r[name]["error"], r[name].get("energy"))))
    if rows and all("auto" in r for r in rows):
        lines.append(("ozaki_cutlass.gemm (auto)", "--",
                      lambda r: (r["auto"]["tflops"], r["auto"].get("error", math.nan), r["auto"].get("energy"))))
    return lines


def write_plot(rows, paths, out_file, title: str) -> None:
    """Against n for the square shapes, one panel each: TFLOP/s, the error (log scale) and,
    where energy was measured, GFLOP per joule (PNG)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise RuntimeError("--plot needs matplotlib") from exc
    squares = [r for r in rows if r["m"] == r["n"] == r["k"]]
    ns = [r["n"] for r in squares]
    lines = _series(squares, paths)
    with_energy = bool(squares) and any(get(r)[2] for _, _, get in lines for r in squares)
    panels = 3 if with_energy else 2
    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 4.5))
    for label, style, get in lines:
        values = [get(r) for r in squares]
        kw = {"color": "gray"} if style == "--" else {}
        axes[0].plot(ns, [v[0] for v in values], style, label=label, **kw)
        axes[1].plot(ns, [v[1] for v in values], style, label=label, **kw)
        if with_energy:
            axes[2].plot(ns, [v[2]["gflop_per_joule"] if v[2] else math.nan for v in values], style, label=label,
                         **kw)
    axes[0].set_ylabel("TFLOP/s (FP64-equivalent)")
    axes[1].set_ylabel("normwise error, 2 sampled rows vs double-double")
    axes[1].set_yscale("log")
    if with_energy:
        axes[2].set_ylabel("GFLOP per joule (NVML energy)")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("n (m = n = k)")
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize="small")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out_file, dpi=120)
    plt.close(fig)


def _energy_counter(seconds: float):
    """(the GPU's energy counter or None, a line saying how energy is measured or why not)."""
    if seconds <= 0:
        return None, "energy: not measured (--energy-seconds 0)"
    try:
        meter = energy.counter(0)
    except energy.EnergyUnavailable as exc:
        return None, f"energy n/a: {exc}"
    return meter, (f"energy: NVML total-energy counter of GPU 0 ({meter.bus_id}) over >= {seconds:g} s of "
                   "back-to-back calls of each row, after its timing")


def _cublas_emulation(xa, xb, arrays, sample, ref) -> tuple[CublasEmulation | None, dict]:
    """cuBLAS's emulation on this shape, probed once: (the call, its row), or (None, the
    reason it is skipped): an error of cuBLAS, or cuBLAS reporting it ran native DGEMM."""
    try:
        emu = CublasEmulation(xa, xb)
        out, bits = emu.probe()
    except (EmulationUnavailable, cublas.CublasError, driver.OutOfMemoryError, ValueError) as exc:
        return None, {"skipped": str(exc)}
    if bits < 0:
        return None, {"skipped": f"cuBLAS reported {bits} mantissa bits: it ran native DGEMM, not its emulation, "
                                 "on this GPU and shape"}
    slices = -(-(bits + 1) // 8)
    kernel = (f"cuBLAS {'.'.join(map(str, cublas.version()))} FP64 emulation: {bits} mantissa bits "
              f"({slices} INT8 slices), eager, dynamic mantissa control")
    return emu, {"kernel": kernel, "mantissa_bits": bits, "probe_error": sample_error(arrays.rows(out, sample), ref)}


def bench_main(args) -> int:
    """``ozaki-cutlass bench``: native DGEMM, cuBLAS's emulation, the staged and the fused path
    and the auto policy, in one run."""
    why = plot_unavailable(bool(args.plot))
    if why is not None:
        log.error("%s", why)
        return 2
    try:
        arrays = arrays_for(args.arrays)
    except ArraysUnavailable as exc:
        log.error("%s", exc)
        return 2

    kinds = bool(args.zgemm or args.batched)
    shapes = args.shapes or ([] if kinds else list(DEFAULT_SHAPES))
    driver.ensure_context()
    moduli = resolve_moduli(args.moduli)
    args.auto_mode, args.mode = args.mode, args.mode or "accurate"  # the auto row: as given (None: the contract's)
    emulation_why = emulation_problem() if args.cublas_emulation else "--no-cublas-emulation"
    meter, energy_line = _energy_counter(args.energy_seconds)
    stream = arrays.stream()
    rows = []
    print(f"Emulated DGEMM, moduli = {moduli}, mode = {args.mode}, phi = {args.phi}; median of {args.reps} "
          f"after {args.warmup} warm-up, every row in alternation; errors on 2 sampled rows vs double-double; "
          f"native = {arrays.native_label}")
    print("cuBLAS FP64 emulation: " + ("skipped: " + emulation_why if emulation_why else
                                       f"libcublas {'.'.join(map(str, cublas.version()))}, strategy eager, "
                                       "dynamic mantissa control"))
    print(energy_line)
    print("graphs: " + (graphs_line(arrays.name) if config.graphs()
                        else "off (OZAKI_GRAPHS=0): every call launches its kernels from Python"))
    print(f"{'shape':>19} {'path':>10} {'TF/s':>7} {'x native':>8} {'scale':>7} {'resid':>7} {'int8':>8} "
          f"{'crt':>7} {'total ms':>9} {'err':>9} {'GF/J':>7}  kernel", flush=True)
    for m, n, k in shapes:
        xa, xb = arrays.pair(m, n, k, args.phi, args.seed + m + 7 * n + 13 * k)
        flops = 2.0 * m * n * k
        row = {"m": m, "n": n, "k": k, "moduli": moduli, "mode": args.mode, "native_kernel": arrays.native_label}
        sample = np.arange(0, m, max(1, m // 2))[:2]
        ref = sample_reference(arrays.rows(xa, sample), arrays.host(xb))
        labels = ["native"]
        calls = [functools.partial(arrays.native, xa, xb)]
        if emulation_why:
            row[CUBLAS_ROW] = {"skipped": emulation_why}
        else:
            emu, row[CUBLAS_ROW] = _cublas_emulation(xa, xb, arrays, sample, ref)
            if emu is not None:
                labels.append(CUBLAS_ROW)
                calls.append(emu)
        labels += list(args.paths)
        calls += [functools.partial(gemm, xa, xb, moduli=moduli, mode=args.mode, path=path) for path in args.paths]
        # every row timed in alternation (one call of each per round), so that clock and
        # thermal drift over the shape cannot favour one of them; then three more calls of
        # each path collect the per-phase times (those synchronize, not the timed ones)
        times, lasts = driver.event_times(calls, args.warmup, args.reps, stream)
        ms = {label: statistics.median(t) for label, t in zip(labels, times)}
        outs = dict(zip(labels, lasts))
        row["native_ms"] = ms["native"]
        row["native_tflops"] = flops / ms["native"] / 1e9
        row["native_error"] = sample_error(arrays.rows(outs["native"], sample), ref)
        if CUBLAS_ROW in outs:
            row[CUBLAS_ROW] |= {"ms": ms[CUBLAS_ROW], "tflops": flops / ms[CUBLAS_ROW] / 1e9,
                                "error": sample_error(arrays.rows(outs[CUBLAS_ROW], sample), ref)}
        for path in args.paths:
            phases = []
            for _ in range(3):
                phases.append({})
                gemm(xa, xb, timings=phases[-1], moduli=moduli, mode=args.mode, path=path)
            med = {p: statistics.median(ph[p] for ph in phases) for p in PHASES}
            row[path] = {"kernel": phases[-1]["kernel"], "ms": ms[path], "tflops": flops / ms[path] / 1e9,
                         "phases_ms": med, "error": sample_error(arrays.rows(outs[path], sample), ref)}
        if meter is not None:  # the same calls as timed, each in a loop of >= energy_seconds
            for label, call in zip(labels, calls):
                e = measure_energy(call, ms[label], flops, meter, args.energy_seconds, stream)
                if label == "native":
                    row["native_energy"] = e
                else:
                    row[label]["energy"] = e
        if args.auto:
            _auto_row(row, xa, xb, arrays, args, flops, sample, ref, meter, stream)
        paths_out = [outs[p] for p in args.paths]
        if len(paths_out) > 1:
            row["bit_identical"] = all(arrays.same_bits(paths_out[0], o) for o in paths_out[1:])
        rows.append(row)
        _print_row(row, args.paths)
        del xa, xb, outs, lasts, paths_out, calls
        forget_emulation()
        arrays.release()
    kind_rows = _kind_rows(args, arrays, moduli) if kinds else []
    record = results_header(["ozaki-cutlass", *args.argv]) | {
        "phi": args.phi, "moduli": moduli, "mode": args.mode, "arrays": arrays.name, "native": arrays.native_label,
        "cublas": _cublas_version(), "cublas_emulation": emulation_why or "measured",
        "energy": energy_line, "energy_seconds": args.energy_seconds, "graphs": config.graphs(),
        "replay_lane": config.graphs() and arrays.name in LANE_ARRAYS, "rows": rows,
        "complex_and_batched_rows": kind_rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record | {"capability": compute_capability()}, f, indent=2)
    if args.csv:
        write_csv(rows, args.paths, args.csv)
    if args.plot:
        write_plot(rows, args.paths, args.plot, f"Ozaki-II, {moduli} moduli, phi = {args.phi}")
    return 0 if all(r.get("bit_identical", True) for r in rows) else 1


def _kind_rows(args, arrays, moduli: int) -> list[dict]:
    """The --zgemm and --batched rows (tools.bench_kinds), on CuPy arrays."""
    if arrays.name != "cupy":
        print("complex and batched rows: skipped: they compare against CuPy's ZGEMM and batched matmul "
              "(install CuPy, or --arrays cupy)")
        return []
    print(f"complex and batched rows: moduli = {moduli}, mode = {args.mode} for the emulation line; "
          f"{args.warmup} warm-up, median of {args.reps}, in alternation")
    out = []
    for n in args.zgemm or ():
        out.append(zgemm_row(arrays, n, moduli, args.mode, args.phi, args.warmup, args.reps, args.seed + n))
        print_kind_row(out[-1])
        arrays.release()
    for batch, n in args.batched or ():
        out.append(batched_row(arrays, batch, n, moduli, args.mode, args.phi, args.warmup, args.reps,
                               args.seed + batch * n))
        print_kind_row(out[-1])
        arrays.release()
    return out


def _cublas_version() -> str:
    try:
        return ".".join(map(str, cublas.version()))
    except (cublas.NativeUnavailable, cublas.CublasError) as exc:
        return f"unknown ({exc})"


def _auto_row(row, xa, xb, arrays, args, flops, sample, ref, meter, stream) -> None:
    """ozaki_cutlass.gemm with its defaults (policy "auto", moduli unset): native DGEMM where
    it is measured or predicted faster, else the emulation; called exactly as a user calls
    it, timed alternately with native DGEMM (A/B: clock drift over the row cannot favour
    either side), and for more rounds than the paths get (up to 200, about half a second
    of native time): where auto runs native DGEMM the two differ by microseconds of host
    time, which 5 samples do not resolve."""
    auto_reps = deciding_reps(args.reps, row["native_ms"])
    auto_call = functools.partial(gemm, xa, xb, mode=args.auto_mode)
    (auto_t, native_t), (auto_out, native_out) = driver.event_times(
        [auto_call, functools.partial(arrays.native, xa, xb)], args.warmup, auto_reps, stream)
    auto_ms, native_ms = statistics.median(auto_t), statistics.median(native_t)
    t = {}
    gemm(xa, xb, timings=t, mode=args.auto_mode)
    # the kernel it ran, and whether the contract's run ahead held ("hit") or ran again
    # ("miss"): what the table's timing of the same call can be checked against
    row["auto"] = {"ms": auto_ms, "tflops": flops / auto_ms / 1e9, "native_ms": native_ms, "reps": auto_reps,
                   "ratio": native_ms / auto_ms, "chose": t["path"], "kernel": t.get("kernel"),
                   "speculation": t.get("speculation"),
                   "why": t.get("policy", "emulation faster"), "contract": t.get("contract"),
                   "error": sample_error(arrays.rows(auto_out, sample), ref),
                   # native: the very kernel of native DGEMM? (equal bits say so)
                   "bits_equal_native": arrays.same_bits(auto_out, native_out)}
    if meter is not None:
        row["auto"]["energy"] = measure_energy(auto_call, auto_ms, flops, meter, args.energy_seconds, stream)


def _auto_kernel(e) -> str:
    """" KERNEL" where the auto row emulated and knows its kernel, else "" (the CSV and the
    printout name it the same way)."""
    return f" {e['kernel']}" if e.get("kernel") and e["chose"] != "native" else ""


def _gfj(e) -> str:
    return f"{e['gflop_per_joule']:7.1f}" if e else f"{'n/a':>7}"


def _print_row(r, paths) -> None:
    shape = f"{r['m']}x{r['n']}x{r['k']}"
    blank = f"{'':7s} {'':7s} {'':8s} {'':7s}"
    print(f"{shape:>19} {'native':>10} {r['native_tflops'] or float('nan'):7.1f} {1.0:8.2f} {blank} "
          f"{r['native_ms'] or float('nan'):9.2f} {r['native_error']:9.2e} {_gfj(r.get('native_energy'))}  "
          f"{r.get('native_kernel', '')}")
    e = r.get(CUBLAS_ROW)
    if e is not None and "skipped" in e:
        print(f"{shape:>19} {'cuBLAS-emu':>10} skipped: {e['skipped']}")
    elif e is not None:
        ratio = e["tflops"] / r["native_tflops"] if r["native_tflops"] else float("nan")
        print(f"{shape:>19} {'cuBLAS-emu':>10} {e['tflops']:7.1f} {ratio:8.2f} {blank} {e['ms']:9.2f} "
              f"{e['error']:9.2e} {_gfj(e.get('energy'))}  {e['kernel']}")
    for path in paths:
        e = r[path]
        p = e["phases_ms"]
        ratio = e["tflops"] / r["native_tflops"] if r["native_tflops"] else float("nan")
        print(f"{shape:>19} {path:>10} {e['tflops']:7.1f} {ratio:8.2f} {p['scale']:7.2f} {p['residues']:7.2f} "
              f"{p['int8_gemm']:8.2f} {p['crt']:7.2f} {p['total']:9.2f} {e['error']:9.2e} "
              f"{_gfj(e.get('energy'))}  {e['kernel']}")
    if "auto" in r:
        e = r["auto"]
        c = e.get("contract")
        chosen = "" if not c or c["native"] else (f" {c['moduli']} moduli {c['mode']}"
                                                  + (", equilibrated" if c["equilibrated"] else "")
                                                  + f", bound {c['bound']:.2g};")
        ahead = f" run ahead: {e['speculation']};" if e.get("speculation") else ""
        print(f"{shape:>19} {'auto':>10} {e['tflops']:7.1f} {e['ratio']:8.2f} {blank} "
              f"{e['ms']:9.2f} {e['error']:9.2e} {_gfj(e.get('energy'))}  "
              f"-> {e['chose']}{_auto_kernel(e)} ({e['why']});"
              f"{chosen}{ahead} "
              f"{e['ms']:.4g} ms against native {e['native_ms']:.4g} ms, alternating, median of {e['reps']}"
              + ("; bits equal to native" if e.get("bits_equal_native") else ""))
    if "bit_identical" in r:
        print(f"{shape:>19} paths bit-identical: {r['bit_identical']}", flush=True)


def add_bench_parser(sub) -> None:
    p = sub.add_parser("bench", help="native DGEMM, cuBLAS's FP64 emulation, the staged and fused paths and "
                                     "auto: speed, error, energy (GPU)")
    p.add_argument("--shapes", type=shape, nargs="+", default=None, metavar="N|MxNxK",
                   help="problem shapes (default: squares 1024..16384, small k, large k, tall-skinny)")
    p.add_argument("--zgemm", type=positive_int, nargs="+", default=None, metavar="N",
                   help="complex128 N^3 rows against cuBLAS ZGEMM (CuPy); with no --shapes, only these and "
                        "--batched run")
    p.add_argument("--batched", type=batch_shape, nargs="+", default=None, metavar="BxN",
                   help="batched rows, B products N^3, against cuBLAS strided-batched DGEMM (CuPy); with no "
                        "--shapes, only these and --zgemm run")
    p.add_argument("--moduli", type=moduli_count, default=None)
    p.add_argument("--mode", choices=["fast", "accurate"], default=None,
                   help="scaling mode of the staged and fused rows (default: accurate) and of the auto row "
                        "(default: the accuracy contract's, fast)")
    p.add_argument("--paths", nargs="+", choices=["staged", "fused"], default=["staged", "fused"])
    p.add_argument("--phi", type=spread, default=0.5,
                   help=f"spread of the inputs' exponents, 0 to {PHI_MAX:g}: entries are (U - 0.5) "
                        "exp(phi N(0,1)) (default: %(default)s)")
    p.add_argument("--no-auto", dest="auto", action="store_false",
                   help="skip timing ozaki_cutlass.gemm with its defaults (the auto policy)")
    p.add_argument("--no-cublas-emulation", dest="cublas_emulation", action="store_false",
                   help="skip cuBLAS's own FP64 emulation (cuBLAS 13.1+; skipped with the reason where missing)")
    p.add_argument("--energy-seconds", type=nonnegative_float, default=ENERGY_SECONDS, metavar="S",
                   help="GPU time each row's energy loop lasts at least (NVML's counter steps every few tens of "
                        "ms; default: %(default)s; 0: no energy)")
    p.add_argument("--arrays", choices=ARRAY_CHOICES, default="auto",
                   help="device arrays: cupy (native DGEMM is CuPy's a @ b), own (ours, native DGEMM is "
                        "gemm(policy='native'); no CuPy needed), auto (cupy where installed; default)")
    p.add_argument("--warmup", type=nonnegative_int, default=2)
    p.add_argument("--reps", type=positive_int, default=5)
    p.add_argument("--seed", type=nonnegative_int, default=0, help="random seed (0 or more)")
    p.add_argument("--json", default=None, help="write all numbers here (JSON)")
    p.add_argument("--csv", default=None, help="write one record per shape and path here (CSV)")
    p.add_argument("--plot", default=None,
                   help="write TFLOP/s, error and GFLOP/J against n here (PNG; needs matplotlib)")
    p.set_defaults(handler=bench_main)


# --------------------------------------------------------------------------- tuning
