"""What the measuring commands (bench, tune, demo) and the device scripts share: the device
arrays they measure on and native DGEMM on them, timing in alternation, back-to-back
launches and the copy rate, cuBLAS's own FP64 emulation, energy per call, the error of
sampled rows against a double-double product, and the head of every results file (date,
GPU, driver, command).

Arrays: with CuPy installed the inputs are CuPy arrays (made on the GPU) and native DGEMM is
CuPy's ``a @ b``; without it (or with ``--arrays own``) they are our own
:class:`~ozaki_cutlass.device.arrays.DeviceArray` (made on the host with NumPy, copied once)
and native DGEMM is ``ozaki_cutlass.gemm(a, b, policy="native")``, one cuBLASLt DGEMM: the
comparison needs nothing but the package."""

from __future__ import annotations

import importlib.util
import json
import math
import shlex
import statistics
import subprocess
import sys
import time

import numpy as np

from ..api import gemm
from ..device import driver
from ..device.cublas_emulation import fixed_point_dgemm
from ..device.arrays import DeviceArray, allocate_like, current_stream, describe_input
from ..device.layouts import plan_dgemm
from ..device.arch import visible_arch
from ..device.workspace import Fork
from ..kernels.stages import stage_libraries
from ..numerics.accuracy import dd_product, normwise_error, random_matrix
from .arguments import ARRAY_CHOICES, positive_int

__all__ = ["CupyArrays", "OwnArrays", "ArraysUnavailable", "arrays_for", "plot_unavailable", "discarding", "deciding_reps",
           "time_against",
           "launch_ms", "alternating_medians", "OPERAND_LAUNCHES", "operands_launch", "copy_rate_gbps",
           "add_alone_arguments", "alone_setup",
           "CublasEmulation", "ENERGY_SECONDS", "measure_energy", "sample_reference", "sample_error", "results_header",
           "write_results", "write_rows",
           "gpu_identity", "parse_gpu_identity"]

class CupyArrays:
    """CuPy arrays; native DGEMM is CuPy's ``a @ b`` (cuBLAS)."""

    name = "cupy"
    native_call = "CuPy's a @ b"
    native_label = f"cuBLAS DGEMM via {native_call}"

    def __init__(self):
        import cupy

        self.cp = cupy

    def pair(self, m: int, n: int, k: int, phi: float, seed: int):
        """A (m x k) and B (k x n), entries (U - 0.5) exp(phi N(0,1)), generated on the GPU."""
        rs = self.cp.random.default_rng(seed)
        a = self._part(rs, (m, k), phi)   # A's draws before B's, as ever: the same inputs per seed
        return a, self._part(rs, (k, n), phi)

    def complex_pair(self, n: int, phi: float, seed: int):
        """n x n complex128 A and B, each part as :meth:`pair`'s entries, made on the GPU."""
        rs = self.cp.random.default_rng(seed)
        a, b = (self._part(rs, (n, n), phi) + 1j * self._part(rs, (n, n), phi) for _ in range(2))
        return a, b

    def batch_pair(self, batch: int, n: int, phi: float, seed: int):
        """(batch, n, n) float64 A and B, entries as :meth:`pair`'s, made on the GPU."""
        rs = self.cp.random.default_rng(seed)
        return self._part(rs, (batch, n, n), phi), self._part(rs, (batch, n, n), phi)

    def _part(self, rs, shape, phi: float):
        return (rs.random(shape) - 0.5) * self.cp.exp(phi * rs.standard_normal(shape))

    def upload(self, host: np.ndarray):
        return self.cp.asarray(host)

    def native(self, a, b):
        return a @ b

    def rows(self, x, index) -> np.ndarray:
        return self.cp.asnumpy(x[np.asarray(index)])

    def host(self, x) -> np.ndarray:
        return self.cp.asnumpy(x)

    def same_bits(self, x, y) -> bool:
        cp = self.cp
        return x.shape == y.shape and bool(cp.array_equal(x.view(cp.int64), y.view(cp.int64)))

    def stream(self) -> int:
        return int(self.cp.cuda.get_current_stream().ptr)

    def release(self) -> None:
        self.cp.get_default_memory_pool().free_all_blocks()


