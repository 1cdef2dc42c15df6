"""torch.ops.ozaki.gemm on CPU tensors (the reference's bits): the operator's registration
(opcheck: schema, fake tensor, autograd, AOT dispatch), gradients, torch.compile without
graph breaks. The CUDA side: tests/gpu/test_torch_op_gpu.py. PyTorch is optional."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ozaki_cutlass.torch_op as ozt  # noqa: E402  (after the skip)
from ozaki_cutlass import reference  # noqa: E402
from ozaki_cutlass.numerics.accuracy import random_matrix, same_bits  # noqa: E402


def tensors(m, k, n, phi=1.0, seed=0, grad=False):
    rng = np.random.default_rng(seed)
    a = torch.from_numpy(random_matrix(m, k, phi, rng)).requires_grad_(grad)
    b = torch.from_numpy(random_matrix(k, n, phi, rng)).requires_grad_(grad)
    return a, b


def test_the_references_bits():
    a, b = tensors(9, 33, 7, phi=4.0)
    assert same_bits(ozt.matmul(a, b).numpy(), reference.gemm(a.numpy(), b.numpy()))
    got = ozt.matmul(a, b, moduli=11, mode="fast")
    assert same_bits(got.numpy(), reference.gemm(a.numpy(), b.numpy(), moduli=11, mode="fast"))
    assert same_bits(ozt.matmul(a.t().contiguous().t(), b).numpy(), ozt.matmul(a, b).numpy())  # strides


def test_opcheck():
    a, b = tensors(6, 10, 5, grad=True)
    torch.library.opcheck(torch.ops.ozaki.gemm.default, (a, b, None, None, None, "auto"))
    torch.library.opcheck(torch.ops.ozaki.gemm.default, (a, b, 14, "accurate", None, "emulate"))


def test_gradients_flow_through_the_same_emulation():
    a, b = tensors(8, 12, 6, grad=True)
    c = ozt.matmul(a, b)
    g = torch.from_numpy(random_matrix(8, 6, 1.0, np.random.default_rng(3)))
    c.backward(g)
    assert same_bits(a.grad.numpy(), reference.gemm(g.numpy(), b.detach().numpy().T))
    assert same_bits(b.grad.numpy(), reference.gemm(a.detach().numpy().T, g.numpy()))
    a2, b2 = tensors(4, 5, 3, grad=True)
    assert torch.autograd.gradcheck(lambda x, y: ozt.matmul(x, y), (a2, b2))


def test_compile_traces_without_graph_breaks():
    a, b = tensors(16, 24, 8)

    def f(x, y):
        return torch.relu(ozt.matmul(x, y)) * 2.0

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    assert same_bits(compiled(a, b).numpy(), f(a, b).numpy())
    explained = torch._dynamo.explain(f)(a, b)
    assert explained.graph_break_count == 0


def test_bad_input_is_refused():
    a, b = tensors(3, 4, 5)
    with pytest.raises(TypeError, match="float64"):
        ozt.matmul(a.float(), b)
    with pytest.raises(ValueError, match="inner dimensions"):
        ozt.matmul(a, a)
    with pytest.raises(ValueError, match="2-D"):
        ozt.matmul(a[0], b)
    with pytest.raises(ValueError, match="accuracy"):
        ozt.matmul(a, b, accuracy=2.0)
