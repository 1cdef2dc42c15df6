"""Builds and the artifact cache, against a fake nvcc (no CUDA, no minutes)."""

from __future__ import annotations

import concurrent.futures
import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from ozaki_cutlass.generator import (
    Arch,
    Artifact,
    CompileError,
    GemmVariant,
    Schedule,
    ToolchainError,
    build,
    catalog,
    default_out_dir,
    default_variant,
    find_artifact,
    list_artifacts,
    load_metadata,
    render,
    resolve_toolchain,
)
from ozaki_cutlass.generator.build import default_jobs

VARIANTS = catalog()  # the defaults of both arches: 4 sm_90a + 2 sm_80
SM90 = [v for v in VARIANTS if v.arch is Arch.SM90A]
SM80 = [v for v in VARIANTS if v.arch is Arch.SM80]


def names(variants) -> set[str]:
    return {v.name for v in variants}


def test_first_build_compiles_each_variant_once_and_lays_out_the_artifact(
        make_toolchain, fake_nvcc, out_dir):
    report = build(VARIANTS, out_dir, toolchain=make_toolchain(), progress=False)
    assert sorted(fake_nvcc.compiled()) == sorted(names(VARIANTS))
    assert report.compiled == tuple(v.name for v in VARIANTS) and report.cached == ()
    assert [a.variant for a in report.artifacts] == VARIANTS
    for artifact in report.artifacts:
        v = artifact.variant
        assert artifact.directory == out_dir / v.name / artifact.key[:16]
        assert sorted(p.name for p in artifact.directory.iterdir()) == sorted(
            [f"lib{v.name}.so", f"{v.name}.cu", "build.log", "artifact.json"])
        assert artifact.library_path == artifact.directory / f"lib{v.name}.so"
        assert artifact.symbol == v.symbol
        metadata = load_metadata(artifact.directory)
        assert metadata["key"] == artifact.key and len(artifact.key) == 64
        assert metadata["variant"] == v.to_dict()
        assert metadata["nvcc_version"].endswith("V13.0.88")
        assert "fake nvcc: compiled" in (artifact.directory / "build.log").read_text()
    assert not any((out_dir / ".staging").iterdir())


def test_nvcc_gets_an_argument_list_with_the_arch_flags_and_includes(
        make_toolchain, fake_nvcc, out_dir, templates_dir, cutlass_root):
    build([SM90[0], SM80[0]], out_dir, toolchain=make_toolchain(), progress=False, jobs=1)
    sm90_call, sm80_call = fake_nvcc.calls()
    for call, variant, gencode in (
            (sm90_call, SM90[0], "-gencode=arch=compute_90a,code=sm_90a"),
            (sm80_call, SM80[0], "-gencode=arch=compute_80,code=[sm_80,compute_80]")):
        argv = call["argv"]
        assert argv[0] == gencode
        for flag in ("-std=c++17", "-O3", "-DNDEBUG", "--expt-relaxed-constexpr", "-shared"):
            assert flag in argv
        assert argv[argv.index("-Xcompiler") + 1] == "-fPIC"
        assert f"-I{templates_dir / 'include'}" in argv
        assert f"-I{cutlass_root / 'include'}" in argv
        assert f"-I{cutlass_root / 'tools' / 'util' / 'include'}" in argv
        assert argv[-3:] == ["-o", f"lib{variant.name}.so", f"{variant.name}.cu"]


def test_second_build_calls_nvcc_not_at_all(make_toolchain, fake_nvcc, out_dir, capsys):
    first = build(VARIANTS, out_dir, toolchain=make_toolchain())
    fake_nvcc.reset()
    second = build(VARIANTS, out_dir, toolchain=make_toolchain())
    assert fake_nvcc.calls() == []
    assert second.compiled == () and second.cached == tuple(v.name for v in VARIANTS)
    assert second.artifacts == first.artifacts
    assert second.summary() == "6 variants: 0 compiled, 6 cached (nothing to compile)"
    assert first.summary() == "6 variants: 6 compiled, 0 cached"
    stderr = capsys.readouterr().err
    assert f"[6/6] cached {VARIANTS[-1].name}\n" in stderr
    assert "built i8_sm90a_128x256x128_c1x1_coop_s0_int32_g1 in" in stderr