class OwnArrays:
    """Our own DeviceArrays on GPU 0 (made on the host with NumPy, copied once); native DGEMM
    is ``gemm(a, b, policy="native")`` (cuBLASLt, found by cuda-pathfinder): no CuPy needed.
    Every result is a new DeviceArray, as a user calling gemm on such arrays gets."""

    name = "own"
    native_call = "ozaki_cutlass.gemm(policy='native')"
    native_label = f"cuBLAS DGEMM via {native_call}"

    def __init__(self):
        driver.ensure_context(0)

    def pair(self, m: int, n: int, k: int, phi: float, seed: int):
        """A (m x k) and B (k x n), entries (U - 0.5) exp(phi N(0,1)), generated on the host."""
        rng = np.random.default_rng(seed)
        a = random_matrix(m, k, phi, rng)
        b = random_matrix(k, n, phi, rng)
        return self.upload(a), self.upload(b)

    def complex_pair(self, n: int, phi: float, seed: int):
        """n x n complex128 A and B, each part as :meth:`pair`'s entries, made on the host."""
        rng = np.random.default_rng(seed)
        a, b = (random_matrix(n, n, phi, rng) + 1j * random_matrix(n, n, phi, rng) for _ in range(2))
        return self.upload(a), self.upload(b)

    def batch_pair(self, batch: int, n: int, phi: float, seed: int):
        raise RuntimeError("batched operands are 3-D: our DeviceArrays are 2-D (install CuPy, or --arrays cupy)")

    def upload(self, host: np.ndarray) -> DeviceArray:
        return DeviceArray.from_host(host)

    def native(self, a, b):
        return gemm(a, b, policy="native")

    def rows(self, x: DeviceArray, index) -> np.ndarray:
        """Rows ``index`` of ``x`` (C-contiguous), copied one by one after x's stream."""
        cols = x.shape[1]
        out = np.empty((len(index), cols))
        for r, i in enumerate(index):
            driver.read_back(x.ptr + 8 * cols * int(i), out[r], x.stream)
        return out

    def host(self, x: DeviceArray) -> np.ndarray:
        return x.get()

    def same_bits(self, x: DeviceArray, y: DeviceArray) -> bool:
        if x.shape != y.shape:
            return False
        return bool(np.array_equal(x.get().view(np.int64), y.get().view(np.int64)))

    def stream(self) -> int:
        return 0  # gemm on DeviceArrays runs on the legacy default stream

    def release(self) -> None:
        pass  # DeviceArrays free their memory when dropped


class ArraysUnavailable(RuntimeError):
    """The arrays asked for cannot be had here (CuPy asked for and not installed); the
    message is one line with the fix. A missing GPU is the driver's NoGpuError instead."""


def arrays_for(choice: str = "auto"):
    """The arrays to measure on: ``"cupy"`` (CuPy must be installed), ``"own"``, or
    ``"auto"``: CuPy where it is installed, else our own. Raises ArraysUnavailable where
    CuPy is asked for and missing."""
    if choice not in ARRAY_CHOICES:
        raise ValueError(f"arrays {choice!r}: expected one of {', '.join(ARRAY_CHOICES)}")
    have_cupy = importlib.util.find_spec("cupy") is not None
    if choice == "cupy" and not have_cupy:
        raise ArraysUnavailable("--arrays cupy: CuPy is not installed (e.g. pip install cupy-cuda13x), "
                           "or pass --arrays own (our own device arrays, no CuPy needed)")
    if choice == "cupy" or (choice == "auto" and have_cupy):
        return CupyArrays()
    return OwnArrays()


