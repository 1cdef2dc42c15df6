"""The native lane's bookkeeping, on the CPU: which calls get a fast lane (fast_lane._new_lane),
that forgetting the tables forgets the decisions, and how LtDgemm chooses and keeps its
cuBLASLt algorithm per pointer alignment (against a fake libcublasLt that records what it
is asked). The real library runs in tests/gpu/test_native.py."""

import ctypes
import math
import types

import numpy as np

import pytest

from ozaki_cutlass import dispatch
from ozaki_cutlass.device import cublas
from ozaki_cutlass.device.cublas import LtDgemm
from ozaki_cutlass.device.layouts import plan_dgemm
from ozaki_cutlass.dispatch.policy import DECISIONS
from ozaki_cutlass.paths import fast_lane
from ozaki_cutlass.paths.native import decision_key
from ozaki_cutlass.device.arrays import Matrix


def key(a_shape, a_strides, b_shape, b_strides, dtypes=("d", "d"), devices=(0, 0), mode="accurate"):
    """A CuPy-style lane key: byte strides."""
    return (a_shape, a_strides, dtypes[0], devices[0], b_shape, b_strides, dtypes[1], devices[1], mode)


@pytest.fixture
def lanes(monkeypatch):
    """Decisions and lanes of this test only; every GPU's context is 7; LtDgemm objects
    replaced by the plan they were made from."""
    DECISIONS.clear()
    monkeypatch.setattr(fast_lane.driver, "primary_context", lambda ordinal: 7)
    monkeypatch.setattr(fast_lane.cublas, "lt_dgemm", lambda plan, context: (plan, context))
    return fast_lane


def decide(m, n, k, native, device=0, mode="accurate"):
    DECISIONS.native[decision_key(m, n, k, mode, device)] = native   # OZAKI_TUNING_TABLE unset (conftest)


def test_a_lane_waits_for_the_general_path_to_decide(lanes):
    k = key((6, 4), (32, 8), (4, 5), (40, 8))
    assert lanes._new_lane(k, 1, True) is None
    assert k not in DECISIONS.lanes           # nothing stored: the next call looks again
    decide(6, 5, 4, True)
    lane = lanes._new_lane(k, 1, True)
    assert DECISIONS.lanes[k] is lane
    assert (lane.shape, lane.context) == ((6, 5), 7)
    plan, context = lane.lt
    assert context == 7 and plan == plan_dgemm(Matrix(0, 6, 4, 4, 1, "", 0, None), Matrix(0, 4, 5, 5, 1, "", 0, None),
                                               Matrix(0, 6, 5, 5, 1, "", 0, None))
    assert lane.swap is plan.transposed is True  # row-major out: cuBLAS computes O^T, b first


def test_a_decision_under_another_table_makes_no_lane(lanes, monkeypatch):
    monkeypatch.setenv("OZAKI_TUNING_TABLE", "/elsewhere/table.json")
    DECISIONS.native[decision_key(6, 5, 4, "accurate", 0)] = True   # decided under that table
    monkeypatch.delenv("OZAKI_TUNING_TABLE")
    assert lanes._new_lane(key((6, 4), (32, 8), (4, 5), (40, 8)), 1, True) is None
    monkeypatch.setenv("OZAKI_TUNING_TABLE", "/elsewhere/table.json")
    assert lanes._new_lane(key((6, 4), (32, 8), (4, 5), (40, 8)), 1, True) is not None


def test_column_major_operands_read_as_transposes(lanes):
    decide(6, 5, 4, True)
    lane = lanes._new_lane(key((6, 4), (8, 48), (4, 5), (8, 32)), 1, True)   # Fortran-order a and b
    # the output is row-major, so cuBLAS computes O^T = B^T A^T (b first); column-major
    # operands read as transposes there
    assert lane.lt[0].transposed is lane.swap is True
    assert (lane.lt[0].transa, lane.lt[0].transb, lane.lt[0].lda, lane.lt[0].ldb) == (True, True, 4, 6)


