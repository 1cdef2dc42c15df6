"""A repeated call replays its launches as a CUDA graph (device.graphs): the same bits as
the reference on every call, new values in the same buffers, after the workspace
changes, under the caller's own capture. The policy on the CPU: tests/test_replays.py."""

import threading

import numpy as np
import pytest

import ozaki_cutlass
from ozaki_cutlass import reference
from ozaki_cutlass.device.workspace import WORKSPACES, WORKSPACES_PER_DEVICE
from ozaki_cutlass.numerics.accuracy import random_matrix, same_bits

pytestmark = pytest.mark.gpu

cp = pytest.importorskip("cupy")


def counts(stream) -> dict:
    return dict(WORKSPACES.get(0, stream.ptr).replays.counts)


def delta(before, after) -> dict:
    return {key: after[key] - before[key] for key in after}


@pytest.fixture
def stream():
    s = cp.cuda.Stream(non_blocking=True)
    yield s
    s.synchronize()


@pytest.mark.parametrize("path", ["staged", "fused"])
@pytest.mark.parametrize("mode", ["fast", "accurate"])
def test_repeated_calls_replay_with_the_reference_bits(rng, stream, path, mode):
    m, n, k = 129, 77, 300
    a, b = random_matrix(m, k, 1.0, rng), random_matrix(k, n, 1.0, rng)
    c = random_matrix(m, n, 1.0, rng)
    want = reference.gemm(a, b, c=c, alpha=-1.5, beta=0.25, moduli=15, mode=mode)
    before = counts(stream)
    with stream:  # every array's work on the call's stream
        da, db, dc = cp.asarray(a), cp.asarray(b), cp.asarray(c)
        out = cp.empty((m, n))
        for _ in range(4):
            out.fill(cp.nan)
            got = ozaki_cutlass.gemm(da, db, c=dc, alpha=-1.5, beta=0.25, moduli=15, mode=mode, path=path, out=out)
            assert got is out and same_bits(cp.asnumpy(out), want)
    assert delta(before, counts(stream)) == {"direct": 1, "captured": 1, "replayed": 2}


def test_new_values_in_the_same_buffers(rng, stream):
    """A graph reads the arrays when it runs: values written in place, NaN and Inf
    among them, give the new product (the pattern is decided on the device)."""
    m, n, k = 64, 96, 200
    before = counts(stream)
    with stream:
        da, db = cp.empty((m, k)), cp.empty((k, n))
        out = cp.empty((m, n))
        for i in range(5):
            a, b = random_matrix(m, k, 0.5 + i, rng), random_matrix(k, n, 0.5 + i, rng)
            if i == 3:
                a[5, 7], b[11, 40] = np.nan, -np.inf
            da.set(a)
            db.set(b)
            ozaki_cutlass.gemm(da, db, moduli=16, out=out)
            assert same_bits(cp.asnumpy(out), reference.gemm(a, b, moduli=16)), i
    assert delta(before, counts(stream)) == {"direct": 1, "captured": 1, "replayed": 3}


def test_after_the_workspace_grows_or_is_freed(rng, stream):
    """A larger call replaces workspace buffers the graphs read; empty_cache frees them:
    the graphs go, and the calls after are right (and captured again)."""
    small = [random_matrix(50, 70, 1.0, rng), random_matrix(70, 40, 1.0, rng)]
    large = [random_matrix(300, 900, 1.0, rng), random_matrix(900, 200, 1.0, rng)]
    dsmall, dlarge = [cp.asarray(x) for x in small], [cp.asarray(x) for x in large]
    want_small, want_large = reference.gemm(*small, moduli=15), reference.gemm(*large, moduli=15)
    replays = WORKSPACES.get(0, stream.ptr).replays
    with stream:
        out_s, out_l = cp.empty((50, 40)), cp.empty((300, 200))
        for _ in range(3):
            ozaki_cutlass.gemm(*dsmall, moduli=15, out=out_s, path="fused")
        assert len(replays) == 1
        ozaki_cutlass.gemm(*dlarge, moduli=15, out=out_l, path="fused")
        assert len(replays) == 0
        for _ in range(3):
            out_s.fill(cp.nan)
            ozaki_cutlass.gemm(*dsmall, moduli=15, out=out_s, path="fused")
            assert same_bits(cp.asnumpy(out_s), want_small)
        assert len(replays) == 1
        ozaki_cutlass.empty_cache()
        assert len(replays) == 0
        for _ in range(3):
            out_l.fill(cp.nan)
            ozaki_cutlass.gemm(*dlarge, moduli=15, out=out_l, path="fused")
            assert same_bits(cp.asnumpy(out_l), want_large)