def plot_unavailable(plot: bool) -> str | None:
    """Why the bench's ``--plot`` cannot be drawn here (matplotlib missing), said before any
    GPU work, or None. Nothing else the bench and the tune use is optional: CuPy is not
    needed (our own arrays stand in for it; arrays_for says where CuPy is asked for)."""
    if plot and importlib.util.find_spec("matplotlib") is None:
        return "--plot needs matplotlib: pip install -e '.[bench]' (or leave out --plot)"
    return None


def discarding(a, b, **kwargs) -> None:
    """One gemm call whose result is dropped (so timed rounds do not keep every output)."""
    gemm(a, b, **kwargs)


#: Rounds of a timing that decides between calls within a few per cent of each other (the
#: bench's auto row against native DGEMM, the tune's default-call finalists): at most this
#: many, about DECIDING_BUDGET_MS of one call's time (5 samples do not resolve microseconds
#: of host time, nor a kernel whose time swings from call to call).
DECIDING_REPS_MAX, DECIDING_BUDGET_MS = 200, 500.0


def deciding_reps(least: int, ms: float) -> int:
    """Rounds for a deciding timing of calls of about ``ms`` each: at least ``least``."""
    return max(least, min(DECIDING_REPS_MAX, int(DECIDING_BUDGET_MS / ms)))


def time_against(calls: list, native, warmup: int, reps: int, stream=0) -> tuple[list[float], float]:
    """Median ms of each of ``calls`` and of ``native()``, all timed in alternation (events
    around each call on ``stream``, by default the legacy default stream)."""
    times, _ = driver.event_times([*calls, native], warmup, reps, stream)
    return [statistics.median(t) for t in times[:-1]], statistics.median(times[-1])


def launch_ms(launch, reps: int, stream=0) -> float:
    """Milliseconds per call of ``launch()`` called ``reps`` times back to back between two
    CUDA events on ``stream``: a kernel's own time where each call only queues it (the host
    stays ahead of the GPU)."""
    if reps < 1:
        raise ValueError(f"launch_ms: reps must be at least 1, got {reps}")
    timer = driver.EventTimer(stream)
    timer.start()
    for _ in range(reps):
        launch()
    return timer.stop() / reps


def alternating_medians(calls: dict, rounds: int, reps: int) -> dict:
    """Median milliseconds per launch of each of ``calls`` (key -> callable), timed in turn
    round by round, ``reps`` back-to-back launches each (:func:`launch_ms`): the stage
    scripts' comparison of kernels or launches in one process."""
    if rounds < 1:
        raise ValueError(f"alternating_medians: rounds must be at least 1, got {rounds}")
    times = {key: [] for key in calls}
    for _ in range(rounds):
        for key, f in calls.items():
            times[key].append(launch_ms(f, reps))
    return {key: statistics.median(ts) for key, ts in times.items()}


#: How a stage's two operands are launched: one after the other on the legacy stream (what
#: ncu's per-kernel times add up), or forked as a call forks them (op(B)'s on a second stream).
OPERAND_LAUNCHES = ("one stream", "two streams")


def operands_launch(launch_side, how: str, ws=None):
    """A callable that launches one stage for both operands, ``launch_side(i, stream)`` with
    i = 0 for op(A) and 1 for op(B): ``how`` "one stream", both on the legacy stream in turn;
    "two streams", op(B)'s on ``ws``'s second stream forked off the legacy stream and joined
    back (device.workspace.Fork, as a call builds its operands) and op(A)'s on the legacy
    stream, so the launch that starts second takes the SMs the other one's last blocks
    leave."""
    if how == OPERAND_LAUNCHES[0]:
        def serial():
            launch_side(0, 0)
            launch_side(1, 0)
        return serial
    if how != OPERAND_LAUNCHES[1]:
        raise ValueError(f"operands_launch: how must be one of {OPERAND_LAUNCHES}, got {how!r}")
    if ws is None:
        raise ValueError("operands_launch: two streams need a workspace (its second stream)")

    def forked():
        with Fork(ws, 0, True) as side:
            launch_side(1, side)
            launch_side(0, 0)
    return forked


