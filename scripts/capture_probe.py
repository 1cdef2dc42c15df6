"""Which driver calls of one thread end another thread's CUDA graph capture in global mode
(PyTorch's default)? The rule behind ozaki_cutlass.device.driver's relaxed calls.

For each call below, the main thread begins a global-mode capture on a new non-blocking
stream, a second thread makes the call (in its own global mode, or inside
``cuThreadExchangeStreamCaptureMode(RELAXED)``), and the capture's status is read after
it: "active" where the capture survived, "invalidated" where the call ended it. The
calls touch neither the capturing stream nor anything it captured.
    python scripts/capture_probe.py

Measured on 2026-12-06 (H100s, driver 580.159.04, 03:19 and 04:42 UTC) by two ad-hoc forms of this probe (the
same calls through cuda.bindings, not kept; this script has not run on a GPU yet): in the
thread's own global mode cuMemAlloc, cuMemFree, cuStreamSynchronize (of the legacy stream
or any other), cuEventSynchronize and cuEventQuery ended the capture; in relaxed mode
only cuCtxSynchronize did. Copies on the legacy stream and event create, record and
destroy left it active in either mode."""

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
        "cuCtxSynchronize": lambda: cu.cuCtxSynchronize(),
    }
    print(f"{'call in the other thread':48s} {'its own mode':>14s} {'relaxed':>14s}")
    for name, call in calls.items():
        fates = [capture_fate(cu, call, relaxed) for relaxed in (False, True)]
        print(f"{name:48s} {fates[0]:>14s} {fates[1]:>14s}")
    buf.close()


def capture_fate(cu, call, relaxed: bool) -> str:
    """Capture a new stream in global mode while another thread makes ``call``: the
    capture's status after it ("active" or "invalidated")."""
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
