"""Batched GEMM (ozaki_cutlass.batched) on the NumPy reference: the loop of single calls,
bit for bit, with broadcasting, c, flags and complex operands; the refusals, in the same
words as ozaki_cutlass.gemm's. The GPU side: tests/gpu/test_batched_gpu.py."""

import re

import numpy as np
import pytest

import ozaki_cutlass
from ozaki_cutlass import reference as R
from ozaki_cutlass.numerics.accuracy import random_matrix, same_bits


def stack(rng, batch, m, n, phi=1.0):
    return np.stack([random_matrix(m, n, phi, rng) for _ in range(batch)])


@pytest.mark.parametrize("settings", [dict(), dict(moduli=13, mode="accurate"), dict(trans_a=True, trans_b="C")])
def test_a_batch_is_the_loop_of_single_calls(rng, settings):
    a, b, c = stack(rng, 5, 12, 9), stack(rng, 5, 9, 7), stack(rng, 5, 12, 7)
    if settings.get("trans_a"):
        a = a.transpose(0, 2, 1).copy()
    if settings.get("trans_b"):
        b = b.transpose(0, 2, 1).copy()
    got = R.gemm(a, b, c=c, alpha=1.5, beta=-0.5, **settings)
    want = [R.gemm(a[i], b[i], c=c[i], alpha=1.5, beta=-0.5, **settings) for i in range(5)]
    assert got.shape == (5, 12, 7) and all(same_bits(got[i], want[i]) for i in range(5))


def test_a_2d_operand_is_broadcast(rng):
    a, b = stack(rng, 4, 6, 8), random_matrix(8, 5, 1.0, rng)
    got = R.gemm(a, b)
    assert all(same_bits(got[i], R.gemm(a[i], b)) for i in range(4))
    got = R.gemm(b.T.copy(), a.transpose(0, 2, 1).copy())          # 2-D a, 3-D b
    assert got.shape == (4, 5, 6) and same_bits(got[2], R.gemm(b.T.copy(), a[2].T.copy()))


def test_complex_batches_and_an_empty_batch(rng):
    a = stack(rng, 3, 5, 6) + 1j * stack(rng, 3, 5, 6)
    b = stack(rng, 3, 6, 4) + 1j * stack(rng, 3, 6, 4)
    got = R.gemm(a, b, alpha=1j)
    assert got.dtype == np.complex128 and all(same_bits(got[i], R.gemm(a[i], b[i], alpha=1j)) for i in range(3))
    assert R.gemm(np.zeros((0, 5, 6)), np.zeros((0, 6, 4))).shape == (0, 5, 4)


@pytest.mark.parametrize("args, kwargs, words", [
    ((np.ones((3, 2, 2)), np.ones((4, 2, 2))), {}, "batch sizes differ: a has 3, b has 4"),
    ((np.ones((3, 2, 2)), np.ones((3, 2, 2))), dict(c=np.ones((2, 2)), beta=1.0), "c of a batched call must be 3-D"),
    ((np.ones((3, 2, 2)), np.ones((3, 2, 2))), dict(c=np.ones((2, 2, 2)), beta=1.0), "c must have batch size 3"),
    ((np.ones((3, 2, 2, 1)), np.ones((3, 2, 2))), {},
     "a must be 2-D (gemm also takes 3-D: a batch), got 4-D with shape (3, 2, 2, 1)"),
])
def test_refusals_in_the_same_words(args, kwargs, words):
    for fn in (R.gemm, ozaki_cutlass.gemm):
        with pytest.raises(ValueError, match=re.escape(words)):
            fn(*args, **kwargs)


def test_a_wrong_out_is_refused_before_any_launch():
    a, b = np.ones((3, 2, 4)), np.ones((4, 5))
    with pytest.raises(ValueError, match=re.escape("out must have shape (3, 2, 5), got (3, 5, 2)")):
        ozaki_cutlass.gemm(a, b, out=np.empty((3, 5, 2)))
    with pytest.raises(ValueError, match=re.escape("out must have shape (3, 2, 5), got (3, 4, 5)")):
        ozaki_cutlass.gemm(np.ones((3, 4, 2)), b, trans_a=True, out=np.empty((3, 4, 5)))


def test_beta_without_c_is_refused_before_anything_runs():
    a, b = np.ones((2, 3, 4)), np.ones((2, 4, 5))
    with pytest.raises(ValueError, match="beta != 0 needs c"):
        ozaki_cutlass.gemm(a, b, beta=0.5, out=np.zeros((2, 3, 5)))


@pytest.mark.parametrize("alpha", [np.complex64(1 + 1j), np.complex128(1j), 1j])
def test_a_complex_scalar_on_a_real_batch_is_refused(alpha):
    a, b = np.ones((2, 3, 4)), np.ones((2, 4, 5))
    for fn in (R.gemm, ozaki_cutlass.gemm):
        with pytest.raises(TypeError, match="alpha must be a real number"):
            fn(a, b, alpha=alpha)
        with pytest.raises(TypeError, match="alpha must be a real number"):
            fn(a[:0], b[:0], alpha=alpha)


@pytest.mark.parametrize("fn", [R.gemm, ozaki_cutlass.gemm])
def test_an_empty_batch_checks_what_its_elements_would(fn):
    a, b = np.zeros((0, 3, 4)), np.zeros((0, 4, 5))
    assert fn(a, b).dtype == np.float64 and fn(a + 0j, b + 0j).dtype == np.complex128
    with pytest.raises(TypeError, match="a must be float64, got float32"):
        fn(a.astype(np.float32), b)
    with pytest.raises(TypeError, match="b must be float64, got int64"):
        fn(a, b.astype(np.int64))
    with pytest.raises(TypeError, match="a must be complex128, got float64"):
        fn(a, b + 0j)
    with pytest.raises(ValueError, match="beta != 0 needs c"):
        fn(a, b, beta=1.0)


