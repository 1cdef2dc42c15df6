"""Bad flags and broken environments end `ozaki-cutlass` with one line, never a traceback.

Each case runs the command as a user does (``cli.main``, or a fresh interpreter where
the environment must be faked before anything is imported) and checks the exit status
(2: the input is wrong, 1: the environment is), that exactly one error line names the
problem and the fix, and that no traceback reaches stderr.
"""

from __future__ import annotations

import importlib.abc
import logging
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import pytest

from ozaki_cutlass.device import arch as arch_module
from ozaki_cutlass.tools import cli


def _run(argv, capsys, caplog) -> tuple[int, list[str], str]:
    """`ozaki-cutlass argv` in this process: (exit status, error lines, stdout). The error
    lines are what the command logged at ERROR and what argparse said ("...: error: ...")."""
    caplog.clear()
    try:
        code = cli.main(argv)
    except SystemExit as exit_:  # argparse refusing an argument
        code = exit_.code
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    return code, errors + [line for line in err.splitlines() if ": error: " in line], out


def _run_fresh(argv, env_updates, tmp_path) -> subprocess.CompletedProcess:
    """`python -m ozaki_cutlass argv` in a fresh interpreter, with the environment changed."""
    env = dict(os.environ) | env_updates
    if "PYTHONPATH" in env_updates and os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] += os.pathsep + os.environ["PYTHONPATH"]
    return subprocess.run([sys.executable, "-m", "ozaki_cutlass", *argv], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=300)


# --------------------------------------------------------------------------- cuda-bindings

_BROKEN_BINDINGS = {
    # the package fails to import with something other than ImportError
    "import": 'raise RuntimeError("cuda-bindings 99 needs a newer driver")\n',
    # it imports, but asking it for the driver module raises
    "attribute": 'def __getattr__(name):\n    raise RuntimeError("broken cuda-bindings")\n',
}


def _fake_bindings(root, how: str):
    """A `cuda.bindings` package under ``root`` that raises RuntimeError (see above);
    "driver": the driver module imports, and any attribute of it raises."""
    package = root / "cuda" / "bindings"
    package.mkdir(parents=True)
    (root / "cuda" / "__init__.py").write_text("")
    if how == "driver":
        (package / "__init__.py").write_text("")
        (package / "driver.py").write_text(_BROKEN_BINDINGS["attribute"])
    else:
        (package / "__init__.py").write_text(_BROKEN_BINDINGS[how])
    return root


class _RaisingFinder(importlib.abc.MetaPathFinder):
    """Importing cuda.bindings raises RuntimeError (as a broken install can)."""

    def find_spec(self, name, path=None, target=None):
        if name == "cuda.bindings":
            raise RuntimeError("cuda-bindings 99 needs a newer driver")
        return None


def _raising_module(name):
    module = types.ModuleType(name)

    def __getattr__(attr):
        raise RuntimeError(f"broken {name}: {attr}")

    module.__getattr__ = __getattr__
    return module


