"""Theory against the reference trainer: the only place the two sides meet, and comparisons
only (the predictions are `stability.analysis.modes` and `stability.coupled`; the problems'
linearizations `stability.trainer.linearize`).

* `stability.agreement.comparison` — predicted vs measured tables (uniform delays, schedules);
* `stability.agreement.coupled_runs` — the coupled per-stage prediction vs trainer runs.
"""
