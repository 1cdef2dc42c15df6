"""A built variant on disk, its content-addressed cache key and its `artifact.json`.

Layout of an output directory (`default_out_dir()` unless given):

    <out>/<name>/<key[:16]>/            one finished artifact, moved into place atomically:
        lib<name>.so  <name>.cu  build.log  artifact.json
    <out>/<name>/<key[:16]>.failed/     the source and log of the last failed compile

(build.py adds the lock and the staging folders it builds in.)

Integrity: `artifact.json` records the SHA-256 of every other file of the artifact. An
artifact is only used once its files match (`Artifact.verify()`, done by `find_artifact`,
`build` and `list_artifacts`, each file hashed once per process while it is unchanged on
disk): a corrupted one (truncated, a flipped byte, a file missing) is treated as not built,
so a build or the runtime compiles it again; where nothing can be compiled (no nvcc) it is
left out, and the error says which folder is corrupted and how to fix it. Artifacts written
before the hashes were recorded cannot be verified: with a toolchain they are rebuilt (as
if not built); without one, `list_artifacts` still returns them, and the runtime uses them
with a warning, as it does any artifact it cannot check.

The key is the SHA-256 of the canonical JSON of everything that changes the binary: the
variant's fields, the rendered source, the content of each of our headers the source
includes (directly or through another of ours), `nvcc --version`, the flags, the arch, the
CUTLASS version, this package's version and the artifact ABI version. Anything else (paths,
the time, the host) stays out, so a rebuild with nothing changed is a cache hit, and a
header edit rebuilds exactly the variants that include it.

This module reads and writes `artifact.json`, so it is also where a variant of any kind
(GEMM, stages, prologue) is read back from its JSON form.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import logging
import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from . import environment
from .arch import Arch
from .errors import CorruptArtifactError, ToolchainError
from .prologue import PrologueVariant
from .render import render
from .toolchain import Toolchain, compile_flags, resolve_toolchain
from .variants import GemmVariant, StagesVariant, Variant

__all__ = [
    "ARTIFACT_ABI_VERSION",
    "METADATA_FILE",
    "LOG_FILE",
    "Artifact",
    "FileHashes",
    "VERIFIED_FILES",
    "file_sha256",
    "cache_key",
    "variant_from_dict",
    "artifact_metadata",
    "load_metadata",
    "artifact_dir",
    "current_artifact",
    "find_artifact",
    "list_artifacts",
    "corrupted_artifacts",
    "rebuild_command",
    "resolve_out_dir",
]

log = logging.getLogger(__name__)

# The contract between a built library and the runtime that loads it: the entry points'
# signatures and artifact.json's fields. Bump it with a library's version in
# ozaki_cutlass.generator.abi; artifacts of another ABI are never used.
ARTIFACT_ABI_VERSION = 1

METADATA_FILE = "artifact.json"
LOG_FILE = "build.log"
_KEY_PREFIX = 16  # hex digits of the key in the directory name
_SHA256 = re.compile(r"[0-9a-f]{64}")


@functools.cache
def _package_version() -> str:
    import importlib.metadata  # only when a cache key is computed, not at import

    try:
        return importlib.metadata.version("ozaki-cutlass")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


# --- the key ----------------------------------------------------------------------------
def cache_key(variant: Variant, toolchain: Toolchain, source: str | None = None) -> str:
    """SHA-256 of everything that changes `variant`'s binary (`source`: its rendered text)."""
    if source is None:
        source = render(variant, templates_dir=toolchain.templates_dir)
    payload = {
        "abi_version": ARTIFACT_ABI_VERSION,
        "package_version": _package_version(),
        "variant": variant.to_dict(),
        "source_sha256": hashlib.sha256(source.encode()).hexdigest(),
        "headers": toolchain.headers_included_by(source),
        "nvcc_version": toolchain.nvcc_version,
        "flags": compile_flags(variant.arch),
        "arch": variant.arch.value,
        "cutlass_version": toolchain.cutlass_version,
    }
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


