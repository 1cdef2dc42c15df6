"""The replay lane (paths.replay_lane) on the CPU: which calls may take it, what a replayed
call leaves for later ones (execute._emulate), and what a call through the lane launches
(the graph, then its own finish on a new output), with the graph and the workspace
replaced. The GPU's side, with the reference's bits: tests/gpu/test_replays_gpu.py."""

import threading
import types

import pytest

from ozaki_cutlass import dispatch, execute
from ozaki_cutlass.device.graphs import Replays
from ozaki_cutlass.dispatch.policy import DECISIONS
from ozaki_cutlass.paths import replay_lane as RL
from ozaki_cutlass.paths.launch import PhaseTimer

from recorders import OnePool
from test_memory import FakeAlloc
from test_replays import CAPTURE, KERN, MAIN, FakeGraph, launch

LANE = ("replay", "a key of the caller's arrays")
PRIMARY = 0x7000  # the GPU's primary context in these tests

SETTINGS = dict(c=None, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, moduli=15, mode=None,
                kernel=None, path=None, policy="auto", stream=None, timings=None, accuracy=None)


def test_the_calls_that_may_take_the_lane():
    assert RL.lane_settings(**SETTINGS) == (15, None, None, "auto")
    assert RL.lane_settings(**(SETTINGS | dict(mode="fast", path="fused", policy="emulate", alpha=-2.0))) == (
        15, "fast", "fused", "emulate")
    # an out is part of the arrays' key (replay_lane), not of the settings
    assert RL.lane_settings(**(SETTINGS | dict(out=object()))) == (15, None, None, "auto")


@pytest.mark.parametrize("change", [
    dict(moduli=None), dict(moduli=15.0), dict(moduli=True), dict(c=object()),
    dict(alpha=0.0), dict(beta=0.5), dict(trans_a=True), dict(trans_b="N"), dict(trans_a=0), dict(kernel="k"),
    dict(stream=0), dict(timings={}), dict(accuracy="dgemm"), dict(policy="native"), dict(mode=["fast"]),
    dict(path=["fused"]), dict(policy=["auto"]),
])
def test_the_calls_that_take_the_general_path(change):
    """The contract's calls, those that read c or write out, zero_result's (alpha 0), and
    any setting the lane's key does not hold in the form the general path accepted."""
    assert RL.lane_settings(**(SETTINGS | change)) is None


def test_arrays_of_no_framework_have_no_lane():
    class Array:
        pass

    assert RL.replay_lane(Array(), Array(), None, 1.0, (15, None, None, "auto")) == (None, None)
    assert RL.replay_lane(Array(), object(), None, 1.0, (15, None, None, "auto")) == (None, None)
    assert RL.replay_lane(Array(), Array(), object(), 1.0, (15, None, None, "auto")) == (None, None)


# -- what a replayed call leaves ---------------------------------------------------------

@pytest.fixture
def world(monkeypatch):
    """execute._emulate on a workspace whose graphs are recorded, its path replaced; the
    lanes of this test only."""
    DECISIONS.clear()
    log = []
    ws = types.SimpleNamespace(lock=threading.Lock(), capture_stream=lambda: CAPTURE, touched=0, captured=False)
    ws.touch = lambda: setattr(ws, "touched", ws.touched + 1)
    ws.replays = Replays(capture_graph=lambda stream, work: (FakeGraph(log, [stream]), work(stream)))

    def run(kern, L, ws, timer, overlap):
        log.append(("run", L.stream))
        return lambda C: log.append(("finish", C.stream, C.O.ptr, C.O.rs, C.O.cs, C.alpha, C.A.ptr, C.k))

    pool = OnePool(ws)
    monkeypatch.setattr(execute, "WORKSPACES", pool)
    monkeypatch.setattr(execute, "_RUNS", {"fused": run})
    context = [PRIMARY]   # the context current on the thread
    monkeypatch.setattr(RL.driver, "primary_context", lambda ordinal: PRIMARY)
    monkeypatch.setattr(RL.driver, "current_context", lambda: context[0])

    def call(lane=LANE, **kw):
        log.clear()
        execute._emulate(KERN, launch(stream=MAIN, **kw), 3, PhaseTimer(MAIN, False), None, False, lane)
        return list(log)

    def through_lane(alpha=1.0, ptr=11 << 32):
        log.clear()
        entry = DECISIONS.lanes.get(LANE)
        allocated = []

        def allocate():
            allocated.append(ptr)
            return "result", ptr
        result = None if entry is None else RL._replay(entry, alpha, allocate)
        return result, allocated, list(log)

    yield types.SimpleNamespace(call=call, through_lane=through_lane, ws=ws, log=log, context=context, pool=pool)
    DECISIONS.clear()


def test_a_direct_run_leaves_no_lane(world):
    world.call()
    assert LANE not in DECISIONS.lanes


