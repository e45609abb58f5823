"""The documented size limits: every command answers within a cost bound or refuses up front.

One place for the numbers: the modules that enforce a limit import it from here, ``stability
--help`` prints `help_text`, and docs/limits.md (checked against `TABLE` by the tests)
explains them.  Each limit was set from the cost measured on one core (benchmarks in
docs/limits.md): at the limit a command takes about 10 s or less; above it the command refuses
in one line naming the parameter (`ValueError`, exit code 2 on the CLI).
"""

from __future__ import annotations

from stability.checks import MAX_DELAY

LAM_RANGE = (1e-150, 1e150)
"""Curvature λ of the scalar commands: the velocity-predicting rules' polynomials carry terms of
order (lr·λ)² on the search grid, which overflow float64 beyond λ ≈ 1e297 (λ = 1e-320 made 2/λ
itself overflow: max lr null, bounds an internal error); |log10 λ| ≤ 150 keeps every rule
finite (checked for every registry rule at both ends)."""

EA_MAX_REPLICA_LAGS = 64
"""EA-Pipe Floquet analysis: largest m = ⌈(τ+1)/N⌉ values per replica (its local period map's
polynomials come from eigenvalues of (m+1)-matrices)."""

EA_MAX_REPLICA_VALUES = 5001
"""EA-Pipe Floquet analysis: largest N·m, the replicas' values in the state (τ ≤ 5000 with the
default N = τ + 1); a max-lr search counts zeros on ~100 circles of 8·(N·m + 1) samples."""

EA_MAX_SYNC_PERIOD = 1000
"""EA-Pipe Floquet analysis: largest sync period τ_s (each evaluation runs τ_s steps)."""

HALFLIFE_MAX_DEGREE = 2048
"""halflife: largest degree of the characteristic polynomial (τ ≲ 2000)."""

HALFLIFE_OPTIMIZE_MAX_DEGREE = 24
"""halflife --optimize-momentum / --optimize-horizon: largest degree (every candidate of the
outer search is a full step-size optimisation on dense eigenvalues)."""

HALFLIFE_MAX_KAPPA = 1e8
"""halflife: largest condition number κ.  The optimal rate r* is 1 − Θ(1/κ) (sgd; delayed
rules 1 − Θ(1/(τκ))) to 1 − Θ(1/√κ) (optimal momentum), and float64 radii near 1 carry an
absolute error of ~1e-16 (simple roots) to ~1e-8 (the near-double roots of critical
damping), so h = −ln 2/ln r* is lost as κ grows: the optimal momentum at τ = 0 is 6e-5 off
ln 2·√κ/2 at κ = 1e8 and 50× at 1e12 (where its grid, ending at m = 0.9999, also falls
short); delayed momentum (τ = 23) answered lr 7e-19 at κ = 1e12 (a rate 1 − 4e-15).  The
grids grow with log κ: ``--optimize-momentum`` at degree 24 takes 12 s of CPU at 1e8, 90 s at
1e12, and ``lwp-v --tau 1 --optimize-momentum --kappa 1e308`` took 21 s for a half-life of
7.9e12 (lr 0)."""

HEATMAP_MAX_POINTS_PER_AXIS = 4096
"""heatmap: points per axis."""

HEATMAP_MAX_WORK = 1e9
"""heatmap: largest Σ points·cost(degree), cost = d³ + 4000 (companion eigenvalues, d ≤ 64)
or 1400·d (argument principle), in units of ~10 ns: about 10 s on one core."""

LOCUS_MAX_SAMPLES = 4_000_000
"""max-lr (boundary locus): most samples of the half circle when a crossing is resampled to be
resolved (8, then 32 per unit of degree; 128 only below this).  Where roots crowd the circle
closer than that resolves (dc at τ = 10⁵), the call is refused naming the delay in ~6 s instead
of ~26 s and an internal error."""

SYMBOLIC_MAX_DEGREE = 200
"""poly --symbolic: largest degree of the exact polynomial.  Its coefficients are polynomials
in the rule's symbols whose size grows with τ (wp: 3 s at τ = 100, 7 s at 150, 29 s at 400,
231 s at 1000); numeric coefficients have no such limit."""

CERTIFY_MAX_DEGREE = 300
"""radius --certify: largest degree (the state's size) of the exact Schur-Cohn test, whose
cost grows like the degree cubed; above it the answer is ``certified: false`` with the bound."""

