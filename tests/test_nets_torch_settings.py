"""What the analysis sets in torch while it runs a model (`stability.nets.torch_settings`):
float32 as IEEE float32, checkpointed segments run plainly (their numbers are tested in
tests/test_nets_models.py), attention on its reference path.

This machine has no GPU and no bfloat16 units, so lower precision would not change a number
here: the tests read the backends' settings from inside the model's forward pass and after.
"""

from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip("torch")

from stability.nets.noise_public import net_noise  # noqa: E402
from stability.nets.public import net_curvature, net_max_lr, net_train  # noqa: E402
from stability.nets.torch_settings import (  # noqa: E402
    BACKENDS,
    REPLACED,
    _backends,
    full_float32,
    reference_attention,
    without_recomputation,
)

SEEN: list[tuple[str, ...]] = []
"""Every backend's fp32_precision each time a `_Watching` model ran (the analysis runs a copy
of the model, so the record is kept outside it)."""


class _Watching(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(3, 1)

    def forward(self, x):
        SEEN.append(tuple(b.fp32_precision for b in _backends()))
        return self.lin(x)


@pytest.fixture
def medium_precision():
    """The process set as a training script that called set_float32_matmul_precision("medium")
    (TF32 on CUDA matmuls, bfloat16 passes in oneDNN; cuDNN convolutions TF32 by default)."""
    saved = [b.fp32_precision for b in _backends()]
    torch.set_float32_matmul_precision("medium")
    yield tuple(b.fp32_precision for b in _backends())
    for b, value in zip(_backends(), saved, strict=True):
        b.fp32_precision = value


def test_every_net_command_runs_the_model_in_ieee_float32_and_restores_the_process(
    medium_precision,
):
    """Before, a problem file importing a training script that asked for "medium" precision
    had the analysis's products in TF32 on a GPU and in bfloat16 passes on a CPU with bfloat16
    units; every command (and the loading) now runs the model with each backend at "ieee" and
    leaves the process's settings as it found them."""
    assert "bf16" in medium_precision and "tf32" in medium_precision
    g = torch.Generator().manual_seed(0)
    x = torch.randn(24, 3, generator=g, dtype=torch.float64)
    problem = {"model": _Watching().double(), "loss": torch.nn.MSELoss(), "inputs": x,
               "targets": x[:, :1]}  # fmt: skip
    calls = (
        lambda: net_curvature(problem, k=1),
        lambda: net_max_lr(problem, rule="sgd", tau=1, k=1),
        lambda: net_train(problem, rule="sgd", tau=1, lr=0.01, steps=5),
        lambda: net_noise(problem, rule="sgd", batch=4, lr=0.01, k=1),
    )
    for call in calls:
        SEEN.clear()
        call()
        assert SEEN and set(SEEN) == {("ieee",) * len(BACKENDS)}
        assert tuple(b.fp32_precision for b in _backends()) == medium_precision


def test_threads_that_overlap_restore_the_settings_once_the_last_leaves(medium_precision):
    """Entries from several threads (a sweep) are counted: the settings stay "ieee" while any
    is inside and come back when the last leaves."""
    inside, release, seen = threading.Barrier(3), threading.Event(), []

    def work(wait):
        with full_float32():
            inside.wait()
            if wait:
                release.wait()
            seen.append(tuple(b.fp32_precision for b in _backends()))

    early, late = (threading.Thread(target=work, args=(w,)) for w in (False, True))
    early.start(), late.start()
    inside.wait()
    early.join()
    assert tuple(b.fp32_precision for b in _backends()) == ("ieee",) * len(BACKENDS)
    release.set()
    late.join()
    assert seen == [("ieee",) * len(BACKENDS)] * 2
    assert tuple(b.fp32_precision for b in _backends()) == medium_precision


def test_checkpointing_is_restored_when_the_last_analysis_leaves():
    """Entries nest: the first replaces, the last restores (from threads too: the counter is
    full_float32's, tested above)."""
    import torch.utils.checkpoint as checkpointing

    original = checkpointing.CheckpointFunction
    with without_recomputation():
        with without_recomputation():
            assert checkpointing.CheckpointFunction is REPLACED["CheckpointFunction"]
        assert checkpointing.CheckpointFunction is REPLACED["CheckpointFunction"]
    assert checkpointing.CheckpointFunction is original


class _PaddedEncoder(torch.nn.Module):
    """A two-layer encoder with a key padding mask and mean pooling over *all* positions: the
    padded ones reach the output."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=True)
        self.head = torch.nn.Linear(8, 2)

    def forward(self, x, pad):
        return self.head(self.enc(x, src_key_padding_mask=pad).mean(1))


def test_attention_is_evaluated_on_the_path_that_is_differentiated():
    """Without gradients (eval mode) torch's encoder takes its fused fast path and packs the
    padded batch into a nested tensor, whose padded positions come out 0: a loss curve was
    another function than the one analysed (0.7476 against 0.7658 here).  Inside the analysis
    the fast path is off, so the loss of `net_train`'s first step is the differentiated one;
    the process's setting is restored after."""
    g = torch.Generator().manual_seed(11)
    x = torch.randn(32, 7, 8, generator=g)
    pad = torch.arange(7)[None, :] >= torch.randint(3, 8, (32,), generator=g)[:, None]
    y = (x[:, :, 0].sum(1) > 0).long()
    model, loss = _PaddedEncoder().eval(), torch.nn.CrossEntropyLoss()
    differentiated = float(loss(model(x, pad), y))  # parameters require grad: the reference path
    with torch.no_grad():
        fast = float(loss(model(x, pad), y))
    assert abs(fast - differentiated) > 1e-2 * differentiated  # the two paths differ here
    problem = {"model": model, "loss": loss, "inputs": {"x": x, "pad": pad}, "targets": y}
    curve = net_train(problem, rule="sgd", tau=0, lr=1e-3, steps=1).loss_curve
    assert curve[0][1] == pytest.approx(differentiated, rel=1e-6)
    assert torch.backends.mha.get_fastpath_enabled()
    with reference_attention():
        assert not torch.backends.mha.get_fastpath_enabled()
    assert torch.backends.mha.get_fastpath_enabled()
