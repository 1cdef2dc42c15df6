"""Which route the residues kernel takes, warp by warp, on the reference's scaled integers (CPU).

The residues kernel (templates/include/ozaki/stage_residues.cuh) takes one route per warp,
by the largest e of its 32 x 16 entries (the scaled integer V = M 2^e, M < 2^53): e == 0,
four wide pieces (e <= kWide4MaxExp), five (e <= kWideMaxExp), else the 2^e table; the
routes cost different instruction counts per entry and modulus. For random inputs of each
shape (numerics.accuracy.random_matrix, the bench's phi) this prints the largest bit length
of A's and B's scaled integers (NumPy reference, `reference.choose_scaling` and
`reference.scale_to_integers`) and the share of warps on each route. Vectors run along k
(A's rows, B's columns, as the accurate path packs B); a warp is 512 consecutive entries of
the vectors laid end to end, each padded to a multiple of 16 with zeros. The thresholds are
read from residue_arith.h. m and n are cut to --rows (the shifts then see only those rows
and columns: close to, not the same as, the full call's).
    python scripts/residue_routes.py [--shapes 4096 4096x4096x65536 ...] [--moduli 15]
        [--mode accurate] [--phi 0.5] [--rows 512] [--seed 1]"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np

from ozaki_cutlass import reference
from ozaki_cutlass.numerics.accuracy import random_matrix
from ozaki_cutlass.numerics.moduli import crt_constants
from ozaki_cutlass.tools.arguments import moduli_count, positive_int, shape, spread

HEADER = ("templates", "include", "ozaki", "residue_arith.h")  # under the repository's root
CHUNK, WARP = 16, 32  # entries per thread, threads per warp (stage_common.cuh's kChunk, kWarp)


def header_constant(name: str, text: str) -> int:
    """``inline constexpr int NAME = VALUE;`` of residue_arith.h."""
    found = re.search(rf"inline constexpr int {name} = (\d+);", text)
    if found is None:
        raise SystemExit(f"{name} not found in {'/'.join(HEADER)}")
    return int(found.group(1))


def warp_exponents(ints: np.ndarray) -> np.ndarray:
    """The largest e of each warp's entries: ``ints`` holds one vector per row (along k)."""
    nvec, k = ints.shape
    _, bits = np.frexp(ints)                       # |V| in [2^(bits-1), 2^bits)
    e = np.where(ints != 0, np.maximum(bits - 53, 0), 0)
    k_pad = -(-k // CHUNK) * CHUNK
    flat = np.zeros((nvec, k_pad), np.int64)
    flat[:, :k] = e
    flat = flat.ravel()
    per_warp = CHUNK * WARP
    flat = np.concatenate([flat, np.zeros(-flat.size % per_warp, np.int64)])
    return flat.reshape(-1, per_warp).max(axis=1)


def routes(emax: np.ndarray, wide4: int, wide5: int) -> dict[str, float]:
    return {
        "e == 0": float(np.mean(emax == 0)),
        f"4 pieces (e <= {wide4})": float(np.mean((emax > 0) & (emax <= wide4))),
        f"5 pieces (e <= {wide5})": float(np.mean((emax > wide4) & (emax <= wide5))),
        "2^e table": float(np.mean(emax > wide5)),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", type=shape, nargs="+",
                    default=[shape(s) for s in ("4096", "8192", "16384", "8192x8192x2048", "2048x2048x16384",
                                                "16384x1024x16384", "4096x4096x65536")])
    ap.add_argument("--moduli", type=moduli_count, default=15)
    ap.add_argument("--mode", choices=("accurate", "fast"), default="accurate")
    ap.add_argument("--phi", type=spread, default=0.5)
    ap.add_argument("--rows", type=positive_int, default=512, help="m and n cut to this many (default 512)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    text = Path(__file__).resolve().parents[1].joinpath(*HEADER).read_text()
    wide4, wide5 = header_constant("kWide4MaxExp", text), header_constant("kWideMaxExp", text)
    consts = crt_constants(args.moduli)
    rng = np.random.default_rng(args.seed)
    print(f"{args.moduli} moduli, {args.mode} mode, phi = {args.phi}, m and n cut to {args.rows}")
    for full_m, full_n, k in args.shapes:
        m, n = min(full_m, args.rows), min(full_n, args.rows)
        a = random_matrix(m, k, args.phi, rng)
        b = random_matrix(k, n, args.phi, rng)
        s = reference.choose_scaling(a, b, consts, args.mode)
        for name, ints in (("A", reference.scale_to_integers(a, s.mu, 1)),
                           ("B", reference.scale_to_integers(b, s.nu, 0).T)):
            longest = int(np.frexp(np.abs(ints).max())[1])
            shares = ", ".join(f"{route} {share:.3f}" for route, share in
                               routes(warp_exponents(ints), wide4, wide5).items())
            print(f"{full_m}x{full_n}x{k} {name}: integers up to {longest} bits; warps: {shares}")


if __name__ == "__main__":
    main()
