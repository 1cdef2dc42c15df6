"""ozaki_cutlass.gemm rejects bad input before touching the GPU (runs without a GPU)."""

import re

import numpy as np
import pytest

import ozaki_cutlass
from ozaki_cutlass import NoGpuError


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(a=np.ones(3), b=np.ones((3, 2))), ValueError, "a must be 2-D"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2, 1, 1))), ValueError, "b must be 2-D"),
        (dict(a=np.ones((2, 3)), b=np.ones((4, 2))), ValueError, "inner dimensions"),
        (dict(a=np.ones((2, 3), np.float32), b=np.ones((3, 2))), TypeError, "a must be float64"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2), np.int8)), TypeError, "b must be float64"),
        (dict(a=[[1.0]], b=np.ones((1, 1))), TypeError, "a must be a NumPy array"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2)), moduli=1), ValueError, "moduli=1"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2)), moduli=21), ValueError, "moduli=21"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2)), moduli="15"), TypeError, "moduli must be an int"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2)), mode="exact"), ValueError, "mode must be one of"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2)), c=np.ones((3, 3)), beta=1.0), ValueError, "c must have shape"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2)), beta=1.0), ValueError, "beta != 0 needs c"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2)), out=np.ones((2, 3))), ValueError, "out must have shape"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2)), timings=[]), TypeError, "timings must be a dict"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2)), policy="fast"), ValueError, "policy must be one of"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2)), policy="native", path="staged"), ValueError,
         "policy='native' runs native DGEMM: path= sets the emulation"),
    ],
)
def test_bad_input_fails_before_any_launch(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        ozaki_cutlass.gemm(**kwargs)


def test_mixed_host_and_device_arrays_rejected():
    class FakeDevice:
        __cuda_array_interface__ = {"shape": (3, 2), "typestr": "<f8", "data": (1 << 20, False),
                                    "version": 3, "strides": None}

    with pytest.raises(ValueError, match="all be NumPy arrays or all be GPU arrays"):
        ozaki_cutlass.gemm(np.ones((2, 3)), FakeDevice())


def test_unsupported_strides_rejected():
    class Strided:
        __cuda_array_interface__ = {"shape": (3, 2), "typestr": "<f8", "data": (1 << 20, False),
                                    "version": 3, "strides": (12, 4)}

    with pytest.raises(ValueError, match="not a multiple of 8"):
        ozaki_cutlass.gemm(Strided(), Strided())


def test_no_gpu_error_points_to_reference():
    from ozaki_cutlass.device.arch import compute_capability

    if compute_capability() is not None:
        pytest.skip("a GPU is visible: this checks the no-GPU message")
    with pytest.raises(NoGpuError, match="reference.gemm"):
        ozaki_cutlass.gemm(np.ones((2, 3)), np.ones((3, 2)))


def test_sizes_out_of_range_rejected():
    class Huge:
        def __init__(self, shape):
            self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f8", "data": (1 << 20, False),
                                             "version": 3, "strides": None}

    with pytest.raises(ValueError, match="k=2147483648 is out of range"):
        ozaki_cutlass.gemm(Huge((2, 2**31)), Huge((2**31, 2)))


def test_prepare_checks_before_the_gpu():
    with pytest.raises(ValueError, match="side must be one of"):
        ozaki_cutlass.prepare(np.ones((2, 2)), "top")
    with pytest.raises(TypeError, match="x must be float64"):
        ozaki_cutlass.prepare(np.ones((2, 2), np.float32))
    with pytest.raises(ValueError, match="moduli=1"):
        ozaki_cutlass.prepare(np.ones((2, 2)), moduli=1)
    with pytest.raises(TypeError, match="stream must be None, an int stream handle"):
        ozaki_cutlass.prepare(np.ones((2, 2)), stream="0")


# --------------------------------------------------------------------------- device-array inputs
# Objects that describe device memory through __cuda_array_interface__ (nothing is read
# from the addresses: every case below must fail before the GPU is touched).

def _cai(shape, typestr="<f8", strides=None, mask=None, data=1 << 20):
    return {"shape": shape, "typestr": typestr, "data": (data, False), "version": 3, "strides": strides,
            "mask": mask}


class Dev:
    def __init__(self, shape=(3, 3), **kw):
        self.__cuda_array_interface__ = _cai(shape, **kw)


class FakeCupy(Dev):
    """Looks like a CuPy array on GPU ``gpu`` (kind is read from the module name)."""
    __module__ = "cupy._core.core"

    def __init__(self, shape=(3, 3), gpu=0, **kw):
        super().__init__(shape, **kw)
        self.device = type("D", (), {"id": gpu})()


