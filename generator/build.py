"""Rendered source -> shared library, through nvcc, with a content-addressed cache.

Layout of an output directory (`default_out_dir()` unless given):

    <out>/<name>/.lock                  serializes builds of one variant across processes
    <out>/<name>/<key[:16]>/            one finished artifact, moved into place atomically:
        lib<name>.so  <name>.cu  build.log  artifact.json
    <out>/<name>/<key[:16]>.failed/     the source and log of the last failed compile
    <out>/.staging/<name>-<random>/     builds in progress

The key is the SHA-256 of the canonical JSON of everything that changes the binary: the
variant's fields, the rendered source, the content of each of our headers the source
includes (directly or through another of ours), `nvcc --version`, the flags, the arch, the
CUTLASS version, this package's version and the artifact ABI version. Anything else (paths,
the time, the host) stays out, so a rebuild with nothing changed is a cache hit, and a
header edit rebuilds exactly the variants that include it.

`build()` compiles one translation unit per variant in parallel: by default as many nvcc
processes as there are CPUs, capped by memory (about 3 GB per sm_90a compile, so 4 GiB per
job are budgeted; 2 GiB for sm_80), or `OZAKI_BUILD_JOBS`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime
import fcntl
import functools
import hashlib
import importlib.util
import json
import logging
import os
import posixpath
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import environment
from .errors import CompileError, ToolchainError
from .render import default_templates_dir, render, write_if_different
from .variants import Arch, Variant, variant_from_dict

__all__ = [
    "ARTIFACT_ABI_VERSION",
    "COMMON_FLAGS",
    "ARCH_FLAGS",
    "Header",
    "Toolchain",
    "Artifact",
    "BuildReport",
    "resolve_toolchain",
    "compile_flags",
    "nvcc_command",
    "cache_key",
    "build",
    "find_artifact",
    "list_artifacts",
    "load_metadata",
    "default_jobs",
]

log = logging.getLogger(__name__)

# The contract between a built library and the runtime that loads it: the entry points'
# signatures and artifact.json's fields. Bump it with `ozaki::kAbiVersion` in
# templates/include/ozaki/int8_gemm_entry.h; artifacts of another ABI are never used.
ARTIFACT_ABI_VERSION = 1

# -DNDEBUG matters: device asserts serialize wgmma.
COMMON_FLAGS: tuple[str, ...] = (
    "-std=c++17", "-O3", "-DNDEBUG", "--expt-relaxed-constexpr",
    "-shared", "-Xcompiler", "-fPIC",
)
ARCH_FLAGS: Mapping[Arch, tuple[str, ...]] = {
    Arch.SM90A: ("-gencode=arch=compute_90a,code=sm_90a",),
    # compute_80 PTX too, so the sm_80 fallback also runs (JIT-compiled) on newer GPUs.
    Arch.SM80: ("-gencode=arch=compute_80,code=[sm_80,compute_80]",),
}

_METADATA_FILE = "artifact.json"
_LOG_FILE = "build.log"
_STAGING_DIR = ".staging"
_LOCK_FILE = ".lock"
_KEY_PREFIX = 16  # hex digits of the key in the directory name
_MEMORY_PER_JOB: Mapping[Arch, int] = {Arch.SM90A: 4 << 30, Arch.SM80: 2 << 30}
_FALLBACK_NVCC = Path("/usr/local/cuda/bin/nvcc")
_CUTLASS_WHEEL_MODULE = "cutlass_library"  # located, never imported


# --- the toolchain ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Header:
    """One of our headers, as read when the toolchain was resolved."""

    sha256: str
    includes: tuple[str, ...]  # our headers it includes, relative to the include dir
    opaque: bool  # it has an #include we cannot follow (a macro): assume it includes all


@dataclass(frozen=True, slots=True, kw_only=True)
class Toolchain:
    """Everything outside the variant that goes into a build, resolved once."""

    nvcc: Path
    nvcc_version: str  # the full `nvcc --version` output
    cutlass_root: Path  # holds include/ and tools/util/include/
    cutlass_version: str
    templates_dir: Path
    include_dir: Path  # our headers
    headers: tuple[tuple[str, Header], ...]  # every file under include_dir, by relative path

    @property
    def include_dirs(self) -> tuple[Path, ...]:
        return (self.include_dir, self.cutlass_root / "include",
                self.cutlass_root / "tools" / "util" / "include")

    def headers_included_by(self, source: str) -> dict[str, str]:
        """{relative path: sha256} of our headers that `source` includes, transitively."""
        headers = dict(self.headers)
        pending = list(_our_includes(source, None, headers))
        if _has_opaque_include(source):
            pending = list(headers)
        seen: dict[str, str] = {}
        while pending:
            name = pending.pop()
            if name in seen:
                continue
            header = headers[name]
            seen[name] = header.sha256
            pending.extend(headers if header.opaque else header.includes)
        return dict(sorted(seen.items()))


def resolve_toolchain(*, nvcc: Path | str | None = None, cutlass_root: Path | str | None = None,
                      templates_dir: Path | str | None = None,
                      include_dir: Path | str | None = None) -> Toolchain:
    """Find nvcc, CUTLASS, the templates and our headers; each argument overrides the lookup.

    nvcc: `nvcc`, else `OZAKI_NVCC`, else `$CUDA_HOME/bin/nvcc`, else `nvcc` on PATH, else
    /usr/local/cuda/bin/nvcc. CUTLASS: `cutlass_root`, else `CUTLASS_PATH`, else the
    nvidia-cutlass wheel. Templates: the installed `ozaki_cutlass.templates`; headers: its
    `include/`. Raises ToolchainError naming what is missing.
    """
    nvcc_path = _find_nvcc(nvcc)
    cutlass = _find_cutlass(cutlass_root)
    templates = Path(templates_dir) if templates_dir is not None else default_templates_dir()
    templates = templates.resolve()
    headers = Path(include_dir).resolve() if include_dir is not None else templates / "include"
    if not templates.is_dir():
        raise ToolchainError(f"templates folder {templates} does not exist")
    return Toolchain(
        nvcc=nvcc_path,
        nvcc_version=_nvcc_version(nvcc_path),
        cutlass_root=cutlass,
        cutlass_version=_cutlass_version(cutlass),
        templates_dir=templates,
        include_dir=headers,
        headers=_scan_headers(headers),
    )


def _find_nvcc(explicit: Path | str | None) -> Path:
    if explicit is not None:
        return _executable(Path(explicit), "the nvcc argument")
    override = environment.nvcc_override()
    if override is not None:
        return _executable(override, "OZAKI_NVCC")
    cuda_home = environment.cuda_home()
    if cuda_home is not None:
        return _executable(cuda_home / "bin" / "nvcc", "CUDA_HOME")
    on_path = shutil.which("nvcc")
    if on_path is not None:
        return Path(on_path)
    if _FALLBACK_NVCC.is_file():
        return _FALLBACK_NVCC
    raise ToolchainError(
        "nvcc not found: set OZAKI_NVCC or CUDA_HOME, or put nvcc on PATH"
    )


def _executable(path: Path, source: str) -> Path:
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise ToolchainError(f"nvcc from {source} ({path}) is not an executable file")
    return path.absolute()


_version_lock = threading.Lock()
_version_cache: dict[tuple[str, int, int, int], str] = {}


def _nvcc_version(nvcc: Path) -> str:
    """`nvcc --version`, run once per process and nvcc file (keyed by its stat)."""
    stat = nvcc.stat()
    cache_key = (str(nvcc), stat.st_ino, stat.st_mtime_ns, stat.st_size)
    with _version_lock:
        if cache_key in _version_cache:
            return _version_cache[cache_key]
    try:
        result = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True,
                                stdin=subprocess.DEVNULL, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolchainError(f"cannot run {nvcc} --version: {exc}") from exc
    if result.returncode != 0:
        raise ToolchainError(f"{nvcc} --version exited {result.returncode}: "
                             f"{(result.stderr or result.stdout).strip()}")
    version = result.stdout.strip()
    with _version_lock:
        _version_cache[cache_key] = version
    return version


def _find_cutlass(explicit: Path | str | None) -> Path:
    if explicit is not None:
        return _cutlass_root(Path(explicit), "the cutlass_root argument")
    override = environment.cutlass_path()
    if override is not None:
        return _cutlass_root(override, "CUTLASS_PATH")
    spec = importlib.util.find_spec(_CUTLASS_WHEEL_MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise ToolchainError(
            "CUTLASS not found: install nvidia-cutlass or set CUTLASS_PATH to a CUTLASS tree"
        )
    package = Path(next(iter(spec.submodule_search_locations)))
    # The wheel ships the headers in <package>/source; a CUTLASS checkout with its python
    # package installed in place has them two folders up (as cutlass_library.source_path).
    for candidate in (package / "source", package.parent.parent):
        if (candidate / "include" / "cutlass" / "cutlass.h").is_file():
            return candidate.resolve()
    raise ToolchainError(f"the {_CUTLASS_WHEEL_MODULE} package at {package} ships no CUTLASS headers")


def _cutlass_root(path: Path, source: str) -> Path:
    if not (path / "include" / "cutlass" / "cutlass.h").is_file():
        raise ToolchainError(f"{source} ({path}) is not a CUTLASS tree: no include/cutlass/cutlass.h")
    return path.resolve()


def _cutlass_version(root: Path) -> str:
    header = root / "include" / "cutlass" / "version.h"
    try:
        text = header.read_text()
    except OSError as exc:
        raise ToolchainError(f"cannot read the CUTLASS version from {header}: {exc}") from exc
    parts = []
    for part in ("MAJOR", "MINOR", "PATCH"):
        match = re.search(rf"#define\s+CUTLASS_{part}\s+(\d+)", text)
        if match is None:
            raise ToolchainError(f"{header} defines no CUTLASS_{part}")
        parts.append(match.group(1))
    return ".".join(parts)


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^">\n]+)[">]', re.MULTILINE)
_ANY_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include\b(.*)$", re.MULTILINE)


def _scan_headers(root: Path) -> tuple[tuple[str, Header], ...]:
    """Every file under `root` with its hash and the files under `root` it includes."""
    if not root.is_dir():
        raise ToolchainError(f"include folder {root} does not exist")
    contents = {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }
    headers = []
    for name, data in contents.items():
        text = data.decode(errors="replace")
        headers.append((name, Header(
            sha256=hashlib.sha256(data).hexdigest(),
            includes=tuple(_our_includes(text, name, contents)),
            opaque=_has_opaque_include(text),
        )))
    return tuple(headers)


def _our_includes(text: str, including: str | None, ours: Mapping[str, object]) -> list[str]:
    """The files of `ours` that the #include lines of `text` name, resolved as nvcc does:
    a quoted name first next to the including file (`including`, relative to the include
    dir; None for the translation unit), then in the include dir (the first -I)."""
    found = []
    for quote, name in _INCLUDE.findall(text):
        if quote == '"' and including is not None:
            sibling = posixpath.normpath(posixpath.join(posixpath.dirname(including), name))
            if sibling in ours:
                found.append(sibling)
                continue
        if posixpath.normpath(name) in ours:
            found.append(posixpath.normpath(name))
    return list(dict.fromkeys(found))


def _has_opaque_include(text: str) -> bool:
    """An #include of a macro (or anything but "name" or <name>): where it leads is unknown."""
    return any(not argument.strip().startswith(('"', "<"))
               for argument in _ANY_INCLUDE.findall(text))


