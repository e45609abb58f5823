"""Adam/AdamW on a network (issue 22): the acceptance commands, timed, through the CLI.

The model is ``examples/cancer_mlp.py`` (513 parameters) trained 200 full-batch steps by
``torch.optim.AdamW`` (lr 0.01, weight decay 0.01) from its standard initialisation; its
``opt.state_dict()`` and weights are saved to a temporary folder with a problem file that loads
them.  Each row is one ``stability net …`` command (a subprocess, one BLAS thread) with its wall
time and the numbers the acceptance reads:

* ``curvature --precond-from STATE --k 3``: the top preconditioned eigenvalues, and their largest
  relative difference to the dense P^{1/2}∇²f P^{1/2} (``torch.func.hessian``);
* ``max-lr --rule adam --beta1 0.9 --precond-from STATE --tau 4``: max lr, and its relative
  difference to the heavy-ball max lr at momentum 0.9 and curvature (1 − 0.9)·λ̃₁;
* the same with ``--stages 4 --schedule pipemare --measure``: the prediction, ``measured_bracket``
  (frozen P), ``measured_bracket_real`` (real Adam) and ``real_ratio``;
* ``max-lr --rule pipeoptim --optimizer adamw --weight-decay 0.1 --precond-from STATE --stages 4
  --schedule pipemare --backward current``: the prediction quadratic in lr
  (`stability.coupled.quadratic_lr`) and how it was decided;
* ``train --rule adam --beta1 0.9 --update real --tau T --lr 0.003 --steps 3000
  --sharpness-every 100`` from the standard initialisation, T ∈ {0, 2}: ``predicted_edge``,
  ``plateau``, ``edge_ratio``.

Run: ``.venv/bin/python benchmarks/bench_adam.py [--quick]`` (quick: no ``--measure`` row, 600
training steps).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "cancer_mlp.py"

TRAINED = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import torch
    sys.path.insert(0, {examples!r})
    import cancer_mlp

    def problem():
        d = cancer_mlp.problem()
        d["model"].double().load_state_dict(torch.load(Path(__file__).parent / "model.pt"))
        return d
    """
)


def prepare(folder: Path) -> str:
    """Train the example 200 AdamW steps; save the state, the weights, a problem file."""
    sys.path.insert(0, str(EXAMPLE.parent))
    import cancer_mlp

    d = cancer_mlp.problem()
    model = d["model"].double()
    opt = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.01)
    for _ in range(200):
        opt.zero_grad()
        d["loss"](model(d["inputs"]), d["targets"]).backward()
        opt.step()
    torch.save(opt.state_dict(), folder / "state.pt")
    torch.save(model.state_dict(), folder / "model.pt")
    (folder / "trained.py").write_text(TRAINED.format(examples=str(EXAMPLE.parent)))
    return str(folder / "state.pt")


def cli(*args: str) -> tuple[dict, tuple[float, float]]:
    """The command's JSON and its (wall, CPU) seconds."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "stability.cli.main", "net", *args, "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(done.stdout), (wall, cpu)


def dense_top(folder: Path, state: str, k: int) -> np.ndarray:
    from stability.nets.curvature import dense_hessian
    from stability.nets.preconditioner import load_preconditioner
    from stability.nets.problem import load_problem

    net = load_problem(f"{folder / 'trained.py'}:problem")
    s = load_preconditioner(net, state).scale.numpy()
    H = s[:, None] * dense_hessian(net) * s[None, :]
    return np.sort(np.linalg.eigvalsh(H))[::-1][:k]


def heavy_ball(lam: float, tau: int) -> float:
    from stability.analysis.boundary import max_lr
    from stability.rules.registry import get_spec

    return max_lr(*get_spec("momentum").build(tau=tau, momentum=0.9, lam=0.1 * lam)).max_lr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        state = prepare(folder)
        spec = f"{folder / 'trained.py'}:problem"
        out, sec = cli("curvature", "--problem", spec, "--precond-from", state, "--k", "3")
        ref = dense_top(folder, state, 3)
        got = np.array(out["preconditioned_eigenvalues"])
        rows.append(("curvature --k 3", sec, f"λ̃ {np.round(got, 4).tolist()}, "
                     f"max rel. diff to dense {np.max(np.abs(got / ref - 1)):.1e}"))  # fmt: skip
        adam = ["--problem", spec, "--rule", "adam", "--beta1", "0.9", "--precond-from", state]
        out, sec = cli("max-lr", *adam, "--tau", "4")
        hb = heavy_ball(out["preconditioned_eigenvalues"][0], 4)
        rows.append(("max-lr --tau 4", sec, f"max_lr {out['max_lr']:.6g}, rel. diff to heavy "
                     f"ball {abs(out['max_lr'] / hb - 1):.1e}"))  # fmt: skip
        if not args.quick:
            out, sec = cli("max-lr", *adam, "--stages", "4", "--schedule", "pipemare", "--measure")
            lo, hi = out["measured_bracket"]
            rows.append(("max-lr pipemare P=4 --measure", sec,
                         f"max_lr {out['max_lr']:.5g} in [{lo:.5g}, {hi:.5g}] "
                         f"(width {(hi - lo) / lo:.2%}); real "
                         f"[{out['measured_bracket_real'][0]:.4g}, "
                         f"{out['measured_bracket_real'][1]:.4g}], "
                         f"real_ratio {out['real_ratio']:.3f}"))  # fmt: skip
        out, sec = cli("max-lr", "--problem", spec, "--rule", "pipeoptim", "--optimizer", "adamw",
                       "--weight-decay", "0.1", "--precond-from", state, "--stages", "4",
                       "--schedule", "pipemare", "--backward", "current")  # fmt: skip
        how = out["method"].split(", on the")[0]
        rows.append(("max-lr pipeoptim adamw wd 0.1", sec, f"max_lr {out['max_lr']:.6g} ({how})"))
        steps = "600" if args.quick else "3000"
        for tau in ("0", "2"):
            out, sec = cli("train", "--problem", f"{EXAMPLE}:problem", "--rule", "adam",
                           "--beta1", "0.9", "--update", "real", "--tau", tau, "--lr", "0.003",
                           "--steps", steps, "--sharpness-every", "100")  # fmt: skip
            rows.append((f"train real τ={tau} lr 0.003, {steps} steps", sec,
                         f"predicted_edge {out['predicted_edge']:.5g}, plateau {out['plateau']}, "
                         f"edge_ratio {out['edge_ratio']}"))  # fmt: skip
    width = max(len(r[0]) for r in rows)
    print(f"{'command (stability net …)':<{width}}   wall s   CPU s  numbers")
    for name, (wall, cpu), numbers in rows:
        print(f"{name:<{width}}  {wall:7.1f} {cpu:7.1f}  {numbers}")


if __name__ == "__main__":
    main()
