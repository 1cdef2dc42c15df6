"""`ozaki-cutlass doctor` on the CPU: one line per thing it looks at (the settings too), exit 0, and what is
missing said, not raised (issue 18, item 6)."""

from ozaki_cutlass.generator import Arch
from ozaki_cutlass.tools import cli, doctor


def _rows(capsys) -> dict[str, str]:
    out = capsys.readouterr().out.splitlines()
    return {line.split("  ", 1)[0].strip(): line.split("  ", 1)[1].strip() for line in out}


def test_without_a_gpu_or_nvcc_it_says_so(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(doctor, "compute_capability", lambda ordinal=0: None)
    monkeypatch.setenv("OZAKI_NVCC", str(tmp_path / "no-nvcc"))
    monkeypatch.setenv("OZAKI_CACHE_DIR", str(tmp_path / "cache"))
    assert cli.main(["doctor"]) == 0
    rows = _rows(capsys)
    assert rows["GPU 0"].startswith("none usable")
    assert rows["nvcc / CUTLASS"].startswith("missing:") and "no-nvcc" in rows["nvcc / CUTLASS"]
    assert rows["kernel cache"] == f"{tmp_path / 'cache'} (not made yet)"
    assert {"ozaki-cutlass", "python", "cuBLAS", "CuPy", "PyTorch", "kernels"} <= set(rows)


def test_with_a_gpu_it_lists_the_missing_kernels(monkeypatch, tmp_path, capsys):
    from ozaki_cutlass.dispatch import kernel_targets, load_table

    monkeypatch.setattr(doctor, "compute_capability", lambda ordinal=0: (9, 0))
    monkeypatch.setenv("OZAKI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(doctor, "resolve_toolchain", lambda: _FakeToolchain())
    monkeypatch.setattr(doctor, "find_artifact", lambda variant, out: None)  # nothing built
    assert cli.main(["doctor"]) == 0
    rows = _rows(capsys)
    n = len(kernel_targets(Arch.SM90A, load_table()))
    assert rows["GPU 0"].endswith("compute capability 9.0 (builds sm_90a)")
    assert rows["kernels"].startswith(f"{n} the dispatcher may pick on sm_90a: {n} missing")
    assert rows["nvcc"].startswith("/opt/nvcc (from ")


class _FakeToolchain:
    nvcc = "/opt/nvcc"
    nvcc_version = "Cuda compilation tools, release 13.0, V13.0.88"
    cutlass_version = "4.2.0"
    cutlass_root = "/opt/cutlass"


def test_it_checks_the_settings_the_table_and_the_cache(monkeypatch, tmp_path, capsys):
    """Each setting with its value, or REFUSED and why; the tuning table read (with or
    without a GPU); a cache that is a file said to be unusable (doctor makes nothing)."""
    monkeypatch.setattr(doctor, "compute_capability", lambda ordinal=0: None)
    blocker = tmp_path / "afile"
    blocker.write_text("")
    for name, value in [("OZAKI_CACHE_DIR", str(blocker)), ("OZAKI_OVERLAP", "maybe"), ("OZAKI_GRAPHS", "off"),
                        ("OZAKI_KARATSUBA_MIN", "-5"), ("OZAKI_BUILD_JOBS", "0"),
                        ("OZAKI_TUNING_TABLE", str(tmp_path / "none.json"))]:
        monkeypatch.setenv(name, value)
    assert cli.main(["doctor"]) == 0
    rows = _rows(capsys)
    assert rows["kernel cache"] == f"{blocker} (unusable: {blocker} is not a directory (set OZAKI_CACHE_DIR to a " \
                                   "writable one))"
    assert rows["tuning table"].startswith(f"REFUSED: OZAKI_TUNING_TABLE={tmp_path / 'none.json'} cannot be read")
    assert rows["OZAKI_OVERLAP"].startswith("REFUSED: OZAKI_OVERLAP='maybe': expected 0 or 1")
    assert rows["OZAKI_GRAPHS"] == "'off': off" and rows["OZAKI_SPECULATE"] == "unset: on"
    assert rows["OZAKI_KARATSUBA_MIN"].startswith("REFUSED: OZAKI_KARATSUBA_MIN='-5'")
    assert rows["OZAKI_BUILD_JOBS"] == "REFUSED: OZAKI_BUILD_JOBS='0' must be a positive integer"
    assert blocker.is_file()
