r"""Independent reference for EA-Pipe (Jang et al.): Alg. 1 on the quadratic, step by step.

The physical state at the start of step t (minibatch t_b = t + 1 in Alg. 1's 1-based count):
the N local replicas x^1 … x^N, the master x̄, and the weights f_t … f_{t+τ−1} that the forward
passes of the minibatches in flight read when they ran (the forward pass of minibatch t runs τ
steps before its backward pass, on replica i = t mod N as it was then).  One step, as Alg. 1
prints it, on f(x) = λx²/2 with the gradient of the forward weights::

    f_{t+τ} ← x^{(t+τ) mod N}                        forward pass of minibatch t + τ
    i ← t mod N;  x ← x^i
    x^i ← x − η·λ·f_t
    if τ_s divides ⌈t_b/N⌉:  x^i ← x^i − α(x − x̄);  x̄ ← x̄ + α(x − x̄)     (eq. 1)

Each step is a matrix A_t on that state, written out here entry by entry; the monodromy over
one period P = N·τ_s is the product A_{P−1}⋯A_0.  Nothing here uses `stability`.
"""

from __future__ import annotations

import math

import numpy as np


def step_matrix(
    replicas: int, tau: int, elastic: float, sync_period: int, lam: float, lr: float, t: int
) -> np.ndarray:
    """A_t on (x^1 … x^N, x̄, f_t … f_{t+τ−1}) → the same at step t + 1 (module doc)."""
    n = replicas
    size = n + 1 + tau
    master = n
    queue = [n + 1 + k for k in range(tau)]  # f_t … f_{t+τ−1}
    # f_t … f_{t+τ}: the stored ones, then the forward pass that runs now
    extended = [np.eye(size)[j] for j in queue] + [np.eye(size)[(t + tau) % n]]
    i = t % n
    x = np.eye(size)[i]
    xbar = np.eye(size)[master]
    a = elastic if math.ceil((t + 1) / n) % sync_period == 0 else 0.0
    A = np.eye(size)
    A[i] = x - lr * lam * extended[0] - a * (x - xbar)
    A[master] = xbar + a * (x - xbar)
    for k, row in enumerate(queue):
        A[row] = extended[k + 1]
    return A


def monodromy(
    replicas: int, tau: int, elastic: float, sync_period: int, lam: float, lr: float
) -> np.ndarray:
    """A_{P−1}⋯A_1·A_0, P = N·τ_s: the state map over one period from phase 0."""
    period = replicas * sync_period
    M = np.eye(replicas + 1 + tau)
    for t in range(period):
        M = step_matrix(replicas, tau, elastic, sync_period, lam, lr, t) @ M
    return M
