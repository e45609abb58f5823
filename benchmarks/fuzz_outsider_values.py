"""The values and files of `benchmarks/fuzz_outsider.py`: odd data files and network problems,
and valid, boundary and invalid values for each kind of flag its `--help` shows."""

from __future__ import annotations

import math
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NET = f"{ROOT / 'examples' / 'diabetes_linear.py'}:problem"
INVALID = ("nan", "inf", "-inf", "-1", "0", "abc", "", "1e308", "3.5", "-0", "1e-320", "0x10",
           "1,,2", " ", "∞")  # fmt: skip


# ---------------------------------------------------------------- odd files


def make_files(tmp: Path) -> dict[str, list[str]]:
    import numpy as np

    rng = np.random.default_rng(5)
    X = rng.normal(size=(48, 3))
    y = X @ [3.0, 1.0, 0.4] + 0.2 * rng.normal(size=48)
    good, odd = [], []

    def save(name, array, kind, **kw):
        path = tmp / name
        np.savetxt(path, array, delimiter=kw.get("delimiter", ","), header=kw.get("header", ""),
                   comments="")  # fmt: skip
        (good if kind == "good" else odd).append(str(path))

    save("plain.csv", np.c_[y, X], "good")
    save("wide.csv", np.c_[y[:48], rng.normal(size=(48, 40))], "good")  # 40 features
    save("tall.csv", np.c_[rng.normal(size=400), rng.normal(size=(400, 2))], "good")
    save("constant.csv", np.c_[y, np.ones_like(X)], "odd")
    save("one-constant.csv", np.c_[y, X[:, :2], np.ones(48)], "odd")
    save("duplicate-columns.csv", np.c_[y, X[:, 0], X[:, 0]], "odd")
    nan = np.c_[y, X]
    nan[5, 2] = np.nan
    save("nan.csv", nan, "odd")
    inf = np.c_[y, X]
    inf[3, 1] = np.inf
    save("inf.csv", inf, "odd")
    save("one-row.csv", np.c_[y, X][:1], "odd")
    save("two-rows.csv", np.c_[y, X][:2], "odd")
    save("huge.csv", np.c_[y, X] * 1e200, "odd")
    save("tiny.csv", np.c_[y, X] * 1e-200, "odd")
    save("target-only.csv", y[:, None], "odd")
    save("semicolon.csv", np.c_[y, X], "odd", delimiter=";")
    save("tab.csv", np.c_[y, X], "odd", delimiter="\t")
    save("header.csv", np.c_[y, X], "odd", header="y,a,b,c")
    save("constant-target.csv", np.c_[np.ones(48), X], "odd")
    (tmp / "empty.csv").write_text("")
    (tmp / "ragged.csv").write_text("1,2,3\n4,5\n6,7,8\n")
    (tmp / "text.csv").write_text("a,b,c\nd,e,f\n")
    lines = [f"{v:.4f} " + " ".join(f"{j + 1}:{x:.4f}" for j, x in enumerate(row))
             for v, row in zip(y, X, strict=True)]  # fmt: skip
    (tmp / "data.libsvm").write_text("\n".join(lines) + "\n")
    good.append(str(tmp / "data.libsvm"))
    (tmp / "binary.csv").write_bytes(bytes(range(256)))
    odd += [str(tmp / n) for n in ("empty.csv", "ragged.csv", "text.csv", "binary.csv")]
    odd.append(str(tmp / "missing.csv"))
    odd.append(str(tmp))  # a directory

    nets = tmp / "nets.py"
    nets.write_text(
        "import torch\n"
        "def _data(n=24, d=3, seed=0):\n"
        "    g = torch.Generator().manual_seed(seed)\n"
        "    x = torch.randn(n, d, generator=g, dtype=torch.float64)\n"
        "    return x, x @ torch.tensor([[1.0], [-2.0], [0.5]], dtype=torch.float64)[:d]\n"
        "def linear():\n"
        "    x, y = _data()\n"
        "    m = torch.nn.Linear(3, 1).double()\n"
        "    return {'model': m, 'loss': lambda o, t: 0.5 * ((o - t) ** 2).mean(),"
        " 'inputs': x, 'targets': y}\n"
        "def mlp():\n"
        "    x, y = _data()\n"
        "    torch.manual_seed(0)\n"
        "    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(),"
        " torch.nn.Linear(4, 1)).double()\n"
        "    return {'model': m, 'loss': lambda o, t: 0.5 * ((o - t) ** 2).mean(),"
        " 'inputs': x, 'targets': y}\n"
        "def constant_inputs():\n"
        "    x, y = _data()\n"
        "    m = torch.nn.Linear(3, 1).double()\n"
        "    return {'model': m, 'loss': lambda o, t: 0.5 * ((o - t) ** 2).mean(),"
        " 'inputs': torch.ones_like(x), 'targets': y}\n"
        "def one_sample():\n"
        "    x, y = _data(n=1)\n"
        "    m = torch.nn.Linear(3, 1).double()\n"
        "    return {'model': m, 'loss': lambda o, t: 0.5 * ((o - t) ** 2).mean(),"
        " 'inputs': x, 'targets': y}\n"
        "def nan_inputs():\n"
        "    x, y = _data()\n"
        "    x[2, 1] = float('nan')\n"
        "    m = torch.nn.Linear(3, 1).double()\n"
        "    return {'model': m, 'loss': lambda o, t: 0.5 * ((o - t) ** 2).mean(),"
        " 'inputs': x, 'targets': y}\n"
        "def no_parameters():\n"
        "    x, y = _data()\n"
        "    return {'model': torch.nn.Identity(), 'loss': lambda o, t: 0.5 * ((o[:, :1] - t)"
        " ** 2).mean(), 'inputs': x, 'targets': y}\n"
        "def not_a_dict():\n"
        "    return 3\n"
        "def missing_loss():\n"
        "    x, y = _data()\n"
        "    return {'model': torch.nn.Linear(3, 1).double(), 'inputs': x, 'targets': y}\n"
        "def raises():\n"
        "    raise RuntimeError('the user code fails')\n"
        "def float32():\n"
        "    x, y = _data()\n"
        "    m = torch.nn.Linear(3, 1)\n"
        "    return {'model': m, 'loss': lambda o, t: 0.5 * ((o - t) ** 2).mean(),"
        " 'inputs': x.float(), 'targets': y.float()}\n"
    )
    (tmp / "syntax.py").write_text("def problem(:\n")
    good_nets = [NET, f"{nets}:linear", f"{nets}:mlp", f"{nets}:float32"]
    odd_nets = [f"{nets}:{n}" for n in ("constant_inputs", "one_sample", "nan_inputs",
                                        "no_parameters", "not_a_dict", "missing_loss", "raises",
                                        "nothere")]  # fmt: skip
    odd_nets += [f"{tmp / 'syntax.py'}:problem", f"{tmp / 'missing.py'}:problem", str(nets),
                 f"{tmp / 'plain.csv'}:problem"]  # fmt: skip

    sweeps = []
    for i, text in enumerate([
        'command = "max-lr"\nrule = "sgd"\n[grid]\ntau = [0, 1, 2]\n',
        'command = "radius"\nrule = "momentum"\n[fixed]\nlr = 0.1\n[grid]\ntau = [1, 2]\n'
        'momentum = {start = 0.0, stop = 0.5, num = 2}\n',
        'command = "max-lr"\nrule = "sgd"\n[grid]\ntau = []\n',
        'command = "nothing"\nrule = "sgd"\n[grid]\ntau = [1]\n',
        'command = "max-lr"\nrule = "sgd"\n[grid]\nnosuch = [1]\n',
        'command = "max-lr"\nrule = "sgd"\n[grid]\ntau = [-1, 2]\n',
        "this is not toml ===\n",
        'command = "max-lr"\nrule = "sgd"\n',
        'command = "train"\nrule = "sgd"\n[fixed]\nsteps = 20\n[grid]\nlr = [0.01, 0.1]\n',
    ]):  # fmt: skip
        path = tmp / f"sweep{i}.toml"
        path.write_text(text)
        sweeps.append(str(path))
    sweeps.append(str(ROOT / "examples" / "sweeps" / "momentum_small.toml"))
    a_file = tmp / "a-file"
    a_file.write_text("x")
    return {"good": good, "odd": odd, "good_nets": good_nets, "odd_nets": odd_nets,
            "sweeps": sweeps, "a_file": [str(a_file)]}  # fmt: skip


