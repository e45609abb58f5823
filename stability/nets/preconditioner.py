r"""The second-moment preconditioner of a real Adam/AdamW optimizer on a network (precond_from).

Adam (Kingma & Ba, Alg. 1) and AdamW (Loshchilov & Hutter; PyTorch's ``torch.optim.AdamW``)
divide each coordinate's bias-corrected first moment by √v̂ + ε.  Frozen at one step t, that
division is the diagonal preconditioner the analysis of `stability.rules.adam` linearises with,

    P_i = 1 / (√v_i / √(1 − β2^t) + ε),      v = ``exp_avg_sq``, t = ``step``,

written exactly as ``torch.optim.Adam`` evaluates its denominator (``exp_avg_sq.sqrt() /
bias_correction2_sqrt + eps``; ``max_exp_avg_sq`` instead of ``exp_avg_sq`` with ``amsgrad``).
A *source* (`load_preconditioner`) is either

* a file written by ``torch.save(opt.state_dict())`` (or a checkpoint dict with one entry that
  is such a state, as PyTorch's "general checkpoint" keeps it) for a ``torch.optim.Adam`` or
  ``AdamW`` built over ``model.named_parameters()`` (its state names each parameter, torch ≥
  2.6, in any order and grouping), or over ``model.parameters()`` (in that order; the i-th
  state entry belongs to the i-th parameter; or over the trainable ones, those with
  ``requires_grad``), or over
  parameter groups that each keep the model's order (AdamW's usual split of decayed weights and
  undecayed biases and norms: the groups' interleaving is the one under which every entry has
  its parameter's shape, refused where none or several do): β2 and ε are read from each
  parameter's group, v and t from its state.  A parameter the loss does not use (∇f(w*) = 0
  on it: a head the forward pass skips) gets no gradient, so torch keeps no state for it; it
  is read as the state zero gradients leave, m = v = 0 at the others' step (P = 1/ε, on
  coordinates where the Hessian is zero), and named in the JSON (``without_state``); or
* ``warmup:N:LR`` — N full-batch steps of ``torch.optim.AdamW`` itself (the rule's β1, β2, ε and
  weight decay) from the problem's weights at step size LR: P is then the optimizer's state
  after the warm-up, and so are the weights (`Preconditioner.weights`).

The source supplies P alone (and, for a real-Adam run continuing it, m, v and t); β1, the
weight decay and the step size of the analysis come from the rule's flags.  A state of another
model (a count or shape mismatch), a file that is not an Adam/AdamW state, or a warm-up whose
loss diverges is refused with a one-line `ValueError` naming ``precond_from``.
"""

from __future__ import annotations

import math
import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from stability.checks import check_real, unreadable_file
from stability.nets.problem import NetProblem

WARMUP_DIVERGENCE = 1e6
"""A warm-up whose loss exceeds this × the initial loss (or is not finite) diverged."""

MAX_WARMUP_STEPS = 1_000_000