@pytest.mark.parametrize("why, k, unit, float64", [
    ("emulation decided", key((6, 4), (32, 8), (4, 5), (40, 8)), 1, True),
    ("not float64", key((6, 4), (32, 8), (4, 5), (40, 8), dtypes=("f", "d")), 1, False),
    ("two GPUs", key((6, 4), (32, 8), (4, 5), (40, 8), devices=(0, 1)), 1, True),
    ("3-D", key((2, 6, 4), (192, 32, 8), (4, 5), (40, 8)), 1, True),
    ("shapes do not chain", key((6, 3), (24, 8), (4, 5), (40, 8)), 1, True),
    ("stride not a whole element", key((6, 4), (33, 8), (4, 5), (40, 8)), 1, True),
    ("negative stride", key((6, 4), (-32, 8), (4, 5), (40, 8)), 1, True),
    ("no unit stride", key((6, 4), (64, 16), (4, 5), (40, 8)), 1, True),
])
def test_calls_the_lane_leaves_to_the_general_path(lanes, why, k, unit, float64):
    decide(6, 5, 4, why != "emulation decided")
    decide(6, 5, 3, True)
    assert lanes._new_lane(k, unit, float64) is None, why
    if why in ("emulation decided", "no unit stride", "negative stride", "not float64"):
        assert DECISIONS.lanes[k] is None      # remembered: later calls skip the work


@pytest.mark.parametrize("shape", [(0, 5, 4), (6, 0, 4), (6, 5, 0)])
def test_empty_problems_take_the_general_path(lanes, shape):
    m, n, k = shape
    decide(m, n, k, True)
    assert lanes._new_lane(key((m, k), (8 * k, 8), (k, n), (8 * n, 8)), 1, True) is None


def test_torch_strides_are_elements(lanes):
    decide(6, 5, 4, True)
    k = ((6, 4), (4, 1), "float64", 0, (4, 5), (5, 1), "float64", 0, "accurate")
    lane = lanes._new_lane(k, 8, True)
    assert lane is not None and lane.lt[0].ldb == 4 and lane.lt[0].lda == 5


class _FakeCupy:
    """What the CuPy lane reads of CuPy: the current GPU (0), a new array, the current stream."""

    class ndarray:
        def __init__(self, shape, dtype):
            self.shape, self.data = shape, types.SimpleNamespace(ptr=0x9000, device_id=0)

    cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: 0),
                                 get_current_stream=lambda: types.SimpleNamespace(ptr=0x51))


def _fake_cupy_array(shape, ptr):
    strides = (8 * shape[1], 8)
    return types.SimpleNamespace(shape=shape, strides=strides, dtype=np.dtype("d"),
                                 data=types.SimpleNamespace(ptr=ptr, device_id=0))


@pytest.mark.parametrize("current", [7, 9, 0])
def test_the_lane_runs_only_under_the_gpus_primary_context(lanes, monkeypatch, current):
    """A context of the caller's own (9), or none (0), current: the general path, which
    makes the primary context (7) current, takes the call; nothing is allocated or run."""
    runs = []
    monkeypatch.setattr(fast_lane.cublas, "lt_dgemm",
                        lambda plan, context: types.SimpleNamespace(run=lambda *args: runs.append(args)))
    monkeypatch.setattr(fast_lane.cublas, "handles", lambda context: ("handles", context))
    monkeypatch.setattr(fast_lane.driver, "current_context", lambda: current)
    decide(6, 5, 4, True)
    a, b = _fake_cupy_array((6, 4), 0x1000), _fake_cupy_array((4, 5), 0x2000)
    out = fast_lane._cupy_lane(_FakeCupy, a, b, 2.0, "accurate")
    if current == 7:
        assert out.shape == (6, 5) and runs == [(("handles", 7), 0x2000, 0x1000, 0x9000, 2.0, 0.0, 0x51)]
    else:
        assert out is None and runs == []


