"""torch.ops.ozaki.gemm on CUDA tensors: the reference's bits, opcheck, gradients and
torch.compile on the GPU."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ozaki_cutlass.torch_op as ozt  # noqa: E402
from ozaki_cutlass import reference  # noqa: E402
from ozaki_cutlass.numerics.accuracy import random_matrix, same_bits  # noqa: E402

pytestmark = pytest.mark.gpu


def cuda_tensors(m, k, n, phi=1.0, seed=0, grad=False):
    rng = np.random.default_rng(seed)
    a = torch.from_numpy(random_matrix(m, k, phi, rng)).cuda().requires_grad_(grad)
    b = torch.from_numpy(random_matrix(k, n, phi, rng)).cuda().requires_grad_(grad)
    return a, b


def test_cuda_tensors_give_the_references_bits():
    a, b = cuda_tensors(70, 130, 50, phi=4.0)
    want = reference.gemm(a.cpu().numpy(), b.cpu().numpy(), policy="emulate")
    got = ozt.matmul(a, b, policy="emulate")
    assert got.is_cuda and same_bits(got.cpu().numpy(), want)
    assert same_bits(ozt.matmul(a.t().contiguous().t(), b, policy="emulate").cpu().numpy(), want)


def test_opcheck_gradients_and_compile_on_cuda():
    a, b = cuda_tensors(24, 40, 16, grad=True)
    torch.library.opcheck(torch.ops.ozaki.gemm.default, (a, b, None, None, None, "emulate"))
    c = ozt.matmul(a, b, policy="emulate")
    g = torch.ones_like(c)
    c.backward(g)
    assert same_bits(a.grad.cpu().numpy(), reference.gemm(np.ones((24, 16)), b.detach().cpu().numpy().T,
                                                          policy="emulate"))

    def f(x, y):
        return torch.tanh(ozt.matmul(x, y, policy="emulate"))

    x, y = a.detach(), b.detach()
    assert same_bits(torch.compile(f, fullgraph=True)(x, y).cpu().numpy(), f(x, y).cpu().numpy())


def test_broadcast_views_give_the_bits_of_their_copies():
    # autograd's gradient of a sum is such a view (strides 0): the op copies it out
    _, b = cuda_tensors(24, 40, 16)
    ones = torch.ones((), dtype=torch.float64, device="cuda").expand(24, 40)
    assert ones.stride() == (0, 0)
    want = reference.gemm(np.ones((24, 40)), b.cpu().numpy(), policy="emulate")
    assert same_bits(ozt.matmul(ones, b, policy="emulate").cpu().numpy(), want)
