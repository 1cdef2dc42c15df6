"""ozaki_cutlass.gemm rejects bad input before touching the GPU (runs without a GPU)."""

import numpy as np
import pytest

import ozaki_cutlass
from ozaki_cutlass import NoGpuError


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(a=np.ones(3), b=np.ones((3, 2))), ValueError, "a must be 2-D"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2, 1))), ValueError, "b must be 2-D"),
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
         "policy='native' runs cuBLAS"),
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
    from ozaki_cutlass._device import compute_capability

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