def test_unknown_array_types_have_no_lane():
    import numpy as np

    assert fast_lane.fast_lane(np.ones((2, 2)), np.ones((2, 2)), 1.0, "accurate") is None
    assert fast_lane.fast_lane([[1.0]], np.ones((1, 1)), 1.0, "accurate") is None


def test_forgetting_the_tables_forgets_the_decisions(monkeypatch):
    DECISIONS.remember((1, 1, 1, "accurate", 0, None), True)
    DECISIONS.remember_lane(("k",), None)
    dispatch.forget_tables()
    assert DECISIONS.native == {} and DECISIONS.lanes == {}


# --------------------------------------------------------------------------- LtDgemm, fake library

class FakeStatus(Exception):
    """What nvmath's bindings raise for a status other than success."""

    def __init__(self, status):
        super().__init__(status)
        self.status = status


class FakeLt:
    """nvmath's cuBLASLt binding, faked: records what LtDgemm asks; ``offer``: whether the
    heuristic has an algorithm; ``status``: what cublasLtMatmul returns. Arguments come as
    integers (addresses for the host values), as nvmath takes them."""

    from nvmath.bindings.cublasLt import MatmulDescAttribute, MatmulPreferenceAttribute, \
        matmul_heuristic_result_dtype

    def __init__(self, offer=True, status=0, workspace_only=False):
        self.offer, self.status, self.workspace_only = offer, status, workspace_only
        self.alignments, self.matmuls, self.layouts, self.workspace_allowed = [], [], [], []

    def __getattr__(self, name):
        return lambda *args: 0      # create, destroy, set attribute

    def matrix_layout_create(self, dtype, rows, cols, ld):
        self.layouts.append((rows, cols, ld))
        return 100 + len(self.layouts)

    def matmul_preference_set_attribute(self, pref, attr, ptr, size):
        value = (ctypes.c_uint64 if size == 8 else ctypes.c_uint32).from_address(ptr).value
        if attr == 5:               # the minimum alignment of A
            self.alignments.append(value)
        if attr == 1:               # the workspace the heuristic may assume
            self.workspace = value

    def matmul_algo_get_heuristic(self, *args):
        requested, results_ptr, count_ptr = args[-3:]
        self.workspace_allowed.append(self.workspace)
        if not self.offer:
            raise FakeStatus(15)    # CUBLAS_STATUS_NOT_SUPPORTED
        dtype = self.matmul_heuristic_result_dtype
        results = np.frombuffer((ctypes.c_char * (requested * dtype.itemsize)).from_address(results_ptr), dtype)
        # first an algorithm that needs a workspace (never to be taken), then two that do not
        answers = [(2000, 1 << 20), (1000 + self.alignments[-1], 0), (3000, 0)][:requested]
        if self.workspace_only:
            answers = answers[:1]
        for i, (tag, workspace) in enumerate(answers):
            results["algo"]["data_"][i, 0], results["workspace_size"][i], results["state"][i] = tag, workspace, 0
        ctypes.c_int32.from_address(count_ptr).value = len(answers)

    def matmul(self, handle, desc, alpha, a, la, b, lb, beta, c, lc, d, ld, algo, ws, ws_size, stream):
        """cublasLtMatmul as nvmath takes it: integers, host values by address."""
        for x in (handle, desc, alpha, a, la, b, lb, beta, c, lc, d, ld, algo, ws, ws_size, stream):
            assert type(x) is int
        assert ws == 0 and ws_size == 0 and (lc, ld) == (103, 103)
        self.matmuls.append((a, b, c, d, ctypes.c_double.from_address(alpha).value,
                             ctypes.c_double.from_address(beta).value, ctypes.c_uint64.from_address(algo).value,
                             ws_size, stream))
        if self.status:
            raise FakeStatus(self.status)


class FakeLibraries:
    """What cublas.library() returns, over a FakeLt."""

    from nvmath.bindings import cublas as blas

    def __init__(self, lt):
        self.lt, self.errors, self.op_n, self.op_t = lt, (FakeStatus,), 0, 1

    def call(self, what, fn, *args):
        try:
            return fn(*args)
        except FakeStatus as exc:
            raise cublas.CublasError(what, exc.status) from None