def test_the_default_stream_and_new_outputs(rng):
    """Calls on CuPy's current stream (the legacy default one), a new result each time:
    the graph stops before the finish, which writes each call's own output."""
    a, b = random_matrix(90, 120, 2.0, rng), random_matrix(120, 60, 2.0, rng)
    da, db = cp.asarray(a), cp.asarray(b)
    want = reference.gemm(a, b, moduli=14, mode="fast")
    before = counts(cp.cuda.get_current_stream())
    results = [ozaki_cutlass.gemm(da, db, moduli=14, mode="fast") for _ in range(8)]  # all alive: 8 outputs
    assert len({r.data.ptr for r in results}) == 8
    for r in results:
        assert same_bits(cp.asnumpy(r), want)
    assert delta(before, counts(cp.cuda.get_current_stream())) == {"direct": 1, "captured": 1, "replayed": 6}


@pytest.mark.parametrize("path", ["staged", "fused"])
def test_each_call_its_own_output_c_and_scalars(rng, stream, path):
    """One graph, then per call the finish with that call's out, c, alpha and beta
    (beta == 0: c unread), strided outputs among them."""
    m, n, k = 70, 50, 90
    a, b = random_matrix(m, k, 1.0, rng), random_matrix(k, n, 1.0, rng)
    cases = [(1.0, 0.0, None), (-2.0, 0.5, random_matrix(m, n, 1.0, rng)), (0.75, -1.0, random_matrix(m, n, 3.0, rng)),
             (3.0, 0.0, None), (1.0, 1.0, random_matrix(m, n, 0.5, rng))]
    before = counts(stream)
    with stream:
        da, db = cp.asarray(a), cp.asarray(b)
        for i, (alpha, beta, c) in enumerate(cases):
            big = cp.full((m + 3, 2 * n), cp.nan)
            out = big[1:m + 1, ::2] if i % 2 else cp.full((m, n), cp.nan)
            ozaki_cutlass.gemm(da, db, c=None if c is None else cp.asarray(c), alpha=alpha, beta=beta, moduli=15,
                               path=path, out=out)
            want = reference.gemm(a, b, c=c, alpha=alpha, beta=beta, moduli=15)
            assert same_bits(cp.asnumpy(out), want), (i, alpha, beta)
    assert delta(before, counts(stream)) == {"direct": 1, "captured": 1, "replayed": 3}


def replays_give_the_reference(graph, stream, da, db, out, rng) -> None:
    """The caller's ``graph`` around a 15-moduli call of ``da`` and ``db`` into ``out``,
    launched on new values three times: the reference's bits each time."""
    (m, k), n = da.shape, db.shape[1]
    for i in range(3):
        a2, b2 = random_matrix(m, k, 1.0 + i, rng), random_matrix(k, n, 1.0 + i, rng)
        da.set(a2)
        db.set(b2)
        out.fill(cp.nan)
        graph.launch(stream)
        assert same_bits(cp.asnumpy(out), reference.gemm(a2, b2, moduli=15)), i


def test_under_the_callers_own_capture(rng, stream):
    """The caller captures its stream around our calls: they run directly into the
    caller's graph, which then gives the right product on every launch."""
    m, n, k = 48, 40, 100
    a, b = random_matrix(m, k, 1.0, rng), random_matrix(k, n, 1.0, rng)
    with stream:
        da, db, out = cp.asarray(a), cp.asarray(b), cp.empty((m, n))
        for _ in range(2):  # the workspace sized, the key seen: a capture would come next
            ozaki_cutlass.gemm(da, db, moduli=15, out=out)
        stream.synchronize()
        before = counts(stream)
        stream.begin_capture(cp.cuda.runtime.streamCaptureModeRelaxed)
        ozaki_cutlass.gemm(da, db, moduli=15, out=out)
        graph = stream.end_capture()
        assert delta(before, counts(stream)) == {"direct": 0, "captured": 0, "replayed": 0}
        replays_give_the_reference(graph, stream, da, db, out, rng)


