"""PyTorch integration: ``torch.ops.ozaki.gemm``, a custom operator with a fake (meta)
implementation and autograd, so that ``torch.compile`` traces it without graph breaks and
gradients flow through it. Importing this module registers it (PyTorch stays optional:
nothing else in the package imports this module).

    import ozaki_cutlass.torch_op as ozt
    c = ozt.matmul(a, b)                    # a (m x k), b (k x n): float64 tensors
    c = torch.ops.ozaki.gemm(a, b, None, None, None, "auto")

CUDA tensors run ``ozaki_cutlass.gemm`` (on the tensors' current stream); CPU tensors run
``ozaki_cutlass.reference.gemm``, which gives the same bits. The settings are gemm's:
``moduli`` (None: the accuracy contract), ``mode``, ``accuracy`` (None means "dgemm"; a
number is the contract's target) and ``policy``. The backward products, dA = dC B^T and
dB = A^T dC, go through the same operator with the same settings, so they follow the same
accuracy rules.
"""

from __future__ import annotations

from typing import Optional

import torch

from . import api, reference

__all__ = ["matmul"]


def _strided(x: torch.Tensor) -> torch.Tensor:
    """``x`` as gemm takes it: a broadcast view (a zero stride, as autograd's expanded
    gradients have) is copied out; anything else goes as it is."""
    x = x.detach()
    return x.contiguous() if any(s <= 0 for s in x.stride()) else x


def _run(a: torch.Tensor, b: torch.Tensor, moduli, mode, accuracy, policy) -> torch.Tensor:
    kwargs = dict(moduli=moduli, mode=mode, accuracy=accuracy, policy=policy)
    if a.device.type == "cuda":
        return api.gemm(_strided(a), _strided(b), **kwargs)
    out = reference.gemm(a.detach().numpy(), b.detach().numpy(), **kwargs)
    return torch.from_numpy(out)


def _check(a: torch.Tensor, b: torch.Tensor) -> None:
    for name, x in (("a", a), ("b", b)):
        if x.dtype != torch.float64:
            raise TypeError(f"ozaki::gemm: {name} must be float64, got {x.dtype}")
        if x.dim() != 2:
            raise ValueError(f"ozaki::gemm: {name} must be 2-D, got shape {tuple(x.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"ozaki::gemm: inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    if a.device != b.device:
        raise ValueError(f"ozaki::gemm: a is on {a.device}, b on {b.device}")


@torch.library.custom_op("ozaki::gemm", mutates_args=())
def _gemm(a: torch.Tensor, b: torch.Tensor, moduli: Optional[int] = None, mode: Optional[str] = None,
          accuracy: Optional[float] = None, policy: str = "auto") -> torch.Tensor:
    _check(a, b)
    return _run(a, b, moduli, mode, accuracy, policy)


@_gemm.register_fake
def _(a, b, moduli=None, mode=None, accuracy=None, policy="auto"):
    _check(a, b)
    return a.new_empty((a.shape[0], b.shape[1]))


def _setup_context(ctx, inputs, output):
    a, b, moduli, mode, accuracy, policy = inputs
    ctx.save_for_backward(a, b)
    ctx.settings = (moduli, mode, accuracy, policy)


def _backward(ctx, grad):
    a, b = ctx.saved_tensors
    grad_a = grad_b = None
    if ctx.needs_input_grad[0]:
        grad_a = torch.ops.ozaki.gemm(grad, b.t(), *ctx.settings)
    if ctx.needs_input_grad[1]:
        grad_b = torch.ops.ozaki.gemm(a.t(), grad, *ctx.settings)
    return grad_a, grad_b, None, None, None, None


_gemm.register_autograd(_backward, setup_context=_setup_context)


def matmul(a: torch.Tensor, b: torch.Tensor, *, moduli: int | None = None, mode: str | None = None,
           accuracy: float | None = None, policy: str = "auto") -> torch.Tensor:
    """a @ b through ``torch.ops.ozaki.gemm`` (differentiable; traceable by torch.compile)."""
    return torch.ops.ozaki.gemm(a, b, moduli, mode, accuracy, policy)
