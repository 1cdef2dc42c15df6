"""Which GPU is visible, asked of the CUDA driver through cuda.bindings (imported lazily).

Answers None, never raises, when there is no driver, no GPU, or no cuda-python: callers
decide what "no GPU" means for them.
"""

from __future__ import annotations

import logging

from ..generator import Arch
from .driver import driver_refusal

__all__ = ["compute_capability", "arch_for_capability", "visible_arch"]

log = logging.getLogger(__name__)


_CAPABILITIES: dict[int, tuple[int, int]] = {}


def compute_capability(ordinal: int = 0) -> tuple[int, int] | None:
    """(major, minor) of CUDA device `ordinal`, or None when it cannot be queried
    (an answer is kept for the process: it cannot change; "cannot" is asked again)."""
    if ordinal in _CAPABILITIES:
        return _CAPABILITIES[ordinal]
    capability = _query_capability(ordinal)
    if capability is not None:
        _CAPABILITIES[ordinal] = capability
    return capability


_WARNED: set[str] = set()


def _warn_driver(why: str) -> None:
    """Log, once per process, why the driver cannot run the GPU path."""
    if why not in _WARNED:
        _WARNED.add(why)
        log.warning("GPU path off: %s", why)


def _query_capability(ordinal: int) -> tuple[int, int] | None:
    """The driver's answer, or None: any exception (cuda-bindings that fail to import with
    something other than ImportError, a driver library that is missing or too old, a call
    that raises) is logged at debug level and means "cannot be queried"."""
    try:
        from cuda.bindings import driver
    except Exception as exc:  # noqa: BLE001 - not only ImportError: broken installs raise anything
        log.debug("cuda.bindings unavailable: %s: %s", type(exc).__name__, exc)
        return None
    try:
        attribute = driver.CUdevice_attribute
        success = driver.CUresult.CUDA_SUCCESS
        (status,) = driver.cuInit(0)
        if status != success:
            log.debug("cuInit failed: %s", status)
            return None
        status, version = driver.cuDriverGetVersion()
        why = driver_refusal(int(version)) if status == success else None
        if why is not None:
            _warn_driver(why)
            return None
        status, count = driver.cuDeviceGetCount()
        if status != success or count <= ordinal:
            log.debug("cuDeviceGetCount: %s, %s device(s)", status, count)
            return None
        status, device = driver.cuDeviceGet(ordinal)
        if status != success:
            return None
        capability = []
        for which in (attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                      attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR):
            status, value = driver.cuDeviceGetAttribute(which, device)
            if status != success:
                return None
            capability.append(int(value))
    except Exception as exc:  # noqa: BLE001 - no driver library raises its own types
        log.debug("CUDA driver unavailable: %s: %s", type(exc).__name__, exc)
        return None
    return capability[0], capability[1]


def arch_for_capability(major: int, minor: int) -> Arch | None:
    """The arch to build for a device: sm_90a on 9.0 (H100/H200), sm_80 on any other 8.0+
    (its compute_80 PTX JIT-compiles on newer GPUs), None below 8.0."""
    if (major, minor) == (9, 0):
        return Arch.SM90A
    if major >= 8:
        return Arch.SM80
    return None


def visible_arch(ordinal: int = 0) -> Arch | None:
    """The arch of visible GPU ``ordinal`` (the first by default), or None without a usable
    one."""
    capability = compute_capability(ordinal)
    if capability is None:
        return None
    arch = arch_for_capability(*capability)
    if arch is None:
        log.warning("GPU compute capability %d.%d is below 8.0: not supported", *capability)
    return arch
