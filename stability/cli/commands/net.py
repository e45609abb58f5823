"""``stability net curvature|max-lr|train|noise --problem FILE.py:FUNC ...``: a user's PyTorch model
(`stability.nets.public`: ``st.net_curvature``, ``st.net_max_lr``, ``st.net_train``).

* ``curvature [--k K] [--stages P] [--stage-blocks] [--negative]``: ``eigenvalues``
  (descending), ``stage_eigenvalues`` (with ``--stage-blocks``), ``negative_eigenvalues`` (with
  ``--negative``, else null), ``stage_sizes``, ``n_params``, ``hvps``, ``seconds``, ``method``;
* ``max-lr --rule R [rule flags] [--stages P --schedule S --microbatches N | --tau T]
  [--k K] [--measure]``: the coupled per-stage ``max_lr`` on the network's curvature,
  ``scalar_bound``, ``eigenvalues``, ``stage_taus``, ``stage_sizes``, ``method``, the rates at
  half the threshold, and with ``--measure`` the simulator's ``measured_max_lr`` and
  ``measured_bracket`` under ``protocol``;
* ``train --rule R [rule flags] --lr X --steps N [--batch B] [delays]
  [--backward stashed|current] [--sharpness-every K]``: ``diverged``, ``final_loss``,
  ``loss_curve``, ``measured_rate``, ``protocol``; with ``--backward current`` no weight
  stashing (backward delays from the schedule, or ``--tau-bkwd`` with a uniform ``--tau``;
  ``--tau-recomp`` for rule recompute); with ``--sharpness-every K`` the edge of stability:
  ``sharpness``, ``predicted_edge``, ``plateau``, ``reached``, ``edge_ratio`` (and
  ``edge_delta``, ``edge_without_delta`` with ``--backward current``; full batch with a
  uniform delay ``oscillation_curvature``, ``oscillation_ratio``); ``--batch B
  --sampling reshuffle|iid`` trains with minibatches;
* ``noise --rule R [rule flags] [--tau T | --stages P --schedule S] --batch B [--k K] [--lr X]
  [--curvature hessian|ggn] [--measure --runs N]``: the minibatch theory near a minimum
  (`stability.nets.noise_public`, ``st.net_noise``): ``full_batch_max_lr``, ``ms_max_lr``,
  ``as_max_lr``, ``as_bracket``, ``expected_loss``, ``floor``, ``rate``,
  ``subspace_change``, ``protocol``, with ``--measure`` the simulator's ``measured`` runs.

Adam/AdamW (``--rule adam``, ``pipeoptim --optimizer adam|adamw``): ``--precond-from
STATE|warmup:N:LR`` gives the optimizer's preconditioner P (``curvature``: also
``preconditioned_eigenvalues``; ``max-lr``: the prediction on P^1/2 H P^1/2, with ``--measure``
also ``measured_bracket_real``; ``noise``: the minibatch theory of the frozen-P rule, with
``preconditioner``, and ``--measure`` also ``measured_real``), ``train --update real`` runs real
Adam (docs/adam.md).  ``noise --precond-from stationary --lr X``: P is real Adam's own
stationary v̂ at that lr and batch (`stability.nets.stationary_adam`).

Every subcommand takes ``--dtype float32|float64`` and ``--device DEVICE`` (default: the
model's own).  Needs PyTorch (``pip install -e '.[torch]'`` in the checkout); without it each
subcommand says so on one line and exits with code 2.  See docs/nets.md.
"""

from __future__ import annotations

from stability.api.tables import MAX_STEPS
from stability.cli.args import Parser, add_command
from stability.cli.declared import call, register_declared

API = "net_max_lr"
EXAMPLES = (
    "net curvature --problem examples/diabetes_linear.py:problem --stages 2 --k 3",
    "net max-lr --problem examples/diabetes_linear.py:problem --rule momentum --momentum 0.5 "
    "--stages 2 --tau 2 --k 3 --json",
)
SUBCOMMAND_EXAMPLES = {
    "curvature": EXAMPLES[0],
    "max-lr": EXAMPLES[1],
    "train": "net train --problem examples/diabetes_linear.py:problem --rule sgd --stages 2 "
    "--tau 1 --lr 0.1 --steps 50",
    "noise": "net noise --problem examples/diabetes_linear.py:problem --rule sgd --tau 1 "
    "--batch 16 --k 4 --steps 100 --lyapunov-steps 400 --json",
}
__all__ = ["MAX_STEPS", "register"]  # MAX_STEPS: the simulator's most steps on the command line


