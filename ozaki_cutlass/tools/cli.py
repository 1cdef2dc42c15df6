"""`ozaki-cutlass`: build the INT8 GEMM kernels for this GPU, list them, run the demo.

    ozaki-cutlass build [--arch sm_90a|sm_80] [--variants GLOB ...] [--jobs N] [--out DIR]
        (--arch sm_80 --variants 'prologue_*': the opt-in tile-local prologue prototype)
    ozaki-cutlass list  [--arch ...] [--variants GLOB ...] [--full] [--out DIR]
    ozaki-cutlass demo  [--n N] [--seed S] [--cpu] [--arrays auto|cupy|own]
    ozaki-cutlass accuracy [--n N] [--phi ...] [--min-moduli A] [--max-moduli B]
    ozaki-cutlass bench-int8 [--arch ...] [--size N]       (GPU)
    ozaki-cutlass bench [--shapes ...] [--arrays ...] [--energy-seconds S] [--plot F]  (GPU)
    ozaki-cutlass tune [--sizes ...] [--arrays ...] --out F                         (GPU)

Tables and summaries go to stdout, diagnostics to stderr through `logging`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from ..numerics.moduli import MAX_MODULI
from .arguments import (ARRAY_CHOICES, CPU_DEFAULT_N, CPU_MAX_N, GPU_DEMO_N, PHI_MAX, cpu_matrix_size, moduli_count,
                        nonnegative_int, positive_int, spread)

__all__ = ["main"]

log = logging.getLogger("ozaki_cutlass.cli")

# Exit statuses.
_OK = 0
_FAILED = 1  # a build failed, the toolchain or the GPU is missing, the artifact directory is unusable
_USAGE = 2  # what to do is unclear: missing --arch without a GPU, a pattern matching nothing
_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as a shell reports it)

_ARCHES = ("sm_90a", "sm_80")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ozaki-cutlass",
        description="FP64 GEMM emulation (Ozaki scheme II) on INT8 tensor cores with CUTLASS.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="more diagnostics on stderr (-vv for debug)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    build = commands.add_parser(
        "build", help="render and compile kernel variants (cached)",
        description="Render and compile INT8 GEMM kernel variants with nvcc. Variants "
                    "already built with the same sources and toolchain are not recompiled.")
    build.add_argument("--arch", choices=_ARCHES,
                       help="target architecture (default: that of the visible GPU)")
    build.add_argument("--variants", nargs="+", metavar="PATTERN",
                       help="globs over variant names, matched against the full sweep "
                            "(default: the arch's default set)")
    build.add_argument("--jobs", type=positive_int, metavar="N",
                       help="parallel nvcc processes (default: OZAKI_BUILD_JOBS, else CPUs "
                            "capped by memory)")
    build.add_argument("--out", type=Path, metavar="DIR",
                       help="artifact directory (default: OZAKI_CACHE_DIR, else build/ in a "
                            "checkout, else the user cache dir)")
    build.set_defaults(handler=_build)

    listing = commands.add_parser("list", help="show the variant catalog and what is built")
    listing.add_argument("--arch", choices=_ARCHES, help="one architecture (default: all)")
    listing.add_argument("--variants", nargs="+", metavar="PATTERN",
                         help="globs over variant names (implies the full sweep)")
    listing.add_argument("--full", action="store_true", help="the full sweep, not the defaults")
    listing.add_argument("--out", type=Path, metavar="DIR", help="artifact directory to check")
    listing.set_defaults(handler=_list)

    demo = commands.add_parser("demo", help="multiply random matrices and check the result")
    demo.add_argument("--n", type=positive_int, metavar="INT",
                      help=f"matrix size (default: {GPU_DEMO_N} on a GPU, {CPU_DEFAULT_N} for the CPU reference, which "
                           f"takes at most {CPU_MAX_N})")
    demo.add_argument("--seed", type=nonnegative_int, metavar="INT", help="random seed (0 or more)")
    demo.add_argument("--cpu", action="store_true", help="use the NumPy reference only")
    demo.add_argument("--arrays", choices=ARRAY_CHOICES, default="auto",
                      help="device arrays of the GPU timing: cupy (native DGEMM is CuPy's a @ b), own (ours, "
                           "native DGEMM through gemm(policy='native'); no CuPy needed), auto (cupy where "
                           "installed; default)")
    demo.set_defaults(handler=_demo)

    acc = commands.add_parser("accuracy", help="error table: moduli count x mode x phi (CPU)",
                              description="Normwise error of the NumPy reference against an exact "
                                          "(n <= 128) or double-double product, next to float64 @.")
    acc.add_argument("--n", type=cpu_matrix_size, default=CPU_DEFAULT_N, metavar="INT",
                     help=f"matrix size, 1 to {CPU_MAX_N} (default: %(default)s; memory grows as n^2, "
                          "time as n^3)")
    acc.add_argument("--phi", type=spread, nargs="+", default=[0.5, 1.0, 2.0, 4.0],
                     help=f"spreads of the entries' exponents, 0 to {PHI_MAX:g}: entries are (U - 0.5) "
                          f"exp(phi N(0,1)) (default: %(default)s); at {PHI_MAX:g} they reach about "
                          "10^+-141 and their products 10^+-282, and not far beyond the products "
                          "overflow float64")
    acc.add_argument("--min-moduli", type=moduli_count, default=6)
    acc.add_argument("--max-moduli", type=moduli_count, default=MAX_MODULI)
    acc.add_argument("--reference", choices=["auto", "exact", "dd"], default="auto")
    acc.add_argument("--seed", type=nonnegative_int, default=0, help="random seed (0 or more)")
    acc.set_defaults(handler=_accuracy)

    doctor = commands.add_parser("doctor", help="what this machine gives the package: GPU, driver, nvcc, "
                                                "CUTLASS, cuBLAS, the kernel cache and what is built")
    doctor.set_defaults(handler=_doctor)

    from .bench import add_bench_parser
    from .int8 import add_int8_parser
    from .tune import add_tune_parser

    add_int8_parser(commands)
    add_bench_parser(commands)
    add_tune_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    args.argv = argv  # the command as given, for what records it (tune's table)
    level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(args.verbose, 2)]
    logging.basicConfig(level=level, format="%(levelname)s: %(message)s", stream=sys.stderr)
    from ..device.driver import NoGpuError
    from ..dispatch import TuningTableError

    try:
        return args.handler(args)
    except TuningTableError as exc:  # the user's table: say what is wrong, no traceback
        log.error("%s", exc)
        return _USAGE
    except NoGpuError as exc:  # a GPU command (bench-int8, bench, tune) on a machine without one
        why = exc.__cause__ if exc.__cause__ is not None else exc
        log.error("ozaki-cutlass %s needs an NVIDIA GPU (compute capability 8.0 or newer) and its "
                  "driver, and none is usable here: %s; run it on such a machine (`ozaki-cutlass "
                  "accuracy` and `ozaki-cutlass demo --cpu` run on the CPU)", args.command,
                  " ".join(str(why).split()).rstrip("."))
        return _FAILED
    except BrokenPipeError:  # `ozaki-cutlass list --full | head`: the reader is gone, say nothing more
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit
        return _FAILED
    except KeyboardInterrupt as exc:  # Ctrl-C: one line (a build says what it kept), no traceback
        log.error("ozaki-cutlass %s: interrupted%s", args.command, f": {exc}" if str(exc) else "")
        return _INTERRUPTED


def _target_arch(requested: str | None):
    """The arch to build: --arch, else the visible GPU's; None (after saying why) if neither."""
    from ..generator import Arch

    if requested is not None:
        return Arch(requested)
    from ..device import arch as arch_module

    capability = arch_module.compute_capability()
    if capability is None:
        log.error("no GPU found: pass --arch sm_90a or --arch sm_80 to choose what to build")
        return None
    arch = arch_module.arch_for_capability(*capability)
    if arch is None:
        log.error("the GPU's compute capability %d.%d is not supported (8.0 or newer is "
                  "needed); pass --arch to build anyway", *capability)
        return None
    log.info("building for the visible GPU (compute capability %d.%d): %s",
             capability[0], capability[1], arch.value)
    return arch


