"""ozaki_cutlass.device.driver helpers on the CPU: event_times (a recording stand-in for the CUDA
event timer shows the order of the calls and what is timed) and on_device (a stand-in
driver shows which context is current when)."""

from ozaki_cutlass.device import driver


class _Recorder:
    log: list = []

    def __init__(self, stream=0):
        self.stream = stream

    def start(self):
        self.log.append(("start", self.stream))

    def stop(self):
        self.log.append(("stop", self.stream))
        return float(len(self.log))


def test_calls_alternate_after_warmup(monkeypatch):
    _Recorder.log = []
    monkeypatch.setattr(driver, "EventTimer", _Recorder)
    calls = []

    def make(name):
        def fn():
            calls.append(name)
            _Recorder.log.append(("call", name))
            return f"{name}{len(calls)}"
        return fn

    times, last = driver.event_times([make("a"), make("b")], warmup=2, reps=3, stream=7)
    assert calls == ["a", "b"] * 5  # 2 untimed rounds, then 3 timed ones, in alternation
    timed = _Recorder.log[4:]  # the warm-up rounds record nothing
    assert [e for e in _Recorder.log[:4]] == [("call", "a"), ("call", "b")] * 2
    assert timed == [("start", 7), ("call", "a"), ("stop", 7), ("start", 7), ("call", "b"), ("stop", 7)] * 3
    assert [len(t) for t in times] == [3, 3]
    assert times[0][0] < times[1][0] < times[0][1]  # each value is that call's own stop
    assert last == ["a9", "b10"]


def test_rotated_rounds_start_one_call_later_each(monkeypatch):
    _Recorder.log = []
    monkeypatch.setattr(driver, "EventTimer", _Recorder)
    calls = []
    fns = [lambda name=name: calls.append(name) or name for name in "abc"]
    times, last = driver.event_times(fns, warmup=1, reps=4, rotate=True)
    assert calls == list("abc") + list("abc") + list("bca") + list("cab") + list("abc")
    assert [len(t) for t in times] == [4, 4, 4] and last == ["a", "b", "c"]
    stops = [float(i) for i, e in enumerate(_Recorder.log, 1) if e[0] == "stop"]
    assert times[1][1] == stops[3]  # round 2 starts with b: its first stop is b's own
    assert driver.event_times([], 1, 2, rotate=True) == ([], [])


class _FakeDriver:
    """The two context calls of cuda.bindings.driver that on_device makes."""

    class CUresult:
        CUDA_SUCCESS = 0

    def __init__(self, current):
        self.current = current
        self.set_calls = []

    def cuCtxGetCurrent(self):
        return (0, self.current)

    def cuCtxSetCurrent(self, ctx):
        self.set_calls.append(ctx)
        self.current = ctx
        return (0,)


def test_on_device_makes_the_previous_context_current_again(monkeypatch):
    fake = _FakeDriver(current=11)  # the caller's context (e.g. CuPy's GPU 0)
    monkeypatch.setattr(driver, "bindings", lambda: fake)

    def ensure(ordinal=0):
        fake.current = 20 + ordinal  # what ensure_context does: the GPU's primary context
        return fake.current

    monkeypatch.setattr(driver, "ensure_context", ensure)
    with driver.on_device(1) as ctx:
        assert ctx == 21 and fake.current == 21
    assert fake.current == 11 and fake.set_calls == [11]
    try:  # also when the block raises
        with driver.on_device(1):
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert fake.current == 11
    fake.set_calls.clear()
    fake.current = 20
    with driver.on_device(0):  # already current: nothing to restore
        pass
    assert fake.set_calls == []


class _OldDriver:
    """A driver that initializes but supports only CUDA 12.8 (branch 570)."""

    class CUresult:
        CUDA_SUCCESS = 0

    class CUdevice_attribute:
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76

    def cuInit(self, flags):
        return (0,)

    def cuDriverGetVersion(self):
        return (0, 12080)

    def cuDeviceGetCount(self):
        return (0, 1)

    def cuDeviceGet(self, ordinal):
        return (0, ordinal)

    def cuDeviceGetAttribute(self, which, device):
        return (0, 9 if which == 75 else 0)


def test_a_cuda_12_driver_is_refused_with_the_reason(monkeypatch, caplog):
    import sys
    import types

    import pytest

    from ozaki_cutlass.device import arch

    assert driver.driver_refusal(13000) is None and driver.driver_refusal(13020) is None
    why = driver.driver_refusal(12080)
    assert "CUDA 12.8" in why and "580" in why and "reference.gemm" in why
    fake = _OldDriver()
    monkeypatch.setattr(driver, "bindings", lambda: fake)
    monkeypatch.setattr(driver, "_CONTEXTS", {})
    with pytest.raises(driver.NoGpuError, match="supports CUDA 12.8"):
        driver.ensure_context(0)
    # the arch query (what the demo, the CLI and the dispatcher ask first) says "no GPU" and why
    bindings = types.ModuleType("cuda.bindings")
    bindings.driver = fake
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", fake)
    monkeypatch.setattr(arch, "_CAPABILITIES", {})
    monkeypatch.setattr(arch, "_WARNED", set())
    with caplog.at_level("WARNING"):
        assert arch.compute_capability(0) is None
    assert "GPU path off" in caplog.text and "CUDA 12.8" in caplog.text