# ---------------------------------------------------------------- values


def log_uniform(rng, low, high):
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def rule_value(rng, p, mode):
    """A rule parameter value: valid inside `allowed`, at its ends, or outside."""
    if mode == "invalid":
        if "low" in p and rng.random() < 0.5:
            return f"{p['low'] - (1 if p['kind'] == 'delay' else 0.1):g}"
        return rng.choice(INVALID)
    if p.get("choices"):
        return rng.choice(p["choices"])
    if p["kind"] == "delay":
        high = int(min(p.get("high", 100000), 100000))
        low = int(p.get("low", 0))
        if mode == "boundary":
            return str(rng.choice([low, low, high, 1000, 5000]))
        return str(rng.choice([low, low + 1, low + 2, rng.randint(low, low + 8),
                               rng.randint(low, low + 40)]))  # fmt: skip
    if p["kind"] == "bool":
        return rng.choice(["0", "1", "true", "false"] if mode != "valid" else ["0", "1"])
    low, high = p.get("low", 0.0), p.get("high", math.inf)
    if mode == "boundary":
        cands = []
        if not p.get("low_open", True):
            cands.append(low)
        if not p.get("high_open", True) and math.isfinite(high):
            cands.append(high)
        cands += [low + 1e-12 if math.isfinite(low) else -1e12,
                  (high - 1e-12) if math.isfinite(high) else 1e12]  # fmt: skip
        return f"{rng.choice(cands):.15g}"
    if isinstance(p.get("default"), int | float) and not isinstance(p["default"], bool):
        if rng.random() < 0.3:
            return f"{p['default']:g}"
    lo = low if math.isfinite(low) else -10.0
    hi = high if math.isfinite(high) else 10.0 * max(1.0, abs(lo))
    if lo >= 0 and hi > 0 and rng.random() < 0.6:
        x = log_uniform(rng, max(lo, hi * 1e-4, 1e-12), hi)
    else:
        x = rng.uniform(lo, hi)
    if (p.get("low_open", False) and x <= lo) or (p.get("high_open", False) and x >= hi):
        x = (lo + hi) / 2
    return f"{x:.6g}"


