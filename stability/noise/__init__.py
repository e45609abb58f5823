r"""Minibatch training of linear regression: exact second moments, thresholds, noise floors.

With minibatches the gradient of least squares at step t is g_t = H_{B_t}·(u_t − w*) + ξ_{B_t}:
a *random* Hessian H_B = X_Bᵀ X_B / B and a random offset ξ_B = X_Bᵀ(X_B w* − y_B)/B (zero only
when the batch is the whole data set).  Every time-invariant rule is linear in its state and
its gradient, so its state z (weights, velocity, delay buffer, T2 accumulator, in error
coordinates) follows the random linear system z_{t+1} = A(H_{B_t})·z_t + B̃·ξ_{B_t}, whose first
and second moments evolve *exactly* by linear maps.  From them:

* `stability.noise.state` — A(H) = K̃ + B̃·H·Φ̃ read off the rule's own step by probing (uniform
  delays or per-stage rules);
* `stability.noise.moments` — the data's moments: H, E[xxᵀ ⊗ xxᵀ], the offset's covariance,
  the sampling factor p = (n − B)/(B(n − 1));
* `stability.noise.second_moment` — the exact recursion of E[z zᵀ] (matrix-free), expected loss
  curves, the spectral radius of the second-moment map (ARPACK);
* `stability.noise.gramian` — the reduced (small-gain) form: mean-square threshold, stationary
  covariance and noise floor, mean-square rate, from d²×d² problems;
* `stability.noise.lyapunov` — the almost-sure threshold (top Lyapunov exponent) with its
  confidence interval;
* `stability.noise.runs` — the trainer's independent runs: measured expected loss, floor,
  almost-sure bracket, blow-up fraction;
* `stability.noise.minibatch` — ``st.noise`` (``stability noise``);
* `stability.noise.tradeoff` — ``st.tradeoff`` (``stability tradeoff``): speed vs floor.
"""
