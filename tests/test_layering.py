"""Imports point one way: photonics <- calibration <- instruments <- controlplane <- lab_scripts;
photonics <- layouts; campaigns (Dask what-if runs) sit beside controlplane, above instruments."""

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {
    "photonics": {"photonics"},
    "calibration": {"photonics", "calibration"},
    "instruments": {"photonics", "calibration", "instruments"},
    "layouts": {"photonics", "layouts"},
    "controlplane": {"photonics", "calibration", "instruments", "controlplane"},
    "campaigns": {"photonics", "calibration", "instruments", "campaigns"},
    "lab_scripts": {"photonics", "calibration", "instruments", "layouts", "controlplane", "campaigns",
                    "lab_scripts"},
}


@functools.cache
def parsed(path: Path) -> ast.Module:
    """The syntax tree of a source file, parsed once per process: the direction, circle and
    tier checks below all read every file (photonics' took 1.5 s a check on a quiet core)."""
    return ast.parse(path.read_text())


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_point_one_way(package):
    ours = set(ALLOWED)
    if not (ROOT / package).is_dir():
        pytest.skip(f"{package}/ does not exist yet")
    for path in (ROOT / package).rglob("*.py"):
        tree = parsed(path)
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in ours:
                    assert top in ALLOWED[package], f"{path.relative_to(ROOT)} imports {name}"


@pytest.mark.slow  # a fresh interpreter importing numpy and scipy (1.5 s on a quiet core)
def test_photonics_imports_fast_and_light():
    import subprocess
    import sys

    code = ("import sys, photonics.circuit, photonics.topology, photonics.budget; "
            "print(any(m.startswith(('gdsfactory', 'matplotlib', 'serial', 'pyvisa')) for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------------------------------
# No import circles inside a package (issue 29): a contributor can tell which module builds
# on which. Every import counts -- module level and inside functions (a lazy import hides a
# circle from Python, not from the reader) -- except under `if TYPE_CHECKING:` (annotations).
# ---------------------------------------------------------------------------------------
def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the nodes inside `if TYPE_CHECKING:` blocks."""
    return {id(n) for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for sub in node.body for n in ast.walk(sub)}


def _imported(node: ast.AST, module: str, is_package: bool, modules: set[str]) -> list[str]:
    """The modules of ``modules`` an import statement in ``module`` loads."""
    if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".")[: None if is_package else -1]
            base = base[: len(base) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names]
    else:
        return []
    out = []
    for name in targets:
        target = name
        while target and target not in modules:  # photonics.fabric.X -> the module that holds X
            target = target.rpartition(".")[0]
        if target and target != module:
            out.append(target)
    return out


def import_graph(package: str) -> dict[str, set[str]]:
    """module -> the modules of the same package it imports."""
    paths = {_module_name(p): p for p in (ROOT / package).rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in paths}
    modules = set(paths)
    for module, path in paths.items():
        tree = parsed(path)
        skip = _type_checking_only(tree)
        for node in ast.walk(tree):
            if id(node) not in skip:
                graph[module].update(_imported(node, module, path.name == "__init__.py", modules))
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for root, imports in graph.items():
        if root in index:
            continue
        work = [(root, iter(sorted(imports)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    circles.append(sorted(group))
    return circles


def test_the_circle_finder_finds_a_circle():
    graph = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.a"}}
    assert import_circles(graph) == [["p.a", "p.b", "p.c"]]
    assert import_circles({"p.a": {"p.b"}, "p.b": set()}) == []


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_no_import_circle_inside_a_package(package):
    circles = import_circles(import_graph(package))
    assert not circles, f"{package}: modules importing each other in a circle: {circles}"


# layouts/ in tiers (issue 29): what draws sits below what judges a drawing, and writing files
# sits on top. An import points to the same tier or a lower one, so a contributor can tell
# the builders from the verifiers by where a file is listed. A new module must be placed here.
LAYOUT_TIERS = (
    # 0: names, numbers and plans, no gdsfactory cells drawn
    {"layouts", "layouts.names", "layouts.errors", "layouts.params", "layouts.pdk", "layouts.geometry",
     "layouts.wiring", "layouts.electrical"},
    # 1: drawing
    {"layouts.cells", "layouts.routing", "layouts.sizing", "layouts.fiber_edge", "layouts.draw",
     "layouts.mesh_cell"},
    # 2: verification of a drawn cell
    {"layouts.electrical_lvs", "layouts.checks", "layouts.lvs", "layouts.edge_check", "layouts.difftest"},
    # 3: pictures and files
    {"layouts.render", "layouts.export"},
)


def tier_violations(graph: dict[str, set[str]], tiers: tuple[set[str], ...]) -> list[str]:
    """Imports that point to a higher tier, and modules no tier lists."""
    tier = {m: k for k, group in enumerate(tiers) for m in group}
    unplaced = [f"{m} is in no tier" for m in sorted(graph) if m not in tier]
    upward = [f"{m} (tier {tier[m]}) imports {t} (tier {tier[t]})" for m in sorted(graph) if m in tier
              for t in sorted(graph[m]) if t in tier and tier[t] > tier[m]]
    return unplaced + upward


def test_the_tier_check_finds_an_upward_import():
    tiers = ({"p.a"}, {"p.b"})
    assert tier_violations({"p.a": set(), "p.b": {"p.a"}}, tiers) == []
    assert tier_violations({"p.a": {"p.b"}, "p.b": set()}, tiers) == ["p.a (tier 0) imports p.b (tier 1)"]
    assert tier_violations({"p.a": set(), "p.b": set(), "p.c": set()}, tiers) == ["p.c is in no tier"]


def test_layouts_draw_below_what_verifies_it():
    assert tier_violations(import_graph("layouts"), LAYOUT_TIERS) == []
