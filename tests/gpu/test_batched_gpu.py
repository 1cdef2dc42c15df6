"""Batched GEMM on the GPU: the loop's bits (the reference's) for emulated batches on CuPy
and PyTorch arrays, broadcasting and complex; one cublasDgemmStridedBatched where the auto
policy decides native, against CuPy's batched matmul."""

import numpy as np
import pytest

import ozaki_cutlass
from ozaki_cutlass import dispatch, reference
from ozaki_cutlass.dispatch.policy import DECISIONS
from ozaki_cutlass.numerics.accuracy import random_matrix, same_bits

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")


def stack(rng, batch, m, n, phi=1.0):
    return np.stack([random_matrix(m, n, phi, rng) for _ in range(batch)])


class Producer:
    def __init__(self, arr):
        self._arr = arr
        self.__cuda_array_interface__ = arr.__cuda_array_interface__


@pytest.mark.parametrize("settings", [dict(policy="emulate"), dict(moduli=14, mode="fast"),
                                      dict(moduli=15, path="fused", trans_b=True), dict(moduli=13, path="staged")])
def test_emulated_batches_have_the_loops_bits(rng, settings):
    a, b, c = stack(rng, 4, 96, 80), stack(rng, 4, 80, 64), stack(rng, 4, 96, 64)
    if settings.get("trans_b"):
        b = b.transpose(0, 2, 1).copy()
    want = reference.gemm(a, b, c=c, alpha=0.5, beta=2.0, **{k: v for k, v in settings.items() if k != "path"})
    timings = {}
    got = ozaki_cutlass.gemm(cp.asarray(a), cp.asarray(b), c=cp.asarray(c), alpha=0.5, beta=2.0, timings=timings,
                             **settings)
    assert isinstance(got, cp.ndarray) and got.shape == (4, 96, 64) and same_bits(got.get(), want)
    assert timings["batch"] == 4
    single = {}   # where the dispatcher runs one element staged, the batch shares its INT8 launches
    ozaki_cutlass.gemm(cp.asarray(a[0]), cp.asarray(b[0]), c=cp.asarray(c[0]), timings=single, **settings)
    if single["path"] == "staged":   # one INT8 launch (k is one chunk) per run of elements with one choice
        assert timings["path"] == "staged" and timings["int8_launches"] == _runs(timings)
    else:
        assert timings["batched"] == "one call per element"


def _runs(timings) -> int:
    """The runs of consecutive emulated elements with one moduli count and mode."""
    if "contract" not in timings:
        return 1
    picked = [(c["moduli"], c["mode"]) for c in timings["contract"] if not c["native"]]
    return sum(1 for i, p in enumerate(picked) if i == 0 or p != picked[i - 1])


def test_a_batch_whose_elements_choose_differently_has_the_loops_bits(rng, monkeypatch):
    """The contract's choice is each element's own (one whose inner dimension the
    equilibration evens out needs fewer moduli): the batch runs in several INT8 launches,
    each element with the loop's bits, NaN/Inf and c included; and again with at most two
    elements per launch."""
    from ozaki_cutlass.paths import staged_batch

    a, b, c = stack(rng, 5, 64, 48), random_matrix(48, 40, 1.0, rng), stack(rng, 5, 64, 40)
    a[2] *= np.ldexp(1.0, rng.integers(-40, 41, (1, 48)))   # inner scales: equilibrated, fewer moduli
    a[3, 5, 7], c[4, 0, 0] = np.nan, np.inf
    want = np.stack([reference.gemm(a[i], b, c=c[i], alpha=-1.25, beta=0.5, policy="emulate") for i in range(5)])
    picked = [reference.contract(a[i], b, policy="emulate").moduli for i in range(5)]
    assert len(set(picked)) > 1
    for bytes_per_launch in (None, 2):
        if bytes_per_launch:
            per = staged_batch.BATCH_BYTES // staged_batch.batch_slots(max(picked), 64, 40, 48)
            monkeypatch.setattr(staged_batch, "BATCH_BYTES", 2 * per)
        timings = {}
        got = ozaki_cutlass.gemm(cp.asarray(a), cp.asarray(b), c=cp.asarray(c), alpha=-1.25, beta=0.5,
                                 policy="emulate", path="staged", timings=timings)
        assert same_bits(got.get(), want)
        assert [ch["moduli"] for ch in timings["contract"]] == picked
        assert timings["int8_launches"] >= _runs(timings) >= 2


