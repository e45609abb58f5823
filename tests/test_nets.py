"""stability.nets on tiny models: curvature vs dense autograd Hessians, the rank-k reduction vs
the dense coupled system, the simulator vs the coupled system's own linear step, prediction vs
measured bracket and rate, and the one-line errors of ``stability net``."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from stability.cli.main import main
from stability.coupled.system import CoupledSystem, composed_step, coupled_system, dense_max_lr
from stability.nets.bracket import NetProtocol, measure_log_rate, measure_max_lr
from stability.nets.curvature import (
    NEGATIVE_TOL,
    HessianOperator,
    curvature,
    dense_hessian,
    negative_end,
)
from stability.nets.fitting import near_minimum
from stability.nets.lowrank import positive_part, reduced_system, stage_factors
from stability.nets.prediction import net_rules, predict, predicted_log_rate
from stability.nets.problem import REVERSE_OVER_REVERSE, problem_from_dict, split_stages
from stability.nets.public import net_train
from stability.nets.simulator import check_stashed, simulate
from stability.pipeline import Pipeline
from stability.rules.delayed_momentum import DelayedMomentum

TINY = textwrap.dedent(
    """
    import torch

    def data():
        g = torch.Generator().manual_seed(0)
        X = torch.randn(48, 5, generator=g, dtype=torch.float64)
        Y = torch.sin(X[:, :2]) + 0.1 * X[:, 2:4]
        return X, Y

    def build():
        return torch.nn.Sequential(
            torch.nn.Linear(5, 10), torch.nn.Tanh(), torch.nn.Linear(10, 2))

    def loss(out, y):
        return 0.5 * ((out - y) ** 2).sum(dim=1).mean()

    def problem(fit=True):
        from stability.nets.fitting import near_minimum
        X, Y = data()
        if fit:
            model = near_minimum(build, loss, X, Y, name="tiny", iterations=400)
        else:
            torch.manual_seed(3)
            model = build()
        return {"model": model, "loss": loss, "inputs": X, "targets": Y}

    def unfitted():
        return problem(fit=False)
    """
)


@pytest.fixture(scope="module")
def tiny_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("nets")
    path = folder / "tiny.py"
    path.write_text(TINY)
    return path


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("STABILITY_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def _module(path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("tiny_problem", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tiny(tiny_file, tmp_path_factory):
    import os

    os.environ["STABILITY_CACHE"] = str(tmp_path_factory.getbasetemp() / "cache")
    return problem_from_dict(_module(tiny_file).problem(), stages=3)


# -- curvature -----------------------------------------------------------------------------------


def test_lanczos_eigenvalues_equal_dense_hessian(tiny):
    assert tiny.dim == 82 and tiny.stage_sizes == (50, 10, 22)
    H = dense_hessian(tiny)
    exact = np.sort(np.linalg.eigvalsh(H))[::-1]
    c = curvature(tiny, 6, negative_k=0)
    assert np.max(np.abs(c.eigenvalues - exact[:6])) <= 1e-6 * exact[0]
    assert c.hvps > 0 and "Lanczos" in c.method
    for block, values in zip(tiny.blocks, c.stage_eigenvalues, strict=True):
        block_exact = np.sort(np.linalg.eigvalsh(H[block, block]))[::-1]
        assert np.max(np.abs(values - block_exact[: values.size])) <= 1e-6 * exact[0]


@pytest.mark.parametrize("k", [41, 60, 82, 1000])
def test_k_at_or_above_half_the_parameters_is_solved_densely(tiny, k):
    """ARPACK needs k < n and a basis of 2k + 1 < n vectors; from k = n/2 up (k = p: the whole
    space, which net noise and the stationary preconditioner call exact) the operator is formed
    densely, overall, per stage and for the negative end (k above p: all p)."""
    H = dense_hessian(tiny)
    exact = np.sort(np.linalg.eigvalsh(H))
    c = curvature(tiny, k, negative_k=k, stage_blocks=True)
    top = min(k, tiny.dim)
    assert "dense" in c.method and c.eigenvalues.size == top
    assert np.max(np.abs(c.eigenvalues - exact[::-1][:top])) <= 1e-9 * exact[-1]
    vecs = c.eigenvectors
    assert np.max(np.abs(H @ vecs - vecs * c.eigenvalues)) <= 1e-9 * exact[-1]
    for block, values in zip(tiny.blocks, c.stage_eigenvalues, strict=True):
        block_exact = np.sort(np.linalg.eigvalsh(H[block, block]))[::-1]
        assert np.max(np.abs(values - block_exact[: values.size])) <= 1e-9 * exact[-1]


def test_negative_eigenvalues_are_found_and_reported(tiny_file):
    net = problem_from_dict(_module(tiny_file).unfitted(), stages=2)
    exact = np.linalg.eigvalsh(dense_hessian(net))
    assert exact[0] < -1e-3 * exact[-1]  # a random initialization is no minimum
    c = curvature(net, 3, negative_k=2, negative_maxiter=500)
    assert c.negative_eigenvalues.size >= 1
    assert abs(c.negative_eigenvalues[0] - exact[0]) <= 1e-6 * exact[-1]


def test_the_negative_end_of_a_small_model_is_exact(tiny):
    """Near the minimum the bottom of the spectrum is dense: the capped Lanczos search
    reported no negative eigenvalue on this 82-parameter model (471 products) where the dense
    Hessian has five below −1e-4·λ₁ … −5e-7·λ₁; within the search's budget the operator is
    formed densely (82 products) and all are found."""
    exact = np.linalg.eigvalsh(dense_hessian(tiny))
    cut = -NEGATIVE_TOL * exact[-1]
    assert np.sum(exact < cut) >= 5
    found, hvps, complete = negative_end(HessianOperator(tiny), exact[-1], k=5)
    assert hvps == tiny.dim and complete
    assert np.allclose(found, exact[:5], rtol=1e-9, atol=1e-12 * exact[-1])


def test_the_negative_end_up_to_the_dense_limit_is_exact_and_an_unconverged_one_is_unknown(
    tiny_file, tiny, monkeypatch
):
    """Up to `DENSE_NEGATIVE_MAX` parameters the bottom of the spectrum comes from the dense
    operator (an 866-parameter MLP had 322 eigenvalues below the cut and 30 Lanczos restarts
    found none).  Above it an unconverged search that found none leaves ``negative_ratio``
    null with a warning — "0.0" would read as "no negative curvature"."""
    from stability.nets import curvature as curvature_module
    from stability.nets.minimum import nearness

    net = problem_from_dict(_module(tiny_file).unfitted())
    op = HessianOperator(net)
    exact = np.linalg.eigvalsh(dense_hessian(net))
    ncv = curvature_module.krylov_basis(net.dim, 5)
    assert net.dim > ncv + 1 * (ncv - 5)  # beyond a one-restart Lanczos budget: dense by size
    found, hvps, complete = negative_end(op, exact[-1], k=5, maxiter=1)
    assert complete and hvps == net.dim
    assert np.allclose(found, exact[:5], rtol=1e-9, atol=1e-12 * exact[-1])

    monkeypatch.setattr(curvature_module, "DENSE_NEGATIVE_MAX", 0)
    fitted = np.linalg.eigvalsh(dense_hessian(tiny))
    top = float(fitted[-1])
    assert np.sum(fitted < -NEGATIVE_TOL * top) >= 5  # there are some to miss
    found, hvps, complete = negative_end(HessianOperator(tiny), top, k=5, maxiter=1)
    assert not complete and found.size == 0 and hvps < tiny.dim, (found, hvps)
    near = nearness(tiny, top, found, complete=complete)
    assert near.negative_ratio is None and "unknown" in near.unknown
    assert nearness(tiny, top, found).negative_ratio == 0.0  # a complete search: none


def test_a_hessian_that_vanishes_has_zero_eigenvalues_and_no_max_lr(tmp_path, capsys):
    """A float32 cross-entropy saturated at exactly 0 has a Hessian that is exactly 0: ARPACK
    stops on it ("starting vector is zero"); the curvature is k zeros with a warning, the
    sharpness along a run 0, and the max lr one line naming --problem, exit 2."""
    import json

    from scipy.sparse.linalg import LinearOperator

    from stability.nets.curvature import arpack

    zero = LinearOperator((100, 100), matvec=lambda v: np.zeros(100), dtype=np.float64)
    v0 = np.random.default_rng(0).standard_normal(100)
    values, vectors = arpack(zero, k=3, which="LA", v0=v0, ncv=20)
    assert np.all(values == 0) and np.allclose(vectors.T @ vectors, np.eye(3), atol=1e-12)
    assert abs(abs(vectors[:, 0] @ v0) - np.linalg.norm(v0)) < 1e-9
    diagonal = LinearOperator((100, 100), matvec=lambda v: np.arange(100.0) * v, dtype=float)
    assert arpack(diagonal, k=2, which="LA", v0=v0, ncv=20)[0] == pytest.approx([98, 99])

    path = tmp_path / "saturated.py"
    path.write_text(
        textwrap.dedent(
            """
            import torch

            def problem():
                g = torch.Generator().manual_seed(0)
                x = torch.randn(30, 6, generator=g)
                y = torch.arange(30) % 3
                model = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(),
                                            torch.nn.Linear(12, 3))
                with torch.no_grad():  # logits 1e4 apart: softmax is one-hot in float32
                    model[2].weight.zero_()
                    model[2].bias.zero_()
                    model[0].weight.zero_()
                    model[0].bias.zero_()
                    model[2].bias[0] = 1e4
                return {"model": model, "loss": torch.nn.functional.cross_entropy,
                        "inputs": x, "targets": torch.zeros(30, dtype=torch.long)}
            """
        )
    )
    spec = f"{path}:problem"
    assert main(["net", "curvature", "--problem", spec, "--k", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_params"] > 64  # ARPACK, not the dense path
    assert out["eigenvalues"] == [0.0, 0.0, 0.0]
    assert any("λ₁ = 0: the Hessian vanishes" in w for w in out["warnings"])
    assert main(["net", "max-lr", "--problem", spec, "--rule", "sgd", "--tau", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("stability: error: --problem: the Hessian has no positive eigenvalue")
    assert err.count("\n") == 1
    train = ["net", "train", "--problem", spec, "--rule", "sgd", "--tau", "2", "--lr", "0.1"]
    assert main([*train, "--steps", "20", "--sharpness-every", "10", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [lam for _, lam in out["sharpness"]] == [0.0, 0.0, 0.0]


def test_mse_loss_falls_back_to_reverse_over_reverse():
    torch.manual_seed(0)
    X, Y = torch.randn(20, 3, dtype=torch.float64), torch.randn(20, 1, dtype=torch.float64)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    net = problem_from_dict({"model": model, "loss": torch.nn.MSELoss(), "inputs": X, "targets": Y})
    assert net.hvp_mode == REVERSE_OVER_REVERSE
    v = torch.randn(net.dim, dtype=torch.float64)
    H = dense_hessian(net)
    assert np.allclose(net.hvp(net.w_star, v).numpy(), H @ v.numpy(), rtol=0, atol=1e-12)


def test_stages_may_name_modules_for_their_parameters():
    """A training script names modules, not parameter tensors: ``"0"`` or ``"2"`` of a
    Sequential stands for its trainable parameters in the model's order, mixed freely with
    parameter names; the problem is the one given by the expanded names (same layout, same
    gradient), and a parameter given twice (as itself and through its module), a name that is
    neither, or a mere prefix of a module's name is refused naming it."""
    torch.manual_seed(2)
    X, Y = torch.randn(16, 3, dtype=torch.float64), torch.randn(16, 1, dtype=torch.float64)
    model = torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.LayerNorm(4), torch.nn.Tanh(), torch.nn.Linear(4, 1)
    )
    base = {"model": model, "loss": torch.nn.MSELoss(), "inputs": X, "targets": Y}
    by_name = problem_from_dict(
        base | {"stages": [["0.weight", "0.bias"], ["1.weight", "1.bias", "3.weight", "3.bias"]]}
    )
    for stages in ([["0"], ["1", "3"]], [["0"], ["1.weight", "1.bias", "3"]]):
        by_module = problem_from_dict(base | {"stages": stages})
        assert by_module.stage_names == by_name.stage_names
        assert by_module.blocks == by_name.blocks
        w = by_name.w_star
        assert torch.equal(by_module.gradient(w), by_name.gradient(w))
    for stages, says in (
        ([["0", "0.bias"], ["1", "3"]], "'0.bias' is in stage 1 and stage 1"),
        ([["0"], ["1", "3.weight"], ["3"]], "'3.weight' is in stage 2 and stage 3"),
        ([["0"], ["1", "4"]], "stage 2 names '4', which is not a trainable parameter"),
        ([["0.w"], ["1", "3"]], "stage 1 names '0.w', which is not"),
    ):
        with pytest.raises(ValueError, match=re.escape(says)):
            problem_from_dict(base | {"stages": stages})