@pytest.mark.parametrize("how", ["import", "attribute", "driver"])
def test_visible_arch_never_raises_with_broken_cuda_bindings(how, monkeypatch, caplog):
    """The docstring's promise: no driver, no GPU or broken bindings all answer None."""
    monkeypatch.setattr(arch_module, "_CAPABILITIES", {})
    for name in ("cuda.bindings", "cuda.bindings.driver"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    if how == "import":
        monkeypatch.setattr(sys, "meta_path", [_RaisingFinder(), *sys.meta_path])
    elif how == "attribute":
        monkeypatch.setitem(sys.modules, "cuda.bindings", _raising_module("cuda.bindings"))
    else:
        bindings = types.ModuleType("cuda.bindings")
        bindings.driver = _raising_module("cuda.bindings.driver")
        monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
    with caplog.at_level(logging.DEBUG, logger=arch_module.log.name):
        assert arch_module.compute_capability() is None
        assert arch_module.visible_arch() is None
    assert "RuntimeError" in caplog.text  # said at debug level, for -vv


@pytest.mark.parametrize("how", ["import", "attribute", "driver"])
def test_build_without_arch_and_broken_cuda_bindings_says_pass_arch(how, tmp_path):
    fake = _fake_bindings(tmp_path / "fake", how)
    result = _run_fresh(["build", "--out", str(tmp_path / "out")], {"PYTHONPATH": str(fake)}, tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        "ERROR: no GPU found: pass --arch sm_90a or --arch sm_80 to choose what to build"]


@pytest.mark.parametrize("how", ["import", "attribute", "driver"])
def test_demo_with_broken_cuda_bindings_runs_the_cpu_reference(how, tmp_path):
    fake = _fake_bindings(tmp_path / "fake", how)
    result = _run_fresh(["demo", "--n", "16"], {"PYTHONPATH": str(fake)}, tmp_path)
    assert result.returncode == 0 and result.stderr == ""
    assert "GPU: none found" in result.stdout and "| float64 `@` |" in result.stdout


# --------------------------------------------------------------------------- tuning table

def test_a_100000_deep_tuning_table_is_one_line(tmp_path, monkeypatch, capsys, caplog):
    table = tmp_path / "deep.json"
    table.write_text("[" * 100000 + "]" * 100000)
    monkeypatch.setenv("OZAKI_TUNING_TABLE", str(table))
    code, (error,), _ = _run(["build", "--arch", "sm_80", "--out", str(tmp_path / "out")], capsys, caplog)
    assert code == 2
    assert error.startswith(f"OZAKI_TUNING_TABLE={table}: it nests more than 32 levels deep")
    assert "unset OZAKI_TUNING_TABLE" in error and f"ozaki-cutlass tune --out {table}" in error


# --------------------------------------------------------------------------- accuracy table

_ROWS = [  # an infinite and a NaN error, next to finite, infinite and NaN float64 errors
    {"phi": 0.5, "reference": "exact", "native": 1e-16, ("fast", 8): 1e-17, ("fast", 9): float("inf")},
    {"phi": 1.0, "reference": "exact", "native": float("inf"), ("fast", 8): float("nan"), ("fast", 9): float("inf")},
    {"phi": 2.0, "reference": "exact", "native": float("nan"), ("fast", 8): 1e-17, ("fast", 9): float("nan")},
]


def test_the_error_table_never_marks_an_infinite_or_nan_error():
    """'*' means "at or below float64 @": an inf or NaN error never is, shown as inf/nan."""
    from ozaki_cutlass.tools.demo import format_error_table

    lines = format_error_table(_ROWS, (8, 9), modes=("fast",)).splitlines()
    assert lines[2] == "| 8 | fast | 1.00e-17 * | nan | 1.00e-17 |"
    assert lines[3] == "| 9 | fast | inf | inf | nan |"
    assert lines[4] == "| float64 `@` | | 1.00e-16 | inf | nan |"


def test_accuracy_prints_an_infinite_error_unmarked(monkeypatch, capsys, caplog):
    from ozaki_cutlass.tools import demo

    rows = [{k: v for k, v in r.items() if k != ("fast", 9)} | {("accurate", 8): r[("fast", 9)]} for r in _ROWS]
    monkeypatch.setattr(demo, "error_table", lambda *args, **kwargs: rows)
    code, errors, out = _run(["accuracy", "--min-moduli", "8", "--max-moduli", "8"], capsys, caplog)
    assert code == 0 and errors == []
    assert "| 8 | fast | 1.00e-17 * | nan | 1.00e-17 |" in out
    assert "| 8 | accurate | inf | inf | nan |" in out


# --------------------------------------------------------------------------- arguments

@pytest.mark.parametrize("argv, message", [
    (["demo", "--cpu", "--seed", "-1"], "argument --seed: must be a non-negative integer, got -1"),
    (["accuracy", "--seed", "-1"], "argument --seed: must be a non-negative integer, got -1"),
    (["bench", "--seed", "-1"], "argument --seed: must be a non-negative integer, got -1"),
    (["bench-int8", "--seed", "-1"], "argument --seed: must be a non-negative integer, got -1"),
    (["accuracy", "--phi", "nan"], "argument --phi: must be a finite number from 0 to 50, got nan"),
    (["accuracy", "--phi", "0.5", "inf"], "argument --phi: must be a finite number from 0 to 50, got inf"),
    (["accuracy", "--phi=-inf"], "argument --phi: must be a finite number from 0 to 50, got -inf"),
    (["accuracy", "--phi", "x"], "argument --phi: must be a finite number from 0 to 50, got x"),
    (["accuracy", "--phi", "800"], "argument --phi: 800 is above 50: entries are (U - 0.5) exp(phi N(0,1))"),
    (["accuracy", "--phi", "-1"], "argument --phi: must be from 0 to 50, got -1"),
    (["bench", "--phi", "800"], "argument --phi: 800 is above 50"),
    (["accuracy", "--n", "100000"], "argument --n: 100000 is above 4096, the largest n the CPU reference"),
])
def test_bad_arguments_are_one_usage_line(argv, message, capsys, caplog):
    code, (error,), _ = _run(argv, capsys, caplog)
    assert code == 2 and error.startswith(f"ozaki-cutlass {argv[0]}: error: ") and message in error
    assert "pass" in error or "must be" in error  # the fix, or the range to choose from


def test_phi_and_n_bounds_are_inclusive_and_explained_in_the_help(capsys):
    from ozaki_cutlass.tools.arguments import CPU_MAX_N, PHI_MAX

    args = cli._parser().parse_args(["accuracy", "--n", str(CPU_MAX_N), "--phi", "0", str(PHI_MAX)])
    assert args.n == CPU_MAX_N and args.phi == [0.0, PHI_MAX]
    with pytest.raises(SystemExit):
        cli.main(["accuracy", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"0 to {PHI_MAX:g}: entries are (U - 0.5) exp(phi N(0,1))" in help_text
    assert f"1 to {CPU_MAX_N}" in help_text


def test_demo_on_the_cpu_shares_the_accuracy_commands_size_cap(capsys, caplog):
    from ozaki_cutlass.tools.arguments import CPU_MAX_N

    code, (error,), out = _run(["demo", "--cpu", "--n", str(CPU_MAX_N + 1)], capsys, caplog)
    assert code == 2 and out == ""
    assert error == (f"demo on the CPU: --n {CPU_MAX_N + 1} is above {CPU_MAX_N}, the largest n the CPU "
                     "reference takes (its memory grows as n^2 and its time as n^3); pass --n "
                     f"{CPU_MAX_N} or less (on a GPU the demo takes larger n)")


def test_phi_at_the_cap_gives_finite_errors(capsys, caplog):
    code, errors, out = _run(["accuracy", "--n", "32", "--phi", "50", "--min-moduli", "20"], capsys, caplog)
    assert code == 0 and errors == []
    cells = [line.split("|")[3].split()[0] for line in out.splitlines() if line.startswith("| 20 ")]
    assert len(cells) == 2 and all(float(c) < 1e-10 for c in cells)


# --------------------------------------------------------------------------- no GPU

_NO_GPU_FIX = ("; run it on such a machine (`ozaki-cutlass accuracy` and `ozaki-cutlass demo --cpu` run "
               "on the CPU)")


@pytest.mark.parametrize("argv", [["bench-int8", "--size", "64"], ["bench", "--shapes", "64"],
                                  ["tune", "--out", "TABLE"]])
def test_gpu_commands_without_a_gpu_are_one_line(argv, tmp_path, monkeypatch, capsys, caplog):
    """Exit status 1 and the command's own line (bench and tune once said the library's
    message under the usage status 2: their check of the arrays caught the NoGpuError)."""
    from ozaki_cutlass.device import driver

    def no_driver():
        raise RuntimeError("libcuda.so.1: cannot open shared object file.\n(searched the system)")

    monkeypatch.setattr(driver, "bindings", no_driver)
    monkeypatch.setattr(driver, "_CONTEXTS", {})
    argv = [str(tmp_path / "table.json") if x == "TABLE" else x for x in argv]
    code, (error,), out = _run(argv, capsys, caplog)
    assert code == 1 and out == ""
    assert error == (f"ozaki-cutlass {argv[0]} needs an NVIDIA GPU (compute capability 8.0 or newer) and "
                     "its driver, and none is usable here: libcuda.so.1: cannot open shared object file. "
                     "(searched the system)" + _NO_GPU_FIX)


def test_bench_int8_without_a_gpu_in_a_fresh_interpreter(tmp_path):
    fake = _fake_bindings(tmp_path / "fake", "import")
    result = _run_fresh(["bench-int8", "--size", "64"], {"PYTHONPATH": str(fake)}, tmp_path)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "ERROR: ozaki-cutlass bench-int8 needs an NVIDIA GPU (compute capability 8.0 or newer) and its "
        "driver, and none is usable here: cuda-bindings 99 needs a newer driver" + _NO_GPU_FIX]


def test_bench_int8_pattern_matching_nothing_is_said_before_looking_for_a_gpu(capsys, caplog):
    code, (error,), _ = _run(["bench-int8", "--arch", "sm_80", "--variants", "*_coop_*"], capsys, caplog)
    assert code == 2
    assert error == "no sm_80 variant matches '*_coop_*' (see `ozaki-cutlass list --full --arch sm_80`)"


# --------------------------------------------------------------------------- artifact directory

@pytest.fixture
def no_nvcc(tmp_path, monkeypatch):
    """A build that gets past the directory check stops at the toolchain (exit 1, naming
    OZAKI_NVCC): nothing is compiled, and the two failures cannot be confused."""
    for name in ("OZAKI_CACHE_DIR", "CUDA_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OZAKI_NVCC", str(tmp_path / "no-nvcc"))


def _unusable_dirs(tmp_path):
    """{case: (path, what the error says is wrong)}, made under tmp_path."""
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    return {
        "under /proc": ("/proc/ozaki-cutlass-test", "cannot create the directory /proc/ozaki-cutlass-test ("),
        "a regular file": (str(afile), f"{afile} is not a directory (a file is there)"),
        "under a regular file": (str(afile / "sub"), f"{afile} is not a directory (a file is there)"),
    }


@pytest.mark.parametrize("case", ["under /proc", "a regular file", "under a regular file"])
@pytest.mark.parametrize("setting", ["--out", "OZAKI_CACHE_DIR"])
def test_build_into_an_unusable_directory_is_one_line(case, setting, tmp_path, monkeypatch, no_nvcc,
                                                      capsys, caplog):
    if case == "under /proc" and not os.path.isdir("/proc"):
        pytest.skip("no /proc here")
    path, wrong = _unusable_dirs(tmp_path)[case]
    argv = ["build", "--arch", "sm_80"]
    if setting == "--out":
        argv += ["--out", path]
    else:
        monkeypatch.setenv("OZAKI_CACHE_DIR", path)
    code, (error,), out = _run(argv, capsys, caplog)
    assert code == 1 and out == ""
    if setting == "--out":
        assert error.startswith(f"--out {path} cannot hold the artifacts: {wrong}")
        assert error.endswith("; pass --out a writable directory")
    else:
        assert error.startswith(f"OZAKI_CACHE_DIR={path} cannot hold the artifacts: {wrong}")
        assert error.endswith("; set OZAKI_CACHE_DIR to a writable directory (or unset it), or pass --out DIR")


def _can_create_in(path) -> bool:
    try:
        with tempfile.TemporaryFile(dir=path):
            return True
    except OSError:
        return False


def _unwritable_dir(tmp_path):
    """A directory this process cannot create files in, or None (root writes where chmod
    forbids it; sysfs refuses new files even to root)."""
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    if not _can_create_in(locked):
        return locked
    if os.path.isdir("/sys") and not _can_create_in("/sys"):
        return "/sys"
    return None


def test_build_into_an_unwritable_directory_is_one_line(tmp_path, no_nvcc, capsys, caplog):
    path = _unwritable_dir(tmp_path)
    if path is None:
        pytest.skip("no directory here that this process cannot write")
    code, (error,), _ = _run(["build", "--arch", "sm_80", "--out", str(path)], capsys, caplog)
    assert code == 1
    assert error.startswith(f"--out {path} cannot hold the artifacts: cannot create a file in {path} (")
    assert error.endswith("; pass --out a writable directory")


def test_build_into_an_unusable_default_directory_says_how_to_choose_another(tmp_path, monkeypatch, no_nvcc,
                                                                             capsys, caplog):
    import ozaki_cutlass.generator

    path, wrong = _unusable_dirs(tmp_path)["a regular file"]
    monkeypatch.setattr(ozaki_cutlass.generator, "default_out_dir", lambda: Path(path))
    code, (error,), _ = _run(["build", "--arch", "sm_80"], capsys, caplog)
    assert code == 1
    assert error == (f"the default artifact directory {path} cannot hold the artifacts: {wrong}; "
                     "set OZAKI_CACHE_DIR to a writable directory, or pass --out DIR")


def test_build_into_a_usable_directory_gets_past_the_check_and_leaves_nothing(tmp_path, no_nvcc, capsys, caplog):
    out = tmp_path / "new" / "out"
    code, (error,), _ = _run(["build", "--arch", "sm_80", "--out", str(out)], capsys, caplog)
    assert code == 1 and "OZAKI_NVCC" in error  # the toolchain check, after the directory's
    assert out.is_dir() and list(out.iterdir()) == []


def test_an_interrupted_build_is_one_line_with_status_130(monkeypatch, capsys, caplog):
    """Ctrl-C during a build: the command says what the build kept, with no traceback
    (generator/build.py stops its nvcc processes: tests/generator/test_build_interrupt.py)."""
    from ozaki_cutlass.generator import BuildInterrupted

    def interrupted(args):
        raise BuildInterrupted(built=["a"], stopped=["b", "c"])

    monkeypatch.setattr(cli, "_build", interrupted)
    code, (error,), out = _run(["build", "--arch", "sm_80"], capsys, caplog)
    assert code == 130 and out == ""
    assert error == "ozaki-cutlass build: interrupted: 1 variant(s) built and cached, 2 stopped or not started"


@pytest.mark.parametrize("command", [["build", "--arch", "sm_80"], ["list", "--arch", "sm_80"]])
def test_each_pattern_must_match_something(command, tmp_path, capsys, caplog):
    """One pattern of several that matches nothing (a typo) is said, not dropped while the
    others are built or listed."""
    argv = command + ["--variants", "nomatch*", "stages_*", "--out", str(tmp_path / "out")]
    code, (error,), out = _run(argv, capsys, caplog)
    assert code == 2 and out == ""
    assert "matches 'nomatch*'" in error and "stages_" not in error
    assert not (tmp_path / "out").exists()  # refused before anything was made


def test_a_reader_that_stops_early_is_no_traceback(tmp_path):
    """`ozaki-cutlass list --full | head -2`: the closed pipe ends the command quietly."""
    command = f"{sys.executable} -m ozaki_cutlass list --full --out {tmp_path} | head -2"
    result = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True, timeout=120,
                            cwd=tmp_path)
    assert len(result.stdout.splitlines()) == 2 and result.stdout.startswith("name ")
    assert "Traceback" not in result.stderr and "BrokenPipeError" not in result.stderr, result.stderr
    assert result.returncode == 1