def test_find_artifact_looks_up_without_compiling(make_toolchain, fake_nvcc, out_dir):
    toolchain = make_toolchain()
    assert find_artifact(SM90[0], out_dir, toolchain=toolchain) is None
    (built,) = build([SM90[0]], out_dir, toolchain=toolchain, progress=False).artifacts
    assert find_artifact(SM90[0], out_dir, toolchain=toolchain) == built
    assert find_artifact(SM90[1], out_dir, toolchain=toolchain) is None
    assert len(fake_nvcc.calls()) == 1
    assert Artifact.from_directory(built.directory) == built


def edit(path: Path, text: str = "// edited\n") -> None:
    path.write_text(path.read_text() + text)


def test_a_header_edit_rebuilds_every_variant_that_includes_it(
        make_toolchain, fake_nvcc, out_dir, templates_dir):
    build(VARIANTS, out_dir, toolchain=make_toolchain(), progress=False)
    fake_nvcc.reset()
    edit(templates_dir / "include" / "ozaki" / "fake.h")  # both templates include it
    report = build(VARIANTS, out_dir, toolchain=make_toolchain(), progress=False)
    assert sorted(fake_nvcc.compiled()) == sorted(names(VARIANTS))
    assert report.cached == ()


def test_a_header_included_through_another_counts_too(
        make_toolchain, fake_nvcc, out_dir, templates_dir):
    build(VARIANTS, out_dir, toolchain=make_toolchain(), progress=False)
    fake_nvcc.reset()
    edit(templates_dir / "include" / "ozaki" / "detail.h")  # via fake.h's #include "detail.h"
    build(VARIANTS, out_dir, toolchain=make_toolchain(), progress=False)
    assert sorted(fake_nvcc.compiled()) == sorted(names(VARIANTS))


def test_a_header_edit_rebuilds_only_the_variants_that_include_it(
        make_toolchain, fake_nvcc, out_dir, templates_dir):
    build(VARIANTS, out_dir, toolchain=make_toolchain(), progress=False)
    fake_nvcc.reset()
    edit(templates_dir / "include" / "ozaki" / "sm80_only.h")
    report = build(VARIANTS, out_dir, toolchain=make_toolchain(), progress=False)
    assert sorted(fake_nvcc.compiled()) == sorted(names(SM80))
    assert set(report.cached) == names(SM90)


def test_headers_no_variant_includes_rebuild_nothing(
        make_toolchain, fake_nvcc, out_dir, templates_dir):
    build(VARIANTS, out_dir, toolchain=make_toolchain(), progress=False)
    fake_nvcc.reset()
    edit(templates_dir / "include" / "ozaki" / "unused.h")
    (templates_dir / "include" / "ozaki" / "new.cuh").write_text("// new\n")
    build(VARIANTS, out_dir, toolchain=make_toolchain(), progress=False)
    assert fake_nvcc.calls() == []


def test_an_include_that_cannot_be_followed_counts_every_header(
        make_toolchain, fake_nvcc, out_dir, templates_dir):
    detail = templates_dir / "include" / "ozaki" / "detail.h"
    edit(detail, "#include OZAKI_EXTRA_HEADER\n")
    build(VARIANTS, out_dir, toolchain=make_toolchain(), progress=False)
    fake_nvcc.reset()
    edit(templates_dir / "include" / "ozaki" / "unused.h")  # it might be the macro's header
    build(VARIANTS, out_dir, toolchain=make_toolchain(), progress=False)
    assert sorted(fake_nvcc.compiled()) == sorted(names(VARIANTS))


def test_the_key_counts_exactly_the_included_headers(make_toolchain):
    toolchain = make_toolchain()
    for variant, expected in ((SM90[0], {"ozaki/fake.h", "ozaki/detail.h"}),
                              (SM80[0], {"ozaki/fake.h", "ozaki/detail.h", "ozaki/sm80_only.h"})):
        source = render(variant, templates_dir=toolchain.templates_dir)
        assert set(toolchain.headers_included_by(source)) == expected


