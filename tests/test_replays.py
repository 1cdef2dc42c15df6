"""A repeated call's launches kept as a CUDA graph (device.graphs.Replays, execute's
_run_or_replay, paths.launch.replay_key), on the CPU with the capture replaced: when a
call runs directly, is captured or replayed, what makes two calls the same, and that
each call's own finish follows. The bits and the GPU's side: tests/gpu/test_replays_gpu.py."""

import contextlib
import threading
import types

import pytest

from ozaki_cutlass import execute
from ozaki_cutlass.device import workspace as W
from ozaki_cutlass.device.arrays import Matrix
from ozaki_cutlass.device.graphs import Replays
from ozaki_cutlass.paths.launch import Launch, PhaseTimer, replay_key

from recorders import OnePool

MAIN, CAPTURE = 7, 99


class FakeGraph:
    def __init__(self, log, recorded):
        self.log, self.recorded, self.closed = log, recorded, False

    def launch(self, stream):
        assert not self.closed
        self.log.append(("launch", stream, tuple(self.recorded)))

    def close(self):
        self.closed = True


class World:
    """A Replays whose capture records what ``work`` enqueues instead of running it."""

    def __init__(self, fail=False, during=None):
        self.log, self.graphs = [], []
        self.fail, self.during = fail, during
        self.replays = Replays(capacity=2, capture_graph=self.capture)

    def capture(self, stream, work):
        recorded = []
        self.capturing = recorded
        try:
            work(stream)
        finally:
            self.capturing = None
        if self.during is not None:
            self.during()
        if self.fail:
            raise RuntimeError("capture refused")
        g = FakeGraph(self.log, recorded)
        self.graphs.append(g)
        return g, ("finish of", key_of(recorded))

    capturing = None

    def call(self, key, raises=False):
        def work(stream):
            if raises:
                raise ValueError("bad call")
            if self.capturing is not None:
                self.capturing.append((key, stream))
            else:
                self.log.append(("run", key, stream))
            return ("finish of", key)

        self.log.clear()
        how, result = self.replays.run(key, MAIN, lambda: CAPTURE, work)
        assert result == ("finish of", key)  # what the work returned, kept with its graph
        return how, list(self.log)


def key_of(recorded):
    return recorded[0][0] if recorded else None


def test_direct_then_captured_then_replayed():
    w = World()
    assert w.call("k") == ("direct", [("run", "k", MAIN)])
    assert w.call("k") == ("captured", [("launch", MAIN, (("k", CAPTURE),))])  # captured on its own stream
    for _ in range(3):
        assert w.call("k") == ("replayed", [("launch", MAIN, (("k", CAPTURE),))])
    assert w.replays.counts == {"direct": 1, "captured": 1, "replayed": 3}


def test_replay_launches_only_a_held_graph():
    """What the replay lane (paths.replay_lane) calls: a key without a graph launches
    nothing and is not remembered; a held one launches as run() would."""
    w = World()
    assert w.replays.replay("k", MAIN) == (False, None)
    assert w.log == [] and w.call("k")[0] == "direct"  # the miss left no trace: a first call
    w.call("k")
    w.log.clear()
    assert w.replays.replay("k", 5) == (True, ("finish of", "k"))
    assert w.log == [("launch", 5, (("k", CAPTURE),))]
    assert w.replays.counts == {"direct": 1, "captured": 1, "replayed": 1}


def test_keys_are_apart():
    w = World()
    w.call("a")
    assert w.call("b")[0] == "direct"
    assert w.call("a")[0] == "captured"
    assert w.call("b")[0] == "captured"
    assert len(w.replays) == 2


def test_a_call_that_raised_is_not_remembered():
    w = World()
    with pytest.raises(ValueError):
        w.call("k", raises=True)
    assert w.call("k")[0] == "direct"
    assert w.call("k")[0] == "captured"


def test_a_failed_capture_runs_directly_and_is_not_tried_again():
    w = World(fail=True)
    w.call("k")
    assert w.call("k") == ("direct", [("run", "k", MAIN)])
    w.fail = False
    for _ in range(3):
        assert w.call("k") == ("direct", [("run", "k", MAIN)])
    assert w.graphs == []


def test_a_workspace_change_during_the_capture_discards_the_graph():
    """The graph may read a buffer freed since: it goes, the call runs directly, and the
    next call is captured again."""
    w = World()
    w.during = w.replays.clear
    w.call("k")
    assert w.call("k") == ("direct", [("run", "k", MAIN)])
    assert len(w.graphs) == 1 and w.graphs[0].closed and len(w.replays) == 0
    w.during = None
    assert w.call("k")[0] == "captured"
    assert w.call("k")[0] == "replayed"