def copy_rate_gbps(nbytes: int = 2**31, rounds: int = 5, reps: int = 5) -> float:
    """The device's copy rate in GB/s, bytes read and written both counted: ``cupy.copyto``
    between two arrays of ``nbytes`` (CuPy needed), the median of ``rounds`` rounds of
    ``reps`` copies on the legacy default stream (the floor the device scripts measure
    stages against)."""
    if nbytes < 8 or rounds < 1:
        raise ValueError(f"copy_rate_gbps: need nbytes >= 8 and rounds >= 1, got {nbytes} and {rounds}")
    import cupy as cp

    src, dst = cp.empty(nbytes // 8), cp.empty(nbytes // 8)
    ms = statistics.median(launch_ms(lambda: cp.copyto(dst, src), reps) for _ in range(rounds))
    return 2 * src.nbytes / ms / 1e6


def add_alone_arguments(ap, rounds: int) -> None:
    """The options every stage-alone script (scripts/*_alone.py) takes: --rounds (default
    ``rounds``), --other TREE [TREE ...] (also other checkouts' stage kernels, all in one
    alternation with these) and --json FILE."""
    ap.add_argument("--rounds", type=positive_int, default=rounds)
    ap.add_argument("--other", metavar="TREE", nargs="+",
                    help="also time the stage kernels of each TREE/templates, in turn with these (distinct trees)")
    ap.add_argument("--json", help="write the rows here")


def alone_setup(others) -> tuple[dict, float]:
    """A stage-alone script's start on the GPU: the context, this checkout's stage kernels
    and ``others``' (kernels.stages.stage_libraries) and the device's copy rate, printed."""
    driver.ensure_context()
    libs = stage_libraries(visible_arch(), others)
    gbps = copy_rate_gbps()
    print(f"copy {gbps:.0f} GB/s")
    return libs, gbps


class CublasEmulation:
    """C = A B through cuBLAS's own FP64 emulation (``ozaki_cutlass.device.cublas_emulation``:
    fixed-point INT8 slices, strategy eager, dynamic mantissa control) on device arrays
    ``a`` and ``b`` (CuPy or ours): each call returns a new array of their kind. Raises
    ``cublas_emulation.EmulationUnavailable`` where the libcublas in use has no FP64 emulation, and
    ValueError where cuBLAS cannot take the layouts."""

    def __init__(self, a, b):
        self.A, self.B = describe_input(a, "a"), describe_input(b, "b")
        self.m, self.n = self.A.rows, self.B.cols
        self.device = self.A.device or 0
        self.dgemm = fixed_point_dgemm()
        _, view = allocate_like(self.A.kind, self.m, self.n, self.device)
        self.plan = plan_dgemm(self.A, self.B, view)
        if self.plan is None:
            raise ValueError("cuBLAS cannot take these layouts")
        self.stream = current_stream(self.A.kind, None, self.device)

    def _run(self, mantissa_bits: bool):
        out, view = allocate_like(self.A.kind, self.m, self.n, self.device)
        pointers = (self.A.ptr, self.B.ptr, view.ptr)
        if isinstance(out, DeviceArray):
            out.stream = self.stream
        if mantissa_bits:
            return out, self.dgemm.mantissa_bits(self.plan, self.stream, pointers=pointers)
        self.dgemm.run(self.plan, 1.0, 0.0, self.stream, pointers=pointers)
        return out

    def __call__(self):
        return self._run(False)

    def probe(self) -> tuple[object, int]:
        """(one result, the mantissa bits cuBLAS kept; -1: it ran native DGEMM instead)."""
        return self._run(True)


#: The least GPU time an energy reading is taken over: the counter steps every few tens of
#: milliseconds, so over a second one step is a few percent at most.
ENERGY_SECONDS = 1.0
ENERGY_MIN_CALLS = 3


def measure_energy(call, ms_per_call: float, flops: float, meter, seconds: float = ENERGY_SECONDS,
                   stream=0) -> dict:
    """Energy of ``call`` (one product of ``flops`` operations) from ``meter`` (an
    ``ozaki_cutlass.device.energy.EnergyCounter``): the call repeated back to back for
    ``seconds`` of GPU time or more (the count from ``ms_per_call``, its timed median; at
    least 3 calls), the counter read at the step before the loop starts and at the first
    step after it ends (so the loop's last partial period is counted, with at most one
    step of idle time). Returns {"calls", "seconds" (events around the loop), "joules",
    "watts", "gflop_per_joule", "ms_per_call"}."""
    calls = max(ENERGY_MIN_CALLS, math.ceil(1000.0 * seconds / max(ms_per_call, 1e-3)))
    timer = driver.EventTimer(stream)
    driver.synchronize(stream)
    start = meter.next_step()
    timer.start()
    for _ in range(calls):
        call()
    elapsed_ms = timer.stop()
    end = meter.next_step()
    joules = (end - start) / 1000.0
    secs = elapsed_ms / 1000.0
    return {"calls": calls, "seconds": secs, "joules": joules, "watts": joules / secs if secs > 0 else math.nan,
            "gflop_per_joule": calls * flops / 1e9 / joules if joules > 0 else math.nan,
            "ms_per_call": elapsed_ms / calls}


def sample_reference(a_rows: np.ndarray, b: np.ndarray):
    """Sampled rows of A @ B in double-double: (hi, lo)."""
    return dd_product(a_rows, b)


def sample_error(got_rows: np.ndarray, ref) -> float:
    """Normwise error of sampled rows of C against their double-double product ``ref``."""
    return normwise_error(got_rows, *ref)


def results_header(command: list[str], gpu: bool = True) -> dict:
    """The head of every results file: the UTC date, the GPU and its driver
    (:func:`gpu_identity`; left out where ``gpu`` is False: a file made from other files'
    results, or on the host alone) and ``command`` as given, shell-quoted."""
    record = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if gpu:
        name, driver_version = gpu_identity()
        record |= {"gpu": name, "driver": driver_version}
    return record | {"command": shlex.join(command)}


def write_results(path: str, fields: dict, gpu: bool = True) -> None:
    """A measuring script's results file: :func:`results_header` of the script's command
    line, then ``fields``, as JSON."""
    with open(path, "w") as f:
        json.dump(results_header(["python", *sys.argv], gpu) | fields, f, indent=1)


def write_rows(path: str, rows: list, **fields) -> None:
    """A measuring script's results file of ``rows``: :func:`write_results` with ``fields``
    (its settings) first and the rows last."""
    write_results(path, fields | {"rows": rows})


def gpu_identity(ordinal: int = 0) -> tuple[str, str]:
    """(name, driver version) of CUDA device ``ordinal`` (the one timed), from nvidia-smi,
    picked by its PCI bus id (nvidia-smi lists every GPU of the machine, in its own
    order); ("unknown", "unknown") when either cannot be asked (no driver library, no
    device, no nvidia-smi: the identity is a record's courtesy, never its failure)."""
    try:
        cu = driver.bindings()
        driver.check(cu.cuInit(0), "cuInit")  # idempotent; a file may be written before any launch
        dev = driver.check(cu.cuDeviceGet(ordinal), "cuDeviceGet")
        bus = driver.check(cu.cuDeviceGetPCIBusId(32, dev), "cuDeviceGetPCIBusId")
        bus_id = (bus.decode(errors="replace") if isinstance(bus, bytes) else str(bus)).split("\0", 1)[0]
        out = subprocess.run(["nvidia-smi", "-i", bus_id, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:  # noqa: BLE001 - CudaError, or the bindings' own types where libcuda is missing
        return "unknown", "unknown"
    return parse_gpu_identity(out)


def parse_gpu_identity(text: str) -> tuple[str, str]:
    """(name, driver) from nvidia-smi's "name, driver_version" CSV line (its first line)."""
    fields = [f.strip() for f in text.splitlines()[0].split(",")] if text.strip() else []
    if len(fields) != 2 or not all(fields):
        return "unknown", "unknown"
    return fields[0], fields[1]
