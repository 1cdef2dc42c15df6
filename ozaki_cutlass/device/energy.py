"""GPU energy from NVML's total-energy counter, for GFLOP per joule in the measuring commands.

What: ``nvmlDeviceGetTotalEnergyConsumption``, the millijoules the GPU has used since the
driver was loaded (Volta and newer). libnvidia-ml.so.1 comes with the NVIDIA driver; it is
opened with ctypes on first use, once per process, never at import time, so measuring
energy adds no dependency. Where NVML, the GPU or the counter is missing, :func:`counter`
raises :class:`EnergyUnavailable` with the reason, and the commands say "energy n/a".

The counter moves in steps (tens of milliseconds apart on the GPUs seen so far), so a
reading is only good over a loop long enough to make a step small against it:
``ozaki_cutlass.tools.measure.measure_energy`` runs a call for a second or more, starting
and ending at a step (:meth:`EnergyCounter.next_step`).

The GPU is found by its PCI bus id (from the CUDA driver), not by its index: NVML counts
every GPU of the machine in its own order, CUDA the visible ones in its own.
"""

from __future__ import annotations

import ctypes
import threading
import time
from dataclasses import dataclass

from . import driver

__all__ = ["EnergyUnavailable", "EnergyCounter", "counter", "forget"]

_NVML_SUCCESS = 0  # nvmlReturn_t

# name -> (restype, argtypes): every NVML function used here, written once (nvml.h)
_SIGNATURES = {
    "nvmlInit_v2": (ctypes.c_int, []),
    "nvmlErrorString": (ctypes.c_char_p, [ctypes.c_int]),
    "nvmlDeviceGetHandleByPciBusId_v2": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]),
    "nvmlDeviceGetTotalEnergyConsumption": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_ulonglong)]),
}
_LIBRARY = "libnvidia-ml.so.1"


class EnergyUnavailable(RuntimeError):
    """The GPU's energy counter cannot be read here (the message says why)."""


def _open() -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL(_LIBRARY)
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
    except (OSError, AttributeError) as exc:
        raise EnergyUnavailable(f"NVML ({_LIBRARY}, part of the NVIDIA driver) cannot be used: {exc}") from exc
    _call(lib, lib.nvmlInit_v2(), "nvmlInit_v2")
    return lib


def _call(lib: ctypes.CDLL, status: int, what: str) -> None:
    if status != _NVML_SUCCESS:
        text = lib.nvmlErrorString(status)
        text = text.decode(errors="replace") if text else "unknown error"
        raise EnergyUnavailable(f"NVML {what} failed: {text} ({status})")


class _Nvml:
    """The process's NVML: opened on first use, or the reason it cannot be (remembered, not
    retried); :meth:`clear` forgets both (NVML itself stays initialized: it holds nothing
    of ours)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._lib: ctypes.CDLL | None = None
        self._problem: str | None = None

    def library(self) -> ctypes.CDLL:
        with self._lock:
            if self._lib is None:
                if self._problem is not None:
                    raise EnergyUnavailable(self._problem)
                try:
                    self._lib = _open()
                except EnergyUnavailable as exc:
                    self._problem = str(exc)
                    raise
            return self._lib

    def clear(self) -> None:
        with self._lock:
            self._lib, self._problem = None, None


_NVML = _Nvml()


@dataclass(frozen=True, slots=True)
class EnergyCounter:
    """The total-energy counter of one GPU."""

    device: int           # CUDA ordinal
    bus_id: str
    lib: ctypes.CDLL
    handle: ctypes.c_void_p

    def millijoules(self) -> int:
        """The GPU's energy since the driver was loaded, in mJ."""
        value = ctypes.c_ulonglong()
        _call(self.lib, self.lib.nvmlDeviceGetTotalEnergyConsumption(self.handle, ctypes.byref(value)),
              "nvmlDeviceGetTotalEnergyConsumption")
        return int(value.value)

    def next_step(self, timeout_s: float = 0.25, poll_s: float = 0.0005) -> int:
        """The counter's value right after its next step (polled every ``poll_s``), or its
        value after ``timeout_s`` where it does not move (an idle GPU may not)."""
        first = self.millijoules()
        deadline = time.perf_counter() + timeout_s
        while time.perf_counter() < deadline:
            value = self.millijoules()
            if value != first:
                return value
            time.sleep(poll_s)
        return self.millijoules()


def _bus_id(ordinal: int) -> str:
    cu = driver.bindings()
    dev = driver.check(cu.cuDeviceGet(ordinal), "cuDeviceGet")
    raw = driver.check(cu.cuDeviceGetPCIBusId(32, dev), "cuDeviceGetPCIBusId")
    text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
    return text.split("\0", 1)[0]


def counter(ordinal: int = 0) -> EnergyCounter:
    """The energy counter of CUDA device ``ordinal`` (its context made current first), read
    once to check it works; raises :class:`EnergyUnavailable` with the reason (no NVML, a
    GPU NVML does not know, a counter the GPU or driver does not offer)."""
    lib = _NVML.library()
    try:
        driver.ensure_context(ordinal)
        bus_id = _bus_id(ordinal)
    except (driver.CudaError, driver.NoGpuError) as exc:
        raise EnergyUnavailable(f"the PCI bus id of GPU {ordinal} is unknown: {exc}") from exc
    handle = ctypes.c_void_p()
    _call(lib, lib.nvmlDeviceGetHandleByPciBusId_v2(bus_id.encode(), ctypes.byref(handle)),
          f"nvmlDeviceGetHandleByPciBusId_v2({bus_id})")
    found = EnergyCounter(device=ordinal, bus_id=bus_id, lib=lib, handle=handle)
    found.millijoules()
    return found


def forget() -> None:
    """Forget the NVML library and any failure to open it (the next :func:`counter` retries)."""
    _NVML.clear()
