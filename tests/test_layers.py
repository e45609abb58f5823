"""The package's layers: imports point down the flow, never up, and never in a cycle.

Read from the source with `ast`, so imports inside functions count as much as those at the top
of a module.  The order is the flow of docs/development.md (Layout): a rule knows nothing of
spectra, dynamics never import analysis, the trainer runs rules and never the analysis, and only
agreement/, the claims, the public API and the faces (plotting, CLI) bring the two sides
together.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "stability"

LAYERS: tuple[tuple[str, ...], ...] = (
    # the vocabulary everyone uses: argument checks, size limits, files, result values, sparse
    # polynomials, the argument principle, the quadratic model, pipeline schedules → delays,
    # shipped data
    (
        "stability.checks",
        "stability.extras",
        "stability.lazy",
        "stability.limits",
        "stability.options",
        "stability.files",
        "stability.result",
        "stability.version",
        "stability.polynomial",
        "stability.winding",
        "stability.quadratic",
        "stability.pipeline",
        "stability.data",
    ),
    ("stability.rules",),
    ("stability.dynamics",),
    ("stability.spectrum",),
    ("stability.analysis",),
    ("stability.coupled",),
    ("stability.trainer",),
    ("stability.agreement",),
    ("stability.claims",),
    ("stability.plotting",),
    ("stability.api",),
    ("stability.nets", "stability.noise"),
    ("stability.sweep",),
    ("stability.cli",),
)
"""Lowest first.  A module may import modules of its own layer or of lower ones."""

TRAINER_MAY_IMPORT = ("stability.checks", "stability.files", "stability.pipeline",
                      "stability.data", "stability.rules", "stability.trainer")  # fmt: skip
"""The trainer runs the rule objects; it never imports the analysis (docs/development.md)."""


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Package modules imported anywhere in the module (top level, functions, classes)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        found |= {t for t in targets if t in MODULES and t != name}
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _layer(name: str) -> int | None:
    for i, prefixes in enumerate(LAYERS):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return i
    return None


def test_every_module_has_a_layer():
    """A new room must be placed in LAYERS (the package root is the lazy public face)."""
    missing = [m for m in MODULES if m != "stability" and _layer(m) is None]
    assert not missing, f"modules outside every layer: {missing}"


@pytest.mark.parametrize("name", sorted(m for m in MODULES if m != "stability"))
def test_imports_point_down(name):
    up = sorted(t for t in GRAPH[name] if t != "stability" and _layer(t) > _layer(name))
    assert not up, f"{name} (layer {_layer(name)}) imports higher layers: {up}"
    assert "stability" not in GRAPH[name], f"{name} imports the package root (the public face)"


def test_trainer_never_imports_the_analysis():
    for name in MODULES:
        if name.startswith("stability.trainer"):
            bad = [t for t in GRAPH[name] if not t.startswith(TRAINER_MAY_IMPORT)]
            assert not bad, f"{name} imports {bad}"


def test_no_import_cycles():
    """Tarjan's strongly connected components on the full graph (function imports included)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def test_no_two_modules_share_a_name():
    """Except a command's modules named after what they serve (docs/development.md): its CLI module
    (`stability.cli.commands`) and its public function's module (`stability.api`)."""
    owners = defaultdict(list)
    for name in MODULES:
        if not name.startswith(("stability.cli.commands.", "stability.api.")):
            owners[name.rsplit(".", 1)[-1]].append(name)
    shared = {k: v for k, v in owners.items() if len(v) > 1}
    assert not shared, f"modules sharing a name: {shared}"


def _class_owners(modules: dict[str, Path]) -> dict[str, list[str]]:
    """Class name → the modules defining a class of that name (anywhere in the module)."""
    owners = defaultdict(list)
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                owners[node.name].append(name)
    return owners


def test_no_two_classes_share_a_name(tmp_path):
    """One name, one class (issue 27 item 5), private ones included; a planted second
    ``Setup`` is found."""
    shared = {k: v for k, v in _class_owners(MODULES).items() if len(v) > 1}
    assert not shared, f"classes sharing a name: {shared}"
    planted = tmp_path / "twice.py"
    planted.write_text("class Setup:\n    pass\n\n\ndef f():\n    class Setup:\n        pass\n")
    assert _class_owners({"planted": planted})["Setup"] == ["planted", "planted"]


def test_the_layer_test_sees_a_planted_violation(tmp_path):
    """The checks above can fail: an upward import inside a function is found."""
    planted = tmp_path / "rules_bad.py"
    planted.write_text("def f():\n    from stability.analysis.boundary import max_lr\n")
    MODULES["stability.rules.rules_bad"] = planted
    try:
        found = _imports("stability.rules.rules_bad", planted)
    finally:
        del MODULES["stability.rules.rules_bad"]
    assert "stability.analysis.boundary" in found
    assert _layer("stability.analysis.boundary") > _layer("stability.rules.rules_bad")
