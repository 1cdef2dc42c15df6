"""A corrupted cached kernel is never trusted: artifact.json records the SHA-256 of each
file, a mismatch counts as not built (rebuilt where nvcc is) or is refused with the fix
(where it is not); files reach the disk before the rename; a fresh cache is readable by
the other users of a shared one. Fake nvcc only."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
from pathlib import Path

import pytest

from ozaki_cutlass.generator import (
    Arch,
    Artifact,
    ToolchainError,
    build,
    default_variant,
    find_artifact,
    list_artifacts,
    load_metadata,
    resolve_toolchain,
)
from ozaki_cutlass.generator import artifact as artifact_module
from ozaki_cutlass.generator.artifact import VERIFIED_FILES, corrupted_artifacts
from ozaki_cutlass.generator.errors import CorruptArtifactError
from ozaki_cutlass.kernels.library import KERNELS, locate

VARIANT = default_variant(Arch.SM80)


@pytest.fixture(autouse=True)
def _fresh_memory():
    VERIFIED_FILES.clear()
    KERNELS.clear()
    yield
    VERIFIED_FILES.clear()
    KERNELS.clear()


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


CORRUPTIONS = {
    "truncated library": lambda a: truncate(a.library_path),
    "flipped byte in the library": lambda a: flip_a_byte(a.library_path),
    "flipped byte in the log": lambda a: flip_a_byte(a.directory / "build.log"),
    "source deleted": lambda a: (a.directory / f"{a.variant.name}.cu").unlink(),
}


@pytest.fixture
def built(make_toolchain, out_dir) -> Artifact:
    (artifact,) = build([VARIANT], out_dir, toolchain=make_toolchain(), progress=False).artifacts
    return artifact


def test_the_record_holds_the_sha256_of_every_other_file(built):
    recorded = load_metadata(built.directory)["sha256"]
    files = sorted(p.name for p in built.directory.iterdir() if p.name != "artifact.json")
    assert sorted(recorded) == files == sorted(dict(built.file_sha256))
    for name, digest in recorded.items():
        assert digest == hashlib.sha256((built.directory / name).read_bytes()).hexdigest()
    assert built.verify() is True


@pytest.mark.parametrize("corrupt", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_a_corrupted_artifact_is_not_found_and_is_rebuilt(
        built, corrupt, make_toolchain, fake_nvcc, out_dir, caplog):
    corrupt(built)
    with pytest.raises(CorruptArtifactError, match="is corrupted"):
        built.verify()
    toolchain = make_toolchain()
    with caplog.at_level(logging.WARNING):
        assert find_artifact(VARIANT, out_dir, toolchain=toolchain) is None
    assert f"{built.directory} is corrupted" in caplog.text
    assert "treated as not built" in caplog.text

    fake_nvcc.reset()
    report = build([VARIANT], out_dir, toolchain=toolchain, progress=False)
    assert fake_nvcc.compiled() == [VARIANT.name] and report.compiled == (VARIANT.name,)
    (again,) = report.artifacts
    assert again.directory == built.directory and again.verify() is True
    assert find_artifact(VARIANT, out_dir, toolchain=toolchain) == again


def test_the_message_says_which_file_and_how(built):
    truncate(built.library_path)
    with pytest.raises(CorruptArtifactError) as caught:
        built.verify()
    message = str(caught.value)
    assert "\n" not in message
    assert f"{built.library_path.name} does not match its SHA-256 in artifact.json" in message
    assert caught.value.directory == built.directory


def test_each_file_is_read_once_per_process_while_unchanged(built, make_toolchain, out_dir,
                                                            monkeypatch):
    reads = []
    real = artifact_module._hash_stream

    def counting(handle):
        reads.append(Path(handle.name).name)
        return real(handle)

    monkeypatch.setattr(artifact_module, "_hash_stream", counting)
    toolchain = make_toolchain()
    for _ in range(3):
        assert find_artifact(VARIANT, out_dir, toolchain=toolchain) == built
        list_artifacts(out_dir)
    assert sorted(reads) == sorted(dict(built.file_sha256))
    flip_a_byte(built.library_path)  # changed on disk: read again, and caught
    assert find_artifact(VARIANT, out_dir, toolchain=toolchain) is None
    assert reads.count(built.library_path.name) == 2


@pytest.mark.parametrize("record", [
    {"../../etc/passwd": "0" * 64},
    {"libx.so": "not a digest"},
    {},
    ["libx.so"],
])
def test_a_malformed_record_is_not_an_artifact(built, make_toolchain, out_dir, record):
    path = built.directory / "artifact.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"sha256": record}))
    with pytest.raises(ValueError):
        Artifact.from_directory(built.directory)
    assert find_artifact(VARIANT, out_dir, toolchain=make_toolchain()) is None


def test_a_record_that_leaves_out_the_library_is_not_an_artifact(built):
    path = built.directory / "artifact.json"
    metadata = json.loads(path.read_text())
    del metadata["sha256"][built.library_path.name]
    path.write_text(json.dumps(metadata))
    with pytest.raises(ValueError, match="records no SHA-256 of lib"):
        Artifact.from_directory(built.directory)


# --- list_artifacts, the machine without nvcc -------------------------------------------
def test_list_artifacts_leaves_corrupted_ones_out_and_says_so(built, out_dir, caplog):
    flip_a_byte(built.library_path)
    with caplog.at_level(logging.WARNING):
        assert list_artifacts(out_dir) == []
        assert list_artifacts(out_dir) == []
    assert caplog.text.count("is corrupted") == 1  # once per process
    assert f"ozaki-cutlass build --arch sm_80 --variants '{VARIANT.name}'" in caplog.text
    ((artifact, error),) = corrupted_artifacts(out_dir)
    assert artifact.directory == built.directory and "does not match" in str(error)



def test_an_unreadable_record_is_said_once_and_an_older_abi_is_not(built, out_dir, caplog):
    """A damaged artifact.json leaves its folder out with a warning naming it (it had been
    dropped as if never built); another ABI version's record (an older package's build)
    is left out quietly, as expected."""
    record = built.directory / "artifact.json"
    text = record.read_text()
    record.write_text(text[:200])  # cut short
    with caplog.at_level(logging.WARNING):
        assert list_artifacts(out_dir) == [] and list_artifacts(out_dir) == []
    assert caplog.text.count("is not valid JSON") == 1 and f"next build of {VARIANT.name} replaces it" in caplog.text
    caplog.clear()
    data = json.loads(text)
    data["abi_version"] = -1
    record.write_text(json.dumps(data))
    with caplog.at_level(logging.WARNING):
        assert list_artifacts(out_dir) == []
    assert caplog.text == ""

@pytest.fixture
def no_nvcc(monkeypatch, out_dir):
    monkeypatch.setenv("OZAKI_NVCC", str(out_dir / "no-such-nvcc"))


@pytest.mark.parametrize("corrupt", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_without_nvcc_a_corrupted_artifact_is_refused_with_the_fix(built, corrupt, out_dir,
                                                                   no_nvcc):
    corrupt(built)
    with pytest.raises(ToolchainError) as caught:
        locate(VARIANT, out_dir)
    message = str(caught.value)
    assert "\n" not in message
    assert f"{built.directory} is corrupted" in message
    assert f"ozaki-cutlass build --arch sm_80 --variants '{VARIANT.name}'" in message
    assert "on a machine with nvcc" in message and f"or delete {built.directory}" in message
    with pytest.raises(ToolchainError, match="is corrupted"):
        find_artifact(VARIANT, out_dir)


def test_without_nvcc_an_intact_artifact_is_used_as_before(built, out_dir, no_nvcc, caplog):
    with caplog.at_level(logging.WARNING):
        assert locate(VARIANT, out_dir).directory == built.directory
    assert "without checking it is current" in caplog.text


# --- artifacts of an older version: no hashes -------------------------------------------
@pytest.fixture
def unhashed(built) -> Artifact:
    path = built.directory / "artifact.json"
    metadata = json.loads(path.read_text())
    del metadata["sha256"]
    path.write_text(json.dumps(metadata))
    return Artifact.from_directory(built.directory)


def test_an_artifact_without_hashes_is_rebuilt_where_nvcc_is(unhashed, make_toolchain,
                                                             fake_nvcc, out_dir):
    assert unhashed.file_sha256 == () and unhashed.verify() is False
    toolchain = make_toolchain()
    assert find_artifact(VARIANT, out_dir, toolchain=toolchain) is None
    fake_nvcc.reset()
    (again,) = build([VARIANT], out_dir, toolchain=toolchain, progress=False).artifacts
    assert fake_nvcc.compiled() == [VARIANT.name] and again.verify() is True


def test_an_artifact_without_hashes_is_used_with_a_warning_without_nvcc(
        unhashed, out_dir, no_nvcc, caplog):
    assert list_artifacts(out_dir) == [unhashed]
    with caplog.at_level(logging.WARNING):
        assert locate(VARIANT, out_dir).directory == unhashed.directory
    assert "without checking it is current" in caplog.text


# --- the runtime, and `ozaki-cutlass list`, with the installed templates ----------------
@pytest.fixture
def installed_templates(fake_nvcc, cutlass_root, monkeypatch):
    """The toolchain the runtime and the CLI resolve themselves: the fake nvcc and CUTLASS
    stub through the environment, the installed templates."""
    monkeypatch.setenv("OZAKI_NVCC", str(fake_nvcc.path))
    monkeypatch.setenv("CUTLASS_PATH", str(cutlass_root))
    return resolve_toolchain()


def test_the_runtime_rebuilds_a_corrupted_kernel(installed_templates, fake_nvcc, out_dir):
    (artifact,) = build([VARIANT], out_dir, toolchain=installed_templates,
                        progress=False).artifacts
    assert locate(VARIANT, out_dir) == artifact
    truncate(artifact.library_path)
    KERNELS.clear()  # a new process
    fake_nvcc.reset()
    again = locate(VARIANT, out_dir)
    assert fake_nvcc.compiled() == [VARIANT.name] and again.verify() is True


def test_list_does_not_say_yes_for_a_corrupted_artifact(installed_templates, out_dir,
                                                        capsys, caplog):
    from ozaki_cutlass.tools import cli

    build([VARIANT], out_dir, toolchain=installed_templates, progress=False)

    def status() -> str:
        assert cli.main(["list", "--arch", "sm_80", "--out", str(out_dir)]) == 0
        (row,) = [line for line in capsys.readouterr().out.splitlines()
                  if line.startswith(VARIANT.name + " ")]
        return row.split()[-1]

    assert status() == "yes"
    (artifact,) = list_artifacts(out_dir)
    flip_a_byte(artifact.library_path)
    VERIFIED_FILES.clear()  # a new process
    assert status() == "corrupted"
    assert f"{artifact.directory} is corrupted" in caplog.text


# --- on disk: fsynced before the rename, permissions of a shared cache ------------------
def test_every_file_is_on_disk_before_the_rename(make_toolchain, out_dir, monkeypatch):
    synced = []
    real = os.fsync

    def recording(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)

    monkeypatch.setattr(os, "fsync", recording)
    (artifact,) = build([VARIANT], out_dir, toolchain=make_toolchain(),
                        progress=False).artifacts
    staged = [Path(p) for p in synced if "/.staging/" in p]
    assert {p.name for p in staged} >= {artifact.library_path.name, f"{VARIANT.name}.cu",
                                        "build.log", "artifact.json"}
    staging = staged[0].parent
    assert str(staging) in synced  # the folder's entries too
    assert synced.index(str(staging)) > max(synced.index(str(p)) for p in staged if p != staging)
    assert str(artifact.directory.parent) in synced  # and the rename


@pytest.mark.parametrize("umask, folder_mode, file_mode", [
    (0o022, 0o755, 0o644),  # the usual: every user reads, the owner writes
    (0o002, 0o775, 0o664),  # a group that builds into one cache
    (0o077, 0o700, 0o600),  # a private cache
])
def test_a_fresh_cache_has_the_modes_the_umask_asks_for(make_toolchain, out_dir, umask,
                                                        folder_mode, file_mode):
    old = os.umask(umask)
    try:
        build([VARIANT], out_dir, toolchain=make_toolchain(), progress=False)
    finally:
        os.umask(old)
    paths = [out_dir, *out_dir.rglob("*")]
    assert any(p.name == "artifact.json" for p in paths) and (out_dir / ".staging").is_dir()
    for path in paths:
        mode = stat.S_IMODE(path.stat().st_mode)
        if path.is_dir():
            assert mode == folder_mode, path
        else:  # a real nvcc makes the library executable too (0777 less the umask)
            assert mode & ~0o111 == file_mode, path
