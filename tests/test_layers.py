"""The package's layers, read off its import graph (issue 29; README "Architecture").

Imports point one way: interop, view and the CLI use the simulation layer, which uses the plugin
and bus layers, which use the model layer, which uses the base (`errors`, `names`, the core's
loader). A module that imports upwards, or a circle of imports inside one folder, fails here with
the import named. The public paths (`mjfast.ros2`, `mjfast.gym`, ...) are doors into their layer
and belong to none.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "mjfast"

# Lower rank, lower layer: a module may import its own layer and those of lower rank.
RANKS = {"base": 0, "model": 1, "bus": 2, "plugin": 3, "plugins": 4, "sim": 5, "interop": 6,
         "view": 6, "templates": 7, "cli": 8}
# Top-level modules that stand for a module of a layer (SPEC's names), and the package's own
# front door, which gathers the public names of every layer.
PUBLIC_PATHS = {"mjfast", "mjfast.__main__", "mjfast.gym", "mjfast.ray", "mjfast.ros2",
                "mjfast.web", "mjfast.remote", "mjfast.recording", "mjfast.config_schema"}
# Upward imports that stay, each with its reason: (importer, imported).
UPWARD_ALLOWED = {
    # The env's public methods that open an optional extra (SPEC §15, §20, §22) import it when
    # called: the env is their front door, and the extra is never imported by `import mjfast`.
    ("mjfast.sim.env", "mjfast.view.viewer"),
    ("mjfast.sim.env", "mjfast.view.web"),
    ("mjfast.sim.env", "mjfast.interop.record.recorder"),
    # Until unnamed cameras are named in one place below the env (issue 29, item 3).
    ("mjfast.plugins.camera_publisher", "mjfast.sim.camera"),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else "base"


def _type_only_nodes(tree: ast.AST) -> set[int]:
    """The ids of the nodes under `if TYPE_CHECKING:`."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found |= {id(inner) for inner in ast.walk(node)}
    return found


def _imports(modules: set[str]) -> list[tuple[str, str, bool, int]]:
    """(importer, imported module, type-only, line) for every import of an mjfast module; `from
    mjfast.x import y` imports `mjfast.x.y` when that is a module, else `mjfast.x`."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        importer = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        type_only = _type_only_nodes(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [f"{node.module}.{alias.name}" for alias in node.names]
                targets = [name for name in names if name in modules] or [node.module]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            found += [(importer, target, id(node) in type_only, node.lineno)
                      for target in targets
                      if target.startswith("mjfast.") and target != "mjfast._core"]
    return found


def _graph() -> tuple[set[str], list[tuple[str, str, bool, int]]]:
    modules = {_module_name(path) for path in PACKAGE.rglob("*.py")}
    return modules, _imports(modules)


def _upward(imports: list[tuple[str, str, bool, int]]) -> list[str]:
    wrong = []
    for importer, imported, _, line in imports:
        if importer in PUBLIC_PATHS or (importer, imported) in UPWARD_ALLOWED:
            continue
        if imported in PUBLIC_PATHS - {"mjfast"}:
            wrong.append(f"{importer}:{line} imports {imported}, a public path: import the "
                         "module it stands for")
        elif RANKS[_layer(imported)] > RANKS[_layer(importer)]:
            wrong.append(f"{importer}:{line} ({_layer(importer)}) imports {imported} "
                         f"({_layer(imported)}), a higher layer")
    return wrong


def _circles(imports: list[tuple[str, str, bool, int]]) -> list[list[str]]:
    """The circles of runtime imports between modules of one folder (Tarjan's components of more
    than one module)."""
    edges: dict[str, set[str]] = {}
    for importer, imported, type_only, _ in imports:
        if type_only or importer in PUBLIC_PATHS:
            continue
        if importer.rsplit(".", 1)[0] == imported.rsplit(".", 1)[0] or (
                _layer(importer) == _layer(imported) != "base"):
            edges.setdefault(importer, set()).add(imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(edges.get(module, ())):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return circles


def test_every_folder_of_the_package_has_a_layer() -> None:
    folders = {path.name for path in PACKAGE.iterdir()
               if path.is_dir() and any(path.rglob("*.py"))}
    assert folders <= set(RANKS), f"folders with no layer in RANKS: {sorted(folders - set(RANKS))}"


def test_no_module_imports_a_higher_layer() -> None:
    _, imports = _graph()
    wrong = _upward(imports)
    assert not wrong, "imports against the layers (README, Architecture):\n" + "\n".join(wrong)


def test_no_circle_of_runtime_imports_inside_a_layer() -> None:
    _, imports = _graph()
    circles = _circles(imports)
    assert not circles, "circles of imports (break one with a smaller module):\n" + "\n".join(
        " -> ".join(circle) for circle in circles)


def test_every_allowed_upward_import_is_still_made() -> None:
    # An entry that no longer matches anything is removed, so the list only shrinks.
    _, imports = _graph()
    made = {(importer, imported) for importer, imported, _, _ in imports}
    assert made >= UPWARD_ALLOWED, f"stale entries: {sorted(UPWARD_ALLOWED - made)}"


@pytest.mark.parametrize("source, wrong", [
    ("from mjfast.sim.env import MujocoEnv\n", "imports mjfast.sim.env (sim), a higher layer"),
    ("import mjfast.ros2\n", "a public path"),
])
def test_the_layer_check_finds_an_upward_import(source: str, wrong: str) -> None:
    modules = {"mjfast.sim.env", "mjfast.model.names"}
    tree_imports = [("mjfast.model.names", target, False, 1)
                    for node in ast.walk(ast.parse(source))
                    for target in ([node.module] if isinstance(node, ast.ImportFrom) else
                                   [alias.name for alias in getattr(node, "names", [])])
                    if isinstance(node, (ast.Import, ast.ImportFrom)) and target in
                    modules | PUBLIC_PATHS]
    found = _upward(tree_imports)
    assert len(found) == 1 and wrong in found[0], found


def test_the_circle_check_finds_a_circle() -> None:
    imports = [("mjfast.sim.a", "mjfast.sim.b", False, 1),
               ("mjfast.sim.b", "mjfast.sim.a", False, 1),
               ("mjfast.sim.c", "mjfast.sim.a", True, 1),  # type-only: no circle
               ("mjfast.sim.a", "mjfast.sim.c", False, 1)]
    assert _circles(imports) == [["mjfast.sim.a", "mjfast.sim.b"]]