def operands_after_a_first_call(rng, m, n, k):
    """Random A and B and their CuPy copies, after one call on them on another stream (the
    kernel libraries loaded) has finished."""
    a, b = random_matrix(m, k, 1.0, rng), random_matrix(k, n, 1.0, rng)
    da, db = cp.asarray(a), cp.asarray(b)
    ozaki_cutlass.gemm(da, db, moduli=15)
    cp.cuda.Device().synchronize()
    return a, b, da, db


def captured_globally(stream, da, db, rng) -> None:
    """The caller captures ``stream`` in global mode (PyTorch's default) around a 15-moduli
    call of ``da`` and ``db``; the graph's launches give the reference's bits
    (replays_give_the_reference)."""
    (m, _), n = da.shape, db.shape[1]
    with stream:
        out = cp.full((m, n), cp.nan)
        stream.synchronize()
        stream.begin_capture(cp.cuda.runtime.streamCaptureModeGlobal)
        ozaki_cutlass.gemm(da, db, moduli=15, out=out)
        graph = stream.end_capture()
        replays_give_the_reference(graph, stream, da, db, out, rng)


@pytest.mark.parametrize("non_blocking", [True, False])
def test_under_the_callers_global_capture_on_a_stream_never_used(rng, non_blocking):
    """The caller captures in global mode (PyTorch's default) a stream we have not seen:
    the call makes its workspace inside the capture (buffers, moduli table, second
    stream), which global mode forbids unless the calls that do so are relaxed and none
    touches the legacy stream (a blocking capturing stream depends on it)."""
    m, n, k = 56, 40, 120
    _, _, da, db = operands_after_a_first_call(rng, m, n, k)
    stream = cp.cuda.Stream(non_blocking=non_blocking)
    captured_globally(stream, da, db, rng)


def test_under_the_callers_global_capture_of_a_stream_with_replays(rng, stream):
    """The caller captures in global mode a stream whose workspace holds a replay graph,
    and the captured call needs larger buffers: replacing them destroys the stream's
    graphs (they read the old ones) inside the capture, in the capturing thread, which
    global mode forbids unless the destroy is relaxed."""
    small = random_matrix(32, 64, 1.0, rng), random_matrix(64, 24, 1.0, rng)
    before = counts(stream)
    with stream:
        ds, o = [cp.asarray(x) for x in small], cp.empty((32, 24))
        for _ in range(3):
            ozaki_cutlass.gemm(*ds, moduli=15, out=o)
    assert delta(before, counts(stream)) == {"direct": 1, "captured": 1, "replayed": 1}
    m, n, k = 160, 120, 400
    with stream:
        da, db = cp.asarray(random_matrix(m, k, 1.0, rng)), cp.asarray(random_matrix(k, n, 1.0, rng))
    captured_globally(stream, da, db, rng)


def test_under_the_callers_global_capture_with_the_pool_full(rng):
    """The pool keeps WORKSPACES_PER_DEVICE workspaces of this GPU, each holding buffers,
    when the caller captures (global mode) a stream new to it: the least recently used one
    is closed inside the capture, by the capturing thread, whose frees and stream and event
    destroys in relaxed mode leave its capture active (scripts/capture_probe.py)."""
    m, n, k = 56, 40, 120
    _, _, da, db = operands_after_a_first_call(rng, m, n, k)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(WORKSPACES_PER_DEVICE)]
    for s in streams:  # the pool full of idle workspaces with buffers
        with s:
            ozaki_cutlass.gemm(da, db, moduli=15)
        s.synchronize()
    stream = cp.cuda.Stream(non_blocking=True)
    captured_globally(stream, da, db, rng)