# --- artifact.json ----------------------------------------------------------------------
def variant_from_dict(data: Mapping[str, Any]) -> Variant | PrologueVariant:
    """The variant an artifact.json's `variant` entry describes (any kind)."""
    if data.get("kind") == "stages":
        return StagesVariant(arch=Arch(data["arch"]))
    if data.get("kind") == "prologue":  # the opt-in prototype of generator/prologue.py
        return PrologueVariant.from_dict(data)
    return GemmVariant.from_dict(data)


@dataclass(frozen=True, slots=True, kw_only=True)
class Artifact:
    """A built variant: its shared library exports `<symbol>_run` and friends.

    `file_sha256` holds (file name, SHA-256) of each file its artifact.json records, in
    name order; empty for an artifact written before they were recorded.
    """

    variant: Variant
    key: str
    directory: Path
    library_path: Path
    symbol: str
    file_sha256: tuple[tuple[str, str], ...] = ()

    def verify(self) -> bool:
        """Check each file against its recorded SHA-256; CorruptArtifactError if any
        differs, is missing or cannot be read. True: every file matched; False: nothing
        is recorded (an artifact of an older version), so nothing could be checked.

        Each file is read once per process while it stays unchanged (`VERIFIED_FILES`).
        """
        if not self.file_sha256:
            return False
        problems = []
        for name, expected in self.file_sha256:
            try:
                actual = VERIFIED_FILES.sha256(self.directory / name)
            except FileNotFoundError:
                problems.append(f"{name} is missing")
                continue
            except OSError as exc:
                problems.append(f"{name} cannot be read ({exc.strerror or exc})")
                continue
            if actual != expected:
                problems.append(f"{name} does not match its SHA-256 in {METADATA_FILE} "
                                f"({expected[:12]}... recorded, {actual[:12]}... found)")
        if problems:
            raise CorruptArtifactError(self.directory, problems)
        return True

    @classmethod
    def from_directory(cls, directory: Path | str) -> Artifact:
        """Read an artifact's `artifact.json`; ValueError if it is not a usable artifact."""
        directory = Path(directory)
        metadata = load_metadata(directory)
        if metadata.get("abi_version") != ARTIFACT_ABI_VERSION:
            raise ValueError(f"{directory} has ABI version {metadata.get('abi_version')}, "
                             f"this package uses {ARTIFACT_ABI_VERSION}")
        try:
            variant = variant_from_dict(metadata["variant"])
            library_path = directory / metadata["library"]
            artifact = cls(variant=variant, key=metadata["key"], directory=directory,
                           library_path=library_path, symbol=metadata["symbol"],
                           file_sha256=_recorded_hashes(metadata.get("sha256")))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{directory / METADATA_FILE} is incomplete: {exc!r}") from exc
        if artifact.file_sha256 and library_path.name not in dict(artifact.file_sha256):
            raise ValueError(f"{directory / METADATA_FILE} records no SHA-256 of {library_path.name}")
        if not library_path.is_file():
            raise ValueError(f"{directory} has no {library_path.name}")
        return artifact


def _recorded_hashes(recorded: Any) -> tuple[tuple[str, str], ...]:
    """artifact.json's `sha256` ({file name: hex digest}) as Artifact.file_sha256; absent
    (an artifact of an older version): (). TypeError if it is malformed."""
    if recorded is None:
        return ()
    if not isinstance(recorded, dict) or not recorded:
        raise TypeError(f"sha256 must be a non-empty object, not {recorded!r}")
    for name, digest in recorded.items():
        # plain names only: a record must not make us read files outside the artifact
        if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name:
            raise TypeError(f"sha256 names the file {name!r}")
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise TypeError(f"sha256 of {name} is {digest!r}, not 64 lowercase hex digits")
    return tuple(sorted(recorded.items()))


def file_sha256(path: Path) -> str:
    """The hex SHA-256 of the file at `path`, as artifact.json records it."""
    with open(path, "rb") as handle:
        return _hash_stream(handle)


def _hash_stream(handle: BinaryIO) -> str:
    digest = hashlib.sha256()
    while chunk := handle.read(1 << 20):
        digest.update(chunk)
    return digest.hexdigest()


