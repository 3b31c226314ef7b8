"""The import layering of cardiosim's packages, read from the source with ``ast`` (nothing is imported).

Every import of a cardiosim module counts, at module level and inside functions alike, resolved to the module it
names (``from cardiosim.domain import grid`` is cardiosim.domain.grid; ``from cardiosim.domain.grid import Grid`` is
cardiosim.domain.grid). A module's package is the first name under cardiosim (cardiosim/api.py is the package
``api``); cardiosim/__init__.py imports nothing of cardiosim, so ``from cardiosim import __version__`` is allowed
everywhere.
"""

from __future__ import annotations

import ast
import tokenize
from collections import defaultdict
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[1] / "cardiosim"

PACKAGES = ("runtime", "config", "domain", "tissue", "solvers", "cells", "reaction", "analysis", "output",
            "single_cell", "simulation", "cli", "bench", "api", "purkinje")

# The rules. "only": the packages it may import besides itself; "not": the packages it may not import.
RULES = {
    "runtime":  ("only", set()),
    "cells":    ("only", {"runtime"}),
    "domain":   ("only", {"runtime"}),
    "solvers":  ("not", {"tissue", "reaction", "simulation", "output", "cli"}),
    "reaction": ("not", {"output", "config", "tissue", "solvers", "simulation", "cli"}),
    "analysis": ("not", {"output", "simulation", "cli", "config"}),
    "output":   ("not", {"simulation", "cli"}),
    "purkinje": ("only", {"runtime", "cells", "reaction", "domain"}),
}
PURKINJE_IMPORTERS = {"simulation", "config"}   # the only packages besides itself that may import purkinje/
CLI_IMPORTERS = {"cardiosim.__main__"}      # the only modules outside cardiosim/cli/ that may import it
# Besides: the package graph and the module graph have no cycles; an import inside a function says why it is lazy
# (it keeps MPI/PETSc out of a module that imports without them, such as those of inspect and plot, or waits for
# PETSc's start with its options, or keeps an optional package optional): a `#` comment on its line, on the line
# before it, or on the line before the run of import lines it is in.


def _module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


FILES = {_module_name(p): p for p in sorted(SOURCE.rglob("*.py"))}
MODULES = set(FILES)


class Import:
    def __init__(self, source: str, target: str, line: int, end: int, lazy: bool):
        self.source, self.target, self.line, self.end, self.lazy = source, target, line, end, lazy

    def __repr__(self):
        where = FILES[self.source].relative_to(SOURCE.parent)
        return f"{where}:{self.line} imports {self.target}{' (in a function)' if self.lazy else ''}"


def _resolve(dotted: str) -> str | None:
    """The cardiosim module a dotted name is, or the longest one it starts with (a name in a module)."""
    parts = dotted.split(".")
    while parts:
        name = ".".join(parts)
        if name in MODULES:
            return name
        parts.pop()
    return None


def _imports(module: str) -> list[Import]:
    path = FILES[module]
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found, seen = [], set()

    def visit(node, lazy):
        for child in ast.iter_child_nodes(node):
            inner = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[:len(base) - (child.level - 1)]
                    stem = ".".join(base + ([child.module] if child.module else []))
                else:
                    stem = child.module or ""
                names = [f"{stem}.{a.name}" for a in child.names]
            else:
                visit(child, inner)
                continue
            for name in names:
                if name == "cardiosim" or name.startswith("cardiosim."):
                    target = _resolve(name)
                    if target is not None and target != module and (target, child.lineno) not in seen:
                        seen.add((target, child.lineno))
                        found.append(Import(module, target, child.lineno, child.end_lineno, lazy))

    visit(tree, False)
    return found


IMPORTS = [imp for m in sorted(MODULES) for imp in _imports(m)]


def package_of(module: str) -> str | None:
    """cardiosim.domain.grid -> domain; cardiosim.api -> api; cardiosim and cardiosim.__main__ -> None."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in PACKAGES else None


def test_every_module_is_in_a_package():
    strays = sorted(m for m in MODULES if package_of(m) is None and m not in ("cardiosim", "cardiosim.__main__"))
    assert not strays, f"modules in no package of {PACKAGES}: {strays}"
    assert not [i for i in IMPORTS if i.source == "cardiosim"], "cardiosim/__init__.py imports nothing of cardiosim"


@pytest.mark.parametrize("package", sorted(RULES))
def test_layer(package):
    kind, names = RULES[package]
    bad = []
    for imp in IMPORTS:
        if package_of(imp.source) != package:
            continue
        target = package_of(imp.target)
        if target is None or target == package:
            continue
        if (kind == "only") != (target in names):
            bad.append(imp)
    assert not bad, f"{package}/ imports {'outside' if kind == 'only' else ''} {sorted(names)}:\n" + "\n".join(
        map(repr, bad))


def test_nothing_imports_cli():
    bad = [i for i in IMPORTS if package_of(i.target) == "cli" and package_of(i.source) != "cli"
           and i.source not in CLI_IMPORTERS]
    assert not bad, "only cardiosim/__main__.py imports cardiosim.cli:\n" + "\n".join(map(repr, bad))


def test_only_simulation_and_config_import_purkinje():
    bad = [i for i in IMPORTS if package_of(i.target) == "purkinje"
           and package_of(i.source) not in PURKINJE_IMPORTERS | {"purkinje"}]
    assert not bad, "only simulation/ and config/ import cardiosim.purkinje:\n" + "\n".join(map(repr, bad))


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def strong(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return out


def _report(cycles, key):
    lines = []
    for comp in cycles:
        lines.append(" <-> ".join(comp) + ":")
        lines += [f"    {i!r}" for i in IMPORTS if key(i.source) in comp and key(i.target) in comp
                  and key(i.source) != key(i.target)]
    return "\n".join(lines)


def test_no_cycles_between_packages():
    edges = defaultdict(set)
    for imp in IMPORTS:
        a, b = package_of(imp.source), package_of(imp.target)
        if a and b and a != b:
            edges[a].add(b)
    cycles = _cycles(edges)
    assert not cycles, "cycles between packages:\n" + _report(cycles, package_of)


def test_no_cycles_between_modules():
    edges = defaultdict(set)
    for imp in IMPORTS:
        edges[imp.source].add(imp.target)
    cycles = _cycles(edges)
    assert not cycles, "cycles between modules:\n" + _report(cycles, lambda m: m)


def _comments(path: Path) -> tuple[set[int], set[int]]:
    """The lines with a comment, and those that are only a comment."""
    anywhere, alone = set(), set()
    with path.open() as f:
        for tok in tokenize.generate_tokens(f.readline):
            if tok.type == tokenize.COMMENT:
                anywhere.add(tok.start[0])
                if not tok.line[:tok.start[1]].strip():
                    alone.add(tok.start[0])
    return anywhere, alone


def _import_lines(path: Path) -> set[int]:
    """The lines of import statements (all of each statement's lines)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update(range(node.lineno, node.end_lineno + 1))
    return out


def test_lazy_imports_say_why():
    bad = []
    for imp in IMPORTS:
        if imp.lazy:
            anywhere, alone = _comments(FILES[imp.source])
            imports = _import_lines(FILES[imp.source])
            first = imp.line
            while first - 1 in imports:          # the run of import lines this one is in
                first -= 1
            if not anywhere & set(range(imp.line, imp.end + 1)) and not {imp.line - 1, first - 1} & alone:
                bad.append(imp)
    assert not bad, ("an import of cardiosim inside a function says why it is lazy (a # comment on its line, the "
                     "line before, or the line before its run of imports):\n" + "\n".join(map(repr, bad)))
