r"""Adam/AdamW stage rules for the network simulator: frozen P in weight space, and real Adam.

The simulator (`stability.nets.simulator`) runs one rule object per stage on its block of the
flat weights.  Two wrappers turn the registry's `stability.rules.adam.Adam` (or PipeOptim's Adam
engine) into the stage rules of a network with a *diagonal* preconditioner:

* `FrozenStage` — the analysed rule with the optimizer's frozen P (`stability.nets.preconditioner`):
  the inner rule has P = 1 and runs in the whitened coordinates x = P^{-1/2}w of the stage
  (its gradient P^{1/2}∇f, its step mapped back by P^{1/2}); this is exactly
  w ← w − lr·(P·m + wd·w) with m ← β1·m + (1 − β1)·∇f (`stability.nets.preconditioned`,
  module doc).  The coupled analysis runs the inner rules on H̃ = P^{1/2}HP^{1/2}; the
  simulator runs the wrapped ones on the network: the same dynamics, two coordinate systems.
* `RealStage` — the real update (``precond=None``: Kingma & Ba Alg. 1 with AdamW's decoupled
  decay, which is what ``torch.optim.AdamW`` steps), optionally continuing an optimizer state
  (m = ``exp_avg``, v = ``exp_avg_sq``, step t): reads of m and v at or before the start return
  that state (a constant history, as the weights have), and the step count runs from t.  It keeps
  the v it last wrote (``last_v``, ``count``) so that the current preconditioner P_t can be read
  during a run (`stability.nets.adam_edge`).
* `Centred` — either of them run on the deviation from w*, so that AdamW's decay acts on
  w − w* as in the linearisation (the measured runs of `net max-lr --measure`).

Tap values that are plain numbers (the probes of `stability.rules.base.taps_read` and
`stability.nets.simulator.consistent`, which only ask *which* taps a pass reads) pass through
unscaled.
"""

from __future__ import annotations

from typing import Any

import torch

from stability.rules.base import Passes


def _tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


class _WeightReader:
    """Tap reader that maps the ``w`` taps by ``f`` (others unchanged): the whitened stage
    reads w/s, the centred stage w − c."""

    def __init__(self, x, f):
        self.x, self.f = x, f

    @property
    def t(self) -> int:
        return self.x.t

    def __call__(self, var: str, lag=0):
        value = self.x(var, lag)
        return self.f(value) if var == "w" and _tensor(value) else value


def _mapped(p: Passes, f) -> Passes:
    """The passes ``p`` with each weight vector mapped by ``f`` (a pass shared by two roles
    stays one object)."""
    mapped: dict[int, Any] = {}
    out = []
    for u in (p.forward, p.backward, p.recompute):
        if id(u) not in mapped:
            mapped[id(u)] = f(u)
        out.append(mapped[id(u)])
    return Passes(*out)


class Centred:
    """A stage rule run on the deviation w − c from a centre c (the stage's block of w*).

    AdamW's decoupled decay then acts on the deviation, w ← w − lr·(P·m + wd·(w − w*)): the
    decay of the linearisation about w* (c = 1 − lr·wd multiplies w − w*,
    `stability.rules.adam`), which with the tilted gradient of `stability.nets.bracket` keeps
    w* a fixed point of the measured runs.  (Uncentred, the decay pulls every run towards 0
    and the tilted runs drift away from w* at any lr.)  The rules are affine with weights
    summing to one in w, so without decay centring changes nothing but rounding."""

    def __init__(self, inner, centre: torch.Tensor):
        self.inner, self.c = inner, centre
        self.variables = inner.variables

    def __getattr__(self, name: str):  # tau, preconditioner, … of the inner rule
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _to_w(self, u):
        return u + self.c if _tensor(u) else u

    def _reader(self, x):
        return _WeightReader(x, lambda w: w - self.c)

    def passes(self, x, lr) -> Passes:
        return _mapped(self.inner.passes(self._reader(x), lr), self._to_w)

    def update(self, x, g, lr) -> dict[str, Any]:
        new = dict(self.inner.update(self._reader(x), g, lr))
        new["w"] = self._to_w(new["w"])
        return new


