"""Every command's text report and its ``--json`` object, with every option that shapes the
output, on small cheap problems: the text report must not fail (``noise --measure`` crashed on
a text field) and must show the key numbers of the JSON.

Each case runs the command once, as ``stability.cli.main.main`` does (parse, run recording
warnings), and renders both faces of the same result: the text report (``args.report``) and
``result.to_json()``.  A key is a path into the JSON (``rows[*].ratio``, ``best.lr``,
``measured.floor[0]``); each value it names must appear in the text — a number as printed
(rounded to the digits shown, at least 3 significant ones unless exact, or as a percentage),
a string verbatim.  `test_every_command_has_a_case` keeps the list complete.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from stability.cli.args import check_rule_flags
from stability.cli.main import main, make_parser, run_recording_warnings

ROOT = Path(__file__).resolve().parents[1]
NET = str(ROOT / "examples" / "diabetes_linear.py") + ":problem"  # the smallest example: 11 weights
NOISE = "--batch 4 --lr 0.1 --data {tmp}/d.csv --steps 20 --lyapunov-steps 100 --lyapunov-runs 2"


@dataclass(frozen=True)
class Case:
    argv: str
    keys: tuple[str, ...]
    then: Case | None = None  # a command on what this one wrote (sweep --status)

    @property
    def id(self) -> str:
        return self.argv.replace(str(ROOT) + "/", "")


CASES = (
    Case("rules", ("rules[*].name",)),
    Case("rules sgd t2", ("rules[*].parameters[*].flag", "rules[*].parameters[*].default")),
    Case("poly momentum --tau 2 --momentum 0.9 --lr 0.1", ("coefficients[*]", "degree")),
    Case("poly momentum --tau 2 --momentum 0.9 --lr 0.1 --symbolic", ("coefficients[*]", "sympy")),
    Case("radius sgd --tau 3 --lr 0.4", ("spectral_radius", "half_life", "dominant_root[*]")),
    Case("radius sgd --tau 3 --lr 0.4 --certify", ("spectral_radius", "certificate", "lr_exact")),
    Case("max-lr lwp --tau 2 --momentum 0.5", ("max_lr", "crossing_angle", "method")),
    Case("max-lr momentum --tau 3 --method bisection", ("max_lr", "method")),
    Case(
        "max-lr sgd --stages 4 --schedule pipemare",
        ("max_lr", "critical_stage", "stages[*].tau_fwd", "stages[*].max_lr", "pipeline.schedule"),
    ),
    Case(
        "radius momentum --momentum 0.5 --lr 0.05 --stage-delays 7,5,3,1",
        ("spectral_radius", "critical_stage", "stages[*].spectral_radius", "stages[*].half_life"),
    ),
    Case(
        "halflife momentum --kappa 10 --stages 4 --schedule pipemare",
        ("half_life", "lr", "critical_stage", "stages[*].rate", "stages[*].own_half_life"),
    ),
    Case("bounds momentum --tau 4 --momentum 0.9", ("bound", "max_lr", "ratio", "lemma")),
    Case("halflife momentum --tau 1 --kappa 100", ("half_life", "rate", "lr")),
    Case(
        "halflife momentum --tau 1 --kappa 100 --optimize-momentum",
        ("half_life", "rate", "lr", "momentum"),
    ),
    Case("halflife lwp --tau 1 --kappa 100 --optimize-horizon", ("half_life", "lr", "horizon")),
    Case(
        "heatmap momentum --tau 1 --x lr:0.01:1:6:log --y momentum:0:0.9:4 --metric half-life "
        "--bounds --no-max-lr --csv {tmp}/h.csv",
        ("radius_min", "radius_max", "stable_fraction", "best.*", "refined_points", "csv"),
    ),
    Case(
        "heatmap sgd --x lr:0.1:1:4 --y tau:0:3:4 --metric stable --out {tmp}/h.png",
        ("stable_fraction", "best.*", "png"),
    ),
    Case("heatmap sgd --x lr:2.5:3:2 --y tau:1:2:2 --metric radius", ("radius_min", "x.n", "y.n")),
    Case("repro --list", ("available[*]",)),
    Case(
        "repro needs_nothing --repro-dir {tmp}/repro --out-dir {tmp}/out",
        ("results[*].name", "results[*].claims[*].id", "results[*].claims[*].grade"),
    ),
    Case("claims --claim nesterov-equals-sc --quick", ("claims[*].id", "claims[*].grade")),
    Case(
        "t1-audit sgd --lam 4 --lr-schedule constant:0.1 --taus 1,4,16 --anneal-steps 1000 "
        "--steps 2000",
        ("max_lr[*]", "margin", "worst_step", "windows[*].start", "windows[*].worst_ratio"),
    ),
    Case(
        "t1-audit momentum --momentum 0.9 --lr-schedule cosine:0.01:500 --pipeline pipemare:4 "
        "--anneal-steps 100 --steps 500",
        ("taus[*]", "max_lr[*]", "margin"),
    ),
    Case(
        "train --rule sgd --tau 4 --lr 0.05 --steps 300",
        ("initial_loss", "final_loss", "measured_rate", "predicted_rate", "predicted_max_lr"),
    ),
    Case(
        "train --rule momentum --momentum 0.5 --lr 0.01 --steps 100 --schedule pipemare "
        "--stages 3 --batch 64 --seed 1",
        ("final_loss", "pipeline.tau_fwd[*]", "scalar_predictions.*"),
    ),
    Case(
        "train --rule sgd --tau 1 --lr 0.05 --steps 100 --problem mlp --samples 32 --start "
        "minimum --curve-points 5",
        ("final_loss", "measured_rate", "predicted_rate", "problem.parameters"),
    ),
    Case(
        "validate --rules sgd,momentum --taus 0,2 --steps 500 --rate-steps 500 "
        "--rate-doublings 0 --momentum 0.5",
        ("rows[*].predicted_max_lr", "rows[*].measured_max_lr", "rows[*].ratio"),
    ),
    Case(
        "validate --rules sgd --schedule pipemare --stages 3 --steps 500 --rate-steps 500 "
        "--rate-doublings 0",
        ("rows[*].measured_max_lr", "rows[*].predicted_max_lr_coupled", "pipeline.tau_fwd[*]"),
    ),
    Case(
        "coupled --rule sgd --stages 3 --schedule pipemare",
        ("max_lr", "scalar_bound", "scalar_ratio", "per_stage_bounds[*]", "stage_taus[*]"),
    ),
    Case(
        "coupled --rule sgd --stages 2 --schedule pipemare --measure --steps 300 --rel-tol 0.05",
        ("max_lr", "measured_max_lr", "measured_ratio", "measured_runs"),
    ),
    Case(
        f"noise sgd --tau 2 {NOISE} --at 0,10,20",
        (
            "full_batch_max_lr",
            "ms_max_lr",
            "as_max_lr",
            "as_bracket[*]",
            "floor",
            "rate",
            "half_life",
            "expected_loss[*][*]",
            "ms_radius",
        ),
    ),  # fmt: skip
    Case(
        f"noise momentum --tau 1 --momentum 0.5 {NOISE} --measure --runs 2 --sampling reshuffle "
        "--seed 3",
        (
            "ms_max_lr",
            "sampling",
            "measured.runs",
            "measured.blowup_criterion",
            "measured.blowup_fraction",
            "measured.floor[*]",
            "measured.expected_loss[*][*]",
            "measured.as_bracket[*]",
        ),
    ),  # fmt: skip
    Case(f"noise sgd {NOISE} --schedule gpipe --stages 2", ("ms_max_lr", "stages[*]")),
    Case(
        "tradeoff --batch 4 --tau 1 --data {tmp}/d.csv --rules sgd,momentum --target 1 "
        "--out {tmp}/t.png",
        ("steps_to_target.*", "fronts.sgd[0][*]", "fastest", "figure"),
    ),
    Case(
        "sweep {tmp}/spec.toml --out {tmp}/sweep --workers 1",
        ("points", "chunks", "chunks_computed", "workers"),
        then=Case("sweep --status {tmp}/sweep", ("points", "chunks_done", "runs", "command")),
    ),
    Case(
        f"net curvature --problem {NET} --stages 2 --k 3 --stage-blocks --negative",
        ("eigenvalues[*]", "stage_eigenvalues[*][*]", "stage_sizes[*]", "hvps"),
    ),
    Case(
        f"net max-lr --problem {NET} --rule momentum --momentum 0.5 --stages 2 --tau 2 --k 3 "
        "--measure --measure-steps 100",
        ("max_lr", "scalar_bound", "predicted_rate", "measured_max_lr", "measured_bracket[*]"),
    ),
    Case(
        f"net max-lr --problem {NET} --rule sgd --stages 2 --schedule pipedream --k 2",
        ("max_lr", "stage_taus[*]", "critical_stage"),
    ),
    Case(
        f"net noise --problem {NET} --rule sgd --batch 32 --k 2 --steps 20 --lyapunov-steps 100 "
        "--lyapunov-runs 2 --measure --runs 2 --pairs 2 --pair-steps 100",
        (
            "ms_max_lr",
            "as_max_lr",
            "floor",
            "rate",
            "as_bracket[*]",
            "expected_loss[*][*]",
            "measured.expected_loss[*][1]",
            "measured.blowup_criterion",
        ),
    ),  # fmt: skip
    Case(
        f"net train --problem {NET} --rule sgd --stages 2 --tau 1 --lr 0.1 --steps 30 "
        "--sharpness-every 10 --batch 32",
        ("final_loss", "predicted_edge", "sharpness[0][*]", "sharpness[-1][*]"),
    ),
    Case(
        f"net noise --problem {NET} --rule sgd --tau 1 --batch 16 --k 3 --steps 20 "
        "--lyapunov-steps 200 --lyapunov-runs 4 --measure --runs 4 --pairs 2 --pair-steps 200",
        (
            "ms_max_lr",
            "as_max_lr",
            "floor",
            "subspace_change",
            "expected_loss[-1][*]",
            "measured.floor[0]",
            "measured.expected_loss[-1][*]",
        ),
    ),  # fmt: skip
)


def _commands(parser) -> set[str]:
    names = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                inner = _commands(sub)
                names |= {f"{name} {n}" for n in inner} if inner else {name}
    return names


def test_every_command_has_a_case():
    every = [c for case in CASES for c in (case, case.then) if c is not None]
    covered = {" ".join(c.argv.split()[:2]) for c in every} | {c.argv.split()[0] for c in every}
    assert _commands(make_parser()) <= covered


def _values(obj, path: str):
    """The values at ``path`` (``a.b[0]``, ``[*]`` and ``.*`` for every element)."""
    found = [obj]
    for token in re.findall(r"\.?([^.\[\]]+)|\[(-?\d+|\*)\]", path):
        key, index = token
        nxt = []
        for value in found:
            if key == "*":
                nxt += list(value.values())
            elif key:
                nxt.append(value[key])
            elif index == "*":
                nxt += list(value)
            else:
                nxt.append(value[int(index)])
        found = nxt
    return found


NUMBER = re.compile(r"[-−]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+−]?\d+)?")


def _printed_numbers(text: str) -> list[float]:
    return [float(token.replace("−", "-")) for token in NUMBER.findall(text)]


def _shown(value, text: str, printed: list[float]) -> bool:
    """``value`` is in ``text``: a string verbatim, a number as printed to 3-12 significant
    digits (``%g`` drops trailing zeros: 0.0011 for 0.0010956 at 3), or as a percentage."""
    if value is None or isinstance(value, bool):
        return True  # shown as — / yes / no, not as a number
    if isinstance(value, str):
        return value in text
    if isinstance(value, (list, dict)):
        items = value.values() if isinstance(value, dict) else value
        return all(_shown(v, text, printed) for v in items)
    if not math.isfinite(value):
        return True
    roundings = {float(f"{c:.{d}g}") for c in (value, 100 * value) for d in range(3, 13)}
    return any(
        n in roundings or math.isclose(n, value, rel_tol=1e-9, abs_tol=1e-300) for n in printed
    )


@pytest.fixture
def workspace(tmp_path):
    rng = np.random.default_rng(0)  # a least-squares set of 24 rows, 3 features
    X = rng.standard_normal((24, 3))
    y = X @ [1.5, -0.5, 0.25] + 0.3 * rng.standard_normal(24)
    np.savetxt(tmp_path / "d.csv", np.column_stack([y, X]), delimiter=",", fmt="%.6f")
    (tmp_path / "spec.toml").write_text('command = "max-lr"\nrule = "sgd"\n[grid]\ntau = [1, 2]\n')
    repro = tmp_path / "repro"
    repro.mkdir()
    (repro / "needs_nothing.py").write_text(
        "import json, sys, pathlib\n"
        "out = pathlib.Path(sys.argv[sys.argv.index('--out-dir') + 1])\n"
        "out.mkdir(parents=True, exist_ok=True)\n"
        "(out / 'needs_nothing.png').write_bytes(b'')\n"
        "claims = [{'id': 'a-claim', 'holds': False, 'grade': 'partial_range', 'size': None,\n"
        "           'range_where_it_holds': None}]\n"
        "(out / 'needs_nothing.json').write_text(json.dumps({'holds': False, 'claims': claims}))\n"
    )
    return tmp_path


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_text_report_shows_the_json(case, workspace):
    while case is not None:
        _check(case, workspace)
        case = case.then


def _check(case: Case, workspace: Path) -> None:
    argv = case.argv.format(tmp=workspace).split()
    args = make_parser(argv).parse_args(argv)
    check_rule_flags(args)
    result, _ = run_recording_warnings(args)
    text = args.report(result)
    data = json.loads(json.dumps(result.to_json(), allow_nan=False))
    printed = _printed_numbers(text)
    missing = []
    for key in case.keys:
        values = _values(data, key)
        assert values, f"{key}: nothing in the JSON"
        missing += [f"{key} = {v!r}" for v in values if not _shown(v, text, printed)]
    assert missing == [], f"not in the text report:\n{text}"


def test_the_repro_report_says_whose_claim_does_not_hold(workspace, capsys):
    argv = ["repro", "needs_nothing", "--repro-dir", str(workspace / "repro")]
    assert main([*argv, "--out-dir", str(workspace / "out")]) == 0
    out = capsys.readouterr().out
    assert "needs_nothing: 1 of the paper's 1 claims do not hold as stated" in out
    assert "1 of the papers' 1 claims do not hold as stated (graded in each JSON" in out
    assert "DOES NOT HOLD" not in out
