"""When the staged path of a complex call runs Karatsuba's three products (paths.karatsuba),
and that it gives way, enqueuing nothing, where its buffers do not fit. Its bits against
the reference: tests/gpu/test_zgemm_gpu.py."""

import pytest

from ozaki_cutlass.device import driver
from ozaki_cutlass.paths.karatsuba import karatsuba_applies, run_karatsuba
from ozaki_cutlass.paths.launch import Launch, PhaseTimer
from ozaki_cutlass.paths.scale import Scaled


def launch(**kw):
    base = dict(A=None, B=None, C=None, O=None, m=64, n=2 * 48, k=2 * 40, alpha=1.0, beta=0.0, moduli=14,
                mode="fast", stream=0, realified=True)
    return Launch(**(base | kw))


def scaled(inner_a=0, inner_b=0):
    return Scaled(a=None, b=None, mu=0, nu=0, nonfinite_a=0, nonfinite_b=0, inner_a=inner_a, inner_b=inner_b)


@pytest.mark.parametrize("kw, sc, runs", [
    ({}, scaled(), True),
    (dict(realified=False), scaled(), False),          # a real call
    (dict(mode="accurate"), scaled(), False),          # its column shifts may differ between 2j and 2j + 1
    ({}, scaled(inner_a=1234, inner_b=5678), False),   # equilibrated: inner scales may differ between 2l, 2l + 1
    (dict(k=0), scaled(), False),
])
def test_karatsuba_runs_only_where_it_gives_the_realified_bits(kw, sc, runs):
    assert karatsuba_applies(launch(**kw), sc) is runs


class _Recorder:
    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return lambda *args, **kw: self.calls.append(name)


class _TightWorkspace:
    """Room for every buffer but an int32 plane set larger than ``limit`` bytes."""

    def __init__(self, limit):
        self.limit, self.held, self.dropped = limit, {}, []

    def get(self, name, nbytes):
        if name == "c32" and nbytes > self.limit:
            raise driver.OutOfMemoryError("no room")
        self.held[name] = nbytes
        return 4096

    def drop(self, *names):
        self.dropped += names

    def moduli(self):
        return 4096


def test_karatsuba_gives_way_with_nothing_enqueued_where_its_buffers_do_not_fit():
    class Kern:
        stages = _Recorder()
        gemm = _Recorder()

    L = launch()
    ws = _TightWorkspace(limit=4 * L.moduli * L.m * 2 * 48)   # the realified product's planes fit, 3/2 of them not
    assert run_karatsuba(Kern, L, ws, PhaseTimer(0, False), scaled(), 0, 0, 80, 96, None) is False
    assert Kern.stages.calls == [] and Kern.gemm.calls == []
    assert set(ws.dropped) == {"ra3", "rb3"}
