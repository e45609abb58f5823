"""What the spectrum says about a rule: max stable step sizes, bounds, verdicts, half-lives.

* `stability.analysis.boundary` — exact max stable lr (boundary locus, bisection, Floquet);
* `stability.analysis.closed_forms` — the papers' closed forms (PipeMare Lemmas 1-4, Kosson
  eq. 21-24);
* `stability.analysis.certify` — exact (Schur–Cohn) stability verdicts on rationals;
* `stability.analysis.conditioning` — optimal half-life on a condition number κ (Kosson Sec. 3.4);
* `stability.analysis.radius_grid` — spectral radius / half-life / stability over a 2-D grid;
* `stability.analysis.random_delays` — mean-square and almost-sure thresholds of random delays;
* `stability.analysis.rescheduling` — where a learning-rate schedule leaves PipeMare T1's region;
* `stability.analysis.batch_scaling` — hyperparameter scaling with batch size (Kosson eq. 33).
"""
