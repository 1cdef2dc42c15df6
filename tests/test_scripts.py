"""The scripts in scripts/ cannot rot unseen (CPU).

Every Python script imports without a GPU, CuPy or PyTorch and without doing anything (its
work is in main(), under ``if __name__ == "__main__":``), answers ``--help``, reads no
undefined name, uses only ozaki_cutlass's public names (no ``_private`` module or
attribute, no assignment into the library) and writes its results file through
tools/measure (which heads it with the date, the GPU and the command). Every shell script names only scripts that
exist, runs the CLI as ``python -m ozaki_cutlass`` (not one of its modules), and gives each
command only options it takes (checked against the command's own ``--help``).
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from script_modules import SCRIPTS, load_script

ROOT = Path(__file__).resolve().parents[1]
PY_SCRIPTS = sorted(SCRIPTS.glob("*.py"))
SH_SCRIPTS = sorted(SCRIPTS.glob("*.sh"))
GPU_MODULES = ("cupy", "cupyx", "torch")  # a script imports these inside main(), never at import


def _ids(paths):
    return [p.name for p in paths]


def test_the_scripts_are_found():
    assert PY_SCRIPTS and SH_SCRIPTS


# --------------------------------------------------------------------------- Python scripts

def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _private(name: str) -> bool:
    return name.startswith("_") and not _dunder(name)


def _root(node: ast.expr) -> str | None:
    """The name an attribute chain ``x.y.z`` starts from, or None (a call, a subscript...)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def private_uses(source: str) -> list[str]:
    """Where ``source`` reaches into ozaki_cutlass: a private module or name imported from
    it, a private attribute of a name bound to it, an assignment (or setattr, del) into
    it; and any ``ozaki_cutlass....._private`` written out (in code, comments or docs)."""
    found = [f"text: {m.group(0)}" for m in re.finditer(r"\bozaki_cutlass(?:\.\w+)*\._[A-Za-z0-9]\w*", source)]
    tree = ast.parse(source)
    bound: set[str] = set()  # names that are ozaki_cutlass or came from it
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "ozaki_cutlass":
                    if any(_private(part) for part in alias.name.split(".")):
                        found.append(f"line {node.lineno}: import {alias.name}")
                    bound.add(alias.asname or "ozaki_cutlass")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "ozaki_cutlass":
            if any(_private(part) for part in node.module.split(".")):
                found.append(f"line {node.lineno}: from {node.module} import ...")
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"line {node.lineno}: from {node.module} import {alias.name}")
                bound.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and _root(node) in bound:
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        targets = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            for t in ast.walk(target):
                if isinstance(t, ast.Attribute) and isinstance(t.ctx, (ast.Store, ast.Del)) and _root(t) in bound:
                    found.append(f"line {node.lineno}: assigns {ast.unparse(t)}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("setattr", "delattr") and node.args and _root(node.args[0]) in bound):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("source, caught", [
    ("from ozaki_cutlass.tools.bench import _time_gemm", True),
    ("import ozaki_cutlass.device._cuda", True),
    ("from ozaki_cutlass import reference as R\nR.COARSE_BITS = 7", True),
    ("from ozaki_cutlass import reference as R\nR.coarse_bound = len", True),
    ("from ozaki_cutlass import reference as R\nx = R._NO_CONSTRAINT", True),
    ("from ozaki_cutlass import reference as R\nsetattr(R, 'gemm', len)", True),
    ("import ozaki_cutlass\nozaki_cutlass.paths.fast_lane._LANES.clear()", True),
    ("from ozaki_cutlass.device import cublas\ncublas._library()", True),
    ("import ozaki_cutlass.paths.fast_lane as fl\nfl.fast_lane = None", True),
    ('"""see ozaki_cutlass.bench._call_gemm"""', True),
    ("from ozaki_cutlass.dispatch import DECISIONS\nDECISIONS.clear()\nx = DECISIONS.lanes", False),
    ("import torch\nc = torch._int_mm(a, b)\nclass A:\n    _fields_ = []\n", False),
    ("import ozaki_cutlass\nprint(ozaki_cutlass.__version__)\nlocal._x = 1", False),
])
def test_the_private_use_check_itself(source, caught):
    assert bool(private_uses(source)) is caught, private_uses(source)


@pytest.mark.parametrize("path", PY_SCRIPTS, ids=_ids(PY_SCRIPTS))
def test_script_uses_public_api_only(path):
    assert private_uses(path.read_text()) == []


