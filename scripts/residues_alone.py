"""The residues kernel alone (device run): the stage that writes the int8 residue planes
of one operand (`residues`, 15 moduli by default), timed against its memory floor on
inputs that take the routes a call takes.
  --top 56   shifts that put each vector's largest |x| at 2^56: the four-piece wide route
             of accurate mode's calls at k <= 8192 (scripts/residue_routes.py)
  --top 90   2^90: the shared-memory table of 2^e mods m (e up to 37)
Inputs: standard normal vectors of k entries; --rounds rounds of back-to-back launches,
CUDA events, medians. The floor: 8 bytes read and one byte per modulus written per entry,
at the copy rate measured in the same process (cupy.copyto of 2 GiB); it does not bind
where the input and its planes fit the L2 (50 MB).
--calls MxNxK: instead, both operands of such calls, op(A)'s m rows and op(B)'s n columns
(k entries each) in the fused GEMM's layout, timed twice: one launch after the other on one
stream (what ncu's per-kernel times add up), and as a call launches them, op(B)'s on a
second stream forked off the first and joined back (tools.measure.operands_launch), where
one launch's last blocks and the other's first share the SMs.
--other TREE [TREE ...]: also the stage kernels built from each TREE's templates (another
checkout, e.g. `git archive BRANCH templates | tar -x -C TREE`;
kernels.stages.stages_from_tree; "other", or each by its TREE where there are several), all
in alternation with this checkout's round by round, their planes compared bit for bit (exit 1
where they differ).
    python scripts/residues_alone.py [--shapes 4096 8192x2048 | --calls 4096x4096x4096]
        [--moduli 15] [--top 56 90] [--rounds 7] [--other TREE ...] [--json FILE]"""

import argparse

from ozaki_cutlass.device.workspace import Workspace
from ozaki_cutlass.numerics.moduli import crt_constants
from ozaki_cutlass.tools.arguments import moduli_count
from ozaki_cutlass.tools.arguments import parse_shape as parse_shape_mnk
from ozaki_cutlass.tools.measure import (OPERAND_LAUNCHES, add_alone_arguments, alone_setup, alternating_medians,
                                        operands_launch, write_rows)

DEFAULT_SHAPES = ("2048", "4096", "8192x2048", "2048x16384", "8192", "16384")


def parse_shape(text: str) -> tuple[int, int]:
    """"N" (N vectors of N entries) or "NVECxK"."""
    parts = [int(p) for p in text.lower().split("x")]
    if len(parts) == 1:
        parts *= 2
    if len(parts) != 2 or min(parts) < 1 or parts[1] % 16:
        raise argparse.ArgumentTypeError(f"shape {text!r}: expected N or NVECxK, positive, K a multiple of 16")
    return parts[0], parts[1]