def test_hvp_by_autograd_equals_the_torch_func_product_and_is_zero_for_a_linear_loss():
    """`NetProblem.hvp` (plain autograd, reverse-over-reverse) gives the same numbers as
    `transformable_batch_hvp` (torch.func's vjp of grad, the form vmap batches), and a zero
    product where the loss is linear in w (no second-order graph: autograd would raise)."""
    torch.manual_seed(1)
    X, Y = torch.randn(30, 4, dtype=torch.float64), torch.randint(0, 3, (30,))
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 5), torch.nn.LayerNorm(5), torch.nn.GELU(), torch.nn.Linear(5, 3)
    )
    net = problem_from_dict(
        {"model": model, "loss": torch.nn.CrossEntropyLoss(), "inputs": X, "targets": Y}
    )
    v = torch.randn(net.dim, dtype=torch.float64)
    w = net.w_star + 0.1 * torch.randn(net.dim, dtype=torch.float64)
    eager = net.hvp(w, v)
    functional = net.transformable_batch_hvp(w, v, X, Y)
    assert torch.allclose(eager, functional, rtol=0, atol=1e-14 * float(functional.abs().max()))
    linear = problem_from_dict(
        {
            "model": torch.nn.Linear(4, 1).double(),
            "loss": lambda out, y: (out.squeeze(-1) * y).mean(),
            "inputs": X,
            "targets": Y.double(),
        }
    )
    zero = linear.hvp(linear.w_star, torch.ones(linear.dim, dtype=torch.float64))
    assert torch.equal(zero, torch.zeros(linear.dim, dtype=torch.float64))


