"""Where the host time of a small native DGEMM call goes (device run).

The auto policy's native fast lane must cost no more host time than the framework's own
matmul, or `ozaki_cutlass.gemm` loses to `a @ b` on small shapes. This times, per call
(wall clock over many calls of a 256^3 product, whose GPU work is a few microseconds, so
the host side is what is measured), the fast lane and its pieces next to CuPy's `a @ b`:
    python scripts/native_call_cost.py [--calls 3000]"""

import argparse
import ctypes
import time

import cupy as cp

import ozaki_cutlass
from ozaki_cutlass import _cublas, _cuda
from ozaki_cutlass.arrays import Matrix


def per_call_us(fn, calls: int) -> float:
    for _ in range(50):
        fn()
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    cp.cuda.Device().synchronize()
    return 1e6 * (time.perf_counter() - t0) / calls


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=3000)
    args = ap.parse_args()
    n = 256
    a, b = cp.random.rand(n, n), cp.random.rand(n, n)
    out = cp.empty((n, n))
    ozaki_cutlass.gemm(a, b)  # decides the shape (native), so the next calls take the fast lane
    ctx = _cuda.ensure_context(0)
    A = Matrix(a.data.ptr, n, n, n, 1, "cupy", 0, a)
    B = Matrix(b.data.ptr, n, n, n, 1, "cupy", 0, b)
    O = Matrix(out.data.ptr, n, n, n, 1, "cupy", 0, out)
    plan = _cublas.plan_dgemm(A, B, O)
    lib = _cublas._library()
    handle = _cublas._handle(lib)
    stream = cp.cuda.get_current_stream().ptr
    one, zero = ctypes.c_double(1.0), ctypes.c_double(0.0)
    op = lambda t: 1 if t else 0  # noqa: E731 - CUBLAS_OP_T / CUBLAS_OP_N
    dgemm_args = (handle, op(plan.transa), op(plan.transb), plan.m, plan.n, plan.k, ctypes.byref(one),
                  ctypes.c_void_p(plan.a_ptr), plan.lda, ctypes.c_void_p(plan.b_ptr), plan.ldb,
                  ctypes.byref(zero), ctypes.c_void_p(plan.c_ptr), plan.ldc)
    stream_p = ctypes.c_void_p(stream)

    def raw_set_stream_and_dgemm():
        lib.cublasSetStream_v2(handle, stream_p)
        lib.cublasDgemm_v2(*dgemm_args)

    lib.cublasSetStream_v2(handle, stream_p)
    rows = [
        ("cupy a @ b", lambda: a @ b),
        ("ozaki_cutlass.gemm(a, b): the auto fast lane", lambda: ozaki_cutlass.gemm(a, b)),
        ("_cublas.dgemm(plan) (handle lookup, set stream, dgemm)", lambda: _cublas.dgemm(plan, 1.0, 0.0, stream)),
        ("ctypes: cublasSetStream_v2 + cublasDgemm_v2", raw_set_stream_and_dgemm),
        ("ctypes: cublasDgemm_v2 alone", lambda: lib.cublasDgemm_v2(*dgemm_args)),
        ("ctypes: cublasSetStream_v2 alone", lambda: lib.cublasSetStream_v2(handle, stream_p)),
        ("cupy.empty((256, 256))", lambda: cp.empty((n, n))),
        ("_cuda.ensure_context(0)", lambda: _cuda.ensure_context(0)),
        ("_cublas.plan_dgemm(A, B, O)", lambda: _cublas.plan_dgemm(A, B, O)),
        ("cupy.cuda.get_current_stream().ptr", lambda: cp.cuda.get_current_stream().ptr),
    ]
    del ctx
    print(f"host cost per call, {n}^3 float64, wall clock over {args.calls} calls after 50 warm-up")
    for label, fn in rows:
        print(f"  {per_call_us(fn, args.calls):7.2f} us  {label}")
    # the same call once the handle has a workspace of its own (cuBLAS otherwise uses its pool)
    ws = cp.empty(32 << 20, dtype=cp.uint8)
    lib.cublasSetWorkspace_v2.restype = ctypes.c_int
    lib.cublasSetWorkspace_v2.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    status = lib.cublasSetWorkspace_v2(handle, ctypes.c_void_p(ws.data.ptr), ctypes.c_size_t(ws.nbytes))
    print(f"  {per_call_us(lambda: lib.cublasDgemm_v2(*dgemm_args), args.calls):7.2f} us  "
          f"ctypes: cublasDgemm_v2 alone, the handle given a 32 MiB workspace (status {status})")
    with open("/proc/self/maps") as f:
        libs = sorted({line.split()[-1] for line in f if "libcublas" in line})
    print("libcublas loaded in this process (ours, and CuPy's if another):", ", ".join(libs))


if __name__ == "__main__":
    main()
