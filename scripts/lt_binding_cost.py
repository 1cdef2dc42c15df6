"""Host cost of one cublasLtMatmul call: nvmath-python's binding alone, and the native
lane's call through it (``LtDgemm.run``: the alignment lookup, the scalars, the same
matmul), on the same descriptors, algorithm, pointers and stream, a small DGEMM so the
host's time shows (device run; issue 18, item 5).
    python scripts/lt_binding_cost.py [--n 64] [--rounds 7]
Prints, per row, the host time to enqueue a burst of calls (median over rounds, the rows
in turn) and whether the two results have the same bits. Until 2026-12-01 the package's
binding was ctypes; this script then set ctypes against nvmath (docs/benchmarks.md, "The
cuBLASLt binding")."""

import argparse
import statistics

import numpy as np

from native_call_cost import enqueue_us  # scripts/, next to this one
from ozaki_cutlass.device import cublas, driver
from ozaki_cutlass.device.layouts import DgemmPlan

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=64, help="square size of the DGEMM")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    import cupy as cp
    import nvmath

    driver.ensure_context(0)
    handles = cublas.handles()
    n = args.n
    a, b = cp.random.rand(n, n) - 0.5, cp.random.rand(n, n) - 0.5
    c_lane, c_raw = cp.zeros((n, n)), cp.zeros((n, n))
    plan = DgemmPlan(transa=False, transb=False, m=n, n=n, k=n, a_ptr=0, lda=n, b_ptr=0, ldb=n, c_ptr=0, ldc=n,
                     transposed=False)
    lane = cublas.lt_dgemm(plan, cublas.current_context())
    stream = cp.cuda.get_current_stream().ptr
    lt = handles.lib.lt                     # nvmath.bindings.cublasLt
    desc, layouts = lane.descriptors()
    algo = lane.algorithm(handles, a.data.ptr, b.data.ptr, c_raw.data.ptr)
    if algo is None:
        raise SystemExit(f"no workspace-free algorithm for {n}^3")
    one, zero = np.ones(1), np.zeros(1)
    la, lb, lc = layouts
    raw_args = (handles.lt, desc, one.ctypes.data, a.data.ptr, la, b.data.ptr, lb, zero.ctypes.data,
                c_raw.data.ptr, lc, c_raw.data.ptr, lc, algo, 0, 0, stream)
    rows = [
        ("nvmath.bindings.cublasLt.matmul, integer arguments made once", lambda: lt.matmul(*raw_args)),
        ("LtDgemm.run: the native lane's call", lambda: lane.run(handles, a.data.ptr, b.data.ptr, c_lane.data.ptr,
                                                                 1.0, 0.0, stream)),
    ]
    times = [[] for _ in rows]
    for _ in range(args.rounds):
        for i, (_, fn) in enumerate(rows):
            times[i].append(enqueue_us(fn))
    print(f"cublasLtMatmul, {n}^3 float64, nvmath-python {nvmath.__version__}, cuBLASLt {lt.get_version()}: "
          f"host time to enqueue 300 calls, median of {args.rounds} rounds (the rows in turn)")
    for (label, _), t in zip(rows, times):
        print(f"  {statistics.median(t):6.2f} us  {label}")
    same = bool(cp.array_equal(c_lane.view(cp.int64), c_raw.view(cp.int64)))
    # cuBLASLt reads the row-major arrays as column-major: c^T = a^T b^T, so c = b @ a
    close = bool(cp.allclose(c_lane, b @ a, rtol=1e-12, atol=1e-12))
    print(f"results: the two rows' bits equal: {same}; equal to b @ a (row-major) within 1e-12: {close}")


if __name__ == "__main__":
    main()
