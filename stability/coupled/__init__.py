"""Per-stage delays on a full Hessian: each pipeline stage with its own rule, coupled.

* `stability.coupled.system` — the coupled system, its block state matrix (dense reference);
* `stability.coupled.transfer` — each stage's rule as a transfer function of its gradient;
* `stability.coupled.frequency` — the closed-loop matrix polynomial on the unit circle;
* `stability.coupled.track` — following eigenvalue branches in θ;
* `stability.coupled.scan` — the exact coupled max stable lr (frequency scan);
* `stability.coupled.stage_bounds` — the scalar theory per stage, for comparison;
* `stability.coupled.summary` — all of these side by side (`analyze`).
"""
