"""``stability tradeoff --batch B --tau T``: speed (half-life of E f − f*) against noise floor,
per mitigation (`stability.noise.tradeoff`, ``st.tradeoff``).
"""

from __future__ import annotations

from stability.cli.declared import register_declared

API = "tradeoff"
EXAMPLES = (
    "tradeoff --batch 8 --tau 1 --samples 32 --rules sgd",
    "tradeoff --batch 8 --tau 1 --samples 32 --rules sgd,momentum --target 1 --json",
)


def register(sub) -> None:
    register_declared(
        sub,
        "tradeoff",
        usage="--batch B --tau T [--rules R1,R2,...] [--target X] [--out F.png] [--json]",
        help="minibatch least squares: Pareto fronts of half-life vs noise floor per rule",
        description="For each rule of --rules at delay τ on least squares with minibatches of "
        "B rows: every (lr, momentum, horizon) of a fixed grid scored by the half-life of "
        "E f − f* and its noise floor (exact mean-square theory), the Pareto front of the "
        "two, and with --target which rule reaches that excess loss in the fewest steps.",
        examples=EXAMPLES,
        report=report,
    )


def report(result) -> str:
    """Each rule's Pareto front, then the steps to the target."""
    from stability.cli.report import number

    lines = [f"speed vs floor at τ = {result.tau}, batch {result.batch} (exact mean-square)"]
    for rule, front in result.fronts.items():
        lines.append(f"{rule}: {len(front)} points on the front of {len(result.points[rule])}")
        lines.append(f"  {'half-life':>12}{'floor':>14}{'lr':>12}{'momentum':>10}{'horizon':>9}")
        for half_life, floor, lr, momentum, horizon in front:
            lines.append(
                f"  {number(half_life, 6):>12}{number(floor, 6):>14}{number(lr, 6):>12}"
                f"{number(momentum, 4):>10}{number(horizon, 4):>9}"
            )
    if result.target is not None:
        lines.append(f"steps to excess loss {number(result.target)}:")
        for rule, steps in result.steps_to_target.items():
            lines.append(f"  {rule:<12}{number(steps, 6) if steps is not None else 'never'}")
        lines.append(f"fastest: {result.fastest or 'none reaches the target'}")
    if result.figure is not None:
        lines.append(f"wrote {result.figure}")
    return "\n".join(lines)
