"""The torch 2.13 LayerNorm second-derivative bug, minimally (issue 24; docs/your_model.md).

A scalar f(w) = Σ c ⊙ tanh(LayerNorm(x Wᵀ; γ, β)) with w = (W, γ, β), 20 parameters, float64:
the LayerNorm's input x Wᵀ and its affine weight γ both depend on w.  Its Hessian by

* ``torch.func.hessian`` (``jacfwd(jacrev(f))``) and ``jacrev(jacrev(f))``;
* ``torch.autograd.functional.hessian`` (classic autograd, one reverse pass per row);
* Hessian-vector products of ``torch.func`` one vector at a time (``jvp`` of ``grad``:
  forward-over-reverse; ``vjp`` of ``grad``: reverse-over-reverse, the toolkit's), and the same
  under ``vmap`` over the basis vectors;
* the same f with the layer norm written out in elementary operations (mean, var, sqrt),

each against central differences of ``torch.autograd`` gradients (step 1e-5, error ~1e-10 of
the largest entry): the largest entry error relative to the largest entry, the entries off by
more than 1e-6 of it, grouped by block ((row, column): W, γ, β), and the asymmetry ‖H − Hᵀ‖.

Table 2: one product H·v on a LayerNorm + residual block (218 parameters, a Linear before the
LayerNorm, MSE loss), the toolkit's (`stability.nets.problem.NetProblem.hvp`) against
curvlinops' ``HessianLinearOperator`` (needs the ``bench`` extra) and the two dense Hessians.

Run: ``python benchmarks/bench_layernorm_hessian.py``.
"""

from __future__ import annotations

import collections

import torch
from torch.func import grad, hessian, jacrev, jvp, vjp, vmap

D = torch.float64
N, IN, WIDTH = 5, 3, 4