BISECTION_MAX_DEGREE = 300
"""max-lr of a rule whose polynomial is not affine in lr (PipeOptim-AdamW with weight decay):
largest degree (≈ τ + 2) of its search on dense companion eigenvalues (a log grid up to the
first unstable point, then Brent's method: ~100 eigenvalue problems at O(degree³)): 10–11 s
on one core at τ = 298 (it was 31 s at τ = 398 with the full grid and plain bisection); the
boundary locus of the affine rules has no such limit."""

NONAFFINE_SEARCH_MAX_WORK = 1.5e7
"""A rule not affine in lr (PipeOptim-AdamW with weight decay): largest searches × (τ + 2)³,
each search on dense eigenvalues of degree ≈ τ + 2 (`BISECTION_MAX_DEGREE`; ~1.6 s at
τ = 126).  coupled takes P + 2 (the scalar bound, P per-stage bounds and the scan's first
guess): 8.6 s at four stages and τ = 126 (it was 20 s before the scans shared their first
guess, 136 s at τ = 298); train/validate's predicted max lr one per Hessian mode: 41 s for 12
modes at τ = 150 before this limit."""

DENSE_SEARCH_MAX_STATES = 900
"""coupled --method dense (and validate's exact coupled row where the scan is refused; above
256 rows it takes the scan): largest block state matrix the dense max-lr search diagonalises,
~30 times (a log grid, then Brent's method): 0.31 s per diagonalisation at 853 rows on one
core, 9 s for the search (momentum on a 143-parameter MLP, three stages); 1,950 rows took
111 s.  The frequency scan answers up to `SCAN_MAX_PARAMETERS` parameters, whatever the
delays."""

SCAN_MAX_PARAMETERS = 600
"""coupled (the frequency scan, and validate's exact coupled row above 256 block-state rows):
most parameters p.  The scan diagonalises a p × p complex matrix at each sampled angle,
11-30 of them, at O(p³) each; on one core (a slow hour: 0.63 s for an 850 × 850 eigvals)
p = 497 took 6 s, 701 took 13 s and 937 took 32 s (sgd, three PipeDream stages, an MLP with
two hidden layers of 16, 20, 24); --hidden 64,64 (4,929) had not finished after 10 min."""

T1_AUDIT_MAX_CELLS = 4_000_000
"""t1-audit: largest steps × stages of the audited table."""

RATE_PREDICTION_MAX_WORK = 240_000
"""train / validate: largest modes × degree for the predicted rate (τ ≲ 20,000 with 12
modes); above it the rate prediction is left out with a note, the run still happens."""

NET_RATE_MAX_STATE = 1_200
"""net max-lr: largest state of the rate's Galerkin model (`stability.nets.rates`): its
eigen-decomposition and 1,500 steps cost ~5 s at 1,200 rows on one core (n³ and 1,500·n²).
The model takes the most eigenvectors (≤ --k) whose stage pieces fit, so long delays lower its
rank (reported in ``rate_method``, with ``rate_truncation_change``); where even v₁'s pieces do
not fit, the rate prediction is left out with a warning and the max lr still answers."""

MODES_MAX_LR_MAX_WORK = 2_000_000
"""train / validate: largest modes × degree for the predicted max lr when the modes carry
Δ or Φ (each mode its own boundary locus; ~4 s per 10⁶ on one core: τ ≲ 26,000 with the
default MLP's 77 modes); above it the max-lr prediction is left out with a note, the run
still happens."""

PREDICTION_MAX_TAPS = 20_000
"""train / validate: largest number of past values (taps) a rule reads for the predictions on
the problem's modes.  Every rule reads a handful except random delays, whose kernel reads
every lag with P(τ = k) > 0 (τ + 1 for a uniform kernel); each tap is probed and derived
symbolically in lr (~2 s per 10⁴ taps, several derivations per run: 8 s at 2·10⁴).  Above it
the predictions are left out with a note, the run still happens; `max-lr` itself answers up
to the delay limit (11 s at τ = 10⁵ uniform)."""

VALIDATE_MLP_MAX_WORK = 4.5e8
"""validate (and coupled --measure, one row) on an MLP: largest rows × steps × (B·p + 10,000)
(× seeds with minibatches), B the samples (or --batch), p the parameters, rows = rules × taus:
the bisection and rate runs of a row cost 3.4–3.8e-8 s per unit on one core (10,000: the
per-step overhead of the numpy trainer in units of B·p), so ~15–17 s at the limit (the
default 4 rows at 128 × 77: 4.0e8, 13.6 s; cpusmall's target as 99 classes at 128 × 567
counts `CLASSIFICATION_WORK_FACTOR` times: one τ at the default 5,000 steps 6.2e8, refused,
at 3,500 steps 4.3e8)."""

