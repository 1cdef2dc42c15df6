"""The stages around the INT8 products, each against its memory floor (issue 16).

Two steps, the first on the GPU under Nsight Compute (scripts/device_stages.sh runs it):

  python scripts/stage_table.py call M N K [--moduli 15] [--mode accurate] [--path fused] --json F
      one warm call, then a few calls with ``timings=`` (CUDA events per phase, medians),
      then one call between cudaProfilerStart/Stop for ``ncu --profile-from-start off``;
      writes the shape, the settings and the phase medians to F.
  python scripts/stage_table.py table --bandwidth TBS RUN.json:NCU.csv ...
      groups the kernels of each profiled call into stages, adds their ncu durations and
      DRAM bytes, and sets each stage against the bytes it must move at TBS TB/s
      (the measured copy bandwidth); prints a Markdown table (and --json writes it).
      Where the CSV holds each kernel's SM clock (sm__cycles_elapsed.avg.per_second) and
      warp instructions (smsp__inst_executed.sum) and the run its SM count, each stage
      also gets its issue floor: the instructions at one per scheduler and cycle
      (SCHEDULERS_PER_SM per SM) at the kernel's own clock, and how busy that kept issue.
  python scripts/stage_table.py move RUN.json [--ncu NCU.csv]
      run under ncu like ``call``, after it: for each stage (each the call ran, with its
      ncu CSV), plain kernels that move the stage's bytes (what it must read, what it must
      write; no arithmetic) in one launch, in three grids (one 16-byte word per thread;
      four; the resident blocks, four words at a time). ``table`` takes their CSV as a
      third field, RUN.json:NCU.csv:MOVE.csv, and sets each stage against the fastest:
      what a launch of these bytes takes under the same conditions (at small sizes a
      launch's start and ramp are a large part of it).
  python scripts/stage_table.py needs TABLES.json --target MxNxK=TFLOPS ...
      from a table's --json: per shape, the GEMMs as measured plus every other stage at its
      floor (the ceiling of the pipeline), and what a whole-call target leaves the other
      stages, in ms and as a multiple of their floor.

What each stage must move (8-byte doubles, N moduli, op(A) m x k, op(B) k x n):
  pack        the strided operand copied to contiguous vectors: read and write it
  inner       the contract's inner statistics and, from the same read, the scan's first
              pass: read A and B
  scan        exponents, non-finite counts, bound terms: read A and B
  coarse      accurate mode's coarse magnitudes: read A and B, write one byte per entry
  scan and coarse  the two from one kernel (scan_coarse: scan_along_k_kernel<0, 1[, team]>):
              as coarse
  coarse gemm accurate mode's bound, compute-bound: 2 m n k INT8 operations at the rate
  shifts      the bound's row and column passes: read the m x n int32 bound
  residues    read A and B, write N byte planes of each
  int8 gemm   N products of 2 m n k at the INT8 rate
  combine     read N byte planes of m x n, write C (read it too when beta != 0)
  contract    the small kernels (equilibrate, certificate, fast shifts): nothing to speak of
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import statistics
import sys

INT8_TOPS = 1500.0  # the INT8 rate the H200's 700 W cap allows (docs/benchmarks.md)
SCHEDULERS_PER_SM = 4  # warp schedulers of an sm_80 / sm_90 SM, one instruction each per cycle

STAGES = ("pack", "inner", "scan", "scan and coarse", "contract", "coarse", "coarse gemm", "shifts", "residues",
          "int8 gemm", "combine")
# (pattern, stage), the first whose pattern occurs in the kernel's name; scan_along_k_kernel's
# second template argument is kCoarse (its team, where there is one, follows it)
_BY_NAME = (("pack_kernel", "pack"), ("inner_", "inner"), (r"scan_along_k_kernel<\w+, (1|true)\b", "scan and coarse"),
            ("scan_", "scan"),
            ("equilibrate_kernel", "contract"), ("certificate_kernel", "contract"),
            ("fast_shifts_kernel", "contract"), ("coarse_kernel", "coarse"),
            ("accumulate_i64", "shifts"), ("accurate_", "shifts"), (r"residues_(ahead_)?kernel", "residues"),
            ("crt_", "combine"))


def stage_of(kernel: str, seen_residues: bool) -> str:
    """The stage of one kernel of a call, by name; a GEMM before any residues kernel is the
    accurate bound's coarse GEMM."""
    for pattern, stage in _BY_NAME:
        if re.search(pattern, kernel):
            return stage
    return "int8 gemm" if seen_residues else "coarse gemm"