class FrozenStage:
    """The frozen-P stage rule in weight space (module doc); ``inner``: P = 1, ``scale``: the
    stage's block of P^{1/2}."""

    def __init__(self, inner, scale: torch.Tensor):
        self.inner = inner
        self.s = torch.as_tensor(scale)
        self.variables = inner.variables

    def __getattr__(self, name: str):  # tau, tau_bkwd, period, … of the inner rule
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _to_w(self, u):
        return u * self.s if _tensor(u) else u

    def _reader(self, x):
        return _WeightReader(x, lambda w: w / self.s)

    def passes(self, x, lr) -> Passes:
        return _mapped(self.inner.passes(self._reader(x), lr), self._to_w)

    def update(self, x, g, lr) -> dict[str, Any]:
        g_x = g * self.s if _tensor(g) else g
        new = dict(self.inner.update(self._reader(x), g_x, lr))
        new["w"] = self._to_w(new["w"])
        return new


class _Resumed:
    """Tap reader continuing an optimizer state: t shifted by ``step0``; m and v at or before
    the start read the given state."""

    def __init__(self, x, step0: int, initial: dict[str, torch.Tensor]):
        self.x, self.step0, self.initial = x, step0, initial

    @property
    def t(self) -> int:
        return self.x.t + self.step0

    def __call__(self, var: str, lag=0):
        value = self.x(var, lag)
        if var in self.initial and _tensor(value) and self.x.t - int(lag) <= 0:
            return self.initial[var].expand_as(value)
        return value


class RealStage:
    """Real Adam/AdamW on one stage, optionally continuing a state (module doc).

    ``inner``: an Adam rule with ``precond=None`` (`stability.rules.adam.Adam.trainer_rule`);
    ``exp_avg``/``exp_avg_sq``: the stage's blocks of m and v (None: a fresh state, v = 0);
    ``step0``: the state's step t.
    """

    def __init__(self, inner, exp_avg=None, exp_avg_sq=None, step0: int = 0):
        if getattr(inner, "linearised", True) and getattr(inner, "precond", 0) is not None:
            raise ValueError("RealStage needs the real Adam update (precond=None)")
        self.inner = inner
        self.variables = inner.variables
        self.step0 = int(step0)
        initial = {}
        if exp_avg is not None:
            initial["m"] = torch.as_tensor(exp_avg)
            initial["s"] = torch.as_tensor(exp_avg_sq)
        self.initial = initial
        self.last_v: torch.Tensor | None = initial.get("s")
        self.count = self.step0

    def __getattr__(self, name: str):
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _reader(self, x):
        return _Resumed(x, self.step0, self.initial) if (self.step0 or self.initial) else x

    def passes(self, x, lr) -> Passes:
        return self.inner.passes(self._reader(x), lr)

    def update(self, x, g, lr) -> dict[str, Any]:
        reader = self._reader(x)
        new = self.inner.update(reader, g, lr)
        if _tensor(new.get("s")):
            self.last_v = new["s"]
            self.count = reader.t + 1
        return new

    def preconditioners(self) -> torch.Tensor | None:
        """P_t = 1/(√v/√(1 − β2^t) + ε) of the last update, (runs, block) in lockstep or
        (block,) for one run; None before any."""
        if self.last_v is None or self.count < 1:
            return None
        bc2_sqrt = (1 - self.inner.beta2**self.count) ** 0.5
        return 1.0 / (self.last_v.sqrt() / bc2_sqrt + self.inner.eps)

    def preconditioner(self, run: int = 0) -> torch.Tensor | None:
        """`preconditioners` of run ``run``."""
        P = self.preconditioners()
        return P if P is None or P.ndim == 1 else P[run]


__all__ = ["Centred", "FrozenStage", "RealStage"]
