"""The package's import graph, read from the source (CPU, no import of the modules checked).

Every `import` and `from ... import` counts, wherever it stands: at the top, inside a
function, under `if TYPE_CHECKING:`. A circle hidden in a function is still a circle.
Imports through `importlib.import_module(...)` (the package's lazy public names) are not
seen here.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

# The packages whose modules are checked, with where their sources are (generator/ is
# installed as ozaki_cutlass.generator, templates/ as ozaki_cutlass.templates; neither is
# a folder of ozaki_cutlass/).
PACKAGES = ("ozaki_cutlass", "ozaki_cutlass.generator", "ozaki_cutlass.templates")
# The build side: the generator and what it renders from (the templates package holds the
# constants the kernels are compiled with). It runs without the runtime.
BUILD_SIDE = ("ozaki_cutlass.generator", "ozaki_cutlass.templates")


def _build_side(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in BUILD_SIDE)
MAX_LINES = 500


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations, f"{package} is not a package"
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def _modules() -> dict[str, Path]:
    """{dotted module name: source file} of every module of PACKAGES (a package is its
    __init__.py)."""
    roots = {package: _package_dir(package) for package in PACKAGES}
    modules: dict[str, Path] = {}
    for package, root in roots.items():
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if any(not (root.joinpath(*parts[:i]) / "__init__.py").is_file()
                   for i in range(len(parts))):
                continue  # not inside a package (a data folder, a stray script)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((package, *parts))] = path
    return modules


MODULES = _modules()


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _tree(module: str) -> ast.Module:
    return ast.parse(MODULES[module].read_text(), filename=str(MODULES[module]))


def _from_target(module: str, node: ast.ImportFrom) -> str:
    """The module a `from ... import` in `module` imports from, relative levels resolved."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not _is_package(module):
        base = base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str) -> list[tuple[str, str | None, str, int]]:
    """(target module, imported name or None, local name, line) of every import in
    `module`. `from package import name` targets the submodule when `name` is one."""
    found: list[tuple[str, str | None, str, int]] = []
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.Import):
            found.extend((alias.name, None, alias.asname or alias.name.split(".")[0], node.lineno)
                         for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = _from_target(module, node)
            for alias in node.names:
                local = alias.asname or alias.name
                submodule = f"{target}.{alias.name}"
                if submodule in MODULES:
                    found.append((submodule, None, local, node.lineno))
                else:
                    found.append((target, alias.name, local, node.lineno))
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _graph() -> dict[str, set[str]]:
    return {module: {target for target, _, _, _ in _imports(module) if target in MODULES and target != module}
            for module in MODULES}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def test_the_modules_are_found():
    assert "ozaki_cutlass.api" in MODULES
    assert "ozaki_cutlass.generator" in MODULES
    assert "ozaki_cutlass.generator.render" in MODULES


def test_no_import_circles():
    graph = _graph()
    circles = _circles(graph)
    described = [
        "{" + ", ".join(component) + "}; edges: " + ", ".join(
            f"{a} -> {b}" for a in component for b in sorted(graph[a]) if b in component)
        for component in circles
    ]
    assert not circles, "import circles (function-level and TYPE_CHECKING imports count):\n" + \
        "\n".join(described)


def test_no_module_imports_another_modules_private_names():
    offences = [
        f"{module}:{line}: from {target} import {name}"
        for module in MODULES
        for target, name, _, line in _imports(module)
        if name is not None and target in MODULES and target != module and _private(name)
    ]
    assert not offences, "private names imported across modules:\n" + "\n".join(offences)


def test_no_module_reads_another_modules_private_names():
    """Nor through the module: `from . import kernels` then `kernels._open`."""
    offences = []
    for module in MODULES:
        # local name -> the module of ours bound to it (`import a.b` binds `a`: not followed)
        bound = {local: target for target, name, local, _ in _imports(module)
                 if name is None and target in MODULES and target != module
                 and (local != target.split(".")[0] or "." not in target)}
        offences.extend(
            f"{module}:{node.lineno}: {bound[node.value.id]}.{node.attr}"
            for node in ast.walk(_tree(module))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id in bound and _private(node.attr)
        )
    assert not offences, "private names read through another module:\n" + "\n".join(offences)


def test_importing_the_generator_loads_no_runtime_module():
    """In a fresh interpreter, `import ozaki_cutlass.generator` loads the (lazy, empty)
    parent package and the build side's own modules (generator, templates), nothing else
    of ours."""
    code = ("import sys, ozaki_cutlass.generator; "
            "print('\\n'.join(sorted(m for m in sys.modules if m.split('.')[0] == 'ozaki_cutlass')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = result.stdout.split()
    assert "ozaki_cutlass.generator" in loaded
    outside = [m for m in loaded if m != "ozaki_cutlass" and not _build_side(m)]
    assert not outside, f"importing ozaki_cutlass.generator loaded runtime modules: {outside}"


def test_the_generator_modules_import_nothing_of_the_runtime():
    """The same, statically: no generator module names a runtime module, not even inside a
    function."""
    offences = [
        f"{module}: imports {target}"
        for module in MODULES if _build_side(module)
        for target, _, _, _ in _imports(module)
        if target.split(".")[0] == "ozaki_cutlass" and not _build_side(target)
    ]
    assert not offences, "\n".join(offences)


def test_no_module_is_over_500_lines():
    """Issue 14: a module longer than about 500 lines holds more than one idea."""
    long = {module: n for module, path in MODULES.items()
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"
