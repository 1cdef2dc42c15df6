"""Would cuBLASLt, with its algorithm chosen once per shape, make the native lane cheaper?
(device run; the experiment that moved `_cublas` from cublasDgemm_v2 to cublasLtMatmul:
2026-11-29, nvidia-h200; its raw log, no longer kept: `git show
bd8a91e^:docs/bench/2026-11-29-run34-h200-lt-probe.log`)

`cublasDgemm_v2` picks its algorithm on every call; `cublasLtMatmul` takes one picked
before (by `cublasLtMatmulAlgoGetHeuristic`), so a plan made once per shape could skip that
work. This measures, for the candidates below:
  1. host cost per call: wall clock over many calls of a 64^3 product (GPU work ~ 5 us, so
     the host is what is timed);
  2. the bench's metric: CUDA events around each call, calls in alternation, median, at the
     benchmark shapes where the auto policy runs native DGEMM, each against CuPy's `a @ b`;
  3. whether each candidate's bits equal `cublasDgemm_v2`'s.
Candidates: CuPy `a @ b`; `cublasDgemm_v2`; ctypes `cublasLtMatmul` with the first
heuristic algorithm allowed no workspace, and allowed a 32 MiB one.
    python scripts/native_lt_probe.py [--shapes 4096 ...] [--reps 30]"""

import argparse
import ctypes
import statistics

from native_call_cost import per_call_us  # scripts/, next to this one
from ozaki_cutlass.device import cublas, driver
from ozaki_cutlass.tools.arguments import shape

CUDA_R_64F, COMPUTE_64F = 1, 70
DESC_TRANSA, DESC_TRANSB = 3, 4
PREF_MAX_WORKSPACE = 1


class Algo(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64 * 8)]


