"""``ozaki-cutlass tune``: time every candidate kernel per shape bucket in alternation and
write the tuning table the dispatcher reads (``ozaki_cutlass.dispatch.table``)."""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import logging
import math
import os
import secrets
import stat
import statistics
from pathlib import Path

from ..api import contract, gemm
from ..device import driver
from ..device.arch import visible_arch
from ..dispatch import (ANY, MEASURED_MARGIN, Candidate, builtin_candidates, candidates_from_table,
                        emulation_measured_faster, load_table, path_of)
from ..generator import catalog
from ..kernels.library import locate
from ..options import MODES, resolve_moduli
from .arguments import ARRAY_CHOICES, batch_shape, moduli_count, nonnegative_int, positive_int, shape
from .measure import (ArraysUnavailable, arrays_for, deciding_reps, discarding, results_header,
                      time_against)

__all__ = ["tune_points", "kind_points", "NATIVE_ROUTINES", "native_line", "tune_candidates", "tune_main",
           "bucket_entries", "FINALISTS", "FINALIST_MARGIN", "contract_moduli",
           "add_tune_parser", "unwritable", "write_table"]

log = logging.getLogger(__name__)

#: The default calls timed again before a bucket's auto kernel is chosen: up to this many,
#: within this factor of the fastest in the first alternation.
FINALISTS, FINALIST_MARGIN = 3, 1.10


def tune_points(sizes, shapes) -> list[tuple[int, int, int, dict]]:
    """What ``tune`` measures, in table order: (m, n, k, bucket). Each rectangular shape
    first, with a bucket of a factor sqrt(2) around it in every dimension; then the
    square sizes, whose buckets meet at the geometric midpoints and cover 1 .. 2^31 - 1."""
    points = [(m, n, k, _box(m, n, k)) for m, n, k in shapes]
    sizes = sorted(sizes)
    bounds = [1] + [int(math.sqrt(a * b)) for a, b in zip(sizes, sizes[1:])] + [ANY[1]]
    for i, n in enumerate(sizes):
        lo, hi = bounds[i], bounds[i + 1] - 1 if i + 1 < len(sizes) else bounds[i + 1]
        points.append((n, n, n, {"m": [lo, hi], "n": [lo, hi], "k": [lo, hi]}))
    return points


def _box(m: int, n: int, k: int) -> dict:
    return {d: [max(1, math.ceil(v / math.sqrt(2))), math.floor(v * math.sqrt(2))] for d, v in (("m", m), ("n", n),
                                                                                               ("k", k))}


def kind_points(zgemm, batched) -> list[tuple[str, int, int, int, dict, float, tuple]]:
    """The complex and batched points ``tune`` measures, before the others: (label, m, n, k
    of the real problem the dispatcher decides, its bucket, flops, (the arrays' method
    making the operands, its size arguments)). A complex n^3 call is decided by the real
    realified problem n x 2n x 2n (numerics.zgemm), a batch by its element's n^3; each
    bucket is a factor sqrt(2) around that problem, and says what was measured in it
    ("operands"). The complex entries are marked ``"complex": true``: for complex calls
    alone, whose staged path runs Karatsuba's three products per modulus (not the cost of
    a real call of the realified shape). Real calls read the batches' entries too: a
    batch's element is a real call of its shape (a staged candidate's batch shares its
    INT8 launches, ozaki_cutlass.batched)."""
    points = []
    for n in zgemm or ():
        points.append((f"complex {n}^3", n, 2 * n, 2 * n, _box(n, 2 * n, 2 * n)
                       | {"complex": True, "operands": f"complex128 {n}^3 (realified: {n}x{2 * n}x{2 * n})"},
                       8.0 * n**3, ("complex_pair", n)))
    for batch, n in batched or ():
        points.append((f"{batch} x {n}^3", n, n, n, _box(n, n, n) | {"operands": f"batches of {batch}"},
                       2.0 * batch * n**3, ("batch_pair", batch, n)))
    return points


#: What the native call of each kind of point runs (CuPy's a @ b and gemm(policy="native")
#: alike pick cuBLAS's routine by the operands).
NATIVE_ROUTINES = {"pair": "DGEMM", "complex_pair": "ZGEMM", "batch_pair": "strided-batched DGEMM"}


