"""Theory against the reference trainer: the only place the two sides meet.

* `stability.agreement.predict` — predicted max lr and rate from a problem's Hessian spectrum;
* `stability.agreement.comparison` — predicted vs measured tables (uniform delays, schedules);
* `stability.agreement.coupled_runs` — the coupled per-stage prediction vs trainer runs.
"""