def kernel_stages(kernels: list[dict]) -> list[tuple[str, dict]]:
    """(stage, kernel) of each kernel of a profiled call, in launch order (stage_of)."""
    out, seen = [], False
    for kr in kernels:
        st = stage_of(kr["kernel"], seen)
        seen = seen or st == "residues"
        out.append((st, kr))
    return out


def floor_split(stage: str, m: int, n: int, k: int, moduli: int, packed: int) -> tuple[float, float]:
    """The bytes ``stage`` must (read, write) (module docstring); ``packed``: elements packed."""
    ab = 8.0 * (m + n) * k
    entries = float((m + n) * k)
    return {"pack": (8.0 * packed, 8.0 * packed), "inner": (ab, 0.0), "scan": (ab, 0.0),
            "coarse": (ab, entries), "scan and coarse": (ab, entries), "shifts": (4.0 * m * n, 0.0),
            "residues": (ab, moduli * entries),
            "combine": (float(moduli) * m * n, 8.0 * m * n)}.get(stage, (0.0, 0.0))


def floor_bytes(stage: str, m: int, n: int, k: int, moduli: int, packed: int) -> float:
    """The bytes ``stage`` must move, read and written (module docstring)."""
    return sum(floor_split(stage, m, n, k, moduli, packed))


# --- plain kernels that move a stage's bytes (the ``move`` step) ---------------------------
MOVE_THREADS = 256
MOVE_GRIDS = ("1", "4", "resident")  # 16-byte words per thread; "resident": the resident blocks
MOVE_BLOCKS_PER_SM = 8  # of MOVE_THREADS: 2048 threads, an sm_80 / sm_90 SM's limit

MOVE_SOURCE = r"""
// Reads `reads` 16-byte words of x and writes `writes` of y (what a word read carries where
// both exist), C words per thread and pass, passes a grid apart (streaming loads and
// stores). A word read and not written goes to *sink only where its four words' XOR is
// 0x9e3779b9, which keeps the loads without writing to speak of.
template <int C>
__device__ void move(const uint4* __restrict__ x, long long reads, uint4* __restrict__ y, long long writes,
                     uint4* sink) {
  const long long total = reads > writes ? reads : writes;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += C * stride) {
    uint4 v[C];
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const long long j = i + c * stride;
      v[c] = j < reads ? __ldcs(x + j) : make_uint4((unsigned)j, 0u, 0u, 0u);
    }
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const long long j = i + c * stride;
      if (j < writes) {
        __stcs(y + j, v[c]);
      } else if (j < total && (v[c].x ^ v[c].y ^ v[c].z ^ v[c].w) == 0x9e3779b9u) {
        *sink = v[c];
      }
    }
  }
}
"""


def move_kernel_name(stage: str, grid: str) -> str:
    return f"move_{stage.replace(' ', '_')}_{grid}"


def move_source(stages) -> str:
    """MOVE_SOURCE with one extern "C" kernel per stage and grid (ncu names them so)."""
    out = [MOVE_SOURCE]
    for st in stages:
        for grid in MOVE_GRIDS:
            c = 1 if grid == "1" else 4
            out.append(f'extern "C" __global__ void __launch_bounds__({MOVE_THREADS}) {move_kernel_name(st, grid)}('
                       "const uint4* x, long long reads, uint4* y, long long writes, uint4* sink) "
                       f"{{ move<{c}>(x, reads, y, writes, sink); }}")
    return "\n".join(out) + "\n"


