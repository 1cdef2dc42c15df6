"""GPU memory on the CPU, with the driver replaced: the workspace footprint a call asks for
(ozaki_cutlass.workspace_bytes) against what the paths really ask their workspace for, the
out-of-memory error of ours, and empty_cache. On the GPU: tests/gpu/test_memory.py."""

import itertools
import threading
import types

import numpy as np
import pytest

import ozaki_cutlass
from ozaki_cutlass.device import arrays, cublas, driver, graphs
from ozaki_cutlass.device.arrays import Matrix
from ozaki_cutlass.device.workspace import Workspace, WorkspacePool
from ozaki_cutlass.generator import Arch, Epilogue, catalog, default_variant
from ozaki_cutlass.numerics.moduli import K_CHUNK
from ozaki_cutlass.paths.footprint import batch_workspace_buffers, complex_workspace_buffers, workspace_buffers

from recorders import OnePool


class Recorder:
    def __getattr__(self, name):
        return lambda *args, **kw: None


class FakeGemm:
    def __init__(self, variant):
        self.variant = variant

    def workspace_size(self, *args):
        return 0

    def __call__(self, *args):
        pass


class CertificateRead:
    """The contract's read of its certificate: ``values`` (14 doubles), set by a test."""

    def __init__(self):
        self.values = np.zeros(14)
        self.values[10] = 1.0  # the lower bound of || |A||B| ||; every bound sum 0: the fewest moduli

    def start(self, ptr, stream=0):
        pass

    def wait(self):
        return self.values.copy()


class RecordingWorkspace:
    def __init__(self):
        self.lock = threading.Lock()
        self.asked: dict[str, int] = {}
        self.read = CertificateRead()
        self.captured = False  # what the pool gives a stream the caller captures: True

    def get(self, name, nbytes):
        self.asked[name] = max(self.asked.get(name, 0), max(nbytes, 16))
        return 1 << 30

    def moduli(self):
        return 1 << 20

    def pinned_read(self, count):
        return self.read


    def side_stream(self):
        return 7, "fork", "join"


class Dev:
    def __init__(self, shape, order="C"):
        rows, cols = shape
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f8", "data": (1 << 40, False), "version": 3,
                                         "strides": None if order == "C" else (8, 8 * rows)}


@pytest.fixture
def fake_gpu(monkeypatch):
    """Every GPU piece replaced: the call runs its orchestration into a recording workspace."""
    from ozaki_cutlass import execute
    from ozaki_cutlass.paths import fused, launch

    ws = RecordingWorkspace()
    monkeypatch.setenv("OZAKI_GRAPHS", "0")  # every call runs its orchestration (replays: tests/test_replays.py)
    cu = types.SimpleNamespace(CUresult=types.SimpleNamespace(CUDA_SUCCESS=0), CUstream=lambda s: s,
                               cuCtxGetCurrent=lambda: (0, 1), cuEventRecord=lambda *a: (0,),
                               cuStreamWaitEvent=lambda *a: (0,), cuMemsetD8Async=lambda *a: (0,))
    monkeypatch.setattr(driver, "bindings", lambda: cu)
    monkeypatch.setattr(driver, "ensure_context", lambda ordinal=0: 1)
    monkeypatch.setattr(execute, "visible_arch", lambda ordinal=0: Arch.SM90A)
    monkeypatch.setattr(execute, "allocate_like",
                        lambda kind, m, n, device: (None, Matrix(1 << 41, m, n, n, 1, "cai", 0, None)))
    monkeypatch.setattr(execute, "WORKSPACES", OnePool(ws))
    monkeypatch.setattr(launch, "load_stages", lambda arch, **kw: Recorder())
    monkeypatch.setattr(launch, "load_int8_gemm", lambda variant, **kw: FakeGemm(variant))
    monkeypatch.setattr(launch, "load_group_gemm", lambda variant, **kw: FakeGemm(variant))
    monkeypatch.setattr(launch, "load_prologue_gemm", lambda **kw: FakeGemm(default_variant("sm_80")))
    monkeypatch.setattr(fused, "load_group_gemm", lambda variant, **kw: FakeGemm(variant))
    return ws


@pytest.mark.parametrize("path, group_size, shape", [  # two k chunks on the staged path alone (the others take one)
    (path, size, shape) for path, size in (("staged", 1), ("fused", 1), ("fused", 3), ("prologue", 1))
    for shape in ((40, 24, 72), (33, 17, 5))] + [("staged", 1, (16, 8, K_CHUNK + 300))])
@pytest.mark.parametrize("mode", ["accurate", "fast"])
def test_footprint_is_what_the_paths_ask_for(fake_gpu, path, group_size, mode, shape):
    m, n, k = shape
    kernel = None
    if path == "fused":
        kernel = next(v for v in catalog("sm_90a", full=True, epilogue=Epilogue.PARTIAL_CRT)
                      if v.group_size == group_size and v.tile_k == 128)
    # both operands packed (k strided): A column-major, B row-major
    ozaki_cutlass.gemm(Dev((m, k), "F"), Dev((k, n)), moduli=13, mode=mode, path=path,
                       kernel=kernel.name if kernel else None)
    assert fake_gpu.asked == workspace_buffers(m, n, k, 13, mode, path, group_size=group_size)