@functools.cache
def _package_version() -> str:
    import importlib.metadata  # only when a cache key is computed, not at import

    try:
        return importlib.metadata.version("ozaki-cutlass")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


# --- commands and keys ------------------------------------------------------------------
def compile_flags(arch: Arch) -> list[str]:
    """nvcc flags for `arch`, include directories aside."""
    return [*ARCH_FLAGS[arch], *COMMON_FLAGS]


def nvcc_command(variant: Variant, toolchain: Toolchain, *, source: str,
                 output: str) -> list[str]:
    """The nvcc argument list that compiles `source` into the shared library `output`."""
    includes = [f"-I{directory}" for directory in toolchain.include_dirs]
    return [str(toolchain.nvcc), *compile_flags(variant.arch), *includes, "-o", output, source]


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


# --- artifacts --------------------------------------------------------------------------
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
            raise ValueError(f"{directory / _METADATA_FILE} is incomplete: {exc!r}") from exc
        if not library_path.is_file():
            raise ValueError(f"{directory} has no {library_path.name}")
        return artifact


def load_metadata(directory: Path | str) -> dict[str, Any]:
    """The `artifact.json` of an artifact directory (name, variant, key, flags, timings...)."""
    path = Path(directory) / _METADATA_FILE
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return data


def _current_artifact(directory: Path, key: str) -> Artifact | None:
    """The artifact in `directory` if it is complete and built for exactly `key`."""
    try:
        artifact = Artifact.from_directory(directory)
    except (OSError, ValueError):
        return None
    return artifact if artifact.key == key else None