MLP_WORK_REL_TOL = 1e-2
"""The --rel-tol at which `VALIDATE_MLP_MAX_WORK` was measured (the MLP's default: 3 verdict
rounds of the max-lr bisection); a tighter one multiplies the work by its rounds over 3."""

CLASSIFICATION_WORK_FACTOR = 1.5
"""validate / coupled --measure on a classification MLP: its units count this many times.
Its steps cost more than B·p says (the softmax over C classes per sample) and its unstable
runs never reach the divergence threshold (the cross-entropy grows only linearly in ‖w‖), so
no verdict run stops early.  Measured side by side on one core (a busy hour): the 99-class
cpusmall MLP (128 × 567, one τ, 4.1e8 units) 22.9 s, with three PipeMare stages 26.8 s,
against 15.3 s for a regression MLP of 128 × 497 (3.7e8 units): 5.6-6.5e-8 s a unit against
4.1e-8."""

COUPLED_MLP_WORK_SHARE = 0.5
"""coupled --measure on an MLP: the share of `VALIDATE_MLP_MAX_WORK` the prediction and the
measurement may take together (with --rel-tol 2e-5, 2.75e8 units of measurement, the call
took 25 s)."""

COUPLED_SCAN_SHARE = 0.45
"""coupled --measure on an MLP with the frequency scan: the share of `VALIDATE_MLP_MAX_WORK`
the scan's prediction counts at `SCAN_MAX_PARAMETERS` parameters, × (p/600)³ below (dozens of
p × p eigen-decompositions). Measured on one core at p = 567, the 99-class cpusmall MLP, in
a slow hour (an 853 × 853 eigvals 0.70 s against 0.31 s quiet): the prediction with the fit
and start-up 12.6-14 s, its default 2,000-step measurement (1.65e8 units) 6.5-11 s more,
20-27 s in all (the earlier quiet-hour reading: 8 s + 9 s + start-up); a classification
MLP's unstable runs never reach the divergence threshold (the loss grows linearly in ‖w‖), so
every run goes the full length.  Its measurement may now take 0.5 − 0.45·0.844 = 0.12 of the
limit, 5.4e7 units (~430 steps with `CLASSIFICATION_WORK_FACTOR`, ~3 s slow, ~2 s quiet)."""

TRAIN_MAX_STEPS = 1_000_000
"""train / validate / coupled --measure: largest --steps per run (the reference trainer takes
~2 ms per step on cpusmall, one run: ≲ 30 min at the limit)."""

NOISE_MAX_STATE = 400
"""noise / tradeoff: largest d × state size (parameters × the rule's state per parameter:
τ ≲ 32 for sgd at d = 12).  The almost-sure estimate runs 2 × 12 step sizes × 32 paths × 4,000
steps of the random linear system, O(d·s²) per step: ~10–25 s at the limit on one core."""

MAX_STEP_CURVATURE = 1e150
"""radius, noise, net noise: largest lr·|λ|max, whose products and squares in the polynomial's
coefficients and the second moments stay finite in float64 (beyond it they overflow to inf,
then NaN: radius answered ρ = 1 for lr·λ = 1e450)."""
NOISE_MAX_STAGED_WORK = 1.5e8
"""noise / tradeoff with per-stage delays: largest min(d(d+1)/2, 48) × n³, n = the state slots
the stages read (`stability.noise.modal.relevant_slots`): one evaluation of the mean-square
loop is d(d+1)/2 Stein solves of order n on the Schur form (dense Gramians) or ~48 of their
cost (matrix-free, `stability.noise.modal.FREE_LOOP_SOLVES`), and a command evaluates ~50
(threshold and rate bisections): ~10–15 s at the limit on one core (sgd on cpusmall, d = 12,
PipeMare P = 9: 14 s of CPU)."""

NET_NOISE_MAX_SUBSPACE = 128
"""net noise: largest subspace, the one at min(2k, p) eigenvectors that `subspace_change`
compares with (so k ≤ 64 unless p is smaller): the per-sample curvatures take n·m² numbers and
the mean-square problems are m(m+1)/2-dimensional (k = 30 on the 2,410-parameter digits MLP,
m = 60: 127 s of CPU, 93 s of it the almost-sure exponent)."""

NET_NOISE_MAX_STAGED_SUBSPACE = 64
"""net noise with per-stage delays: largest subspace (the block basis at min(2k, p)); its Stein
equations are on the m·(slots) state, limited by `NET_NOISE_MAX_STAGED_WORK` too."""