@dataclass(frozen=True, eq=False)
class Preconditioner:
    """P (flat, the problem's parameter order) and the optimizer state it was read from.

    ``exp_avg``/``exp_avg_sq``: m and v (flat); ``step``: t per parameter entry (flat, int);
    ``beta2``/``eps``: per entry too (param groups may differ); ``weights``: the weights after
    a warm-up (None for a file: the problem's own weights); ``without_state``: the parameters
    the state has no entry for because the loss does not use them (module doc); ``stationary``:
    how the fixed point of `stability.nets.stationary_adam` was found (None for the others).
    """

    P: torch.Tensor  # float64 on the CPU, as the other per-entry fields
    exp_avg: torch.Tensor
    exp_avg_sq: torch.Tensor
    step: torch.Tensor
    beta2: torch.Tensor
    eps: torch.Tensor
    source: str
    weights: torch.Tensor | None = None
    warmup: dict | None = None
    without_state: tuple[str, ...] = ()
    stationary: dict | None = None

    @property
    def scale(self) -> torch.Tensor:
        """P^{1/2}: the whitening x = P^{-1/2}(w − w*) of `stability.nets.preconditioned`."""
        return self.P.sqrt()

    def uniform(self, name: str, values: torch.Tensor) -> float:
        """The single value of a per-entry field, or a `ValueError` if the groups differ."""
        lo, hi = float(values.min()), float(values.max())
        if lo != hi:
            raise ValueError(
                f"precond_from: the optimizer's parameter groups differ in {name} "
                f"({lo:g} … {hi:g}); a real-Adam run needs one value"
            )
        return lo

    def describe(self) -> dict[str, Any]:
        """The ``preconditioner`` JSON: source, step t, β2, ε, min / median / max of P."""
        p = self.P.numpy()
        steps = sorted({int(s) for s in self.step.unique().tolist()})
        out: dict[str, Any] = {
            "source": self.source,
            "step": steps[0] if len(steps) == 1 else [steps[0], steps[-1]],
            "beta2": _one_or_range(self.beta2),
            "eps": _one_or_range(self.eps),
            "min": float(p.min()),
            "median": float(np.median(p)),
            "max": float(p.max()),
            "formula": "P_i = 1/(√v_i/√(1 − β2^t) + ε), as torch.optim.Adam divides",
            "weights": "the problem's weights"
            if self.weights is None
            else "the weights after the warm-up (not the problem's)",
        }
        if self.warmup is not None:
            out["warmup"] = self.warmup
        if self.stationary is not None:
            out["step"] = None  # no bias correction left (stability.nets.stationary_adam)
            out["formula"] = "P_i = 1/(√v̂_i + ε), v̂ the stationary fixed point"
            out["stationary"] = self.stationary
        if self.without_state:
            out["without_state"] = {
                "parameters": list(self.without_state),
                "reading": "unused by the loss (∇f = 0 there) and so never stepped: m = v = 0 "
                "at the others' step t (torch's state after zero gradients), P = 1/ε",
            }
        return out


UNSEEN_SHARE = 0.5
"""`unseen_note` speaks when the top eigenvector has more than this share of its mass on
coordinates where the optimizer saw no gradient above ε."""


def unseen_note(pre: Preconditioner, names, sizes, x1: np.ndarray) -> str | None:
    """A warning when the top eigenvector x̃₁ of P^{1/2}HP^{1/2} (unit, whitened, problem order)
    lies mostly (> `UNSEEN_SHARE` of its mass) on coordinates where √v̂ ≤ ε (P ≥ 1/(2ε)): the
    optimizer's gradient there was rounding or none, so P ≈ 1/ε, and λ̃₁ is the curvature the
    analysed loss has there — e.g. a bias before BatchNorm, which train mode makes invariant
    and the analysis's eval mode does not (docs/adam.md).  None otherwise."""
    unseen = (pre.P * pre.eps >= 0.5).numpy()
    x1 = np.asarray(x1, dtype=float)
    share = float(np.sum(x1[unseen] ** 2) / np.sum(x1**2))
    if share <= UNSEEN_SHARE:
        return None
    counts = [
        f"{name}: {int(part.sum())} of {part.size}"
        for name, part in zip(names, np.split(unseen, np.cumsum(sizes)[:-1]), strict=True)
        if part.any()
    ]
    return (
        f"preconditioned_eigenvalues: {share:.0%} of the top eigenvector lies where √v̂ ≤ ε "
        f"({'; '.join(counts)}): the optimizer saw no gradient there above rounding, so "
        f"P ≈ 1/ε = {1 / float(pre.eps.min()):.3g}, and λ̃₁ is the curvature the analysed loss "
        "has there (a bias before BatchNorm: train mode makes it invariant, the analysis's eval "
        "mode does not)"
    )


def _one_or_range(values: torch.Tensor):
    lo, hi = float(values.min()), float(values.max())
    return lo if lo == hi else [lo, hi]


def precondition(v: torch.Tensor, step: torch.Tensor, beta2, eps) -> torch.Tensor:
    """P = 1/(√v/√(1 − β2^t) + ε), elementwise, as ``torch.optim.Adam`` forms its denominator."""
    bc2_sqrt = (1 - torch.as_tensor(beta2, dtype=torch.float64) ** step) ** 0.5
    return 1.0 / (v.sqrt() / bc2_sqrt + eps)