def test_touching_a_header_without_changing_it_rebuilds_nothing(
        make_toolchain, fake_nvcc, out_dir, templates_dir):
    build(VARIANTS, out_dir, toolchain=make_toolchain(), progress=False)
    fake_nvcc.reset()
    header = templates_dir / "include" / "ozaki" / "fake.h"
    header.write_text(header.read_text())
    os.utime(header, ns=(header.stat().st_atime_ns, header.stat().st_mtime_ns + 10**9))
    build(VARIANTS, out_dir, toolchain=make_toolchain(), progress=False)
    assert fake_nvcc.calls() == []


@pytest.mark.parametrize("arch", list(Arch))
def test_a_template_edit_rebuilds_only_that_arch(make_toolchain, fake_nvcc, out_dir,
                                                 templates_dir, arch):
    build(VARIANTS, out_dir, toolchain=make_toolchain(), progress=False)
    fake_nvcc.reset()
    template = templates_dir / ("int8_gemm_sm90.cu.j2" if arch is Arch.SM90A
                                else "int8_gemm_sm80.cu.j2")
    template.write_text(template.read_text() + "// a comment is a change\n")
    stat = template.stat()
    os.utime(template, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # past jinja's cache
    report = build(VARIANTS, out_dir, toolchain=make_toolchain(), progress=False)
    edited = [v for v in VARIANTS if v.arch is arch]
    assert sorted(fake_nvcc.compiled()) == sorted(names(edited))
    assert set(report.cached) == names(VARIANTS) - names(edited)


def test_a_new_nvcc_version_invalidates(make_toolchain, fake_nvcc, out_dir):
    build(SM80, out_dir, toolchain=make_toolchain(), progress=False)
    fake_nvcc.reset()
    fake_nvcc.configure(version="nvcc: fake\nCuda compilation tools, release 13.1, V13.1.80")
    toolchain = make_toolchain()
    assert toolchain.nvcc_version.endswith("V13.1.80")
    build(SM80, out_dir, toolchain=toolchain, progress=False)
    assert sorted(fake_nvcc.compiled()) == sorted(names(SM80))
    # Both generations stay on disk; the lookup finds the current one.
    artifact = find_artifact(SM80[0], out_dir, toolchain=toolchain)
    assert load_metadata(artifact.directory)["nvcc_version"].endswith("V13.1.80")
    assert len(list((out_dir / SM80[0].name).glob("*/artifact.json"))) == 2


def test_a_new_cutlass_version_invalidates(make_toolchain, fake_nvcc, out_dir, cutlass_root):
    build(SM80, out_dir, toolchain=make_toolchain(), progress=False)
    fake_nvcc.reset()
    version = cutlass_root / "include" / "cutlass" / "version.h"
    version.write_text(version.read_text().replace("PATCH 0", "PATCH 1"))
    build(SM80, out_dir, toolchain=make_toolchain(), progress=False)
    assert sorted(fake_nvcc.compiled()) == sorted(names(SM80))


def _timed_build(variant, out_dir, toolchain):
    # Runs in a spawned process: when it started, and what build() returned.
    started = time.time()
    return started, build([variant], out_dir, toolchain=toolchain, progress=False)


def test_two_processes_building_one_variant_compile_it_once(make_toolchain, fake_nvcc, out_dir):
    fake_nvcc.configure(sleep=3.0)  # long enough for the second process to arrive
    toolchain = make_toolchain()
    variant = default_variant("sm_90a")
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
        futures = [pool.submit(_timed_build, variant, out_dir, toolchain) for _ in range(2)]
        results = [f.result(timeout=120) for f in futures]
    (call,) = fake_nvcc.calls()
    (winner,) = [r for _, r in results if r.compiled]
    (started, waiter), = [(t, r) for t, r in results if not r.compiled]
    assert winner.compiled == waiter.cached == (variant.name,)
    assert started < call["end"]  # the waiter was there during the compile: it waited
    assert winner.artifacts == waiter.artifacts
    reports = [winner, waiter]
    assert reports[0].artifacts[0].library_path.is_file()
    assert not any((out_dir / ".staging").iterdir())


def test_threads_building_one_variant_compile_it_once(make_toolchain, fake_nvcc, out_dir):
    fake_nvcc.configure(sleep=0.5)
    toolchain = make_toolchain()
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        reports = list(pool.map(
            lambda _: build(SM80[:1], out_dir, toolchain=toolchain, progress=False), range(3)))
    assert len(fake_nvcc.calls()) == 1
    assert len({r.artifacts for r in reports}) == 1


def test_a_compile_failure_names_variant_command_and_log(make_toolchain, fake_nvcc, out_dir):
    fake_nvcc.configure(fail="no instance of overloaded function matches")
    variant = default_variant("sm_80")
    toolchain = make_toolchain()
    with pytest.raises(CompileError) as caught:
        build([variant], out_dir, toolchain=toolchain, progress=False)
    error = caught.value
    assert error.variant == variant
    assert error.command[0] == str(fake_nvcc.path) and error.command[-1] == f"{variant.name}.cu"
    assert error.returncode == 1
    log_text = error.log_path.read_text()
    assert "error: no instance of overloaded function matches" in log_text
    assert (error.log_path.parent / f"{variant.name}.cu").is_file()  # kept to reproduce it
    message = str(error)
    assert variant.name in message and str(error.log_path) in message
    assert str(fake_nvcc.path) in message and "-gencode=arch=compute_80" in message
    assert "no instance of overloaded function matches" in message  # the log's tail
    assert find_artifact(variant, out_dir, toolchain=toolchain) is None

    fake_nvcc.configure()
    (artifact,) = build([variant], out_dir, toolchain=toolchain, progress=False).artifacts
    assert artifact.library_path.is_file()
    assert not error.log_path.parent.exists()  # a success clears the failure


def test_one_failure_lets_the_other_variants_finish(make_toolchain, fake_nvcc, out_dir, capsys):
    fake_nvcc.configure(fail="boom", fail_if="_sm80_")
    toolchain = make_toolchain()
    with pytest.raises(CompileError) as caught:
        build(VARIANTS, out_dir, toolchain=toolchain, jobs=2)
    assert caught.value.variant == SM80[0]  # the first failure in the order asked
    for v in SM90:
        assert find_artifact(v, out_dir, toolchain=toolchain) is not None
    assert "FAILED i8_sm80_" in capsys.readouterr().err


def test_compile_error_survives_pickling(make_toolchain, fake_nvcc, out_dir):
    import pickle

    fake_nvcc.configure(fail="boom")
    with pytest.raises(CompileError) as caught:
        build(SM80[:1], out_dir, toolchain=make_toolchain(), progress=False)
    copy = pickle.loads(pickle.dumps(caught.value))
    assert (copy.variant, copy.command, copy.log_path) == (
        caught.value.variant, caught.value.command, caught.value.log_path)


def test_adding_a_variant_is_one_dataclass(make_toolchain, fake_nvcc, out_dir):
    new = GemmVariant(arch=Arch.SM90A, tile_m=128, tile_n=96, tile_k=128, cluster_m=2,
                      schedule=Schedule.COOPERATIVE, stages=0)
    assert new not in catalog(full=True)
    my_catalog = [*catalog("sm_90a"), new]
    report = build(my_catalog, out_dir, toolchain=make_toolchain(), progress=False)
    assert new.name in fake_nvcc.compiled()
    artifact = report.artifacts[-1]
    assert artifact.variant == new and artifact.symbol == "ozaki_" + new.name
    source = (artifact.directory / f"{new.name}.cu").read_text()
    assert "128x96x128 cluster 2x1" in source and f"{new.symbol}_run" in source


def test_repeated_variants_are_built_once(make_toolchain, fake_nvcc, out_dir):
    v = default_variant("sm_80")
    report = build([v, v, v], out_dir, toolchain=make_toolchain(), progress=False)
    assert len(fake_nvcc.calls()) == 1 and len(report.artifacts) == 1


def test_list_artifacts_needs_no_toolchain_and_skips_incomplete_ones(
        make_toolchain, out_dir):
    report = build(SM80, out_dir, toolchain=make_toolchain(), progress=False)
    broken = out_dir / SM80[0].name / "0123456789abcdef"
    broken.mkdir()
    (broken / "artifact.json").write_text("{not json")
    assert list_artifacts(out_dir) == sorted(report.artifacts, key=lambda a: str(a.directory))


def test_an_artifact_without_its_library_is_rebuilt(make_toolchain, fake_nvcc, out_dir):
    (artifact,) = build(SM80[:1], out_dir, toolchain=make_toolchain(), progress=False).artifacts
    artifact.library_path.unlink()
    fake_nvcc.reset()
    (again,) = build(SM80[:1], out_dir, toolchain=make_toolchain(), progress=False).artifacts
    assert len(fake_nvcc.calls()) == 1 and again.library_path.is_file()
    assert again.directory == artifact.directory


def test_an_artifact_of_another_abi_is_not_used(make_toolchain, fake_nvcc, out_dir):
    (artifact,) = build(SM80[:1], out_dir, toolchain=make_toolchain(), progress=False).artifacts
    path = artifact.directory / "artifact.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"abi_version": 0}))
    assert find_artifact(SM80[0], out_dir, toolchain=make_toolchain()) is None
    with pytest.raises(ValueError, match="ABI version 0"):
        Artifact.from_directory(artifact.directory)


# --- toolchain lookup -------------------------------------------------------------------
def test_nvcc_comes_from_OZAKI_NVCC(monkeypatch, fake_nvcc, templates_dir, cutlass_root):
    monkeypatch.setenv("OZAKI_NVCC", str(fake_nvcc.path))
    toolchain = resolve_toolchain(templates_dir=templates_dir, cutlass_root=cutlass_root)
    assert toolchain.nvcc == fake_nvcc.path


def test_nvcc_comes_from_CUDA_HOME(monkeypatch, fake_nvcc, templates_dir, cutlass_root,
                                   tmp_path):
    monkeypatch.setenv("CUDA_HOME", str(fake_nvcc.path.parent.parent))  # <home>/bin/nvcc
    toolchain = resolve_toolchain(templates_dir=templates_dir, cutlass_root=cutlass_root)
    assert toolchain.nvcc == fake_nvcc.path
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-cuda-here"))
    with pytest.raises(ToolchainError, match="nvcc from CUDA_HOME .* is not an executable"):
        resolve_toolchain(templates_dir=templates_dir, cutlass_root=cutlass_root)


def test_a_missing_nvcc_is_a_toolchain_error(tmp_path, templates_dir, cutlass_root):
    with pytest.raises(ToolchainError, match="is not an executable file"):
        resolve_toolchain(nvcc=tmp_path / "nope", templates_dir=templates_dir,
                          cutlass_root=cutlass_root)


def test_cutlass_comes_from_CUTLASS_PATH(monkeypatch, fake_nvcc, templates_dir, cutlass_root,
                                         tmp_path):
    monkeypatch.setenv("CUTLASS_PATH", str(cutlass_root))
    assert resolve_toolchain(nvcc=fake_nvcc.path, templates_dir=templates_dir).cutlass_root \
        == cutlass_root.resolve()
    monkeypatch.setenv("CUTLASS_PATH", str(tmp_path))
    with pytest.raises(ToolchainError, match="CUTLASS_PATH .* is not a CUTLASS tree"):
        resolve_toolchain(nvcc=fake_nvcc.path, templates_dir=templates_dir)


def test_cutlass_defaults_to_the_wheel_located_without_importing_it(fake_nvcc, templates_dir):
    import sys

    imported_before = "cutlass_library" in sys.modules
    toolchain = resolve_toolchain(nvcc=fake_nvcc.path, templates_dir=templates_dir)
    assert (toolchain.cutlass_root / "include" / "cutlass" / "cutlass.h").is_file()
    assert toolchain.cutlass_root.name == "source"
    assert toolchain.cutlass_version.count(".") == 2
    assert ("cutlass_library" in sys.modules) == imported_before


def test_the_default_templates_are_the_installed_package(fake_nvcc, cutlass_root):
    toolchain = resolve_toolchain(nvcc=fake_nvcc.path, cutlass_root=cutlass_root)
    assert toolchain.include_dir == toolchain.templates_dir / "include"
    assert (toolchain.templates_dir / "__init__.py").is_file()


def test_an_include_dir_can_be_given_separately(make_toolchain, fake_nvcc, out_dir, tmp_path):
    headers = tmp_path / "headers"
    (headers / "ozaki").mkdir(parents=True)
    for name in ("fake.h", "sm80_only.h"):
        (headers / "ozaki" / name).write_text("// 1\n")
    build(SM80, out_dir, toolchain=make_toolchain(include_dir=headers), progress=False)
    fake_nvcc.reset()
    (headers / "ozaki" / "fake.h").write_text("// 2\n")
    build(SM80, out_dir, toolchain=make_toolchain(include_dir=headers), progress=False)
    assert len(fake_nvcc.calls()) == len(SM80)
    assert f"-I{headers.resolve()}" in fake_nvcc.calls()[0]["argv"]


# --- settings ---------------------------------------------------------------------------
def test_jobs_come_from_OZAKI_BUILD_JOBS(monkeypatch):
    monkeypatch.setenv("OZAKI_BUILD_JOBS", "3")
    assert default_jobs(VARIANTS) == 3
    monkeypatch.setenv("OZAKI_BUILD_JOBS", "many")
    with pytest.raises(ToolchainError, match="OZAKI_BUILD_JOBS='many'"):
        default_jobs(VARIANTS)
    monkeypatch.delenv("OZAKI_BUILD_JOBS")
    assert 1 <= default_jobs(VARIANTS) <= (os.cpu_count() or 1)


def test_default_out_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("OZAKI_CACHE_DIR", str(tmp_path / "cache"))
    assert default_out_dir() == tmp_path / "cache"
    monkeypatch.delenv("OZAKI_CACHE_DIR")
    repo = Path(__file__).resolve().parents[2]
    assert default_out_dir() == repo / "build"  # these tests run from a checkout


def test_user_cache_dir_honours_XDG_CACHE_HOME(monkeypatch, tmp_path):
    from ozaki_cutlass.generator.environment import user_cache_dir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert user_cache_dir() == tmp_path / "ozaki-cutlass"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert user_cache_dir() == Path.home() / ".cache" / "ozaki-cutlass"


def test_a_dead_builds_staging_folder_is_removed(make_toolchain, fake_nvcc, out_dir):
    """A killed build leaves `.staging/<name>-xxxx`; the next build of that variant (which
    holds the variant's lock) removes it, and leaves other variants' folders alone."""
    v, other = SM80[0], SM80[1]
    staging = out_dir / ".staging"
    dead = staging / f"{v.name}-dead1234"
    alive = staging / f"{other.name}-busy5678"
    for folder in (dead, alive):
        folder.mkdir(parents=True)
        (folder / "partial.o").write_text("half a compile")
    build([v], out_dir, toolchain=make_toolchain(), progress=False)
    assert not dead.exists()
    assert alive.exists()
    assert list(staging.glob(f"{v.name}-*")) == []  # its own staging folder moved into place


def test_an_unusable_cache_is_one_error_before_any_compile(make_toolchain, fake_nvcc, tmp_path, monkeypatch):
    """A file where the cache should be (OZAKI_CACHE_DIR, or out_dir) is said in the
    library's words, as `ozaki-cutlass build` says it, not as pathlib's FileExistsError."""
    toolchain = make_toolchain()
    blocker = tmp_path / "afile"
    blocker.write_text("")
    with pytest.raises(ToolchainError, match=r"out_dir .*afile/sub cannot hold the kernels: .*afile is not a "
                                             r"directory \(a file is there\)"):
        build([default_variant("sm_90a")], blocker / "sub", toolchain=toolchain)
    monkeypatch.setenv("OZAKI_CACHE_DIR", str(blocker))
    with pytest.raises(ToolchainError, match=r"the kernel cache \(OZAKI_CACHE_DIR, else the default\) .*afile "
                                             r"cannot hold the kernels.*set OZAKI_CACHE_DIR"):
        build([default_variant("sm_90a")], toolchain=toolchain)
    assert fake_nvcc.calls() == []


def test_a_cutlass_older_than_the_templates_is_refused_up_front(make_toolchain, cutlass_root):
    """An older CUTLASS (CUTLASS_PATH at a 2.x tree) would fail in nvcc, variant by
    variant, after minutes of compiling: resolving the toolchain refuses it."""
    version = cutlass_root / "include" / "cutlass" / "version.h"
    version.write_text(version.read_text().replace("MAJOR 4", "MAJOR 2").replace("MINOR 2", "MINOR 11"))
    with pytest.raises(ToolchainError, match=r"CUTLASS 2\.11\.0 at .* is too old: the kernels need CUTLASS 4 or newer"):
        make_toolchain()