class FileHashes:
    """What this process has verified: the SHA-256 of each file read, remembered while
    the file's identity and stat (device, inode, size, mtime, ctime) are unchanged, and
    which artifact folders it has already warned about. Verification thus reads each
    artifact once per process (a rebuilt artifact is a new inode, an edit changes mtime
    and ctime). `clear()` forgets everything."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hashes: dict[str, tuple[tuple[int, ...], str]] = {}
        self._reported: set[str] = set()

    def sha256(self, path: Path) -> str:
        """The hex SHA-256 of the file at `path` (OSError if it cannot be read)."""
        with open(path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            signature = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns,
                         stat.st_ctime_ns)
            with self._lock:
                known = self._hashes.get(str(path))
            if known is not None and known[0] == signature:
                return known[1]
            digest = _hash_stream(handle)
        with self._lock:
            self._hashes[str(path)] = (signature, digest)
        return digest

    def first_report(self, directory: Path, what: str) -> bool:
        """True the first time this process reports `what` about `directory`."""
        with self._lock:
            key = f"{what}:{directory}"
            if key in self._reported:
                return False
            self._reported.add(key)
            return True

    def clear(self) -> None:
        with self._lock:
            self._hashes.clear()
            self._reported.clear()


#: The one FileHashes of the process.
VERIFIED_FILES = FileHashes()


def artifact_metadata(variant: Variant, *, key: str, toolchain: Toolchain, library: str,
                      source: str, command: Sequence[str], seconds: float,
                      sha256: Mapping[str, str]) -> dict[str, Any]:
    """The `artifact.json` of `variant` freshly compiled by `command` in `seconds`;
    `sha256`: {file name: hex SHA-256} of every other file of the artifact."""
    return {
        "abi_version": ARTIFACT_ABI_VERSION,
        "name": variant.name,
        "symbol": variant.symbol,
        "key": key,
        "variant": variant.to_dict(),
        "library": library,
        "source": source,
        "log": LOG_FILE,
        "nvcc": str(toolchain.nvcc),
        "nvcc_version": toolchain.nvcc_version,
        "cutlass_version": toolchain.cutlass_version,
        "package_version": _package_version(),
        "flags": compile_flags(variant.arch),
        "command": list(command),
        "build_seconds": round(seconds, 2),
        "built_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "sha256": dict(sorted(sha256.items())),
    }


def load_metadata(directory: Path | str) -> dict[str, Any]:
    """The `artifact.json` of an artifact directory (name, variant, key, flags, timings...)."""
    path = Path(directory) / METADATA_FILE
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return data


# --- finding artifacts ------------------------------------------------------------------
def current_artifact(directory: Path, key: str) -> Artifact | None:
    """The artifact in `directory` if it is complete, built for exactly `key`, and its
    files match their recorded SHA-256. A corrupted artifact, or one that records no
    hashes (built by an older version), counts as not built: whoever asks has a
    toolchain (it computed `key`), so the next build replaces it."""
    try:
        artifact = Artifact.from_directory(directory)
    except (OSError, ValueError):
        return None
    if artifact.key != key:
        return None
    try:
        verified = artifact.verify()
    except CorruptArtifactError as exc:
        if VERIFIED_FILES.first_report(directory, "corrupted"):
            log.warning("%s; treated as not built (the next build replaces it)", exc)
        return None
    if not verified:
        if VERIFIED_FILES.first_report(directory, "unverifiable"):
            log.info("%s records no SHA-256 of its files (an older version built it): "
                     "treated as not built, so the next build replaces it", directory)
        return None
    return artifact


def artifact_dir(out_dir: Path, variant: Variant, key: str) -> Path:
    """Where the artifact of `variant` built for `key` lives under `out_dir`."""
    return out_dir / variant.name / key[:_KEY_PREFIX]


def find_artifact(variant: Variant, out_dir: Path | str | None = None, *,
                  toolchain: Toolchain | None = None) -> Artifact | None:
    """The artifact built for `variant` with the current toolchain and templates, else None.

    Never compiles; renders the variant and (once per process) runs `nvcc --version` to
    compute the key. Pass a resolved `toolchain` when looking up many variants.
    A corrupted artifact counts as not built (see `current_artifact`). Without a
    toolchain the ToolchainError says so, and, when an artifact of `variant` in `out_dir`
    is corrupted, which one and how to fix it.
    """
    out = resolve_out_dir(out_dir)
    if toolchain is None:
        try:
            toolchain = resolve_toolchain()
        except ToolchainError as exc:
            corrupted = [error for artifact, error in _scan(out, variant.name)[1]
                         if artifact.variant == variant]
            if not corrupted:
                raise
            fixes = "; ".join(f"{error}: to fix it, run `{rebuild_command(variant, out)}` on "
                              f"a machine with nvcc, or delete {error.directory}"
                              for error in corrupted)
            raise ToolchainError(f"{exc}; {fixes}") from exc
    key = cache_key(variant, toolchain)
    return current_artifact(artifact_dir(out, variant, key), key)


def rebuild_command(variant: Variant, out_dir: Path) -> str:
    """The command that builds `variant` into `out_dir`, for messages."""
    return (f"ozaki-cutlass build --arch {variant.arch.value} --variants '{variant.name}' "
            f"--out {out_dir}")


def list_artifacts(out_dir: Path | str | None = None) -> list[Artifact]:
    """Every intact artifact of this ABI under `out_dir`, whatever its key: its files match
    their recorded SHA-256, or it records none (an older version built it: not verified).

    Needs no nvcc: for a machine that only runs kernels built elsewhere. An artifact whose
    key is not current was built from other sources or another toolchain. Corrupted ones
    are left out, with a warning (once per process); `corrupted_artifacts()` lists them.
    """
    out = resolve_out_dir(out_dir)
    intact, corrupted = _scan(out)
    for artifact, error in corrupted:
        if VERIFIED_FILES.first_report(artifact.directory, "corrupted"):
            log.warning("%s; left out: rebuild it with `%s`, or delete that folder",
                        error, rebuild_command(artifact.variant, out))
    return intact


def corrupted_artifacts(out_dir: Path | str | None = None
                        ) -> list[tuple[Artifact, CorruptArtifactError]]:
    """The artifacts under `out_dir` whose files do not match their recorded SHA-256, each
    with what is wrong (for `ozaki-cutlass list`)."""
    return _scan(resolve_out_dir(out_dir))[1]


def _scan(out: Path, name: str = "*"
          ) -> tuple[list[Artifact], list[tuple[Artifact, CorruptArtifactError]]]:
    """(intact, corrupted) artifacts of this ABI under `out` (of variants named `name`)."""
    intact, corrupted = [], []
    for metadata in sorted(out.glob(f"{name}/*/{METADATA_FILE}")):
        try:
            artifact = Artifact.from_directory(metadata.parent)
        except (OSError, ValueError) as exc:
            if _of_another_abi(metadata.parent):  # an older version's build: expected, not damage
                log.debug("skipping %s: %s", metadata.parent, exc)
            elif VERIFIED_FILES.first_report(metadata.parent, "unreadable"):
                log.warning("%s; left out: the next build of %s replaces it (or delete that folder)", exc,
                            metadata.parent.parent.name)
            continue
        try:
            artifact.verify()
        except CorruptArtifactError as exc:
            corrupted.append((artifact, exc))
            continue
        intact.append(artifact)
    return intact, corrupted


def _of_another_abi(directory: Path) -> bool:
    """Whether `directory`'s artifact.json is readable and names another ABI version."""
    try:
        return load_metadata(directory).get("abi_version") != ARTIFACT_ABI_VERSION
    except (OSError, ValueError):
        return False


def resolve_out_dir(out_dir: Path | str | None) -> Path:
    """`out_dir` as an absolute path; None: `default_out_dir()`."""
    return (Path(out_dir) if out_dir is not None else environment.default_out_dir()).resolve()