def _patterns(patterns: str | Sequence[str] | None) -> list[str] | None:
    return [patterns] if isinstance(patterns, str) else None if patterns is None else list(patterns)


def _matching(arch, patterns: list[str], full: bool) -> list:
    """The catalogued variants (plain and fused) matching any of ``patterns``, each once, in
    the order of the patterns."""
    from ..generator import catalog

    found = []
    for pattern in patterns:
        found.extend(v for v in catalog(arch, pattern, full=full, epilogue=None) if v not in found)
    return found


def _select(arch, patterns: str | Sequence[str] | None, full: bool):
    """What `list` shows for ``arch`` (None: every arch): with patterns, what `build
    --variants` builds for them; without, the catalog (its defaults, or the full sweep)
    and what a plain `build` builds (the stage library, every kernel the tuning table
    routes to)."""
    from ..generator import Arch, catalog

    found: list = []
    for one in ([arch] if arch is not None else list(Arch)):
        one = Arch(one)
        wanted = (_build_targets(one, patterns) if _patterns(patterns) is not None else
                  catalog(one, None, full=full, epilogue=None) + _build_targets(one, None))
        found.extend(v for v in wanted if v not in found)
    return found


def _unmatched(patterns: str | Sequence[str] | None, variants) -> list[str]:
    """The patterns that match none of ``variants``: said, rather than dropped without a word."""
    import fnmatch

    return [p for p in _patterns(patterns) or () if not any(fnmatch.fnmatchcase(v.name, p) for v in variants)]


