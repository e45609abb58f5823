"""Issue 26 item 3: `net max-lr` / `net curvature` say when the weights are not at a minimum.

A small MLP fitted with full-batch L-BFGS (gradient at rounding level, negative eigenvalues
rounding noise) must not warn; a small classifier after 300 Adam steps from its
initialisation must, with "minimum" in the ``warnings`` entry, in the JSON and the text
report.  The reported numbers are checked against a dense autograd Hessian.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from stability.cli.main import main  # noqa: E402
from stability.nets.minimum import GRADIENT_TOL, NEGATIVE_TOL  # noqa: E402
from stability.nets.problem import problem_from_dict  # noqa: E402
from stability.nets.public import net_curvature, net_max_lr  # noqa: E402


def _data(classes: int | None):
    g = torch.Generator().manual_seed(1)
    X = torch.randn(60, 4, generator=g, dtype=torch.float64)
    if classes is None:
        return X, torch.tanh(X @ torch.tensor([[1.0], [-0.5], [0.3], [0.8]], dtype=X.dtype))
    return X, (X[:, 0] + 0.5 * X[:, 1] > 0).long() + (X[:, 2] > 0.5).long()


def _lbfgs_fitted():
    from stability.nets.fitting import near_minimum

    X, y = _data(None)
    loss = torch.nn.MSELoss()

    def build():
        return torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1))

    model = near_minimum(build, loss, X, y, name="minimum_mlp", iterations=3000)
    return {"model": model, "loss": loss, "inputs": X, "targets": y}


def _adam_classifier(steps: int = 300):
    torch.manual_seed(0)
    X, y = _data(3)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    model = model.double()
    loss = torch.nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        opt.zero_grad()
        loss(model(X), y).backward()
        opt.step()
    return {"model": model, "loss": loss, "inputs": X, "targets": y}


def _dense(found):
    net = problem_from_dict(found)
    H = torch.func.hessian(lambda w: net.loss(w))(net.w_star.detach()).numpy()
    lam = np.linalg.eigvalsh(0.5 * (H + H.T))
    g = float(net.gradient(net.w_star).norm())
    return net, lam, g, float(net.w_star.norm())


def test_an_lbfgs_minimum_does_not_warn(tmp_path, monkeypatch):
    monkeypatch.setenv("STABILITY_CACHE", str(tmp_path))
    net, lam, g, w = _dense(_lbfgs_fitted())
    assert g / (lam[-1] * w) < 1e-3 * GRADIENT_TOL  # the gradient is at rounding level
    r = net_max_lr(net, "sgd", tau=2, k=3)
    assert not any("minimum" in x for x in r.warnings)
    assert r.gradient_scale == pytest.approx(g / (lam[-1] * w), rel=1e-6)
    assert r.negative_ratio is not None and r.negative_ratio > -NEGATIVE_TOL


def test_a_few_hundred_adam_steps_warn_in_json_and_text(tmp_path, capsys):
    found = _adam_classifier()
    net, lam, g, w = _dense(found)
    assert lam[0] < -NEGATIVE_TOL * lam[-1]  # a saddle: the dense Hessian says so too
    r = net_max_lr(net, "sgd", tau=2, k=3, negative=True)
    [warning] = [x for x in r.warnings if "minimum" in x]
    assert "--sharpness-every" in warning and "edge of stability" in warning
    assert r.gradient_norm == pytest.approx(g, rel=1e-9)
    assert r.gradient_scale == pytest.approx(g / (lam[-1] * w), rel=1e-4)
    assert r.gradient_scale > GRADIENT_TOL
    assert r.negative_ratio == pytest.approx(lam[0] / lam[-1], rel=1e-3)
    c = net_curvature(net, k=3)
    assert any("minimum" in x for x in c.warnings)
    # through the CLI: the JSON warnings list and the text report
    torch.save(found, tmp_path / "adam.pt")
    (tmp_path / "adam.py").write_text(
        f"import torch\n\ndef problem():\n    return torch.load({str(tmp_path / 'adam.pt')!r}, "
        "weights_only=False)\n"
    )
    spec = f"{tmp_path / 'adam.py'}:problem"
    assert main(["net", "max-lr", "--problem", spec, "--rule", "sgd", "--tau", "2", "--k", "3",
                 "--json"]) == 0  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert any("minimum" in x for x in out["warnings"]) and out["gradient_scale"] > GRADIENT_TOL
    assert not any("deprecat" in x.lower() for x in out["warnings"])  # torch's notices: dropped
    assert (
        main(["net", "max-lr", "--problem", spec, "--rule", "sgd", "--tau", "2", "--k", "3"]) == 0
    )
    text = capsys.readouterr().out
    assert "warning: not at a minimum" in text


def test_max_lr_searches_the_negative_end_only_where_the_warning_needs_it(tmp_path, monkeypatch):
    """The gradient alone shows the Adam classifier is not at a minimum: by default the search
    is skipped (negative_ratio None), the warning stays, the answer is the same; at the L-BFGS
    minimum the search runs (test_an_lbfgs_minimum_does_not_warn)."""
    import stability.nets.public as public

    net = problem_from_dict(_adam_classifier())
    calls = []
    real = public.negative_end
    monkeypatch.setattr(public, "negative_end", lambda *a, **k: calls.append(1) or real(*a, **k))
    quick = net_max_lr(net, "sgd", tau=2, k=3)
    assert calls == [] and quick.negative_ratio is None and quick.negative_eigenvalues is None
    [warning] = [x for x in quick.warnings if "minimum" in x]
    assert "‖∇f‖" in warning and "saddle" not in warning
    full = net_max_lr(net, "sgd", tau=2, k=3, negative=True)
    assert calls == [1] and full.negative_ratio < -NEGATIVE_TOL
    assert quick.max_lr == full.max_lr and quick.gradient_scale == full.gradient_scale
    never = net_max_lr(net, "sgd", tau=2, k=3, negative=False)
    assert calls == [1] and never.negative_ratio is None and never.warnings == quick.warnings
    monkeypatch.setenv("STABILITY_CACHE", str(tmp_path))
    at_minimum = net_max_lr(problem_from_dict(_lbfgs_fitted()), "sgd", tau=2, k=3)
    assert calls == [1, 1] and at_minimum.negative_ratio is not None


@pytest.mark.slow
def test_at_a_saddle_the_measured_runs_flip_it_and_the_bracket_holds_the_prediction(monkeypatch):
    """At a saddle the measurement's tilted runs grow along the negative curvature at every lr
    (≈ lr·|λ_min|/(1 − m) a step with momentum m).  At the classifier's initialisation
    (λ_min ≈ −0.5·λ₁) they therefore turn the negative directions into minima
    (`stability.nets.saddle_flip`), and the bracket holds the prediction.  Without the flip the
    bracket lies far below the prediction and falls as the runs get longer: --measure then
    says in ``warnings`` what the bracket is.  300-step runs put it at 0.074 × the prediction,
    600-step runs at 0.022 (1200: 0.013); 200-step runs would leave it at 0.20, not far
    below."""
    import stability.nets.public as public

    net = problem_from_dict(_adam_classifier(steps=0))

    def measured(steps):
        return net_max_lr(
            net, "momentum", momentum=0.9, tau=1, k=3, measure=True, measure_steps=steps
        )  # fmt: skip

    flipped = measured(300)
    assert flipped.negative_ratio < -0.1  # searched, though the gradient already warned
    flip = flipped.protocol["saddle_flip"]
    assert flip["complete"] and flip["most_negative"] == pytest.approx(
        flipped.negative_ratio * flipped.eigenvalues[0], rel=1e-6
    )
    lo, hi = flipped.measured_bracket
    assert lo <= flipped.max_lr * 1.05 and flipped.max_lr * 0.95 <= hi
    assert not any(x.startswith("measured_bracket") for x in flipped.warnings)

    monkeypatch.setattr(public, "saddle_flip", lambda *args, **kwargs: None)
    short, long = measured(300), measured(600)
    [saddle] = [x for x in short.warnings if x.startswith("measured_bracket below the predict")]
    assert "within 300 steps" in saddle and "none was found to flip" in saddle
    assert short.measured_bracket[1] < 0.2 * short.max_lr  # far below the prediction ...
    assert long.measured_bracket[1] < 0.5 * short.measured_bracket[0]  # ... and falling