def is_adaptive(rule: str, params: dict[str, Any]) -> bool:
    """Rules that divide by an optimizer's second moment: ``adam``, ``pipeoptim`` with
    ``optimizer`` adam or adamw."""
    return rule == "adam" or (rule == "pipeoptim" and params.get("optimizer") in ("adam", "adamw"))


def load_preconditioner(
    problem: NetProblem,
    source: str,
    *,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
    weight_decay: float = 0.0,
) -> Preconditioner:
    """The preconditioner of ``source`` (a state file or ``warmup:N:LR``, module doc) on
    ``problem``; β1, β2, ε, weight decay: the warm-up's (a file has its own β2, ε)."""
    if not isinstance(source, str) or not source:
        raise ValueError(
            "precond_from must be a torch.optim Adam/AdamW state_dict file or warmup:N:LR"
        )
    if source.startswith("warmup:"):
        steps, lr = _parse_warmup(source)
        # the rule's ranges, checked before torch.optim.AdamW sees them (its own refusal,
        # "Invalid epsilon value", names no flag; the outsider's fuzz)
        check_real("beta1", beta1, low=0.0, high=1.0, high_open=True)
        check_real("beta2", beta2, low=0.0, high=1.0, high_open=True)
        check_real("eps", eps, low=0.0, low_open=True)
        check_real("weight_decay", weight_decay, low=0.0)
        return warmup(
            problem,
            steps,
            lr,
            beta1=beta1,
            beta2=beta2,
            eps=eps,
            weight_decay=weight_decay,
            source=source,
        )
    return _from_file(problem, source)


def _parse_warmup(source: str) -> tuple[int, float]:
    parts = source.split(":")
    bad = ValueError(
        f"precond_from: warmup needs warmup:N:LR with N an integer in [1, {MAX_WARMUP_STEPS}] "
        f"and LR > 0, got {source!r}"
    )
    if len(parts) != 3:
        raise bad
    try:
        steps, lr = int(parts[1]), float(parts[2])
    except ValueError:
        raise bad from None
    if not 1 <= steps <= MAX_WARMUP_STEPS or not (math.isfinite(lr) and lr > 0):
        raise bad
    return steps, lr


def warmup(
    problem: NetProblem,
    steps: int,
    lr: float,
    *,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    source: str = "",
) -> Preconditioner:
    """``steps`` full-batch steps of ``torch.optim.AdamW`` (decoupled decay ``weight_decay``)
    from the problem's weights at ``lr``; the state and the weights after them."""
    w = problem.w_star.detach().clone().requires_grad_(True)
    opt = torch.optim.AdamW([w], lr=lr, betas=(beta1, beta2), eps=eps, weight_decay=weight_decay)
    first = float(problem.loss(w.detach()))
    for k in range(1, steps + 1):
        w.grad = problem.gradient(w.detach()).detach()
        opt.step()
        if k % 10 == 0 or k == steps:
            value = float(problem.loss(w.detach()))
            if not math.isfinite(value) or value > WARMUP_DIVERGENCE * max(first, 1e-300):
                raise ValueError(
                    f"precond_from: the warm-up diverged at step {k} (loss {value:.3g}, initial "
                    f"{first:.3g}); use a smaller LR than {lr:g}"
                )
    state = opt.state[w]
    n = w.numel()
    full = torch.full((n,), 1.0, dtype=torch.float64)
    t = full * float(state["step"])
    v = state["exp_avg_sq"].detach().to("cpu", torch.float64)
    return Preconditioner(
        P=precondition(v, t, beta2, eps),
        exp_avg=state["exp_avg"].detach().to("cpu", torch.float64),
        exp_avg_sq=v,
        step=t.to(torch.int64),
        beta2=full * beta2,
        eps=full * eps,
        source=source or f"warmup:{steps}:{lr:g}",
        weights=w.detach().clone(),
        warmup={
            "steps": steps,
            "lr": lr,
            "beta1": beta1,
            "beta2": beta2,
            "eps": eps,
            "weight_decay": weight_decay,
            "loss_before": first,
            "loss_after": float(problem.loss(w.detach())),
            "optimizer": "torch.optim.AdamW, full batch",
        },
    )


