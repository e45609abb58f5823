"""``stability heatmap RULE --x P:lo:hi:n[:log] --y ...``: spectral radius over a grid."""

from __future__ import annotations

from stability.cli.args import (
    add_output_arguments,
    add_rule_arguments,
    float_arg,
    output_file_arg,
    rule_values,
)

METRICS = ("radius", "half-life", "stable")


def register(sub) -> None:
    p = sub.add_parser(
        "heatmap",
        help="spectral radius / half-life / stability over a grid of two parameters",
        description="Evaluate RULE on the grid --y × --x (each P:lo:hi:n[:log]; P is lr, "
        "lam*lr (ηλ with λ = 1) or a rule parameter such as momentum, tau, delta, decay, "
        "horizon) and write a PNG (--out, unstable region black, exact max-lr curve overlaid "
        "when one axis is the step size) and/or a CSV (--csv, one row per grid point).",
    )
    add_rule_arguments(p)
    p.add_argument("--x", required=True, metavar="P:lo:hi:n[:log]", help="horizontal axis")
    p.add_argument("--y", required=True, metavar="P:lo:hi:n[:log]", help="vertical axis")
    p.add_argument("--lr", type=float_arg("lr"), help="step size, when no axis is lr")
    p.add_argument("--metric", choices=METRICS, default="radius", help="colour of the PNG")
    p.add_argument(
        "--out", type=output_file_arg("--out"), metavar="F.png", help="write the figure here"
    )
    p.add_argument(
        "--csv", type=output_file_arg("--csv"), metavar="F.csv", help="write the grid here"
    )
    p.add_argument(
        "--bounds", action="store_true", help="overlay PipeMare Lemma 1/3 bounds (sgd, momentum)"
    )
    p.add_argument("--no-max-lr", action="store_true", help="do not overlay the max-lr curve")
    add_output_arguments(p)
    p.set_defaults(run=run, report=report)


def run(args) -> dict:
    import time

    import numpy as np

    from stability.analysis.heatmap import heatmap, lemma_curve, max_lr_curve, parse_axis, write_csv
    from stability.cli.progress import Progress

    if not args.out and not args.csv:
        raise ValueError("give --out F.png and/or --csv F.csv")
    x, y = parse_axis(args.x, "--x"), parse_axis(args.y, "--y")
    params = rule_values(args)
    if args.lr is not None:
        params["lr"] = args.lr
    bars: list[Progress] = []  # created at the first report, when the grid size is known

    def progress(done: int, total: int) -> None:
        if not bars:
            bars.append(Progress(total, "heatmap"))
        bars[0].update(done)

    start = time.perf_counter()
    hm = heatmap(args.rule, x, y, progress=progress, **params)
    for bar in bars:
        bar.close()
    seconds = time.perf_counter() - start
    out = {"rule": hm.rule, "x": _axis(hm.x), "y": _axis(hm.y), "metric": args.metric}
    if args.csv:
        write_csv(hm, args.csv)
    if args.out:
        from stability.plotting import heatmap_figure, save_figure

        curves = [] if args.no_max_lr else [max_lr_curve(hm)]
        if args.bounds:
            curves.append(lemma_curve(hm))
        fig = heatmap_figure(hm, args.metric, curves=[c for c in curves if c is not None])
        save_figure(fig, args.out)
    finite = hm.radius[np.isfinite(hm.radius)]
    out.update(
        png=None if args.out is None else str(args.out),
        csv=None if args.csv is None else str(args.csv),
        points=int(hm.radius.size),
        stable_fraction=float(hm.stable.mean()),
        radius_min=float(finite.min()) if finite.size else None,
        radius_max=float(finite.max()) if finite.size else None,
        refined_points=int(hm.refined.sum()),
        seconds=seconds,
    )
    return out


def _axis(axis) -> dict:
    return {"name": axis.name, "spec": axis.spec, "points": int(axis.values.size)}


def report(result: dict) -> str:
    lines = [
        f"{result['rule']}: {result['y']['points']} × {result['x']['points']} grid "
        f"({result['y']['name']} × {result['x']['name']}) in {result['seconds']:.2f} s; "
        f"{100 * result['stable_fraction']:.1f} % stable; "
        f"{result['refined_points']} points refined in mpmath"
    ]
    for key in ("png", "csv"):
        if result[key]:
            lines.append(f"wrote {result[key]}")
    return "\n".join(lines)
