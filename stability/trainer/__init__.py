"""Reference trainer: the same rule objects as the analysis, run on real problems.

Modules (import from them directly; none is imported here, so ``stability`` starts fast):

* `stability.trainer.data` — CSV / svmlight readers, the cpusmall default, preprocessing,
  synthetic data with a prescribed Hessian spectrum;
* `stability.trainer.linreg` — least-squares linear regression (exact Hessian, w*);
* `stability.trainer.mlp` — a tiny MLP whose forward, backward and recompute passes read the
  rule's forward, backward and recompute weights layer by layer;
* `stability.trainer.problems` — problems from named options (data set, preprocessing, model);
* `stability.trainer.schedules` — rules with per-stage delays from a pipeline schedule, T1
  step-size rescheduling, synchronous warm-up (PipeMareW);
* `stability.trainer.engine` — R runs in lockstep: ring-buffer tap reader, minibatch stream,
  divergence marking and freezing;
* `stability.trainer.measure` — empirical asymptotic rate, empirical max stable lr.

The trainer uses rules, never the analysis; predictions and the comparison with them live in
`stability.agreement`.
"""