NET_NOISE_MAX_STAGED_WORK = 5e9
"""net noise with per-stage delays: the same cost as `NOISE_MAX_STAGED_WORK` (n: the slots of
the projected per-stage state), allowed ~30× more: a network's analysis is minutes anyway, and
issue 23 asks for PipeMare P = 4 at k = p on ≤ 60 parameters within 10 minutes (teacher31 of
benchmarks/net_noise_acceptance.py, 31 parameters, n = 206: 48 × 206³ = 4.2e8; the whole call
without --measure took 69 s of CPU, about a fifth of it in the 35 loop evaluations, the rest
in the almost-sure estimate and the expected-loss recursion (56 s once the recursion's cross
term was made O(n d²)): a few minutes at the limit)."""

NOISE_MEASURE_MAX_WORK = 5e9
"""noise --measure (least squares): largest (runs × steps + 24 × 2·pairs × pair_steps) × B·d —
the loss runs, then the almost-sure bracket's three rounds of 8 step sizes, each a pair of
runs per stream.  Measured on one core: the pairs cost 2.2e-9 s per unit (B = 48, d = 12:
8.8e9 units at 10,000 pair steps took 19.6 s), so ~11 s at the limit; cpusmall at B = 32 with
the defaults is 3.0e9, B = 1,024 (9.4e10, over a minute) is refused naming --batch."""

TRADEOFF_MAX_WORK = 1.0e7
"""tradeoff: largest Σ over the scanned (rule, momentum, horizon) points of d(d+1)/2 × (s³ +
2,000) + 80,000 (`stability.noise.tradeoff.check_work`: one modal Gramian's pairs, their
fixed cost, the point's; each point takes ~120 Gramian evaluations): 10–14 s on one core at
the limit (the default three rules at τ = 13 on cpusmall, wp,lwp,lwp-v at τ = 5)."""

TABLE = (  # one row a limit: (command, what is limited, allowed)
    ("every command", "delays (tau, tau_fwd, ...)", f"≤ {MAX_DELAY:,}"),
    ("scalar commands", "lam", f"in [{LAM_RANGE[0]:g}, {LAM_RANGE[1]:g}]"),
    ("train/validate/coupled --problem mlp", "l2", f"in [0, {LAM_RANGE[1]:g}]"),
    ("max-lr/radius ea", "tau (default replicas)", f"≤ {EA_MAX_REPLICA_VALUES - 1:,}"),
    ("max-lr/radius ea", "replicas", f"≥ (tau+1)/{EA_MAX_REPLICA_LAGS}"),
    ("max-lr/radius ea", "sync_period", f"≤ {EA_MAX_SYNC_PERIOD:,}"),
    ("halflife", "degree (≈ tau)", f"≤ {HALFLIFE_MAX_DEGREE:,}"),
    ("halflife --optimize-*", "degree (≈ tau)", f"≤ {HALFLIFE_OPTIMIZE_MAX_DEGREE}"),
    ("halflife", "kappa", f"≤ {HALFLIFE_MAX_KAPPA:.0e}"),
    ("heatmap", "points per axis", f"≤ {HEATMAP_MAX_POINTS_PER_AXIS:,}"),
    ("heatmap", "Σ points × cost(degree)", f"≤ {HEATMAP_MAX_WORK:.0e}"),
    ("radius --certify", "degree (state size)", f"≤ {CERTIFY_MAX_DEGREE}"),
    ("max-lr pipeoptim adamw (not affine in lr)", "degree (≈ tau)", f"≤ {BISECTION_MAX_DEGREE}"),
    ("coupled pipeoptim adamw", "(stages + 2) × (tau + 2)³", f"≤ {NONAFFINE_SEARCH_MAX_WORK:.1e}"),
    ("train/validate pipeoptim adamw", "modes × (tau + 2)³", f"≤ {NONAFFINE_SEARCH_MAX_WORK:.1e}"),
    ("poly --symbolic", "degree", f"≤ {SYMBOLIC_MAX_DEGREE}"),
    ("coupled --method dense", "block state matrix rows", f"≤ {DENSE_SEARCH_MAX_STATES}"),
    ("coupled/validate (frequency scan)", "parameters", f"≤ {SCAN_MAX_PARAMETERS}"),
    ("t1-audit", "steps × stages", f"≤ {T1_AUDIT_MAX_CELLS:,}"),
    ("train/validate", "modes × degree (rate prediction)", f"≤ {RATE_PREDICTION_MAX_WORK:,}"),
    ("train/validate", "modes × degree (max-lr, Δ or Φ ≠ 0)", f"≤ {MODES_MAX_LR_MAX_WORK:,}"),
    ("net max-lr", "state of the rate model (rank × Σ stage history)", f"≤ {NET_RATE_MAX_STATE:,}"),
    ("train/validate", "past values read (taps) for predictions", f"≤ {PREDICTION_MAX_TAPS:,}"),
    ("validate/coupled (mlp)",
     "rows × steps × (samples × params + 1e4) × rounds/3 (× 1.5 classification)",
     f"≤ {VALIDATE_MLP_MAX_WORK:.2g} (coupled: × {COUPLED_MLP_WORK_SHARE:g} − "
     f"{COUPLED_SCAN_SHARE:g}·(params/{SCAN_MAX_PARAMETERS})³)"),
    ("train/validate/coupled", "steps per run", f"≤ {TRAIN_MAX_STEPS:,}"),
    ("noise/tradeoff", "parameters × state size", f"≤ {NOISE_MAX_STATE}"),
    ("noise --measure", "(runs × steps + 48 × pairs × pair_steps) × batch × params",
     f"≤ {NOISE_MEASURE_MAX_WORK:.1e}"),
    ("radius/noise/net noise", "lr × λmax (in magnitude)", f"≤ {MAX_STEP_CURVATURE:.0e}"),
    ("noise per stage", "min(d(d+1)/2, 48)·slots³", f"≤ {NOISE_MAX_STAGED_WORK:.1e}"),
    ("net noise per stage", "min(d(d+1)/2, 48)·slots³", f"≤ {NET_NOISE_MAX_STAGED_WORK:.1e}"),
    ("net noise", "subspace at min(2k, p) eigenvectors",
     f"≤ {NET_NOISE_MAX_SUBSPACE} (per stage {NET_NOISE_MAX_STAGED_SUBSPACE})"),
    ("tradeoff", "Σ points × (d(d+1)/2 × (s³ + 2,000) + 80,000)", f"≤ {TRADEOFF_MAX_WORK:.1e}"),
)  # fmt: skip
"""(command, what is limited, the limit) rows, as in docs/limits.md and ``--help``."""