def native_line(make: str, native_call: str) -> str:
    """The report's name for a point's native timing: ``make`` is the arrays' method that made
    its operands (kind_points, tune_points), ``native_call`` how the arrays call native."""
    routine = NATIVE_ROUTINES[make]
    return f"native {routine} (cuBLAS {routine} via {native_call})"


def tune_candidates(arch, patterns, table) -> list:
    """What ``ozaki-cutlass tune`` times, each kernel once: the built-in candidates (the
    default INT8 GEMM on the staged path, the fused family), the arch's default staged
    set, the kernels of ``table`` (dispatch.load_table()'s (table, source): a re-tune never
    drops an earlier winner unseen) and the variants matching ``patterns``."""
    cands = list(builtin_candidates(arch))

    def add(cand):
        if all(c.variant != cand.variant for c in cands):
            cands.append(cand)

    for v in catalog(arch):
        add(Candidate(path="staged", variant=v))
    for c in candidates_from_table(*table):
        if c.variant.arch is arch:
            add(Candidate(path=c.path, variant=c.variant, source="from the table in effect"))
    for pattern in patterns:
        for v in catalog(arch, pattern, full=True, epilogue=None):
            add(Candidate(path=path_of(v), variant=v))
    return cands


def tune_main(args) -> int:
    """``ozaki-cutlass tune``: time every candidate kernel per size bucket, at --moduli and
    --mode and as the default call (the accuracy contract's count and mode), write the
    table the dispatcher reads (JSON, with GPU, driver, date and command)."""
    unmatched = [g for g in args.variants or () if not catalog(None, g, full=True, epilogue=None)]
    if unmatched:  # before any GPU work
        log.error("--variants %s matches no variant (see `ozaki-cutlass list --full`)", " ".join(unmatched))
        return 2
    if not (args.sizes or args.shapes or args.zgemm or args.batched):
        log.error("nothing to measure: give --sizes, --shapes, --zgemm or --batched")
        return 2
    out = Path(args.out)
    why = unwritable(out)
    if why is not None:  # before timing anything: a run takes minutes
        log.error("--out %s: %s", out, why)
        return 2
    extended = None
    if args.extend is not None:  # read (and checked) before any timing
        try:
            extended, _ = load_table(args.extend)
        except ValueError as exc:
            log.error("--extend: %s", exc)
            return 2
    try:
        arrays = arrays_for(args.arrays)
    except ArraysUnavailable as exc:
        log.error("%s", exc)
        return 2

    driver.ensure_context()
    stream = arrays.stream()
    arch = visible_arch()
    moduli = resolve_moduli(args.moduli)
    cands = tune_candidates(arch, args.variants or (), load_table())
    unbuilt = {(c, moduli): _unbuilt(c, moduli) for c in cands}  # looked up once per count, not per size
    entries = []

    def report(label: str, name: str, ms) -> None:  # each line as soon as it is known: a tune takes minutes
        print(f"{label:>17}  {name:70s} {ms if isinstance(ms, str) else f'{ms:9.2f} ms'}", flush=True)

    points = kind_points(args.zgemm, args.batched) + [
        (f"{m}x{n}x{k}" if (m, n) != (k, k) else str(k), m, n, k, bucket, 2.0 * m * n * k, ("pair", m, n, k))
        for m, n, k, bucket in tune_points(args.sizes, args.shapes or ())]
    print(f"tune: {len(points)} points, {len(cands)} candidates, each timed at {moduli} moduli ({args.mode}) and "
          f"as the default call where there is one, in alternation ({args.warmup} warm-up, {args.reps} rounds), "
          f"then the fastest default calls (up to {FINALISTS}, within {FINALIST_MARGIN:g}x) again with native "
          "DGEMM for more rounds; each point's lines as it finishes", flush=True)
    for label, m, n, k, bucket, flops, (make, *size) in points:
        try:
            xa, xb = getattr(arrays, make)(*size, 0.5, args.seed + m + 7 * n + 13 * k)
        except RuntimeError as exc:   # batches on our own (2-D) arrays
            report(label, "no candidate", f"skipped: {exc}")
            continue
        # two rankings: each candidate at --moduli and --mode (the calls that name them, and a
        # path's entry), and as the default call (the accuracy contract: its own moduli count
        # and mode, which the auto policy runs; a kernel fast at one count can be slow at
        # another); None: no default call to rank (it runs native, or cannot be asked)
        default_moduli = contract_moduli(xa, xb)
        runnable, defaults = [], []
        for c in cands:
            missing = unbuilt[c, moduli]
            if missing:
                report(label, c.describe(), f"skipped: not built ({', '.join(missing)})")
                continue
            call = functools.partial(discarding, xa, xb, moduli=moduli, mode=args.mode, kernel=c.variant,
                                     path=c.path)
            try:
                call()  # one untimed call: a candidate that cannot run at this shape is left out, said
            except Exception as exc:  # noqa: BLE001
                report(label, c.describe(), f"skipped: {exc}")
                continue
            runnable.append((c, call))
            if default_moduli is None:
                continue
            if (c, default_moduli) not in unbuilt:
                unbuilt[c, default_moduli] = _unbuilt(c, default_moduli)
            missing = unbuilt[c, default_moduli]
            if missing:  # the default call would build them (tune builds nothing)
                report(label, f"{c.describe()} as the default call",
                       f"skipped: not built at {default_moduli} moduli ({', '.join(missing)})")
                continue
            default = functools.partial(discarding, xa, xb, kernel=c.variant, path=c.path)
            try:
                default()
            except Exception as exc:  # noqa: BLE001
                report(label, f"{c.describe()} as the default call", f"skipped: {exc}")
                continue
            defaults.append((c, default))
        if not runnable:
            report(label, "no candidate", "skipped: none is built and runs here")
            continue
        # every call in alternation, round after round: they share the clock and thermal
        # state (timed one after the other, a 16384 candidate's time swung by 40 %)
        times, _ = driver.event_times([call for _, call in runnable + defaults], args.warmup, args.reps, stream)
        medians = [statistics.median(t) for t in times]
        timings = [(ms, c) for ms, (c, _) in zip(medians, runnable)]
        default_timings = [(ms, c) for ms, (c, _) in zip(medians[len(runnable):], defaults)]
        for ms, c in timings:
            report(label, c.describe(), ms)
        for ms, c in default_timings:
            report(label, f"{c.describe()} as the default call ({default_moduli} moduli)", ms)
        # the auto policy's kernel: the fastest default call (where there is none, the
        # fastest at --moduli and --mode), timed against native DGEMM in alternation (no
        # drift between them) as the auto policy runs it: the table's native decisions are
        # read only by calls that name no moduli, kernel or path, which run the contract.
        # A call whose time swings from call to call can win a median of a few rounds (a
        # default call at 8192^3 ran 16-23 ms over 15 rounds where another ran 14-16): the
        # finalists, up to FINALISTS within FINALIST_MARGIN of the fastest, are timed again
        # with native for deciding_reps rounds, and the fastest there is the bucket's
        ranked = sorted(default_timings or timings, key=lambda t: t[0])
        finalists = [c for ms, c in ranked[:FINALISTS] if ms <= ranked[0][0] * FINALIST_MARGIN]
        final_ms, native_ms = time_against(
            [functools.partial(gemm, xa, xb, kernel=c.variant, path=c.path) for c in finalists],
            functools.partial(arrays.native, xa, xb), args.warmup, deciding_reps(args.reps, ranked[0][0]), stream)
        for ms, c in zip(final_ms, finalists):
            report(label, f"{c.describe()}: the default call (accuracy contract), alternating with native", ms)
        best_ms, best = min(zip(final_ms, finalists), key=lambda t: t[0])
        report(label, f"{native_line(make, arrays.native_call)}, alternating", native_ms)
        entries += bucket_entries(arch.value, bucket | {"measured": [m, n, k]}, flops, timings, best, best_ms,
                                  native_ms)
        del xa, xb
        arrays.release()
    table = results_header(["ozaki-cutlass", *args.argv]) | {
        "moduli": moduli, "mode": args.mode,
        "inputs": f"phi = 0.5; the shapes given, then square n x n x n; native DGEMM: {arrays.native_label}",
        "against_native": (f"a \"native\" entry first where the default call did not run "
                           f"{MEASURED_MARGIN:g}x faster than native DGEMM; a bucket's first kernel entry: "
                           "the candidate whose default call (the accuracy contract) ran fastest, with ms of "
                           "that call timed in alternation with native DGEMM (native_ms), marked \"calls\": "
                           "\"default\" where another kernel ran fastest at the table's moduli and mode; the "
                           "other kernel entries: the fastest of each path in calls at the table's moduli "
                           "and mode, fastest first, and their ms"),
        "entries": entries}
    if extended is not None:  # after the new entries: they are tried first
        table["entries"] = entries + extended.get("entries", [])
        table["extends"] = {"path": str(args.extend)} | {key: extended[key] for key in
                                                          ("gpu", "driver", "date", "command") if key in extended}
    try:
        write_table(out, table)
    except OSError as exc:  # the measurements are not lost: on stdout instead
        log.error("cannot write the tuning table to %s (%s); it follows on stdout", out, exc)
        print(json.dumps(table, indent=2))
        return 1
    print(f"wrote {out}: {len(table['entries'])} entries"
          + (f" ({len(entries)} new, then {args.extend}'s)" if extended is not None else ""))
    return 0