@pytest.mark.parametrize("a, match", [
    (Dev((3, 3, 1, 1)), "a must be 2-D"),
    (Dev(typestr="<f4"), "a must be float64"),
    (Dev(strides=(-24, 8)), "non-positive strides"),
    (Dev(strides=(0, 8)), "non-positive strides"),
    (Dev(mask=object()), "masked"),
])
def test_bad_device_arrays(a, match):
    with pytest.raises((ValueError, TypeError), match=match):
        ozaki_cutlass.gemm(a, Dev())
    with pytest.raises((ValueError, TypeError), match=match.replace("a must", "x must")):
        ozaki_cutlass.prepare(a)


def test_arrays_on_different_gpus():
    with pytest.raises(ValueError, match=r"different GPUs \[0, 1\]"):
        ozaki_cutlass.gemm(FakeCupy(gpu=0), FakeCupy(gpu=1), moduli=15)
    with pytest.raises(ValueError, match="different GPUs"):
        ozaki_cutlass.gemm(FakeCupy(gpu=0), FakeCupy(gpu=0), c=FakeCupy(gpu=1), beta=1.0, moduli=15)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(c=Dev(typestr="<f4"), beta=1.0), TypeError, "c must be float64"),
    (dict(out=Dev(typestr="<f4")), TypeError, "out must be float64"),
    (dict(out=np.ones((3, 3))), ValueError, "out must be of the same kind"),
    (dict(alpha="1"), TypeError, "alpha must be a real number"),
    (dict(beta=True, c=Dev()), TypeError, "beta must be a real number"),
    (dict(policy="native", kernel="i8_sm90a_256x128x128_c1x2_coop_s0_int32_g1"), ValueError, "policy='native'"),
    (dict(path="magic"), ValueError, "path must be one of"),
    (dict(kernel=3), TypeError, "kernel must be None"),
    (dict(kernel="no_such_kernel"), ValueError, "matches 0 catalogued variants"),
    (dict(kernel="i8_sm90a_128x128x128_c1x1_coop_s0_pcrt_g4", path="staged"), ValueError, "runs the fused path"),
])
def test_bad_arguments_with_device_arrays(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        ozaki_cutlass.gemm(Dev(), Dev(), **kwargs)


def test_sizes_out_of_range_rejected_by_prepare():
    with pytest.raises(ValueError, match="cols=2147483648 is out of range"):
        ozaki_cutlass.prepare(Dev((2, 2**31)))
    with pytest.raises(ValueError, match="x must be 2-D"):
        ozaki_cutlass.prepare(np.ones(3))
    with pytest.raises(TypeError, match="x must be a NumPy array"):
        ozaki_cutlass.prepare([[1.0]])
    with pytest.raises(ValueError, match="mode must be one of"):
        ozaki_cutlass.prepare(np.ones((2, 2)), mode="exact")


# --------------------------------------------------------------------------- prepared operands
# A Prepared made by hand around a device description: gemm's guard runs before the GPU.

def _prepared(side, shape, moduli=15, mode="fast", device=0, kind="cai"):
    from ozaki_cutlass import Prepared
    from ozaki_cutlass.device.arrays import Matrix

    rows, cols = shape
    src = Matrix(1 << 20, rows, cols, cols, 1, kind, device, None)
    return Prepared(side=side, moduli=moduli, mode=mode, device=device, source=src,
                    vector_set=(0, 0, 0, 0, 0), exps=0, fast=0, nonfinite=0)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(a=_prepared("right", (3, 4))), ValueError, "a is an operand prepared for side='right'"),
    (dict(b=_prepared("left", (4, 5))), ValueError, "b is an operand prepared for side='left'"),
    (dict(a=_prepared("left", (3, 5))), ValueError, "inner dimensions"),
    (dict(a=_prepared("left", (3, 4)), moduli=16), ValueError, "prepared for 15 moduli, the call asks for 16"),
    (dict(a=_prepared("left", (3, 4)), mode="accurate"), ValueError, "prepared for mode='fast'"),
    (dict(a=_prepared("left", (3, 4)), trans_a=True), ValueError, r"prepare\(trans=True\)"),
    (dict(a=_prepared("left", (3, 4)), path="fused"), ValueError, "staged path"),
    (dict(a=_prepared("left", (3, 4)), policy="native"), ValueError, "not on prepared operands"),
    (dict(a=_prepared("left", (3, 4)), path="prologue"), ValueError, "prepared operands"),
    (dict(a=_prepared("left", (3, 4), device=1), b=FakeCupy((4, 5), gpu=0)), ValueError,
     "a was prepared on GPU 1, the other arrays are on GPU 0"),
    (dict(a=_prepared("left", (3, 4), kind="numpy")), ValueError, "all be NumPy arrays or all be GPU"),
    (dict(a=_prepared("left", (3, 4)), b=_prepared("right", (4, 5), mode="accurate")), ValueError,
     "b was prepared for mode='accurate'"),
])
def test_prepared_operand_mismatches(kwargs, exc, match):
    """Every mismatch is refused with its reason, before the GPU is touched."""
    args = dict(a=Dev((3, 4)), b=Dev((4, 5))) | kwargs
    with pytest.raises(exc, match=match):
        ozaki_cutlass.gemm(**args)