@pytest.mark.parametrize("other_thread", [False, True])
def test_empty_cache_beside_a_global_capture(rng, stream, other_thread):
    """empty_cache while a stream is captured in global mode (PyTorch's default), called by
    the capturing thread or another: the other workspaces' buffers are freed in relaxed
    mode (no context synchronize, which would end the capture), the captured call's
    workspace (the capture's, apart from the stream's own) keeps its buffers (pinned), and
    the caller's graph gives the reference's bits."""
    m, n, k = 56, 40, 120
    _, _, da, db = operands_after_a_first_call(rng, m, n, k)
    idle = cp.cuda.Stream(non_blocking=True)
    with idle:
        ozaki_cutlass.gemm(da, db, moduli=15)
    idle.synchronize()
    assert WORKSPACES.get(0, idle.ptr).nbytes > 0
    freed = []
    with stream:
        out = cp.full((m, n), cp.nan)
        stream.synchronize()
        stream.begin_capture(cp.cuda.runtime.streamCaptureModeGlobal)
        ozaki_cutlass.gemm(da, db, moduli=15, out=out)
        captured = WORKSPACES.get(0, stream.ptr)  # the capture's workspace (the stream's id cannot be read)
        held = captured.nbytes
        if other_thread:
            thread = threading.Thread(target=lambda: freed.append(ozaki_cutlass.empty_cache()))
            thread.start()
            thread.join()
        else:
            freed.append(ozaki_cutlass.empty_cache())
        assert stream.is_capturing()
        graph = stream.end_capture()
        assert freed and freed[0] > 0 and WORKSPACES.get(0, idle.ptr).nbytes == 0
        assert captured.captured and held > 0 and captured.nbytes == held
        assert WORKSPACES.get(0, stream.ptr) is not captured  # the stream's own, after the capture
        replays_give_the_reference(graph, stream, da, db, out, rng)  # its copies and fills on the stream


def test_a_new_stream_on_a_destroyed_streams_handle(rng):
    """The driver hands a destroyed stream's handle to a stream made later. The first
    stream ran a call directly, then a caller's graph captured one there (into the
    capture's workspace, pinned for it): the new stream gets a workspace of its own (the
    pool knows streams by the driver's id), so its calls and the graph's launches on a
    third stream run at once without sharing a buffer, each with the reference's bits."""
    m, n, k = 96, 80, 200
    a, b, da, db = operands_after_a_first_call(rng, m, n, k)
    first = cp.cuda.Stream(non_blocking=True)
    handle = first.ptr
    out = cp.full((m, n), cp.nan)
    with first:
        ozaki_cutlass.gemm(da, db, moduli=15)
        own = WORKSPACES.get(0, handle)
        first.synchronize()
        first.begin_capture(cp.cuda.runtime.streamCaptureModeGlobal)
        ozaki_cutlass.gemm(da, db, moduli=15, out=out)
        captured = WORKSPACES.get(0, handle)
        graph = first.end_capture()
    assert captured.captured and captured is not own and not own.captured
    del first  # destroyed; the graph stays
    taken = []
    while len(taken) < 64 and (not taken or taken[-1].ptr != handle):
        taken.append(cp.cuda.Stream(non_blocking=True))
    if taken[-1].ptr != handle:
        pytest.skip("the driver gave none of 64 new streams the destroyed stream's handle")
    again = taken[-1]
    assert WORKSPACES.get(0, again.ptr) not in (own, captured)
    c, d = random_matrix(m, k, 2.0, rng), random_matrix(k, n, 2.0, rng)
    dc, dd = cp.asarray(c), cp.asarray(d)
    third = cp.cuda.Stream(non_blocking=True)
    cp.cuda.Device().synchronize()
    for _ in range(3):
        out.fill(cp.nan)
        cp.cuda.Device().synchronize()
        graph.launch(third)
        with again:
            got = ozaki_cutlass.gemm(dc, dd, moduli=15)
        cp.cuda.Device().synchronize()
        assert same_bits(cp.asnumpy(out), reference.gemm(a, b, moduli=15))
        assert same_bits(cp.asnumpy(got), reference.gemm(c, d, moduli=15))


def crandom(m, n, rng):
    return random_matrix(m, n, 1.0, rng) + 1j * random_matrix(m, n, 1.0, rng)


