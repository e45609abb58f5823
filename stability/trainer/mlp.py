r"""A tiny MLP whose gradient is backpropagation with *different* weights per pass.

Layers l = 1 … L (1-3 hidden layers of tanh or ReLU units, a linear output layer), parameters
W_l (out × in) and b_l, flattened layer by layer into one vector [W_1, b_1, W_2, b_2, …] so a
rule sees one weight vector.  The gradient oracle ∇f(u_fwd, u_bkwd, u_recomp) is
backpropagation in which each pass reads its own weights (PipeMare Sec. 2, App. D.1):

    forward   (u_fwd):   a_0 = x,  z_l = W_l^f a_{l−1} + b_l^f,  a_l = σ(z_l),  ŷ = z_L
    output error:        δ_L = ∂ℓ/∂z_L at ŷ      (½‖ŷ − y‖² or softmax cross-entropy)
    recompute (u_recomp): z̃_l, ã_l recomputed from x with the u_recomp weights; without
                          recompute (u_recomp = None) z̃ = z, ã = a, the stored activations
    backward  (u_bkwd):  δ_l = (W_{l+1}^b)ᵀ δ_{l+1} ⊙ σ'(z̃_l)
    gradient:            ∂W_l = δ_l ã_{l−1}ᵀ,   ∂b_l = δ_l          (averaged over the batch)

With u_fwd = u_bkwd = u_recomp this is the exact gradient; otherwise it is the weight-
inconsistent gradient of pipelined training — real inconsistency, not a relabelled delay.
Stages are groups of consecutive layers (`MLP.stage_sizes`), so per-stage delays become
per-parameter integer arrays.

The loss is the batch mean plus ``weight_decay``/2·‖w‖² (whose gradient is taken at u_fwd),
which gives classification a finite minimizer.  Everything is batched over R runs: weights
(R, p), activations (R, B, width).

Linearization (`stability.analysis.modes`): near a minimizer w*, ∇f(u_f, u_b, u_r) ≈
H_f (u_f − w*) + H_b (u_b − w*) + H_r (u_r − w*) with H_f + H_b + H_r = H, the Hessian;
`MLP.pass_jacobians` computes the three by central differences.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from stability.checks import check_choice, check_real
from stability.trainer.data import Dataset

ACTIVATIONS = ("tanh", "relu")
TASKS = ("regression", "classification")


def _act(z: np.ndarray, kind: str) -> np.ndarray:
    return np.tanh(z) if kind == "tanh" else np.maximum(z, 0.0)


def _act_prime(z: np.ndarray, a: np.ndarray, kind: str) -> np.ndarray:
    """σ'(z) given z and a = σ(z): 1 − a² for tanh, [z > 0] for ReLU."""
    return 1.0 - a * a if kind == "tanh" else (z > 0).astype(float)


