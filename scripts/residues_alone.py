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
    python scripts/residues_alone.py [--shapes 4096 8192x2048] [--moduli 15] [--top 56 90]
        [--rounds 7] [--json FILE]"""

import argparse
import json
import statistics

from ozaki_cutlass.device import driver
from ozaki_cutlass.device.arch import visible_arch
from ozaki_cutlass.kernels.stages import load_stages
from ozaki_cutlass.numerics.moduli import crt_constants
from ozaki_cutlass.tools.measure import copy_rate_gbps, launch_ms

DEFAULT_SHAPES = ("2048", "4096", "8192x2048", "2048x16384", "8192", "16384")


def parse_shape(text: str) -> tuple[int, int]:
    """"N" (N vectors of N entries) or "NVECxK"."""
    parts = [int(p) for p in text.lower().split("x")]
    if len(parts) == 1:
        parts *= 2
    if len(parts) != 2 or min(parts) < 1 or parts[1] % 16:
        raise argparse.ArgumentTypeError(f"shape {text!r}: expected N or NVECxK, positive, K a multiple of 16")
    return parts[0], parts[1]


def floor_ms(nvec: int, k: int, moduli: int, gbps: float) -> float:
    """8 bytes read and ``moduli`` written per entry at ``gbps`` GB/s, in ms."""
    return (8 + moduli) * nvec * k / gbps / 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", type=parse_shape, default=[parse_shape(s) for s in DEFAULT_SHAPES])
    ap.add_argument("--moduli", type=int, default=15)
    ap.add_argument("--top", nargs="+", type=int, default=[56, 90], help="log2 of each vector's largest scaled |x|")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)

    import cupy as cp

    driver.ensure_context()
    st = load_stages(visible_arch())
    gbps = copy_rate_gbps()
    print(f"copy {gbps:.0f} GB/s")
    consts = crt_constants(args.moduli)
    moduli = cp.asarray(consts.moduli, cp.int32)
    rng = cp.random.default_rng(20261204)
    rows = []
    for top in args.top:
        for nvec, k in args.shapes:
            x = rng.standard_normal((nvec, k))
            shifts = (top - cp.ceil(cp.log2(cp.abs(x).max(axis=1)))).astype(cp.int32)
            out = cp.empty(args.moduli * nvec * k, cp.int8)

            def launch():
                st.residues(x.data.ptr, nvec, k, k, 1, shifts.data.ptr, args.moduli, moduli.data.ptr, out.data.ptr,
                            nvec, k, 0)

            fl = floor_ms(nvec, k, args.moduli, gbps)
            reps = max(5, int(4e9 // ((8 + args.moduli) * nvec * k)))
            launch()
            ms = statistics.median(launch_ms(launch, reps) for _ in range(args.rounds))
            rows.append({"nvec": nvec, "k": k, "moduli": args.moduli, "top": top, "ms": ms, "floor_ms": fl,
                         "x_floor": ms / fl})
            print(f"top 2^{top} {nvec}x{k} {args.moduli} moduli: {ms * 1e3:.1f} us ({ms / fl:.2f}x floor "
                  f"{fl * 1e3:.1f} us)")
            del x, out
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"copy_gbps": gbps, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