def test_split_stages_contiguous_and_balanced():
    names = [f"t{i}" for i in range(6)]
    groups = split_stages(names, [10, 10, 40, 10, 10, 20], 3)
    assert [n for g in groups for n in g] == names
    assert groups == [["t0", "t1"], ["t2", "t3"], ["t4", "t5"]]  # cuts nearest 33 and 67
    with pytest.raises(ValueError, match="at most the number of parameter tensors"):
        split_stages(names, [1] * 6, 7)


# -- the rank-k reduction ------------------------------------------------------------------------


def test_reduced_hessian_keeps_spectrum_and_stage_blocks():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((40, 30))
    lam, V = positive_part(A.T @ A / 40)
    k, sizes = 6, (12, 8, 10)
    Hk = V[:, :k] * lam[:k] @ V[:, :k].T
    Ht, r = stage_factors(lam[:k], V[:, :k], sizes)
    assert r == (6, 6, 6)
    assert np.allclose(np.sort(np.linalg.eigvalsh(Ht))[::-1][:k], lam[:k], atol=1e-12)
    ends = np.cumsum((0, *sizes))
    rends = np.cumsum((0, *r))
    for i in range(3):
        a = np.sort(np.linalg.eigvalsh(Hk[ends[i] : ends[i + 1], ends[i] : ends[i + 1]]))[::-1]
        b = np.sort(np.linalg.eigvalsh(Ht[rends[i] : rends[i + 1], rends[i] : rends[i + 1]]))
        assert np.allclose(a[:6], b[::-1], atol=1e-12)