class ComplexDev:
    def __init__(self, shape):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<c16", "data": (1 << 42, False), "version": 3,
                                         "strides": None}


@pytest.fixture
def complex_layer(monkeypatch):
    """The complex layer on the fake GPU: its workspace (recorded; Ahat, Bhat and T apart,
    since the real call checks that out overlaps neither) and its stage kernels."""
    from ozaki_cutlass import complex_gemm

    class Layer(RecordingWorkspace):
        def get(self, name, nbytes):
            super().get(name, nbytes)
            return (1 << 44) + (1 << 38) * ("a_hat", "b_hat", "t").index(name)

    layer = Layer()
    monkeypatch.setattr(complex_gemm, "visible_arch", lambda ordinal=0: Arch.SM90A)
    monkeypatch.setattr(complex_gemm, "load_stages", lambda arch, **kw: Recorder())
    monkeypatch.setattr(complex_gemm, "COMPLEX_WORKSPACES", OnePool(layer))
    monkeypatch.setattr(complex_gemm, "is_capturing", lambda stream: False)
    return layer


@pytest.mark.parametrize("path, mode, karatsuba, shape", [  # 2k over K_CHUNK on the staged path alone
    (path, mode, karatsuba, shape)
    for path, mode, karatsuba in (("staged", "fast", True), ("staged", "fast", False), ("staged", "accurate", True),
                                  ("fused", "fast", True))
    for shape in ((40, 24, 36), (16, 8, K_CHUNK // 2 + 300)) if path == "staged" or 2 * shape[2] <= K_CHUNK])
def test_complex_footprint_is_what_the_calls_ask_for(fake_gpu, complex_layer, monkeypatch, path, mode, karatsuba,
                                                    shape):
    """A complex call's two workspaces (the complex layer's, the realified product's,
    Karatsuba's parts among them where it runs) hold what complex_workspace_buffers says."""
    from ozaki_cutlass import complex_gemm

    m, n, k = shape
    monkeypatch.setenv("OZAKI_KARATSUBA_MIN", "0" if karatsuba else str(10**9))
    layer = complex_layer
    monkeypatch.setattr(complex_gemm, "allocate_like",
                        lambda kind, m, n, device, dtype: (None, Matrix(1 << 43, m, n, n, 1, "cai", 0, None)))
    # a conjugated A (realified into a_hat) and alpha != 1 (T apart from out): every buffer asked for
    ozaki_cutlass.gemm(ComplexDev((k, m)), ComplexDev((n, k)), trans_a="C", trans_b="T", alpha=2.0, moduli=13,
                       mode=mode, path=path)
    assert layer.asked | fake_gpu.asked == complex_workspace_buffers(m, n, k, 13, mode, path)
    assert ("ra3" in fake_gpu.asked) is (karatsuba and path == "staged" and mode == "fast")


def test_a_complex_call_into_the_callers_graph_runs_on_both_capture_workspaces(fake_gpu, complex_layer,
                                                                              monkeypatch):
    """A complex call on a stream the caller captures takes the capture workspaces of
    both pools (the complex layer's Ahat, Bhat and T, and the realified product's: the
    caller's graph keeps all their addresses; pinned from the start, as
    test_calls_captured_into_a_callers_graph_take_a_workspace_apart shows) and runs
    there. Under the accuracy contract the realified product refuses, as a real call does,
    before it launches anything."""
    from ozaki_cutlass import complex_gemm

    monkeypatch.setattr(complex_gemm, "allocate_like",
                        lambda kind, m, n, device, dtype: (None, Matrix(1 << 43, m, n, n, 1, "cai", 0, None)))
    a, b = ComplexDev((36, 40)), ComplexDev((36, 24))
    complex_layer.captured = fake_gpu.captured = True
    ozaki_cutlass.gemm(a, b, trans_a="C", alpha=2.0, moduli=13)
    assert {"a_hat", "b_hat", "t"} <= set(complex_layer.asked) and fake_gpu.asked
    fake_gpu.asked.clear()
    with pytest.raises(ValueError, match="certificate back"):
        ozaki_cutlass.gemm(a, b, trans_a="C", alpha=2.0, policy="emulate")
    assert not fake_gpu.asked


def test_the_contract_is_not_asked_on_a_stream_the_caller_captures(fake_gpu, complex_layer, monkeypatch):
    """ozaki_cutlass.contract reads its certificate back, which a capture cannot: refused
    before any launch (a complex pair before it is realified into the caller's graph)."""
    from ozaki_cutlass import api, complex_gemm

    for module in (api, complex_gemm):
        monkeypatch.setattr(module, "is_capturing", lambda stream: True)
    for a, b in ((Dev((40, 24)), Dev((24, 36))), (ComplexDev((40, 24)), ComplexDev((24, 36)))):
        with pytest.raises(ValueError, match="contract reads the certificate back.*ask outside the capture"):
            ozaki_cutlass.contract(a, b)
    assert not complex_layer.asked and not fake_gpu.asked


class Dev3:
    def __init__(self, shape, ptr, order="C"):
        batch, rows, cols = shape
        strides = None if order == "C" else (8 * rows * cols, 8, 8 * rows)
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f8", "data": (ptr, False), "version": 3,
                                         "strides": strides}


@pytest.mark.parametrize("mode", ["fast", "accurate"])
@pytest.mark.parametrize("batch, shape", [(5, (40, 24, 72)), (3, (16, 8, K_CHUNK + 300))])
def test_batch_footprint_is_what_a_batched_call_asks_for(fake_gpu, monkeypatch, mode, batch, shape):
    """A batch of emulated float64 elements runs its INT8 products together
    (paths.staged_batch) and holds what batch_workspace_buffers says."""
    from ozaki_cutlass.device import driver as drv

    m, n, k = shape
    monkeypatch.setattr(drv.bindings(), "cuMemcpyDtoDAsync", lambda *a: (0,), raising=False)
    # both operands packed (k strided): A's elements column-major, B's row-major
    ozaki_cutlass.gemm(Dev3((batch, m, k), 1 << 40, "F"), Dev3((batch, k, n), 1 << 42),
                       out=Dev3((batch, m, n), 1 << 44), moduli=13, mode=mode, path="staged")
    assert "batch_mu" in fake_gpu.asked and fake_gpu.asked == batch_workspace_buffers(batch, m, n, k, 13, mode)
    assert ozaki_cutlass.workspace_bytes(m, n, k, moduli=13, mode=mode, path="staged", batch=batch) == \
        sum(fake_gpu.asked.values())


def test_batch_workspace_bytes(monkeypatch):
    gib = 2**30
    one = ozaki_cutlass.workspace_bytes(4096, 4096, 4096, moduli=16, mode="fast", path="staged")
    # 16 x 4096^3 at 16 moduli: 16 elements' residue planes (8 GiB) and products (16 GiB) in
    # place of one's, minus what one launch takes beyond BATCH_BYTES (16 GiB): 15 per launch
    sixteen = ozaki_cutlass.workspace_bytes(4096, 4096, 4096, moduli=16, mode="fast", path="staged", batch=16)
    assert 15.2 * gib < sixteen < 15.3 * gib and sixteen > one
    assert ozaki_cutlass.workspace_bytes(4096, 4096, 4096, moduli=16, mode="fast", batch=1) == \
        ozaki_cutlass.workspace_bytes(4096, 4096, 4096, moduli=16, mode="fast")
    assert ozaki_cutlass.workspace_bytes(64, 64, 64, batch=0) == 0
    fused = ozaki_cutlass.workspace_bytes(64, 64, 64, moduli=15, path="fused", batch=9)
    assert fused == ozaki_cutlass.workspace_bytes(64, 64, 64, moduli=15, path="fused")   # one call per element
    for bad in (-1, 2.0, True):
        with pytest.raises(ValueError, match="batch must be a non-negative int"):
            ozaki_cutlass.workspace_bytes(8, 8, 8, batch=bad)


def test_complex_workspace_bytes_bounds_both_outcomes_of_karatsuba(monkeypatch):
    monkeypatch.setenv("OZAKI_KARATSUBA_MIN", "0")
    for m, n, k, mode in itertools.product((1, 100), (3, 64), (1, 200, K_CHUNK + 1), ("fast", "accurate")):
        total = ozaki_cutlass.workspace_bytes(m, n, k, moduli=15, mode=mode, dtype=np.complex128)
        for path, fits in itertools.product(("staged", "fused"), (True, False)):
            asked = complex_workspace_buffers(m, n, k, 15, mode, path, karatsuba_fits=fits)
            assert total >= sum(asked.values())
        assert total > ozaki_cutlass.workspace_bytes(m, 2 * n, 2 * k, moduli=15, mode=mode)
    # complex 16384^3, 17 moduli fast, staged: Karatsuba's parts (2 x 12.75 GiB) and one of
    # four panels' products (12.75), or, where they do not fit, the realified product's
    # residue planes (8.5 + 17) and products (34), the larger; packed Bhat (8) and the
    # complex layer's Ahat, Bhat and T (4 + 8 + 4) in both
    gib = 2**30
    monkeypatch.delenv("OZAKI_KARATSUBA_MIN")
    staged = ozaki_cutlass.workspace_bytes(16384, 16384, 16384, moduli=17, mode="fast", path="staged",
                                           dtype="complex128")
    assert 83.5 * gib < staged < 83.6 * gib
    karatsuba = complex_workspace_buffers(16384, 16384, 16384, 17, "fast", "staged", contract=True)
    assert 62.3 * gib < sum(karatsuba.values()) < 62.4 * gib and "ra" not in karatsuba
    assert ozaki_cutlass.workspace_bytes(0, 5, 5, dtype=complex) == 0
    for bad in ("float32", "int8", object()):
        with pytest.raises(ValueError, match="dtype must be float64 or complex128"):
            ozaki_cutlass.workspace_bytes(1, 2, 3, dtype=bad)


def test_workspace_bytes_bounds_every_path_and_group():
    for m, n, k, moduli, mode in itertools.product((1, 100), (3, 64), (1, 200, K_CHUNK + 1), (2, 15, 20),
                                                   ("fast", "accurate")):
        total = ozaki_cutlass.workspace_bytes(m, n, k, moduli=moduli, mode=mode)
        for path, g in (("staged", 1), ("fused", 1), ("fused", 2), ("fused", 4)):
            assert total >= sum(workspace_buffers(m, n, k, moduli, mode, path, group_size=g).values())
    assert ozaki_cutlass.workspace_bytes(0, 5, 5) == 0
    # 8192^3, 15 moduli, accurate, staged (the larger path): int32 planes 3.75 GiB,
    # residues 1.875, packed operands 1, coarse bound and magnitudes 0.375, the shifts'
    # partial column minima 16 MiB (SHIFT_PARTIALS rows of n int32), vectors ~0
    gib = 2**30
    explicit = ozaki_cutlass.workspace_bytes(8192, 8192, 8192, moduli=15)
    assert explicit == ozaki_cutlass.workspace_bytes(8192, 8192, 8192, moduli=15, path="staged")
    assert 7.015 * gib < explicit < 7.017 * gib
    # the default (the contract): up to 20 moduli in fast mode (planes 5, residues 2.5, packed
    # operands 1) and the contract's buffers (inner partials 2 x 0.75 MiB per run of 128)
    contract = ozaki_cutlass.workspace_bytes(8192, 8192, 8192)
    assert contract == ozaki_cutlass.workspace_bytes(8192, 8192, 8192, path="staged")
    assert 8.5 * gib < contract < 8.52 * gib
    with pytest.raises(ValueError, match="m must be a non-negative int"):
        ozaki_cutlass.workspace_bytes(-1, 2, 3)
    with pytest.raises(ValueError, match="path must be"):
        ozaki_cutlass.workspace_bytes(1, 2, 3, path="native")
    with pytest.raises(ValueError, match="moduli=30"):
        ozaki_cutlass.workspace_bytes(1, 2, 3, moduli=30)


class FakeAlloc:
    """cuMemAlloc that fails with out-of-memory above ``limit`` bytes in all. Addresses are
    unique across instances: an earlier test's buffer collected later frees none of ours."""

    ptrs = itertools.count(1 << 20, 1 << 20)

    def __init__(self, limit):
        self.limit, self.held, self.synced = limit, 0, 0
        self.CUresult = types.SimpleNamespace(CUDA_SUCCESS=0, CUDA_ERROR_OUT_OF_MEMORY=2)
        self.sizes = {}
        self.mode = self.GLOBAL  # this thread's stream capture mode
        self.modes = []          # (call, the mode it ran in)
        self.ids = {}            # stream handle -> the driver's id of the stream alive under it
        self.capturing = set()   # the handles of the streams being captured

    # capture modes: allocating, freeing, creating streams in global mode would end a capture
    GLOBAL, RELAXED = "global", "relaxed"
    CUstreamCaptureMode = types.SimpleNamespace(CU_STREAM_CAPTURE_MODE_RELAXED=RELAXED)

    def cuThreadExchangeStreamCaptureMode(self, mode):
        previous, self.mode = self.mode, mode
        return (0, previous)

    def cuMemAlloc(self, nbytes):
        self.modes.append(("cuMemAlloc", self.mode))
        if self.held + nbytes > self.limit:
            return (2, None)
        self.held += nbytes
        ptr = next(FakeAlloc.ptrs)
        self.sizes[ptr] = nbytes
        return (0, ptr)

    def cuMemFree(self, ptr):
        self.modes.append(("cuMemFree", self.mode))
        self.held -= self.sizes.pop(ptr, 0)  # 0: an earlier test's buffer, collected now
        return (0,)

    def cuCtxSynchronize(self):
        self.synced += 1
        return (0,)

    CU_MEMHOSTALLOC_PORTABLE = 1

    def cuMemHostAlloc(self, nbytes, flags):
        self.modes.append(("cuMemHostAlloc", self.mode))
        return (0, next(FakeAlloc.ptrs))

    def cuMemFreeHost(self, ptr):
        self.modes.append(("cuMemFreeHost", self.mode))
        return (0,)

    # streams and events, counted while alive
    CUstream_flags = types.SimpleNamespace(CU_STREAM_NON_BLOCKING=1)
    CUevent_flags = types.SimpleNamespace(CU_EVENT_DISABLE_TIMING=2)
    CUstream = int
    alive = 0

    def cuStreamCreate(self, flags):
        self.modes.append(("cuStreamCreate", self.mode))
        self.alive += 1
        return (0, next(FakeAlloc.ptrs))

    cuEventCreate = cuStreamCreate

    def cuStreamDestroy(self, handle):
        self.modes.append(("cuStreamDestroy", self.mode))
        self.alive -= 1
        self.ids.pop(handle, None)  # a stream made later with this handle gets a new id
        return (0,)

    cuEventDestroy = cuStreamDestroy

    def cuStreamGetId(self, handle):
        assert handle not in self.capturing, "cuStreamGetId ends a capture of its stream"
        return (0, self.ids.setdefault(handle, next(FakeAlloc.ptrs)))

    CUstreamCaptureStatus = types.SimpleNamespace(CU_STREAM_CAPTURE_STATUS_NONE=0, CU_STREAM_CAPTURE_STATUS_ACTIVE=1)

    def cuStreamIsCapturing(self, handle):
        return (0, int(handle in self.capturing))

    def cuMemcpyHtoDAsync(self, ptr, host, nbytes, stream):
        self.modes.append((f"cuMemcpyHtoDAsync on {'the legacy stream' if stream in (0, 1) else 'a stream'}",
                           self.mode))
        return (0,)

    def cuStreamSynchronize(self, stream):
        self.modes.append(("cuStreamSynchronize", self.mode))
        return (0,)

    def cuEventSynchronize(self, event):
        self.modes.append(("cuEventSynchronize", self.mode))
        return (0,)

    def cuCtxGetCurrent(self):
        return (0, 1)

    # graphs: a capture of our own (device.graphs.capture), instantiated and destroyed
    def cuStreamBeginCapture(self, stream, mode):
        return (0,)

    def cuStreamEndCapture(self, stream):
        return (0, next(FakeAlloc.ptrs))

    def cuGraphInstantiate(self, graph, flags):
        self.modes.append(("cuGraphInstantiate", self.mode))
        return (0, next(FakeAlloc.ptrs))

    def cuGraphDestroy(self, graph):
        self.modes.append(("cuGraphDestroy", self.mode))
        return (0,)

    def cuGraphExecDestroy(self, graph):
        self.modes.append(("cuGraphExecDestroy", self.mode))
        return (0,)


def test_out_of_memory_is_ours_and_says_what_to_do(monkeypatch):
    cu = FakeAlloc(limit=1 << 30)
    monkeypatch.setattr(driver, "bindings", lambda: cu)
    ws = Workspace()
    ws.get("ra", 1 << 29)
    with pytest.raises(ozaki_cutlass.OutOfMemoryError) as info:
        ws.get("rb", 1 << 30)
    message = str(info.value)
    assert isinstance(info.value, MemoryError)
    assert "1.00 GiB more" in message and "'rb'" in message and "0.50 GiB" in message
    assert "empty_cache()" in message and "workspace_bytes" in message
    with pytest.raises(ozaki_cutlass.OutOfMemoryError, match="2.00 GiB asked for"):
        driver.DeviceBuffer(2 << 30)
    assert ws.get("rb", 1 << 28)  # the workspace is still usable


def test_empty_cache_frees_relaxed_without_a_context_synchronize(monkeypatch):
    cu = FakeAlloc(limit=1 << 40)
    monkeypatch.setattr(driver, "bindings", lambda: cu)
    monkeypatch.setattr(driver, "ensure_context", lambda ordinal=0: 1)
    pool = WorkspacePool()
    pool.get(0, 11).get("ra", 1000)
    pool.get(0, 12).get("rb", 3000)
    pool.get(1, 11)  # holds nothing: its GPU is not touched
    assert pool.nbytes() == 4000
    assert pool.clear() == 4000 and pool.nbytes() == 0
    assert pool.clear() == 0
    assert cu.synced == 0 and {mode for call, mode in cu.modes if call == "cuMemFree"} == {cu.RELAXED}
    pool.get(0, 11).get("ra", 500)  # made again on demand
    assert pool.nbytes() == 500


@pytest.fixture
def fake_alloc(monkeypatch):
    cu = FakeAlloc(limit=1 << 30)
    monkeypatch.setattr(driver, "bindings", lambda: cu)
    monkeypatch.setattr(driver, "ensure_context", lambda ordinal=0: 1)
    return cu


def test_a_stream_per_task_keeps_at_most_so_many_workspaces_holding(fake_alloc):
    """A program that makes a stream per task: each new stream's workspace closes the least
    recently used one of its GPU beyond the pool's limit (its buffers, second stream and
    events go, and the pool forgets it), those in use (their lock held) or pinned by a
    caller's graph excepted, without touching the old streams (the caller may have
    destroyed them): cuMemFree waits for the GPU's work."""
    pool = WorkspacePool(per_device=3)
    ws = {}

    def task(stream, device=0):
        ws[stream] = pool.get(device, stream)
        ws[stream].get("ra", 1000)
        ws[stream].side_stream()  # A's and B's operands on two streams: one more stream, two events

    for stream in (11, 12, 13):
        task(stream)
    pool.get(1, 11).get("ra", 5000)  # another GPU: its own count
    pool.get(0, 11)  # used again: 12 is now the least recently used
    task(14)
    assert {s: w.nbytes for s, w in ws.items()} == {11: 1000, 12: 0, 13: 1000, 14: 1000}
    assert pool.nbytes() == 8000 and fake_alloc.held == 8000 and fake_alloc.synced == 0
    assert fake_alloc.alive == 3 * 3  # 12's stream and events destroyed

    ws[11].captured = True  # a capture workspace: pinned
    with ws[13].lock:  # a call enqueuing on stream 13
        task(15)  # 14, the one left to free, goes
    assert {s: w.nbytes for s, w in ws.items()} == {11: 1000, 12: 0, 13: 1000, 14: 0, 15: 1000}
    assert fake_alloc.alive == 3 * 3
    assert pool.get(0, 14) is not ws[14]  # forgotten: a new one


def test_a_workspace_the_replay_lane_uses_is_not_the_oldest(fake_alloc):
    """The replay lane reaches its workspace without the pool's get (paths.replay_lane):
    its touch keeps it from being closed as the least recently used; a touch of a
    workspace the pool has forgotten brings nothing back."""
    pool = WorkspacePool(per_device=2)
    lane = pool.get(0, 1)
    lane.get("ra", 1000)
    pool.get(0, 2)
    lane.touch()
    pool.get(0, 3)  # 2 goes, not the lane's
    assert pool.get(0, 1) is lane and lane.nbytes == 1000
    pool.get(0, 4)  # 3 goes
    pool.get(0, 5)  # 1 goes: the lane's, untouched since
    assert lane.nbytes == 0
    lane.touch()
    assert pool.get(0, 1) is not lane


def test_a_stream_key_the_caller_has_is_not_asked_again(fake_alloc, monkeypatch):
    """``hold`` and ``get`` given the stream's key (the replay lane's, paths.replay_lane)
    find the workspace the driver's key names without asking the driver."""
    asked = []
    ask = driver.stream_key
    monkeypatch.setattr(driver, "stream_key", lambda handle: asked.append(handle) or ask(handle))
    pool = WorkspacePool()
    ws = pool.get(0, 11)
    key = driver.stream_key(11)
    assert asked == [11, 11]
    with pool.hold(0, 11, key) as held:
        assert held is ws
    assert pool.get(0, 11, key) is ws and asked == [11, 11]
    assert pool.get(0, 12, key) is ws  # the key names the stream: the handle is not read again


def test_a_workspace_closed_before_its_lock_is_taken_is_not_used(fake_alloc):
    """Another thread's new stream may close a workspace between the pool's lookup and the
    call's lock: ``hold`` then takes another, open one (and the pool forgets the closed
    one, whether or not that thread has yet)."""
    closed = []

    class Racing(WorkspacePool):
        def get(self, device, stream, stream_key=None):
            ws = super().get(device, stream, stream_key)
            if len(closed) < 2:  # closed by the other thread right after the lookup
                ws.shed(close=True)
                closed.append(ws)
            return ws

    pool = Racing()
    with pool.hold(0, 7) as ws:
        assert ws.lock.locked() and not ws.closed and ws not in closed
        ws.get("ra", 1000)
    assert len(closed) == 2 and all(w.closed and not w.lock.locked() for w in closed)
    assert WorkspacePool.get(pool, 0, 7) is ws and not ws.lock.locked()


def test_what_a_workspace_makes_and_frees_a_capture_in_global_mode_allows(fake_alloc):
    """A caller capturing in global mode (PyTorch's default), on this thread or another,
    ends its capture at the first allocation, free or new stream of any thread in global
    mode: every such call of a workspace runs in relaxed mode (and the thread's mode comes
    back after), the moduli table's upload on a stream of its own, not the legacy stream
    (a blocking capturing stream depends on that one)."""
    pool = WorkspacePool(per_device=1)
    ws = pool.get(0, 11)
    ws.get("ra", 1000)
    ws.get("ra", 2000)  # replaced: the smaller one freed
    ws.side_stream()
    ws.capture_stream()
    ws.moduli()
    ws.drop("ra")
    ws.get("rb", 10)
    pool.get(0, 12)  # 11 closed: its buffers, table, streams and events
    assert fake_alloc.mode == fake_alloc.GLOBAL
    calls = {call for call, _ in fake_alloc.modes}
    assert calls == {"cuMemAlloc", "cuMemFree", "cuStreamCreate", "cuStreamDestroy",
                     "cuMemcpyHtoDAsync on a stream", "cuStreamSynchronize"}
    assert {mode for _, mode in fake_alloc.modes} == {fake_alloc.RELAXED}


def test_what_the_package_makes_frees_and_waits_for_anywhere_a_capture_in_global_mode_allows(fake_alloc):
    """Not only a workspace's: a NumPy operand's device copy (made and freed per call) and
    the wait for its upload, a page-locked read, a stream, an event, a wait for an event,
    a thread's cuBLAS handles and a replay graph's instantiation and destruction, made
    while another thread captures in global mode (or a replay graph destroyed inside the
    caller's own capture, where a call replaces a buffer), would end that capture: each
    runs in relaxed mode. The copy itself, on the legacy stream, is left in the thread's
    mode (CUDA lets it be)."""
    keep = []
    arrays.upload(np.ones((3, 4)), keep)
    keep.pop().close()
    driver.PinnedRead(2).close()
    driver.destroy_stream(driver.new_stream())
    event = driver.new_event()
    driver.wait_event(event)
    driver.destroy_event(event)

    def create(*args):
        fake_alloc.modes.append(("cublas create", fake_alloc.mode))
        return 1

    ignore = lambda *args: None  # noqa: E731
    blas = types.SimpleNamespace(create=create, set_pointer_mode=ignore, set_math_mode=ignore,
                                 PointerMode=types.SimpleNamespace(HOST=0), Math=types.SimpleNamespace(DEFAULT_MATH=0))
    lib = types.SimpleNamespace(lt=types.SimpleNamespace(create=create), blas=blas, call=lambda what, fn, *a: fn(*a))
    cublas.Handles(lib).blas()
    graph, _ = graphs.capture(7, lambda stream: None)
    graph.close()
    assert fake_alloc.mode == fake_alloc.GLOBAL
    by_mode = {}
    for call, mode in fake_alloc.modes:
        by_mode.setdefault(mode, set()).add(call)
    assert by_mode == {fake_alloc.RELAXED: {"cuMemAlloc", "cuMemFree", "cuMemHostAlloc", "cuMemFreeHost",
                                            "cuStreamCreate", "cuStreamDestroy", "cublas create",
                                            "cuStreamSynchronize", "cuEventSynchronize", "cuGraphInstantiate",
                                            "cuGraphDestroy", "cuGraphExecDestroy"},
                       fake_alloc.GLOBAL: {"cuMemcpyHtoDAsync on the legacy stream"}}
    assert [call for call, _ in fake_alloc.modes].count("cublas create") == 2


def test_workspaces_that_hold_nothing_are_forgotten_too(fake_alloc):
    """A thread per task whose workspace holds no buffer (its second stream and events
    only, say): the pool keeps at most its limit of workspaces per GPU all the same."""
    pool = WorkspacePool(per_device=2)
    first = pool.get(0, 1)
    first.side_stream()
    pool.get(0, 2)
    assert pool.get(0, 1) is first
    pool.get(0, 3)  # 2, the least recently used, goes
    assert fake_alloc.alive == 3
    pool.get(0, 4)  # 1 goes
    assert fake_alloc.alive == 0 and pool.get(0, 1) is not first  # its stream and events destroyed


def test_out_of_memory_frees_the_idle_other_workspaces_first(fake_alloc):
    pool = WorkspacePool()
    idle, busy, asking = pool.get(0, 11), pool.get(0, 12), pool.get(0, 13)
    idle.get("ra", 400 << 20)
    busy.get("ra", 400 << 20)
    pool.get(1, 11).get("ra", 100 << 20)  # another GPU's: not freed for this one
    with busy.lock:
        assert asking.get("rb", 500 << 20)
    assert idle.nbytes == 0 and busy.nbytes == 400 << 20 and pool.get(1, 11).nbytes == 100 << 20
    with busy.lock, pytest.raises(ozaki_cutlass.OutOfMemoryError, match="'rc'"):
        asking.get("rc", 300 << 20)  # nothing idle left to free


@pytest.mark.parametrize("path, group_size", [("staged", 1), ("fused", 1), ("fused", 3)])
@pytest.mark.parametrize("shape", [(40, 24, 72), (33, 17, 5)])
def test_footprint_of_a_contract_call(fake_gpu, monkeypatch, path, group_size, shape):
    """A call without moduli runs the contract's stages first: their buffers, then the
    chosen count's (a certificate of zero sums: the fewest moduli, 8, in fast mode)."""
    from ozaki_cutlass.numerics.contract import CONTRACT_MODULI

    m, n, k = shape
    kernel = None
    if path == "fused":
        kernel = next(v for v in catalog("sm_90a", full=True, epilogue=Epilogue.PARTIAL_CRT)
                      if v.group_size == group_size and v.tile_k == 128)
    ozaki_cutlass.gemm(Dev((m, k), "F"), Dev((k, n)), path=path, kernel=kernel.name if kernel else None)
    count = CONTRACT_MODULI[0]
    assert fake_gpu.asked == workspace_buffers(m, n, k, count, "fast", path, group_size=group_size, contract=True)


def test_the_per_thread_default_stream_has_a_workspace_per_thread(fake_alloc):
    """Handle 2 (CU_STREAM_PER_THREAD, CuPy's Stream.ptds) is a different stream in every
    thread: two threads on it must not share buffers their kernels may still be using.
    Any other handle is one stream whichever thread asks."""
    pool = WorkspacePool()
    got = {}

    def ask(name):
        got[name] = (pool.get(0, driver.PER_THREAD_STREAM), pool.get(0, 77), pool.get(0, 0))

    threads = [threading.Thread(target=ask, args=(name,)) for name in ("t1", "t2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got["t1"][0] is not got["t2"][0]
    assert got["t1"][1] is got["t2"][1] and got["t1"][2] is got["t2"][2]
    assert got["t1"][0] is not got["t1"][1]


def test_a_stream_made_with_a_destroyed_streams_handle_has_a_workspace_of_its_own(fake_alloc):
    """The driver hands a destroyed stream's handle to a stream made later: the pool knows
    streams by the driver's id, so the new stream does not inherit the old one's workspace,
    which a caller's graph captured on the old stream may still use (pinned)."""
    pool = WorkspacePool()
    old = pool.get(0, 11)
    old.get("ra", 1000)
    old.captured = True  # pinned, as a capture workspace
    assert pool.get(0, 11) is old  # the same stream: the same workspace
    fake_alloc.cuStreamDestroy(11)  # the caller destroys it; a new stream comes with its handle
    new = pool.get(0, 11)
    assert new is not old and not new.captured and new.nbytes == 0
    assert pool.get(0, 11) is new and old.nbytes == 1000
    assert pool.get(0, 0) is pool.get(0, 1)  # the legacy default stream, spelled either way


def test_calls_captured_into_a_callers_graph_take_a_workspace_apart(fake_alloc):
    """A stream's id cannot be read while it is captured (the read ends the capture: the
    fake asserts it is never asked): captured calls take the capture workspace of the
    handle, apart from the stream's own, so later direct calls on the stream never share
    the buffers the caller's graph keeps; every capture on that handle shares it."""
    pool = WorkspacePool()
    own = pool.get(0, 11)
    fake_alloc.capturing.add(11)
    captured = pool.get(0, 11)
    assert captured is not own and pool.get(0, 11) is captured
    assert captured.captured and not own.captured
    captured.get("ra", 1000)
    assert pool.clear() == 0 and captured.nbytes == 1000  # the caller's graph keeps it
    per_thread = pool.get(0, driver.PER_THREAD_STREAM)  # not captured: its own
    fake_alloc.capturing.discard(11)
    assert pool.get(0, 11) is own
    fake_alloc.capturing.add(11)  # a second capture on that handle
    assert pool.get(0, 11) is captured
    fake_alloc.capturing.add(driver.PER_THREAD_STREAM)
    assert pool.get(0, driver.PER_THREAD_STREAM) is not per_thread


class _DevOnStream:
    """A CUDA array interface v3 object whose producer works on ``stream``."""

    def __init__(self, shape, ptr, stream, typestr="<f8"):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False), "version": 3,
                                         "strides": None, "stream": stream}


def _device_array(ptr, shape, dtype, stream):
    from ozaki_cutlass.device.arrays import DeviceArray

    d = DeviceArray.__new__(DeviceArray)
    d.shape, d.dtype, d.device, d.stream = shape, np.dtype(dtype), 0, stream
    d._buf = types.SimpleNamespace(ptr=ptr)
    return d


def test_the_call_waits_for_outs_producer_too(fake_gpu, monkeypatch):
    """out's v3 stream may still be writing or reading it: the call's stream waits for it,
    as for a, b and c."""
    seen = []
    monkeypatch.setattr(driver, "order_after", lambda producer, consumer: seen.append((producer, consumer)))
    m, n, k = 16, 8, 24
    ozaki_cutlass.gemm(_DevOnStream((m, k), 1 << 40, 11), _DevOnStream((k, n), 1 << 41, 12),
                       out=_DevOnStream((m, n), 1 << 42, 13), moduli=13, stream=55)
    assert {(11, 55), (12, 55), (13, 55)} <= set(seen)


def test_a_complex_call_says_which_stream_wrote_its_out(fake_gpu, complex_layer, monkeypatch):
    """A DeviceArray out of a complex call carries the call's stream afterwards (get(),
    __dlpack__ and __cuda_array_interface__ wait for it), as a real call's does."""
    monkeypatch.setattr(driver, "order_after", lambda producer, consumer: None)  # no events on the fake GPU
    m, n, k = 16, 8, 24
    for alpha in (1.0, 2.0):   # the real call writes out itself; complex_axpby writes it
        out = _device_array(1 << 45, (m, n), np.complex128, 0)
        ozaki_cutlass.gemm(ComplexDev((m, k)), ComplexDev((k, n)), out=out, alpha=alpha, moduli=13, stream=55)
        assert out.stream == 55, alpha



class _ComplexDevAt:
    def __init__(self, shape, ptr):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<c16", "data": (ptr, False), "version": 3,
                                         "strides": None}


@pytest.mark.parametrize("beta", [1.0, 0.0])
def test_a_complex_out_may_be_c_itself_as_a_real_ones(fake_gpu, complex_layer, monkeypatch, beta):
    """out over c's memory in c's layout (another object of it: each batch element is one)
    is taken, as on the real path; with beta == 0, c is not read, any layout. Complex
    calls compared the two whole descriptions, owners included, and refused it."""
    monkeypatch.setattr(driver, "order_after", lambda producer, consumer: None)
    m, n, k = 16, 8, 24
    a, b = _ComplexDevAt((m, k), 1 << 40), _ComplexDevAt((k, n), 1 << 41)
    ozaki_cutlass.gemm(a, b, c=_ComplexDevAt((m, n), 1 << 43), out=_ComplexDevAt((m, n), 1 << 43), beta=beta,
                       moduli=13)
    c3 = _ComplexDevAt((2, m, n), 1 << 43)
    ozaki_cutlass.gemm(_ComplexDevAt((2, m, k), 1 << 40), _ComplexDevAt((2, k, n), 1 << 41), c=c3, out=c3, beta=beta,
                       moduli=13)