class FakeHandles:
    def __init__(self, lt):
        self.lib, self.lt = FakeLibraries(lt), 9


def make(plan, lt):
    return LtDgemm(FakeLibraries(lt), plan)


PLAN = plan_dgemm(Matrix(0, 6, 4, 4, 1, "", 0, None), Matrix(0, 4, 8, 8, 1, "", 0, None),
                  Matrix(0, 6, 8, 8, 1, "", 0, None))   # lda = 8, ldb = 4, ldc = 8 (column-major O^T)


def test_layouts_follow_the_plan():
    lt = FakeLt()
    make(PLAN, lt)
    m, n, k = PLAN.m, PLAN.n, PLAN.k
    a_rows, a_cols = (k, m) if PLAN.transa else (m, k)
    b_rows, b_cols = (n, k) if PLAN.transb else (k, n)
    assert lt.layouts == [(a_rows, a_cols, PLAN.lda), (b_rows, b_cols, PLAN.ldb), (m, n, PLAN.ldc)]


def test_one_heuristic_per_alignment_the_first_algorithm_needing_no_workspace():
    lt = FakeLt()
    gemm, handles = make(PLAN, lt), FakeHandles(lt)
    # ld 4 and 8 elements: 32 bytes is the most the leading dimensions allow
    for a, b, c in [(0, 256, 512), (4096, 8192, 0), (32, 0, 0), (8, 0, 0), (16, 0, 0), (40, 0, 0)]:
        gemm.run(handles, a, b, c, 2.0, 0.5, 123)
    assert lt.alignments == [32, 8, 16]          # 32 chosen once, then 8, then 16; 40 -> 8 again
    assert lt.workspace_allowed == [32 << 20] * 3
    # never the answer needing a workspace (2000), the first that needs none
    assert [call[6] for call in lt.matmuls] == [1032, 1032, 1032, 1008, 1016, 1008]
    assert all(call[4:6] == (2.0, 0.5) and call[7:] == (0, 123) for call in lt.matmuls)
    assert lt.matmuls[0][:4] == (0, 256, 512, 512)   # D is C


def test_the_leading_dimension_caps_the_alignment():
    wide = plan_dgemm(Matrix(0, 6, 4, 32, 1, "", 0, None), Matrix(0, 4, 8, 32, 1, "", 0, None),
                      Matrix(0, 6, 8, 32, 1, "", 0, None))   # every ld 32 elements = 256 bytes
    lt = FakeLt()
    make(wide, lt).run(FakeHandles(lt), 0, 1 << 20, 2 << 20, 1.0, 0.0, 0)
    assert lt.alignments == [256]


@pytest.mark.parametrize("lt", [FakeLt(offer=False), FakeLt(workspace_only=True)], ids=["none", "workspace only"])
def test_no_algorithm_falls_back_to_cublas_dgemm(monkeypatch, lt):
    calls = []
    monkeypatch.setattr(cublas, "_blas_dgemm", lambda *args: calls.append(args[2:]))
    gemm = make(PLAN, lt)
    for _ in range(2):
        gemm.run(FakeHandles(lt), 0, 256, 512, 1.5, 0.0, 5)
    assert lt.matmuls == [] and calls == [(0, 256, 512, 1.5, 0.0, 5)] * 2
    assert lt.alignments == [32]                  # asked once, the answer (none) kept


def test_alpha_one_and_beta_zero_are_passed_exactly():
    lt = FakeLt()
    gemm, handles = make(PLAN, lt), FakeHandles(lt)
    for alpha, beta in [(1.0, 0.0), (1.0, -0.0), (-1.0, 1.0), (0.0, 0.0)]:
        gemm.run(handles, 0, 0, 0, alpha, beta, 0)
    assert [call[4:6] for call in lt.matmuls] == [(1.0, 0.0), (1.0, 0.0), (-1.0, 1.0), (0.0, 0.0)]
    assert [math.copysign(1.0, call[5]) for call in lt.matmuls] == [1.0, -1.0, 1.0, 1.0]


