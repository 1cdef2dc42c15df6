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
