r"""Adaptive rules on a network: ``precond_from`` and ``update`` of the ``stability net`` commands.

An adaptive rule — ``adam``, or ``pipeoptim`` with ``optimizer`` adam or adamw — divides by the
optimizer's second moment, so on a network its analysis needs the optimizer's diagonal
preconditioner P (`stability.nets.preconditioner`), never the scalar P = 1 of the rule's
default.  `adaptive_setup` reads the source and returns an `AdaptiveSetup`:

* the analysis runs the rule with P = 1 on the preconditioned curvature H̃ = P^{1/2}HP^{1/2}
  (`stability.nets.preconditioned`: exact for a diagonal P, AdamW's decoupled decay included);
* the simulator runs either the frozen-P rule in weight space (``update="analysed"``,
  `stability.nets.adam_stages.FrozenStage`) or real Adam/AdamW continuing the source's state
  (``update="real"``, `RealStage`; without a source from a fresh state, v = 0 and step 0, as
  ``torch.optim.AdamW`` starts);
* the critical direction in weight space is P^{1/2}x̃₁ (x̃₁ the top eigenvector of H̃);
* without weight stashing (``backward="current"``, e.g. PipeOptim's current-weight backward
  pass) the discrepancy Jacobian H_b is whitened the same way, P^{1/2}H_bP^{1/2}
  (`stability.nets.sensitivity`, ``scale``).

``precond_from="stationary"`` (net noise only) is real Adam's own stationary v̂ at the step size
of the analysis, solved by `stability.nets.noise_public` once it knows it.

Refusals (one line, naming the parameter): an adaptive rule without ``precond_from`` where the
analysis or the analysed update needs P; ``precond_from`` (or ``update="real"``) with a rule
that has no second moment; ``precond_from`` together with the scalar ``precond``; ``beta2`` or
``eps`` with a state file where no run is real (P is the state's: they would change nothing),
``beta2`` with ``stationary`` likewise.  The real-Adam runs continuing a state file take its β2
and ε unless given.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from stability.nets.adam_stages import Centred, FrozenStage, RealStage
from stability.nets.preconditioned import preconditioned_curvature, weight_direction
from stability.nets.preconditioner import Preconditioner, is_adaptive, load_preconditioner
from stability.nets.problem import NetProblem
from stability.nets.stationary_adam import SOURCE as STATIONARY
from stability.trainer.measure import MaxLrMeasurement, bisect_max_lr

UPDATES = ("analysed", "real")
SOURCE_HINT = (
    "precond_from (a torch.save(opt.state_dict()) file of torch.optim.Adam/"
    "AdamW over model.parameters(), or warmup:N:LR)"
)
_DEFAULTS = {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0}


@dataclass(frozen=True, eq=False)
class AdaptiveSetup:
    """The network (weights after a warm-up, if any), the preconditioner (None: a fresh real
    run, or for ``precond_from="stationary"`` the P net noise solves next at its lr,
    `stability.nets.stationary_adam`), and the rule parameters of the analysis (P = 1: the
    preconditioner is in H̃)."""

    net: NetProblem
    precond: Preconditioner | None
    params: dict
    update: str

    @property
    def scale(self) -> torch.Tensor:
        return self.precond.scale

    def hyper(self, name: str) -> float:
        """The rule's β1, β2, ε or weight decay: its flag, or torch.optim.AdamW's default."""
        value = self.params.get(name)
        return _DEFAULTS[name] if value is None else value

    def curvature(self, k: int, stage_k: int | None = None):
        """Top-k eigenpairs of H̃ and the stages' top ``stage_k``."""
        return preconditioned_curvature(self.net, self.scale, k, stage_k=stage_k)

    def direction(self, x1: np.ndarray) -> np.ndarray:
        """The unit weight-space direction P^{1/2}x₁ of a whitened eigenvector."""
        return weight_direction(self.scale.numpy(), x1)

    def frozen(self, rules, *, centred: bool = False) -> tuple:
        """The analysis rules (P = 1) as frozen-P stage rules of the network; ``centred``: run
        on the deviation from w* (`stability.nets.adam_stages.Centred`, the measured runs)."""
        s = self._here(self.scale)
        stages = [FrozenStage(r, s[b]) for r, b in zip(rules, self.net.blocks, strict=True)]
        return self._centred(stages) if centred else tuple(stages)

    def _centred(self, stages) -> tuple:
        w_star = self.net.w_star.detach()
        return tuple(Centred(r, w_star[b]) for r, b in zip(stages, self.net.blocks, strict=True))

    def _here(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` in the problem's dtype, on its device (the simulator's tensors)."""
        return t.to(dtype=self.net.dtype, device=self.net.device)

    def real(self, rules, *, first_moment: bool = True, centred: bool = False) -> tuple:
        """Real Adam/AdamW stage rules continuing the source's state (fresh without one);
        ``first_moment=False``: with m = 0 (the state of a stationary point: the tilted runs of
        `stability.nets.bracket`, where ∇f(w*) is subtracted, keep v and t only); ``centred``:
        run on the deviation from w* (`stability.nets.adam_stages.Centred`)."""
        out = []
        for r, b in zip(rules, self.net.blocks, strict=True):
            inner = r.trainer_rule()
            if self.precond is None:
                out.append(RealStage(inner))
                continue
            step = self.precond.uniform("step", self.precond.step[b].double())
            m = self._here(self.precond.exp_avg[b])
            if not first_moment:
                m = torch.zeros_like(m)
            v = self._here(self.precond.exp_avg_sq[b])
            out.append(RealStage(inner, m, v, int(step)))
        return self._centred(out) if centred else tuple(out)

    def rules(self, rule: str, pipe, tau_recomp: int | None = None) -> tuple:
        """The analysis's stage rules (P = 1) over ``pipe`` (`stability.nets.prediction.net_rules`).

        PipeOptim's backward pass reads the current weights (PipeOptim Alg. 1 line 14: its
        τ_bkwd is 0, not a parameter): without stashing the pipeline's backward delays must be
        0, and each stage gets its forward delay only."""
        from stability.coupled.system import stage_rules
        from stability.nets.prediction import net_rules
        from stability.rules.staged import DELAY_NAMES

        if rule != "pipeoptim" or pipe.tau_bkwd is None:
            return net_rules(rule, self.params, pipe, tau_recomp=tau_recomp)
        if np.any(pipe.tau_bkwd != 0):
            raise ValueError(
                "backward: PipeOptim's backward pass reads the current weights (τ_bkwd = 0); "
                f"this pipeline's backward delays are {pipe.tau_bkwd.tolist()}"
            )
        params = {k: v for k, v in self.params.items() if k not in DELAY_NAMES}
        return stage_rules(rule, pipe.tau_fwd.tolist(), **params)

    def stage_rules(self, rules):
        """The simulator's stage rules for this setup's ``update``."""
        return self.real(rules) if self.update == "real" else self.frozen(rules)

    def protocol(self) -> dict[str, str]:
        """How a simulator run of this setup starts and steps (``net train``'s protocol)."""
        moved = self.precond is not None and self.precond.weights is not None
        start = "the weights after the warm-up" if moved else "the problem's weights"
        if self.update == "real":
            state = (
                "a fresh Adam state (m = v = 0, step 0)"
                if self.precond is None
                else f"the optimizer state of {self.precond.source} (m, v, step t)"
            )
            update = "real Adam/AdamW as torch.optim.AdamW steps, continuing " + state
        else:
            update = f"frozen-P rule, P from {self.precond.source}: w ← w − lr·(P·m + wd·w)"
        return {"start": f"{start}, constant history", "update": update}

    def describe(self) -> dict[str, Any] | None:
        return None if self.precond is None else self.precond.describe()


def adaptive_setup(
    net: NetProblem,
    rule: str,
    params: dict[str, Any],
    precond_from: str | None,
    *,
    update: str = "analysed",
    command: str = "max-lr",
    measure: bool = False,
) -> AdaptiveSetup | None:
    """Read ``precond_from`` for an adaptive ``rule`` (module doc); None for other rules.
    ``measure``: the command also runs real Adam (``--measure``), as ``update="real"`` does."""
    from stability.checks import check_choice

    check_choice("update", update, UPDATES)
    adaptive = is_adaptive(rule, params)
    if not adaptive:
        if precond_from is not None:
            raise ValueError(
                f"precond_from applies to adaptive rules (adam; pipeoptim --optimizer adam|adamw), "
                f"not rule {rule!r}"
            )
        if update == "real":
            raise ValueError(
                f"update real applies to adaptive rules (adam; pipeoptim --optimizer adam|adamw); "
                f"rule {rule!r} has no other update than the analysed one"
            )
        return None
    if precond_from is None and not (command == "train" and update == "real"):
        what = "net train --update analysed" if command == "train" else f"net {command}"
        hint = SOURCE_HINT if command != "noise" else SOURCE_HINT[:-1] + ", or stationary)"
        raise ValueError(
            f"{what} with rule {rule!r} needs {hint}: on a network Adam's "
            "preconditioner P is a per-coordinate diagonal, not the scalar P = 1"
        )
    if params.get("precond") is not None:
        raise ValueError(
            "precond: a scalar P is not a network's preconditioner; give --precond-from alone"
        )
    values = dict(params)
    precond = None
    if precond_from == STATIONARY:  # solved by net noise at its lr (stability.nets.stationary_adam)
        if command != "noise":
            raise ValueError(
                "precond_from: stationary is the fixed point of real Adam's v̂ on minibatches at "
                f"one lr and batch (net noise); net {command} takes a state file or warmup:N:LR"
            )
        if values.get("beta2") is not None and not measure:
            raise ValueError(
                "beta2: the stationary v̂ does not depend on β2 (it leaves out v̂'s averaging "
                "window); --beta2 acts on the real-Adam runs of --measure"
            )
        values["precond"] = 1.0
        return AdaptiveSetup(net, None, values, update)
    if precond_from is not None:
        hyper = {k: values.get(k, d) for k, d in _DEFAULTS.items()}
        precond = load_preconditioner(net, precond_from, **hyper)
        if precond.weights is not None:
            net = replace(net, w_star=precond.weights)
        if precond.warmup is None:  # a state file: P is read with its own β2 and ε
            _continued(values, precond, real_runs=update == "real" or measure)
    values["precond"] = 1.0
    return AdaptiveSetup(net, precond, values, update)


def _continued(values: dict[str, Any], precond: Preconditioner, *, real_runs: bool) -> None:
    """β2 and ε of the real-Adam runs that continue a state file (``net train --update real``,
    ``--measure``): the state's own unless given.  Where no run is real they would change
    nothing — P is the state's, read with its own β2 and ε — and are refused."""
    for key, field in (("beta2", precond.beta2), ("eps", precond.eps)):
        if real_runs and values.get(key) is None:
            values[key] = precond.uniform(key, field)
        elif not real_runs and values.get(key) is not None:
            raise ValueError(
                f"{key}: P is read from the state file with its own β2 and ε; --{key} acts only "
                "on real-Adam runs continuing it (net train --update real, --measure) and on "
                "warmup:N:LR"
            )


def measure_real_max_lr(
    setup: AdaptiveSetup,
    rules,
    direction: np.ndarray,
    guess: float,
    protocol,
    observe=None,
    flip=None,
) -> MaxLrMeasurement:
    """The max stable lr of real Adam/AdamW from the problem's weights and the source's v and
    step t (m = 0, `AdaptiveSetup.real`), by the protocol of `stability.nets.bracket` — the
    same start w* + ε·``direction``, tilted gradient, steps, bisection — with its growth test
    only: unstable if ‖w_t − w*‖ exceeds ``growth`` × ‖w₀ − w*‖ (or is non-finite).  The
    increments' rate test is left out: at a stationary point v decays as β2^t, so P — and
    with it every increment — grows by β2^{−1/2} per step, which that test would read as an
    instability of the slowest directions (docs/adam.md).  ``observe``: the simulator's
    per-step hook (`stability.nets.step_counter`); ``flip``: the saddle directions turned into
    minima, as in the frozen-P runs (`stability.nets.saddle_flip`)."""
    from stability.nets.bracket import start_point
    from stability.nets.simulator import consistent, simulate

    stages = setup.real(rules, first_moment=False, centred=True)

    def verdict(lrs: np.ndarray) -> np.ndarray:
        res = simulate(
            setup.net,
            stages,
            lrs,
            steps=protocol.steps,
            w0=start_point(setup.net, direction, protocol.perturbation),
            tilt=True,
            flip=flip,
            criterion="distance",
            divergence=protocol.growth,
            check_every=protocol.check_every,
            backward="stashed" if all(consistent(r) for r in stages) else "current",
            observe=observe,
        )
        return res.diverged

    return bisect_max_lr(
        verdict, guess, per_round=protocol.per_round, rel_tol=protocol.rel_tol, span=protocol.span
    )


__all__ = ["SOURCE_HINT", "UPDATES", "AdaptiveSetup", "adaptive_setup", "measure_real_max_lr"]