def test_broadcast_torch_complex_and_foreign(rng):
    torch = pytest.importorskip("torch")
    a, b = stack(rng, 3, 40, 50), random_matrix(50, 30, 1.0, rng)
    want = reference.gemm(a, b, policy="emulate")
    assert same_bits(ozaki_cutlass.gemm(cp.asarray(a), cp.asarray(b), policy="emulate").get(), want)
    got = ozaki_cutlass.gemm(torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda"), policy="emulate")
    assert got.shape == (3, 40, 30) and same_bits(got.cpu().numpy(), want)
    za, zb = a + 1j * a[::-1], b - 2j * b
    assert same_bits(ozaki_cutlass.gemm(cp.asarray(za), cp.asarray(zb), policy="emulate").get(),
                     reference.gemm(za, zb, policy="emulate"))
    out = cp.empty((3, 40, 30))
    got = ozaki_cutlass.gemm(Producer(cp.asarray(a)), Producer(cp.asarray(b)), out=Producer(out), policy="emulate")
    assert same_bits(out.get(), want)
    with pytest.raises(ValueError, match="needs out="):
        ozaki_cutlass.gemm(Producer(cp.asarray(a)), Producer(cp.asarray(b)), policy="emulate")


@pytest.mark.parametrize("broadcast", [None, "a", "b"])
def test_native_batches_are_one_strided_batched_call(rng, broadcast):
    batch, m, k, n = 16, 128, 96, 64
    a = cp.asarray(stack(rng, batch, m, k)) if broadcast != "a" else cp.asarray(random_matrix(m, k, 1.0, rng))
    b = cp.asarray(stack(rng, batch, k, n)) if broadcast != "b" else cp.asarray(random_matrix(k, n, 1.0, rng))
    timings = {}
    got = ozaki_cutlass.gemm(a, b, policy="native", timings=timings, alpha=1.5)
    assert timings["kernel"] == "cublasDgemmStridedBatched" and timings["batched"] == "one launch"
    assert cp.allclose(got, 1.5 * cp.matmul(a, b), rtol=1e-13, atol=1e-13)
    timings = {}
    ozaki_cutlass.gemm(a, b, timings=timings)  # small elements: auto decides native too
    assert timings["kernel"] == "cublasDgemmStridedBatched", timings


def cstack(rng, batch, m, n):
    return stack(rng, batch, m, n) + 1j * stack(rng, batch, m, n)


@pytest.mark.parametrize("flags, broadcast", [(("N", "N"), None), (("T", "C"), None), (("C", "N"), "b"),
                                              (("N", "T"), "a")])
def test_native_complex_batches_are_one_zgemm_strided_batched_call(rng, flags, broadcast):
    batch, m, k, n = 12, 48, 40, 24
    a0 = cstack(rng, batch, m, k) if broadcast != "a" else cstack(rng, 1, m, k)[0]
    b0 = cstack(rng, batch, k, n) if broadcast != "b" else cstack(rng, 1, k, n)[0]
    op = {"N": lambda x: x, "T": lambda x: np.swapaxes(x, -1, -2).copy(),
          "C": lambda x: np.swapaxes(x, -1, -2).conj().copy()}
    a, b = cp.asarray(op[flags[0]](a0)), cp.asarray(op[flags[1]](b0))  # op(a) = a0 (op is an involution here)
    alpha = 0.5 - 2j
    timings = {}
    got = ozaki_cutlass.gemm(a, b, trans_a=flags[0], trans_b=flags[1], alpha=alpha, policy="native",
                             timings=timings)
    want = alpha * np.matmul(a0, b0)
    single = {}   # one launch exactly where a single complex call of these layouts is one cublasZgemm_v2
    ozaki_cutlass.gemm(a if a.ndim == 2 else a[0], b if b.ndim == 2 else b[0], trans_a=flags[0], trans_b=flags[1],
                       policy="native", timings=single)
    assert single["kernel"] == "cublasZgemm_v2" or flags != ("N", "N")   # row-major, no conjugate: one call
    if single["kernel"] == "cublasZgemm_v2":
        assert timings["kernel"] == "cublasZgemmStridedBatched" and timings["batched"] == "one launch"
    else:   # conjugation without a transpose in cuBLAS's terms: one call per element
        assert timings["batched"] == "one call per element"
    assert got.dtype == np.complex128 and np.allclose(got.get(), want, rtol=1e-13, atol=1e-12)
    again = ozaki_cutlass.gemm(a, b, trans_a=flags[0], trans_b=flags[1], policy="native")   # the lane, if any
    assert np.allclose(again.get(), np.matmul(a0, b0), rtol=1e-13, atol=1e-12)


def test_the_native_batched_lane_reuses_the_plan_with_each_calls_pointers(rng):
    dispatch.forget_tables()
    batch, m, k, n = 8, 64, 48, 32
    a1, b1 = cp.asarray(stack(rng, batch, m, k)), cp.asarray(stack(rng, batch, k, n))
    first = ozaki_cutlass.gemm(a1, b1, policy="native")          # decides and keeps the lane
    a2, b2 = cp.asarray(stack(rng, batch, m, k)), cp.asarray(stack(rng, batch, k, n))
    second = ozaki_cutlass.gemm(a2, b2, policy="native", alpha=-2.0)   # the lane, new pointers
    assert any(key[0] == "batched" and lane is not None for key, lane in DECISIONS.lanes.items())
    assert cp.allclose(first, cp.matmul(a1, b1), rtol=1e-13, atol=1e-13)
    assert cp.allclose(second, -2.0 * cp.matmul(a2, b2), rtol=1e-13, atol=1e-13)
    assert second.shape == (batch, m, n) and second.data.ptr != first.data.ptr


def test_the_native_batched_lane_still_refuses_what_the_general_path_refuses(rng):
    dispatch.forget_tables()
    batch, m, k, n = 4, 32, 16, 24
    a, b = cp.asarray(stack(rng, batch, m, k)), cp.asarray(stack(rng, batch, k, n))
    ozaki_cutlass.gemm(a, b, policy="native")          # decides and keeps the lane
    with pytest.raises(ValueError, match="beta"):
        ozaki_cutlass.gemm(a, b, policy="native", beta=1.0)   # beta without c: not the lane's call
    with pytest.raises(ValueError):
        ozaki_cutlass.gemm(a, cp.asarray(stack(rng, batch, k + 1, n)), policy="native")


def test_the_native_batched_lane_on_torch_tensors(rng):
    torch = pytest.importorskip("torch")
    dispatch.forget_tables()
    batch, m, k, n = 6, 40, 24, 16
    a, b = (torch.as_tensor(stack(rng, batch, r, c), device="cuda") for r, c in ((m, k), (k, n)))
    first = ozaki_cutlass.gemm(a, b, policy="native")
    second = ozaki_cutlass.gemm(a, b[0], policy="native", alpha=0.5)    # broadcast b: its own lane
    third = ozaki_cutlass.gemm(a, b, policy="native")                   # the lane
    assert sum(key[:2] == ("batched", "torch") for key in DECISIONS.lanes) == 2
    assert torch.equal(first, third) and third.data_ptr() != first.data_ptr()
    assert torch.allclose(first, torch.matmul(a, b), rtol=1e-13, atol=1e-13)
    assert torch.allclose(second, 0.5 * torch.matmul(a, b[0]), rtol=1e-13, atol=1e-13)
    grad = a.clone().requires_grad_(True)
    with pytest.raises(TypeError, match="requires grad"):
        ozaki_cutlass.gemm(grad, b, policy="native")    # refused by the general path, not run by the lane