def test_out_on_another_gpu():
    with pytest.raises(ValueError, match="out is on GPU 1, a and b on GPU 0"):
        ozaki_cutlass.gemm(FakeCupy(gpu=0), FakeCupy(gpu=0), out=FakeCupy(gpu=1), moduli=15)


def test_native_plan_refuses_out_overlapping_an_operand():
    """cuBLAS must not write memory it reads: such a call is not planned natively (auto
    emulates it; policy='native' refuses it)."""
    from ozaki_cutlass.device.arrays import Matrix
    from ozaki_cutlass.device.arrays import overlaps as _overlaps
    from ozaki_cutlass.paths.native import native_plan as _native_plan

    a = Matrix(1 << 20, 4, 4, 4, 1, "cai", 0, None)
    b = Matrix(2 << 20, 4, 4, 4, 1, "cai", 0, None)
    for ptr, overlaps in ((1 << 20, True), ((1 << 20) + 8 * 15, True), ((1 << 20) + 8 * 16, False),
                          (3 << 20, False)):
        out = Matrix(ptr, 4, 4, 4, 1, "cai", 0, None)
        assert _overlaps(out, a) is overlaps
        assert (_native_plan(a, b, None, out, 0.0) is None) is overlaps
    assert not _overlaps(Matrix(1 << 20, 0, 4, 4, 1, "cai", 0, None), a)  # empty


@pytest.mark.parametrize("kwargs, match", [
    (dict(out=Dev((3, 5), data=(1 << 20) + 8)), "out overlaps a"),
    (dict(out=Dev((3, 5), data=(2 << 20) + 32)), "out overlaps b"),
    (dict(c=Dev((3, 5), data=3 << 20), beta=1.0, out=Dev((3, 5), data=3 << 20, strides=(8, 24))),
     "out overlaps c in another layout"),
])
def test_out_sharing_memory_the_call_reads(kwargs, match):
    """The CRT kernels read a and b (NaN/Inf rows and columns) and c while they write out."""
    args = dict(a=Dev((3, 4), data=1 << 20), b=Dev((4, 5), data=2 << 20), moduli=15) | kwargs
    with pytest.raises(ValueError, match=match):
        ozaki_cutlass.gemm(**args)


def test_out_may_be_c_itself(monkeypatch):
    """out = c with the same layout (and out over c when beta = 0, c unread) pass the
    overlap check: the call goes on to the GPU (here a stand-in that says so)."""
    class ReachedTheGpu(Exception):
        pass

    def on_device(device):
        raise ReachedTheGpu

    monkeypatch.setattr(ozaki_cutlass.device.driver, "on_device", on_device)
    c = Dev((3, 5), data=3 << 20)
    for kwargs in (dict(c=c, beta=1.0, out=c),
                   dict(c=c, beta=0.0, out=Dev((3, 5), data=3 << 20, strides=(8, 24)))):
        with pytest.raises(ReachedTheGpu):
            ozaki_cutlass.gemm(Dev((3, 4), data=1 << 20), Dev((4, 5), data=2 << 20), moduli=15, **kwargs)


def test_policy_and_transpose_flags_checked_first():
    with pytest.raises(ValueError, match="policy must be one of"):  # before the prepared operand sets it
        ozaki_cutlass.gemm(_prepared("left", (3, 4)), Dev((4, 5)), policy="nativ")
    with pytest.raises(ValueError, match="trans_a must be one of 'N', 'T', 'C'"):
        ozaki_cutlass.gemm(Dev(), Dev(), trans_a="no")
    with pytest.raises(TypeError, match="trans_b must be False, True, 'N', 'T' or 'C'"):
        ozaki_cutlass.gemm(Dev(), Dev(), trans_b=1)
    with pytest.raises(TypeError, match="trans must be True or False"):
        ozaki_cutlass.prepare(Dev(), "left", trans="yes")