def test_a_complex_call_into_the_callers_graph(rng, stream):
    """A complex call on a stream the caller captures in global mode: its graph realifies
    into the complex layer's buffers of the capture, which are pinned with the realified
    product's, so empty_cache, a larger complex call on that stream and a larger one in a
    second capture there (whose buffers grow) free and replace none of them, and each
    launch of the graph gives the reference's bits for the values then in the operands.
    ozaki_cutlass.contract is refused there (it reads back)."""
    m, n, k = 40, 32, 56
    settings = dict(trans_a="C", alpha=0.5 + 1.25j, moduli=15, policy="emulate")  # Ahat, Bhat and T all made
    with stream:
        da, db = cp.asarray(crandom(k, m, rng)), cp.asarray(crandom(k, n, rng))
        out = cp.empty((m, n), dtype=np.complex128)
        ozaki_cutlass.gemm(da, db, out=out, **settings)
        ozaki_cutlass.empty_cache()  # what stays is what captures pinned
        stream.begin_capture(cp.cuda.runtime.streamCaptureModeGlobal)
        ozaki_cutlass.gemm(da, db, out=out, **settings)
        with pytest.raises(ValueError, match="contract reads the certificate back"):
            ozaki_cutlass.contract(da, db, trans_a="C")
        graph = stream.end_capture()
        held = ozaki_cutlass.memory_held()
        ozaki_cutlass.empty_cache()
        assert ozaki_cutlass.memory_held() == held
        larger = cp.asarray(crandom(2 * k, 2 * m, rng)), cp.asarray(crandom(2 * k, 2 * n, rng))
        ozaki_cutlass.gemm(*larger, **settings)
        stream.begin_capture(cp.cuda.runtime.streamCaptureModeGlobal)
        ozaki_cutlass.gemm(*larger, **settings)
        stream.end_capture()
        for i in range(2):
            a2, b2 = crandom(k, m, rng), crandom(k, n, rng)
            da.set(a2)
            db.set(b2)
            out.fill(cp.nan)
            graph.launch(stream)
            assert same_bits(cp.asnumpy(out), reference.gemm(a2, b2, **settings)), i


def other_threads_call(what, a, b):
    """What another, new thread computes beside the capture (its device buffers and cuBLAS
    handles made then)."""
    if what == "emulated":
        return ozaki_cutlass.gemm(a, b, moduli=15)
    if what == "prepared":
        return ozaki_cutlass.gemm(ozaki_cutlass.prepare(a, "left", moduli=15), b)
    return ozaki_cutlass.gemm(a, b, policy="native")


@pytest.mark.parametrize("what", ["emulated", "prepared", "native"])
def test_numpy_calls_of_another_thread_beside_a_global_capture(rng, what):
    """One thread captures a stream in global mode (PyTorch's default) while a new thread
    multiplies NumPy arrays: that thread's allocations, frees, cuBLAS handles and waits
    for its uploads and downloads would end the capture unless made in relaxed mode. Its
    product is right, and so is the graph."""
    m, n, k = 40, 32, 72
    a, b, da, db = operands_after_a_first_call(rng, m, n, k)
    stream = cp.cuda.Stream(non_blocking=True)
    done = {}

    def other():
        try:
            done["c"] = other_threads_call(what, a, b)
        except Exception as exc:  # reported below, with the capture's fate
            done["error"] = exc

    with stream:
        out = cp.full((m, n), cp.nan)
        stream.synchronize()
        stream.begin_capture(cp.cuda.runtime.streamCaptureModeGlobal)
        try:
            thread = threading.Thread(target=other)
            thread.start()
            thread.join()
            ozaki_cutlass.gemm(da, db, moduli=15, out=out)
        finally:
            graph = stream.end_capture()
        assert "error" not in done, done.get("error")
        if what == "native":
            np.testing.assert_allclose(done["c"], a @ b, rtol=1e-13, atol=1e-13)
        else:
            assert same_bits(done["c"], reference.gemm(a, b, moduli=15))
        replays_give_the_reference(graph, stream, da, db, out, rng)


def test_inside_a_torch_graph_on_its_own_stream(rng):
    """torch.cuda.graph: global mode on a stream of its own, never used before."""
    torch = pytest.importorskip("torch")
    m, n, k = 48, 72, 96
    a, b = random_matrix(m, k, 1.0, rng), random_matrix(k, n, 1.0, rng)
    ta, tb = torch.tensor(a, device="cuda"), torch.tensor(b, device="cuda")
    out = torch.empty((m, n), dtype=torch.float64, device="cuda")
    ozaki_cutlass.gemm(ta, tb, moduli=15, out=out)  # warm-up on the current stream
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=torch.cuda.Stream()):
        ozaki_cutlass.gemm(ta, tb, moduli=15, out=out)
    for i in range(3):
        a2, b2 = random_matrix(m, k, 0.5 + i, rng), random_matrix(k, n, 0.5 + i, rng)
        ta.copy_(torch.from_numpy(a2))
        tb.copy_(torch.from_numpy(b2))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert same_bits(out.cpu().numpy(), reference.gemm(a2, b2, moduli=15)), i


