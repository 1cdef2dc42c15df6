"""Where the host time of a small native DGEMM call goes, and what it costs against CuPy's
`a @ b` (device run).

The auto policy's native fast lane must cost no more host time than the framework's own
matmul, or `ozaki_cutlass.gemm` loses to `a @ b` on small shapes. This prints
  1. host time per call: wall clock over many calls of a 64^3 product (GPU work of a few
     microseconds), and the host time to enqueue a burst of calls (the GPU's time left
     out), the fast lane and its pieces next to `a @ b`;
  2. the bench's metric at the small benchmark shapes: CUDA events around each call, the
     two calls in alternation, median: `ozaki_cutlass.gemm(a, b)` against `a @ b`.
  3. with --torch, item 2 on PyTorch tensors against PyTorch's `a @ b`.
    python scripts/native_call_cost.py [--calls 7000] [--torch]"""

import argparse
import statistics
import time

import numpy as np

import ozaki_cutlass
from ozaki_cutlass import config
from ozaki_cutlass.device import cublas, driver
from ozaki_cutlass.dispatch.policy import DECISIONS
from ozaki_cutlass.paths.fast_lane import fast_lane


def _host_times(fn, warmup: int, calls: int) -> tuple[float, float]:
    """Microseconds per call of ``calls`` calls back to back after ``warmup`` (the GPU
    drained first): until the last is enqueued, and until the GPU has finished them."""
    import cupy as cp

    for _ in range(warmup):
        fn()
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    cp.cuda.Device().synchronize()
    t2 = time.perf_counter()
    return 1e6 * (t1 - t0) / calls, 1e6 * (t2 - t0) / calls


def per_call_us(fn, calls: int) -> float:
    """Wall clock per call, the GPU's time included where it is longer than the host's."""
    return _host_times(fn, 100, calls)[1]


def enqueue_us(fn, calls: int = 300) -> float:
    """Host time per call to enqueue a burst short enough not to fill the launch queue."""
    return _host_times(fn, 20, calls)[0]


def lane_of(a, b):
    ozaki_cutlass.gemm(a, b)  # the general path decides the shape (native), the next call makes the lane
    ozaki_cutlass.gemm(a, b)
    shape = (a.shape[0], b.shape[1])
    lanes = [lane for lane in DECISIONS.lanes.values() if lane is not None and lane.shape == shape]
    if not lanes:
        raise SystemExit(f"no fast lane for {a.shape} @ {b.shape}: the auto policy did not decide native DGEMM")
    return lanes[0]


