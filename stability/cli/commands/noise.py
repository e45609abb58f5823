"""``stability noise RULE --batch B --lr X``: minibatch least squares — thresholds, expected loss,
noise floor (`stability.noise.minibatch`, ``st.noise``); ``--measure`` adds R independent
trainer runs.
"""

from __future__ import annotations

from stability.cli.declared import register_declared

API = "noise"
EXAMPLES = (
    "noise sgd --tau 2 --batch 8 --lr 0.05 --samples 64 --steps 100 --lyapunov-steps 200 "
    "--lyapunov-runs 4",
    "noise momentum --tau 1 --momentum 0.5 --batch 16 --lr 0.02 --samples 64 --steps 100 "
    "--lyapunov-steps 200 --lyapunov-runs 4 --json",
)


def register(sub) -> None:
    from stability.limits import NOISE_MAX_STAGED_WORK
    from stability.noise.minibatch import MAX_PARAMETERS, MAX_STATE
    from stability.noise.modal import FREE_LOOP_SOLVES

    register_declared(
        sub,
        "noise",
        usage="RULE --batch B --lr X [options] [rule flags] [--json]",
        help="minibatch least squares: exact mean-square threshold, expected loss, floor",
        description="For RULE trained on least squares with minibatches of B rows drawn iid: "
        "the full-batch, exact mean-square and almost-sure max stable lr, the expected excess "
        "loss E f − f* over time from the exact second-moment recursion, its floor and rate; "
        f"--measure compares with independent trainer runs.  At most {MAX_PARAMETERS} "
        f"parameters and a state of {MAX_STATE} entries (parameters × delay slots); per-stage "
        f"delays: min(d(d+1)/2, {FREE_LOOP_SOLVES}) × (slots read)³ ≤ "
        f"{NOISE_MAX_STAGED_WORK:.1e} (docs/limits.md).",
        examples=EXAMPLES,
        report=report,
    )


def report(result) -> str:
    """The thresholds, the expected-loss curve (predicted, and measured with --measure) and the
    floor; every field of the measured block, text ones as they are."""
    from stability.cli.report import aligned, lines, number, value

    out = lines(
        result,
        ["rule", "batch", "lr", "sampling", "samples", "parameters", "sampling_factor",
         "full_batch_max_lr", "ms_max_lr", "as_max_lr", "as_bracket", "floor", "rate",
         "half_life", "ms_radius", "mean_radius"] + (["stages"] if result.stages else []),
    )  # fmt: skip
    m = result.measured
    measured = {} if m is None else {int(t): (mean, se) for t, mean, se in m["expected_loss"]}
    out.append("expected excess loss E f − f*:" + ("   predicted   measured ± se" if m else ""))
    for t, v in result.expected_loss:
        row = f"  t = {t:<8}{number(v, 6)}"
        if t in measured:
            mean, se = measured[t]
            row = f"{row:<26}{number(mean, 6)} ± {number(se, 3)}"
        out.append(row)
    if m is not None:
        pairs = [(k, value(v, 6)) for k, v in m.items() if k != "expected_loss"]
        out.append("measured:")
        out += ["  " + line for line in aligned(pairs)]
    out += [f"note: {n}" for n in result.notes]
    return "\n".join(out)