def test_graphs_off(rng, stream, monkeypatch):
    monkeypatch.setenv("OZAKI_GRAPHS", "0")
    a, b = random_matrix(30, 40, 1.0, rng), random_matrix(40, 20, 1.0, rng)
    before = counts(stream)
    with stream:
        da, db, out = cp.asarray(a), cp.asarray(b), cp.empty((30, 20))
        for _ in range(3):
            ozaki_cutlass.gemm(da, db, moduli=15, out=out)
            assert same_bits(cp.asnumpy(out), reference.gemm(a, b, moduli=15))
    assert delta(before, counts(stream)) == {"direct": 0, "captured": 0, "replayed": 0}


# -- the replay lane (paths.replay_lane): later calls straight to the graph --------------

@pytest.fixture
def general(monkeypatch):
    """How many calls took the general path (ozaki_cutlass.api.execute)."""
    from ozaki_cutlass import api

    seen = []
    real = api.execute
    monkeypatch.setattr(api, "execute", lambda call: seen.append(call) or real(call))
    return seen


@pytest.mark.parametrize("path", ["staged", "fused"])
def test_the_lane_takes_calls_after_the_first_replay(rng, stream, general, path):
    """Direct, captured (the lane learned), then through the lane: each call a new
    result and its own alpha, the reference's bits on every call."""
    a, b = random_matrix(100, 140, 1.0, rng), random_matrix(140, 70, 1.0, rng)
    before = counts(stream)
    with stream:
        da, db = cp.asarray(a), cp.asarray(b)
        results = []
        for i in range(6):
            alpha = (1.0, -0.5, 3.0)[i % 3]
            results.append((alpha, ozaki_cutlass.gemm(da, db, alpha=alpha, moduli=15, path=path)))
        assert len(general) == 2
        assert len({r.data.ptr for _, r in results}) == 6
        for alpha, r in results:
            assert same_bits(cp.asnumpy(r), reference.gemm(a, b, alpha=alpha, moduli=15)), alpha
    assert delta(before, counts(stream)) == {"direct": 1, "captured": 1, "replayed": 4}


def test_the_lane_writes_into_the_callers_out(rng, stream, general):
    """A given out (a strided view among them) is part of the key: the lane writes into
    it and returns it; another out is another key."""
    m, n, k = 60, 45, 130
    a, b = random_matrix(m, k, 1.0, rng), random_matrix(k, n, 1.0, rng)
    with stream:
        da, db = cp.asarray(a), cp.asarray(b)
        big = cp.empty((m + 2, 2 * n))
        for j, out in enumerate((cp.empty((m, n)), big[1:m + 1, ::2])):
            for i in range(4):
                out.fill(cp.nan)
                alpha = 1.0 + i
                got = ozaki_cutlass.gemm(da, db, alpha=alpha, moduli=15, out=out)
                assert got is out and same_bits(cp.asnumpy(out), reference.gemm(a, b, alpha=alpha, moduli=15))
            # the general path's direct and captured calls; the second out's first call
            # replays the graph already held (a and b unchanged), which learns its lane
            assert len(general) == (2, 3)[j]
        column = db[:, :1].copy()
        for _ in range(3):  # refused on every call: never learned
            with pytest.raises(ValueError, match="out overlaps a"):
                ozaki_cutlass.gemm(da, column, moduli=15, out=da[:, :1])


def test_the_lane_reads_new_values_in_place(rng, stream, general):
    m, n, k = 64, 96, 200
    with stream:
        da, db = cp.empty((m, k)), cp.empty((k, n))
        for i in range(5):
            a, b = random_matrix(m, k, 0.5 + i, rng), random_matrix(k, n, 0.5 + i, rng)
            if i == 3:
                a[5, 7], b[11, 40] = np.inf, np.nan
            da.set(a)
            db.set(b)
            got = ozaki_cutlass.gemm(da, db, moduli=16, mode="fast")
            assert same_bits(cp.asnumpy(got), reference.gemm(a, b, moduli=16, mode="fast")), i
    assert len(general) == 2