def host_costs(n: int, calls: int) -> None:
    import cupy as cp

    a, b = cp.random.rand(n, n) - 0.5, cp.random.rand(n, n) - 0.5
    out = cp.empty((n, n))
    lane = lane_of(a, b)
    handles = cublas.handles(lane.context)
    stream = cp.cuda.get_current_stream().ptr
    lib = handles.lib.blas                 # nvmath.bindings.cublas
    blas = handles.blas()
    lib.set_stream(blas, stream)
    one, zero = np.ones(1), np.zeros(1)
    dgemm_args = (blas, 0, 0, n, n, n, one.ctypes.data, b.data.ptr, n, a.data.ptr, n, zero.ctypes.data,
                  out.data.ptr, n)
    rows = [
        ("cupy a @ b", lambda: a @ b),
        ("ozaki_cutlass.gemm(a, b): the auto fast lane", lambda: ozaki_cutlass.gemm(a, b)),
        ("the lane's cublasLtMatmul alone (LtDgemm.run)",
         lambda: lane.lt.run(handles, b.data.ptr, a.data.ptr, out.data.ptr, 1.0, 0.0, stream)),
        ("cublasDgemm_v2 alone through nvmath (the call before cuBLASLt)", lambda: lib.dgemm(*dgemm_args)),
        ("paths.fast_lane.fast_lane(a, b, 1.0, 'fast') (the lane without gemm's entry)",
         lambda: fast_lane(a, b, 1.0, "fast")),
        (f"cupy.empty(({n}, {n}))", lambda: cp.empty((n, n))),
        (f"cupy.ndarray(({n}, {n}), numpy.float64)", lambda: cp.ndarray((n, n), np.float64)),
        ("cublas.handles(context)", lambda: cublas.handles(lane.context)),
        ("config.tuning_table_setting()", config.tuning_table_setting),
        ("cupy.cuda.runtime.getDevice()", cp.cuda.runtime.getDevice),
        ("cupy.cuda.get_current_stream().ptr", lambda: cp.cuda.get_current_stream().ptr),
    ]
    rounds = 7
    print(f"host cost per call, {n}^3 float64, {rounds} rounds of every row in turn (the host's speed drifts), "
          f"median over rounds: wall clock over {calls // rounds} calls after 100 warm-up (the GPU's time "
          "included where it is longer), and the time to enqueue 300 calls")
    wall, enqueue = [[] for _ in rows], [[] for _ in rows]
    for _ in range(rounds):
        for i, (_, fn) in enumerate(rows):
            wall[i].append(per_call_us(fn, calls // rounds))
            enqueue[i].append(enqueue_us(fn))
    for (label, _), w, e in zip(rows, wall, enqueue):
        print(f"  {statistics.median(w):7.2f} us  {statistics.median(e):7.2f} us  {label}", flush=True)


def event_ratios(shapes, warmup: int = 10, reps: int = 200) -> None:
    import cupy as cp

    print(f"\nCUDA events around each call, the two in alternation, {warmup} warm-up rounds, median of {reps} "
          "(the bench's auto metric); ratio = a @ b time / gemm time")
    for n in shapes:
        rs = cp.random.default_rng(n)
        a = (rs.random((n, n)) - 0.5) * cp.exp(rs.standard_normal((n, n)))
        b = (rs.random((n, n)) - 0.5) * cp.exp(rs.standard_normal((n, n)))
        lane_of(a, b)
        (ours, theirs), (got, want) = driver.event_times([lambda: ozaki_cutlass.gemm(a, b), lambda: a @ b],
                                                        warmup, reps)
        same = bool(cp.array_equal(got.view(cp.int64), want.view(cp.int64)))
        t_ours, t_theirs = statistics.median(ours), statistics.median(theirs)
        print(f"  {n}^3: gemm {1e3 * t_ours:8.1f} us, a @ b {1e3 * t_theirs:8.1f} us, ratio {t_theirs / t_ours:5.3f}"
              f"; bits equal to a @ b: {same}", flush=True)


def torch_event_ratios(shapes, warmup: int = 10, reps: int = 200) -> None:
    """The same against PyTorch's own `a @ b` (torch.matmul), on PyTorch CUDA tensors."""
    import torch

    print(f"\nPyTorch: CUDA events around each call, the two in alternation, {warmup} warm-up rounds, median of "
          f"{reps}; ratio = torch a @ b time / gemm time")
    for n in shapes:
        g = torch.Generator(device="cuda").manual_seed(n)
        a, b = (((torch.rand((n, n), generator=g, device="cuda", dtype=torch.float64) - 0.5)
                 * torch.exp(torch.randn((n, n), generator=g, device="cuda", dtype=torch.float64)))
                for _ in range(2))
        ozaki_cutlass.gemm(a, b)  # decides; the next call makes the lane
        ozaki_cutlass.gemm(a, b)
        if fast_lane(a, b, 1.0, "fast") is None:  # the mode gemm's default (the contract) passes
            raise SystemExit(f"no fast lane for {n}^3 on PyTorch tensors")
        (ours, theirs), (got, want) = driver.event_times([lambda: ozaki_cutlass.gemm(a, b), lambda: a @ b],
                                                        warmup, reps)
        same = bool(torch.equal(got.view(torch.int64), want.view(torch.int64)))
        t_ours, t_theirs = statistics.median(ours), statistics.median(theirs)
        print(f"  {n}^3: gemm {1e3 * t_ours:8.1f} us, a @ b {1e3 * t_theirs:8.1f} us, ratio {t_theirs / t_ours:5.3f}"
              f"; bits equal to a @ b: {same}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=7000)
    ap.add_argument("--torch", action="store_true", help="also against torch.matmul on PyTorch tensors")
    args = ap.parse_args()
    driver.ensure_context(0)
    host_costs(64, args.calls)
    event_ratios([256, 512, 1024, 2048])
    if args.torch:
        torch_event_ratios([256, 512, 1024, 2048])


if __name__ == "__main__":
    main()
