"""The scan of both operands alone (device run): the stage that reads op(A)'s rows and op(B)'s
columns for their exponents, fast shifts and non-finite counts and, in accurate mode, writes
their coarse magnitudes from its second pass (`scan_coarse`), at calls' shapes, timed
against its memory floor: one operand after the other on one stream (what ncu's per-kernel
times add up) and forked as a call forks them (op(B)'s on a second stream;
tools.measure.operands_launch). --stage inner: instead the default call's first read, the
contract's inner pass (`inner_stats` with the scan's first pass of each vector), floor 8
bytes per entry.
Inputs: standard normal vectors of k entries, contiguous (the packed layout the call scans);
--rounds rounds of back-to-back launches, CUDA events, medians. The floor: 8 bytes read per
entry, and in accurate mode one coarse byte written, at the copy rate measured in the same
process (cupy.copyto of 2 GiB). At long k a vector's two passes read it twice from DRAM
where the vectors in flight overflow the L2 (docs/stages/scan.md).
--other TREE [TREE ...]: also the stage kernels built from each TREE's templates (another
checkout, e.g. `git archive BRANCH templates | tar -x -C TREE`;
kernels.stages.stages_from_tree; "other", or each by its TREE where there are several), all
in alternation with this checkout's round by round; every run's outputs are compared with this
checkout's on one stream (exit 1 where they differ).
    python scripts/scan_alone.py [--calls 4096x4096x65536 2048x2048x16384] [--stage scan|inner]
        [--mode accurate] [--moduli 15] [--rounds 5] [--other TREE ...] [--json FILE]"""

import argparse

from ozaki_cutlass.device.workspace import Workspace
from ozaki_cutlass.numerics.moduli import crt_constants, padded_k
from ozaki_cutlass.paths.contract import contract_buffers
from ozaki_cutlass.tools.arguments import moduli_count, shape
from ozaki_cutlass.tools.measure import (OPERAND_LAUNCHES, add_alone_arguments, alone_setup, alternating_medians,
                                        operands_launch, write_rows)

#: the contract buffers inner_stats writes (the others, logq and s1, are the scan's)
INNER_OUTPUTS = ("inner_part_a", "inner_pexp_a", "inner_e_a", "inner_s_a")
DEFAULT_CALLS = ("4096x4096x65536", "2048x2048x16384", "16384x1024x16384", "4096x4096x4096")


def floor_ms(m: int, n: int, k: int, coarse: bool, gbps: float) -> float:
    """8 bytes read per entry of both operands, and one coarse byte written where ``coarse``
    (the accurate scan), at ``gbps`` GB/s, in ms."""
    return (8 + (1 if coarse else 0)) * (m + n) * k / gbps / 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", nargs="+", type=shape, metavar="MxNxK",
                    default=[shape(s) for s in DEFAULT_CALLS])
    ap.add_argument("--stage", choices=("scan", "inner"), default="scan")
    ap.add_argument("--mode", choices=("accurate", "fast"), default="accurate", help="the scan's (accurate: scan_coarse)")
    ap.add_argument("--moduli", type=moduli_count, default=15, help="the count whose bound exponent the scan takes")
    add_alone_arguments(ap, rounds=5)
    args = ap.parse_args(argv)

    import cupy as cp

    libs, gbps = alone_setup(args.other)
    accurate = args.stage == "scan" and args.mode == "accurate"
    inner = args.stage == "inner"
    pb = crt_constants(args.moduli).bound_exponent
    rng = cp.random.default_rng(20261204)
    ws = Workspace()
    rows = []
    for m, n, k in args.calls:
        k16 = padded_k(k)
        xs = [rng.standard_normal((nvec, k)) for nvec in (m, n)]

        def outputs(nvec):
            o = {"exps": cp.empty(nvec, cp.int32), "fast": cp.empty(nvec, cp.int32),
                 "nonfinite": cp.empty(nvec, cp.int32)}
            if accurate:
                o["coarse"] = cp.empty(nvec * k16, cp.int8)
            if inner:  # the contract's buffers of one operand, as a call sizes them
                del o["fast"]
                o.update({name: cp.empty(size, cp.uint8) for name, size in contract_buffers("a", nvec, k).items()
                          if name in INNER_OUTPUTS})
            return o

        outs = {(name, how): [outputs(m), outputs(n)] for name in libs for how in OPERAND_LAUNCHES}

        def launcher(key):
            def side(i, stream):
                x, o = xs[i], outs[key][i]
                nvec = x.shape[0]
                if inner:
                    libs[key[0]].inner_stats(x.data.ptr, nvec, k, k, 1, o["inner_part_a"].data.ptr,
                                             o["inner_pexp_a"].data.ptr, o["inner_e_a"].data.ptr,
                                             o["inner_s_a"].data.ptr, stream, vec_exps=o["exps"].data.ptr,
                                             vec_nonfinite=o["nonfinite"].data.ptr)
                elif accurate:
                    libs[key[0]].scan_coarse(x.data.ptr, nvec, k, k, 1, pb, o["exps"].data.ptr, o["fast"].data.ptr,
                                             o["nonfinite"].data.ptr, o["coarse"].data.ptr, nvec, k16, stream)
                else:
                    libs[key[0]].scan(x.data.ptr, nvec, k, k, 1, pb, o["exps"].data.ptr, o["fast"].data.ptr,
                                      o["nonfinite"].data.ptr, stream)
            return operands_launch(side, key[1], ws)

        calls = {key: launcher(key) for key in outs}
        fl = floor_ms(m, n, k, accurate, gbps)
        reps = max(5, int(4e9 // (9 * (m + n) * k)))
        for f in calls.values():
            f()
        base = outs[("this", OPERAND_LAUNCHES[0])]
        same = all(bool(cp.array_equal(base[i][what], out[i][what]))
                   for out in outs.values() for i in (0, 1) for what in base[i])
        for (name, how), ms in alternating_medians(calls, args.rounds, reps).items():
            rows.append({"m": m, "n": n, "k": k, "stage": args.stage, "mode": args.mode, "moduli": args.moduli,
                         "kernels": name, "streams": how, "ms": ms, "floor_ms": fl, "x_floor": ms / fl,
                         "same_bits": same})
            what = "inner pass" if inner else f"scan {args.mode}"
            print(f"{m}x{n}x{k} {what}{'' if len(libs) == 1 else ' ' + name}, {how}: "
                  f"{ms * 1e3:.1f} us ({ms / fl:.2f}x floor {fl * 1e3:.1f} us)"
                  + ("" if same else "  OUTPUTS DIFFER from this checkout's one-stream run"))
        del xs, outs
    if args.json:
        write_rows(args.json, rows, copy_gbps=gbps, other=args.other, stage=args.stage, mode=args.mode)
    return 0 if all(r["same_bits"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
