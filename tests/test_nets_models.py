"""stability.nets on the models people train: LayerNorm + residual, self-attention, embeddings,
data from a DataLoader (any input structure), float32 and device overrides, ``--backward
current`` for any module.

Independent references: the dense Hessian of classic autograd (``torch.autograd.functional``),
the delayed-SGD threshold of `stability.analysis.boundary` at λ₁, torch autograd (consistent
weights), and backpropagation through an ``nn.Sequential`` written out layer by layer with
``torch.func.vjp`` at the backward weights (inconsistent weights).
"""

from __future__ import annotations

import functools
import json
import textwrap
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from stability.analysis.boundary import max_lr  # noqa: E402
from stability.cli.main import main  # noqa: E402
from stability.nets.curvature import curvature, dense_hessian  # noqa: E402
from stability.nets.inconsistent import inconsistent_gradient, units  # noqa: E402
from stability.nets.noise_public import net_noise  # noqa: E402
from stability.nets.problem import load_problem, problem_from_dict  # noqa: E402
from stability.nets.public import net_curvature, net_max_lr  # noqa: E402
from stability.nets.simulator import simulate  # noqa: E402
from stability.nets.torch_settings import REPLACED  # noqa: E402
from stability.rules.registry import build_rule, get_spec  # noqa: E402