def _groups_in_model_order(
    entries: dict, groups: list, named: list[tuple[str, torch.Tensor]], unused: frozenset[str]
) -> list:
    """The (state index, group) of each model parameter (``named``, in
    ``model.named_parameters()`` order), for a state of several parameter groups (AdamW's usual
    split: weights decayed, biases and norms not).  Each group is taken to list its parameters
    in the model's order; the interleaving of the groups is the one under which every state
    entry has its parameter's shape, and an entry without state (never stepped: torch keeps none
    for a parameter that got no gradient) stands for a frozen one (``requires_grad=False``) or
    one the loss does not use (``unused``).  None or more than one such interleaving: a
    `ValueError` naming precond_from."""

    def shape(pid: Any) -> tuple | None:
        entry = entries.get(pid)
        value = entry.get("exp_avg_sq") if isinstance(entry, dict) else None
        return tuple(value.shape) if isinstance(value, torch.Tensor) else None

    def stateless(name: str, param: torch.Tensor) -> bool:
        return not param.requires_grad or name in unused

    def fits(pid: Any, name: str, param: torch.Tensor) -> bool:
        found = shape(pid)
        return stateless(name, param) if found is None else found == tuple(param.shape)

    lists = [[(pid, g) for pid in g["params"]] for g in groups]
    missing = sum(shape(pid) is None for members in lists for pid, _ in members)
    if missing > sum(stateless(name, p) for name, p in named):
        raise ValueError(
            f"precond_from: {missing} parameters have no exp_avg_sq in the optimizer state "
            "(never stepped, or not an Adam/AdamW state)"
        )

    def reading(pid: Any, group: dict, param: torch.Tensor) -> tuple | None:
        """What the state says of a parameter laid on the entry ``pid`` of ``group``."""
        if shape(pid) is not None:
            return ("state", pid)
        return None if not param.requires_grad else ("unused", *_hyper(group))

    # paths[positions] = (interleavings so far that read differently, capped at 2; one of them
    # as group choices, and what it reads): two that differ only in which stateless entry
    # stands for which stateless parameter read the same (a frozen one is not analysed; an
    # unused one needs only its group's β2, ε and amsgrad)
    paths: dict[tuple, tuple[int, tuple, tuple]] = {(0,) * len(lists): (1, (), ())}
    for name, param in named:
        grown: dict[tuple, tuple[int, tuple, tuple]] = {}
        for positions, (count, choices, read) in paths.items():
            for g, members in enumerate(lists):
                at = positions[g]
                if at < len(members) and fits(members[at][0], name, param):
                    moved = (*positions[:g], at + 1, *positions[g + 1 :])
                    path = ((*choices, g), (*read, reading(*members[at], param)))
                    if moved not in grown:
                        grown[moved] = (count, *path)
                        continue
                    before, *kept = grown[moved]
                    same = kept[1] == path[1]
                    grown[moved] = (max(before, count) if same else min(2, before + count), *kept)
        paths = grown
    count, choices, _ = paths.get(tuple(len(m) for m in lists), (0, (), ()))
    if count != 1:
        how = "in no way" if count == 0 else "in more than one way"
        why = "" if count == 0 else " (parameters of one shape sit in different groups)"
        raise ValueError(
            f"precond_from: the optimizer state's {len(groups)} parameter groups fit "
            f"model.parameters() {how} that keeps each group in the model's order with the "
            f"model's shapes{why}; build the optimizer over model.named_parameters() (its state "
            "then names them), or over model.parameters() in groups in the model's order"
        )
    taken = [0] * len(lists)
    order = []
    for g in choices:
        order.append(lists[g][taken[g]])
        taken[g] += 1
    return order


def _hyper(group: dict) -> tuple:
    """What a parameter group sets of P: β2, ε, amsgrad."""
    return float(group["betas"][1]), float(group["eps"]), bool(group["amsgrad"])