def _build_targets(arch, patterns: str | Sequence[str] | None):
    """The GEMM variants selected (plain and fused), plus the arch's stage-kernel library
    (which both pipelines need) unless the patterns leave it out. Without patterns: the
    arch's default sets with the fused kernels' siblings, and every kernel the tuning table
    in effect routes to (so that calls the dispatcher sends there, and `ozaki-cutlass
    tune`'s candidates, do not compile on first use)."""
    import fnmatch

    from ..generator import StagesVariant

    patterns = _patterns(patterns)
    if patterns is None:  # what the dispatcher may pick (as the first call builds it)
        from ..dispatch import kernel_targets, load_table

        return kernel_targets(arch, load_table())
    targets = _matching(arch, patterns, True)
    stages = StagesVariant(arch=arch)
    if any(fnmatch.fnmatchcase(stages.name, p) for p in patterns):
        targets.append(stages)
    for pattern in patterns or ():  # the opt-in prologue prototype: only when a pattern names it
        from ..generator.prologue import prologue_catalog

        targets.extend(v for v in prologue_catalog(pattern) if v.arch is arch and v not in targets)
    return targets


def _build(args: argparse.Namespace) -> int:
    from ..generator import CompileError, ToolchainError, build
    from ..generator.environment import directory_problem

    arch = _target_arch(args.arch)
    if arch is None:
        return _USAGE
    variants = _build_targets(arch, args.variants)
    unmatched = _unmatched(args.variants, variants)
    if not variants or unmatched:
        log.error("no %s variant matches %s (see `ozaki-cutlass list --full --arch %s`)",
                  arch.value, " ".join(map(repr, unmatched or args.variants or ())), arch.value)
        return _USAGE
    out, setting, fix = _artifact_dir(args.out)
    why = directory_problem(out)
    if why is not None:
        log.error("%s cannot hold the artifacts: %s; %s", setting, why, fix)
        return _FAILED
    try:
        report = build(variants, out, jobs=args.jobs)
    except (CompileError, ToolchainError) as exc:
        log.error("%s", exc)
        return _FAILED
    print(report.summary())
    print(f"artifacts in {out}")
    return _OK


def _artifact_dir(requested: Path | None) -> tuple[Path, str, str]:
    """The artifact directory to build into (``--out``, else the generator's default), the
    setting that chose it and how to choose another, as an error message says them."""
    from ..generator import default_out_dir
    from ..generator.environment import cache_dir

    if requested is not None:
        out, setting, fix = requested, f"--out {requested}", "pass --out a writable directory"
    elif cache_dir() is not None:
        out, setting = default_out_dir(), f"OZAKI_CACHE_DIR={cache_dir()}"
        fix = "set OZAKI_CACHE_DIR to a writable directory (or unset it), or pass --out DIR"
    else:
        out = default_out_dir()
        setting = f"the default artifact directory {out}"
        fix = "set OZAKI_CACHE_DIR to a writable directory, or pass --out DIR"
    try:
        out = out.resolve()
    except (OSError, RuntimeError):  # a symlink loop: the check below says what is wrong
        out = out.absolute()
    return out, setting, fix