def minimal(layer_norm: bool = True):
    """(f, w): the 20-parameter scalar of the module doc."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, IN, dtype=D, generator=g)
    c = torch.randn(N, WIDTH, dtype=D, generator=g)
    w = torch.randn(WIDTH * IN + 2 * WIDTH, dtype=D, generator=g)

    def f(w):
        W = w[: WIDTH * IN].view(WIDTH, IN)
        gamma, beta = w[WIDTH * IN : WIDTH * IN + WIDTH], w[WIDTH * IN + WIDTH :]
        a = x @ W.T
        if layer_norm:
            y = torch.nn.functional.layer_norm(a, (WIDTH,), gamma, beta)
        else:
            mu, var = a.mean(-1, keepdim=True), a.var(-1, unbiased=False, keepdim=True)
            y = (a - mu) / torch.sqrt(var + 1e-5) * gamma + beta
        return (torch.tanh(y) * c).sum()

    return f, w


def differences(f, w, eps: float = 1e-5) -> torch.Tensor:
    """Central differences of torch.autograd gradients, one column per coordinate."""

    def gradient(u):
        u = u.clone().requires_grad_()
        return torch.autograd.grad(f(u), u)[0]

    eye = torch.eye(w.numel(), dtype=D)
    return torch.stack(
        [(gradient(w + eps * e) - gradient(w - eps * e)) / (2 * eps) for e in eye], 1
    )


def minimal_table() -> None:
    f, w = minimal()
    reference = differences(f, w)
    scale = reference.abs().max()
    eye = torch.eye(w.numel(), dtype=D)
    names = ["W"] * (WIDTH * IN) + ["γ"] * WIDTH + ["β"] * WIDTH
    f_plain, _ = minimal(layer_norm=False)
    methods = {
        "torch.func.hessian (jacfwd∘jacrev)": lambda: hessian(f)(w),
        "torch.func jacrev∘jacrev": lambda: jacrev(jacrev(f))(w),
        "torch.autograd.functional.hessian": lambda: torch.autograd.functional.hessian(f, w),
        "jvp∘grad, one vector at a time": lambda: torch.stack(
            [jvp(grad(f), (w,), (e,))[1] for e in eye], 1
        ),
        "vjp∘grad, one vector at a time": lambda: torch.stack(
            [vjp(grad(f), w)[1](e)[0] for e in eye], 1
        ),
        "vmap of jvp∘grad": lambda: vmap(lambda e: jvp(grad(f), (w,), (e,))[1])(eye).T,
        "vmap of vjp∘grad": lambda: vmap(lambda e: vjp(grad(f), w)[1](e)[0])(eye).T,
        "torch.func.hessian, LN written out": lambda: hessian(f_plain)(w),
    }
    print(f"f = Σ c ⊙ tanh(LayerNorm(x Wᵀ; γ, β)), {w.numel()} parameters, float64, "
          f"torch {torch.__version__}")  # fmt: skip
    print(f"{'method':<37}{'max |H − FD|/max|FD|':>22}{'‖H − Hᵀ‖/max|FD|':>19}  entries off")
    for name, method in methods.items():
        H = method()
        err = float((H - reference).abs().max() / scale)
        asym = float((H - H.T).abs().max() / scale)
        off = collections.Counter(
            f"({names[i]},{names[j]})"
            for i, j in ((H - reference).abs() > 1e-6 * scale).nonzero().tolist()
        )
        where = ", ".join(f"{k} {v}" for k, v in sorted(off.items())) or "none"
        print(f"{name:<37}{err:>22.1e}{asym:>19.1e}  {where}")
    print("(FD: central differences of torch.autograd gradients, step 1e-5; (row, column) blocks;")
    print(f" W has {WIDTH * IN} entries, γ and β {WIDTH} each)")


def block_table() -> None:
    from stability.nets.problem import problem_from_dict

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inp, self.ln = torch.nn.Linear(4, 8), torch.nn.LayerNorm(8)
            self.mlp = torch.nn.Sequential(
                torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 8)
            )
            self.out = torch.nn.Linear(8, 2)

        def forward(self, x):
            a = self.inp(x)
            return self.out(a + self.mlp(self.ln(a)))

    torch.manual_seed(0)
    x = torch.randn(160, 4, dtype=D)
    y = torch.sin(x[:, :2]) + 0.5 * x[:, 2:4]
    loss = torch.nn.MSELoss()
    net = problem_from_dict({"model": Block().double(), "loss": loss, "inputs": x, "targets": y})
    w, v = net.w_star, torch.randn(net.dim, dtype=D)
    eps = 1e-5
    fd = (net.gradient(w + eps * v) - net.gradient(w - eps * v)) / (2 * eps)
    products = {
        f"toolkit (NetProblem.hvp, {net.hvp_mode})": net.hvp(w, v),
        "torch.func.hessian": hessian(net.loss)(w) @ v,
        "torch.autograd.functional.hessian": torch.autograd.functional.hessian(net.loss, w) @ v,
    }
    try:
        from curvlinops import HessianLinearOperator
    except ImportError:
        print("(curvlinops not installed: the bench extra)")
    else:
        params = list(net.model.parameters())  # one stage: the model's order, as net.names
        op = HessianLinearOperator(net.model, loss, params, [(x, y)], check_deterministic=False)
        products["curvlinops HessianLinearOperator"] = torch.as_tensor(op.to_scipy() @ v.numpy())
    print(f"LayerNorm + residual block, {net.dim} parameters, float64: one product H·v")
    print(f"{'method':<50}{'max |Hv − FD| / max |FD|':>26}")
    for name, hv in products.items():
        print(f"{name:<50}{float((hv - fd).abs().max() / fd.abs().max()):>26.1e}")
    print("(FD: central differences of the gradient along v, step 1e-5: error ~1e-9)")


def main() -> None:
    torch.set_num_threads(1)
    minimal_table()
    print()
    block_table()


if __name__ == "__main__":
    main()
