"""Large delays: the O(τ) paths above the dense limits agree with dense eigenvalues (τ ≤ 100),
and every command answers or refuses in one line at τ = 10⁵ (the size contract,
docs/limits.md)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from stability.analysis import conditioning
from stability.analysis.conditioning import optimal_half_life, spectrum_rate
from stability.analysis.modes import modes_from_hessian, modes_log_rate, predicted_max_lr
from stability.analysis.radius_grid import heatmap, parse_axis
from stability.cli.main import main, make_parser
from stability.dynamics.monodromy import monodromy
from stability.limits import TABLE
from stability.rules.registry import build_rule
from stability.spectrum import GRID_DENSE_MAX_DEGREE

TAU = 66  # degree 67-68: above GRID_DENSE_MAX_DEGREE, still cheap to solve densely


def _state_radius(name: str, lr: float, **params) -> float:
    """ρ from eigenvalues of the dense state matrix (period 1: the monodromy is the state
    matrix; independent of the characteristic polynomial)."""
    rule, model = build_rule(name, **params)
    return float(np.max(np.abs(np.linalg.eigvals(monodromy(rule, model, lr)))))


def test_heatmap_above_the_dense_degree_matches_state_matrix_eigenvalues():
    assert TAU + 1 > GRID_DENSE_MAX_DEGREE
    hm = heatmap(
        "momentum",
        parse_axis("lr:1e-4:1e-2:3:log"),
        parse_axis("momentum:0:0.9:3"),
        tau=TAU,
    )
    for i, m in enumerate(hm.y.values):
        for j, lr in enumerate(hm.x.values):
            dense = _state_radius("momentum", float(lr), tau=TAU, momentum=float(m))
            assert hm.radius[i, j] == pytest.approx(dense, rel=1e-9)


@pytest.mark.parametrize("name", ["sgd", "momentum"])
def test_halflife_above_the_dense_degree_matches_the_dense_path(name, monkeypatch):
    """The argument-principle path (degree 81) and batched companion eigenvalues give the same
    optimum; the rate there equals the dense state-matrix radius at the window's ends."""
    sparse = optimal_half_life(name, 100.0, tau=TAU)
    monkeypatch.setattr(conditioning, "GRID_DENSE_MAX_DEGREE", 400)
    dense = optimal_half_life(name, 100.0, tau=TAU)
    assert float(sparse.rate) == pytest.approx(float(dense.rate), rel=1e-9)
    assert float(sparse.lr) == pytest.approx(float(dense.lr), rel=1e-5)
    lr = float(sparse.lr)
    ends = max(_state_radius(name, lr, tau=TAU, lam=lam) for lam in (1.0, 100.0))
    assert float(spectrum_rate(name, 100.0, lr, tau=TAU)) == pytest.approx(ends, rel=1e-9)


@pytest.mark.parametrize(
    ("name", "params", "lr", "stable"),
    [
        ("dc", dict(tau=525, quality=0.6718, momentum=0.0, lam=0.0194995), 30.77016310288754,
         True),
        ("dc", dict(tau=525, quality=0.6718, momentum=0.0, lam=0.0194995), 102.57746706399277,
         False),
        ("pipesgd", dict(tau=556, stale_fraction=0.4662, momentum=0.0, lam=1.22838),
         1.4653446002051482, True),
        ("pipeoptim", dict(tau=590, momentum=0.448, delta=-4.673, lam=0.061935),
         0.00020237899386264525, False),
    ],
)  # fmt: skip
def test_radius_in_a_cluster_of_near_equal_moduli_is_the_largest(name, params, lr, stable):
    """Above the dense degree (400) ρ comes from counts on circles, and where several roots'
    moduli agree to ~1e-7 (a cluster near ω = −1 or +1, 0.01 rad apart) the root was Newton's
    from the one smallest sample of |p|: a neighbour of smaller modulus, and `radius` said
    stable at 1.0001 × the max lr (an outsider's search).  Equal to the dense state matrix's
    ρ to 1e-12, with the verdict."""
    from stability.api.radius import radius

    r = radius(name, lr=lr, **params)
    assert r.spectral_radius == pytest.approx(_state_radius(name, lr, **params), rel=1e-12)
    assert r.stable is stable


def test_trainer_predictions_above_the_dense_degree():
    """max lr: PipeMare Lemma 1's closed form at the top curvature; log-rate: the dense
    state matrices of every mode."""
    lam = np.array([0.05, 0.3, 1.7, 4.0])
    modes = modes_from_hessian(np.diag(lam))
    rule, _ = build_rule("momentum", tau=TAU, momentum=0.5)
    lr = 1e-3
    dense = max(_state_radius("momentum", lr, tau=TAU, momentum=0.5, lam=k) for k in lam)
    assert modes_log_rate(rule, modes, lr) == pytest.approx(math.log(dense), rel=1e-9)
    for tau in (TAU, 1000):
        sgd, _ = build_rule("sgd", tau=tau)
        lemma = 2 / lam.max() * math.sin(math.pi / (4 * tau + 2))
        assert predicted_max_lr(sgd, modes) == pytest.approx(lemma, rel=1e-9)


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["halflife", "sgd", "--kappa", "100", "--tau", "100000"], "tau too large"),
        (["halflife", "momentum", "--kappa", "10", "--tau", "30", "--optimize-momentum"], "tau"),
        (
            ["heatmap", "momentum", "--tau", "100000", "--x", "lr:1e-5:1e-2:8:log"]
            + ["--y", "momentum:0:0.99:8", "--csv", "unused.csv"],
            "--x/--y",
        ),
        (["max-lr", "ea", "--tau", "100000"], "tau must be"),
    ],
)
def test_above_the_size_limits_commands_refuse_in_one_line(argv, needle, capsys, tmp_path):
    argv = [str(tmp_path / a) if a.endswith(".csv") else a for a in argv]
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert needle in err and "\n" not in err
    assert not list(tmp_path.iterdir())  # refused up front: nothing written


def test_docs_list_every_limit_of_the_table():
    """docs/limits.md and `stability --help` show the same limits as the code."""
    docs = (Path(__file__).resolve().parents[1] / "docs" / "limits.md").read_text()
    rows = {tuple(c.strip() for c in line.strip("|").split("|")) for line in docs.splitlines()}
    assert set(TABLE) <= rows
    help_text = make_parser().format_help()
    assert all(f"{what} {limit}" in help_text for _, what, limit in TABLE)
