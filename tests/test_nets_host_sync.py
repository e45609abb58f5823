"""The simulator's hot loops stay on the model's device (issue 24): no step reads a value back
to the host (``.item()``, ``.numpy()``, ``bool(tensor)``, a boolean-mask index — each waits for
a GPU) or copies one to the device (``.to``) — only the loss curve's records, the divergence
checks every `CHECK_EVERY` steps and one copy of batch indices per chunk of steps do.

Counted by a ``TorchFunctionMode`` on the CPU (the calls are the same on any device) as the
difference between runs of 2S and S steps, so that the setup and the final read-out cancel;
each loop read every step before (S more calls at least).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch.overrides import TorchFunctionMode  # noqa: E402

from stability.nets.lockstep import CHUNK_STEPS, RunSetup  # noqa: E402
from stability.nets.minibatch_lyapunov import exponents  # noqa: E402
from stability.nets.minibatch_runs import lockstep  # noqa: E402
from stability.nets.prediction import net_rules  # noqa: E402
from stability.nets.problem import problem_from_dict  # noqa: E402
from stability.nets.simulator import simulate  # noqa: E402
from stability.pipeline import Pipeline  # noqa: E402
from tests.test_nets_noise import _tiny  # noqa: E402

TRANSFERS = frozenset(
    {"item", "tolist", "numpy", "cpu", "to", "nonzero", "__bool__", "__float__", "__int__"}
)
CHECK_EVERY = 10  # simulate's default
SIMULATE_CHUNK = 256  # batch indices drawn per copy in simulate


def _boolean_index(index) -> bool:
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(a, torch.Tensor) and a.dtype == torch.bool for a in parts)


class _Transfers(TorchFunctionMode):
    """Counts the host↔device calls (module doc) made inside the block."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        masked = name in ("__getitem__", "__setitem__") and _boolean_index(args[1])
        self.count += name in TRANSFERS or masked
        return func(*args, **(kwargs or {}))


def _extra(run, steps: int) -> int:
    """Transfers of ``run(2·steps)`` beyond those of ``run(steps)``."""
    counts = []
    for n in (steps, 2 * steps):
        with _Transfers() as t:
            run(n)
        counts.append(t.count)
    return counts[1] - counts[0]


@pytest.fixture(scope="module")
def setup():
    torch.set_num_threads(1)
    net = problem_from_dict(_tiny(), stages=2)
    rules = net_rules("momentum", {"momentum": 0.5}, Pipeline.from_options(tau=1, stages=2))
    return RunSetup(net, rules, batch=8)


def test_minibatch_simulator_reads_only_at_its_checks(setup):
    def run(n):
        simulate(setup.problem, setup.rules, [0.1, 0.2], steps=n, batch=8, record_every=None)

    steps = 2 * SIMULATE_CHUNK
    extra = _extra(run, steps)
    # a check copies the runs' losses to the host (.to, .numpy); indices: one copy per chunk
    assert extra <= 2 * (steps // CHECK_EVERY) + steps // SIMULATE_CHUNK + 1, extra


def test_lockstep_loss_runs_read_nothing_between_records(setup):
    w0 = setup.problem.w_star.detach().expand(4, -1).clone()

    def run(n):
        lockstep(setup, np.full(4, 0.1), w0, np.arange(4), steps=n)

    steps = 2 * CHUNK_STEPS
    assert _extra(run, steps) <= steps // CHUNK_STEPS + 1


def test_almost_sure_runs_read_nothing_between_chunks(setup):
    def run(n):
        exponents(setup, [0.1, 0.3], runs=3, steps=n, separation=1e-6)

    steps = 2 * CHUNK_STEPS
    assert _extra(run, steps) <= steps // CHUNK_STEPS + 1
