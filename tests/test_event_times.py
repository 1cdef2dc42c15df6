"""ozaki_cutlass._cuda.event_times on the CPU: a recording stand-in for the CUDA event
timer shows the order of the calls and what is timed."""

from ozaki_cutlass import _cuda


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
    monkeypatch.setattr(_cuda, "EventTimer", _Recorder)
    calls = []

    def make(name):
        def fn():
            calls.append(name)
            _Recorder.log.append(("call", name))
            return f"{name}{len(calls)}"
        return fn

    times, last = _cuda.event_times([make("a"), make("b")], warmup=2, reps=3, stream=7)
    assert calls == ["a", "b"] * 5  # 2 untimed rounds, then 3 timed ones, in alternation
    timed = _Recorder.log[4:]  # the warm-up rounds record nothing
    assert [e for e in _Recorder.log[:4]] == [("call", "a"), ("call", "b")] * 2
    assert timed == [("start", 7), ("call", "a"), ("stop", 7), ("start", 7), ("call", "b"), ("stop", 7)] * 3
    assert [len(t) for t in times] == [3, 3]
    assert times[0][0] < times[1][0] < times[0][1]  # each value is that call's own stop
    assert last == ["a9", "b10"]