def _list(args: argparse.Namespace) -> int:
    from ..generator import Arch, ToolchainError, default_out_dir, list_artifacts, resolve_toolchain
    from ..generator.artifact import corrupted_artifacts
    from ..generator.variants import EPILOGUE_TAGS

    variants = _select(args.arch, args.variants, full=args.full)
    unmatched = _unmatched(args.variants, variants)
    if not variants or unmatched:
        log.error("no variant matches %s", " ".join(map(repr, unmatched or args.variants or ())))
        return _USAGE
    out = (args.out or default_out_dir()).resolve()
    built: dict[str, set[str]] = {}
    unhashed: set[str] = set()  # built by a version that recorded no SHA-256: build redoes them
    for artifact in list_artifacts(out):
        built.setdefault(artifact.variant.name, set()).add(artifact.key)
        if not artifact.file_sha256:
            unhashed.add(artifact.key)
    corrupted: dict[str, set[str]] = {}
    for artifact, _ in corrupted_artifacts(out):
        corrupted.setdefault(artifact.variant.name, set()).add(artifact.key)
    try:
        toolchain = resolve_toolchain()
    except ToolchainError as exc:
        log.warning("cannot tell whether the artifacts are current: %s", exc)
        toolchain = None

    rows = [("name", "arch", "tile", "cluster", "schedule", "stages", "epilogue", "built")]
    for v in variants:  # GEMM variants; the stage library and the prologue prototype have fewer fields
        gemm = hasattr(v, "schedule")
        rows.append((
            v.name,
            v.arch.value,
            f"{v.tile_m}x{v.tile_n}x{v.tile_k}" if hasattr(v, "tile_m") else "-",
            f"{v.cluster_m}x{v.cluster_n}" if gemm and v.arch is Arch.SM90A else "-",
            v.schedule.value if gemm else "-",
            ("auto" if v.stages == 0 else str(v.stages)) if gemm else "-",
            f"{EPILOGUE_TAGS[v.epilogue]}_g{v.group_size}" if gemm else
            "stage kernels" if v.name.startswith("stages_") else "prologue",
            _built_status(v, built.get(v.name, set()), corrupted.get(v.name, set()), unhashed, toolchain),
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    print(f"{len(variants)} variants, {sum(r[-1] == 'yes' for r in rows[1:])} built, in {out}")
    return _OK


def _built_status(variant, keys: set[str], corrupted: set[str], unhashed: set[str], toolchain) -> str:
    """yes: built from the current sources and toolchain, its files as recorded;
    corrupted: the current build's files (or, without a toolchain, any build's) do not
    match their recorded SHA-256 (build redoes it); unverified: built, but the current key
    cannot be computed, or the build recorded no hashes; stale: built from other sources;
    no: never built."""
    from ..generator import ToolchainError, cache_key

    if toolchain is None:
        return "corrupted" if corrupted else "unverified" if keys else "no"
    try:
        key = cache_key(variant, toolchain)
    except ToolchainError as exc:  # e.g. a template is missing
        log.warning("%s: %s", variant.name, exc)
        return "corrupted" if corrupted else "unverified" if keys else "no"
    if key in corrupted:
        return "corrupted"
    if key in keys:
        return "unverified" if key in unhashed else "yes"
    return "stale" if keys or corrupted else "no"


def _doctor(args: argparse.Namespace) -> int:
    from .doctor import doctor_main

    return doctor_main(args)


def _demo(args: argparse.Namespace) -> int:
    from . import demo

    return demo.main(args)


def _accuracy(args: argparse.Namespace) -> int:
    from . import demo

    return demo.accuracy_main(args)


if __name__ == "__main__":
    sys.exit(main())
