"""Device memory and streams that the emulation reuses from call to call: a workspace per
(GPU, stream), with the graphs of the calls that read it, and the fork/join of a second
stream. At most :data:`WORKSPACES_PER_DEVICE` workspaces of a GPU are kept: a program that
makes a stream (or thread) per task, whose workspaces would otherwise stay until
``empty_cache()``, has the oldest ones closed as new streams come, and a workspace that
runs out of memory frees the idle others' buffers first."""

from __future__ import annotations

import threading

import numpy as np

from ..numerics.moduli import MODULI_TABLE
from . import driver
from .graphs import Replays

__all__ = ["Workspace", "WorkspacePool", "Held", "WORKSPACES", "Fork", "WORKSPACES_PER_DEVICE"]

#: How many workspaces of one GPU the pool keeps (one per stream, and per thread on the
#: per-thread default stream): a new one closes the least recently used idle one.
WORKSPACES_PER_DEVICE = 16


class Workspace:
    """Grow-only device buffers by name, one set per (context, stream): reused across
    calls so a steady loop of gemm calls allocates nothing. ``lock`` is held while a call
    enqueues its work: two threads on one stream then enqueue whole calls one after the
    other, and stream order keeps each call's buffers to itself. ``replays`` holds the
    graphs of calls on this stream (device.graphs), which read these buffers: every
    buffer freed or replaced clears it.

    A call captured into the caller's own CUDA graph (its stream being captured) takes the
    capture workspace of that stream handle (``captured``: the pool's key names a capture,
    driver.stream_key) and leaves its buffers' addresses in a graph we do not hold. Such a
    workspace is pinned for good: every buffer stays alive for the process, those
    replaced or dropped afterwards included, and :meth:`release` (empty_cache) frees
    nothing there, so that the caller's graph never writes freed memory."""

    def __init__(self, reclaim=None, touch=None, captured: bool = False):
        self.lock = threading.Lock()
        self.captured = captured  # its calls are captured: its buffers outlive any graph of the caller's
        self.closed = False  # closed for the pool (shed(close=True)): no call holds it after
        self._reclaim = reclaim  # frees other workspaces' buffers, returns the bytes (out of memory)
        self._touch = touch  # makes this the pool's most recently used workspace
        self._kept: list[driver.DeviceBuffer] = []  # buffers replaced or dropped while pinned
        self._buffers: dict[str, driver.DeviceBuffer] = {}
        self._moduli: driver.DeviceBuffer | None = None
        self._side = None
        self._capture = None
        self._reads: dict[int, driver.PinnedRead] = {}
        self.replays = Replays()

    def touch(self) -> None:
        """Count as the pool's most recently used workspace: for a call that reached it
        without the pool's ``get`` (the replay lane, paths.replay_lane)."""
        if self._touch is not None:
            self._touch()

    @property
    def nbytes(self) -> int:
        """Device memory held by the buffers (those kept for a caller's graph included)."""
        return sum(b.nbytes for b in self._buffers.values()) + sum(b.nbytes for b in self._kept)

    def _retire(self, buf: driver.DeviceBuffer) -> None:
        """A buffer no longer ours: freed, or kept where a caller's graph may use it."""
        if self.captured:
            self._kept.append(buf)
        else:
            buf.close()

    def release(self) -> int:
        """Free every buffer, unless a caller's graph pinned them; returns the bytes freed.
        Held under the lock, so no call enqueues in between. cuMemFree waits for the GPU's
        work, which may still read them (as in :meth:`shed`; no cuCtxSynchronize, which
        would end any thread's capture, in any capture mode). The workspace stays usable:
        buffers are made again on demand."""
        with self.lock:
            self.replays.clear()
            if self.captured:  # a caller's CUDA graph holds these addresses
                return 0
            return self._free_buffers()

    def shed(self, close: bool = False) -> int | None:
        """Free every buffer, unless a call holds the workspace (its lock) or a caller's graph
        pinned it; with ``close`` also the rest it holds (its moduli table, the certificate's
        page-locked reads, its second stream and events, its capture stream), for a workspace
        the pool forgets (``closed``: the pool's ``hold`` takes another). Returns the bytes
        freed, None where busy or pinned. cuMemFree waits for the GPU's work that may still
        read the buffers, so the stream, which the caller may have destroyed since, is not
        touched. Without ``close`` the workspace stays in use (buffers are made again)."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            if self.captured:
                return None
            self.replays.clear()
            freed = self._free_buffers()
            if close:
                self._close_rest()
                self.closed = True
            return freed
        finally:
            self.lock.release()

    def _close_rest(self) -> None:
        """Free what the workspace holds besides its buffers (the caller holds the lock)."""
        if self._moduli is not None:
            self._moduli.close()
            self._moduli = None
        for read in self._reads.values():
            read.close()
        self._reads.clear()
        if self._side is not None:  # its work was joined into the stream's, done (cuMemFree waited)
            side, fork, join = self._side
            self._side = None
            driver.destroy_event(fork)
            driver.destroy_event(join)
            driver.destroy_stream(side)
        if self._capture is not None:  # nothing runs there
            capture, self._capture = self._capture, None
            driver.destroy_stream(capture)

    def _free_buffers(self) -> int:
        """Free every buffer (the caller holds the lock, and the workspace is not pinned);
        returns the bytes freed."""
        held = self.nbytes
        for buf in self._buffers.values():
            buf.close()
        self._buffers.clear()
        return held

    def side_stream(self) -> tuple[int, object, object]:
        """A second stream (non-blocking) and two events for forking work off the main
        stream and joining it back; created on first use, kept."""
        if self._side is None:
            self._side = (int(driver.new_stream()), driver.new_event(), driver.new_event())
        return self._side

    def capture_stream(self) -> int:
        """A stream (non-blocking) on which calls are captured into graphs and nothing
        runs; created on first use, kept."""
        if self._capture is None:
            self._capture = int(driver.new_stream())
        return self._capture

    def pinned_read(self, count: int) -> driver.PinnedRead:
        """The workspace's page-locked read of ``count`` doubles (the contract's certificate),
        made on first use and kept: one call at a time uses it (under ``lock``)."""
        if count not in self._reads:
            self._reads[count] = driver.PinnedRead(count)
        return self._reads[count]

    def moduli(self) -> int:
        """The whole moduli table as device int32, uploaded once: N moduli are its first N."""
        if self._moduli is None:
            table = np.array(MODULI_TABLE, dtype=np.int32)
            moduli, stream = driver.DeviceBuffer(table.nbytes), int(driver.new_stream())
            try:  # on a stream of its own (the call's may be captured), in relaxed mode
                with driver.relaxed_capture():
                    moduli.upload(table, stream)  # synchronous: done before any kernel reads it
            finally:
                driver.destroy_stream(stream)
            self._moduli = moduli
        return self._moduli.ptr

    def drop(self, *names: str) -> None:
        """Free the named buffers (those held), e.g. what a call allocated for a plan it
        gives up; freeing waits for the GPU's work that may still read them."""
        for name in names:
            buf = self._buffers.pop(name, None)
            if buf is not None:
                self.replays.clear()
                self._retire(buf)

    def get(self, name: str, nbytes: int) -> int:
        buf = self._buffers.get(name)
        if buf is None or buf.nbytes < nbytes:
            if buf is not None:
                self.replays.clear()
                self._retire(buf)
                del self._buffers[name]
            try:
                buf = self._allocate(nbytes)
            except driver.OutOfMemoryError as exc:
                held = sum(b.nbytes for b in self._buffers.values())
                raise driver.OutOfMemoryError(
                    f"out of GPU memory: the emulation needs {nbytes / 2**30:.2f} GiB more for its workspace "
                    f"buffer '{name}' (it already holds {held / 2**30:.2f} GiB on this GPU and stream; "
                    "ozaki_cutlass.workspace_bytes(m, n, k) says what a call needs). Free memory held "
                    "elsewhere, call ozaki_cutlass.empty_cache() to release the emulation's workspaces, "
                    "or use a smaller problem, fewer moduli or policy='native'") from exc
            self._buffers[name] = buf
        return buf.ptr

    def _allocate(self, nbytes: int) -> driver.DeviceBuffer:
        """A buffer of ``nbytes``; out of memory, once more after the idle other workspaces of
        this GPU freed theirs (where they held any)."""
        try:
            return driver.DeviceBuffer(max(nbytes, 16))
        except driver.OutOfMemoryError:
            if self._reclaim is None or not self._reclaim():
                raise
        return driver.DeviceBuffer(max(nbytes, 16))


