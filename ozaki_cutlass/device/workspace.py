"""Device memory and streams that the emulation reuses from call to call: a workspace per
(GPU, stream), and the fork/join of a second stream."""

from __future__ import annotations

import threading

import numpy as np

from ..numerics.moduli import MODULI_TABLE
from . import driver

__all__ = ["Workspace", "WorkspacePool", "WORKSPACES", "Fork"]


class Workspace:
    """Grow-only device buffers by name, one set per (context, stream): reused across
    calls so a steady loop of gemm calls allocates nothing. ``lock`` is held while a call
    enqueues its work: two threads on one stream then enqueue whole calls one after the
    other, and stream order keeps each call's buffers to itself."""

    def __init__(self):
        self.lock = threading.Lock()
        self._buffers: dict[str, driver.DeviceBuffer] = {}
        self._moduli: driver.DeviceBuffer | None = None
        self._side = None

    def side_stream(self) -> tuple[int, object, object]:
        """A second stream (non-blocking) and two events for forking work off the main
        stream and joining it back; created on first use, kept."""
        if self._side is None:
            cu = driver.bindings()
            flags = cu.CUevent_flags.CU_EVENT_DISABLE_TIMING
            self._side = (int(driver.new_stream()), driver.check(cu.cuEventCreate(flags), "cuEventCreate"),
                          driver.check(cu.cuEventCreate(flags), "cuEventCreate"))
        return self._side

    def moduli(self) -> int:
        """The whole moduli table as device int32, uploaded once: N moduli are its first N."""
        if self._moduli is None:
            table = np.array(MODULI_TABLE, dtype=np.int32)
            self._moduli = driver.DeviceBuffer(table.nbytes)
            self._moduli.upload(table)  # synchronous: done before any kernel reads it
        return self._moduli.ptr

    def get(self, name: str, nbytes: int) -> int:
        buf = self._buffers.get(name)
        if buf is None or buf.nbytes < nbytes:
            if buf is not None:
                buf.close()
                del self._buffers[name]
            try:
                buf = driver.DeviceBuffer(max(nbytes, 16))
            except driver.CudaError as exc:
                held = sum(b.nbytes for b in self._buffers.values())
                raise MemoryError(f"the emulation needs {nbytes / 2**30:.2f} GiB more device memory for "
                                  f"'{name}' (its workspace already holds {held / 2**30:.2f} GiB): {exc}") from exc
            self._buffers[name] = buf
        return buf.ptr


class WorkspacePool:
    """The process's workspaces, one per (GPU, stream); :meth:`clear` drops them (their
    memory is freed once no call still holds one)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._spaces: dict[tuple[int, int], Workspace] = {}

    def get(self, device: int, stream: int) -> Workspace:
        with self._lock:
            return self._spaces.setdefault((device, stream), Workspace())

    def clear(self) -> None:
        with self._lock:
            self._spaces.clear()


#: The one WorkspacePool of the process.
WORKSPACES = WorkspacePool()


class Fork:
    """``with Fork(ws, sh, on) as side:`` work launched on ``side`` inside the block runs
    after everything already on ``sh`` and before anything launched on ``sh`` after the
    block (two events); ``side`` is the workspace's second stream, or ``sh`` itself when
    ``on`` is false. Used to build A's and B's operands concurrently."""

    def __init__(self, ws: Workspace, sh: int, on: bool):
        self.ws, self.sh, self.on = ws, sh, on

    def __enter__(self) -> int:
        if not self.on:
            return self.sh
        self.side, self.ev_fork, self.ev_join = self.ws.side_stream()
        cu = driver.bindings()
        driver.check(cu.cuEventRecord(self.ev_fork, driver.as_cu_stream(self.sh)), "cuEventRecord")
        driver.check(cu.cuStreamWaitEvent(driver.as_cu_stream(self.side), self.ev_fork, 0), "cuStreamWaitEvent")
        return self.side

    def __exit__(self, *exc) -> None:
        if self.on:
            cu = driver.bindings()
            driver.check(cu.cuEventRecord(self.ev_join, driver.as_cu_stream(self.side)), "cuEventRecord")
            driver.check(cu.cuStreamWaitEvent(driver.as_cu_stream(self.sh), self.ev_join, 0), "cuStreamWaitEvent")
