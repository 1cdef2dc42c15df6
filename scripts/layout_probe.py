"""Where does the fused path with one-modulus groups lose to the staged path? (device run)

The same 15 INT8 products (random int8 residues, m = n = k = N), timed in alternation:
  plain/staged  the plain kernel, one batched launch, residues as (modulus, row, k) planes
  plain/concat  the plain kernel, one batched launch, residues concatenated along k
                (row i: modulus 0's k values, then modulus 1's, ...; the fused layout)
  fused-g1      the fused G = 1 kernel (same tile, concatenated), all 15 one-modulus groups
                in one call (one batched launch)
  fused-g1-each the same kernel called once per modulus
and, for whole gemm calls, the per-phase split (timings=) of the staged path and the
fused path with G = 1 and with the default G.
    python scripts/layout_probe.py [--sizes 8192 16384] [--json out.json]"""

import argparse
import statistics

import ozaki_cutlass
from ozaki_cutlass import dispatch
from ozaki_cutlass.device import driver
from ozaki_cutlass.kernels.gemm import load_group_gemm, load_int8_gemm
from ozaki_cutlass.numerics.moduli import crt_constants
from ozaki_cutlass.tools.measure import write_rows

PLAIN = "i8_sm90a_256x128x128_c1x2_coop_s0_int32_g1"
FUSED1 = "i8_sm90a_256x128x128_c1x2_coop_s0_pcrt_g1"
FUSED4 = "i8_sm90a_128x128x128_c1x1_coop_s0_pcrt_g4"
COUNT = 15


def med(xs):
    return statistics.median(xs)


def gemm_only(n: int) -> dict:
    import cupy as cp

    plain = load_int8_gemm(dispatch.variant_by_name(PLAIN, "probe"))
    fused = load_group_gemm(dispatch.variant_by_name(FUSED1, "probe"))
    moduli = crt_constants(COUNT).moduli
    kp = n
    ra = cp.random.randint(-127, 128, size=(COUNT, n, kp), dtype=cp.int8)
    rb = cp.random.randint(-127, 128, size=(COUNT, n, kp), dtype=cp.int8)
    ca = cp.ascontiguousarray(ra.transpose(1, 0, 2))  # (row, modulus, k): concatenated along k
    cb = cp.ascontiguousarray(rb.transpose(1, 0, 2))
    c32 = cp.empty((COUNT, n, n), dtype=cp.int32)
    x8 = cp.empty((COUNT, n, n), dtype=cp.uint8)
    wsb = max(plain.workspace_size(n, n, kp, COUNT), fused.workspace_size(n, n, kp, COUNT), 16)
    ws = cp.empty(wsb, dtype=cp.uint8)
    plane = n * n

    def staged():
        plain(n, n, kp, COUNT, ra.data.ptr, kp, n * kp, rb.data.ptr, kp, n * kp, c32.data.ptr, n, plane,
              ws.data.ptr, wsb)

    def concat():
        plain(n, n, kp, COUNT, ca.data.ptr, COUNT * kp, kp, cb.data.ptr, COUNT * kp, kp, c32.data.ptr, n,
              plane, ws.data.ptr, wsb)

    def fused1():
        fused(n, n, kp, moduli, ca.data.ptr, COUNT * kp, cb.data.ptr, COUNT * kp, x8.data.ptr, n, plane,
              ws.data.ptr, wsb)

    def fused1_each():
        for g in range(COUNT):
            fused(n, n, kp, moduli[g:g + 1], ca.data.ptr + g * kp, COUNT * kp, cb.data.ptr + g * kp, COUNT * kp,
                  x8.data.ptr + g * plane, n, plane, ws.data.ptr, wsb)

    names = ("plain_staged", "plain_concat", "fused_g1", "fused_g1_each")
    times, _ = driver.event_times([staged, concat, fused1, fused1_each], warmup=2, reps=5)
    # the three give the same products: plain/concat equals plain/staged, fused-g1 its residues
    # (checked plane by plane, to keep the memory down at n = 16384)
    concat()
    ref = [c32[g].copy() for g in (0, COUNT - 1)]
    staged()
    same = all(bool(cp.array_equal(r, c32[g])) for r, g in zip(ref, (0, COUNT - 1)))
    del ref
    fused1()
    fused_ok = all(bool(cp.array_equal(cp.mod(c32[g].astype(cp.int64), moduli[g]).astype(cp.uint8), x8[g]))
                   for g in range(COUNT))
    ops = 2.0 * n * n * kp * COUNT
    return {"n": n, **{name: {"ms": med(t), "top_s": ops / med(t) / 1e9}
                       for name, t in zip(names, times)},
            "concat_equals_staged": same, "fused_g1_equals_residues": fused_ok}


def phases(n: int) -> dict:
    import cupy as cp

    a, b = cp.random.rand(n, n) - 0.5, cp.random.rand(n, n) - 0.5
    out = {}
    for label, kw in (("staged", {"kernel": PLAIN}), ("fused_g1", {"kernel": FUSED1}),
                      ("fused_g4", {"kernel": FUSED4})):
        runs = []
        for _ in range(4):
            t = {}
            ozaki_cutlass.gemm(a, b, moduli=COUNT, timings=t, **kw)
            runs.append(t)
        runs = runs[1:]
        out[label] = {p: med([r[p] for r in runs]) for p in ("scale", "residues", "int8_gemm", "crt", "total")}
    return {"n": n, **out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[8192, 16384])
    ap.add_argument("--json")
    args = ap.parse_args()
    import cupy as cp

    res = []
    for n in args.sizes:
        g = gemm_only(n)
        p = phases(n)
        res.append({"gemm_only": g, "phases": p})
        print(f"n = {n}: INT8 products of 15 moduli, ms (TOP/s): "
              + ", ".join(f"{k} {g[k]['ms']:.2f} ({g[k]['top_s']:.0f})"
                             for k in ("plain_staged", "plain_concat", "fused_g1", "fused_g1_each"))
              + f"; concat == staged: {g['concat_equals_staged']}, fused-g1 == residues: {g['fused_g1_equals_residues']}")
        for label in ("staged", "fused_g1", "fused_g4"):
            q = p[label]
            print(f"    {label:9s} phases ms: scale {q['scale']:.2f} residues {q['residues']:.2f} "
                  f"int8 {q['int8_gemm']:.2f} crt {q['crt']:.2f} total {q['total']:.2f}")
        cp.get_default_memory_pool().free_all_blocks()
    if args.json:
        write_rows(args.json, res)


if __name__ == "__main__":
    main()