class WorkspacePool:
    """The process's workspaces, one per (GPU, stream), least recently used first.
    :meth:`clear` frees their buffers (after the work already enqueued on each stream) and
    reports how much it freed. A stream is known by its id (driver.stream_key), not its
    handle, which the driver reuses for a stream made after one destroyed."""

    def __init__(self, per_device: int = WORKSPACES_PER_DEVICE):
        self._lock = threading.Lock()
        self._per_device = per_device
        self._spaces: dict[tuple[int, int], Workspace] = {}

    def get(self, device: int, stream: int, stream_key=None) -> Workspace:
        """The workspace of ``stream`` on ``device`` (per thread for the per-thread default
        stream: driver.stream_key, the driver's id of the stream; ``stream_key``, where the
        caller already has it, is taken instead of asking the driver again). A new one closes
        and forgets the least recently used idle ones of that GPU beyond ``per_device`` (a
        stream or thread per task leaves nothing behind); one already kept is found with the
        stream's id and a dict lookup."""
        key = (device, driver.stream_key(stream) if stream_key is None else stream_key)
        with self._lock:
            ws = self._spaces.pop(key, None)
            fresh = ws is None
            if fresh:
                ws = Workspace(reclaim=lambda: self._reclaim(device, ws), touch=lambda: self._touch(key, ws),
                               captured=driver.names_capture(key[1]))
            self._spaces[key] = ws  # the most recently used, last
            if not fresh:
                return ws
            older = [(k, w) for k, w in self._spaces.items() if k[0] == device and w is not ws]
        over = len(older) - (self._per_device - 1)
        if over > 0:
            with driver.on_device(device):
                for old_key, old in older:
                    if over == 0:
                        break
                    if old.shed(close=True) is not None:
                        over -= 1
                        self._forget(old_key, old)
        return ws

    def hold(self, device: int, stream: int, stream_key=None) -> Held:
        """``with pool.hold(device, stream) as ws:`` the workspace of ``stream`` on ``device``
        (``get``, ``stream_key`` as there) with its lock held for the block: a call's
        enqueuing. One that a new stream's workspace closed between the lookup and the lock
        is forgotten here, and another taken."""
        return Held(self, device, stream, stream_key)

    def _forget(self, key: tuple[int, int], ws: Workspace) -> None:
        """Drop ``ws`` (closed) where the pool still keeps it under ``key``."""
        with self._lock:
            if self._spaces.get(key) is ws:
                del self._spaces[key]

    def _touch(self, key: tuple[int, int], ws: Workspace) -> None:
        """Make ``ws`` the most recently used, where the pool still keeps it under ``key``."""
        with self._lock:
            if self._spaces.get(key) is ws:
                self._spaces[key] = self._spaces.pop(key)

    def _reclaim(self, device: int, keep: Workspace) -> int:
        """Free the buffers of every idle workspace of ``device`` but ``keep`` (which ran out
        of memory); returns the bytes freed. They stay in the pool (a call may be about to
        take one)."""
        with self._lock:
            others = [w for (d, _), w in self._spaces.items() if d == device and w is not keep]
        with driver.on_device(device):
            return sum(ws.shed() or 0 for ws in others)

    def nbytes(self) -> int:
        """Device memory the workspaces hold, all GPUs and streams together."""
        with self._lock:
            return sum(ws.nbytes for ws in self._spaces.values())

    def clear(self) -> int:
        """Free every workspace buffer not pinned for a caller's graph; returns the bytes
        freed. Freeing waits for each GPU's work (a stream handle the caller may have
        destroyed since is never touched), in relaxed capture mode: a capture in any
        thread goes on."""
        with self._lock:
            spaces = [(device, ws) for (device, _), ws in self._spaces.items() if ws.nbytes]
        freed = 0
        for device, ws in spaces:
            with driver.on_device(device):
                freed += ws.release()
        return freed


class Held:
    """What :meth:`WorkspacePool.hold` returns: entered, the workspace, locked until the exit."""

    __slots__ = ("pool", "device", "stream", "key", "ws")

    def __init__(self, pool: WorkspacePool, device: int, stream: int, stream_key=None):
        self.pool, self.device, self.stream = pool, device, stream
        self.key = driver.stream_key(stream) if stream_key is None else stream_key

    def __enter__(self) -> Workspace:
        while True:
            ws = self.pool.get(self.device, self.stream, self.key)
            ws.lock.acquire()
            if not ws.closed:
                self.ws = ws
                return ws
            ws.lock.release()  # closed for a new stream's after get found it: it goes, another comes
            self.pool._forget((self.device, self.key), ws)

    def __exit__(self, *exc) -> None:
        self.ws.lock.release()


#: The one WorkspacePool of the process.
WORKSPACES = WorkspacePool()
#: The complex layer's buffers (realified operands, the real product), apart: a complex
#: call holds their lock while its real call takes WORKSPACES' (always in that order).
COMPLEX_WORKSPACES = WorkspacePool()


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