def test_clear_frees_every_graph_and_forgets_every_key():
    w = World()
    for _ in range(3):
        w.call("k")
    w.replays.clear()
    assert w.graphs[0].closed and len(w.replays) == 0
    assert w.call("k")[0] == "direct"


def test_the_least_recently_launched_graph_goes_first():
    w = World()
    for key in ("a", "b", "a", "b"):
        w.call(key)
    w.call("a")  # a replayed: b is now the oldest
    w.call("c")
    w.call("c")
    assert len(w.replays) == 2
    assert [g.closed for g in w.graphs] == [False, True, False]
    assert w.call("a")[0] == "replayed"
    assert w.call("b")[0] == "direct"


# -- what makes two calls the same ----------------------------------------------------

def matrix(ptr, rows, cols, rs=None, cs=1):
    return Matrix(ptr, rows, cols, cols if rs is None else rs, cs, "cupy", 0, None)


def launch(**kw):
    m, n, k = kw.pop("shape", (64, 48, 32))
    base = dict(A=matrix(1 << 32, m, k), B=matrix(2 << 32, k, n), C=None, O=matrix(3 << 32, m, n), m=m, n=n,
                k=k, alpha=1.0, beta=0.0, moduli=15, mode="accurate", stream=0)
    return Launch(**(base | kw))


KERN = types.SimpleNamespace(path="fused", variant="v1")


@pytest.mark.parametrize("change", [
    dict(stream=5), dict(O=matrix(6 << 32, 64, 48)), dict(O=matrix(6 << 32, 64, 48, rs=1, cs=64)),
    dict(C=matrix(4 << 32, 64, 48), beta=1.0), dict(alpha=-2.0), dict(beta=-0.0),
])
def test_what_the_finish_takes_from_the_call(change):
    """The output, c, alpha and beta are the finish's (launched per call after the
    graph): they do not change the key; neither does the stream (the Replays' own)."""
    assert replay_key(KERN, launch(**change), True) == replay_key(KERN, launch(), True)


@pytest.mark.parametrize("change", [
    dict(A=matrix(5 << 32, 64, 32)), dict(A=matrix(1 << 32, 64, 32, rs=40)), dict(B=matrix(2 << 32, 32, 48, rs=1, cs=32)),
    dict(moduli=16), dict(mode="fast"), dict(shape=(64, 48, 16)), dict(shape=(32, 48, 32)),
])
def test_what_changes_a_call(change):
    assert replay_key(KERN, launch(**change), True) != replay_key(KERN, launch(), True)


def test_kernels_and_overlap_change_a_call():
    key = replay_key(KERN, launch(), True)
    assert replay_key(types.SimpleNamespace(path="staged", variant="v1"), launch(), True) != key
    assert replay_key(types.SimpleNamespace(path="fused", variant="v2"), launch(), True) != key
    assert replay_key(KERN, launch(), False) != key


@pytest.mark.parametrize("kw", [dict(prepared={"a": object()}), dict(prescan=object()), dict(realified=True)])
def test_calls_never_replayed(kw):
    assert replay_key(KERN, launch(**kw), True) is None
    assert replay_key(types.SimpleNamespace(path="prologue", variant="p"), launch(), True) is None


# -- execute: which calls go through the replays ----------------------------------------

@pytest.fixture
def emulate(monkeypatch):
    """execute._emulate with its workspaces' captures and the path replaced. The stream's
    workspace is ``ws``; while the caller captures the stream (``capturing[0]``), the pool
    gives the capture workspace, ``captured`` (device.workspace: pinned from the start)."""
    log = []

    def workspace(captured):
        ws = types.SimpleNamespace(lock=threading.Lock(), capture_stream=lambda: CAPTURE, captured=captured)
        ws.replays = Replays(capture_graph=lambda stream, work: (FakeGraph(log, [stream]), work(stream)))
        return ws

    def run(kern, L, ws, timer, overlap):
        log.append(("run", L.stream))
        return lambda C: log.append(("finish", C.stream, C.O.ptr, C.alpha))

    ws, captured, capturing = workspace(False), workspace(True), [False]
    pools = {False: OnePool(ws), True: OnePool(captured)}
    def hold(device, stream, stream_key=None):
        return pools[capturing[0]].hold(device, stream, stream_key)

    monkeypatch.setattr(execute, "WORKSPACES", types.SimpleNamespace(hold=hold))
    monkeypatch.setattr(execute, "_RUNS", {"fused": run})

    def call(timings=False, **kw):
        log.clear()
        execute._emulate(KERN, launch(stream=MAIN, **kw), 0, PhaseTimer(MAIN, timings), None, False)
        return list(log)

    return types.SimpleNamespace(call=call, capturing=capturing, ws=ws, captured=captured)