def _artifact_dir(out_dir: Path, variant: Variant, key: str) -> Path:
    return out_dir / variant.name / key[:_KEY_PREFIX]


def find_artifact(variant: Variant, out_dir: Path | str | None = None, *,
                  toolchain: Toolchain | None = None) -> Artifact | None:
    """The artifact built for `variant` with the current toolchain and templates, else None.

    Never compiles; renders the variant and (once per process) runs `nvcc --version` to
    compute the key. Pass a resolved `toolchain` when looking up many variants.
    """
    toolchain = toolchain if toolchain is not None else resolve_toolchain()
    out = _out_dir(out_dir)
    key = cache_key(variant, toolchain)
    return _current_artifact(_artifact_dir(out, variant, key), key)


def list_artifacts(out_dir: Path | str | None = None) -> list[Artifact]:
    """Every complete artifact of this ABI under `out_dir`, whatever its key.

    Needs no nvcc: for a machine that only runs kernels built elsewhere. An artifact whose
    key is not current was built from other sources or another toolchain.
    """
    out = _out_dir(out_dir)
    artifacts = []
    for metadata in sorted(out.glob(f"*/*/{_METADATA_FILE}")):
        try:
            artifacts.append(Artifact.from_directory(metadata.parent))
        except (OSError, ValueError) as exc:
            log.debug("skipping %s: %s", metadata.parent, exc)
    return artifacts