def test_reduced_system_has_the_max_lr_of_the_truncated_hessian():
    """Exact reduction: the rank-k system equals the p×p coupled system on H_k."""
    rng = np.random.default_rng(2)
    A = rng.standard_normal((30, 24))
    lam, V = positive_part(A.T @ A / 30)
    k, sizes = 5, (8, 10, 6)
    dense = coupled_system(
        V[:, :k] * lam[:k] @ V[:, :k].T, stage_sizes=sizes, rule="sgd", tau_fwd=[3, 2, 1]
    )
    small = reduced_system(dense.rules, lam[:k], V[:, :k], sizes)
    assert small.dim == 15 < dense.dim
    a, b = dense_max_lr(dense).max_lr, dense_max_lr(small).max_lr
    assert abs(a - b) <= 1e-9 * a


# -- the simulator -------------------------------------------------------------------------------


class _Blocks(torch.nn.Module):
    """A linear model with three parameter tensors (three stages): y = Σ X_j·a_j."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
        self.b = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
        self.c = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))

    def forward(self, X):
        return X[:, :2] @ self.a + X[:, 2:5] @ self.b + X[:, 5:] @ self.c


@pytest.mark.parametrize("rule, values", [("lwp+sc", {"momentum": 0.9}), ("sgd", {})])
def test_simulator_equals_the_coupled_linear_step(rule, values):
    """On least squares the simulator (torch gradients, ring buffer, per-stage rule objects)
    must reproduce the coupled system's composed step (numpy, H = XᵀX/n) step for step."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(30, 7, generator=g, dtype=torch.float64)
    y = X @ torch.randn(7, generator=g, dtype=torch.float64) + 0.3 * torch.randn(30, generator=g)
    w_star = torch.linalg.lstsq(X, y[:, None]).solution[:, 0]
    model = _Blocks()
    with torch.no_grad():
        model.a[:], model.b[:], model.c[:] = w_star[:2], w_star[2:5], w_star[5:]
    net = problem_from_dict(
        {
            "model": model,
            "loss": lambda o, t: 0.5 * ((o - t) ** 2).mean(),
            "inputs": X,
            "targets": y,
            "stages": [["a"], ["b"], ["c"]],
        }
    )
    pipe = Pipeline.from_options("pipemare", stages=3, backward="stashed")
    rules = net_rules(rule, values, pipe)
    e0 = torch.linspace(-1, 1, 7, dtype=torch.float64) * 1e-2
    lr, steps = 0.05, 40
    res = simulate(net, rules, [lr], steps=steps, w0=net.w_star + e0, criterion="distance")
    assert not res.diverged[0]
    H = (X.T @ X / 30).numpy()
    system = CoupledSystem(rules, (2, 3, 2), {"forward": H})
    hist = []
    for entry, block in zip(system.state_layout, system.blocks, strict=True):
        hist.append(
            {var: np.zeros((d, 1, block.stop - block.start)) for var, (_, d) in entry.items()}
        )
        hist[-1]["w"][:] = e0.numpy()[block]
    for _ in range(steps):
        hist = composed_step(system, hist, lr)
    expected = np.concatenate([h["w"][0, 0] for h in hist])
    final = res.final_weights[0] - net.w_star.numpy()
    assert np.abs(expected).max() > 1e-4
    assert np.allclose(final, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("batch", [None, 8])
def test_one_run_takes_the_plain_autograd_path_with_the_batched_numbers(batch):
    """One run's gradient is plain torch.autograd (no vmap over a single run, 3× cheaper per
    step); it equals that run inside a vmapped batch of two to 1e-13, full batch and
    minibatch, on a nonlinear model."""
    g = torch.Generator().manual_seed(1)
    X = torch.randn(40, 5, generator=g, dtype=torch.float64)
    y = torch.tanh(X @ torch.randn(5, generator=g, dtype=torch.float64))
    model = torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.Tanh(), torch.nn.Linear(6, 1))
    model = model.double()
    net = problem_from_dict(
        {
            "model": model,
            "loss": lambda o, t: 0.5 * ((o[:, 0] - t) ** 2).mean(),
            "inputs": X,
            "targets": y,
            "stages": [["0.weight", "0.bias"], ["2.weight", "2.bias"]],
        }
    )
    rules = net_rules("momentum", {"momentum": 0.5}, Pipeline.from_options(tau=2, stages=2))
    kw = {"steps": 60, "batch": batch, "seed": 3}
    one = simulate(net, rules, [0.05], **kw)
    two = simulate(net, rules, [0.05, 0.02], **kw)
    moved = np.abs(one.final_weights[0] - net.w_star.numpy()).max()
    assert moved > 1e-3
    assert np.allclose(one.final_weights[0], two.final_weights[0], rtol=0, atol=1e-13)