INT_FLAGS = {  # flag: (low, typical high, documented-extreme high)
    "--steps": (1, 2000, 20000), "--anneal-steps": (0, 500, 5000), "--stages": (1, 6, 16),
    "--microbatches": (1, 4, 16), "--k": (1, 6, 11), "--batch": (1, 16, 48),
    "--samples": (2, 48, 400), "--seed": (0, 9, 2**31 - 1), "--fit-seed": (0, 9, 10**6),
    "--runs": (1, 4, 16), "--pairs": (1, 3, 8), "--pair-steps": (1, 200, 2000),
    "--lyapunov-steps": (1, 300, 4000), "--lyapunov-runs": (1, 4, 32),
    "--measure-steps": (1, 300, 2000), "--rate-steps": (1, 300, 4000),
    "--rate-doublings": (0, 1, 3), "--curve-points": (1, 50, 1000), "--t1": (0, 50, 1000),
    "--warmup-epochs": (0, 2, 10), "--sharpness-every": (1, 20, 200), "--workers": (1, 2, 2),
    "--tau": (0, 8, 64),
}  # fmt: skip
REAL_FLAGS = {
    "--lr": (1e-5, 2.0), "--kappa": (1.0, 1e6), "--lam": (1e-4, 1e4), "--l2": (1e-6, 10.0),
    "--divergence": (1.0, 1e12), "--target": (1e-6, 100.0), "--rel-tol": (1e-6, 0.9),
    "--t1-power": (0.0, 2.0), "--perturbation": (1e-6, 1.0), "--elastic": (1e-4, 1.0),
}  # fmt: skip


def axis(rng, mode):
    name = rng.choice(["lr", "tau", "momentum", "lam", "kappa", "delta"])
    if mode == "invalid":
        return rng.choice(
            [
                "lr:1:0.1:3",
                "lr:0:1:3:log",
                "tau:0:5:0",
                "lr:a:b:c",
                "lr:0.1:1",
                "nosuch:0:1:3",
                "lr:0.1:1:3:cubic",
                "tau:-3:2:3",
                "lr:nan:1:3",
            ]
        )
    n = rng.choice([1, 2, 3, 5]) if mode == "valid" else rng.choice([1, 4096, 200])
    if name == "tau":
        return f"tau:0:{rng.choice([1, 4, 16, 200])}:{n}"
    top = {"lr": 2.0, "momentum": 0.999, "lam": 100.0, "kappa": 1e4, "delta": 1.0}[name]
    low = top * rng.choice([1e-3, 0.1])
    return f"{name}:{low:.3g}:{top:.3g}:{n}" + (":log" if rng.random() < 0.4 else "")


def list_of(rng, mode, high=13, n=3):
    if mode == "invalid":
        return rng.choice(["1,,2", "a,b", "-1,2", "1.5,2", "", ",", "100001", "nan"])
    if mode == "boundary":
        return rng.choice(["0", "0,0,0", ",".join(["1"] * 16), "100000", "0,100000"])
    return ",".join(str(rng.randint(0, high)) for _ in range(rng.randint(1, n)))