def undefined_names(source: str) -> list[str]:
    """Names read in ``source`` that nothing in it binds and that are not builtins (scopes
    ignored: a name bound anywhere counts), e.g. a module renamed in the imports only."""
    tree = ast.parse(source)
    bound = set(dir(builtins)) | {"__file__"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
    return [f"line {n.lineno}: {n.id}" for n in ast.walk(tree)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in bound]


@pytest.mark.parametrize("source, caught", [
    ("from ozaki_cutlass.device import cublas\ndef f():\n    return _cublas.handles()", True),
    ("def f(x, *a, k=1, **kw):\n    try:\n        return [y for y in x] + a + k\n    except OSError as e:\n"
     "        raise SystemExit(e) from None\nprint(__doc__, __file__)", False),
])
def test_the_undefined_name_check_itself(source, caught):
    assert bool(undefined_names(source)) is caught, undefined_names(source)


@pytest.mark.parametrize("path", PY_SCRIPTS, ids=_ids(PY_SCRIPTS))
def test_script_reads_no_undefined_name(path):
    assert undefined_names(path.read_text()) == []


def own_results_files(source: str) -> list[str]:
    """Where ``source`` writes JSON itself (``json.dump`` to a file) instead of through
    tools/measure's write_results / write_rows, whose head names the date, the GPU and
    the command."""
    return [f"line {n.lineno}: {ast.unparse(n.func)}" for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "dump"
            and _root(n.func) == "json"]


@pytest.mark.parametrize("source, caught", [
    ("import json\nwith open(p, 'w') as f:\n    json.dump(rows, f)", True),
    ("import json as j\nimport json\nprint(json.dumps(run))\nrun = json.load(f)", False),
    ("from ozaki_cutlass.tools.measure import write_rows\nwrite_rows(p, rows, reps=5)", False),
])
def test_the_own_results_file_check_itself(source, caught):
    assert bool(own_results_files(source)) is caught, own_results_files(source)


@pytest.mark.parametrize("path", PY_SCRIPTS, ids=_ids(PY_SCRIPTS))
def test_script_writes_its_results_through_measure(path):
    assert own_results_files(path.read_text()) == []


def _calls_anything(node: ast.AST) -> bool:
    return any(isinstance(n, (ast.Call, ast.Await)) for n in ast.walk(node))


@pytest.mark.parametrize("path", PY_SCRIPTS, ids=_ids(PY_SCRIPTS))
def test_script_does_its_work_in_main(path):
    """At the top level only imports, definitions, constants (no calls) and the guarded
    call of main(): importing a script does nothing."""
    tree = ast.parse(path.read_text())
    assert any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body), "no main()"
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):  # the docstring
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and not _calls_anything(node):
            continue
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("__name__ == '__main__'",
                                                                   '__name__ == "__main__"'):
            continue
        pytest.fail(f"{path.name} line {node.lineno} runs at import: {ast.unparse(node)[:80]}")


@pytest.fixture
def no_gpu_modules(monkeypatch):
    """CuPy and PyTorch cannot be imported (as on a machine without them), and a script
    imported by another (its folder is on sys.path, as when run) is forgotten after."""
    for name in GPU_MODULES:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.syspath_prepend(str(SCRIPTS))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name in {p.stem for p in PY_SCRIPTS}:
            del sys.modules[name]


@pytest.mark.parametrize("path", PY_SCRIPTS, ids=_ids(PY_SCRIPTS))
def test_script_imports_without_gpu_and_quietly(path, no_gpu_modules, capfd):
    module = load_script(path, f"ozaki_script_{path.stem}")
    assert callable(module.main)
    assert capfd.readouterr() == ("", "")


@pytest.fixture(scope="module")
def blocked_gpu_modules(tmp_path_factory):
    """A folder whose cupy, cupyx and torch refuse to import, for PYTHONPATH."""
    folder = tmp_path_factory.mktemp("no_gpu_modules")
    for name in GPU_MODULES:
        (folder / f"{name}.py").write_text(f"raise ImportError('{name} is blocked by tests/test_scripts.py')\n")
    return folder


def _run(args, blocked=None, timeout=60):
    env = None
    if blocked is not None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(blocked), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


ARGPARSE_SCRIPTS = [p for p in PY_SCRIPTS if "argparse" in p.read_text()]


@pytest.mark.parametrize("path", ARGPARSE_SCRIPTS, ids=_ids(ARGPARSE_SCRIPTS))
def test_script_help_needs_no_gpu(path, blocked_gpu_modules):
    done = _run([str(path.relative_to(ROOT)), "--help"], blocked_gpu_modules)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:"), done.stdout