def _by_param_names(groups: list, names: list[str]) -> list | None:
    """The (state index, group) of each model parameter, in ``model.parameters()`` order, by the
    names an optimizer built over ``model.named_parameters()`` keeps in its state (torch ≥ 2.6:
    each group's ``param_names``), whatever order its groups list them in, and less one prefix
    common to all (a wrapper's: ``module.`` of DistributedDataParallel, ``_orig_mod.`` of
    ``torch.compile``); None where the state has no names or they are not the model's (names
    of the user's own): the parameters are then laid over the model by order and shape."""
    if not all(
        isinstance(g.get("param_names"), list) and len(g["param_names"]) == len(g["params"])
        for g in groups
    ):
        return None
    named = {
        name: (pid, g)
        for g in groups
        for name, pid in zip(g["param_names"], g["params"], strict=True)
    }
    if not named or len(named) != len(names):
        return None
    first = next(iter(named))
    for prefix in {first[: len(first) - len(name)] for name in names if first.endswith(name)}:
        if sorted(name[len(prefix) :] for name in named if name.startswith(prefix)) == sorted(
            names
        ):
            return [named[prefix + name] for name in names]
    return None


def _is_optimizer_state(x: Any) -> bool:
    return isinstance(x, dict) and {"state", "param_groups"} <= set(x)


def _optimizer_state(loaded: Any, source: str) -> tuple[dict, str]:
    """The optimizer state_dict a loaded file holds, and the source as reported: the file
    itself, or the one entry of a checkpoint dict that is one (PyTorch's "general checkpoint",
    ``{"model_state_dict": …, "optimizer_state_dict": …, "epoch": …}``), reported as
    ``file['key']``."""
    if _is_optimizer_state(loaded):
        return loaded, source
    found = (
        [k for k, v in loaded.items() if _is_optimizer_state(v)] if isinstance(loaded, dict) else []
    )
    if len(found) == 1:
        return loaded[found[0]], f"{source}[{found[0]!r}]"
    if found:
        raise ValueError(
            f"precond_from: {source!r} holds {len(found)} optimizer states "
            f"({', '.join(map(repr, found))}); save the one to use alone"
        )
    raise ValueError(
        f"precond_from: {source!r} is not an optimizer state_dict (no 'state' and "
        "'param_groups', nor an entry that has them; save opt.state_dict(), not the model's)"
    )


