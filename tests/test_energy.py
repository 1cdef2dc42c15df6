"""Energy per call (ozaki_cutlass.device.energy, tools.measure.measure_energy) on the CPU,
with a fake NVML and fake CUDA events. On the GPU: tests/gpu/test_measure_gpu.py."""

from __future__ import annotations

import ctypes
import math
import types

import pytest

from ozaki_cutlass.device import energy
from ozaki_cutlass.tools import bench, measure


@pytest.fixture(autouse=True)
def _fresh_nvml():
    energy.forget()
    yield
    energy.forget()


def test_no_nvml_is_a_reason_said_once(monkeypatch):
    opened = []

    def no_library(name):
        opened.append(name)
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(energy.ctypes, "CDLL", no_library)
    for _ in range(2):
        with pytest.raises(energy.EnergyUnavailable, match="libnvidia-ml.so.1.*cannot open"):
            energy.counter(0)
    assert opened == ["libnvidia-ml.so.1"]  # remembered, not retried
    energy.forget()
    with pytest.raises(energy.EnergyUnavailable):
        energy.counter(0)
    assert len(opened) == 2


class FakeNvml:
    """nvmlInit_v2, handles by PCI bus id, and an energy counter that steps every 3 reads."""

    def __init__(self, energy_status=0):
        self.reads, self.bus_ids, self.energy_status = 0, [], energy_status
        self.nvmlInit_v2 = self._fn(lambda: 0)
        self.nvmlErrorString = self._fn(lambda status: b"Not Supported" if status == 3 else b"Unknown Error")
        self.nvmlDeviceGetHandleByPciBusId_v2 = self._fn(self._by_bus_id)
        self.nvmlDeviceGetTotalEnergyConsumption = self._fn(self._energy)

    @staticmethod
    def _fn(call):
        return types.SimpleNamespace(__call__=call, restype=None, argtypes=None, call=call)

    def _by_bus_id(self, bus_id, handle):
        self.bus_ids.append(bus_id)
        handle._obj.value = 0xABC
        return 0

    def _energy(self, handle, value):
        self.reads += 1
        value._obj.value = 1_000_000 + 40 * (self.reads // 3)
        return self.energy_status


class Callable:
    def __init__(self, ns):
        self.ns = ns

    def __call__(self, *args):
        return self.ns.call(*args)


def _install(monkeypatch, nvml):
    lib = types.SimpleNamespace(**{name: Callable(fn) for name, fn in vars(nvml).items() if name.startswith("nvml")})
    monkeypatch.setattr(energy.ctypes, "CDLL", lambda name: lib)
    monkeypatch.setattr(energy.driver, "ensure_context", lambda ordinal=0: None)
    monkeypatch.setattr(energy, "_bus_id", lambda ordinal: "00000000:3B:00.0")
    return lib


def test_the_counter_is_found_by_pci_bus_id_and_steps(monkeypatch):
    nvml = FakeNvml()
    _install(monkeypatch, nvml)
    meter = energy.counter(0)
    assert nvml.bus_ids == [b"00000000:3B:00.0"] and meter.bus_id == "00000000:3B:00.0"
    first = meter.millijoules()
    stepped = meter.next_step(poll_s=0.0)
    assert stepped > first and (stepped - 1_000_000) % 40 == 0


def test_a_counter_the_gpu_does_not_offer_is_a_reason(monkeypatch):
    _install(monkeypatch, FakeNvml(energy_status=3))
    with pytest.raises(energy.EnergyUnavailable, match="nvmlDeviceGetTotalEnergyConsumption failed: Not Supported"):
        energy.counter(0)
    line = bench._energy_counter(1.0)
    assert line[0] is None and line[1].startswith("energy n/a: NVML nvmlDeviceGetTotalEnergyConsumption failed")


def test_no_energy_when_asked_for_none():
    assert bench._energy_counter(0.0) == (None, "energy: not measured (--energy-seconds 0)")


class FakeMeter:
    def __init__(self, steps):
        self.steps = list(steps)

    def next_step(self):
        return self.steps.pop(0)


class FakeTimer:
    def __init__(self, stream=0):
        pass

    def start(self):
        pass

    def stop(self):
        return 1250.0  # ms the loop took


def test_energy_loop_length_and_units(monkeypatch):
    monkeypatch.setattr(measure.driver, "EventTimer", FakeTimer)
    monkeypatch.setattr(measure.driver, "synchronize", lambda stream=0: None)
    calls = []
    flops = 2.0 * 4096**3
    # 2.6 ms per call, >= 1 s: 385 calls; 500 J over the 1.25 s the events say
    e = measure.measure_energy(lambda: calls.append(1), 2.6, flops, FakeMeter([7_000_000, 7_500_000]), 1.0)
    assert len(calls) == e["calls"] == math.ceil(1000 / 2.6) == 385
    assert e["joules"] == pytest.approx(500.0) and e["seconds"] == pytest.approx(1.25)
    assert e["watts"] == pytest.approx(400.0)
    assert e["gflop_per_joule"] == pytest.approx(385 * flops / 1e9 / 500.0)
    assert e["ms_per_call"] == pytest.approx(1250.0 / 385)
    # a slow call still runs 3 times; a counter that did not move gives NaN, not a division error
    calls.clear()
    e = measure.measure_energy(lambda: calls.append(1), 5000.0, flops, FakeMeter([10, 10]), 1.0)
    assert len(calls) == 3 and math.isnan(e["gflop_per_joule"])


def test_signatures_are_written_once_with_their_types():
    restype, argtypes = energy._SIGNATURES["nvmlDeviceGetTotalEnergyConsumption"]
    assert restype is ctypes.c_int and argtypes[1] is ctypes.POINTER(ctypes.c_ulonglong)
    assert energy._SIGNATURES["nvmlErrorString"][0] is ctypes.c_char_p