def move_blocks(words: int, grid: str, sms: int) -> int:
    """Blocks of MOVE_THREADS for ``words`` 16-byte words in ``grid``."""
    if grid == "resident":
        return max(1, min(sms * MOVE_BLOCKS_PER_SM, -(-words // (4 * MOVE_THREADS))))
    per_thread = int(grid)
    return max(1, -(-words // (per_thread * MOVE_THREADS)))


def move_stages(run: dict, only=None) -> list[tuple[str, int, int]]:
    """(stage, 16-byte words read, written) of each stage with bytes to move at ``run``'s
    shape (of those in ``only``, where given), the bytes rounded up to whole words."""
    out = []
    for st in STAGES:
        if only is not None and st not in only:
            continue
        r, w = floor_split(st, run["m"], run["n"], run["k"], run["moduli"], run.get("packed", 0))
        if r + w:
            out.append((st, int(-(-r // 16)), int(-(-w // 16))))
    return out


def move_of(kernel: str) -> tuple[str, str] | None:
    """(stage, grid) of a move kernel's ncu name, else None."""
    found = re.search(rf"move_(\w+?)_({'|'.join(MOVE_GRIDS)})$", kernel_label(kernel))  # move_kernel_name
    return None if found is None else (found.group(1).replace("_", " "), found.group(2))


def fastest_moves(kernels: list[dict]) -> dict[str, dict]:
    """stage -> {ms, grid} of the fastest move kernel of each stage in an ncu CSV."""
    best: dict[str, dict] = {}
    for kr in kernels:
        found = move_of(kr["kernel"])
        if found is None:
            raise ValueError(f"not a move kernel: {kr['kernel']!r}")
        stage, grid = found
        ms = kr["ns"] / 1e6
        if stage not in best or ms < best[stage]["ms"]:
            best[stage] = {"ms": ms, "grid": grid}
    return best


# metric -> (record key, {unit: scale to the key's unit})
_METRICS = {
    "gpu__time_duration.sum": ("ns", {"ns": 1.0, "nsecond": 1.0, "usecond": 1e3, "msecond": 1e6}),
    "dram__bytes_read.sum": ("read", {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}),
    "dram__bytes_write.sum": ("write", {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}),
    "sm__cycles_elapsed.avg.per_second": ("hz", {"hz": 1.0, "Khz": 1e3, "Mhz": 1e6, "Ghz": 1e9}),
    "smsp__inst_executed.sum": ("inst", {"inst": 1.0, "Kinst": 1e3, "Minst": 1e6, "Ginst": 1e9}),
}


def parse_ncu(text: str) -> list[dict]:
    """ncu --csv rows (one per kernel and metric) -> [{kernel, ns, read, write[, hz, inst]}] in
    launch order (hz: the SM clock, inst: warp instructions, where the CSV has them)."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    kernels: dict[str, dict] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        rec = kernels.setdefault(row["ID"], {"kernel": row["Kernel Name"], "ns": 0.0, "read": 0.0, "write": 0.0})
        value = float(row["Metric Value"].replace(",", ""))
        unit = row["Metric Unit"]
        if row["Metric Name"] not in _METRICS:
            raise ValueError(f"unexpected metric {row['Metric Name']!r}")
        key, scales = _METRICS[row["Metric Name"]]
        if unit not in scales:
            raise ValueError(f"unexpected unit {unit!r} for {row['Metric Name']}")
        rec[key] = value * scales[unit]
    return [kernels[i] for i in sorted(kernels, key=int)]


def kernel_label(name: str) -> str:
    """ncu's kernel name without its return type and parameter list:
    "void stages::inner_partials_kernel<1>(stages::VectorSet, ...)" -> "stages::inner_partials_kernel<1>"."""
    name = name.split("(")[0].strip()
    return name[len("void "):] if name.startswith("void ") else name


def stage_rows(run: dict, kernels: list[dict], bandwidth_tbs: float, moves: dict[str, dict] | None = None) -> list[dict]:
    """The call's kernels grouped into stages against their floors, and, where ``moves``
    (fastest_moves) has the stage, against the fastest plain move of its bytes."""
    m, n, k, moduli = run["m"], run["n"], run["k"], run["moduli"]
    sms = run.get("sms")
    issue = sms is not None and all("hz" in kr and "inst" in kr for kr in kernels)
    sums: dict[str, dict] = {}
    for st, kr in kernel_stages(kernels):
        s = sums.setdefault(st, {"kernels": 0, "ms": 0.0, "bytes": 0.0, "cycles": 0.0, "issue_ms": 0.0,
                                 "by_kernel": {}})
        s["kernels"] += 1
        s["ms"] += kr["ns"] / 1e6
        each = s["by_kernel"].setdefault(kernel_label(kr["kernel"]), {"launches": 0, "ms": 0.0})
        each["launches"] += 1
        each["ms"] += kr["ns"] / 1e6
        s["bytes"] += kr["read"] + kr["write"]
        if issue:
            s["cycles"] += kr["hz"] * kr["ns"] / 1e9  # the clock weighted by time
            s["issue_ms"] += kr["inst"] / (sms * SCHEDULERS_PER_SM * kr["hz"]) * 1e3
    packed = run.get("packed", 0)
    rows = []
    for st in STAGES:
        if st not in sums:
            continue
        s = sums[st]
        if st in ("coarse gemm", "int8 gemm"):
            ops = 2.0 * m * n * k * (moduli if st == "int8 gemm" else 1)
            floor_ms = ops / (INT8_TOPS * 1e12) * 1e3
            fb = None
        else:
            fb = floor_bytes(st, m, n, k, moduli, packed)
            floor_ms = fb / (bandwidth_tbs * 1e12) * 1e3
        row = {"stage": st, "kernels": s["kernels"], "ms": s["ms"], "dram_gb": s["bytes"] / 1e9,
               "gbs": s["bytes"] / (s["ms"] * 1e6) if s["ms"] else 0.0,
               "floor_gb": None if fb is None else fb / 1e9, "floor_ms": floor_ms,
               "ratio": s["ms"] / floor_ms if floor_ms else None,
               # which kernel of the stage takes its time (ncu, added over its launches)
               "by_kernel": [{"kernel": name} | each for name, each in s["by_kernel"].items()]}
        if issue and s["ms"]:
            row.update({"sm_ghz": s["cycles"] / (s["ms"] * 1e6), "issue_floor_ms": s["issue_ms"],
                        "issue_busy": s["issue_ms"] / s["ms"]})
        if moves and st in moves:
            mv = moves[st]
            row.update({"move_ms": mv["ms"], "move_grid": mv["grid"], "move_x_floor": mv["ms"] / floor_ms,
                        "x_move": s["ms"] / mv["ms"]})
        rows.append(row)
    return rows


def format_rows(run: dict, rows: list[dict]) -> str:
    ph = run.get("phases_ms", {})
    head = (f"{run['m']} x {run['n']} x {run['k']}, {run['moduli']} moduli {run['mode']}, path {run['path']}"
            + (f", {run['gpu']}" if "gpu" in run else "")  # runs written since the results files' head
            + " (events, ms: " + ", ".join(f"{p} {v:.2f}" for p, v in ph.items()) + ")")
    issue = any("issue_floor_ms" in r for r in rows)
    moved = any("move_ms" in r for r in rows)
    out = [head, "", "| stage | kernels | ms (ncu) | DRAM GB | GB/s | must move GB | floor ms | x floor |"
           + (" SM GHz | issue floor ms | issue busy |" if issue else "")
           + (" plain move ms (x floor) | x move |" if moved else ""),
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" + (" ---: | ---: | ---: |" if issue else "")
           + (" ---: | ---: |" if moved else "")]
    for r in rows:
        fg = "-" if r["floor_gb"] is None else f"{r['floor_gb']:.3f}"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        line = (f"| {r['stage']} | {r['kernels']} | {r['ms']:.3f} | {r['dram_gb']:.3f} | {r['gbs']:.0f} | "
                f"{fg} | {r['floor_ms']:.3f} | {ratio} |")
        if issue:
            line += (f" {r['sm_ghz']:.2f} | {r['issue_floor_ms']:.3f} | {r['issue_busy'] * 100:.0f} % |"
                     if "issue_floor_ms" in r else " - | - | - |")
        if moved:
            line += (f" {r['move_ms']:.4f} ({r['move_x_floor']:.2f}) | {r['x_move']:.2f} |"
                     if "move_ms" in r else " - | - |")
        out.append(line)
    return "\n".join(out)


def call_main(args) -> int:
    import cupy as cp
    import numpy as np

    import ozaki_cutlass
    from ozaki_cutlass.numerics.accuracy import random_matrix
    from ozaki_cutlass.tools.measure import write_results

    m, n, k = args.m, args.n, args.k
    rng = np.random.default_rng(m + 7 * n + 13 * k)
    a = cp.asarray(random_matrix(m, k, args.phi, rng))
    b = cp.asarray(random_matrix(k, n, args.phi, rng))
    kw = {"mode": args.mode, "path": args.path}
    if args.moduli:
        kw["moduli"] = args.moduli
    ozaki_cutlass.gemm(a, b, **kw)  # loads the kernels, grows the workspace
    phases = []
    for _ in range(5):
        t: dict = {}
        ozaki_cutlass.gemm(a, b, timings=t, **kw)
        phases.append(t)
    keys = [p for p, v in phases[0].items() if isinstance(v, float)]
    med = {p: statistics.median(t[p] for t in phases) for p in keys}
    cp.cuda.Device().synchronize()
    cp.cuda.profiler.start()
    ozaki_cutlass.gemm(a, b, **kw)
    cp.cuda.Device().synchronize()
    cp.cuda.profiler.stop()
    # B row-major: op(B)'s columns are strided and packed (operands.stages.needs_pack)
    run = {"m": m, "n": n, "k": k, "moduli": phases[-1].get("moduli", args.moduli), "mode": phases[-1].get(
        "mode", args.mode), "path": args.path, "phases_ms": med, "packed": n * k, "kernel": phases[-1].get("kernel"),
        "sms": cp.cuda.Device().attributes["MultiProcessorCount"]}
    write_results(args.json, run)
    print(json.dumps(run))
    return 0


def move_main(args) -> int:
    import cupy as cp
    import numpy as np

    with open(args.run) as f:
        run = json.load(f)
    only = None
    if args.ncu:  # the stages the profiled call ran, no others
        with open(args.ncu) as f:
            only = {st for st, _ in kernel_stages(parse_ncu(f.read()))}
    stages = move_stages(run, only)
    if not stages:
        ran = "" if only is None else f" among the stages {args.ncu} shows ({', '.join(sorted(only)) or 'none'})"
        print(f"{args.run}: no stage with bytes to move{ran}", file=sys.stderr)
        return 2
    module = cp.RawModule(code=move_source([st for st, _, _ in stages]))
    reads = max(r for _, r, _ in stages)
    writes = max(max(w for _, _, w in stages), 1)
    x = cp.random.randint(0, 2**30, size=4 * reads, dtype=cp.int32)  # the words read: random bits
    y = cp.empty(4 * writes, dtype=cp.int32)
    sink = cp.empty(4, dtype=cp.int32)
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    launches = []
    for st, r, w in stages:
        for grid in MOVE_GRIDS:
            name = move_kernel_name(st, grid)
            launches.append((name, module.get_function(name), move_blocks(max(r, w), grid, sms),
                             (x, np.int64(r), y, np.int64(w), sink)))
    for name, kernel, blocks, params in launches:  # each run once before the profiled range, checked
        y[:] = -1
        kernel((blocks,), (MOVE_THREADS,), params)
        r, w = int(params[1]), int(params[3])
        both = 4 * min(r, w)
        if not (cp.array_equal(y[:both], x[:both]) and bool((y[both:4 * w] != -1).all())):
            raise RuntimeError(f"{name}: the words written are not the words read")
    cp.cuda.Device().synchronize()
    cp.cuda.profiler.start()
    for _, kernel, blocks, params in launches:
        kernel((blocks,), (MOVE_THREADS,), params)
        cp.cuda.Device().synchronize()
    cp.cuda.profiler.stop()
    print(json.dumps({"m": run["m"], "n": run["n"], "k": run["k"], "moduli": run["moduli"],
                      "moves": [{"stage": st, "read_words": r, "write_words": w} for st, r, w in stages]}))
    return 0


def table_main(args) -> int:
    from ozaki_cutlass.tools.measure import write_results

    tables = []
    for spec in args.runs:
        files = spec.split(":")
        if len(files) not in (2, 3):
            print(f"{spec!r}: want RUN.json:NCU.csv or RUN.json:NCU.csv:MOVE.csv", file=sys.stderr)
            return 2
        with open(files[0]) as f:
            run = json.load(f)
        with open(files[1]) as f:
            kernels = parse_ncu(f.read())
        moves = None
        if len(files) == 3:
            with open(files[2]) as f:
                moves = fastest_moves(parse_ncu(f.read()))
        rows = stage_rows(run, kernels, args.bandwidth, moves)
        print(format_rows(run, rows) + "\n")
        tables.append({"run": run, "stages": rows})
    if args.json:
        # made from the runs' files, each of which names its GPU
        write_results(args.json, {"bandwidth_tbs": args.bandwidth, "int8_tops": INT8_TOPS, "tables": tables}, gpu=False)
    return 0


GEMM_STAGES = ("coarse gemm", "int8 gemm")


def target_needs(table: dict, target_tflops: float) -> dict:
    """One shape's table against a whole-call target: the GEMMs' ms as measured, the other
    stages' ms now and at their floor, the ceiling (GEMMs + floors) and what the target
    leaves the other stages."""
    run = table["run"]
    flop = 2.0 * run["m"] * run["n"] * run["k"]
    gemm = sum(r["ms"] for r in table["stages"] if r["stage"] in GEMM_STAGES)
    rest = [r for r in table["stages"] if r["stage"] not in GEMM_STAGES]
    now = sum(r["ms"] for r in rest)
    floor = sum(r["floor_ms"] for r in rest)
    left = flop / (target_tflops * 1e9) - gemm
    return {"gemm_ms": gemm, "rest_ms": now, "rest_floor_ms": floor, "ceiling_tflops": flop / (gemm + floor) / 1e9,
            "target_tflops": target_tflops, "left_ms": left, "left_x_floor": left / floor}


def shape_name(run: dict) -> str:
    m, n, k = run["m"], run["n"], run["k"]
    return f"{m}^3" if m == n == k else f"{m} x {n} x {k}"


def parse_target(spec: str) -> tuple[tuple[int, int, int], float]:
    """``MxNxK=TFLOPS`` -> ((m, n, k), tflops); argparse's error for anything else."""
    shape, _, tflops = spec.partition("=")
    try:
        dims = tuple(int(v) for v in shape.split("x"))
        value = float(tflops)
    except ValueError:
        dims, value = (), 0.0
    if len(dims) != 3 or min(dims) < 1 or not value > 0:
        raise argparse.ArgumentTypeError(f"{spec!r}: want MxNxK=TFLOPS, e.g. 8192x8192x8192=78")
    return dims, value


def needs_main(args) -> int:
    with open(args.tables) as f:
        tables = json.load(f)["tables"]
    targets = dict(args.target)
    print("| shape | GEMMs ms | other stages now, ms (x floor) | their floor ms | ceiling TFLOP/s | target | "
          "left for the other stages, ms (x floor) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for table in tables:
        run = table["run"]
        key = (run["m"], run["n"], run["k"])
        if key not in targets:
            continue
        r = target_needs(table, targets.pop(key))
        print(f"| {shape_name(run)} | {r['gemm_ms']:.2f} | {r['rest_ms']:.2f} ({r['rest_ms'] / r['rest_floor_ms']:.2f}x)"
              f" | {r['rest_floor_ms']:.2f} | {r['ceiling_tflops']:.1f} | {r['target_tflops']:g} | "
              f"{r['left_ms']:.2f} ({r['left_x_floor']:.2f}x) |")
    if targets:
        print("no table for " + ", ".join("x".join(map(str, key)) for key in targets), file=sys.stderr)
        return 1
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("call", help="one profiled call (run under ncu)")
    c.add_argument("m", type=int)
    c.add_argument("n", type=int)
    c.add_argument("k", type=int)
    c.add_argument("--moduli", type=int, default=None, help="default: the accuracy contract's choice")
    c.add_argument("--mode", choices=["fast", "accurate"], default=None)
    c.add_argument("--path", choices=["staged", "fused"], default="fused")
    c.add_argument("--phi", type=float, default=0.5)
    c.add_argument("--json", required=True)
    mv = sub.add_parser("move", help="plain kernels moving each stage's bytes (run under ncu)")
    mv.add_argument("run", metavar="RUN.json", help="the shape's call JSON (call --json)")
    mv.add_argument("--ncu", metavar="NCU.csv", help="the call's ncu CSV: move only the stages it ran")
    t = sub.add_parser("table", help="stage table from call JSON and ncu CSV pairs")
    t.add_argument("runs", nargs="+", metavar="RUN.json:NCU.csv[:MOVE.csv]")
    t.add_argument("--bandwidth", type=float, default=4.3, help="TB/s of the floor (measured copy bandwidth)")
    t.add_argument("--json")
    nd = sub.add_parser("needs", help="what whole-call targets leave the stages other than the GEMMs")
    nd.add_argument("tables", metavar="TABLES.json", help="a table's --json")
    nd.add_argument("--target", nargs="+", required=True, type=parse_target, metavar="MxNxK=TFLOPS")
    args = p.parse_args(argv)
    return {"call": call_main, "move": move_main, "table": table_main, "needs": needs_main}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
