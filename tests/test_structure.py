"""The shape of the code, checked: topologies are data, the compiler is pure, there is one loop,
roles never branch on a topology, and the neuron layer knows nothing about a chain."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from subnet.neuron.runtime import Runtime
from subnet.topology import builtin_specs

ROOT = Path(__file__).resolve().parents[1]
SUBNET = ROOT / "subnet"
DATA_SUFFIXES = {".toml", ".md"}


def python_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, relative imports resolved to absolute names."""
    tree = ast.parse(path.read_text())
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def imports_any(path: Path, prefixes: tuple[str, ...]) -> list[str]:
    return sorted(
        m for m in imported_modules(path) if any(m == p or m.startswith(p + ".") for p in prefixes)
    )


def test_topologies_folder_holds_only_data_files():
    files = [p for p in (ROOT / "topologies").rglob("*") if p.is_file()]
    assert files, "no topology specs found"
    code = [str(p.relative_to(ROOT)) for p in files if p.suffix not in DATA_SUFFIXES]
    assert not code, f"topologies/ must hold data only, found {code}"


@pytest.mark.parametrize("path", python_files(SUBNET / "topology"), ids=lambda p: p.name)
def test_the_topology_compiler_imports_no_torch_training_neuron_or_chain(path):
    banned = ("torch", "bittensor", "subnet.training", "subnet.neuron", "subnet.chain",
              "subnet.model", "subnet.node")  # fmt: skip
    assert not imports_any(path, banned)


def test_importing_the_compiler_loads_neither_torch_nor_bittensor():
    code = ("import sys, subnet.topology; "
            "print(sorted(m for m in ('torch', 'bittensor') if m in sys.modules))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         check=True)  # fmt: skip
    assert out.stdout.strip() == "[]"


def _tick_loops(path: Path) -> list[int]:
    """Line numbers of ``for ... in <x>.ticks()`` / ``<x>.follow_blocks(...)`` loops."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.For, ast.AsyncFor)) and isinstance(node.iter, ast.Call):
            func = node.iter.func
            if isinstance(func, ast.Attribute) and func.attr in ("ticks", "follow_blocks"):
                lines.append(node.lineno)
    return lines


def test_exactly_one_loop_over_clock_ticks_in_subnet():
    loops = {
        str(p.relative_to(ROOT)): lines for p in python_files(SUBNET) if (lines := _tick_loops(p))
    }
    assert list(loops) == ["subnet/neuron/base.py"] and len(loops["subnet/neuron/base.py"]) == 1, (
        loops
    )


def test_roles_own_no_loop_that_waits():
    """No ``while True`` and no sleep in the neuron layer: waiting is the loop's and a gate's job."""
    for path in python_files(SUBNET / "neuron"):
        tree = ast.parse(path.read_text())
        forever = [n.lineno for n in ast.walk(tree)
                   if isinstance(n, ast.While) and isinstance(n.test, ast.Constant)]  # fmt: skip
        assert not forever, f"{path.name}: while True at lines {forever}"
        sleeps = [n.lineno for n in ast.walk(tree)
                  if isinstance(n, ast.Attribute) and n.attr == "sleep"]  # fmt: skip
        assert not sleeps, f"{path.name}: sleeps at lines {sleeps}"


def _string_constants(path: Path) -> list[str]:
    """String literals of ``path`` that are not docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
    ]


def test_no_topology_name_in_code_outside_the_spec_loader():
    names = {spec.name for spec in builtin_specs()}
    assert names
    found = {
        str(p.relative_to(ROOT)): hits
        for p in python_files(SUBNET)
        if "topology" not in p.relative_to(SUBNET).parts
        and (hits := sorted({n for s in _string_constants(p) for n in names if n in s}))
    }
    assert not found, f"topology names in code (roles must not branch on them): {found}"


@pytest.mark.parametrize("path", python_files(SUBNET / "neuron"), ids=lambda p: p.name)
def test_the_neuron_layer_imports_neither_bittensor_nor_the_chain(path):
    assert not imports_any(path, ("bittensor", "subnet.chain", "subnet.node"))


def test_runtime_has_no_chain():
    fields = {f.name for f in dataclasses.fields(Runtime)}
    assert "chain" not in fields and not hasattr(Runtime, "chain")
    assert {"clock", "membership", "weights", "plan"} <= fields


def test_no_role_reads_chain_fields_or_the_holder_hotkey():
    """Who is a miner, a scorer or the holder is the roster's answer, derived in one place."""
    fields = {"validator_permit", "holder_hotkey", "tempo", "uid", "metagraph", "neurons"}
    for path in python_files(SUBNET / "neuron"):
        tree = ast.parse(path.read_text())
        read = sorted({n.attr for n in ast.walk(tree)
                       if isinstance(n, ast.Attribute) and n.attr in fields})  # fmt: skip
        assert not read, f"{path.name} reads {read}"


@pytest.mark.parametrize("path", sorted((ROOT / "neurons").glob("*.py")), ids=lambda p: p.name)
def test_entry_points_stay_tiny(path):
    assert len(path.read_text().splitlines()) <= 80


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """``subnet`` module -> the ``subnet`` modules it imports (anywhere in the file: a lazy
    import inside a function closes a circle all the same). ``from .pkg import name`` counts
    as importing ``pkg.name`` when that is a module, else ``pkg``."""
    modules = {module_name(p): p for p in python_files(SUBNET)}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = {m for m in imported_modules(path) if m in modules and m != name}
        # ``from pkg import module`` names the package too: only the module is the edge
        graph[name] = {t for t in targets if not any(o.startswith(f"{t}.") for o in targets)}
    return graph


# Circles another branch removes (the room cli and its commands); the merge empties this set.
KNOWN_CIRCLES: set[frozenset[str]] = set()  # none left


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                top = stack.pop()
                component.add(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle_in_subnet():
    found = [sorted(c) for c in circles(import_graph()) if c not in KNOWN_CIRCLES]
    assert not found, f"modules that import each other: {found}"


def test_the_base_loop_imports_no_role_gate_rule_or_action():
    imported = imported_modules(SUBNET / "neuron" / "base.py")
    names = ("gates", "rules", "actions", "miner", "validator", "holder")
    banned = tuple(f"subnet.neuron.{name}" for name in names)
    assert not [m for m in imported if m.startswith(banned)]


def test_the_formatter_runs_over_subnet():
    """No ``# fmt: skip`` anywhere in subnet/: shorten the signature or name the table instead."""
    counts = {
        str(p.relative_to(ROOT)): p.read_text().count("# fmt: skip") for p in python_files(SUBNET)
    }
    marked = {path: n for path, n in counts.items() if n}
    assert not marked, f"# fmt: skip in subnet/ (shorten the signature instead): {marked}"