def _from_file(problem: NetProblem, source: str) -> Preconditioner:
    path = Path(source).expanduser()
    if reason := unreadable_file(path):
        raise ValueError(f"precond_from: file {source!r} {reason} (or give warmup:N:LR)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - a user's file: one line
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(err)).strip().splitlines()  # torch's bold
        if "torch.optim" in str(err):  # torch.save(opt): the object, pickled
            raise ValueError(
                f"precond_from: {source!r} holds a pickled optimizer object "
                "(torch.save(opt)); save opt.state_dict() instead"
            ) from None
        if isinstance(err, pickle.UnpicklingError):  # torch's advice (weights_only=False) is
            raise ValueError(  # not the user's mistake, and would run the file's code
                f"precond_from: {source!r} is not a torch.save'd optimizer state_dict (torch.load "
                "with weights_only=True cannot read it: not a torch.save file, or one holding "
                "objects besides tensors, numbers and containers)"
            ) from None
        raise ValueError(
            f"precond_from: {source!r} is not a torch.save'd optimizer state_dict "
            f"({type(err).__name__}: {text[0] if text else ''})"
        ) from None
    state, source = _optimizer_state(state, source)
    groups = state["param_groups"]
    if not isinstance(groups, list) or not all(
        isinstance(g, dict) and {"betas", "eps", "amsgrad", "params"} <= set(g) for g in groups
    ):
        raise ValueError(
            f"precond_from: {source!r} is not a torch.optim.Adam or AdamW state (its param_groups "
            "lack betas, eps, amsgrad)"
        )
    ids = [(i, g) for g in groups for i in g["params"]]
    model_params = list(problem.model.named_parameters())
    trainable = [(name, p) for name, p in model_params if p.requires_grad]
    if len(ids) == len(trainable):  # an optimizer over the trainable parameters only
        model_params = trainable
    if len(ids) != len(model_params):
        raise ValueError(
            f"precond_from: the optimizer state has {len(ids)} parameters, the model has "
            f"{len(model_params)} (model.parameters(); {len(trainable)} trainable); is it the "
            "state of another model?"
        )
    stateless = any(state["state"].get(pid) is None for g in groups for pid in g["params"])
    unused = _unused(problem) if stateless else frozenset()
    named_ids = _by_param_names(groups, [name for name, _ in model_params])
    if named_ids is not None:
        ids = named_ids
    elif len(groups) > 1:
        ids = _groups_in_model_order(state["state"], groups, model_params, unused)
    by_name = {name: (pid, g) for (name, _), (pid, g) in zip(model_params, ids, strict=True)}
    shapes = dict(zip(problem.names, problem.shapes, strict=True))
    entries = {name: state["state"].get(by_name[name][0]) for name in problem.names}
    stepped = [float(e["step"]) for e in entries.values() if isinstance(e, dict) and "step" in e]
    parts: dict[str, list[torch.Tensor]] = {k: [] for k in ("m", "v", "t", "b2", "eps")}
    without_state = []
    for name in problem.names:
        group, entry = by_name[name][1], entries[name]
        key = "max_exp_avg_sq" if group["amsgrad"] else "exp_avg_sq"
        if entry is None and name in unused and stepped:  # torch skipped it: no gradient
            without_state.append(name)
            zero = torch.zeros(shapes[name], dtype=torch.float64)
            entry = {key: zero, "exp_avg": zero, "step": max(stepped)}
        if not isinstance(entry, dict) or key not in entry or "step" not in entry:
            raise ValueError(
                f"precond_from: parameter {name!r} has no {key} in the optimizer state (never "
                "stepped, or not an Adam/AdamW state)"
            )
        v = entry[key]
        if tuple(v.shape) != tuple(shapes[name]):
            raise ValueError(
                f"precond_from: parameter {name!r} has shape {tuple(shapes[name])} in the model "
                f"but {tuple(v.shape)} in the optimizer state (the state of another model?)"
            )
        t = float(entry["step"])
        if not t >= 1:
            raise ValueError(f"precond_from: parameter {name!r} has step {t:g} (needs ≥ 1)")
        n = v.numel()
        parts["v"].append(v.detach().reshape(-1).to(torch.float64))
        parts["m"].append(entry["exp_avg"].detach().reshape(-1).to(torch.float64))
        parts["t"].append(torch.full((n,), t, dtype=torch.float64))
        parts["b2"].append(torch.full((n,), float(group["betas"][1]), dtype=torch.float64))
        parts["eps"].append(torch.full((n,), float(group["eps"]), dtype=torch.float64))
    v, t = torch.cat(parts["v"]), torch.cat(parts["t"])
    b2, eps = torch.cat(parts["b2"]), torch.cat(parts["eps"])
    if not torch.all(torch.isfinite(v)) or torch.any(v < 0):
        raise ValueError(f"precond_from: {source!r} has non-finite or negative exp_avg_sq")
    return Preconditioner(
        P=precondition(v, t, b2, eps),
        exp_avg=torch.cat(parts["m"]),
        exp_avg_sq=v,
        step=t.to(torch.int64),
        beta2=b2,
        eps=eps,
        source=str(source),
        without_state=tuple(without_state),
    )


def _unused(problem: NetProblem) -> frozenset[str]:
    """The parameters whose block of ∇f(w*) is exactly zero: those the loss does not use (a
    head the forward pass skips), for which torch's optimizer got no gradient and so keeps no
    state."""
    gradient = problem.params(problem.gradient(problem.w_star))
    return frozenset(name for name, g in gradient.items() if not torch.any(g != 0))


__all__ = [
    "UNSEEN_SHARE",
    "Preconditioner",
    "is_adaptive",
    "load_preconditioner",
    "precondition",
    "unseen_note",
    "warmup",
]