@dataclass(frozen=True, eq=False)
class MLP:
    """A multilayer perceptron on features ``X`` (n, d) with targets ``y`` (module doc).

    ``hidden``: widths of the 1-3 hidden layers; ``activation``: ``"tanh"`` or ``"relu"``;
    ``task``: ``"regression"`` (y real, one output) or ``"classification"`` (y integer labels
    0 … C−1, C outputs, softmax cross-entropy).
    """

    X: np.ndarray
    y: np.ndarray
    hidden: tuple[int, ...] = (8,)
    activation: str = "tanh"
    task: str = "regression"
    weight_decay: float = 0.0

    def __post_init__(self):
        X = np.asarray(self.X, dtype=float)
        if X.ndim != 2 or np.asarray(self.y).shape != (X.shape[0],) or X.shape[0] == 0:
            raise ValueError(f"X must be (n, d) and y (n,), got {X.shape}, {np.shape(self.y)}")
        hidden = tuple(int(h) for h in np.atleast_1d(self.hidden))
        if not 1 <= len(hidden) <= 3 or any(h < 1 for h in hidden):
            raise ValueError(f"hidden must be 1 to 3 layer widths ≥ 1, got {self.hidden!r}")
        check_choice("activation", self.activation, ACTIVATIONS)
        check_choice("task", self.task, TASKS)
        check_real("weight_decay", self.weight_decay, low=0.0)
        y = np.asarray(self.y, dtype=float)
        if self.task == "classification":
            if np.any(y != np.round(y)) or np.any(y < 0):
                raise ValueError(
                    "task: classification needs targets that are integer labels 0 … C−1 "
                    "(the data's target column is not)"
                )
            y = y.astype(np.int64)
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "hidden", hidden)

    @classmethod
    def from_dataset(cls, data: Dataset, **kwargs) -> MLP:
        return cls(data.X, data.y, **kwargs)

    # -- shapes ------------------------------------------------------------------------------
    @cached_property
    def widths(self) -> tuple[int, ...]:
        out = int(self.y.max()) + 1 if self.task == "classification" else 1
        return (self.X.shape[1], *self.hidden, out)

    @cached_property
    def layer_sizes(self) -> np.ndarray:
        """Parameters per layer: out·in + out."""
        w = self.widths
        return np.array([w[i + 1] * w[i] + w[i + 1] for i in range(len(w) - 1)])

    @property
    def dim(self) -> int:
        return int(self.layer_sizes.sum())

    @property
    def samples(self) -> int:
        return self.X.shape[0]

    @property
    def layers(self) -> int:
        return len(self.widths) - 1

    uses_backward = True

    def stage_sizes(self, stages: int) -> np.ndarray:
        """Parameters per stage for P stages of consecutive layers (as even as possible)."""
        L = self.layers
        if not isinstance(stages, (int, np.integer)) or not 1 <= stages <= L:
            raise ValueError(f"stages must be an integer in [1, {L}] (one or more layers each)")
        bounds = np.linspace(0, L, stages + 1).round().astype(int)
        return np.array(
            [self.layer_sizes[a:b].sum() for a, b in zip(bounds, bounds[1:], strict=False)]
        )

    def unflatten(self, w: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """[(W_l (R, out, in), b_l (R, out))] from weights (R, p) (views, no copies)."""
        w = np.atleast_2d(w)
        out, start = [], 0
        for i in range(self.layers):
            n_in, n_out = self.widths[i], self.widths[i + 1]
            W = w[:, start : start + n_out * n_in].reshape(-1, n_out, n_in)
            b = w[:, start + n_out * n_in : start + n_out * n_in + n_out]
            out.append((W, b))
            start += n_out * n_in + n_out
        return out

    def initial_weights(self, seed: int = 0) -> np.ndarray:
        """W_l ~ N(0, 1/fan_in) (tanh) or N(0, 2/fan_in) (ReLU), b_l = 0, from ``seed``."""
        rng = np.random.default_rng(seed)
        gain = 2.0 if self.activation == "relu" else 1.0
        parts = []
        for i in range(self.layers):
            n_in, n_out = self.widths[i], self.widths[i + 1]
            parts.append(rng.standard_normal(n_out * n_in) * math.sqrt(gain / n_in))
            parts.append(np.zeros(n_out))
        return np.concatenate(parts)

    # -- passes ------------------------------------------------------------------------------
    def _forward(self, w: np.ndarray, X: np.ndarray) -> tuple[list, list]:
        """Pre-activations z_l (R, B, width) and activations a_l (a_0 = X, shared by the runs)."""
        a = X
        zs, acts = [], [a]
        for i, (W, b) in enumerate(self.unflatten(w)):
            z = np.matmul(a, W.transpose(0, 2, 1)) + b[:, None, :]
            zs.append(z)
            a = z if i == self.layers - 1 else _act(z, self.activation)
            acts.append(a)
        return zs, acts

    def _output_error(self, z_out: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(per-sample loss (R, B), ∂(mean loss)/∂z_L (R, B, out)).

        Classification: p = softmax(z), loss = log Σ_c e^{z_c} − z_y, ∂/∂z = (p − e_y)/B.  The
        logits are shifted by their row maximum only when some |z| > 600 (below, e^z and the
        sum over up to 1e40 classes stay finite and normal; the shift is a per-row
        reduction, a third of the cost at 100 classes); after a shift, exponents below −700
        are raised to −700 so that no exp lands in the slow subnormal range, which changes p
        by < 1e-304 absolute.
        """
        B = y.shape[0]
        if self.task == "regression":
            r = z_out[..., 0] - y
            return 0.5 * r * r, r[..., None] / B
        z = z_out
        if max(z.max(initial=0.0), -z.min(initial=0.0)) <= 600.0:  # max |z|, without a copy
            e = np.exp(z)
        else:  # also when NaN: the shift keeps it NaN
            z = z - z.max(axis=-1, keepdims=True)
            e = np.exp(np.maximum(z, -700.0))
        total = e.sum(axis=-1, keepdims=True)
        rows = np.arange(B)
        loss = np.log(total[..., 0]) - z[..., rows, y]
        e /= total * B
        e[..., rows, y] -= 1.0 / B
        return loss, e

    def backprop(self, u_fwd, u_bkwd, u_recomp, X, y) -> np.ndarray:
        """∇f(u_fwd, u_bkwd, u_recomp) on the batch (X, y), shape (R, p) (module doc)."""
        u_fwd, u_bkwd = np.atleast_2d(u_fwd), np.atleast_2d(u_bkwd)
        zs, acts = self._forward(u_fwd, X)
        _, delta = self._output_error(zs[-1], y)
        if u_recomp is not None:
            zs, acts = self._forward(np.atleast_2d(u_recomp), X)
        back = self.unflatten(u_bkwd)
        rows = [u_fwd.shape[0], u_bkwd.shape[0]] + ([] if u_recomp is None else [len(zs[0])])
        g = np.empty((max(rows), self.dim))
        ones = np.ones(y.shape[0])  # Σ over the batch as a product: 3-8× a strided .sum(axis=1)
        end = self.dim
        for i in reversed(range(self.layers)):
            if i < self.layers - 1:
                delta = np.matmul(delta, back[i + 1][0]) * _act_prime(
                    zs[i], acts[i + 1], self.activation
                )
            n_w = self.widths[i + 1] * self.widths[i]
            start = end - n_w - self.widths[i + 1]
            g[:, start : start + n_w] = np.matmul(delta.transpose(0, 2, 1), acts[i]).reshape(
                delta.shape[0], n_w
            )
            g[:, start + n_w : end] = ones @ delta
            end = start
        return g + self.weight_decay * u_fwd if self.weight_decay else g

    def oracle(self, u_fwd, u_bkwd, u_recomp=None) -> np.ndarray:
        """Full-batch inconsistent gradient (``u_recomp=None``: no recompute)."""
        return self.backprop(u_fwd, u_bkwd, u_recomp, self.X, self.y)

    def batch_oracles(self, indices: np.ndarray) -> list:
        """One oracle per row of ``indices`` (C, B)."""
        return [_BatchOracle(self, self.X[row], self.y[row]) for row in indices]

    def loss(self, w: np.ndarray) -> np.ndarray:
        """Mean loss (+ decay) on the whole data set, shape (R,) for w (R, p); () for (p,)."""
        w2 = np.atleast_2d(w)
        zs, _ = self._forward(w2, self.X)
        per_sample, _ = self._output_error(zs[-1], self.y)
        out = per_sample.mean(axis=1) + 0.5 * self.weight_decay * np.einsum("ri,ri->r", w2, w2)
        return out if np.ndim(w) == 2 else out[0]

    def gradient(self, w: np.ndarray) -> np.ndarray:
        """The exact gradient (all passes with ``w``)."""
        g = self.oracle(w, w, None)
        return g if np.ndim(w) == 2 else g[0]

    def pass_jacobians(self, w: np.ndarray, *, recompute: bool, step: float = 1e-5):
        """(H_f, H_b, H_r): ∂∇f/∂u_fwd, ∂u_bkwd, ∂u_recomp at u = w, by central differences.

        All 2p perturbations of one argument run as one batched backprop.  Without
        ``recompute`` H_r is 0 and H_f + H_b is the Hessian.
        """
        w = np.asarray(w, dtype=float)
        p = w.size
        h = step * max(1.0, float(np.max(np.abs(w))))
        probes = np.concatenate([w + h * np.eye(p), w - h * np.eye(p)])
        base = np.broadcast_to(w, probes.shape)
        rec_base = base if recompute else None
        out = []
        for which in range(3):
            if which == 2 and not recompute:
                out.append(np.zeros((p, p)))
                continue
            args = [base, base, rec_base]
            args[which] = probes
            g = self.oracle(*args)
            out.append(((g[:p] - g[p:]) / (2 * h)).T)
        return tuple(out)

    def hessian(self, w: np.ndarray) -> np.ndarray:
        """Hessian of the loss at ``w`` (central differences of the exact gradient, symmetrized)."""
        w = np.asarray(w, dtype=float)
        p = w.size
        h = 1e-5 * max(1.0, float(np.max(np.abs(w))))
        g = self.gradient(np.concatenate([w + h * np.eye(p), w - h * np.eye(p)]))
        H = ((g[:p] - g[p:]) / (2 * h)).T
        return 0.5 * (H + H.T)

    def fit(self, w0: np.ndarray, *, newton_steps: int = 30) -> np.ndarray:
        """A minimizer near ``w0``: L-BFGS, then Newton steps on the finite-difference Hessian
        (directions of negative or tiny curvature left alone) until the gradient stops falling.
        """
        from scipy.optimize import minimize

        res = minimize(
            lambda v: float(self.loss(v)),
            np.asarray(w0, dtype=float),
            jac=lambda v: self.gradient(v),
            method="L-BFGS-B",
            options={"maxiter": 5000, "gtol": 1e-9, "ftol": 1e-15, "maxcor": 30},
        )
        w = res.x
        g = self.gradient(w)
        for _ in range(newton_steps):
            lam, V = np.linalg.eigh(self.hessian(w))
            keep = lam > 1e-10 * lam.max()
            step = V[:, keep] @ ((V[:, keep].T @ g) / lam[keep])
            w_new = w - step
            g_new = self.gradient(w_new)
            if np.linalg.norm(g_new) >= np.linalg.norm(g):
                break
            w, g = w_new, g_new
        return w

    def describe(self) -> dict:
        return {
            "problem": "mlp",
            "samples": self.samples,
            "parameters": self.dim,
            "widths": list(self.widths),
            "activation": self.activation,
            "task": self.task,
            "weight_decay": self.weight_decay,
        }


@dataclass(frozen=True, eq=False)
class _BatchOracle:
    mlp: MLP
    X: np.ndarray
    y: np.ndarray

    def __call__(self, u_fwd, u_bkwd, u_recomp=None):
        return self.mlp.backprop(u_fwd, u_bkwd, u_recomp, self.X, self.y)


__all__ = ["ACTIVATIONS", "MLP", "TASKS"]