MODELS = textwrap.dedent(
    """
    import torch
    from torch import nn


    class Residual(nn.Module):  # LayerNorm (affine) + residual MLP with GELU
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(4, 8)
            self.ln = nn.LayerNorm(8)
            self.mlp = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8))
            self.out = nn.Linear(8, 2)

        def forward(self, x):
            a = self.inp(x)
            return self.out(a + self.mlp(self.ln(a)))


    class Attention(nn.Module):  # one-head self-attention, residual, LayerNorm
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(6, 1, batch_first=True)
            self.ln = nn.LayerNorm(6)
            self.out = nn.Linear(6, 2)

        def forward(self, x):
            a, _ = self.attn(x, x, x, need_weights=False)
            return self.out(self.ln(x + a).mean(dim=1))


    class Embedding(nn.Module):  # token ids given as a dict {"ids": ...}
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 6)
            self.mlp = nn.Sequential(nn.Linear(6, 10), nn.GELU(), nn.Linear(10, 2))

        def forward(self, ids):
            return self.mlp(self.emb(ids).mean(dim=1))


    def mse(out, y):
        return 0.5 * ((out - y) ** 2).sum(dim=1).mean()


    def tensors(name, n=160):
        g = torch.Generator().manual_seed(1)
        if name == "embedding":
            ids = torch.randint(0, 20, (n, 5), generator=g)
            return {"ids": ids}, torch.stack([ids[:, 0] % 3 - 1.0, ids[:, 1] % 2 - 0.5], 1).double()
        shape = (n, 4) if name == "residual" else (n, 3, 6)
        x = torch.randn(*shape, generator=g, dtype=torch.float64)
        flat = x.reshape(n, -1)
        return x, torch.sin(flat[:, :2]) + 0.5 * flat[:, 2:4]


    def build(name):
        torch.manual_seed(0)
        return {"residual": Residual, "attention": Attention, "embedding": Embedding}[name]()


    def problem(name, loader=False, batch=64):
        x, y = tensors(name)
        found = {"model": build(name).double(), "loss": mse}
        if not loader:
            return {**found, "inputs": x, "targets": y}
        pick = (lambda i: {"ids": x["ids"][i]}) if isinstance(x, dict) else x.__getitem__
        rows = [(pick(i), y[i]) for i in range(len(y))]
        found["data"] = torch.utils.data.DataLoader(rows, batch_size=batch)
        return found


    def residual():
        return problem("residual")


    def attention():
        return problem("attention")


    def embedding():
        return problem("embedding")


    def embedding_loader():
        return problem("embedding", loader=True)
    """
)
NAMES = ("residual", "attention", "embedding")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    import importlib.util

    path = tmp_path_factory.mktemp("models") / "blocks.py"
    path.write_text(MODELS)
    spec = importlib.util.spec_from_file_location("blocks_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.PATH = path
    return module


def _eigs(net, k):
    return curvature(net, k, negative_k=0, stage_blocks=False).eigenvalues


@pytest.mark.parametrize("name", NAMES)
def test_eigenvalues_equal_the_dense_hessian(models, name):
    net = problem_from_dict(models.problem(name))
    assert net.dim <= 2000 and net.dtype == torch.float64
    exact = np.sort(np.linalg.eigvalsh(dense_hessian(net)))[::-1]
    got = _eigs(net, 5)
    assert np.max(np.abs(got - exact[:5])) <= 1e-6 * exact[0]


@pytest.mark.parametrize("name", NAMES)
def test_max_lr_is_the_delayed_sgd_threshold_at_lambda_1(models, name):
    net = problem_from_dict(models.problem(name))
    res = net_max_lr(net, "sgd", tau=4, k=3)
    want = max_lr(*get_spec("sgd").build(lam=res.eigenvalues[0], tau=4)).max_lr
    assert abs(res.max_lr / want - 1) <= 1e-5


def test_cli_train_backward_current_runs_on_attention(models, capsys):
    spec = f"{models.PATH}:attention"
    assert main(["net", "max-lr", "--problem", spec, "--rule", "sgd", "--tau", "4", "--k", "2",
                 "--json"]) == 0  # fmt: skip
    lr = 0.1 * json.loads(capsys.readouterr().out)["max_lr"]
    argv = ["net", "train", "--problem", spec, "--stages", "2", "--schedule", "pipemare",
            "--backward", "current", "--rule", "sgd", "--lr", f"{lr}", "--steps", "20",
            "--json"]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert not out["diverged"] and out["backward"] == "current"
    assert out["loss_curve"][-1][1] < out["loss_curve"][0][1]


# -- data as users hold it ----------------------------------------------------------------------


def test_dataloader_equals_the_full_batch(models):
    full = problem_from_dict(models.problem("embedding"))
    loader = problem_from_dict(models.problem("embedding", loader=True))
    assert loader.data.batches == 3 and loader.samples == full.samples == 160
    assert torch.equal(loader.w_star, full.w_star)
    w, v = full.w_star, torch.randn(full.dim, dtype=torch.float64)
    assert abs(float(loader.loss(w)) / float(full.loss(w)) - 1) <= 1e-12
    for a, b in ((loader.gradient(w), full.gradient(w)), (loader.hvp(w, v), full.hvp(w, v))):
        assert float((a - b).abs().max()) <= 1e-12 * float(b.abs().max())
    got, want = _eigs(loader, 3), _eigs(full, 3)
    assert np.max(np.abs(got / want - 1)) <= 1e-9


def test_minibatches_draw_from_the_loader_as_from_the_tensors(models):
    full = problem_from_dict(models.problem("residual"), stages=2)
    loader = problem_from_dict(models.problem("residual", loader=True), stages=2)
    rules = [build_rule("sgd", tau=1)[0]] * 2
    runs = [simulate(p, rules, [0.05], steps=12, batch=16, seed=3) for p in (full, loader)]
    assert np.max(np.abs(runs[0].final_weights - runs[1].final_weights)) <= 1e-12


def test_bad_data_is_refused_in_one_line(models):
    found = models.problem("residual")
    with pytest.raises(ValueError, match="one-shot iterator"):
        problem_from_dict({"model": found["model"], "loss": found["loss"],
                           "data": iter([(found["inputs"], found["targets"])])})  # fmt: skip
    with pytest.raises(ValueError, match="either inputs and targets, or data"):
        problem_from_dict({**found, "data": [(found["inputs"], found["targets"])]})
    with pytest.raises(ValueError, match=r"^data batch 1 must be an \(inputs, targets\) pair"):
        problem_from_dict({"model": found["model"], "loss": found["loss"], "data": [[1, 2, 3]]})
    with pytest.raises(ValueError, match=r"got dict \(split it: a collate_fn returning"):
        batch = {"x": found["inputs"], "labels": found["targets"]}
        problem_from_dict({"model": found["model"], "loss": found["loss"], "data": [batch]})
    with pytest.raises(ValueError, match="^dtype must be float32 or float64"):
        problem_from_dict(found, dtype="float16")
    with pytest.raises(ValueError, match="^device must be a torch device"):
        problem_from_dict(found, device="nowhere")


def test_spread_inputs_that_do_not_fit_the_call_say_how_to_pass_them_whole(models):
    """A dict is spread as model(**x): a model that takes the dict itself is told to give (x,),
    and given so it gets the dict whole (the same loss as the model that takes the ids)."""

    class TakesTheDict(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = models.build("embedding").double()

        def forward(self, batch):
            return self.inner(batch["ids"])

    x, y = models.tensors("embedding")
    spread = {"model": TakesTheDict(), "loss": models.mse, "inputs": x, "targets": y}
    with pytest.raises(ValueError, match=r"model\(\*\*inputs\); give \(inputs,\) to pass them"):
        problem_from_dict(spread)
    whole = problem_from_dict({**spread, "inputs": (x,)})
    taking_ids = problem_from_dict(models.problem("embedding"))
    loss = float(whole.loss(whole.w_star))
    assert loss == pytest.approx(float(taking_ids.loss(taking_ids.w_star)), rel=1e-15)
    with pytest.raises(ValueError, match=r"model\(\*inputs\); give \(inputs,\)"):
        problem_from_dict({**spread, "inputs": [x["ids"], x["ids"]]})


LIMITS = textwrap.dedent(
    """
    import torch


    class OnCpu(torch.nn.Module):  # a saved-tensor hook of torch's own
        def __init__(self, hooked=True):
            super().__init__()
            self.hooked = hooked
            self.body = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh())
            self.head = torch.nn.Linear(4, 1)

        def forward(self, x):
            if not self.hooked:
                return self.head(self.body(x))
            with torch.autograd.graph.save_on_cpu():
                return self.head(self.body(x))


    def _problem(make):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(20, 3, generator=g, dtype=torch.float64)
        torch.manual_seed(0)
        return {"model": make().double(), "loss": torch.nn.MSELoss(), "inputs": x,
                "targets": torch.sin(x[:, :1])}


    class Bag(torch.nn.Module):  # EmbeddingBag: no second derivative in torch 2.13
        def __init__(self):
            super().__init__()
            self.bag = torch.nn.EmbeddingBag(10, 3, mode="mean")
            self.lin = torch.nn.Linear(3, 1)

        def forward(self, x):
            return self.lin(self.bag((x.abs() * 3).long().clamp(max=9)))


    class Running(torch.nn.Module):  # a buffer updated in every forward, eval mode too
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 1)
            self.register_buffer("mean", torch.zeros(1))

        def forward(self, x):
            y = self.lin(x)
            with torch.no_grad():
                self.mean.mul_(0.9).add_(0.1 * y.mean())
            return y


    class ToNumpy(torch.nn.Module):  # a statistic taken through NumPy in forward
        def __init__(self, through_numpy=True):
            super().__init__()
            self.through_numpy = through_numpy
            self.lin = torch.nn.Linear(3, 1)

        def forward(self, x):
            y = self.lin(x)
            if not self.through_numpy:
                return y
            return y * (1.0 + 0.0 * float(y.detach().numpy().mean()))


    class Packed(torch.nn.Module):  # an LSTM over a packed sequence: its kernel reads memory
        def __init__(self, packed=True):
            super().__init__()
            self.packed = packed
            self.rnn = torch.nn.LSTM(1, 2, batch_first=True)
            self.head = torch.nn.Linear(2, 1)

        def forward(self, x):
            sequence = x[..., None]
            if self.packed:
                lengths = torch.full((x.shape[0],), x.shape[1])
                sequence = torch.nn.utils.rnn.pack_padded_sequence(sequence, lengths,
                                                                   batch_first=True)
            return self.head(self.rnn(sequence)[1][0][-1])


    def on_cpu(): return _problem(OnCpu)
    def on_cpu_plain(): return _problem(lambda: OnCpu(hooked=False))
    def to_numpy(): return _problem(ToNumpy)
    def to_numpy_plain(): return _problem(lambda: ToNumpy(through_numpy=False))
    def packed(): return _problem(Packed)
    def packed_plain(): return _problem(lambda: Packed(packed=False))
    def running(): return _problem(Running)
    def bag(): return _problem(Bag)
    """
)


NOISE = ["net", "noise", "--rule", "sgd", "--batch", "4", "--lr", "0.01", "--k", "2", "--steps",
         "20", "--lyapunov-steps", "100", "--lyapunov-runs", "2"]  # fmt: skip
"""``net noise`` with few and short runs: per-sample gradients and products."""
MEASURED_NOISE = [*NOISE, "--measure", "--runs", "2", "--pairs", "2", "--pair-steps", "100"]
"""... and the measured runs (in lockstep, vmapped where the model allows it)."""
CURRENT = ["--backward", "current", "--stages", "2", "--tau", "1"]
"""Inconsistent weights (vmapped over runs where the model allows it)."""
TRAIN_CURRENT = ["net", "train", "--rule", "sgd", *CURRENT, "--lr", "0.05", "--steps", "10"]


def _same_numbers(a, b, rel=1e-9):
    """Every number of two JSON results equal to ``rel`` (timings and texts aside)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            if key != "seconds":
                _same_numbers(a[key], b[key], rel)
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same_numbers(x, y, rel)
    elif isinstance(a, int | float) and not isinstance(a, bool):
        assert a == pytest.approx(b, rel=rel, abs=1e-300, nan_ok=True)


def _net_json(capsys, *argv):
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _answered_as(capsys, odd: str, plain: str, commands) -> None:
    """Each command answers the model ``odd`` with the numbers of ``plain``."""
    for argv in commands:
        _same_numbers(_net_json(capsys, *argv, "--problem", odd),
                      _net_json(capsys, *argv, "--problem", plain))  # fmt: skip


@pytest.mark.parametrize(
    "name, commands",
    [
        ("on_cpu", [NOISE, TRAIN_CURRENT]),
        ("packed", [NOISE, TRAIN_CURRENT]),
        (
            "to_numpy",
            [
                MEASURED_NOISE,
                [*NOISE, "--curvature", "ggn"],
                TRAIN_CURRENT,
                ["net", "max-lr", "--rule", "sgd", *CURRENT, "--k", "2"],
            ],
        ),  # fmt: skip
    ],
)
def test_what_torch_func_cannot_transform_is_answered_by_plain_autograd(
    tmp_path, capsys, name, commands
):
    """A saved-tensor hook ended in "internal error: RuntimeError: torch.func... don't yet
    support saved tensor hooks", a ``.numpy()`` in forward in "internal error: RuntimeError:
    Cannot access data pointer of Tensor that doesn't have storage", and so did an LSTM over
    a packed sequence; then they were refused by the commands that vmap (net noise, --backward
    current).  Where vmap fails, the loop takes plain autograd: the commands answer them with
    the numbers of the same model without the hook, the NumPy detour or the packing."""
    path = tmp_path / "limits.py"
    path.write_text(LIMITS)
    _answered_as(capsys, f"{path}:{name}", f"{path}:{name}_plain", commands)


OUTPUTS = textwrap.dedent(
    """
    from dataclasses import dataclass

    import torch


    @dataclass
    class Output:
        logits: torch.Tensor
        hidden: torch.Tensor


    class Whole(torch.nn.Module):  # parameters held directly: the model is one unit
        def __init__(self, as_dict):
            super().__init__()
            torch.manual_seed(0)
            self.as_dict = as_dict
            self.w1 = torch.nn.Parameter(0.5 * torch.randn(4, 8))
            self.w2 = torch.nn.Parameter(0.5 * torch.randn(8, 3))

        def forward(self, x):
            h = torch.tanh(x @ self.w1)
            if self.as_dict:
                return {"logits": h @ self.w2, "hidden": h}
            return Output(h @ self.w2, h)


    def _problem(as_dict):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(40, 4, generator=g, dtype=torch.float64)
        y = torch.randint(0, 3, (40,), generator=g)
        loss = lambda out, y: torch.nn.functional.cross_entropy(
            out["logits"] if isinstance(out, dict) else out.logits, y)
        return {"model": Whole(as_dict).double(), "loss": loss, "inputs": x, "targets": y}


    def dataclass_output(): return _problem(False)
    def dict_output(): return _problem(True)
    """
)


def test_a_model_returning_a_dataclass_is_answered_as_one_returning_a_dict(tmp_path, capsys):
    """torch's pytree takes a dataclass instance for one leaf: a model returning
    ``Output(logits=…, hidden=…)`` was refused by net noise --curvature ggn ("torch.cat():
    expected a non-empty list of Tensors"), crashed --backward current with a recompute delay
    (internal error), and — silently — got its backward weights' values forward where it is
    one unit (the discrepancy rule's max lr 3.85 for 2.12).  The dataclass's fields are opened
    (`stability.nets.batches.map_leaves`): the numbers of the same model returning a dict."""
    path = tmp_path / "outputs.py"
    path.write_text(OUTPUTS)
    one_unit = ["--backward", "current", "--stages", "1"]
    commands = [
        [*NOISE, "--curvature", "ggn"],
        ["net", "train", "--rule", "sgd", *one_unit, "--tau", "1", "--lr", "0.05", "--steps", "10"],
        ["net", "train", "--rule", "recompute", "--tau-recomp", "1", *one_unit, "--tau", "2",
         "--lr", "0.05", "--steps", "10"],
        ["net", "max-lr", "--rule", "discrepancy", *one_unit, "--tau", "1", "--k", "2"],
    ]  # fmt: skip
    _answered_as(capsys, f"{path}:dataclass_output", f"{path}:dict_output", commands)


def test_an_operation_without_a_second_derivative_is_refused_where_curvature_is_needed(
    tmp_path, capsys
):
    """An EmbeddingBag ended in "internal error: NotImplementedError: the derivative for
    '_embedding_bag_backward' is not implemented": the commands that need curvature refuse it
    in one line naming --problem and the operation; net train with a stashed rule (first
    derivatives only) runs."""
    path = tmp_path / "limits.py"
    path.write_text(LIMITS)
    spec = f"{path}:bag"
    max_lr = ["net", "max-lr", "--rule", "sgd", "--tau", "1", "--k", "2"]
    for argv in (NOISE, ["net", "curvature", "--k", "2"], max_lr):
        assert main([*argv, "--problem", spec]) == 2
        err = capsys.readouterr().err
        assert err.startswith("stability: error: --problem: the model uses ")
        assert "whose derivative torch does not implement (_embedding_bag_backward; curv" in err
        assert err.count("\n") == 1
    argv = ["net", "train", "--rule", "sgd", "--tau", "1", "--lr", "0.01", "--steps", "5"]
    assert _net_json(capsys, *argv, "--problem", spec)["diverged"] is False


def test_a_model_that_changes_its_buffers_in_eval_mode_is_refused_at_loading(tmp_path, capsys):
    """A buffer updated in every forward pass, eval mode too (a running statistic), makes the
    loss depend on how often the model ran; torch.func refused it where it transformed the
    model, plain autograd would not: it is refused at loading, by every command.  Buffers the
    forward pass leaves as they are load, NaN ones too."""
    path = tmp_path / "limits.py"
    path.write_text(LIMITS)
    for argv in (["net", "curvature", "--k", "2"], ["net", "train", "--rule", "sgd", "--tau",
                 "1", "--lr", "0.01", "--steps", "5"]):  # fmt: skip
        assert main([*argv, "--problem", f"{path}:running"]) == 2
        err = capsys.readouterr().err
        assert "the model uses an in-place change of a tensor it keeps (a buffer updated" in err
        assert err.startswith("stability: error: --problem ") and err.count("\n") == 1

    class Kept(torch.nn.Module):  # buffers left as they are: NaN (uninitialised) and an int
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 1).double()
            self.register_buffer("junk", torch.full((4,), float("nan")))
            self.register_buffer("steps", torch.zeros((), dtype=torch.long))

        def forward(self, x):
            return self.lin(x)

    x = torch.randn(16, 3, dtype=torch.float64)
    net = problem_from_dict({"model": Kept(), "loss": torch.nn.MSELoss(), "inputs": x,
                             "targets": x[:, :1]})  # fmt: skip
    assert net.dim == 4


CHECKPOINTED = textwrap.dedent(
    """
    import torch
    from torch.utils.checkpoint import checkpoint, checkpoint_sequential

    class Blocks(torch.nn.Module):
        def __init__(self, how):
            super().__init__()
            torch.manual_seed(0)
            self.how = how
            self.body = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(),
                                            torch.nn.Linear(5, 5), torch.nn.Tanh())
            self.head = torch.nn.Linear(5, 1)

        def forward(self, x):
            if self.how == "plain":
                h = self.body(x)
            elif self.how == "sequential":
                h = checkpoint_sequential(self.body, 2, x, use_reentrant=False)
            else:
                h = checkpoint(self.body, x, use_reentrant=self.how == "reentrant")
            return self.head(h)

    def problem(how="plain"):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(20, 3, generator=g, dtype=torch.float64)
        return {"model": Blocks(how).double(), "loss": torch.nn.MSELoss(), "inputs": x,
                "targets": torch.sin(x[:, :1])}

    def reentrant():
        return problem("reentrant")

    def nonreentrant():
        return problem("nonreentrant")

    def sequential():
        return problem("sequential")
    """
)


@pytest.mark.parametrize("how", ["reentrant", "nonreentrant", "sequential"])
def test_activation_checkpointing_is_run_plainly_by_the_analysis(tmp_path, capsys, how):
    """``torch.utils.checkpoint`` (either kind, and ``checkpoint_sequential``) was refused: its
    hooks defeat torch.func.  The analysis runs the checkpointed segments as they are: the top
    eigenvalues are the plain model's dense Hessian's, and the commands that step the model
    run; torch.utils.checkpoint is itself again afterwards."""
    import torch.utils.checkpoint as checkpointing

    path = tmp_path / "blocks.py"
    path.write_text(CHECKPOINTED)
    before = {name: getattr(checkpointing, name) for name in REPLACED}
    plain = load_problem(f"{path}:problem")
    dense = np.linalg.eigvalsh(dense_hessian(plain))[::-1][:3]
    argv = ["net", "curvature", "--k", "3", "--problem", f"{path}:{how}"]
    assert main([*argv, "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["eigenvalues"]
    assert found == pytest.approx(dense.tolist(), rel=1e-10)
    argv = ["net", "train", "--rule", "sgd", "--tau", "1", "--lr", "0.05", "--steps", "20",
            "--batch", "8", "--problem", f"{path}:{how}", "--json"]  # fmt: skip
    assert main(argv) == 0 and json.loads(capsys.readouterr().out)["diverged"] is False
    assert {name: getattr(checkpointing, name) for name in REPLACED} == before


CUSTOM = textwrap.dedent(
    """
    import torch
    from torch.autograd.function import once_differentiable


    class Tanh(torch.autograd.Function):  # no setup_context: torch.func cannot transform it
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.tanh(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * (1 - torch.tanh(x) ** 2)


    class OnceTanh(Tanh):
        backward = staticmethod(once_differentiable(Tanh.backward))


    class KernelTanh(Tanh):  # a backward whose result has no history in x, as a kernel's
        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * (1 - torch.tanh(x.detach()) ** 2)


    class Relu(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clamp(min=0)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * (x > 0).to(g.dtype)


    class Net(torch.nn.Module):
        def __init__(self, act):
            super().__init__()
            torch.manual_seed(0)
            self.act = act
            self.a = torch.nn.Linear(3, 12)
            self.b = torch.nn.Linear(12, 1)

        def forward(self, x):
            return self.b(self.act(self.a(x)))


    def _problem(act, dtype=torch.float64):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(48, 3, generator=g, dtype=torch.float64).to(dtype)
        return {"model": Net(act).to(dtype), "loss": torch.nn.MSELoss(), "inputs": x,
                "targets": torch.sin(x[:, :1])}


    def _stopped(h):  # a scale taken out of the graph that depends on the weights
        return torch.tanh(h) / h.detach().norm()


    def tanh(): return _problem(Tanh.apply)
    def stopped(): return _problem(_stopped)
    def plain_tanh(): return _problem(torch.tanh)
    def once(): return _problem(OnceTanh.apply)
    def kernel(): return _problem(KernelTanh.apply)
    def kernel32(): return _problem(KernelTanh.apply, torch.float32)
    def relu(): return _problem(Relu.apply)
    def relu32(): return _problem(Relu.apply, torch.float32)
    def plain_relu(): return _problem(torch.relu)
    """
)


def test_a_custom_autograd_function_is_answered_by_plain_autograd(tmp_path, capsys):
    """A custom ``autograd.Function`` without ``setup_context`` (torch.func cannot transform
    it) was refused by every command that needs curvature; the gradient and the products are
    plain autograd outside vmap, so curvature answers it, equal to the same model written with
    torch.tanh/relu (dense Hessian), and runs side by side (max-lr --measure) are the plain
    model's, and so are net noise's per-sample products and --backward current's runs."""
    path = tmp_path / "custom.py"
    path.write_text(CUSTOM)
    for custom, plain in (("tanh", "plain_tanh"), ("relu", "plain_relu")):
        dense = np.linalg.eigvalsh(dense_hessian(load_problem(f"{path}:{plain}")))[::-1][:3]
        assert main(["net", "curvature", "--k", "3", "--problem", f"{path}:{custom}",
                     "--json"]) == 0  # fmt: skip
        found = json.loads(capsys.readouterr().out)["eigenvalues"]
        assert found == pytest.approx(dense.tolist(), rel=1e-10)
    # runs side by side (the measured bracket's): vmap fails, the loop takes plain autograd
    custom, plain = (load_problem(f"{path}:{name}") for name in ("tanh", "plain_tanh"))
    rules = [build_rule("sgd", tau=1)[0]]
    runs = [simulate(p, rules, [0.05, 0.3], steps=30, batch=16, seed=1) for p in (custom, plain)]
    assert np.max(np.abs(runs[0].final_weights - runs[1].final_weights)) <= 1e-12
    # per-sample products (net noise) and inconsistent weights: vmap fails, plain autograd
    _answered_as(capsys, f"{path}:tanh", f"{path}:plain_tanh",
                 [NOISE, [*NOISE, "--curvature", "ggn"], TRAIN_CURRENT])  # fmt: skip


@pytest.mark.parametrize(
    "name, words",
    [
        ("once", "Function, OnceTanh, whose backward is @once_differentiable: torch's second"),
        ("kernel", "Functions (KernelTanh) whose second derivative is not the derivative of"),
        ("kernel32", "Functions (KernelTanh) whose second derivative is not the derivative of"),
        ("stopped", "model's second derivative is not the derivative of its gradient (a Hess"),
    ],
)
def test_a_custom_function_without_a_second_derivative_is_refused_where_one_is_needed(
    tmp_path, capsys, name, words
):
    """torch differentiates a custom Function's backward as written: marked
    ``@once_differentiable``, or through a result without history (a kernel's), its second
    derivative is silently missing (zero for tanh), and curvature came out wrong without a word
    (λ₁ 3.15 for 3.65 on a small tanh MLP); so does a weight-dependent value the forward pass
    detaches (a step moves it, the gradient's derivative does not see it).  Such a model is
    refused by the commands that need curvature, naming the cause; net train with a stashed
    rule (first derivatives) runs it.
    A custom ReLU whose second derivative is right (zero, kinks between) is answered, float32
    included."""
    path = tmp_path / "custom.py"
    path.write_text(CUSTOM)
    for argv in (["net", "curvature", "--k", "2"], ["net", "max-lr", "--rule", "sgd", "--tau",
                 "1", "--k", "2"]):  # fmt: skip
        assert main([*argv, "--problem", f"{path}:{name}"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("stability: error: --problem: the model") and words in err
        assert err.count("\n") == 1
    argv = ["net", "train", "--rule", "sgd", "--tau", "1", "--lr", "0.01", "--steps", "5"]
    assert main([*argv, "--problem", f"{path}:{name}", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["diverged"] is False
    assert main(["net", "curvature", "--k", "2", "--problem", f"{path}:relu32"]) == 0


def test_a_sharp_model_s_second_derivative_is_not_mistaken_for_a_missing_one():
    """A float32 attention model fitted by L-BFGS (λ₁ ≈ 10⁶, ‖w‖ = 18) was refused as taking a
    value out of the graph: at the one step ε^{1/3}·‖w‖ = 0.09 the central differences were
    0.9 off the product (its curvature changes within the step) and 0.94 at half of it, close
    enough to each other to read as settled.  Here the same in one coordinate,
    ∇f = (tanh(a·w₁), w₂) with a·h ≫ 1 at the first steps: accepted, as the differences move
    towards the product with the step; a product that lacks a term the differences keep at
    every step (½ of ∇²f along w₂) is still refused."""
    from stability.nets.second_derivative import STEPS, second_derivative_missing

    a, w = 3e6, torch.tensor([0.0, 1.0], dtype=torch.float64)
    h = float(torch.finfo(torch.float64).eps) ** (1 / 3)  # the first step (‖w‖ = 1)
    # at h and h/2 the differences are ~1/h and ~2/h, 10× nearer each other than the product
    assert a * h > 10 and a * h / 4 ** (STEPS - 1) < 0.1

    def gradient(u):
        return torch.stack([torch.tanh(a * u[0]), u[1]])

    def loss(u):
        return torch.log(torch.cosh(a * u[0])) / a + u[1] ** 2 / 2

    def exact(u, v):
        return torch.stack([a * (1 - torch.tanh(a * u[0]) ** 2) * v[0], v[1]])

    def lacking(u, v):
        return torch.stack([a * (1 - torch.tanh(a * u[0]) ** 2) * v[0], 0.5 * v[1]])

    assert second_derivative_missing(loss, gradient, exact, w) is None
    refusal = second_derivative_missing(loss, gradient, lacking, w)
    assert refusal is not None and "not the derivative of its gradient" in refusal


def test_weights_renormalised_in_forward_are_refused_naming_the_problem(tmp_path, capsys):
    """An embedding with ``max_norm`` renormalises the rows it looks up in place at every
    forward: every ``net`` command ended in "internal error: RuntimeError: Output 0 of View is a
    view and its base ... has been modified inplace".  The module is refused at loading, the
    same through ``F.embedding`` in a model's own forward where it is met; without max_norm the
    same weights run."""
    path = tmp_path / "renorm.py"
    path.write_text(
        textwrap.dedent(
            """
            import torch


            class Tokens(torch.nn.Module):
                def __init__(self, max_norm=None, functional=False):
                    super().__init__()
                    torch.manual_seed(0)
                    self.emb = torch.nn.Embedding(6, 3, max_norm=None if functional else max_norm)
                    self.max_norm, self.functional = max_norm, functional
                    self.head = torch.nn.Linear(3, 6)

                def forward(self, t):
                    if self.functional:
                        w, most = self.emb.weight, self.max_norm
                        h = torch.nn.functional.embedding(t, w, max_norm=most)
                    else:
                        h = self.emb(t)
                    return self.head(h).sum(1)


            def problem(max_norm=None, functional=False):
                t = torch.arange(24).reshape(8, 3) % 6
                return {"model": Tokens(max_norm, functional).double(),
                        "loss": torch.nn.CrossEntropyLoss(), "inputs": t, "targets": t[:, 0]}


            def module():
                return problem(max_norm=0.5)


            def functional():
                return problem(max_norm=0.5, functional=True)
            """
        )
    )
    argv = ["net", "curvature", "--k", "2", "--json", "--problem"]
    assert main([*argv, f"{path}:module"]) == 2
    assert capsys.readouterr().err == (
        f"stability: error: --problem {path}:module: Embedding 'emb' has max_norm=0.5: it "
        "renormalises its weight's rows in place at every forward, so the loss is not a function "
        "of the weights alone; set max_norm=None for the analysis (the same loss where every "
        "row's norm is within it)\n"
    )
    assert main([*argv, f"{path}:functional"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("stability: error: --problem: the model uses an in-place change of its")
    assert "F.embedding's max_norm" in err and err.count("\n") == 1
    assert main([*argv, f"{path}:problem"]) == 0
    assert len(json.loads(capsys.readouterr().out)["eigenvalues"]) == 2


def test_a_loss_that_sums_over_the_samples_is_refused_where_it_is_not_f():
    """f = Σ_b (n_b/N)·loss_b is the data set's loss only for a mean over samples: with
    ``reduction="sum"`` over a DataLoader it was the loss of the loader's batch size, and a
    minibatch of B estimated B/N of the full batch's sum, so ``net noise`` and ``--batch`` ran
    on a biased gradient, silently.  Data in several batches is refused at loading, minibatches
    naming ``--batch``; one full batch is full-batch gradient descent on the sum (its Hessian N
    times the mean's); a mean plus a weight penalty is a mean."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(12, 3, generator=g, dtype=torch.float64)
    y = torch.randint(0, 2, (12,), generator=g)
    model = torch.nn.Linear(3, 2).double()
    mean, summed = torch.nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss(reduction="sum")
    whole = {"model": model, "loss": mean, "inputs": x, "targets": y}
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=4)
    with pytest.raises(ValueError, match=r"^loss sums over the samples \(samples given twice "
                       r"have twice their loss: reduction='sum'\?\), and the data comes in 3 "
                       r"batches"):  # fmt: skip
        problem_from_dict({"model": model, "loss": summed, "data": loader})
    assert problem_from_dict({"model": model, "loss": mean, "data": loader}).data.batches == 3
    top = {}
    for name, loss in (("mean", mean), ("sum", summed)):
        top[name] = net_curvature({**whole, "loss": loss}, k=1).eigenvalues[0]
    assert top["sum"] == pytest.approx(12 * top["mean"], rel=1e-9)
    with pytest.raises(ValueError, match=r"^batch: minibatches \(and per-sample moments\) need"):
        net_noise({**whole, "loss": summed}, rule="sgd", batch=4, lr=0.01)
    assert net_noise(whole, rule="sgd", batch=4, lr=0.01).batch == 4

    def penalised(out, t):
        return mean(out, t) + 1e-2 * model.weight.pow(2).sum().detach()

    assert problem_from_dict({**whole, "loss": penalised}).data.summed_loss is False


def test_numpy_arrays_serve_as_the_tensors_they_hold():
    """NumPy inputs and targets were refused ("inputs must be a torch.Tensor … got ndarray"),
    and a list of NumPy batches with "a batch must hold tensors with a batch dimension": they
    now stand for tensors of their dtype (a float64 array widens a float32 model to float64,
    as a float64 tensor does), with the tensors' curvature and loss to the bit.  A list is still
    refused."""
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((24, 4)), rng.integers(0, 3, 24)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    loss = torch.nn.CrossEntropyLoss()
    tensors = {"model": model, "loss": loss, "inputs": torch.tensor(x), "targets": torch.tensor(y)}
    expected = net_curvature(tensors, k=2).eigenvalues
    as_arrays = {"model": model, "loss": loss, "inputs": x, "targets": y}
    as_batches = {"model": model, "loss": loss, "data": [(x[:12], y[:12]), (x[12:], y[12:])]}
    assert net_curvature(as_arrays, k=2).eigenvalues == expected
    assert net_curvature(as_batches, k=2).eigenvalues == pytest.approx(expected, rel=1e-12)
    net = problem_from_dict(as_batches)
    assert net.dtype == torch.float64 and net.targets.dtype == torch.int64
    with pytest.raises(ValueError, match=r"^inputs must be a torch.Tensor or a NumPy array of "):
        problem_from_dict({**as_arrays, "inputs": x.tolist()})


def test_data_whose_passes_hold_other_samples_is_refused():
    """A training loader handed over as it is — ``shuffle=True, drop_last=True``, a sampler
    with replacement, a random augmentation — holds other samples on every pass, so each
    Hessian-vector product of Lanczos saw another loss: curvature came out silently 0.6 % to
    13 % off the data's (100 samples, batches of 32).  Refused at loading, naming the data; a
    shuffled loader (every pass the same samples) and a list of batches run."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(100, 4, generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (100,), generator=g)
    data = torch.utils.data.TensorDataset(x, y)

    class Augmented(torch.utils.data.Dataset):
        def __len__(self):
            return 100

        def __getitem__(self, i):
            return x[i] + 0.01 * torch.randn(4, dtype=torch.float64), y[i]

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 3))
    problem = {"model": model.double(), "loss": torch.nn.CrossEntropyLoss()}
    loader = functools.partial(torch.utils.data.DataLoader, batch_size=32)
    differ = {
        "drop_last": loader(data, shuffle=True, drop_last=True),
        "replacement": loader(data, sampler=torch.utils.data.RandomSampler(data, replacement=True)),
        "augmented": loader(Augmented()),
    }
    for source in differ.values():
        with pytest.raises(ValueError, match=r"^data: two passes over it give the loss \S+ and "):
            problem_from_dict({**problem, "data": source})
    expected = net_curvature({**problem, "inputs": x, "targets": y}, k=1).eigenvalues[0]
    batches = [(x[i : i + 32], y[i : i + 32]) for i in range(0, 100, 32)]
    for same in (loader(data, shuffle=True), batches):
        top = net_curvature({**problem, "data": same}, k=1).eigenvalues[0]
        assert top == pytest.approx(expected, rel=1e-12)
    # batch losses of both signs that cancel: shuffled passes differ by 2e-17, 800 times
    # 1,000 rounding units of f (1.1e-7); the rounding is that of the batches' sizes, not of f
    centred = y.double() - y.double().mean()

    def cancelling(out, t):
        return (t + 1e-6 * out[:, 0] ** 2).mean()

    shuffled = loader(torch.utils.data.TensorDataset(x, centred), batch_size=7, shuffle=True)
    net = problem_from_dict({**problem, "loss": cancelling, "data": shuffled})
    assert 0 < float(net.loss(net.w_star).detach()) < 1e-5


def test_a_loaders_workers_are_not_restarted_on_every_pass():
    """A DataLoader with workers (not persistent) starts them afresh on every pass, and the
    analysis passes once a product or a step: 200 steps of ``net train`` on a 96-sample MLP
    took 33 s against 5 s.  The problem reads a copy in the main process (the same batches, the
    user's loader untouched); loaders whose workers could matter are left as they are."""
    from stability.nets.batches import _in_process

    g = torch.Generator().manual_seed(0)
    x = torch.randn(40, 3, generator=g, dtype=torch.float64)
    data = torch.utils.data.TensorDataset(x, x[:, :1])
    loader = torch.utils.data.DataLoader(data, batch_size=16, num_workers=2)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    problem = {"model": model.double(), "loss": torch.nn.MSELoss()}
    net = problem_from_dict({**problem, "data": loader})
    assert net.data._source.num_workers == 0 and loader.num_workers == 2
    whole = net_curvature({**problem, "inputs": x, "targets": x[:, :1]}, k=1).eigenvalues
    assert net_curvature(net, k=1).eigenvalues == pytest.approx(whole, rel=1e-12)

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(data)

    kept = [
        torch.utils.data.DataLoader(data, num_workers=2, persistent_workers=True),
        torch.utils.data.DataLoader(data, num_workers=2, worker_init_fn=print),
        torch.utils.data.DataLoader(Stream(), num_workers=2),
    ]
    for other in kept:
        assert _in_process(other) is other


class _Pinn(torch.nn.Module):
    """u(x) and du/dx, the derivative in the input taken with torch.autograd (as a
    physics-informed network's often is) or with torch.func."""

    def __init__(self, with_func):
        super().__init__()
        torch.manual_seed(0)
        self.u = torch.nn.Sequential(torch.nn.Linear(1, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
        self.with_func = with_func

    def forward(self, x):
        if self.with_func:
            du = torch.func.vmap(torch.func.grad(lambda s: self.u(s[None])[0, 0]))(x)
            return torch.cat([self.u(x), du], 1)
        x = x.requires_grad_(True)
        u = self.u(x)
        return torch.cat([u, torch.autograd.grad(u.sum(), x, create_graph=True)[0]], 1)


def test_a_derivative_in_the_inputs_by_torch_autograd_is_refused_and_by_torch_func_answered():
    """A physics-informed network that takes du/dx with torch.autograd in its forward pass was
    refused as "the model or loss failed on the inputs: element 0 of tensors does not require
    grad" (the load check runs under no_grad; torch.func cannot transform it either).  The
    refusal now says what it is and how to write it; written with torch.func it is answered,
    its top eigenvalues equal to those of central differences of the eager gradient."""
    x = torch.linspace(0, 1, 16, dtype=torch.float64)[:, None]

    def residual(out, y):
        return ((out[:, 1:] - torch.cos(y)) ** 2).mean() + 0.1 * (out[:, :1] ** 2).mean()

    problem = {"loss": residual, "inputs": x, "targets": x}
    with pytest.raises(ValueError, match=r"^the model or loss uses torch.autograd inside its fo"):
        problem_from_dict({**problem, "model": _Pinn(with_func=False).double()})
    net = problem_from_dict({**problem, "model": _Pinn(with_func=True).double()})
    top = net_curvature(net, k=2).eigenvalues

    def gradient(w):
        w = w.clone().requires_grad_(True)
        return torch.autograd.grad(net.loss(w), w)[0]

    h, eye = 1e-5, torch.eye(net.dim, dtype=torch.float64)
    H = torch.stack([(gradient(net.w_star + h * e) - gradient(net.w_star - h * e)) / (2 * h)
                     for e in eye])  # fmt: skip
    expected = torch.linalg.eigvalsh((H + H.T) / 2).flip(0)[:2].tolist()
    assert top == pytest.approx(expected, rel=1e-8)


class _Autocast(torch.nn.Module):
    """A tanh MLP whose first layer runs under ``torch.autocast`` (bfloat16 or float16), or
    without it."""

    def __init__(self, dtype=None):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b, self.dtype = torch.nn.Linear(3, 5), torch.nn.Linear(5, 1), dtype

    def forward(self, x):
        with torch.autocast("cpu", dtype=self.dtype or torch.bfloat16, enabled=bool(self.dtype)):
            h = torch.tanh(self.a(x))
        return self.b(h.to(x.dtype))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_inside_the_forward_pass_is_refused(dtype):
    """A model that runs part of its forward pass under ``torch.autocast`` ended in "internal
    error: RuntimeError: expected scalar type Float but found BFloat16" where attention was
    involved, and elsewhere gave curvature from products in 8 or 11 significant bits.  Refused
    at loading, naming the dtype and the first operation; the same model without autocast runs
    (a bfloat16 *model* is evaluated in float32, docs/your_model.md)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 3, generator=g)
    problem = {"loss": torch.nn.MSELoss(), "inputs": x, "targets": x[:, :1]}
    name = str(dtype).removeprefix("torch.")
    with pytest.raises(ValueError, match=rf"^the model computes in {name} inside its forward pa"):
        problem_from_dict({**problem, "model": _Autocast(dtype)})
    assert problem_from_dict({**problem, "model": _Autocast()}).dtype == torch.float32
    as_bf16 = {**problem, "model": _Autocast().to(torch.bfloat16)}
    assert problem_from_dict(as_bf16).dtype == torch.float32


def test_a_model_that_draws_random_numbers_in_eval_mode_is_refused():
    """Noise that ignores ``self.training`` made the loss a random function of w: curvature
    and max lr came out of Lanczos on a noisy operator, silently, and ``net noise --measure``
    ran past ten minutes.  Refused at loading; a shuffled DataLoader (it draws its seed when
    iterated, not in the model) and dropout (off in eval mode) are not."""

    class Noisy(torch.nn.Module):
        def __init__(self, p_drop=0.0, noise=0.0):
            super().__init__()
            self.lin, self.drop, self.noise = torch.nn.Linear(3, 1), torch.nn.Dropout(p_drop), noise

        def forward(self, x):
            y = self.drop(self.lin(x))
            return y + self.noise * torch.randn_like(y) if self.noise else y

    g = torch.Generator().manual_seed(0)
    x = torch.randn(20, 3, generator=g, dtype=torch.float64)
    data = torch.utils.data.TensorDataset(x, x[:, :1])
    shuffled = torch.utils.data.DataLoader(data, batch_size=8, shuffle=True)
    loss = torch.nn.MSELoss()
    with pytest.raises(ValueError, match=r"^the model or loss draws random numbers in eval mode"):
        problem_from_dict({"model": Noisy(noise=1e-3).double(), "loss": loss, "data": shuffled})
    net = problem_from_dict({"model": Noisy(p_drop=0.5).double(), "loss": loss, "data": shuffled})
    assert net.data.samples == 20 and float(net.loss(net.w_star)) > 0


def _sparse_padded_compiled(sparse=False, padding=True, compiled=False):
    """Token ids → Embedding (``padding_idx`` 0 if ``padding``) → mean → Linear, the same
    weights whatever the flags; optionally wrapped by ``torch.compile``."""
    torch.manual_seed(0)
    emb = torch.nn.Embedding(8, 3, sparse=sparse, padding_idx=0 if padding else None)
    with torch.no_grad():
        emb.weight[0] = torch.tensor([0.3, -0.2, 0.5])  # a padding row that is not zero
    model = torch.nn.Sequential(emb, torch.nn.Flatten(), torch.nn.Linear(12, 2)).double()
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(0, 8, (40, 4), generator=g)
    y = torch.randn(40, 2, generator=g, dtype=torch.float64)
    model = torch.compile(model) if compiled else model
    return {"model": model, "loss": torch.nn.MSELoss(), "inputs": ids, "targets": y}


def test_padding_sparse_and_compiled_embeddings_have_the_frozen_padding_rows_hessian():
    """An embedding's padding row gets no gradient (torch masks it), so it never moves and the
    analysis is the Hessian over the other coordinates: the dense Hessian of the same model
    without ``padding_idx``, the padding row's rows and columns deleted, padded with zeros.
    ``sparse=True`` ended in "internal error: reshape is not implemented for sparse tensors",
    a ``torch.compile``d model in "torch.compile with aot_autograd does not currently support
    double backward": both give the same eigenvalues."""
    plain = problem_from_dict(_sparse_padded_compiled(padding=False))
    H = dense_hessian(plain)
    assert plain.names[0] == "0.weight"
    pad = [0, 1, 2]  # the embedding table's row 0, first in the flat vector
    keep = np.setdiff1d(np.arange(plain.dim), pad)
    frozen = np.sort(np.linalg.eigvalsh(H[np.ix_(keep, keep)]))[::-1]
    for flags in ({}, {"sparse": True}, {"compiled": True}, {"sparse": True, "compiled": True}):
        net = problem_from_dict(_sparse_padded_compiled(**flags))
        assert net.compiled == bool(flags.get("compiled"))
        got = _eigs(net, 4)
        assert np.max(np.abs(got - frozen[:4])) <= 1e-9 * frozen[0], flags
        g = net.gradient(net.w_star).numpy()
        assert np.all(g[pad] == 0) and np.allclose(g[keep], plain.gradient(plain.w_star)[keep])


def _weight_normed(form):
    """x → Linear(5, 6), weight-normalised → tanh → Linear(6, 2), MSE: the first layer's weight
    w = g·v/‖v‖ (rows) by torch's parametrization, its older hook, or written out by hand."""
    torch.manual_seed(3)
    first, last = torch.nn.Linear(5, 6).double(), torch.nn.Linear(6, 2).double()
    g = torch.Generator().manual_seed(4)
    x = torch.randn(30, 5, generator=g, dtype=torch.float64)
    y = torch.randn(30, 2, generator=g, dtype=torch.float64)
    if form == "parametrization":
        first = torch.nn.utils.parametrizations.weight_norm(first)
    elif form == "hook":
        with warnings.catch_warnings():  # torch deprecates the hook (FutureWarning)
            warnings.simplefilter("ignore", FutureWarning)
            first = torch.nn.utils.weight_norm(first)
    else:

        class ByHand(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.v = torch.nn.Parameter(first.weight.detach().clone())
                self.g = torch.nn.Parameter(first.weight.detach().norm(dim=1, keepdim=True))
                self.bias = torch.nn.Parameter(first.bias.detach().clone())

            def forward(self, x):
                weight = self.g * self.v / torch.sqrt((self.v * self.v).sum(1, keepdim=True))
                return x @ weight.T + self.bias

        first = ByHand()
    model = torch.nn.Sequential(first, torch.nn.Tanh(), last)
    return {"model": model, "loss": torch.nn.MSELoss(), "inputs": x, "targets": y}


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -2, -3])
def test_weight_norm_has_the_values_of_torchs_kernel(dim):
    """`weight_norm` against ``torch._weight_norm`` (whose values are right) for every ``dim``
    torch takes: −1 normalises over everything, −2 and −3 count from the end (they normalised
    over everything too before)."""
    from stability.nets.weight_norm import weight_norm

    seeded = torch.Generator().manual_seed(6)
    v = torch.randn(3, 4, 5, generator=seeded, dtype=torch.float64)
    shape = [1, 1, 1] if dim == -1 else [v.shape[i] if i == dim % 3 else 1 for i in range(3)]
    g = torch.rand(shape, generator=seeded, dtype=torch.float64)
    torch.testing.assert_close(weight_norm(v, g, dim), torch._weight_norm(v, g, dim))


def test_weight_norm_has_the_hessian_of_its_definition():
    """Both of torch's weight-norm forms compute g·v/‖v‖ with ``torch._weight_norm``, whose
    second derivative is wrong in torch 2.13 (gradgradcheck fails): this MLP's top three came
    out off by up to 3.2·10⁻³·λ₁.  Now they are the eigenvalues of the same model written out by
    hand (no torch weight-norm code), to 10⁻⁹·λ₁."""
    seeded = torch.Generator().manual_seed(5)
    v = torch.randn(4, 3, generator=seeded, dtype=torch.float64, requires_grad=True)
    g = torch.randn(4, 1, generator=seeded, dtype=torch.float64, requires_grad=True)
    assert not torch.autograd.gradgradcheck(  # torch's kernel: why the workaround exists
        lambda v, g: torch._weight_norm(v, g, 0), (v, g), raise_exception=False
    )
    by_hand = problem_from_dict(_weight_normed("by hand"))
    assert not by_hand.weight_normed
    exact = np.sort(np.linalg.eigvalsh(dense_hessian(by_hand)))[::-1][:3]
    for form in ("parametrization", "hook"):
        net = problem_from_dict(_weight_normed(form))
        assert net.weight_normed
        got = _eigs(net, 3)
        assert np.max(np.abs(got - exact)) <= 1e-9 * exact[0], form
        assert np.allclose(net.loss(net.w_star).item(), by_hand.loss(by_hand.w_star).item())


def test_targets_as_a_dict_and_samples_without_a_batch_dimension(models):
    """Targets given whole as a dict were refused ("targets must be a torch.Tensor") although
    a DataLoader's dict targets ran: both now serve, with the tensors' numbers.  A
    DataLoader with ``batch_size=None`` yields samples without a batch dimension, which
    counted 2 samples a batch (the targets' length) and, for minibatches, indexed the
    concatenated features as rows ("internal error: RuntimeError: mat1 and mat2 shapes cannot
    be multiplied"): refused naming the problem.  A tensor every sample shares (a mask) is
    refused for minibatches naming --batch, and serves the full-batch questions."""
    import stability as st

    def mse(out, t):  # a batch or one sample
        return 0.5 * ((out - t) ** 2).sum(dim=-1).mean()

    found = {**models.problem("residual"), "loss": mse}
    x, y = found["inputs"], found["targets"]
    want = _eigs(problem_from_dict(found), 3)
    as_dict = problem_from_dict({**found, "loss": lambda o, t: mse(o, t["y"]), "targets": {"y": y}})
    assert np.max(np.abs(_eigs(as_dict, 3) - want)) <= 1e-12 * want[0]
    loader = torch.utils.data.DataLoader(list(zip(x, y, strict=True)), batch_size=None)
    with pytest.raises(ValueError, match=r"^data batch 1: .* got 4 and 2 .*batch_size=None"):
        problem_from_dict({"model": found["model"], "loss": mse, "data": loader})

    class Masked(torch.nn.Module):  # the residual block, its input scaled by a shared mask
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x, mask):
            return self.inner(x * mask)

    masked = problem_from_dict({**found, "model": Masked(found["model"]),
                                "inputs": (x, torch.ones(4, dtype=torch.float64))})  # fmt: skip
    assert np.max(np.abs(_eigs(masked, 3) - want)) <= 1e-12 * want[0]
    with pytest.raises(ValueError, match=r"^batch: .* a tensor of shape \(4,\)"):
        st.net_train(masked, rule="sgd", tau=1, lr=0.01, steps=3, batch=8)


def test_batches_of_different_lengths_are_full_batch_data_but_not_minibatches(models):
    """Dynamic padding gives batches of different sequence lengths: the full-batch loss and
    curvature sum over them (the top eigenvalue equals the dense Hessian of that weighted
    sum), while minibatches drawn across them are refused naming --batch (it was "internal
    error: RuntimeError: Sizes of tensors must match")."""
    import stability as st

    g = torch.Generator().manual_seed(0)
    data = [(torch.randint(0, 20, (n, length), generator=g),
             torch.randn(n, 2, generator=g, dtype=torch.float64))
            for n, length in ((8, 5), (6, 7), (8, 6))]  # fmt: skip
    torch.manual_seed(0)
    found = {"model": models.build("embedding").double(), "loss": models.mse, "data": data}
    net = problem_from_dict(found)
    w = net.w_star.detach()

    def weighted(u):
        return sum(len(y) / 22 * net.batch_loss(u, x, y) for x, y in data)

    dense = np.linalg.eigvalsh(torch.autograd.functional.hessian(weighted, w).numpy())
    top = st.net_curvature(found, k=1).eigenvalues[0]
    assert top == pytest.approx(dense[-1], rel=1e-9)
    with pytest.raises(ValueError, match=r"^batch: minibatches .* \(5,\) and \(7,\)"):
        st.net_train(found, "sgd", tau=1, lr=0.01, steps=5, batch=4)


# -- precision -----------------------------------------------------------------------------------


def test_float32_top_eigenvalues_within_1e_4_of_float64(models, capsys):
    spec = f"{models.PATH}:residual"
    runs = {}
    for dtype in ("float64", "float32"):
        assert main(["net", "curvature", "--problem", spec, "--k", "3", "--dtype", dtype,
                     "--json"]) == 0  # fmt: skip
        runs[dtype] = np.array(json.loads(capsys.readouterr().out)["eigenvalues"])
    assert np.max(np.abs(runs["float32"] / runs["float64"] - 1)) <= 1e-4
    net = problem_from_dict(models.problem("residual"), dtype="float32")
    assert net.dtype == torch.float32 and net.w_star.dtype == torch.float32
    res = simulate(net, [build_rule("sgd", tau=2)[0]], [0.05], steps=5, track=("increment",))
    assert np.all(np.isfinite(res.energies["increment"])) and not res.diverged[0]


def test_default_dtype_is_the_models_promoted_to_the_datas(models):
    x, y = models.tensors("residual")
    model = models.build("residual")  # float32 parameters
    assert problem_from_dict({"model": model, "loss": models.mse, "inputs": x.float(),
                              "targets": y.float()}).dtype == torch.float32  # fmt: skip
    assert problem_from_dict({"model": model, "loss": models.mse, "inputs": x,
                              "targets": y}).dtype == torch.float64  # fmt: skip


def test_a_class_weight_follows_the_model_and_the_measurement_into_float64():
    """A loss module's buffers (CrossEntropyLoss's class weight) take the evaluation dtype with
    the model, so ``dtype="float64"`` and the float64 measured runs work on a float32 problem;
    a loss function holding a float32 tensor keeps the runs (and Adam's preconditioned
    curvature) in float32, with a warning.  The analysis converts copies: the user's model and
    loss stay as they were."""
    from stability.nets.bracket import NetProtocol

    torch.manual_seed(0)
    x, y = torch.randn(30, 4), torch.randint(0, 3, (30,))
    model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Dropout(0.1), torch.nn.Linear(6, 3))
    weight = torch.tensor([1.0, 2.0, 0.5])
    module = torch.nn.CrossEntropyLoss(weight=weight)

    def held(out, target):
        return torch.nn.functional.cross_entropy(out, target, weight=weight)

    def problem(loss):
        return {"model": model, "loss": loss, "inputs": x, "targets": y}

    wide = problem_from_dict(problem(module), dtype="float64")
    f32 = problem_from_dict(problem(module))
    assert float(wide.loss(wide.w_star)) == pytest.approx(float(f32.loss(f32.w_star)), rel=1e-6)
    assert wide.model is not model and not wide.model.training  # the analysis's own copy
    assert model.training and next(model.parameters()).dtype == torch.float32
    assert module.weight.dtype == torch.float32
    with pytest.raises(ValueError, match="the model or loss failed"):
        problem_from_dict(problem(held), dtype="float64")
    # the bracket in one round: 16 step sizes over ±6 % leave a relative width 0.0078 ≤ rel_tol
    # (measured [0.9961, 1.0039]·max_lr; the default 8 over ±25 % needs a second round)
    protocol = NetProtocol(steps=200, rate_steps=100, per_round=16, span=1.06)
    for loss, precision in ((module, "float64"), (held, "float32")):
        r = net_max_lr(problem(loss), "sgd", tau=2, measure=True, protocol=protocol)
        assert r.protocol["precision"].startswith(precision)
        assert r.measured_bracket[0] * 0.95 <= r.max_lr <= r.measured_bracket[1] * 1.05
        assert any(w.startswith("the measured runs stay in float32") for w in r.warnings) == (
            precision == "float32"
        )
    for loss, in_float32 in ((module, False), (held, True)):  # Adam's H̃: float64 where it can
        r = net_curvature(problem(loss), k=2, precond_from="warmup:5:0.01")
        assert len(r.preconditioned_eigenvalues) == 2
        warned = [w for w in r.warnings if w.startswith("preconditioned_eigenvalues are evaluated")]
        assert bool(warned) == in_float32
        assert not warned or "in float32: in float64 " in warned[0]


# -- backward current for any module -------------------------------------------------------------


def _chain_by_hand(model, params_f, params_b, x, y, loss):
    """Backpropagation through an nn.Sequential: activations with the forward weights, each
    layer's vector-Jacobian product at the backward weights (torch.func.vjp per layer)."""
    acts, a = [x], x
    for i, layer in enumerate(model):
        a = torch.func.functional_call(layer, _own(params_f, i), (a,))
        acts.append(a)
    cot = torch.func.grad(lambda o: loss(o, y))(acts[-1])
    grads = {}
    for i in reversed(range(len(model))):
        layer, own_b = model[i], _own(params_b, i)

        def f(a, p, layer=layer):
            return torch.func.functional_call(layer, p, (a,))

        _, pullback = torch.func.vjp(f, acts[i], own_b)
        cot, g = pullback(cot)
        grads.update({f"{i}.{n}": t for n, t in g.items()})
    return grads


def _own(params, i):
    return {n.split(".", 1)[1]: t for n, t in params.items() if n.split(".", 1)[0] == str(i)}


def test_general_backward_equals_backpropagation_by_hand():
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(3, 5), nn.LayerNorm(5), nn.GELU(), nn.Linear(5, 5),
                          nn.PReLU(), nn.BatchNorm1d(5), nn.Linear(5, 2)).double()  # fmt: skip
    model.eval()  # as the analysis evaluates it (on its own copy)
    with torch.no_grad():  # BatchNorm in eval mode: its stored statistics
        model[5].running_mean.uniform_(-0.5, 0.5)
        model[5].running_var.uniform_(0.5, 2.0)
    X, Y = torch.randn(20, 3, dtype=torch.float64), torch.randn(20, 2, dtype=torch.float64)

    def loss(out, y):
        return 0.5 * ((out - y) ** 2).sum(dim=1).mean()

    net = problem_from_dict({"model": model, "loss": loss, "inputs": X, "targets": Y}, stages=3)
    uf, ub = (net.w_star + 0.3 * torch.randn(net.dim, dtype=torch.float64) for _ in range(2))
    want = _chain_by_hand(model, net.params(uf), net.params(ub), X, Y, loss)
    want = torch.cat([want[n].reshape(-1) for n in net.names])
    for construction in ("auto", "general"):
        got = inconsistent_gradient(net, uf, ub, construction=construction)
        assert float((got - want).abs().max()) <= 1e-12 * float(want.abs().max())
    assert float((want - net.gradient(uf)).abs().max()) > 1e-3  # the backward weights matter


def test_general_backward_equals_bilinear_and_autograd(models):
    nn = torch.nn
    torch.manual_seed(0)
    cnn = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.Tanh(), nn.Flatten(),
                        nn.Linear(32, 2)).double()  # fmt: skip
    X, Y = torch.randn(10, 1, 4, 4, dtype=torch.float64), torch.randn(10, 2, dtype=torch.float64)
    net = problem_from_dict({"model": cnn, "loss": models.mse, "inputs": X, "targets": Y})
    uf, ub, ur = (net.w_star + 0.2 * torch.randn(net.dim, dtype=torch.float64) for _ in range(3))
    for args in ((uf, ub), (uf, ub, ur)):
        a = inconsistent_gradient(net, *args, construction="auto")
        b = inconsistent_gradient(net, *args, construction="general")
        assert float((a - b).abs().max()) <= 1e-12 * float(a.abs().max())
    for name in NAMES:
        net = problem_from_dict(models.problem(name))
        w = net.w_star
        got = inconsistent_gradient(net, w, w, construction="general")
        assert float((got - net.gradient(w)).abs().max()) <= 1e-12 * float(got.abs().max())
    assert [n for n, _ in units(models.build("attention"))] == ["attn", "ln", "out"]


@pytest.mark.parametrize(
    "function, keywords, needle",
    [
        ("net_train", {"steps": 10**30}, "steps must be an integer in [1, 1000000]"),
        ("net_train", {"divergence": 1.0}, "divergence must be a finite real number > 1"),
        ("net_train", {"lr": np.array([0.1, 0.2])}, "lr must be one real number"),
        ("net_max_lr", {"measure": True, "measure_steps": 50}, "measure_steps must be"),
        ("net_noise", {"lr": np.array([0.1, 0.2])}, "lr must be one real number"),
    ],
)
def test_the_net_functions_check_their_keywords_by_the_commands_tables(
    models, function, keywords, needle
):
    """``st.net_train(steps=10**30)`` ended in "TypeError: full(): argument 'size' failed to
    unpack" and an lr array in "only 0-dimensional arrays can be converted": the functions
    check by their commands' option tables (the CLI's limits; ``net max-lr``'s
    ``measure_steps`` ≥ 100 as on the command line)."""
    import stability as st

    net = problem_from_dict(models.problem("residual"))
    given = {"net_train": dict(lr=0.01, steps=5), "net_noise": dict(batch=8, k=2)}
    kwargs = {"rule": "sgd", "tau": 1, **given.get(function, {}), **keywords}
    with pytest.raises(ValueError) as info:
        getattr(st, function)(net, **kwargs)
    assert needle in str(info.value) and "\n" not in str(info.value)