def parse_call(text: str) -> tuple[int, int, int]:
    """"N" or "MxNxK" (arguments.parse_shape), K a multiple of 16."""
    try:
        m, n, k = parse_shape_mnk(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if k % 16:
        raise argparse.ArgumentTypeError(f"call {text!r}: K must be a multiple of 16")
    return m, n, k


def floor_ms(nvec: int, k: int, moduli: int, gbps: float) -> float:
    """8 bytes read and ``moduli`` written per entry at ``gbps`` GB/s, in ms."""
    return (8 + moduli) * nvec * k / gbps / 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", type=parse_shape)
    ap.add_argument("--calls", nargs="+", type=parse_call, metavar="MxNxK",
                    help="both operands of these calls, one stream and two (instead of --shapes)")
    ap.add_argument("--moduli", type=moduli_count, default=15)
    ap.add_argument("--top", nargs="+", type=int, default=[56, 90], help="log2 of each vector's largest scaled |x|")
    add_alone_arguments(ap, rounds=7)
    args = ap.parse_args(argv)
    if args.calls and args.shapes:
        ap.error("--calls and --shapes: one or the other")
    if not args.calls and not args.shapes:
        args.shapes = [parse_shape(s) for s in DEFAULT_SHAPES]

    import cupy as cp

    libs, gbps = alone_setup(args.other)
    consts = crt_constants(args.moduli)
    moduli = cp.asarray(consts.moduli, cp.int32)
    rng = cp.random.default_rng(20261204)
    rows = []
    if args.calls:
        rows = time_calls(args, libs, gbps, moduli, rng)
    for top in [] if args.calls else args.top:
        for nvec, k in args.shapes:
            x = rng.standard_normal((nvec, k))
            shifts = (top - cp.ceil(cp.log2(cp.abs(x).max(axis=1)))).astype(cp.int32)
            outs = {name: cp.empty(args.moduli * nvec * k, cp.int8) for name in libs}

            def launch(name):
                return lambda: libs[name].residues(x.data.ptr, nvec, k, k, 1, shifts.data.ptr, args.moduli,
                                                   moduli.data.ptr, outs[name].data.ptr, nvec, k, 0)

            calls = {name: launch(name) for name in libs}
            fl = floor_ms(nvec, k, args.moduli, gbps)
            reps = max(5, int(4e9 // ((8 + args.moduli) * nvec * k)))
            for f in calls.values():
                f()
            same = all(bool(cp.array_equal(outs["this"], out)) for out in outs.values())
            medians = alternating_medians(calls, args.rounds, reps)
            for name in libs:
                ms = medians[name]
                rows.append({"nvec": nvec, "k": k, "moduli": args.moduli, "top": top, "kernels": name, "ms": ms,
                             "floor_ms": fl, "x_floor": ms / fl, "same_bits": same})
                print(f"top 2^{top} {nvec}x{k} {args.moduli} moduli{'' if len(libs) == 1 else ' ' + name}: "
                      f"{ms * 1e3:.1f} us ({ms / fl:.2f}x floor {fl * 1e3:.1f} us)"
                      + ("" if same else "  BITS DIFFER from this checkout's"))
            del x, outs
    if args.json:
        write_rows(args.json, rows, copy_gbps=gbps, other=args.other)
    return 0 if all(r["same_bits"] for r in rows) else 1


def time_calls(args, libs: dict, gbps: float, moduli, rng) -> list[dict]:
    """--calls: per call shape and top, both operands' residues one after the other on the
    legacy stream, then forked as a call forks them, per library; every run's planes
    compared with this checkout's on one stream."""
    import cupy as cp

    ws = Workspace()
    rows = []
    for top in args.top:
        for m, n, k in args.calls:
            sides = []
            for nvec in (m, n):
                x = rng.standard_normal((nvec, k))
                shifts = (top - cp.ceil(cp.log2(cp.abs(x).max(axis=1)))).astype(cp.int32)
                sides.append((x, shifts, nvec))
            outs = {(name, how): [cp.empty(args.moduli * nvec * k, cp.int8) for _, _, nvec in sides]
                    for name in libs for how in OPERAND_LAUNCHES}

            def launcher(key):
                def side(i, stream):
                    x, shifts, nvec = sides[i]
                    # the fused GEMM's layout: a row's moduli side by side along k
                    libs[key[0]].residues_strided(x.data.ptr, nvec, k, k, 1, shifts.data.ptr, args.moduli,
                                                  moduli.data.ptr, outs[key][i].data.ptr, nvec, k, args.moduli * k,
                                                  k, stream)
                return operands_launch(side, key[1], ws)

            calls = {key: launcher(key) for key in outs}
            fl = floor_ms(m + n, k, args.moduli, gbps)
            reps = max(5, int(4e9 // ((8 + args.moduli) * (m + n) * k)))
            for f in calls.values():
                f()
            # every run's planes against this checkout's on one stream
            base = outs[("this", OPERAND_LAUNCHES[0])]
            same = all(bool(cp.array_equal(base[i], out[i])) for out in outs.values() for i in (0, 1))
            for (name, how), ms in alternating_medians(calls, args.rounds, reps).items():
                rows.append({"m": m, "n": n, "k": k, "moduli": args.moduli, "top": top, "kernels": name,
                             "streams": how, "ms": ms, "floor_ms": fl, "x_floor": ms / fl, "same_bits": same})
                print(f"top 2^{top} {m}x{n}x{k} {args.moduli} moduli{'' if len(libs) == 1 else ' ' + name}, {how}: "
                      f"{ms * 1e3:.1f} us ({ms / fl:.2f}x floor {fl * 1e3:.1f} us)"
                      + ("" if same else "  BITS DIFFER from this checkout's"))
            del sides, outs
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
