"""Which driver calls end a CUDA graph capture in global mode (PyTorch's default), made by
another thread or by the capturing thread itself? The rule behind the relaxed calls of
ozaki_cutlass.device.driver and ozaki_cutlass.device.graphs.

For each call below, the main thread begins a global-mode capture on a new non-blocking
stream, then the call is made, by a second thread or by the main thread, in the thread's
own global mode or inside ``cuThreadExchangeStreamCaptureMode(RELAXED)``, and the
capture's status is read after it: "active" where the capture survived, "invalidated"
where the call ended it. The calls touch neither the capturing stream nor anything it
captured.
    python scripts/capture_probe.py

Measured on 2026-12-06 05:47 UTC, one H100 80GB HBM3 (driver 580.159.04), this script
(at 05:37 without the graph rows, the same elsewhere), the same for either thread:
cuMemAlloc, cuMemFree, cuMemHostAlloc/cuMemFreeHost, cuStreamSynchronize (of the legacy
stream or any other), cuEventSynchronize, cuEventQuery, cuGraphInstantiate and
cuGraphExecDestroy ended the capture when made in the thread's global mode and left it
active in relaxed mode; cuCtxSynchronize ended it in both modes. Copies on the legacy stream, event create, record and destroy, stream
create and destroy and cuGraphDestroy left it active in either mode. At 06:50 UTC (same GPU
and driver, this script with the cuStreamGetId row) cuStreamGetId of another stream left it
active in every mode; an ad-hoc probe at 06:56 UTC (not kept) read the id of the capturing
stream itself: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and the capture invalidated, for a
global or relaxed capture, from either thread, in either mode (why driver.stream_key never
asks it of a stream being captured)."""

import argparse
import threading

import numpy as np

from ozaki_cutlass.device import driver


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    cu = driver.bindings()
    driver.ensure_context(0)
    host = np.ones(1000)
    buf = driver.DeviceBuffer(host.nbytes)
    side = driver.new_stream()
    event = driver.new_event()
    driver.check(cu.cuEventRecord(event, side), "cuEventRecord")
    legacy = cu.CUstream(0)
    graphs = [small_graph(cu, side, buf) for _ in range(8)]  # four fates each, made before any capture
    execs = [driver.check(cu.cuGraphInstantiate(small_graph(cu, side, buf), 0), "cuGraphInstantiate")
             for _ in range(4)]
    calls = {
        "cuMemAlloc + cuMemFree": lambda: cu.cuMemFree(driver.check(cu.cuMemAlloc(64), "cuMemAlloc")),
        "cuMemcpyHtoDAsync (pageable), legacy stream": lambda: cu.cuMemcpyHtoDAsync(
            buf.ptr, host.ctypes.data, host.nbytes, legacy),
        "cuMemcpyDtoHAsync (pageable), legacy stream": lambda: cu.cuMemcpyDtoHAsync(
            host.ctypes.data, buf.ptr, host.nbytes, legacy),
        "cuStreamSynchronize, legacy stream": lambda: cu.cuStreamSynchronize(legacy),
        "cuStreamSynchronize, another stream": lambda: cu.cuStreamSynchronize(side),
        "cuEventSynchronize": lambda: cu.cuEventSynchronize(event),
        "cuEventQuery": lambda: cu.cuEventQuery(event),
        "cuEventCreate + cuEventRecord + cuEventDestroy": lambda: cu.cuEventDestroy(
            driver.check(cu.cuEventCreate(0), "cuEventCreate")),
        "cuStreamCreate + cuStreamDestroy": lambda: cu.cuStreamDestroy(
            driver.check(cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate")),
        "cuMemHostAlloc + cuMemFreeHost": lambda: cu.cuMemFreeHost(
            driver.check(cu.cuMemHostAlloc(64, 0), "cuMemHostAlloc")),
        "cuGraphInstantiate + cuGraphExecDestroy": lambda: cu.cuGraphExecDestroy(
            driver.check(cu.cuGraphInstantiate(graphs.pop(), 0), "cuGraphInstantiate")),
        "cuGraphExecDestroy": lambda: cu.cuGraphExecDestroy(execs.pop()),
        "cuGraphDestroy": lambda: cu.cuGraphDestroy(graphs.pop()),
        "cuStreamGetId": lambda: cu.cuStreamGetId(side),
        "cuCtxSynchronize": lambda: cu.cuCtxSynchronize(),
    }
    print(f"{'':48s} {'another thread':>29s} {'the capturing thread':>29s}")
    print(f"{'call':48s} {'global':>14s} {'relaxed':>14s} {'global':>14s} {'relaxed':>14s}")
    for name, call in calls.items():
        fates = [capture_fate(cu, call, relaxed, same) for same in (False, True) for relaxed in (False, True)]
        print(f"{name:48s} " + " ".join(f"{fate:>14s}" for fate in fates), flush=True)
    buf.close()


def small_graph(cu, stream, buf):
    """A captured (not instantiated) graph of one memset of ``buf`` on ``stream``."""
    driver.check(cu.cuStreamBeginCapture(stream, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED),
                 "cuStreamBeginCapture")
    driver.check(cu.cuMemsetD8Async(buf.ptr, 0, 64, stream), "cuMemsetD8Async")
    return driver.check(cu.cuStreamEndCapture(stream), "cuStreamEndCapture")


def capture_fate(cu, call, relaxed: bool, same_thread: bool) -> str:
    """Capture a new stream in global mode while another thread (or, ``same_thread``, the
    capturing one) makes ``call``: the capture's status after it ("active" or
    "invalidated")."""
    stream = driver.new_stream()
    driver.check(cu.cuStreamBeginCapture(stream, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL),
                 "cuStreamBeginCapture")

    def other():
        driver.ensure_context(0)
        try:
            if relaxed:
                with driver.relaxed_capture():
                    call()
            else:
                call()
        except driver.CudaError:  # the call refused: what the capture's status tells
            pass

    if same_thread:
        other()
    else:
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    status = driver.check(cu.cuStreamIsCapturing(stream), "cuStreamIsCapturing")
    err, graph = cu.cuStreamEndCapture(stream)
    if err == cu.CUresult.CUDA_SUCCESS and graph is not None:
        cu.cuGraphDestroy(graph)
    driver.destroy_stream(stream)
    active = status == cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE
    return "active" if active else "invalidated"


if __name__ == "__main__":
    main()
