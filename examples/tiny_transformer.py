"""A small decoder-only transformer on a synthetic sequence task, in 8 pipeline stages
(``examples/tiny_transformer.py:problem``; the ≈10⁵-parameter variant: ``problem_small``).

**Task.**  Sequences of ``LENGTH`` tokens over a vocabulary of ``VOCAB``: x_{t+1} = (x_t + s)
mod VOCAB from a random start, with a step s ∈ {1, …, 7} drawn per sequence (the model must
read it off the context: attention), each token replaced by a random one with probability 0.1
(so the loss has a floor); the model predicts every next token (mean cross-entropy).
``SEQUENCES`` sequences from ``torch.Generator().manual_seed(1)``: the data ship inside this
file.

**Model** (float32, as trained): token and position embeddings, pre-norm blocks —
LayerNorm → causal self-attention (``F.scaled_dot_product_attention``) → residual, LayerNorm →
MLP (GELU, 4× wide) → residual — a final LayerNorm and a linear head: 1,065,232 parameters
(``problem``: width 104, 8 blocks, 4 heads) or 120,544 (``problem_small``: width 48, 4 blocks).

**Training** (the script any user has): AdamW (lr 3·10⁻³, weight decay 0) for ``STEPS`` steps
on shuffled minibatches of 32 sequences from a ``DataLoader``, seed 0, one thread (an
optimizer's endpoint depends on the reduction order, hence on the thread count); the trained
weights and the optimizer's state are cached (`stability.nets.fitting.cache_folder`, keyed by
everything that determines them; `adamw_state` names the state's file, the ``--precond-from``
of ``net max-lr --rule adam``), so only the first call trains (minutes for ``problem`` on one
core).

**The problem** hands the analysis the model as it is (float32) and the same ``DataLoader``
type over the analysis set (the first 16 sequences, batches of 8, not shuffled).  The small
variant, where the simulator's bracket is checked, is first brought near a minimum of its 16
analysis sequences (label smoothing 0.1, float64 L-BFGS: `problem_small`) — after 400 AdamW
steps its Hessian has eigenvalues down to −0.35·λ₁, and the simulator's runs escape along
those at any lr.  Stages: the embeddings with block 1, blocks 2 … 7, block 8 with the final
LayerNorm and the head (8 stages for ``problem``, 4 for ``problem_small``).
benchmarks/bench_curvature.py times ``net curvature`` and ``net max-lr`` on it;
benchmarks/bench_transformer_bracket.py checks the simulator's measured bracket on the small
variant.
"""

from __future__ import annotations

import io
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB, LENGTH, SEQUENCES, STEPS = 64, 24, 1024, 400
ANALYSIS = {"large": 16, "small": 16}
MINIMUM_ITERATIONS = 300
"""Sequences the analysis sees (the small variant's few keep the simulator's bracket cheap)."""
SIZES = {
    "large": {"width": 104, "blocks": 8, "heads": 4},
    "small": {"width": 48, "blocks": 4, "heads": 4},
}


class Block(nn.Module):
    """Pre-norm transformer block: x + attention(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)
        )

    def forward(self, x):
        n, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(n, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(n, t, d))
        return x + self.mlp(self.ln2(x))


class TinyTransformer(nn.Module):
    def __init__(self, width: int, blocks: int, heads: int):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, width)
        self.position = nn.Parameter(0.02 * torch.randn(LENGTH, width))
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(blocks))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, VOCAB)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def token_loss(logits, targets):
    """Mean cross-entropy over every predicted token."""
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def sequences(count: int = SEQUENCES, length: int = LENGTH, max_step: int = 7) -> TensorDataset:
    """The task's (inputs, next-token targets), fixed seed (module doc)."""
    g = torch.Generator().manual_seed(1)
    start = torch.randint(0, VOCAB, (count, 1), generator=g)
    step = torch.randint(1, max_step + 1, (count, 1), generator=g)
    seq = (start + step * torch.arange(length + 1)) % VOCAB
    noise = torch.rand(seq.shape, generator=g) < 0.1
    seq = torch.where(noise, torch.randint(0, VOCAB, seq.shape, generator=g), seq)
    return TensorDataset(seq[:, :-1], seq[:, 1:])


