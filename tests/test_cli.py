"""The `ozaki-cutlass` command line, against a fake nvcc and a fake GPU query."""

from __future__ import annotations

import importlib.util
import json
import logging
import sys
import types
from pathlib import Path

import pytest

import ozaki_cutlass
from ozaki_cutlass.device import arch as arch_module
from ozaki_cutlass.tools import cli
from ozaki_cutlass.generator import Arch, Epilogue, catalog, default_variant
from ozaki_cutlass.dispatch import kernel_targets, load_table


def _load_fakes():
    path = Path(__file__).parent / "generator" / "generator_fakes.py"
    spec = importlib.util.spec_from_file_location("_cli_generator_fakes", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fakes = _load_fakes()



@pytest.fixture
def fake_nvcc(tmp_path, monkeypatch):
    nvcc = fakes.FakeNvcc(tmp_path / "bin")
    for name in ("CUDA_HOME", "CUTLASS_PATH", "OZAKI_CACHE_DIR", "OZAKI_BUILD_JOBS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OZAKI_NVCC", str(nvcc.path))
    monkeypatch.setenv("CUTLASS_PATH", str(fakes.write_cutlass_stub(tmp_path / "cutlass")))
    return nvcc


@pytest.fixture
def gpu(monkeypatch):
    """Set the compute capability the CLI sees (None: no GPU)."""

    def set_capability(capability):
        monkeypatch.setattr(arch_module, "compute_capability", lambda ordinal=0: capability)

    return set_capability


def test_build_without_gpu_or_arch_exits_2_and_says_why(gpu, tmp_path, caplog):
    gpu(None)
    with caplog.at_level(logging.ERROR):
        assert cli.main(["build", "--out", str(tmp_path)]) == 2
    assert "no GPU found" in caplog.text and "--arch" in caplog.text


def test_build_on_an_unsupported_gpu_exits_2(gpu, tmp_path, caplog):
    gpu((7, 5))
    with caplog.at_level(logging.ERROR):
        assert cli.main(["build", "--out", str(tmp_path)]) == 2
    assert "7.5 is not supported" in caplog.text


@pytest.mark.parametrize("capability, arch", [((9, 0), "sm_90a"), ((8, 0), "sm_80"),
                                              ((8, 9), "sm_80"), ((10, 0), "sm_80"),
                                              ((7, 0), None)])
def test_arch_for_capability(capability, arch):
    expected = None if arch is None else Arch(arch)
    assert arch_module.arch_for_capability(*capability) == expected


def test_compute_capability_is_none_without_a_driver_or_gpu():
    # On a machine without a GPU this exercises the real driver query; with one it must
    # return a plausible capability.
    capability = arch_module.compute_capability()
    assert capability is None or capability[0] >= 3


def _table(tmp_path, entries) -> str:
    path = tmp_path / "table.json"
    path.write_text(json.dumps({"gpu": "test", "entries": entries}))
    return str(path)


def test_second_identical_build_compiles_nothing(fake_nvcc, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OZAKI_TUNING_TABLE", _table(tmp_path, []))  # the defaults alone
    argv = ["build", "--arch", "sm_90a", "--out", str(tmp_path / "out")]
    assert cli.main(argv) == 0
    first = capsys.readouterr()
    # the default plain and fused GEMMs, the one-modulus sibling of the G = 2 kernel (15
    # moduli in groups of 2), the G = 2 sibling of the built-in G = 3 candidate (the
    # contract's 8 moduli: 3 + 3 + 2) and the stage-kernel library
    total = len(catalog("sm_90a", epilogue=None)) + 3
    assert f"{total} variants: {total} compiled, 0 cached" in first.out
    assert f"[{total}/{total}] built" in first.err
    assert len(fake_nvcc.calls()) == total

    assert cli.main(argv) == 0
    second = capsys.readouterr()
    assert f"{total} variants: 0 compiled, {total} cached (nothing to compile)" in second.out
    assert len(fake_nvcc.calls()) == total


def test_build_also_builds_what_the_tuning_table_routes_to(fake_nvcc, tmp_path, monkeypatch):
    staged = "i8_sm90a_128x128x128_c2x2_pp_s0_int32_g1_sw8"
    fused = "i8_sm90a_128x128x128_c2x1_coop_s0_pcrt_g4_sw8"
    monkeypatch.setenv("OZAKI_TUNING_TABLE", _table(tmp_path, [
        {"path": "native", "m": [1, 9], "n": [1, 9], "k": [1, 9], "ms": 1.0},
        {"path": "staged", "kernel": staged, "m": [1, 9], "n": [1, 9], "k": [1, 9]},
        {"path": "fused", "kernel": fused, "m": [10, 99], "n": [10, 99], "k": [10, 99]},
        {"path": "staged", "kernel": "i8_sm80_128x128x64_w64x64x64_ms_s4_int32_g1"},  # another arch
    ]))
    defaults = {v.name for v in catalog("sm_90a", epilogue=None)}
    assert staged not in defaults and fused not in defaults
    assert cli.main(["build", "--arch", "sm_90a", "--jobs", "1", "--out", str(tmp_path / "out")]) == 0
    # 15 moduli (the default count) in groups of 4 run the G = 4 kernel and its G = 3 sibling;
    # the default G = 2 kernel splits them 2 x 7 + 1 and brings its one-modulus sibling
    # the contract's counts (8..20) add the built-in G = 3 candidate's G = 2 sibling (8 = 3 + 3 + 2)
    extra = {staged, fused, fused.replace("_g4_", "_g3_"), "i8_sm90a_128x128x128_c1x1_coop_s0_pcrt_g1",
             "i8_sm90a_128x128x128_c2x1_coop_s0_pcrt_g2"}
    assert set(fake_nvcc.compiled()) == defaults | extra | {"stages_sm90a"}


def test_build_defaults_to_the_visible_gpus_arch(fake_nvcc, gpu, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OZAKI_TUNING_TABLE", _table(tmp_path, []))
    gpu((8, 0))
    assert cli.main(["build", "--out", str(tmp_path)]) == 0
    # plain and fused defaults, and the stage kernels
    assert sorted(fake_nvcc.compiled()) == sorted([v.name for v in catalog("sm_80", epilogue=None)]
                                                  + ["stages_sm80"])


def test_build_variants_pattern_matches_the_full_sweep(fake_nvcc, tmp_path, capsys):
    pattern = "i8_sm90a_64x64x64_c1x1_pp_s0_int32_g1"
    (variant,) = catalog("sm_90a", pattern, full=True)
    assert variant not in catalog("sm_90a")
    assert cli.main(["build", "--arch", "sm_90a", "--variants", pattern, "--jobs", "1",
                     "--out", str(tmp_path)]) == 0
    assert fake_nvcc.compiled() == [variant.name]
    assert "1 variant: 1 compiled, 0 cached" in capsys.readouterr().out


def test_build_pattern_matching_nothing_exits_2(fake_nvcc, tmp_path, caplog):
    assert cli.main(["build", "--arch", "sm_80", "--variants", "*_coop_*",
                     "--out", str(tmp_path)]) == 2
    assert "no sm_80 variant matches '*_coop_*'" in caplog.text


def test_a_compile_failure_exits_1_with_the_log_path(fake_nvcc, tmp_path, caplog):
    fake_nvcc.configure(fail="something is wrong")
    assert cli.main(["build", "--arch", "sm_80", "--out", str(tmp_path)]) == 1
    assert "something is wrong" in caplog.text and "build.log" in caplog.text


def test_a_missing_nvcc_exits_1(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("OZAKI_NVCC", str(tmp_path / "no-nvcc"))
    assert cli.main(["build", "--arch", "sm_80", "--out", str(tmp_path)]) == 1
    assert "OZAKI_NVCC" in caplog.text


def test_list_prints_the_catalog_with_what_is_built(fake_nvcc, tmp_path, capsys):
    out = str(tmp_path / "out")
    assert cli.main(["list", "--out", out]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "arch", "tile", "cluster", "schedule", "stages", "epilogue", "built"]
    rows = {line.split()[0]: line.split() for line in lines[1:-1]}
    # the plain and the fused families, and what a plain build builds (the stage library,
    # the kernels the tuning table routes to)
    built_by_default = {v.name for arch in Arch for v in kernel_targets(arch, load_table())}
    listed = {v.name for v in catalog(epilogue=None)} | built_by_default
    assert set(rows) == listed and any("_pcrt_" in name for name in listed) and "stages_sm80" in listed
    assert rows["stages_sm80"][1:] == ["sm_80", "-", "-", "-", "-", "stage", "kernels", "no"]
    default = default_variant("sm_90a").name
    assert rows[default][1:] == ["sm_90a", "256x128x128", "1x2", "cooperative", "auto", "int32_g1", "no"]
    fused = catalog("sm_90a", epilogue=Epilogue.PARTIAL_CRT)[0]
    assert rows[fused.name][-2] == f"pcrt_g{fused.group_size}"
    assert lines[-1].startswith(f"{len(listed)} variants, 0 built")

    assert cli.main(["build", "--arch", "sm_90a", "--variants", default, "--out", out]) == 0
    capsys.readouterr()
    assert cli.main(["list", "--arch", "sm_90a", "--out", out]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[1:-1]}
    assert rows[default][-1] == "yes"
    assert {row[-1] for name, row in rows.items() if name != default} == {"no"}

    fake_nvcc.configure(version="nvcc: fake\nCuda compilation tools, release 13.1, V13.1.80")
    assert cli.main(["list", "--arch", "sm_90a", "--out", out]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[1:-1]}
    assert rows[default][-1] == "stale"


def test_list_full_and_pattern(fake_nvcc, tmp_path, capsys):
    assert cli.main(["list", "--arch", "sm_80", "--full", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    everything = {v.name for v in catalog("sm_80", full=True, epilogue=None)} | {  # plain, fused, what build builds
        v.name for v in kernel_targets(Arch.SM80, load_table())}
    assert len(lines) == len(everything) + 2
    assert all(line.split()[3] == "-" for line in lines[1:-1])  # no clusters on sm_80
    assert cli.main(["list", "--variants", "*_pp_*", "--out", str(tmp_path)]) == 0
    rows = capsys.readouterr().out.splitlines()[1:-1]
    assert rows and all(row.split()[4] == "pingpong" for row in rows)


def test_demo_calls_the_demo_module_with_the_parsed_options(monkeypatch):
    seen = []
    demo = types.SimpleNamespace(main=lambda args: seen.append(args) or 0)
    monkeypatch.setitem(sys.modules, "ozaki_cutlass.tools.demo", demo)
    monkeypatch.setattr(ozaki_cutlass.tools, "demo", demo, raising=False)
    assert cli.main(["demo", "--n", "64", "--seed", "7", "--cpu"]) == 0
    (args,) = seen
    assert (args.n, args.seed, args.cpu) == (64, 7, True)


def test_no_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main([])
    assert exit_.value.code == 2


def test_importing_the_cli_does_no_work():
    import subprocess

    code = ("import sys, ozaki_cutlass; before = set(sys.modules); import ozaki_cutlass.tools.cli; "
            "print(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in "
            "('jinja2', 'cuda', 'cutlass_library') or m.startswith('ozaki_cutlass.generator')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]"


def test_importing_the_package_loads_no_template_engine_or_driver():
    """Running prebuilt kernels never renders a template: jinja2 (and the CUDA driver
    bindings) are imported on first use, not by `import ozaki_cutlass`."""
    import subprocess

    code = ("import sys, ozaki_cutlass; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jinja2', 'cuda')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("argv, message", [
    (["bench", "--shapes", "3x4"], "expected N or MxNxK"),
    (["bench", "--moduli", "0"], "outside the supported range"),
    (["bench", "--reps", "0"], "must be a positive integer"),
    (["bench", "--warmup", "-1"], "must be a non-negative integer"),
    (["bench", "--zgemm", "0"], "must be a positive integer"),
    (["bench", "--batched", "64"], "expected BxN"),
    (["bench", "--batched", "0x1024"], "positive integers"),
    (["tune", "--sizes", "1024", "0"], "must be a positive integer"),
    (["tune", "--shapes", "4096x0x3"], "positive integers"),
    (["tune", "--moduli", "25"], "outside the supported range"),
    (["bench-int8", "--size", "-1"], "must be a positive integer"),
    (["accuracy", "--max-moduli", "25"], "outside the supported range"),
])
def test_bad_arguments_are_usage_errors(capsys, argv, message):
    """Refused by the parser (exit status 2, the reason on stderr) before any GPU work."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_accuracy_min_above_max(capsys):
    assert cli.main(["accuracy", "--min-moduli", "10", "--max-moduli", "5"]) == 2
    assert "above --max-moduli" in capsys.readouterr().err


def test_tune_refuses_a_variant_glob_that_matches_nothing(caplog):
    assert cli.main(["tune", "--variants", "i8_sm90a_128x128x128_*", "nomatch*"]) == 2
    assert "--variants nomatch* matches no variant" in caplog.text  # the other glob matches


def test_tune_with_nothing_to_measure_or_a_bad_table_to_extend_exits_2(tmp_path, caplog):
    assert cli.main(["tune", "--sizes", "--out", str(tmp_path / "t.json")]) == 2
    assert "nothing to measure" in caplog.text
    bad = tmp_path / "old.json"
    bad.write_text("{not json")
    assert cli.main(["tune", "--zgemm", "512", "--extend", str(bad), "--out", str(tmp_path / "t.json")]) == 2
    assert f"--extend: tuning table {bad} is not JSON" in caplog.text
    assert not (tmp_path / "t.json").exists()


def test_a_bad_tuning_table_is_an_error_message_not_a_traceback(tmp_path, monkeypatch, caplog):
    bad = tmp_path / "table.json"
    bad.write_text("{not json")
    monkeypatch.setenv("OZAKI_TUNING_TABLE", str(bad))
    assert cli.main(["build", "--arch", "sm_90a", "--out", str(tmp_path / "out")]) == 2
    assert f"OZAKI_TUNING_TABLE={bad} is not JSON" in caplog.text and "ozaki-cutlass tune" in caplog.text


@pytest.mark.parametrize("argv, missing, message", [
    (["bench", "--arrays", "cupy"], "cupy", "--arrays cupy: CuPy is not installed"),
    (["tune", "--arrays", "cupy"], "cupy", "--arrays cupy: CuPy is not installed"),
    (["bench", "--plot", "x.png"], "matplotlib", "--plot needs matplotlib"),
])
def test_bench_and_tune_say_what_is_missing_before_any_gpu_work(monkeypatch, caplog, argv, missing, message):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == missing else (real(name, *a) or object()))
    assert cli.main(argv) == 2
    assert message in caplog.text


def test_build_and_list_take_several_globs():
    """--variants takes several globs, as tune's does: their union, each variant once; the
    stage library when a glob names it, the prologue prototype when a glob names it."""
    from ozaki_cutlass.tools.cli import _build_targets, _parser, _select
    from ozaki_cutlass.generator import Arch, StagesVariant

    a, b = "i8_sm90a_128x128x128_c1x2_pp_s0_pcrt_g1", "i8_sm90a_256x128x128_c1x2_coop_s0_*_g1_sw8"
    args = _parser().parse_args(["build", "--arch", "sm_90a", "--variants", a, b, a])
    names = [v.name for v in _build_targets(Arch.SM90A, args.variants)]
    assert names == [a, "i8_sm90a_256x128x128_c1x2_coop_s0_int32_g1_sw8",
                     "i8_sm90a_256x128x128_c1x2_coop_s0_pcrt_g1_sw8"]
    assert _build_targets(Arch.SM90A, [a, "stages_*"])[-1] == StagesVariant(arch=Arch.SM90A)
    assert [v.name for v in _build_targets(Arch.SM80, ["stages_*", "prologue_*"])] == [
        "stages_sm80", "prologue_sm80_128x128x64_w64x32"]
    assert [v.name for v in _select("sm_90a", [b, a], full=False)] == names[1:] + [a]
    assert _build_targets(Arch.SM90A, ["nomatch*"]) == []


def test_python_dash_m_runs_the_cli():
    import subprocess

    result = subprocess.run([sys.executable, "-m", "ozaki_cutlass", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "usage: ozaki-cutlass" in result.stdout


def test_public_api():
    """The names and the gemm signature users rely on (the README's): loaded on first use."""
    import inspect

    assert set(ozaki_cutlass.__all__) == {"gemm", "contract", "Choice", "AccuracyWarning", "prepare", "Prepared",
                                          "reference", "DEFAULT_MODULI", "CudaError",
                                          "NoGpuError", "KernelError", "UnsupportedProblem", "OutOfMemoryError",
                                          "empty_cache", "memory_held", "workspace_bytes"}
    for name in ozaki_cutlass.__all__:
        assert getattr(ozaki_cutlass, name) is not None
    params = inspect.signature(ozaki_cutlass.gemm).parameters
    assert list(params) == ["a", "b", "c", "alpha", "beta", "trans_a", "trans_b", "moduli", "mode", "out", "stream",
                            "kernel", "path", "policy", "timings", "accuracy"]
    assert params["moduli"].default is None and params["accuracy"].default is None
    assert params["policy"].default == "auto" and params["mode"].default is None
    assert list(inspect.signature(ozaki_cutlass.prepare).parameters) == ["x", "side", "trans", "moduli", "mode",
                                                                         "stream"]
    assert ozaki_cutlass.reference.gemm is not ozaki_cutlass.gemm and ozaki_cutlass.DEFAULT_MODULI == 15
    with pytest.raises(AttributeError):
        ozaki_cutlass.no_such_name  # noqa: B018
    from importlib import metadata

    assert ozaki_cutlass.__version__ == metadata.version("ozaki-cutlass")  # pyproject's, one source
    package = Path(ozaki_cutlass.__file__).parent
    assert (package / "py.typed").is_file() and (package.parent / "LICENSE").is_file()
