"""The import-layers contract of ``tsdp/`` (DESIGN.md section 1, issue #28), checked over the source's ast.

Layers, higher first; a module may import its own layer or a lower one, never a higher one:

    cli -> api -> verify -> engine, report -> io -> core (mechanisms, mean, flip, forecast, accuracy)
        -> accounting -> base (errors, limits, rng, caveats, signals, jsonfile)

``io`` knows formats only, so it sits under ``engine`` (the bounding kernels and the engines that
read through ``io``). Every import counts, at module level and inside functions (a function-local
import must not hide a layer violation); inside the core and ``accounting``, a function-local import
is allowed only for a heavy third-party library (it keeps ``tsdp --help`` and ``account verify``
fast) or a tsdp module that loads one when it is imported, never for a light library or module. There is no import cycle between tsdp modules
(function-level imports included), and no module of ``tsdp/`` has more than 600 lines.

Three other restructurings of #28 land concurrently, so the violations found when this test was
written are listed in :data:`ALLOWED` below: the test fails on any violation that is not listed (a new
one) and on any listed one that no longer exists (so the list shrinks as fixes land, and is empty
when #28 is done). The string branches on mechanism names, unit levels and sampler names
(``mechanism == ...``, ``level in ...``, ``sampler != ...``) are counted and must not grow past
:data:`MAX_STRING_BRANCHES` (#28's goal is at most 20).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "tsdp"

# Every violation found when this test was written (issue #28), one entry each; remove an entry when
# its fix lands. Kinds: "layer" (importer imported -> imported module of a higher layer), "local"
# (a function-local import of a tsdp module or light library inside the core), "cycle" (the sorted
# modules of one import cycle, joined by " <-> "), "size" (a module over MAX_LINES). Each maps to the
# issue (and item) whose fix removes it.
ALLOWED: dict[str, str] = {
}

MAX_LINES = 600
MAX_STRING_BRANCHES = 0  # 98 when this test was written, 36 after the registry, samplers and unit levels, 0 once verify asks the unit levels and DP-SGD, mean estimation and streams ask the sampler object (#28: at most 20)

# Layer of each top-level part of tsdp (higher imports lower). ``__main__`` is the entry point above
# every layer; ``tsdp`` itself holds the version and a lazy loader that imports nothing when it loads.
LAYERS = {
    "__main__": 9,
    "cli": 8,
    "api": 7,
    "verify": 6,
    "engine": 5, "report": 5,
    "io": 4,
    "mechanisms": 3, "mean": 3, "flip": 3, "forecast": 3, "accuracy": 3,
    "accounting": 2,
    "errors": 1, "limits": 1, "rng": 1, "caveats": 1, "signals": 1, "jsonfile": 1, "schemas": 1,
    "__init__": 0,
}
CORE = {"mechanisms", "mean", "flip", "forecast", "accuracy", "accounting"}
# Third-party libraries whose import costs enough start-up time to be deferred into the function
# that needs it (DESIGN.md section 3: dp-accounting costs seconds).
HEAVY = {"jax", "jaxlib", "pyspark", "scipy", "dp_accounting", "matplotlib", "torch", "opacus", "polars",
         "pyarrow", "numpy", "numba", "jax_privacy", "sklearn", "statsmodels", "pandas", "optax", "flax"}
STRING_BRANCH = re.compile(r"(mechanism|level|sampler)\w* (==|!=|in|not in) ")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def part(module: str) -> str:
    """The layer key of a tsdp module: ``tsdp.io.events`` -> ``io``, ``tsdp`` -> ``__init__``."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "__init__"


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The tsdp module ``name`` (or its longest known prefix) denotes, None outside tsdp."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str, path: Path, known: dict[str, Path]):
    """``(imported, local)`` for every import of ``module``: ``imported`` is a tsdp module name or
    ``"<third-party top-level name>"``; ``local`` tells whether the import sits inside a function."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def visit(node: ast.AST, local: bool):
        for child in ast.iter_child_nodes(node):
            inside = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, local
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - child.level + 1]
                    source = ".".join(base + ([child.module] if child.module else []))
                else:
                    source = child.module or ""
                for alias in child.names:  # ``from tsdp.engine import local``: the submodule
                    yield (f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source), local
            elif isinstance(child, ast.If) and ast.unparse(child.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
                continue  # annotations only: never imported when the program runs
            else:
                yield from visit(child, inside)

    for name, local in visit(tree, False):
        if name == "tsdp" or name.startswith("tsdp."):
            target = _resolve(name, known)
            if target is not None and target != module:
                yield target, local
        else:
            yield f"<{name.split('.')[0]}>", local


def heavy_modules(found: dict[str, list[tuple[str, bool]]]) -> set[str]:
    """The tsdp modules whose import loads a heavy library (module-level imports, transitively)."""
    heavy = {m for m, targets in found.items() if any(t.strip("<>") in HEAVY for t, local in targets if not local)}
    while True:
        more = {m for m, targets in found.items() if any(t in heavy for t, local in targets if not local)} - heavy
        if not more:
            return heavy
        heavy |= more


def graph() -> tuple[dict[str, set[str]], list[str]]:
    """(tsdp import graph over all imports, the layer/local violations)."""
    known = modules()
    found = {module: list(imports(module, path, known)) for module, path in known.items()}
    heavy = heavy_modules(found)
    edges: dict[str, set[str]] = {m: set() for m in known}
    bad = []
    for module, targets in found.items():
        for target, local in targets:
            if target.startswith("<"):
                if local and part(module) in CORE and target.strip("<>") not in HEAVY:
                    bad.append(f"local {module} imports {target.strip('<>')}")
                continue
            edges[module].add(target)
            if LAYERS[part(target)] > LAYERS[part(module)]:
                bad.append(f"layer {module} imports {target}")
            elif local and part(module) in CORE and target not in heavy:
                bad.append(f"local {module} imports {target}")
    return edges, sorted(set(bad))


def cycles(edges: dict[str, set[str]]) -> list[str]:
    """The strongly connected components of more than one module (Tarjan), as sorted names."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []

    def strong(v: str):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append("cycle " + " <-> ".join(sorted(component)))

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(edges):
            if v not in index:
                strong(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(out)


def oversized() -> list[str]:
    return sorted(f"size {module_name(p)}" for p in ROOT.rglob("*.py") if len(p.read_text().splitlines()) > MAX_LINES)


def violations() -> set[str]:
    edges, found = graph()
    return set(found) | set(cycles(edges)) | set(oversized())


def string_branches() -> list[str]:
    return [f"{p.relative_to(ROOT.parent)}:{n}" for p in sorted(ROOT.rglob("*.py"))
            for n, line in enumerate(p.read_text().splitlines(), 1) if STRING_BRANCH.search(line)]


def test_no_new_violation():
    new = sorted(violations() - set(ALLOWED))
    assert not new, "imports against the layers, cycles or oversized modules (DESIGN.md section 1):\n" + "\n".join(new)


def test_allowed_violations_still_exist():
    fixed = sorted(set(ALLOWED) - violations())
    assert not fixed, "fixed: remove these entries from ALLOWED in tests/test_layers.py:\n" + "\n".join(fixed)


def test_string_branches_do_not_grow():
    found = string_branches()
    print(f"string branches on mechanism/level/sampler names: {len(found)}")
    assert len(found) <= MAX_STRING_BRANCHES, "\n".join(found)


def test_every_part_has_a_layer():
    assert {part(m) for m in modules()} <= set(LAYERS)


def test_the_checker_sees_what_it_must(tmp_path):
    """The checker is not vacuous: it finds an upward import inside a function, a relative
    import's target, a cycle, and a light library imported locally in the core."""
    known = {"tsdp.accounting.a": tmp_path / "a.py", "tsdp.cli.b": tmp_path / "b.py", "tsdp.accounting": tmp_path / "i.py"}
    known["tsdp.accounting.a"].write_text("import json\ndef f():\n    import re\n    from tsdp.cli import b\n"
                                          "    import scipy.optimize\n")
    known["tsdp.cli.b"].write_text("from ..accounting import a\n")
    seen = set(imports("tsdp.accounting.a", known["tsdp.accounting.a"], known))
    assert seen == {("<json>", False), ("<re>", True), ("tsdp.cli.b", True), ("<scipy>", True)}
    assert set(imports("tsdp.cli.b", known["tsdp.cli.b"], known)) == {("tsdp.accounting.a", False)}
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["cycle a <-> b <-> c"]
    assert STRING_BRANCH.search('if bounds.level == "user":') and STRING_BRANCH.search("if sampler_name != x:")
    assert not STRING_BRANCH.search("if unit.kind is User:")

