"""Why real Adam settles above the frozen-P edge under delay: linear twins along the run.

At step t0 of a full-batch real-Adam run with gradient delay τ (``torch.optim.AdamW``'s step,
the gradient taken at w_{t−1−τ}; its own loop here, independent of `stability.nets.simulator`),
a perturbation δ along the top right eigenvector P^{1/2}x₁ of P_{t0}H_{t0} is propagated for n
steps by the frozen-P linearisation of `stability.rules.adam`,

    μ ← β1·μ + (1 − β1)·H·δ_{t−τ},     δ ← δ − lr·P·μ,

in four variants: H and P frozen at t0 (the prediction's own assumption: its growth must be
ln ρ of the frozen-P polynomial at lr·λ₁(P_{t0}H_{t0})); P = P_t of the run (v̂ adapting);
H = ∇²f at the run's own delayed weights w_{t−τ} (the trajectory moving); both.  Each growth
rate is the least-squares slope of ln‖δ‖ over the last two thirds of the n steps.  The
Hessian-vector products are forward-over-reverse autograd (``torch.func.jvp`` of
``torch.func.grad``); the top eigenpair is `scipy.sparse.linalg.eigsh` on s·H·s, s = P^{1/2}.

`dissect` also tests one candidate correction that follows from the H_t result: if the
perturbation felt the whitened Hessian H̃_t = s_t H(w_t) s_t averaged over the window rather
than the instantaneous one, the plateau of λ₁(H̃_t) would exceed the edge by the Jensen gap
mean_t λ₁(H̃_t) / λ₁(mean_t H̃_t) (λ₁ is convex); it is measured over the n steps (every
`EVERY`-th step) and over sub-windows of 50 steps.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.sparse.linalg import LinearOperator, eigsh

VARIANTS = {"frozen H, P": (False, False), "P_t": (True, False), "H_t": (False, True)}
VARIANTS["H_t, P_t"] = (True, True)
EVERY = 10
"""Steps between the samples of H̃_t of the averaging candidate."""


def _top(grad, points, p: int, v0=None) -> tuple[float, np.ndarray]:
    """λ₁ and x₁ of mean_i s_i∇²f(w_i)s_i over ``points`` [(w_i, s_i)] (eigsh)."""

    def matvec(x):
        x = torch.tensor(x.reshape(-1))
        total = sum(s * torch.func.jvp(grad, (w,), (s * x,))[1] for w, s in points)
        return (total / len(points)).numpy()

    op = LinearOperator((p, p), dtype=np.float64, matvec=matvec)
    vals, vecs = eigsh(op, k=1, which="LA", tol=1e-6, v0=v0)
    return float(vals[0]), vecs[:, 0]


def _loss(spec: dict):
    model, X, Y, loss = spec["model"], spec["inputs"], spec["targets"], spec["loss"]
    names = [n for n, _ in model.named_parameters()]
    shapes = [p.shape for p in model.parameters()]
    sizes = [p.numel() for p in model.parameters()]

    def f(w):
        parts = torch.split(w, sizes)
        params = {n: t.reshape(s) for n, t, s in zip(names, parts, shapes, strict=True)}
        return loss(torch.func.functional_call(model, params, (X,)), Y)

    w0 = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).double()
    return f, w0


def real_adam(f, w, tau: int, lr: float, steps: int, beta1=0.9, beta2=0.999, eps=1e-8, freeze=None):
    """Yield (t, w_t, the delayed weights whose gradient step t applied, P_t) for t = 1 …
    ``steps`` of full-batch real Adam on ``f`` from ``w`` (``torch.optim.AdamW``'s step with
    the gradient at w_{t−1−τ}, a constant history before the start); from step ``freeze`` on
    P is held (v no longer updated)."""
    grad = torch.func.grad(f)
    m, v = torch.zeros_like(w), torch.zeros_like(w)
    hist = [w.clone()] * (tau + 1)
    for t in range(1, steps + 1):
        delayed = hist[-1 - tau]
        g = grad(delayed)
        m = beta1 * m + (1 - beta1) * g
        if freeze is None or t <= freeze:
            v = beta2 * v + (1 - beta2) * g * g
            P = 1 / ((v / (1 - beta2**t)).sqrt() + eps)
        w = w - lr * (m / (1 - beta1**t)) * P
        hist = [*hist[1:], w.clone()]
        yield t, w, delayed, P


def dissect(spec: dict, tau: int, lr: float, t0: int, n: int, beta1=0.9, beta2=0.999, eps=1e-8):
    """{"lam": λ₁(P_{t0}H_{t0}), "rates": {variant: growth rate per step}, "jensen": the
    averaging candidate's gaps} (module doc)."""
    f, w = _loss(spec)
    grad = torch.func.grad(f)
    run = real_adam(f, w, tau, lr, t0 + n, beta1, beta2, eps)

    def hvp(at, d):
        return torch.func.jvp(grad, (at,), (d,))[1]

    _, w_t0, _, P_t0 = next(state for state in run if state[0] == t0)
    s = P_t0.sqrt()
    p = w_t0.numel()
    lam, x1 = _top(grad, [(w_t0, s)], p)
    u = s * torch.tensor(x1)
    u = u / u.norm()
    twins = {
        k: {"hist": [u.clone()] * (tau + 1), "mu": torch.zeros(p), "norm": []} for k in VARIANTS
    }
    points = []
    for k, (_, w, delayed, P) in enumerate(run):
        if (k + 1) % EVERY == 0:
            points.append((w.clone(), P.sqrt()))
        for key, (use_p, use_h) in VARIANTS.items():
            tw = twins[key]
            Hd = hvp(delayed if use_h else w_t0, tw["hist"][-1 - tau])
            tw["mu"] = beta1 * tw["mu"] + (1 - beta1) * Hd
            new = tw["hist"][-1] - lr * (P if use_p else P_t0) * tw["mu"]
            tw["hist"] = [*tw["hist"][1:], new]
            tw["norm"].append(float(new.norm()))
    rates = {}
    for key, tw in twins.items():
        y = np.log(np.array(tw["norm"]))
        k = np.arange(y.size)
        rates[key] = float(np.polyfit(k[n // 3 :], y[n // 3 :], 1)[0])
    inst = [_top(grad, [q], p, x1)[0] for q in points]
    size = 50 // EVERY
    parts = [points[i : i + size] for i in range(0, len(points) - size + 1, size)]
    jensen = {
        f"{n} steps": float(np.mean(inst)) / _top(grad, points, p, x1)[0],
        "50 steps": float(
            np.mean(
                [
                    np.mean(inst[i : i + size]) / _top(grad, q, p, x1)[0]
                    for i, q in zip(range(0, len(points), size), parts, strict=False)
                ]
            )
        ),
    }
    return {"lam": lam, "rates": rates, "mean_lam": float(np.mean(inst)), "jensen": jensen}