O = 3 << 32


def test_a_repeated_call_is_replayed_then_finished_on_its_own_output(emulate):
    assert emulate.call() == [("run", MAIN), ("finish", MAIN, O, 1.0)]
    assert emulate.call() == [("run", CAPTURE), ("launch", MAIN, (CAPTURE,)), ("finish", MAIN, O, 1.0)]
    assert emulate.call() == [("launch", MAIN, (CAPTURE,)), ("finish", MAIN, O, 1.0)]
    other = matrix(9 << 32, 64, 48)
    assert emulate.call(O=other, alpha=-3.0) == [("launch", MAIN, (CAPTURE,)), ("finish", MAIN, other.ptr, -3.0)]


def test_timings_always_run(emulate):
    for _ in range(3):
        assert emulate.call(timings=True) == [("run", MAIN), ("finish", MAIN, O, 1.0)]
    assert emulate.ws.replays.counts["direct"] == 0  # not even counted: the replays never saw them


def test_graphs_off(emulate, monkeypatch):
    monkeypatch.setenv("OZAKI_GRAPHS", "0")
    for _ in range(3):
        assert emulate.call() == [("run", MAIN), ("finish", MAIN, O, 1.0)]


def test_under_the_callers_own_capture(emulate):
    """The call runs straight into the caller's capture (never through a graph of ours),
    on the stream's capture workspace, whose buffers the caller's graph keeps; a call
    under the accuracy contract is refused there (it reads its certificate back). The
    stream's own replays go on as before."""
    emulate.call()
    emulate.capturing[0] = True
    for _ in range(2):
        assert emulate.call() == [("run", MAIN), ("finish", MAIN, O, 1.0)]
    assert emulate.captured.replays.counts["direct"] == 0  # not even counted: the replays never saw them
    with pytest.raises(ValueError, match="under the accuracy contract reads its certificate back.*pass moduli="):
        execute._emulate(KERN, launch(stream=MAIN), 0, PhaseTimer(MAIN, False), 2.0**-53, False)
    emulate.capturing[0] = False
    assert emulate.call()[0] == ("run", CAPTURE)  # the stream's second call of the key: captured by us


def test_prepared_calls_run(emulate):
    for _ in range(3):
        assert emulate.call(prepared={"a": object()}) == [("run", MAIN), ("finish", MAIN, O, 1.0)]


# -- the workspace clears its replays when a buffer goes --------------------------------

class FakeBuffer:
    next_ptr = 1 << 40

    def __init__(self, nbytes):
        self.nbytes, self.ptr = nbytes, FakeBuffer.next_ptr
        FakeBuffer.next_ptr += 1 << 30

    def close(self):
        pass


def test_a_replaced_or_dropped_buffer_clears_the_replays(monkeypatch):
    monkeypatch.setattr(W.driver, "DeviceBuffer", FakeBuffer)
    monkeypatch.setattr(W.driver, "relaxed_capture", contextlib.nullcontext)  # no driver here
    ws = W.Workspace()
    cleared = []
    monkeypatch.setattr(ws.replays, "clear", lambda: cleared.append(1))
    ws.get("x", 100)
    ws.get("y", 100)
    ws.get("x", 50)  # fits: kept
    assert cleared == []
    ws.get("x", 200)  # replaced
    assert cleared == [1]
    ws.drop("nothing")
    assert cleared == [1]
    ws.drop("y")
    assert cleared == [1, 1]


def test_a_pinned_workspace_keeps_every_buffer(monkeypatch):
    """A capture workspace (a caller's graph keeps its buffers' addresses) is pinned from
    the start: no buffer is freed, a replaced or dropped one is kept, and release
    (empty_cache) frees nothing there."""
    closed = []

    class Buffer(FakeBuffer):
        def close(self):
            closed.append(self.ptr)

    monkeypatch.setattr(W.driver, "DeviceBuffer", Buffer)
    monkeypatch.setattr(W.driver, "relaxed_capture", contextlib.nullcontext)  # no driver here
    ws = W.Workspace(captured=True)
    first = ws.get("x", 100)
    ws.get("y", 100)
    ws.get("x", 200)   # replaced
    ws.drop("y")       # dropped
    assert closed == [] and ws.nbytes == 100 + 100 + 200
    assert ws.release() == 0 and closed == [] and first not in closed
    unpinned = W.Workspace()
    unpinned.get("x", 100)
    unpinned.get("x", 200)
    assert len(closed) == 1