def _subcommand(net, name: str, help: str, report, run=None) -> None:  # noqa: A002 - argparse's
    """Subcommand ``name`` of ``net``, declared in `stability.api.commands` as ``net NAME``;
    train and the measurements show a progress bar on a terminal (`stability.cli.progress`)."""
    register_declared(
        net,
        f"net {name}",
        usage="--problem FILE.py:FUNC [options]",
        help=help,
        description=help,
        examples=[SUBCOMMAND_EXAMPLES[name]],
        report=report,
        run=run or (lambda args: _call(f"net {name}", args)),
    )


def register(sub) -> None:
    p = add_command(
        sub,
        "net",
        usage="curvature|max-lr|train|noise --problem FILE.py:FUNC [options] [--json]",
        help="a PyTorch model: curvature per stage, predicted max lr, delayed-pipeline "
        "simulator, minibatch theory",
        description="A user's PyTorch model split into pipeline stages: its top Hessian "
        "eigenvalues (curvature), the max stable lr of a rule with per-stage delays on that "
        "curvature (max-lr, --measure: bracketed by simulation), a delayed training run "
        "(train), or the minibatch theory near a minimum (noise).  `stability net SUBCOMMAND "
        "--help` lists each one's flags.",
        examples=EXAMPLES,
    )
    net = p.add_subparsers(dest="net_command", metavar="SUBCOMMAND", parser_class=Parser)
    net.required = True
    _subcommand(
        net, "curvature", "top Hessian eigenvalues, overall and per stage", report_curvature
    )
    _subcommand(
        net, "max-lr", "predicted (and measured) max stable lr per stage delays", report_max_lr
    )
    _subcommand(net, "train", "train the model with per-stage delays (the simulator)", report_train)
    _subcommand(
        net,
        "noise",
        "minibatch theory near a minimum: thresholds, loss, floor",
        report_noise,
        run=run_noise,
    )


def _public():
    """`stability.nets.public` once PyTorch is known to be there (one line, exit 2, if not)."""
    from stability.nets import require_torch

    require_torch()
    import stability.nets.public as public

    return public


def _call(name: str, args):
    _public()
    if not (name == "net train" or getattr(args, "measure", False)):
        return call(name, args)  # nothing is simulated: no bar
    with _progress_bar(name, args) as progress:
        return call(name, args, progress=progress)


def _progress_bar(name: str, args):
    """The progress bar of subcommand ``name`` (steps simulated; `stability.cli.progress`)."""
    from stability.cli.progress import progress_bar

    return progress_bar(f"{name} {args.rule}", json=args.json)


def run_noise(args):
    """``net noise``: the problem loaded in its precision, its pipeline over its stages."""
    from stability.cli.declared import keywords, option_values

    _public()
    from stability.api.net_tables import NET_PIPELINE_OPTIONS, NET_PRECISION
    from stability.nets.noise_public import net_noise
    from stability.nets.problem import load_problem
    from stability.pipeline import Pipeline

    values = keywords("net noise", args)
    for o in NET_PRECISION + NET_PIPELINE_OPTIONS:
        values.pop(o.name, None)
    precision = option_values(args, NET_PRECISION)
    delays = option_values(args, NET_PIPELINE_OPTIONS)
    net = load_problem(values.pop("problem"), stages=values.pop("stages", None), **precision)
    stages = len(net.stage_sizes) if delays.keys() & {"schedule", "stage_delays", "tau"} else None
    pipe = Pipeline.from_options(stages=stages, backward="stashed", **delays)
    if not args.measure:
        return net_noise(net, args.rule, pipeline=pipe, **values)
    with _progress_bar("net noise", args) as progress:
        return net_noise(net, args.rule, pipeline=pipe, progress=progress, **values)


def report_curvature(result) -> str:
    """Every key; the stage eigenvalues one line per stage."""
    from stability.cli.report import aligned, rows, value

    skip = ("schema_version", "stage_eigenvalues", "warnings")  # main prints the warnings
    keys = [k for k in result.to_json() if k not in skip]
    pairs = rows(result, keys)
    after = keys.index("eigenvalues") + 1
    pairs[after:after] = [
        (f"stage {i} eigenvalues", f"{value(v)} 1/lr")
        for i, v in enumerate(result.stage_eigenvalues, start=1)
    ]
    return "\n".join(aligned(pairs))


