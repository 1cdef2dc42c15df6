"""A call's launch sequence kept as a CUDA graph and replayed (:class:`Replays`).

An emulated call enqueues 10-25 kernels from Python, and the GPU waits for the host
before the first of them and between the short ones (docs/benchmarks.md, "A call alone
and calls back to back"). Where the same work comes again (the same operands, shape and
settings: a loop over the same buffers), its launches are captured once into a CUDA graph
and later calls launch that graph: one driver call instead of the Python that enqueues
each kernel. The kernels and their arguments are the captured ones, so the bits are those
of the direct run. What the captured work returns (the runtime's: its last kernel, which
takes the call's own output and scalars) is kept with the graph and handed back.

A graph holds device addresses: those of the call's operands (part of its key: the graph
reads whatever lives there when it runs, as a direct call would) and those of the
workspace (:class:`~ozaki_cutlass.device.workspace.Workspace`, which owns one Replays
and clears it whenever it frees or replaces a buffer).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from . import driver

__all__ = ["Graph", "capture", "Replays"]


class Graph:
    """One instantiated CUDA graph (``CUgraphExec``): :meth:`launch` enqueues it on a stream."""

    def __init__(self, handle):
        self._handle = handle

    def launch(self, stream: int) -> None:
        driver.check(driver.bindings().cuGraphLaunch(self._handle, driver.as_cu_stream(stream)), "cuGraphLaunch")

    def close(self) -> None:
        """Free the graph; a launch of it already enqueued still runs (the driver frees it
        after). In relaxed capture mode: a call that replaces a workspace buffer inside the
        caller's capture in global mode frees its stream's graphs there."""
        if self._handle is not None:
            with driver.relaxed_capture():
                driver.check(driver.bindings().cuGraphExecDestroy(self._handle), "cuGraphExecDestroy")
            self._handle = None


def capture(stream: int, work: Callable[[int], Any]) -> tuple[Graph, Any]:
    """The graph of what ``work(stream)`` enqueues on ``stream`` (a non-blocking stream that
    nothing else uses; streams it forks to join the capture and must join back), and what
    ``work`` returned. Nothing runs. Relaxed mode: the capture does not forbid other
    threads' driver calls. On any error the capture is ended and discarded, and the error
    raised."""
    cu = driver.bindings()
    cs = driver.as_cu_stream(stream)
    driver.check(cu.cuStreamBeginCapture(cs, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED),
                 "cuStreamBeginCapture")
    try:
        result = work(stream)
    except BaseException:
        err, graph = cu.cuStreamEndCapture(cs)
        if err == cu.CUresult.CUDA_SUCCESS and graph is not None:
            cu.cuGraphDestroy(graph)  # harmless to any capture, in either mode
        raise
    graph = driver.check(cu.cuStreamEndCapture(cs), "cuStreamEndCapture")
    with driver.relaxed_capture():  # instantiating in global mode would end another thread's capture
        try:
            return Graph(driver.check(cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")), result
        finally:
            driver.check(cu.cuGraphDestroy(graph), "cuGraphDestroy")


class Replays:
    """Graphs of calls by key, on one workspace. :meth:`run` runs a key's first call
    directly, captures its second and launches the graph, and replays it from then on. A
    key whose capture failed runs directly from then on. At most ``capacity`` graphs are
    kept (the least recently launched goes first) and ``2 * capacity`` keys seen once.
    ``capture_graph`` is :func:`capture` (tests give a stand-in)."""

    def __init__(self, capacity: int = 16, capture_graph: Callable = capture):
        self.capacity = capacity
        self._capture = capture_graph
        self._graphs: OrderedDict[Hashable, tuple[Graph, Any]] = OrderedDict()
        self._seen: OrderedDict[Hashable, bool] = OrderedDict()  # key -> it may be captured
        self._generation = 0
        self.counts = {"direct": 0, "captured": 0, "replayed": 0}

    def __len__(self) -> int:
        return len(self._graphs)

    def run(self, key: Hashable, stream: int, capture_stream: Callable[[], int],
            work: Callable[[int], Any]) -> tuple[str, Any]:
        """Enqueue the work ``key`` on ``stream``: ``work(s)`` enqueues its launches on the
        stream ``s`` given (``stream`` for a direct run, ``capture_stream()`` while it is
        captured) and returns what the caller needs after them. Returns ("direct",
        "captured" or "replayed", that return: a replay hands back the captured run's)."""
        launched, result = self.replay(key, stream)
        if launched:
            return "replayed", result
        if not self._seen.get(key, False):
            result = work(stream)  # a key is remembered only after a run that raised nothing
            self._remember(key, key not in self._seen)
            self.counts["direct"] += 1
            return "direct", result
        generation = self._generation
        try:
            graph, result = self._capture(capture_stream(), work)
        except Exception:  # noqa: BLE001 - work that cannot be captured runs directly (and raises there if wrong)
            graph = None
        changed = generation != self._generation  # the workspace changed under the capture: try again later
        if graph is None or changed:
            if graph is not None:
                graph.close()
            result = work(stream)
            self._remember(key, changed)
            self.counts["direct"] += 1
            return "direct", result
        del self._seen[key]
        self._graphs[key] = (graph, result)
        while len(self._graphs) > self.capacity:
            self._graphs.popitem(last=False)[1][0].close()
        graph.launch(stream)
        self.counts["captured"] += 1
        return "captured", result

    def replay(self, key: Hashable, stream: int) -> tuple[bool, Any]:
        """Launch ``key``'s graph on ``stream`` where one is held, as :meth:`run` does for a
        key it replays: (True, what its captured run returned); else (False, None), and
        nothing is launched (the key's next :meth:`run` decides)."""
        held = self._graphs.get(key)
        if held is None:
            return False, None
        self._graphs.move_to_end(key)
        held[0].launch(stream)
        self.counts["replayed"] += 1
        return True, held[1]

    def _remember(self, key: Hashable, capturable: bool) -> None:
        self._seen[key] = capturable
        self._seen.move_to_end(key)
        while len(self._seen) > 2 * self.capacity:
            self._seen.popitem(last=False)

    def clear(self) -> None:
        """Free every graph and forget every key (the workspace freed or replaced a buffer
        the graphs may read)."""
        self._generation += 1
        for graph, _ in self._graphs.values():
            graph.close()
        self._graphs.clear()
        self._seen.clear()