@pytest.mark.parametrize("kwargs, match", [
    (dict(kernel="i8_sm80_128x128x64_w64x64x64_ms_s4_int32_g1"), "kernel= chooses staged or fused"),
    (dict(policy="native", moduli=15), "policy='native' runs native DGEMM: moduli=, path= set the emulation"),
    (dict(), "path='prologue' runs an explicit moduli count"),
    (dict(accuracy=1e-20), "accuracy= .the contract. is not taken"),
    (dict(moduli=15, accuracy=1e-20), "give moduli= .* or accuracy= .*, not both"),
])
def test_prologue_path_refusals(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ozaki_cutlass.gemm(Dev((3, 4)), Dev((4, 5)), path="prologue", **kwargs)


# --------------------------------------------------------------------------- settings everywhere
# Calls that compute nothing (alpha == 0, an empty product, an empty batch) refuse the
# settings any other call refuses, and the reference refuses them in the same words.

_NOTHING_TO_COMPUTE = [
    (np.ones((3, 3), complex), np.ones((3, 3), complex), dict(alpha=0)),
    (np.ones((0, 3), complex), np.ones((3, 2), complex), {}),
    (np.zeros((0, 3, 4)), np.zeros((0, 4, 5)), {}),
    (np.zeros((0, 3, 4), complex), np.zeros((0, 4, 5), complex), {}),
]


@pytest.mark.parametrize("a, b, base", _NOTHING_TO_COMPUTE)
@pytest.mark.parametrize("settings, exc, match", [
    (dict(moduli=99), ValueError, "moduli=99 is outside"),
    (dict(policy="bogus"), ValueError, "policy must be one of"),
    (dict(mode="bogus"), ValueError, "mode must be one of"),
    (dict(accuracy=5.0), ValueError, "accuracy"),
    (dict(policy="native", accuracy=1e-25), ValueError, "policy='native' runs native DGEMM: accuracy= sets"),
])
def test_settings_are_checked_where_nothing_is_computed(a, b, base, settings, exc, match):
    from ozaki_cutlass import reference
    for fn in (ozaki_cutlass.gemm, reference.gemm):
        with pytest.raises(exc, match=match):
            fn(a, b, **base, **settings)


@pytest.mark.parametrize("a, b, base", _NOTHING_TO_COMPUTE)
@pytest.mark.parametrize("settings, exc, match", [
    (dict(timings=[]), TypeError, "timings must be a dict"),
    (dict(stream=object()), TypeError, "stream must be None, an int stream handle"),
    (dict(path="bogus"), ValueError, "path must be one of"),
    (dict(kernel=3), TypeError, "kernel must be None"),
])
def test_gpu_settings_are_checked_where_nothing_is_computed(a, b, base, settings, exc, match):
    with pytest.raises(exc, match=match):
        ozaki_cutlass.gemm(a, b, **base, **settings)


@pytest.mark.parametrize("settings, given", [
    (dict(moduli=15), "moduli="), (dict(accuracy=1e-20), "accuracy="), (dict(mode="fast"), "mode="),
    (dict(moduli=15, mode="fast"), "moduli=, mode="),
])
def test_native_policy_refuses_the_emulations_settings(settings, given):
    """policy='native' would drop them silently (an accuracy asked for, not met)."""
    from ozaki_cutlass import reference
    a, b = np.ones((2, 3)), np.ones((3, 2))
    for fn in (ozaki_cutlass.gemm, reference.gemm):
        with pytest.raises(ValueError, match=f"policy='native' runs native DGEMM: {given} set"):
            fn(a, b, policy="native", **settings)
        with pytest.raises(ValueError, match=f"policy='native' runs native DGEMM: {given} set"):
            fn(a.astype(complex), b.astype(complex), policy="native", **settings)
    assert np.array_equal(reference.gemm(a, b, policy="native"), a @ b)


def test_contract_under_the_native_policy_is_refused():
    from ozaki_cutlass import reference
    for fn in (ozaki_cutlass.contract, reference.contract):
        for a in (np.ones((2, 3)), np.ones((2, 3), complex)):
            with pytest.raises(ValueError, match="policy='native' runs native DGEMM: there is no contract"):
                fn(a, a.T.copy(), policy="native")
    with pytest.raises(ValueError, match="policy='native' runs native DGEMM: there is no contract"):
        ozaki_cutlass.contract(Dev((2, 3)), Dev((3, 2), data=2 << 20), policy="native")


@pytest.mark.parametrize("stream, exc, match", [
    ("0", TypeError, "got str"), (1.5, TypeError, "got float"), (True, TypeError, "got bool"),
    (-1, ValueError, "stream=-1 is not a stream handle"),
])
def test_a_bad_stream_is_refused_before_the_gpu(stream, exc, match):
    for a, b in ((np.ones((2, 3)), np.ones((3, 2))), (Dev((2, 3)), Dev((3, 2)))):
        with pytest.raises(exc, match=match):
            ozaki_cutlass.gemm(a, b, moduli=15, stream=stream)


def test_streams_of_every_kind_pass_the_check(monkeypatch):
    class ReachedTheGpu(Exception):
        pass

    def on_device(device):
        raise ReachedTheGpu

    monkeypatch.setattr(ozaki_cutlass.device.driver, "on_device", on_device)
    from cuda.bindings import driver as cu
    for stream in (None, 0, 7, np.int64(7), cu.CUstream(7), type("S", (), {"ptr": 7})(),
                   type("T", (), {"cuda_stream": 7})()):
        with pytest.raises(ReachedTheGpu):
            ozaki_cutlass.gemm(Dev((2, 3)), Dev((3, 2)), moduli=15, stream=stream)


def test_stream_handles_of_every_kind():
    """driver.stream_handle: the int handle of each kind of stream a caller may pass (an
    int as it is, before the attribute probes)."""
    from cuda.bindings import driver as cu

    from ozaki_cutlass.device.driver import stream_handle

    for stream, handle in ((None, 0), (0, 0), (7, 7), (True, 1), (np.int64(7), 7), (cu.CUstream(7), 7),
                           (type("S", (), {"ptr": 7})(), 7), (type("T", (), {"cuda_stream": 8})(), 8),
                           (type("H", (), {"handle": 9})(), 9)):
        got = stream_handle(stream)
        assert got == handle and type(got) is int, stream


def test_a_read_only_out_is_refused_before_the_gpu():
    a, b = np.ones((3, 4)), np.ones((4, 5))
    for dtype in (np.float64, np.complex128):
        with pytest.raises(ValueError, match="out is read-only"):
            ozaki_cutlass.gemm(a.astype(dtype), b.astype(dtype), out=np.broadcast_to(np.zeros(5, dtype), (3, 5)))
    cai = Dev((3, 5), data=3 << 20)
    cai.__cuda_array_interface__["data"] = (3 << 20, True)
    with pytest.raises(ValueError, match="out is read-only"):
        ozaki_cutlass.gemm(Dev((3, 4)), Dev((4, 5), data=2 << 20), moduli=15, out=cai)


def test_scalars_and_counts_at_the_edges():
    from ozaki_cutlass import reference
    a, b = np.ones((2, 3)), np.ones((3, 2))
    with pytest.raises(ValueError, match="alpha=1000.* is outside float64's range"):
        ozaki_cutlass.gemm(a, b, alpha=10**400)
    with pytest.raises(TypeError, match="a is float64 in the other byte order"):
        ozaki_cutlass.gemm(a.astype(">f8"), b)
    with pytest.raises(TypeError, match="a is float64 in the other byte order"):
        reference.gemm(a.astype(">f8"), b)
    assert np.array_equal(reference.gemm(a, b, moduli=np.int64(15)), reference.gemm(a, b, moduli=15))
    # a complex call says so whichever scalar is wrong
    z = np.ones((2, 2), complex)
    for fn in (ozaki_cutlass.gemm, reference.gemm):
        with pytest.raises(TypeError, match="alpha must be a real or complex number, got str"):
            fn(z, z, alpha="1")


def test_the_reference_reads_nothing_at_alpha_zero_under_every_policy():
    from ozaki_cutlass import reference
    a, c = np.array([[np.inf, np.nan]]), np.array([[2.0]])
    for policy in ("auto", "emulate", "native"):
        assert np.array_equal(reference.gemm(a, a.T.copy(), c=c, alpha=0.0, beta=0.5, policy=policy), 0.5 * c)


def test_contract_and_prepare_say_a_batch_is_gemms_alone():
    """A 3-D operand is a batch for gemm; contract and prepare take 2-D ones, and say so."""
    from ozaki_cutlass import reference
    words = "must be 2-D (gemm also takes 3-D: a batch), got 3-D with shape (2, 3, 4)"
    for fn in (ozaki_cutlass.contract, reference.contract):
        with pytest.raises(ValueError, match=re.escape("a " + words)):
            fn(np.ones((2, 3, 4)), np.ones((4, 5)))
    for x in (np.ones((2, 3, 4)), Dev((2, 3, 4))):
        with pytest.raises(ValueError, match=re.escape("x " + words)):
            ozaki_cutlass.prepare(x)