def report_max_lr(result) -> str:
    from stability.cli.report import lines

    keys = ["rule", "max_lr", "scalar_bound", "crossing_angle", "critical_stage", "schedule",
            "stage_taus", "stage_sizes", "rank", "truncation_change", "eigenvalues", "method",
            "rate_lr", "predicted_rate"]  # fmt: skip
    if result.measured_bracket is not None:
        keys += ["measured_max_lr", "measured_bracket", "measured_rate"]
    if result.preconditioner is not None:  # adaptive rules (docs/adam.md)
        keys += ["preconditioned_eigenvalues", "preconditioner", "measured_bracket_real"]
        keys += ["real_ratio"]
    return "\n".join(lines(result, keys))


def report_train(result) -> str:
    from stability.cli.report import lines, number

    keys = ["rule", "diverged", "diverged_step", "final_loss", "measured_rate", "schedule",
            "backward", "stage_taus", "stage_taus_bkwd", "stage_sizes"]  # fmt: skip
    if result.update == "real" or result.preconditioner is not None:
        keys += ["update", "preconditioner"]
    if result.sharpness:
        keys += ["sharpness_kind", "predicted_edge", "plateau", "reached", "edge_ratio"]
    if result.edge_delta is not None:  # --backward current: H_b in the edge
        keys += ["edge_delta", "edge_without_delta"]
    if result.oscillation_curvature is not None:  # stability.nets.oscillation
        keys += ["oscillation_curvature", "oscillation_ratio"]
    out = lines(result, keys)
    if result.sharpness:  # [[step, λ₁], ...]
        (s0, l0), (s1, l1) = result.sharpness[0], result.sharpness[-1]
        top = max((v for _, v in result.sharpness if v is not None), default=None)
        out.append(f"sharpness λ₁ {number(l0, 6)} at step {s0} → {number(l1, 6)} at step {s1} "
                   f"(max {number(top, 6)}, {len(result.sharpness)} points)")  # fmt: skip
    if result.loss_curve:
        (first_step, first), (last_step, last) = result.loss_curve[0], result.loss_curve[-1]
        out.append(f"loss {number(first, 6)} at step {first_step} → {number(last, 6)} at step "
                   f"{last_step}")  # fmt: skip
    return "\n".join(out)


# -- net noise (minibatch theory near a minimum) ---------------------------------------------------


def report_noise(result) -> str:
    from stability.cli.report import aligned, lines, number

    out = lines(
        result,
        ["rule", "batch", "lr", "samples", "n_params", "k", "subspace", "curvature",
         "sampling_factor", "full_batch_max_lr", "ms_max_lr", "as_max_lr", "as_bracket", "floor",
         "rate", "half_life", "subspace_change", "schedule", "stage_taus",
         *(["preconditioner"] if result.preconditioner is not None else [])],
    )  # fmt: skip
    out.append("expected excess loss E f − f*:")
    out += [f"  t = {t:<8}{number(v, 6)}" for t, v in result.expected_loss]
    if result.measured is not None:
        m = result.measured
        out.append("measured (mean ± se):")
        out += [f"  t = {t:<8}{number(a, 6)} ± {number(b, 3)}" for t, a, b in m["expected_loss"]]
        out.append(f"  floor {number(m['floor'][0], 6)} ± {number(m['floor'][1], 3)}")
        pairs = [(k, number(v, 6)) for k, v in m.items() if not isinstance(v, (list, dict))]
        out += ["  " + line for line in aligned(pairs)]
        if m.get("as_bracket"):
            out.append(f"  as_bracket {m['as_bracket']}")
    if result.measured_real is not None:
        m = result.measured_real
        out.append("measured, real Adam (mean ± se):")
        out += [f"  t = {t:<8}{number(a, 6)} ± {number(b, 3)}" for t, a, b in m["expected_loss"]]
        out.append(f"  floor {number(m['floor'][0], 6)} ± {number(m['floor'][1], 3)}")
        out.append(f"  v_hat_ratio {number(m['v_hat_ratio'], 6)}")
    return "\n".join(out)