def test_what_sends_a_call_back_to_the_general_path(rng, stream, general, monkeypatch):
    """Other settings, other arrays, another stream, the graphs freed (empty_cache) or
    turned off: the general path, with the right bits; the lane is learned again."""
    a, b = random_matrix(80, 90, 1.0, rng), random_matrix(90, 60, 1.0, rng)
    want = reference.gemm(a, b, moduli=15)
    with stream:
        da, db = cp.asarray(a), cp.asarray(b)
        db2 = db.copy()

        def call(n_general, x=da, y=db, **kw):
            got = ozaki_cutlass.gemm(x, y, **({"moduli": 15} | kw))
            assert len(general) == n_general
            return cp.asnumpy(got)

        for i in range(3):
            call(min(i + 1, 2))
        assert same_bits(call(2), want)
        assert same_bits(call(3, mode="accurate"), want)        # mode spelled out: another key
        assert same_bits(call(4, y=db2), want)                  # other arrays, the same values
        ozaki_cutlass.empty_cache()
        assert same_bits(call(5), want)                         # the graph is gone: run directly
        call(6)                                                 # captured: learned again
        assert same_bits(call(6), want)
        monkeypatch.setenv("OZAKI_GRAPHS", "0")
        assert same_bits(call(7), want)
        monkeypatch.delenv("OZAKI_GRAPHS")
        assert same_bits(call(7), want)
    other = cp.cuda.Stream(non_blocking=True)
    with other:
        assert same_bits(call(8), want)                         # another stream: another key
    other.synchronize()


def test_torch_through_the_lane(rng, general):
    torch = pytest.importorskip("torch")
    a, b = random_matrix(70, 50, 1.0, rng), random_matrix(50, 40, 1.0, rng)
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    want = reference.gemm(a, b, alpha=2.0, moduli=15)
    for _ in range(4):
        got = ozaki_cutlass.gemm(ta, tb, alpha=2.0, moduli=15, path="fused")
        assert isinstance(got, torch.Tensor) and same_bits(got.cpu().numpy(), want)
    assert len(general) == 2
    ta.requires_grad_(True)  # the same tensor, now refused: by the general path, as before
    with pytest.raises(TypeError, match="requires grad"):
        ozaki_cutlass.gemm(ta, tb, alpha=2.0, moduli=15, path="fused")


def test_no_lane_launches_under_a_context_of_the_callers_own(rng, stream):
    """A context the caller created is current: the three lanes (replay, native, native
    batched) answer None without launching, since their graph and cuBLAS handles are the
    primary context's; once the primary context is current again they take the call."""
    from cuda.bindings import driver as cu

    from ozaki_cutlass import dispatch
    from ozaki_cutlass.dispatch.policy import DECISIONS
    from ozaki_cutlass.paths.fast_lane import fast_lane
    from ozaki_cutlass.paths.replay_lane import replay_lane

    dispatch.forget_tables()
    a, b = random_matrix(90, 70, 1.0, rng), random_matrix(70, 50, 1.0, rng)
    settings = (15, None, None, "auto")
    with stream:
        da, db = cp.asarray(a), cp.asarray(b)
        a3, b3 = cp.asarray(np.stack([a] * 3)), cp.asarray(np.stack([b] * 3))
        for _ in range(3):
            ozaki_cutlass.gemm(da, db, moduli=15)
            ozaki_cutlass.gemm(da, db)   # auto decides this small shape native: the fast lane's
            ozaki_cutlass.gemm(a3, b3, policy="native")
        batched = [lane for key, lane in DECISIONS.lanes.items() if key[0] == "batched" and lane is not None]
        assert len(batched) == 1

        def lanes():
            return (replay_lane(da, db, None, 1.0, settings)[1], fast_lane(da, db, 1.0, "fast"),
                    batched[0].run(a3, b3, 1.0))

        err, own = cu.cuCtxCreate(None, 0, 0)   # made current
        assert int(err) == 0
        try:
            assert lanes() == (None, None, None)
        finally:
            cu.cuCtxPopCurrent()
            cu.cuCtxDestroy(own)
        replayed, native, native_batched = lanes()
    assert same_bits(cp.asnumpy(replayed), reference.gemm(a, b, moduli=15))
    assert cp.array_equal(native, ozaki_cutlass.gemm(da, db, policy="native"))
    assert cp.array_equal(native_batched, ozaki_cutlass.gemm(a3, b3, policy="native"))