def test_inconsistent_rules_are_refused():
    for name in ("discrepancy", "t2", "recompute"):
        with pytest.raises(ValueError, match="--backward current"):
            net_rules(name, {}, Pipeline.from_options(tau=2, stages=2, backward="stashed"))
    with pytest.raises(ValueError, match="different backward"):
        check_stashed(DelayedMomentum(tau_fwd=2, tau_bkwd=0))
    check_stashed(DelayedMomentum(tau_fwd=2, horizon=2.0, sc_a=0.5, sc_b=1.0))


# -- prediction vs simulation ----------------------------------------------------------------------


def test_predicted_max_lr_and_rate_agree_with_the_simulator(tiny):
    curv = curvature(tiny, 10, negative_k=0)
    pipe = Pipeline.from_options("pipemare", stages=3, backward="stashed")
    rules = net_rules("momentum", {"momentum": 0.9}, pipe)
    pred = predict(curv, rules)
    lr = pred.analysis.max_lr
    assert pred.truncation_change is not None and abs(pred.truncation_change) < 1e-3
    # one round of 16 step sizes over lr·[1/1.06, 1.06] leaves a bracket of relative width
    # 1.06^(2/15) − 1 = 0.0078 ≤ rel_tol (the default 8 over ±25 % needs a second round of
    # 1,000 steps); a crossing outside ±6 % — three times the ±2 % claimed — extends the grid
    protocol = NetProtocol(steps=1000, rate_steps=600, per_round=16, span=1.06)
    v1 = curv.eigenvectors[:, 0]
    m = measure_max_lr(tiny, rules, v1, lr, protocol)
    assert m.runs == 16
    assert m.relative_width <= 0.01
    assert m.stable <= lr * 1.02 and m.unstable >= lr * 0.98
    measured = measure_log_rate(tiny, rules, v1, [0.5 * lr], protocol)[0]
    predicted = predicted_log_rate(curv, rules, 0.5 * lr)
    assert abs(measured / predicted - 1) <= 0.05