def _cached(size: str, steps: int, part: str):
    from stability.nets.fitting import cache_folder

    return cache_folder() / f"tiny_transformer-{size}-{steps}-{part}{torch.__version__}.pt"


def train(size: str = "large", steps: int = STEPS) -> TinyTransformer:
    """The model after ``steps`` AdamW steps (module doc), cached after the first call (with
    the optimizer's state: `adamw_state`)."""
    from stability.files import atomic_write

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        model = TinyTransformer(**SIZES[size])
        path, state = _cached(size, steps, ""), _cached(size, steps, "adamw-")
        if path.is_file() and state.is_file():
            model.load_state_dict(torch.load(path, weights_only=True))
            return model.eval()
        loader = DataLoader(sequences(), batch_size=32, shuffle=True,
                            generator=torch.Generator().manual_seed(0))  # fmt: skip
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
        done = 0
        while done < steps:
            for x, y in loader:
                optimizer.zero_grad()
                token_loss(model(x), y).backward()
                optimizer.step()
                done += 1
                if done == steps:
                    break
        for target, value in ((path, model.state_dict()), (state, optimizer.state_dict())):
            buffer = io.BytesIO()
            torch.save(value, buffer)
            atomic_write(target, lambda fh, b=buffer: fh.write(b.getvalue()), binary=True)
        return model.eval()
    finally:
        torch.set_num_threads(threads)


def adamw_state(size: str = "large", steps: int = STEPS) -> str:
    """The file of the training's AdamW ``state_dict()`` (over ``model.parameters()``, in that
    order): the ``--precond-from`` of ``net max-lr --rule adam`` (docs/adam.md)."""
    train(size, steps)
    return str(_cached(size, steps, "adamw-"))


def stages(model: TinyTransformer) -> list[list[str]]:
    """One stage per block; the embeddings join the first, the final norm and head the last."""
    names = [n for n, _ in model.named_parameters()]
    groups = [[n for n in names if n.startswith(f"blocks.{i}.")] for i in range(len(model.blocks))]
    groups[0] = ["embed.weight", "position", *groups[0]]
    groups[-1] += [n for n in names if n.startswith(("norm.", "head."))]
    return groups


def problem(size: str = "large"):
    model = train(size)
    analysis = torch.utils.data.Subset(sequences(), range(ANALYSIS[size]))
    data = DataLoader(analysis, batch_size=8, shuffle=False)
    return {"model": model, "loss": token_loss, "data": data, "stages": stages(model)}


def smoothed_loss(logits, targets):
    """Token cross-entropy with label smoothing 0.1: a finite minimizer on a few sequences."""
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1), label_smoothing=0.1)


def problem_small(iterations: int = MINIMUM_ITERATIONS):
    """The small variant near a minimum of its analysis loss, for the simulator's bracket: the
    AdamW-trained weights, then ``iterations`` of full-batch L-BFGS in float64 on the analysis
    sequences (`stability.nets.fitting.near_minimum`, cached) — away from a minimum the runs
    escape along the negative-curvature directions at any lr, which no delay analysis predicts.
    """
    from stability.nets.fitting import near_minimum

    x, y = sequences()[: ANALYSIS["small"]]
    model = near_minimum(lambda: train("small"), smoothed_loss, x, y,
                         name="tiny_transformer_small", iterations=iterations)  # fmt: skip
    data = DataLoader(TensorDataset(x, y), batch_size=64)
    return {"model": model, "loss": smoothed_loss, "data": data, "stages": stages(model)}


if __name__ == "__main__":
    for size in SIZES:
        found = problem(size)
        model = found["model"]
        with torch.no_grad():
            losses = [float(token_loss(model(x), y)) for x, y in found["data"]]
        count = sum(p.numel() for p in model.parameters())
        print(f"{size}: {count} parameters, analysis loss {sum(losses) / len(losses):.4f}, "
              f"log(VOCAB) = {math.log(VOCAB):.4f}")  # fmt: skip
