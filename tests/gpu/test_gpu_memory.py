"""GPU memory on the GPU: an out-of-memory call raises our error and the library stays
usable, empty_cache gives the workspaces' memory back, workspace_bytes bounds what a call
keeps, and PyTorch tensors that require grad are refused on every path (issue 17)."""

import numpy as np
import pytest

import ozaki_cutlass
from ozaki_cutlass import reference
from ozaki_cutlass.device import driver
from ozaki_cutlass.numerics.accuracy import random_matrix, same_bits

pytestmark = pytest.mark.gpu


def _free_bytes() -> int:
    free, _ = driver.check(driver.bindings().cuMemGetInfo(), "cuMemGetInfo")
    return int(free)


def _kept() -> int:
    """What the workspaces hold after empty_cache: the buffers of those that earlier tests'
    captures pinned (device.workspace), which stay for the process."""
    ozaki_cutlass.empty_cache()
    return ozaki_cutlass.memory_held()


def test_out_of_memory_then_the_next_call_works(rng):
    cp = pytest.importorskip("cupy")
    # int32 planes of 15 x 65536 x 65536 (257 GB) cannot fit: the staged path runs out
    # in its workspace, after the small buffers and the residues
    a = cp.asarray(random_matrix(65536, 256, 0.5, rng))
    b = cp.asarray(random_matrix(256, 65536, 0.5, rng))
    with pytest.raises(ozaki_cutlass.OutOfMemoryError, match="out of GPU memory.*'c32'.*empty_cache") as info:
        ozaki_cutlass.gemm(a, b, path="staged")
    assert isinstance(info.value, MemoryError)
    del a, b
    cp.get_default_memory_pool().free_all_blocks()
    ha, hb = random_matrix(96, 80, 1.0, rng), random_matrix(80, 72, 1.0, rng)
    got = ozaki_cutlass.gemm(cp.asarray(ha), cp.asarray(hb), path="staged")
    assert same_bits(cp.asnumpy(got), reference.gemm(ha, hb))


def test_empty_cache_gives_the_memory_back(rng):
    cp = pytest.importorskip("cupy")
    m = n = k = 2048
    ha, hb = random_matrix(m, k, 0.5, rng), random_matrix(k, n, 0.5, rng)
    a, b = cp.asarray(ha), cp.asarray(hb)
    pinned = _kept()
    with cp.cuda.Stream(non_blocking=True) as stream:  # a workspace holding only this call's buffers
        for path in ("staged", "fused"):
            ozaki_cutlass.gemm(a, b, path=path, moduli=15)
        stream.synchronize()
    held = ozaki_cutlass.memory_held() - pinned
    assert 0 < held <= ozaki_cutlass.workspace_bytes(m, n, k, moduli=15) * 2
    cp.cuda.Device().synchronize()
    before = _free_bytes()
    assert ozaki_cutlass.empty_cache() >= held
    assert ozaki_cutlass.memory_held() == pinned
    assert _free_bytes() - before >= 0.9 * held  # the driver has the memory back
    got = ozaki_cutlass.gemm(a, b, path="fused")  # buffers made again on demand
    assert same_bits(cp.asnumpy(got), reference.gemm(ha, hb))


def test_a_stream_per_task_holds_at_most_so_many_workspaces(rng):
    """A stream per call, each destroyed after its call: the oldest streams' buffers go
    as new ones come (device.workspace.WORKSPACES_PER_DEVICE), the results are the reference's,
    and what stays held is that many calls' workspaces at most."""
    cp = pytest.importorskip("cupy")
    from ozaki_cutlass.device.workspace import WORKSPACES_PER_DEVICE

    ha, hb = random_matrix(256, 192, 0.5, rng), random_matrix(192, 160, 0.5, rng)
    want = reference.gemm(ha, hb, moduli=15)
    a, b = cp.asarray(ha), cp.asarray(hb)
    pinned = _kept()
    for _ in range(WORKSPACES_PER_DEVICE + 8):
        stream = cp.cuda.Stream(non_blocking=True)  # often a destroyed one's handle: a new workspace
        with stream:
            got = cp.asnumpy(ozaki_cutlass.gemm(a, b, moduli=15))  # copied on that stream
        assert same_bits(got, want)
        del stream  # destroyed: its workspace is freed later without touching it
    held = ozaki_cutlass.memory_held() - pinned
    assert 0 < held <= WORKSPACES_PER_DEVICE * ozaki_cutlass.workspace_bytes(256, 160, 192, moduli=15)


def test_workspace_bytes_bounds_one_call(rng):
    cp = pytest.importorskip("cupy")
    pinned = _kept()
    for path, (m, n, k) in (("staged", (300, 200, 500)), ("fused", (256, 384, 1000))):
        a = cp.asarray(random_matrix(m, k, 0.5, rng))
        b = cp.asarray(np.asfortranarray(random_matrix(k, n, 0.5, rng)))
        with cp.cuda.Stream(non_blocking=True):
            ozaki_cutlass.gemm(a, b, path=path, mode="accurate")
        held = ozaki_cutlass.memory_held() - pinned
        assert 0 < held <= ozaki_cutlass.workspace_bytes(m, n, k, path=path)
        ozaki_cutlass.empty_cache()


def test_workspace_bytes_bounds_a_complex_call(rng, monkeypatch):
    """Both workspaces a complex call keeps (the complex layer's and the realified
    product's, Karatsuba's parts among them) within workspace_bytes(dtype=complex128)."""
    cp = pytest.importorskip("cupy")
    monkeypatch.setenv("OZAKI_KARATSUBA_MIN", "0")
    pinned = _kept()
    m, n, k = 200, 120, 300
    a = cp.asarray(random_matrix(m, k, 0.5, rng) + 1j * random_matrix(m, k, 0.5, rng))
    b = cp.asarray(random_matrix(k, n, 0.5, rng) + 1j * random_matrix(k, n, 0.5, rng))
    for path in ("staged", "fused"):
        timings = {}
        ozaki_cutlass.gemm(a, b, alpha=0.5, path=path, timings=timings)
        held = ozaki_cutlass.memory_held() - pinned  # the call is on the legacy stream, never captured
        assert ("products" in timings) is (path == "staged")   # Karatsuba ran on the staged path
        assert 0 < held <= ozaki_cutlass.workspace_bytes(m, n, k, path=path, dtype=np.complex128)
        ozaki_cutlass.empty_cache()


def test_tensors_that_require_grad_are_refused(rng):
    torch = pytest.importorskip("torch")
    ha, hb = random_matrix(64, 48, 1.0, rng), random_matrix(48, 40, 1.0, rng)
    a, b = torch.from_numpy(ha).cuda(), torch.from_numpy(hb).cuda()
    ga = a.clone().requires_grad_()
    for policy in ("auto", "emulate", "native"):
        with pytest.raises(TypeError, match=r"a is a PyTorch tensor that requires grad.*a\.detach\(\)"):
            ozaki_cutlass.gemm(ga, b, policy=policy)
    with pytest.raises(TypeError, match=r"x is a PyTorch tensor that requires grad"):
        ozaki_cutlass.prepare(ga)
    # the native fast lane: a shape decided native, then the same shape with a tensor that
    # requires grad must not be computed without its gradient
    first = ozaki_cutlass.gemm(a, b)
    assert ozaki_cutlass.gemm(a, b).equal(first)
    with pytest.raises(TypeError, match="requires grad"):
        ozaki_cutlass.gemm(a, b.clone().requires_grad_())
    assert same_bits(ozaki_cutlass.gemm(ga.detach(), b, policy="emulate").cpu().numpy(), reference.gemm(ha, hb))
