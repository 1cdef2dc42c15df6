"""A built variant on disk, its content-addressed cache key and its `artifact.json`.

Layout of an output directory (`default_out_dir()` unless given):

    <out>/<name>/<key[:16]>/            one finished artifact, moved into place atomically:
        lib<name>.so  <name>.cu  build.log  artifact.json
    <out>/<name>/<key[:16]>.failed/     the source and log of the last failed compile

(build.py adds the lock and the staging folders it builds in.)

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import environment
from .arch import Arch
from .prologue import PrologueVariant
from .render import render
from .toolchain import Toolchain, compile_flags, resolve_toolchain
from .variants import GemmVariant, StagesVariant, Variant

__all__ = [
    "ARTIFACT_ABI_VERSION",
    "METADATA_FILE",
    "LOG_FILE",
    "Artifact",
    "cache_key",
    "variant_from_dict",
    "artifact_metadata",
    "load_metadata",
    "artifact_dir",
    "current_artifact",
    "find_artifact",
    "list_artifacts",
    "resolve_out_dir",
]

log = logging.getLogger(__name__)

# The contract between a built library and the runtime that loads it: the entry points'
# signatures and artifact.json's fields. Bump it with `ozaki::kAbiVersion` in
# templates/include/ozaki/int8_gemm_entry.h; artifacts of another ABI are never used.
ARTIFACT_ABI_VERSION = 1

METADATA_FILE = "artifact.json"
LOG_FILE = "build.log"
_KEY_PREFIX = 16  # hex digits of the key in the directory name


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
    """A built variant: its shared library exports `<symbol>_run` and friends."""

    variant: Variant
    key: str
    directory: Path
    library_path: Path
    symbol: str

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
                           library_path=library_path, symbol=metadata["symbol"])
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{directory / METADATA_FILE} is incomplete: {exc!r}") from exc
        if not library_path.is_file():
            raise ValueError(f"{directory} has no {library_path.name}")
        return artifact


def artifact_metadata(variant: Variant, *, key: str, toolchain: Toolchain, library: str,
                      source: str, command: Sequence[str], seconds: float) -> dict[str, Any]:
    """The `artifact.json` of `variant` freshly compiled by `command` in `seconds`."""
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
    """The artifact in `directory` if it is complete and built for exactly `key`."""
    try:
        artifact = Artifact.from_directory(directory)
    except (OSError, ValueError):
        return None
    return artifact if artifact.key == key else None


def artifact_dir(out_dir: Path, variant: Variant, key: str) -> Path:
    """Where the artifact of `variant` built for `key` lives under `out_dir`."""
    return out_dir / variant.name / key[:_KEY_PREFIX]


def find_artifact(variant: Variant, out_dir: Path | str | None = None, *,
                  toolchain: Toolchain | None = None) -> Artifact | None:
    """The artifact built for `variant` with the current toolchain and templates, else None.

    Never compiles; renders the variant and (once per process) runs `nvcc --version` to
    compute the key. Pass a resolved `toolchain` when looking up many variants.
    """
    toolchain = toolchain if toolchain is not None else resolve_toolchain()
    out = resolve_out_dir(out_dir)
    key = cache_key(variant, toolchain)
    return current_artifact(artifact_dir(out, variant, key), key)


def list_artifacts(out_dir: Path | str | None = None) -> list[Artifact]:
    """Every complete artifact of this ABI under `out_dir`, whatever its key.

    Needs no nvcc: for a machine that only runs kernels built elsewhere. An artifact whose
    key is not current was built from other sources or another toolchain.
    """
    out = resolve_out_dir(out_dir)
    artifacts = []
    for metadata in sorted(out.glob(f"*/*/{METADATA_FILE}")):
        try:
            artifacts.append(Artifact.from_directory(metadata.parent))
        except (OSError, ValueError) as exc:
            log.debug("skipping %s: %s", metadata.parent, exc)
    return artifacts


def resolve_out_dir(out_dir: Path | str | None) -> Path:
    """`out_dir` as an absolute path; None: `default_out_dir()`."""
    return (Path(out_dir) if out_dir is not None else environment.default_out_dir()).resolve()