def test_net_train_reports_divergence_and_rates(tiny):
    ok = net_train(tiny, "sgd", lr=0.01, steps=200, tau=1, curve_points=5)
    assert not ok.diverged and ok.final_loss is not None and len(ok.loss_curve) == 5
    assert ok.measured_rate is not None and ok.stage_taus == [1, 1, 1]
    bad = net_train(tiny, "sgd", lr=50.0, steps=200, tau=1)
    assert bad.diverged and bad.final_loss is None and bad.diverged_step > 0
    losses = [loss for _, loss in bad.to_json()["loss_curve"]]
    assert losses[0] is not None and losses[-1] is None  # null after divergence, as documented
    mini = net_train(tiny, "momentum", lr=0.01, steps=50, batch=8, momentum=0.5)
    assert mini.measured_rate is None and mini.to_json()["protocol"]["batch"] == 8


def test_fitting_is_cached(tiny_file, tmp_path_factory):
    module = _module(tiny_file)
    X, Y = module.data()
    first = near_minimum(module.build, module.loss, X, Y, name="tiny", iterations=400)
    second = near_minimum(module.build, module.loss, X, Y, name="tiny", iterations=400)
    for a, b in zip(first.parameters(), second.parameters(), strict=True):
        assert torch.equal(a, b)


# -- the command line ----------------------------------------------------------------------------

BAD = {
    "missing": ("{folder}/nope.py:problem", "does not exist"),
    "directory": ("{folder}:problem", "is a directory, not a file"),
    "no_function": ("{tiny}:nothing", "has no function 'nothing'"),
    "not_dict": ("{folder}/bad.py:not_dict", "must return a dict"),
    "stage_name": ("{folder}/bad.py:bad_stage", "'0.nonsense', which is not a trainable"),
    "non_finite": ("{folder}/bad.py:nan_loss", "not finite"),
    "raises": ("{folder}/bad.py:raises", "raised RuntimeError: boom"),
    "meta": ("{folder}/bad.py:on_meta", "weights are on the meta device (not materialised)"),
    "no_grad": ("{folder}/bad.py:no_grad", "the loss does not depend on the weights in torch's"),
    "in_place": ("{folder}/bad.py:in_place", "modified by an inplace operation"),
    "samples_one_by_one": ("{folder}/bad.py:one_by_one", "DataLoader with batch_size=None"),
}