def test_out_over_another_elements_operands_is_refused(rng):
    """Element 0's result would overwrite a[2] before element 2 reads it."""
    a, b, c = stack(rng, 3, 4, 4), stack(rng, 3, 4, 4), stack(rng, 3, 4, 4)
    for kwargs, name in ((dict(out=a[::-1]), "a"), (dict(out=b), "b"), (dict(out=a[:, ::-1], c=a, beta=1.0), "a"),
                         (dict(out=c[:, :, ::-1], c=c, beta=1.0), "c")):
        with pytest.raises(ValueError, match=f"out overlaps {name}"):
            ozaki_cutlass.gemm(a, b, **kwargs)


def test_out_may_be_c_itself_in_a_batch(rng, monkeypatch):
    import ozaki_cutlass.batched as batched

    class ReachedTheRun(Exception):
        pass

    def stop(*args, **kwargs):
        raise ReachedTheRun

    monkeypatch.setattr(batched, "execute_batch", stop)
    a, b, c = stack(rng, 3, 4, 4), stack(rng, 3, 4, 4), stack(rng, 3, 4, 4)
    for kwargs in (dict(c=c, beta=1.0, out=c), dict(c=c, beta=0.0, out=c[:, ::-1])):
        with pytest.raises(ReachedTheRun):
            ozaki_cutlass.gemm(a, b, **kwargs)


def test_a_list_is_named_as_what_it_is():
    for kwargs in (dict(b=np.ones((2, 4, 5)).tolist()), dict(b=np.ones((2, 4, 5)), c=np.ones((2, 3, 5)).tolist())):
        with pytest.raises(TypeError, match="must be an array .* got list|must be a numpy.ndarray, got list"):
            ozaki_cutlass.gemm(np.ones((2, 3, 4)), beta=1.0, **kwargs)
    with pytest.raises(TypeError, match="c must be a numpy.ndarray, got list"):
        R.gemm(np.ones((2, 3, 4)), np.ones((2, 4, 5)), c=np.ones((2, 3, 5)).tolist(), beta=1.0)


class _Dev3:
    def __init__(self, shape, ptr, readonly=False):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f8", "data": (ptr, readonly), "version": 3,
                                         "strides": None}


@pytest.fixture
def native_batches(monkeypatch):
    """A fake GPU where the auto policy decides native and cublasDgemmStridedBatched is
    recorded; pointers' GPU: their bit 40 and up, as set in ``where``."""
    import types

    from ozaki_cutlass import batched
    from ozaki_cutlass.device import arrays, driver
    from ozaki_cutlass.generator import Arch

    where = {}
    monkeypatch.setattr(arrays, "pointer_device", lambda p: where.get(p >> 40 << 40, 0))
    monkeypatch.setattr(driver, "ensure_context", lambda ordinal=0: 1)
    monkeypatch.setattr(driver, "bindings", lambda: types.SimpleNamespace(
        CUresult=types.SimpleNamespace(CUDA_SUCCESS=0), cuCtxGetCurrent=lambda: (0, 1)))
    monkeypatch.setattr(batched, "visible_arch", lambda ordinal=0: Arch.SM90A)
    monkeypatch.setattr(batched, "decide_settings", lambda *args, **kw: (True, "auto: native"))
    ran = []
    monkeypatch.setattr(batched.cublas, "dgemm_strided_batched", lambda *args, **kw: ran.append(args))
    monkeypatch.setattr(batched.cublas, "current_context", lambda: 1)
    return where, ran


def test_a_native_batch_makes_a_single_calls_checks(native_batches):
    """The one-launch native batch runs before the elements' own checks: arrays on two
    GPUs, or a read-only out, are refused there too (they were launched)."""
    where, ran = native_batches
    a, b = _Dev3((4, 16, 8), 1 << 40), _Dev3((4, 8, 12), 1 << 41)
    where.update({1 << 40: 0, 1 << 41: 1, 1 << 42: 1})
    with pytest.raises(ValueError, match="different GPUs"):
        ozaki_cutlass.gemm(a, b, out=_Dev3((4, 16, 12), 1 << 42))
    where.clear()
    with pytest.raises(ValueError, match="out is read-only"):
        ozaki_cutlass.gemm(a, b, out=_Dev3((4, 16, 12), 1 << 42, readonly=True))
    assert ran == []
    ozaki_cutlass.gemm(a, b, out=_Dev3((4, 16, 12), 1 << 42))  # the same on one GPU, writable: one launch
    assert len(ran) == 1



def test_timings_of_a_batch_run_call_by_call():
    """The phases are summed over the elements; any other entry is one value where every
    element agrees, else the elements' values in order (each element has its own contract
    choice: the last one's alone misreported the others)."""
    from ozaki_cutlass import batched

    runs = iter([dict(total=1.0, prologue_gemm=0.5, moduli=16, path="fused", contract={"moduli": 16}),
                 dict(total=2.0, prologue_gemm=0.25, moduli=17, path="fused", contract={"moduli": 17})])

    def gemm(a, b, *, timings, **kw):
        timings.update(next(runs))

    timings = {}
    batched.batched_gemm(gemm, np.ones((2, 3, 4), complex), np.ones((2, 4, 5), complex), timings=timings,
                         moduli=None, mode=None, kernel=None, path=None, policy="auto", accuracy=None)
    assert timings["total"] == 3.0 and timings["prologue_gemm"] == 0.75 and timings["path"] == "fused"
    assert timings["moduli"] == [16, 17] and timings["contract"] == [{"moduli": 16}, {"moduli": 17}]
    assert timings["batch"] == 2 and timings["batched"] == "one call per element"