def _out_dir(out_dir: Path | str | None) -> Path:
    return (Path(out_dir) if out_dir is not None else environment.default_out_dir()).resolve()


# --- building ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BuildReport:
    """What `build()` did: the artifacts in the order asked for, and which were compiled."""

    artifacts: tuple[Artifact, ...]
    compiled: tuple[str, ...]  # names this call compiled
    cached: tuple[str, ...]  # names found built (earlier, or by a concurrent process)

    def summary(self) -> str:
        total = len(self.compiled) + len(self.cached)
        noun = "variant" if total == 1 else "variants"
        text = f"{total} {noun}: {len(self.compiled)} compiled, {len(self.cached)} cached"
        return text + (" (nothing to compile)" if not self.compiled else "")


@dataclass(frozen=True, slots=True)
class _Job:
    variant: Variant
    source: str
    key: str


def default_jobs(variants: Sequence[Variant]) -> int:
    """`OZAKI_BUILD_JOBS`, else min(usable CPUs, physical memory / per-compile budget)."""
    configured = environment.build_jobs()
    if configured is not None:
        return configured
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    jobs = cpus or 1
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        memory = 0
    if memory > 0 and variants:
        jobs = min(jobs, memory // max(_MEMORY_PER_JOB[v.arch] for v in variants))
    return max(1, jobs)


class _Progress:
    """One line on stderr per finished variant: `[2/4] built i8_... in 44.1 s`."""

    def __init__(self, total: int, enabled: bool) -> None:
        self._total = total
        self._done = 0
        self._enabled = enabled
        self._lock = threading.Lock()

    def note(self, text: str) -> None:
        if self._enabled:
            with self._lock:
                print(text, file=sys.stderr, flush=True)

    def finished(self, text: str) -> None:
        with self._lock:
            self._done += 1
            line = f"[{self._done}/{self._total}] {text}"
            if self._enabled:
                print(line, file=sys.stderr, flush=True)
        log.debug("%s", line)


def build(variants: Iterable[Variant], out_dir: Path | str | None = None, *,
          jobs: int | None = None, progress: bool = True,
          toolchain: Toolchain | None = None) -> BuildReport:
    """Build every variant not already built; return them all.

    One translation unit per variant, `jobs` nvcc processes at a time (`default_jobs()`).
    Variants already in the cache cost no nvcc call. Safe to run from several processes
    at once on one `out_dir`: each variant is compiled once, the others wait and reuse it.
    When compiles fail, the others still finish (and are cached) and the first failure is
    raised as a CompileError.
    """
    if jobs is not None and jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    ordered = list(dict.fromkeys(variants))  # drop repeats, keep order
    toolchain = toolchain if toolchain is not None else resolve_toolchain()
    out = _out_dir(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    tracker = _Progress(len(ordered), progress)
    artifacts: dict[str, Artifact] = {}
    compiled: list[str] = []
    cached: list[str] = []
    pending: list[_Job] = []
    for variant in ordered:
        source = render(variant, templates_dir=toolchain.templates_dir)
        job = _Job(variant, source, cache_key(variant, toolchain, source))
        artifact = _current_artifact(_artifact_dir(out, variant, job.key), job.key)
        if artifact is None:
            pending.append(job)
        else:
            artifacts[variant.name] = artifact
            cached.append(variant.name)
            tracker.finished(f"cached {variant.name}")

    failures: dict[str, CompileError] = {}
    if pending:
        workers = min(jobs if jobs is not None else default_jobs([j.variant for j in pending]),
                      len(pending))
        tracker.note(f"compiling {len(pending)} of {len(ordered)} variants with nvcc, "
                     f"{workers} at a time, into {out}")
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers,
                                                   thread_name_prefix="nvcc") as pool:
            futures = {pool.submit(_build_locked, job, out, toolchain): job for job in pending}
            for future in concurrent.futures.as_completed(futures):
                name = futures[future].variant.name
                try:
                    artifact, seconds = future.result()
                except CompileError as exc:
                    failures[name] = exc
                    tracker.finished(f"FAILED {name} (log: {exc.log_path})")
                    continue
                artifacts[name] = artifact
                if seconds is None:
                    cached.append(name)
                    tracker.finished(f"cached {name} (built by another process)")
                else:
                    compiled.append(name)
                    tracker.finished(f"built {name} in {seconds:.1f} s")
    if failures:
        first = next(v.name for v in ordered if v.name in failures)
        for name, exc in failures.items():
            if name != first:
                log.error("%s", exc)
        raise failures[first]
    order = {v.name: i for i, v in enumerate(ordered)}
    return BuildReport(
        artifacts=tuple(artifacts[v.name] for v in ordered),
        compiled=tuple(sorted(compiled, key=order.__getitem__)),
        cached=tuple(sorted(cached, key=order.__getitem__)),
    )


@contextlib.contextmanager
def _exclusive_lock(path: Path, what: str) -> Iterator[None]:
    """An exclusive `flock` on `path`, held for the `with` block (across processes)."""
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("waiting for another process building %s", what)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build_locked(job: _Job, out: Path, toolchain: Toolchain) -> tuple[Artifact, float | None]:
    """Compile `job` unless, once the lock is ours, someone else already has.

    Returns the artifact and the compile time in seconds (None: it was already built).
    """
    variant_dir = out / job.variant.name
    variant_dir.mkdir(parents=True, exist_ok=True)
    final = _artifact_dir(out, job.variant, job.key)
    with _exclusive_lock(variant_dir / _LOCK_FILE, job.variant.name):
        artifact = _current_artifact(final, job.key)
        if artifact is not None:
            return artifact, None
        _remove_abandoned_staging(out, job.variant.name)
        return _compile(job, out, final, toolchain)


def _remove_abandoned_staging(out: Path, name: str) -> None:
    """Staging folders of `name` left by a build that died (killed, out of memory).

    Builds of one variant only ever stage while holding its lock, which the caller holds
    now, so every `<name>-*` staging folder is abandoned. Names contain no '-', so the
    prefix cannot match another variant's folders."""
    root = out / _STAGING_DIR
    if not root.is_dir():
        return
    for leftover in root.glob(f"{name}-*"):
        log.info("removing an abandoned build folder %s", leftover)
        shutil.rmtree(leftover, ignore_errors=True)


def _compile(job: _Job, out: Path, final: Path,
             toolchain: Toolchain) -> tuple[Artifact, float]:
    variant = job.variant
    staging_root = out / _STAGING_DIR
    staging_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{variant.name}-", dir=staging_root))
    failed = final.with_name(final.name + ".failed")
    try:
        source_file = f"{variant.name}.cu"
        library_file = f"lib{variant.name}.so"
        write_if_different(staging / source_file, job.source)
        command = nvcc_command(variant, toolchain, source=source_file, output=library_file)
        log_path = staging / _LOG_FILE
        started = time.monotonic()
        with open(log_path, "w") as log_file:
            log_file.write(f"# command, run in the folder of this log:\n{shlex.join(command)}\n\n")
            log_file.flush()
            try:
                result = subprocess.run(command, cwd=staging, stdin=subprocess.DEVNULL,
                                        stdout=log_file, stderr=subprocess.STDOUT, check=False)
            except OSError as exc:
                raise ToolchainError(f"cannot run {command[0]}: {exc}") from exc
            seconds = time.monotonic() - started
            returncode = result.returncode
            if returncode == 0 and not (staging / library_file).is_file():
                log_file.write(f"\n# nvcc exited 0 but wrote no {library_file}\n")
                returncode = -1
            log_file.write(f"\n# exit status {result.returncode} after {seconds:.1f} s\n")
        if returncode != 0:
            shutil.rmtree(failed, ignore_errors=True)
            os.replace(staging, failed)  # keep the source and the full log
            raise CompileError(variant, command, failed / _LOG_FILE, returncode)

        metadata = {
            "abi_version": ARTIFACT_ABI_VERSION,
            "name": variant.name,
            "symbol": variant.symbol,
            "key": job.key,
            "variant": variant.to_dict(),
            "library": library_file,
            "source": source_file,
            "log": _LOG_FILE,
            "nvcc": str(toolchain.nvcc),
            "nvcc_version": toolchain.nvcc_version,
            "cutlass_version": toolchain.cutlass_version,
            "package_version": _package_version(),
            "flags": compile_flags(variant.arch),
            "command": command,
            "build_seconds": round(seconds, 2),
            "built_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
        write_if_different(staging / _METADATA_FILE, json.dumps(metadata, indent=2) + "\n")
        if final.exists():  # incomplete, or a different key with the same prefix
            shutil.rmtree(final)
        os.replace(staging, final)
        shutil.rmtree(failed, ignore_errors=True)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return Artifact.from_directory(final), seconds