def help_text() -> str:
    """The `TABLE` as plain text for ``stability --help``."""
    width = max(len(c) for c, _, _ in TABLE) + 2
    rows = [f"  {c:<{width}}{what} {limit}" for c, what, limit in TABLE]
    return "size limits (above them a command refuses in one line; docs/limits.md):\n" + "\n".join(
        rows
    )


__all__ = [
    "TRAIN_MAX_STEPS",
    "NOISE_MAX_STATE",
    "NOISE_MAX_STAGED_WORK",
    "NET_NOISE_MAX_STAGED_SUBSPACE",
    "NET_NOISE_MAX_STAGED_WORK",
    "NET_NOISE_MAX_SUBSPACE",
    "MAX_STEP_CURVATURE",
    "TRADEOFF_MAX_WORK",
    "NOISE_MEASURE_MAX_WORK",
    "BISECTION_MAX_DEGREE",
    "NONAFFINE_SEARCH_MAX_WORK",
    "CERTIFY_MAX_DEGREE",
    "COUPLED_MLP_WORK_SHARE",
    "COUPLED_SCAN_SHARE",
    "CLASSIFICATION_WORK_FACTOR",
    "DENSE_SEARCH_MAX_STATES",
    "SCAN_MAX_PARAMETERS",
    "EA_MAX_REPLICA_LAGS",
    "EA_MAX_REPLICA_VALUES",
    "EA_MAX_SYNC_PERIOD",
    "HALFLIFE_MAX_DEGREE",
    "HALFLIFE_MAX_KAPPA",
    "HALFLIFE_OPTIMIZE_MAX_DEGREE",
    "HEATMAP_MAX_POINTS_PER_AXIS",
    "HEATMAP_MAX_WORK",
    "LOCUS_MAX_SAMPLES",
    "MAX_DELAY",
    "MLP_WORK_REL_TOL",
    "MODES_MAX_LR_MAX_WORK",
    "PREDICTION_MAX_TAPS",
    "RATE_PREDICTION_MAX_WORK",
    "SYMBOLIC_MAX_DEGREE",
    "T1_AUDIT_MAX_CELLS",
    "TABLE",
    "VALIDATE_MLP_MAX_WORK",
    "help_text",
]
