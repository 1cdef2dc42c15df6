"""Host cost of one cublasLtMatmul call through our ctypes binding and through
nvmath-python's Cython binding (issue 18, item 5): the same descriptors, algorithm,
pointers and stream, a small DGEMM so the host's time shows (device run).
    python scripts/lt_binding_cost.py [--n 64] [--rounds 7]
Prints, per binding, the host time to enqueue a burst of calls (median over rounds, the
bindings in turn) and whether the two bindings' results have the same bits."""

import argparse
import ctypes
import statistics
import time

import numpy as np

from ozaki_cutlass.device import cublas, driver

BURST = 300  # calls per burst: fewer than the launch queue holds


def enqueue_us(fn, sync) -> float:
    """Microseconds per call to enqueue BURST calls, the GPU drained first."""
    for _ in range(20):
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(BURST):
        fn()
    t1 = time.perf_counter()
    sync()
    return 1e6 * (t1 - t0) / BURST


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=64, help="square size of the DGEMM")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    import cupy as cp
    import nvmath
    from nvmath.bindings import cublasLt as nv
    from nvmath.bindings.cublas import ComputeType

    driver.ensure_context(0)
    handles = cublas.handles()
    lt = handles.lt.value
    n = args.n
    a, b = cp.random.rand(n, n) - 0.5, cp.random.rand(n, n) - 0.5
    c_ctypes, c_nvmath = cp.zeros((n, n)), cp.zeros((n, n))
    r64 = int(nvmath.CudaDataType.CUDA_R_64F)
    desc = nv.matmul_desc_create(int(ComputeType.COMPUTE_64F), r64)
    layout = nv.matrix_layout_create(r64, n, n, n)
    pref = nv.matmul_preference_create()
    found = np.zeros(1, dtype=nv.matmul_heuristic_result_dtype)
    count = np.zeros(1, dtype=np.int32)
    nv.matmul_algo_get_heuristic(lt, desc, layout, layout, layout, layout, pref, 1, found.ctypes.data,
                                 count.ctypes.data)
    if count[0] < 1 or found["workspace_size"][0] != 0:
        raise SystemExit(f"no workspace-free algorithm for {n}^3 (found {count[0]})")
    one, zero = np.ones(1), np.zeros(1)
    stream = cp.cuda.get_current_stream().ptr
    algo = found.ctypes.data  # the algorithm is the result's first member

    def ints(c):
        return (lt, desc, one.ctypes.data, a.data.ptr, layout, b.data.ptr, layout, zero.ctypes.data,
                c.data.ptr, layout, c.data.ptr, layout, algo, 0, 0, stream)

    raw = handles.lib.matmul  # cublasLtMatmul through ctypes, as LtDgemm.run calls it

    def as_ctypes(values):
        *pointers, _, size, s = values
        return (*(ctypes.c_void_p(p) for p in pointers), None, ctypes.c_size_t(size), ctypes.c_void_p(s))

    built = as_ctypes(ints(c_ctypes))
    nv_args = ints(c_nvmath)
    rows = [
        ("ctypes, arguments made once", lambda: raw(*built)),
        ("ctypes, all 16 arguments made per call (LtDgemm.run makes 4 of them)", lambda: raw(*as_ctypes(ints(c_ctypes)))),
        ("nvmath.bindings.cublasLt.matmul, integer arguments", lambda: nv.matmul(*nv_args)),
    ]
    sync = cp.cuda.Device().synchronize
    times = [[] for _ in rows]
    for _ in range(args.rounds):
        for i, (_, fn) in enumerate(rows):
            times[i].append(enqueue_us(fn, sync))
    print(f"cublasLtMatmul, {n}^3 float64, nvmath-python {nvmath.__version__}, cuBLASLt {nv.get_version()}: "
          f"host time to enqueue {BURST} calls, median of {args.rounds} rounds (the bindings in turn)")
    for (label, _), t in zip(rows, times):
        print(f"  {statistics.median(t):6.2f} us  {label}")
    same = bool(cp.array_equal(c_ctypes.view(cp.int64), c_nvmath.view(cp.int64)))
    # cuBLASLt reads the row-major arrays as column-major: c^T = a^T b^T, so c = b @ a
    close = bool(cp.allclose(c_ctypes, b @ a, rtol=1e-12, atol=1e-12))
    print(f"results: the two bindings' bits equal: {same}; equal to b @ a (row-major) within 1e-12: {close}")
    nv.matmul_preference_destroy(pref)
    nv.matrix_layout_destroy(layout)
    nv.matmul_desc_destroy(desc)


if __name__ == "__main__":
    main()