def test_a_failed_matmul_says_so():
    lt = FakeLt(status=7)
    with pytest.raises(cublas.CublasError, match=r"cublasLtMatmul\(m=8, n=6, k=4\).*INVALID_VALUE"):
        make(PLAN, lt).run(FakeHandles(lt), 0, 0, 0, 1.0, 0.0, 0)


class FakeBlas:
    """cuBLAS's legacy entry points as nvmath's bindings give them: each call recorded by
    its description (which holds m, n, k)."""

    def __init__(self):
        self.calls = []
        self.blas = types.SimpleNamespace(set_stream="set_stream", dgemm_strided_batched="dgemm_strided_batched",
                                          zgemm="zgemm", zgemm_strided_batched="z",
                                          Operation=types.SimpleNamespace(N=0, T=1, C=2))
        self.op_n, self.op_t = 0, 1

    def call(self, what, fn, *args):
        self.calls.append(what)


@pytest.fixture
def blas(monkeypatch):
    lib = FakeBlas()
    plans = []
    monkeypatch.setattr(cublas, "library", lambda: lib)
    monkeypatch.setattr(cublas, "handles", lambda context: types.SimpleNamespace(blas=lambda: 0))
    monkeypatch.setattr(cublas, "_blas_dgemm", lambda found, plan, *args: plans.append(plan))
    monkeypatch.setattr(cublas, "lt_dgemm", lambda plan, context: pytest.fail("cuBLASLt reads A and B"))
    lib.plans = plans
    return lib


@pytest.mark.parametrize("alpha", [0.0, -0.0])
def test_alpha_zero_reads_neither_operand(blas, alpha):
    """BLAS's convention, which the reference and the emulation keep: alpha == 0 reads
    neither A nor B (cuBLAS would multiply them, NaN and Inf reaching C): every cuBLAS
    entry point is called with k = 0, which cuBLAS defines as C = beta C."""
    cublas.dgemm(PLAN, alpha, 0.5, 0, context=7)
    assert [(p.m, p.n, p.k) for p in blas.plans] == [(PLAN.m, PLAN.n, 0)]
    cublas.dgemm_strided_batched(PLAN, (24, 32, 48), 3, alpha, 0.0, 0, context=7)
    cublas.zgemm(PLAN, ("N", "N"), complex(alpha), 0.5j, 0, context=7)
    cublas.zgemm(PLAN, ("N", "T"), complex(alpha), 0j, 0, batched=((24, 32, 48), 3), context=7)
    assert blas.calls[1::2] == [f"cublasDgemmStridedBatched(m={PLAN.m}, n={PLAN.n}, k=0, batch=3)",
                                f"cublasZgemm_v2(m={PLAN.m}, n={PLAN.n}, k=0)",
                                f"cublasZgemmStridedBatched(m={PLAN.m}, n={PLAN.n}, k=0, batch=3)"]
    cublas.zgemm(PLAN, ("N", "N"), 1e-300j, 0j, 0, context=7)  # not zero: the product
    assert blas.calls[-1] == f"cublasZgemm_v2(m={PLAN.m}, n={PLAN.n}, k={PLAN.k})"


def test_alpha_zero_takes_the_general_path(monkeypatch):
    """The lane runs cuBLASLt with the caller's alpha: alpha == 0 never reaches it."""
    import ozaki_cutlass
    from ozaki_cutlass import api

    asked = []
    monkeypatch.setattr(api, "fast_lane", lambda a, b, alpha, mode: asked.append(alpha))
    monkeypatch.setattr(api, "execute", lambda call: "general")
    a, b = np.ones((3, 4)), np.ones((4, 2))
    assert ozaki_cutlass.gemm(a, b, alpha=0.0) == "general" and asked == []
    assert ozaki_cutlass.gemm(a, b, alpha=2.0) == "general" and asked == [2.0]