class Heuristic(ctypes.Structure):
    _fields_ = [("algo", Algo), ("workspace", ctypes.c_size_t), ("state", ctypes.c_int),
                ("waves", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


def ok(status, what):
    if status != 0:
        raise RuntimeError(f"{what}: status {status}")


P = ctypes.c_void_p


def open_lt() -> ctypes.CDLL:
    """libcublasLt, opened here with this probe's own signatures (its own CDLL object: the
    package's ctypes settings on its copy are left alone)."""
    from cuda import pathfinder

    lt = ctypes.CDLL(pathfinder.load_nvidia_dynamic_lib("cublasLt").abs_path)
    lt.cublasLtMatmul.argtypes = [P, P, P, P, P, P, P, P, P, P, P, P, P, P, ctypes.c_size_t, P]
    for fn in ("cublasLtCreate", "cublasLtMatmulDescCreate", "cublasLtMatmulDescSetAttribute",
               "cublasLtMatrixLayoutCreate", "cublasLtMatmulPreferenceCreate",
               "cublasLtMatmulPreferenceSetAttribute", "cublasLtMatmulAlgoGetHeuristic", "cublasLtMatmul"):
        getattr(lt, fn).restype = ctypes.c_int
    return lt


class LtPlan:
    """Row-major C (m x n) = A (m x k) @ B (k x n) as column-major C^T = B^T A^T."""

    def __init__(self, lt, handle, m, n, k, workspace_bytes, ws_ptr):
        self.lt = lt
        self.desc = P()
        ok(lt.cublasLtMatmulDescCreate(ctypes.byref(self.desc), COMPUTE_64F, CUDA_R_64F), "desc")
        self.la, self.lb, self.lc = P(), P(), P()
        ok(lt.cublasLtMatrixLayoutCreate(ctypes.byref(self.la), CUDA_R_64F, ctypes.c_uint64(n),
                                         ctypes.c_uint64(k), ctypes.c_int64(n)), "layout B^T")
        ok(lt.cublasLtMatrixLayoutCreate(ctypes.byref(self.lb), CUDA_R_64F, ctypes.c_uint64(k),
                                         ctypes.c_uint64(m), ctypes.c_int64(k)), "layout A^T")
        ok(lt.cublasLtMatrixLayoutCreate(ctypes.byref(self.lc), CUDA_R_64F, ctypes.c_uint64(n),
                                         ctypes.c_uint64(m), ctypes.c_int64(n)), "layout C^T")
        pref = P()
        ok(lt.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)), "pref")
        ws = ctypes.c_uint64(workspace_bytes)
        ok(lt.cublasLtMatmulPreferenceSetAttribute(pref, PREF_MAX_WORKSPACE, ctypes.byref(ws), 8), "pref ws")
        self.result = Heuristic()
        count = ctypes.c_int()
        ok(lt.cublasLtMatmulAlgoGetHeuristic(handle, self.desc, self.la, self.lb, self.lc, self.lc, pref, 1,
                                             ctypes.byref(self.result), ctypes.byref(count)), "heuristic")
        if count.value < 1:
            raise RuntimeError("no algorithm")
        self.handle, self.ws_ptr = handle, ws_ptr if self.result.workspace else None
        self.one, self.zero = ctypes.c_double(1.0), ctypes.c_double(0.0)
        self.algo = ctypes.byref(self.result.algo)

    def __call__(self, a_ptr, b_ptr, c_ptr, stream):
        ok(self.lt.cublasLtMatmul(self.handle, self.desc, ctypes.byref(self.one), b_ptr, self.la, a_ptr, self.lb,
                                  ctypes.byref(self.zero), c_ptr, self.lc, c_ptr, self.lc, self.algo, self.ws_ptr,
                                  self.result.workspace, stream), "cublasLtMatmul")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", type=shape, nargs="+", metavar="N|MxNxK",
                    default=[(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (16384, 16384, 1024),
                             (65536, 1024, 4096), (512, 512, 512), (4096, 4096, 256)])
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    import cupy as cp

    lt = open_lt()
    driver.ensure_context(0)
    handle = P()
    ok(lt.cublasLtCreate(ctypes.byref(handle)), "cublasLtCreate")
    ws = cp.empty(32 << 20, dtype=cp.uint8)
    lib = cublas.library().blas            # nvmath.bindings.cublas
    bh = cublas.handles().blas()
    stream = cp.cuda.get_current_stream().ptr
    lib.set_stream(bh, stream)
    one, zero = ctypes.c_double(1.0), ctypes.c_double(0.0)

    def candidates(m, n, k):
        lt0 = LtPlan(lt, handle, m, n, k, 0, None)
        lt32 = LtPlan(lt, handle, m, n, k, 32 << 20, ws.data.ptr)

        def dgemm(a, b):
            c = cp.empty((m, n))
            lib.dgemm(bh, 0, 0, n, m, k, ctypes.addressof(one), b.data.ptr, n, a.data.ptr, k,
                      ctypes.addressof(zero), c.data.ptr, n)
            return c

        def with_plan(plan):
            def run(a, b):
                c = cp.empty((m, n))
                plan(a.data.ptr, b.data.ptr, c.data.ptr, stream)
                return c
            return run

        same = bytes(lt0.result.algo) == bytes(lt32.result.algo)
        return [("cupy a @ b", lambda a, b: a @ b), ("cublasDgemm_v2 (nvmath) + cupy.empty", dgemm),
                (f"Lt, no workspace (algo ws {lt0.result.workspace}) + cupy.empty", with_plan(lt0)),
                (f"Lt, 32 MiB allowed (algo ws {lt32.result.workspace}, the same algo as with none: {same}) "
                 "+ cupy.empty", with_plan(lt32))]

    n = 64
    a, b = cp.random.rand(n, n) - 0.5, cp.random.rand(n, n) - 0.5
    print(f"host cost per call, {n}^3 float64, wall clock over 5000 calls after 100 warm-up")
    for label, fn in candidates(n, n, n):
        print(f"  {per_call_us(lambda: fn(a, b), 5000):7.2f} us  {label}", flush=True)
    print(f"  {per_call_us(lambda: cp.empty((n, n)), 5000):7.2f} us  cupy.empty alone")

    timer = driver.EventTimer(0)
    print(f"\nevents around each call (bench's metric), 5 warm-up rounds, median of {args.reps}, in alternation; "
          "ratio = cupy time / candidate time; bits vs cublasDgemm_v2")
    for m, n, k in args.shapes:
        rs = cp.random.default_rng(m + n + k)
        a = (rs.random((m, k)) - 0.5) * cp.exp(rs.standard_normal((m, k)))
        b = (rs.random((k, n)) - 0.5) * cp.exp(rs.standard_normal((k, n)))
        cands = candidates(m, n, k)
        times = [[] for _ in cands]
        outs = [None] * len(cands)
        for rep in range(5 + args.reps):
            for i, (_, fn) in enumerate(cands):
                timer.start()
                outs[i] = fn(a, b)
                t = timer.stop()
                if rep >= 5:
                    times[i].append(t)
        med = [statistics.median(t) for t in times]
        ref = outs[1].view(cp.int64)
        print(f"{m}x{n}x{k}:")
        for (label, _), t, o in zip(cands, med, outs):
            same = bool(cp.array_equal(o.view(cp.int64), ref))
            print(f"  {1e3 * t:9.1f} us  ratio {med[0] / t:5.3f}  bits==dgemm {same!s:5}  {label}")
        del a, b, outs
        cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
