"""`make run`: the main job — a tour of the toolkit on its embedded defaults, offline.

1. the exact maximal stable step size of every registered rule at a few delays (the table
   behind PipeMare Lemma 1-3 and Kosson Sec. 3.4), printed and written to
   ``<out-dir>/max_lr_table.json`` (exact: the same in every run);
   and the max lr against pipeline depth P = 1 … 64 under PipeMare, PipeDream-2BW and
   uniform delays, with each row's slope in P and whether it follows 1/τ (Giladi et al.
   2020; `stability.analysis.depth`), printed (``paper_repro/pipeline_depth.py`` writes it
   with its figure);
2. the acceptance heatmap: delayed heavy ball, τ = 1, 256 × 256 points over lr × momentum;
3. theory vs the reference trainer on cpusmall (the copy shipped with the package): delayed
   SGD at τ = 4, predicted and measured max stable lr;
4. every reproduction of ``paper_repro/`` in quick mode (``stability repro --all --quick``).

Steps 1-3 need only the installed package.  Step 4 runs the checkout's scripts, found in
``paper_repro/`` of the working directory (or ``--repro-dir``); elsewhere it is skipped with
a one-line note.  Everything goes to ``--out-dir`` (default ``out/run``, git-ignored in the
checkout), never over the committed full-mode figures in ``figures/``, which only
``make figures`` (or an explicit ``--out-dir figures``) rewrites.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from stability.analysis.boundary import max_lr
from stability.analysis.depth import FIT_FROM, depth_table, format_table
from stability.api.repro import DEFAULT_REPRO_DIR, available, missing_requirements
from stability.cli.main import main as cli
from stability.files import write_json
from stability.rules.registry import RULES

DELAYS = (0, 1, 4, 16, 64)
OUT_DIR = Path("out") / "run"
HEATMAP = (
    "heatmap momentum --tau 1 --x lr:1e-3:10:256:log --y momentum:0:0.999:256 --bounds --out"
).split()
VALIDATE = "validate --rules sgd --taus 4 --steps 5000 --rate-doublings 0".split()


def max_lr_table() -> dict:
    """Exact max lr (λ = 1) of every registered rule at the delays of `DELAYS`; a rule with a
    momentum runs at its default momentum, written in its rows (``momentum``)."""
    rows = []
    for name, spec in RULES.items():
        for tau in DELAYS:
            if "tau" in spec.param_names:
                values = {"tau": tau}
            elif "tau_fwd" in spec.param_names:
                values = {"tau_fwd": tau + 1, "tau_bkwd": 0}
            elif tau:
                continue  # a synchronous rule (gpipe) has no delay: one row
            else:
                values = {}
            if name == "recompute":
                values["tau_recomp"] = (tau + 1) // 2
            momentum = [p.default for p in spec.params if p.name == "momentum"]
            if momentum:  # stated in the row: the rule's default momentum
                values["momentum"] = momentum[0]
            rule, model = spec.build(**values)
            r = max_lr(rule, model)
            rows.append({"rule": name, **values, "max_lr": r.max_lr, "angle": r.crossing_angle})
    return {"lam": 1.0, "rows": rows}


def write_table(out_dir: Path) -> Path:
    """Print the max-lr table and write ``max_lr_table.json`` in ``out_dir``."""
    table = max_lr_table()
    delays = [
        ", ".join(f"{k}={v}" for k, v in r.items() if k.startswith("tau")) for r in table["rows"]
    ]
    width = max(22, *(len(d) + 2 for d in delays))
    print(f"{'rule':<13}{'delays':<{width}}{'momentum':>9}{'max stable lr (λ = 1)':>24}")
    for row, delay in zip(table["rows"], delays, strict=True):
        value = "stable for all lr" if row["max_lr"] is None else f"{row['max_lr']:.10g}"
        momentum = f"{row['momentum']:g}" if "momentum" in row else "—"
        print(f"{row['rule']:<13}{delay:<{width}}{momentum:>9}{value:>24}")
    print("momentum: each rule's default (`stability rules RULE`); — : the rule has none")
    return write_json(out_dir / "max_lr_table.json", table)


def print_depth_table() -> None:
    """Print the max lr vs pipeline depth (`stability.analysis.depth`)."""
    table = depth_table()
    print(
        "\nmax stable lr at λ = 1 vs pipeline depth P (every stage's rule at its own delay, one "
        f"common lr: the critical stage's); slopes of ln max_lr over P ≥ {FIT_FROM}; adam with "
        "β1 = 0.9 and its preconditioner frozen at P = 1; profiles: pipemare τ_i = 2(P−i)+1, "
        "pipedream-2bw τ_i = 1, uniform τ_i = P"
    )
    print("\n".join(format_table(table)))


def arguments(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m stability.cli.main_job", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--out-dir", type=Path, default=OUT_DIR, help=f"where to write (default {OUT_DIR})"
    )
    parser.add_argument(
        "--repro-dir",
        type=Path,
        default=DEFAULT_REPRO_DIR,
        help=f"the reproduction scripts (default {DEFAULT_REPRO_DIR}/ of the working directory)",
    )
    parser.add_argument(
        "--table-only", action="store_true", help="write the max-lr table only (make figures)"
    )
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = arguments(argv)
    start = time.perf_counter()
    out = args.out_dir
    written = [write_table(out)]
    if args.table_only:
        print(f"wrote {written[0]}")
        return 0
    print_depth_table()

    heatmap_png = out / "heatmap_momentum_tau1.png"
    print("\nheatmap: delayed heavy ball, τ = 1, 256 × 256 points ...", flush=True)
    if cli([*HEATMAP, str(heatmap_png)]) != 0:
        return 1
    written.append(heatmap_png)

    print("\ntheory vs trainer on cpusmall (shipped copy): sgd, τ = 4 ...", flush=True)
    if cli(VALIDATE) != 0:
        return 1

    if args.repro_dir.is_dir():
        names = available(args.repro_dir)
        print(
            f"\n{len(names)} reproductions of {args.repro_dir}/ in quick mode (a few minutes) ...",
            flush=True,
        )
        repro = out / "repro"
        argv = ["repro", "--all", "--quick", "--repro-dir", str(args.repro_dir)]
        if cli([*argv, "--out-dir", str(repro)]) != 0:
            return 1
        ran = [n for n in names if not missing_requirements(args.repro_dir, n)]
        written += [repro / f"{name}.{ext}" for name in ran for ext in ("png", "json")]
    else:
        print(
            f"\nreproductions skipped: no {args.repro_dir}/ in {Path.cwd()} (they are scripts "
            "of a source checkout; run from its root or pass --repro-dir)"
        )

    print(f"\n{len(written)} files written in {time.perf_counter() - start:.0f} s, in {out}:")
    for path in written:
        print(f"  {path}")
    print("the committed full-mode figures in figures/ are rewritten only by `make figures`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
