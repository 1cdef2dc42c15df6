"""A build that fails on the filesystem (a full disk: any OSError while it writes) keeps
its log next to where the artifact would go and says where, in one line. Fakes only: an
fsync or a rename that raises ENOSPC."""

from __future__ import annotations

import errno
import importlib
import logging
import os

import pytest

from ozaki_cutlass.generator import (
    Arch,
    CompileError,
    build,
    default_variant,
    find_artifact,
    resolve_toolchain,
)
from ozaki_cutlass.generator.errors import BuildStorageError

build_module = importlib.import_module("ozaki_cutlass.generator.build")
VARIANT = default_variant(Arch.SM80)
FULL = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.fixture
def disk_full_at(monkeypatch):
    """Make os.fsync raise ENOSPC for files whose name ends with the given suffix."""
    real = os.fsync

    def arm(suffix: str) -> None:
        def fsync(fd):
            if os.readlink(f"/proc/self/fd/{fd}").endswith(suffix):
                raise FULL
            return real(fd)

        monkeypatch.setattr(os, "fsync", fsync)

    return arm


def test_a_full_disk_after_nvcc_keeps_the_log_and_says_where(
        make_toolchain, fake_nvcc, out_dir, disk_full_at):
    disk_full_at("artifact.json")
    toolchain = make_toolchain()
    with pytest.raises(BuildStorageError) as caught:
        build([VARIANT], out_dir, toolchain=toolchain, progress=False)
    error = caught.value
    assert isinstance(error, CompileError)  # reported with the other failed compiles
    message = str(error)
    assert "\n" not in message
    assert message.startswith(f"building {VARIANT.name} failed: [Errno 28] No space left")
    assert message.endswith(f"its log is kept in {error.log_path}")
    assert error.log_path.parent.name.endswith(".failed")
    assert error.log_path.parent.parent == out_dir / VARIANT.name
    assert "fake nvcc: compiled" in error.log_path.read_text()  # nvcc's own output
    assert not any((out_dir / ".staging").iterdir())
    assert find_artifact(VARIANT, out_dir, toolchain=toolchain) is None

    disk_full_at("nothing matches this")  # space again
    (artifact,) = build([VARIANT], out_dir, toolchain=toolchain, progress=False).artifacts
    assert artifact.verify() is True
    assert not error.log_path.parent.exists()  # a success clears the failure


def test_a_full_disk_while_writing_the_log(make_toolchain, out_dir, disk_full_at):
    disk_full_at("build.log")
    with pytest.raises(BuildStorageError) as caught:
        build([VARIANT], out_dir, toolchain=make_toolchain(), progress=False)
    assert caught.value.log_path.is_file()
    assert "# command" in caught.value.log_path.read_text()


def test_when_even_the_move_fails_the_log_stays_in_the_staging_folder(
        make_toolchain, out_dir, monkeypatch):
    def no_space(*args):
        raise FULL

    monkeypatch.setattr(os, "replace", no_space)  # the artifact's rename, then the move
    with pytest.raises(BuildStorageError) as caught:
        build([VARIANT], out_dir, toolchain=make_toolchain(), progress=False)
    log_path = caught.value.log_path
    assert log_path.parent.parent == out_dir / ".staging" and log_path.is_file()
    assert str(log_path) in str(caught.value)


def test_a_full_disk_before_any_log(make_toolchain, out_dir, monkeypatch):
    def no_space(*args):
        raise FULL

    monkeypatch.setattr(build_module, "_make_staging", no_space)
    with pytest.raises(BuildStorageError) as caught:
        build([VARIANT], out_dir, toolchain=make_toolchain(), progress=False)
    assert caught.value.log_path is None
    assert str(caught.value) == (f"building {VARIANT.name} failed: [Errno 28] No space left on "
                                 "device; it failed before writing a log")


def test_the_other_variants_still_finish(make_toolchain, out_dir, monkeypatch, capsys):
    others = [default_variant(Arch.SM90A)]
    real = os.fsync

    def fsync(fd):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(f"lib{VARIANT.name}.so"):
            raise FULL
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    toolchain = make_toolchain()
    with pytest.raises(BuildStorageError):
        build([VARIANT, *others], out_dir, toolchain=toolchain, jobs=2)
    assert find_artifact(others[0], out_dir, toolchain=toolchain) is not None
    assert f"FAILED {VARIANT.name} (log: " in capsys.readouterr().err


def test_the_error_survives_pickling():
    import pickle

    error = BuildStorageError(VARIANT, FULL, None)
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == str(error) and copy.error.errno == errno.ENOSPC


def test_the_cli_says_it_in_one_line(fake_nvcc, cutlass_root, out_dir, monkeypatch, caplog,
                                     disk_full_at):
    from ozaki_cutlass.tools import cli

    monkeypatch.setenv("OZAKI_NVCC", str(fake_nvcc.path))
    monkeypatch.setenv("CUTLASS_PATH", str(cutlass_root))
    resolve_toolchain()
    disk_full_at("artifact.json")
    with caplog.at_level(logging.ERROR):
        status = cli.main(["build", "--arch", "sm_80", "--variants", VARIANT.name,
                           "--out", str(out_dir)])
    assert status == 1
    (record,) = [r for r in caplog.records if r.levelno >= logging.ERROR]
    message = record.getMessage()
    assert "\n" not in message and "No space left on device" in message
    assert "its log is kept in" in message and str(out_dir / VARIANT.name) in message