def flag_value(rng, flag, info, mode, files, tmp: Path, rules, stages=None) -> str | None:
    """A value for ``flag`` (None: a switch)."""
    meta, text = info["metavar"], info["help"]
    if not meta:
        return None
    if info["choices"]:
        if mode == "invalid":
            return rng.choice(["nosuch", "", info["choices"][0].upper()])
        return rng.choice(info["choices"])
    if flag == "--data":
        pool = files["good"] if mode == "valid" else files["odd"]
        return rng.choice(pool)
    if flag == "--problem" and "FUNC" in meta:
        pool = files["good_nets"] if mode == "valid" else files["odd_nets"]
        return rng.choice(pool)
    if flag == "--problem":
        return rng.choice(["linreg", "mlp"]) if mode != "invalid" else "nosuch"
    if flag in ("--out", "--csv", "--out-dir", "--status"):
        if mode == "invalid":
            return rng.choice([files["a_file"][0] + "/under/x.png", str(tmp), ""])
        suffix = {"--out": rng.choice([".png", ".sweep", ".pdf"]), "--csv": ".csv"}.get(flag, "")
        return str(tmp / f"out{rng.randint(0, 10**9)}" / f"sub/file{suffix}")
    if flag == "--repro-dir":
        return str(ROOT / "paper_repro") if mode == "valid" else str(tmp / "nothing-here")
    if flag == "--precond-from":
        if mode == "invalid":
            return rng.choice(["warmup:0:0.1", "warmup:5", "warmup:a:b", files["a_file"][0],
                               "warmup:5:-1", str(tmp / "missing.pt")])  # fmt: skip
        return f"warmup:{rng.choice([1, 5, 20])}:{log_uniform(rng, 1e-4, 1e-1):.3g}"
    if flag in ("--x", "--y"):
        return axis(rng, mode)
    if flag == "--lr-schedule":
        if mode == "invalid":
            return rng.choice(["constant:-1", "cosine:0.1", "step:0.1:2:5", "warmup:0.1:0",
                               "linear:0.1", "constant:nan", "step:0.1:0.5:5,3"])  # fmt: skip
        lr = f"{log_uniform(rng, 1e-4, 1.0):.6g}"
        n = rng.randint(1, 3000)
        return rng.choice(
            [
                f"constant:{lr}",
                f"cosine:{lr}:{n}",
                f"warmup:{lr}:{n}",
                f"step:{lr}:0.5:{rng.randint(1, 50)},{rng.randint(51, 900)}",
            ]
        )
    if flag == "--pipeline":
        if mode == "invalid":
            return rng.choice(["pipemare", "pipemare:0", "nosuch:3", "gpipe:2:0", "pb:x"])
        name = rng.choice(["pipemare", "pipedream", "pb", "gpipe"])
        p = rng.randint(1, 8) if mode == "valid" else rng.choice([1, 64])
        return f"{name}:{p}" + (f":{rng.randint(1, 4)}" if rng.random() < 0.3 else "")
    if flag in ("--rules",):
        if mode == "invalid":
            return rng.choice(["nosuch", "sgd,,momentum", "", "ea"])
        return ",".join(rng.sample(sorted(rules), rng.randint(1, 3)))
    if flag == "--rule":
        return rng.choice(sorted(rules)) if mode != "invalid" else "nosuch"
    if flag == "--claim":
        return rng.choice(["nesterov-equals-sc", "lemma3-slope"]) if mode != "invalid" else "x"
    if flag == "--hidden":
        if mode == "invalid":
            return rng.choice(["0", "4,,4", "-2", "a", ""])
        return ",".join(str(rng.randint(1, 8)) for _ in range(rng.randint(1, 3)))
    if flag in ("--stage-delays", "--taus"):
        n = int(stages) if mode == "valid" and stages and stages.isdigit() else 4
        return (
            list_of(rng, mode, 16, n)
            if mode != "valid"
            else ",".join(
                str(rng.randint(0, 16)) for _ in range(n if stages else rng.randint(1, 4))
            )
        )
    if flag in ("--at",):
        return list_of(rng, mode, 500, 4)
    if flag == "--seeds":
        return list_of(rng, mode, 9, 3)
    if flag in ("--device",):
        return "cpu" if mode == "valid" else rng.choice(["cuda:0", "nosuch", "meta"])
    if flag in ("--scheduler",):
        return "tcp://127.0.0.1:1"
    if flag in ("--curvature", "--sampling"):
        choices = re.findall(r"\b(hessian|ggn|iid|reshuffle)\b", text)
        return rng.choice(choices or ["iid"]) if mode != "invalid" else "nosuch"
    if flag in ("--standardize",):
        return rng.choice(["none", "features", "all"]) if mode != "invalid" else "z"
    if flag in INT_FLAGS:
        low, typ, ext = INT_FLAGS[flag]
        if mode == "invalid":
            return rng.choice([*INVALID, str(low - 1), "10000001"])
        if mode == "boundary":
            return str(rng.choice([low, ext]))
        return str(rng.randint(low, typ))
    if flag in REAL_FLAGS:
        low, high = REAL_FLAGS[flag]
        if mode == "invalid":
            return rng.choice(INVALID)
        if mode == "boundary":
            return f"{rng.choice([low, high, 1e-12, 1e6]):.6g}"
        return f"{(log_uniform(rng, low, high) if low > 0 else rng.uniform(low, high)):.6g}"
    if mode == "invalid":
        return rng.choice(INVALID)
    return f"{log_uniform(rng, 1e-3, 1.0):.4g}"