def _new_temporary(path: Path) -> tuple[int, Path]:
    """A new file next to ``path`` (hidden, random name), open for writing; its mode is
    0666 less the umask, as a plain open would give (mkstemp's would be 0600)."""
    while True:
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), temporary
        except FileExistsError:
            continue


def _followed(path: Path) -> Path:
    """``path``, or the file it links to: a link to a table is written through."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def unwritable(path: Path) -> str | None:
    """Why the tuning table cannot be written to ``path``, or None. Checked the way
    :func:`write_table` writes: a temporary file is made (and removed) in its folder."""
    path = _followed(path)
    if path.is_dir():
        return "is a folder"
    if path.exists() and not path.is_file():
        return "is not a regular file"
    folder = path.parent
    if not folder.exists():
        return f"the folder {folder} does not exist"
    if not folder.is_dir():
        return f"{folder} is not a folder"
    try:
        fd, temporary = _new_temporary(path)
    except OSError as exc:
        return f"cannot create a file in {folder} ({exc.strerror or exc})"
    os.close(fd)
    temporary.unlink(missing_ok=True)
    return None


def write_table(path: Path, table: dict) -> None:
    """Write ``table`` as JSON to ``path`` atomically: into a temporary file in the same
    folder, flushed to disk, then renamed over ``path``, so a reader, or a failure (a full
    disk), leaves the old table or the new one, never half of one. An existing table's
    permissions are kept; a symbolic link is followed, not replaced."""
    path = _followed(path)
    fd, temporary = _new_temporary(path)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(table, handle, indent=2)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.chmod(temporary, stat.S_IMODE(os.stat(path).st_mode))
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:  # the rename itself on disk; some filesystems cannot fsync a folder
        os.fsync(folder)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(folder)


def bucket_entries(arch: str, box: dict, flops: float, timings: list, best, best_ms: float,
                   native_ms: float) -> list[dict]:
    """One size bucket's table entries: a "native" entry first where the emulation did not
    run MEASURED_MARGIN faster than native DGEMM (dispatch.emulation_measured_faster), then
    ``best`` (the Candidate whose default call ran fastest; ``best_ms`` and ``native_ms``:
    that call, under the accuracy contract, and native DGEMM, timed in alternation; the
    auto policy reads this entry), then from ``timings`` [(ms, Candidate)] at the table's
    moduli and mode the fastest of each path, fastest first, for calls that name a moduli
    count (path="staged" gets the tuned staged kernel, not the default).
    Where ``best`` is also the fastest at the table's moduli it serves both kinds of call
    and is not listed again; else its entry says ``"calls": "default"`` (the default call
    alone), so that a call naming a count gets the kernel ranked at a count."""
    entries = []
    if not emulation_measured_faster(best_ms, native_ms):  # the auto policy's native bucket
        entries.append({"arch": arch, "path": "native"} | box | {"ms": native_ms, "tflops": flops / native_ms / 1e9})
    fastest = {}  # path -> (ms, Candidate) at the table's moduli and mode
    for ms, c in timings:
        if c.path not in fastest or ms < fastest[c.path][0]:
            fastest[c.path] = (ms, c)
    ranked = sorted(fastest.values(), key=lambda t: t[0])
    shared = not ranked or ranked[0][1] == best
    entries.append({"arch": arch, "path": best.path, "kernel": best.variant.name} | box
                   | ({} if shared else {"calls": "default"})
                   | {"ms": best_ms, "tflops": flops / best_ms / 1e9, "native_ms": native_ms})
    for ms, c in ranked[1:] if shared else ranked:
        entries.append({"arch": arch, "path": c.path, "kernel": c.variant.name} | box
                       | {"ms": ms, "tflops": flops / ms / 1e9})
    return entries


def contract_moduli(a, b) -> int | None:
    """The moduli count the default call runs on ``a`` and ``b`` (the accuracy contract's
    choice, ozaki_cutlass.contract), or None where it runs native DGEMM or the contract
    cannot be asked (batches)."""
    try:
        return contract(a, b).moduli
    except (ValueError, TypeError) as exc:
        log.info("no contract to ask about (%s): the candidates are ranked at --moduli alone", exc)
        return None


def _unbuilt(candidate, moduli) -> list[str]:
    """Names of the kernels a candidate needs that are not built (tuning builds nothing)."""
    missing = []
    for v in candidate.kernels(moduli):
        try:
            locate(v, build_missing=False)
        except FileNotFoundError:
            missing.append(v.name)
    return missing


def add_tune_parser(sub) -> None:
    p = sub.add_parser("tune", help="time the candidate kernels per size bucket, write the dispatcher's table (GPU)")
    p.add_argument("--sizes", type=positive_int, nargs="*", default=[1024, 2048, 4096, 8192, 16384],
                   help="square sizes, whose buckets cover every size (default: %(default)s; none: "
                        "only the shapes, --zgemm and --batched, e.g. with --extend)")
    p.add_argument("--shapes", type=shape, nargs="+", default=None, metavar="MxNxK",
                   help="rectangular shapes to measure too; each gets a bucket of a factor sqrt(2) "
                        "around it in every dimension, tried before the square buckets")
    p.add_argument("--zgemm", type=positive_int, nargs="+", default=None, metavar="N",
                   help="complex128 N^3 calls to measure too (against native ZGEMM), in the bucket of their "
                        "realified problem N x 2N x 2N")
    p.add_argument("--batched", type=batch_shape, nargs="+", default=None, metavar="BxN",
                   help="batches of B products N^3 to measure too (against native strided-batched DGEMM; "
                        "needs CuPy), in the bucket of N^3")
    p.add_argument("--moduli", type=moduli_count, default=None)
    p.add_argument("--mode", choices=MODES, default="accurate",
                   help="scaling mode of the timed calls (default: %(default)s; the default call's contract "
                        "runs fast mode, where a complex call's staged path runs Karatsuba's three products)")
    p.add_argument("--warmup", type=nonnegative_int, default=1)
    p.add_argument("--reps", type=positive_int, default=3)
    p.add_argument("--seed", type=nonnegative_int, default=0)
    p.add_argument("--arrays", choices=ARRAY_CHOICES, default="auto",
                   help="device arrays: cupy (native DGEMM is CuPy's a @ b), own (ours, native DGEMM is "
                        "gemm(policy='native'); no CuPy needed), auto (cupy where installed; default)")
    p.add_argument("--variants", nargs="+", default=None, metavar="GLOB",
                   help="also time these catalogued variants (globs over the full catalog)")
    p.add_argument("--extend", default=None, metavar="TABLE",
                   help="keep this table's entries after the new ones (the new buckets are tried first; "
                        "its metadata goes under \"extends\")")
    p.add_argument("--out", default="tuning.json", metavar="PATH",
                   help="where the table goes (written atomically; checked before any timing)")
    p.set_defaults(handler=tune_main)