BAD_FILE = textwrap.dedent(
    """
    import math
    import torch
    from tiny import problem

    def not_dict():
        return [1, 2]

    def bad_stage():
        d = problem(fit=False)
        d["stages"] = [["0.weight", "0.nonsense"], ["0.bias", "2.weight", "2.bias"]]
        return d

    def nan_loss():
        d = problem(fit=False)
        d["inputs"] = d["inputs"] * math.nan
        return d

    def raises():
        raise RuntimeError("boom\\nsecond line")

    def on_meta():  # built under torch.device("meta"), never given its weights
        d = problem(fit=False)
        d["model"] = torch.nn.Linear(2, 1, device="meta")
        return d

    class NoGrad(torch.nn.Sequential):
        def forward(self, x):
            with torch.no_grad():
                return super().forward(x)

    class InPlace(torch.nn.Sequential):
        def forward(self, x):
            h = self[1](self[0](x))
            h.mul_(2.0)  # tanh's backward needs its output
            return self[2](h)

    def _wrapped(cls):
        d = problem(fit=False)
        model = cls(*d["model"])
        return d | {"model": model}

    def no_grad():
        return _wrapped(NoGrad)

    def in_place():
        return _wrapped(InPlace)

    def one_by_one():
        d = problem(fit=False)
        data = torch.utils.data.TensorDataset(d.pop("inputs"), d.pop("targets")[:, 0])
        return d | {"data": torch.utils.data.DataLoader(data, batch_size=None)}
    """
)


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_problems_are_one_line_exit_2(case, tiny_file, capsys):
    (tiny_file.parent / "bad.py").write_text(BAD_FILE)
    spec, message = BAD[case]
    spec = spec.format(folder=tiny_file.parent, tiny=tiny_file)
    rc = main(["net", "curvature", "--problem", spec, "--k", "2"])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and err.count("\n") == 1, err
    assert err.startswith("stability: error: --problem "), err  # the flag named first


def test_the_api_takes_the_problem_dict_as_the_file_gives_it(tiny_file):
    """`st.net_*` take the dict a problem function returns (built in a notebook) as they take
    ``FILE.py:FUNC``: the same numbers; any other kind of value is one `ValueError`."""
    import stability as st

    by_file = st.net_max_lr(f"{tiny_file}:problem", "sgd", tau=2, k=3, stages=2)
    by_dict = st.net_max_lr(_module(tiny_file).problem(), "sgd", tau=2, k=3, stages=2)
    assert by_dict.max_lr == pytest.approx(by_file.max_lr, rel=1e-12)
    assert by_dict.eigenvalues == pytest.approx(by_file.eigenvalues, rel=1e-12)
    with pytest.raises(ValueError, match=r"^problem must be 'FILE.py:FUNC', a problem dict"):
        st.net_curvature(42)


def test_cli_curvature_and_max_lr_json(tiny_file, capsys):
    import json

    assert (
        main(
            [
                "net",
                "curvature",
                "--problem",
                f"{tiny_file}:problem",
                "--k",
                "3",
                "--stages",
                "2",
                "--stage-blocks",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    for key in (
        "eigenvalues",
        "stage_eigenvalues",
        "stage_sizes",
        "n_params",
        "hvps",
        "seconds",
        "method",
        "negative_eigenvalues",
    ):
        assert key in out
    assert len(out["eigenvalues"]) == 3 and len(out["stage_eigenvalues"]) == 2
    assert (
        main(
            [
                "net",
                "max-lr",
                "--problem",
                f"{tiny_file}:problem",
                "--rule",
                "sgd",
                "--stages",
                "3",
                "--tau",
                "2",
                "--k",
                "4",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["stage_taus"] == [2, 2, 2] and out["max_lr"] > 0
    # uniform delays decouple: the scalar bound at λ_max is exact
    assert abs(out["scalar_bound"] / out["max_lr"] - 1) < 1e-8
    assert out["measured_max_lr"] is None and 0 < out["predicted_rate"] < 1


def test_missing_torch_is_one_line_exit_2(monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a)
    )
    rc = main(["net", "curvature", "--problem", "x.py:problem"])
    err = capsys.readouterr().err
    assert rc == 2 and "pip install -e '.[torch]'" in err and err.count("\n") == 1


def test_help_and_other_commands_do_not_import_torch():
    code = (
        "import sys; from stability.cli.main import make_parser, main; make_parser(); "
        "main(['max-lr', 'sgd', '--tau', '2', '--json']); print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().endswith("False")
