"""`make run`: the main job — a quick reproduction of the headline results into ``figures/``.

Prints the exact maximal stable step size of every registered rule at a few delays (the
table behind PipeMare Lemma 1-3 and Kosson Sec. 3.4) and writes it to
``figures/max_lr_table.json``.
"""

from __future__ import annotations

from pathlib import Path

from stability.boundary import max_lr
from stability.files import write_json
from stability.rules.registry import RULES

DELAYS = (0, 1, 4, 16, 64)


def max_lr_table() -> dict:
    rows = []
    for name, spec in RULES.items():
        for tau in DELAYS:
            values = (
                {"tau": tau} if "tau" in spec.param_names else {"tau_fwd": tau + 1, "tau_bkwd": 0}
            )
            if name == "recompute":
                values["tau_recomp"] = (tau + 1) // 2
            rule, model = spec.build(**values)
            r = max_lr(rule, model)
            rows.append({"rule": name, **values, "max_lr": r.max_lr, "angle": r.crossing_angle})
    return {"lam": 1.0, "rows": rows}


def main() -> None:
    table = max_lr_table()
    print(f"{'rule':<12}{'delays':<22}{'max stable lr (λ = 1)':>24}")
    for row in table["rows"]:
        delays = ", ".join(f"{k}={v}" for k, v in row.items() if k.startswith("tau"))
        value = "stable for all lr" if row["max_lr"] is None else f"{row['max_lr']:.10g}"
        print(f"{row['rule']:<12}{delays:<22}{value:>24}")
    out = Path("figures") / "max_lr_table.json"
    write_json(out, table)
    print(f"\nwrote {out.resolve()}")


if __name__ == "__main__":
    main()
