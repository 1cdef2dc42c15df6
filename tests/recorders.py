"""Recording stand-ins for the GPU pieces a path calls (stage kernels, the INT8 GEMM), so
that CPU tests check what a path launches, with which arguments, without a GPU."""


class Calls:
    """Records every call made through any attribute, with its arguments (each returns 0)."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return lambda *args: self.calls.append((name, args)) or 0


class Gemm(Calls):
    """An INT8 GEMM: its launches recorded as "gemm"; it needs no workspace."""

    def __call__(self, *args):
        self.calls.append(("gemm", args))

    def workspace_size(self, *args):
        return 0


class OnePool:
    """A workspace pool of one workspace, ``ws``, for every GPU and stream: ``hold`` locks
    its ``lock`` for the block, as the pool's does (device.workspace.WorkspacePool);
    ``keys`` the stream keys its callers gave (None: the pool asks the driver)."""

    def __init__(self, ws):
        self.ws = ws
        self.keys = []

    def get(self, device, stream, stream_key=None):
        self.keys.append(stream_key)
        return self.ws

    def hold(self, device, stream, stream_key=None):
        self.keys.append(stream_key)
        return _Locked(self.ws)


class _Locked:
    def __init__(self, ws):
        self.ws = ws

    def __enter__(self):
        self.ws.lock.acquire()
        return self.ws

    def __exit__(self, *exc):
        self.ws.lock.release()