# --------------------------------------------------------------------------- shell scripts

def _commands(text: str) -> list[str]:
    """The commands in ``text``: its lines with continuations joined, cut at each pipe,
    ``;``, ``&&`` and redirection (what follows is another command, or a file)."""
    lines = text.replace("\\\n", " ").splitlines()
    return [part for line in lines for part in re.split(r"\||;|&&|(?<=\s)\d?>", line)]


@functools.lru_cache(maxsize=None)
def _help(*command: str) -> str:
    done = _run([*command, "--help"])
    assert done.returncode == 0, f"{' '.join(command)} --help: {done.stderr}"
    return done.stdout


def _options(command_line: str) -> list[str]:
    return re.findall(r"(?<![\w$-])(--[A-Za-z][\w-]*)", command_line)


def _takes(usage: str, option: str) -> bool:
    return re.search(rf"(?<![\w-]){option}(?![\w-])", usage) is not None


def shell_problems(text: str) -> tuple[list[str], int]:
    """What in shell script ``text`` names something that does not exist: a script under
    scripts/, a module run with ``-m`` (the CLI is ``-m ozaki_cutlass``, not one of its
    modules), an ``ozaki-cutlass`` subcommand, or an option of one of those or of a
    Python script; and how many commands were checked for their options."""
    problems = []
    named = set(re.findall(r"\bscripts/([\w.-]+\.(?:py|sh))", text))
    named |= set(re.findall(r'\$\(dirname "\$0"\)/([\w.-]+)', text))
    problems += [f"no script scripts/{name}" for name in sorted(named) if not (SCRIPTS / name).is_file()]
    checked = 0
    for line in _commands(text):
        for module in re.findall(r"(?<!\S)-m\s+([A-Za-z_][\w.]*)", line):
            if module.split(".")[0] == "ozaki_cutlass" and module != "ozaki_cutlass":
                problems.append(f"`-m {module}`: the command line is `python -m ozaki_cutlass`")
            elif importlib.util.find_spec(module) is None:
                problems.append(f"`-m {module}`: no such module")
        for sub, rest in re.findall(r"(?:-m\s+ozaki_cutlass|\bozaki-cutlass)\s+([a-z][\w-]*)(.*)", line):
            if not _takes(_help("-m", "ozaki_cutlass"), sub):
                problems.append(f"`ozaki-cutlass {sub}`: no such command")
                continue
            usage = _help("-m", "ozaki_cutlass", sub)
            problems += [f"`ozaki-cutlass {sub}` takes no {opt}" for opt in _options(rest) if not _takes(usage, opt)]
            checked += 1
        for script, rest in re.findall(r"\bscripts/([\w-]+\.py)(.*)", line):
            if (SCRIPTS / script).is_file():
                usage = _help(f"scripts/{script}")
                problems += [f"scripts/{script} takes no {opt}" for opt in _options(rest) if not _takes(usage, opt)]
                checked += 1
    return problems, checked


@pytest.mark.parametrize("text, caught", [
    ("python -m ozaki_cutlass.cli bench", True),
    ("python -m ozaki_cutlass.no_such_module", True),
    ("python -m no_such_module_anywhere", True),
    ("$PY -m ozaki_cutlass bench --shapes 4096 --no-such-option 2>&1 | tee --x", True),
    ("$PY -m ozaki_cutlass no-such-command", True),
    ("$PY scripts/no_such_script.py", True),
    ("$PY scripts/bench_prepare.py --no-such-option", True),
    ('source "$(dirname "$0")/no_such_env.sh"', True),
    ("OZAKI_X=1 $PY -m ozaki_cutlass tune --sizes 1024 \\\n  --out x.json | tail --lines 3", False),
    ("$PY scripts/profile_gemm.py 4096 staged --warm; $PY -m pytest tests -q --timeout 9", False),
    ("$PY -m pytest -q; $PY -m ozaki_cutlass demo --no-such-option", True),
])
def test_the_shell_check_itself(text, caught):
    problems, _ = shell_problems(text)
    assert bool(problems) is caught, problems


@pytest.mark.parametrize("path", SH_SCRIPTS, ids=_ids(SH_SCRIPTS))
def test_shell_script_names_only_what_exists(path):
    problems, checked = shell_problems(path.read_text())
    assert problems == [], f"{path.name}: {problems}"
    if path.name != "device_env.sh":  # sourced by the others: installs, runs no command of ours
        assert checked, f"{path.name}: no command found to check"