@pytest.mark.parametrize("calls", [2, 3])
def test_a_captured_or_replayed_call_leaves_its_lane(world, calls):
    for _ in range(calls):
        world.call()
    entry = DECISIONS.lanes[LANE]
    L = launch(stream=MAIN)
    assert (entry.ws, entry.device, entry.stream, entry.overlap, entry.context) == (world.ws, 3, MAIN, True, PRIMARY)
    assert entry.key in world.ws.replays._graphs
    # the call's launch without the arrays (the lane must not keep the caller's alive)
    assert entry.launch.A == L.A and entry.launch.B == L.B and entry.launch.O.ptr == L.O.ptr
    assert entry.launch.A.owner is entry.launch.B.owner is entry.launch.O.owner is None


def test_a_lane_miss_takes_its_workspace_by_the_lanes_stream_key(world):
    """The lane key holds the current stream's key (driver.stream_key, 3.4 us to ask): the
    general path finds its workspace with it instead of asking the driver again; a call
    without a lane key leaves the pool to ask."""
    stream_key = ("id", 77)
    world.call(lane=("replay", "the caller's arrays", stream_key, (15, None, None, "auto")))
    world.call(lane=None)
    assert world.pool.keys == [stream_key, None]


def test_calls_without_a_lane_key_leave_none(world):
    for _ in range(3):
        world.call(lane=None)
    assert not DECISIONS.lanes


def test_through_the_lane_the_graph_then_the_calls_own_finish(world):
    world.call()
    world.call()
    before = dict(world.ws.replays.counts)
    result, allocated, log = world.through_lane(alpha=-2.5)
    assert result == "result" and allocated == [11 << 32]
    L = launch()
    assert log == [("launch", MAIN, (CAPTURE,)), ("finish", MAIN, 11 << 32, L.O.rs, L.O.cs, -2.5, L.A.ptr, L.k)]
    assert world.ws.replays.counts["replayed"] == before["replayed"] + 1
    assert world.ws.touched == 1  # the pool's most recently used (the general path's get does it there)


def test_a_graph_gone_sends_the_call_to_the_general_path(world):
    """Nothing is launched or allocated; the general path's next replay learns the lane again."""
    world.call()
    world.call()
    world.ws.replays.clear()  # a workspace buffer freed or replaced
    assert world.through_lane() == (None, [], []) and world.ws.touched == 0
    world.call()
    world.call()
    assert world.through_lane()[0] == "result"


@pytest.mark.parametrize("setting, value", [("OZAKI_GRAPHS", "0"), ("OZAKI_OVERLAP", "0")])
def test_settings_that_send_the_call_to_the_general_path(world, monkeypatch, setting, value):
    """Graphs turned off, or the overlap setting other than when the lane was learned
    (the fixture's calls ran with it on, the default)."""
    world.call()
    world.call()
    monkeypatch.setenv(setting, value)
    assert world.through_lane() == (None, [], [])


class _Tensor:
    """What the torch lane reads of a CUDA tensor."""

    shape, dtype, requires_grad = (8, 8), "float64", False

    def __init__(self, ptr):
        self.ptr = ptr

    def get_device(self):
        return 0

    def stride(self):
        return (8, 1)

    def data_ptr(self):
        return self.ptr

    def new_empty(self, shape):
        return _Tensor(9 << 32)


def test_under_the_callers_capture_the_general_path(world, monkeypatch):
    """The lane key of a call on a stream being captured names the capture
    (driver.stream_key), which no call learns: the general path takes it."""
    cu = FakeAlloc(limit=0)  # its cuStreamGetId fails the test on a stream being captured
    monkeypatch.setattr(RL.driver, "bindings", lambda: cu)
    world.call()
    world.call()
    a, b = _Tensor(1 << 32), _Tensor(2 << 32)
    lane = lambda: RL._torch_lane(lambda: 0, lambda device: 0x5000, a, b, None, 1.0, (15, None, None, "auto"))
    key, result = lane()
    assert result is None  # nothing learned under it yet
    DECISIONS.remember_lane(key, DECISIONS.lanes[LANE])
    assert lane()[1] is not None  # the learned lane: launched
    cu.capturing.add(0x5000)
    captured_key, result = lane()
    assert captured_key != key and result is None and captured_key not in DECISIONS.lanes


@pytest.mark.parametrize("current", [0x7100, 0])
def test_under_another_context_the_general_path(world, current):
    """A context of the caller's own current, or none: the graph belongs to the primary
    context, which the general path makes current for the call."""
    world.call()
    world.call()
    world.context[0] = current
    assert world.through_lane() == (None, [], [])
    world.context[0] = PRIMARY
    assert world.through_lane()[0] == "result"


def test_forgetting_the_tables_forgets_the_lanes(world):
    world.call()
    world.call()
    dispatch.forget_tables()
    assert LANE not in DECISIONS.lanes


def test_a_type_that_only_names_a_framework_has_no_lane():
    """A class whose module says cupy or torch where neither is installed (test doubles)."""
    for module in ("cupy._core", "torch"):
        kind = type("Array", (), {"__module__": module})
        assert RL.replay_lane(kind(), kind(), None, 1.0, ()) == (None, None)
