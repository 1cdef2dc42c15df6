"""Variants -> artifacts: parallel nvcc builds under a lock, with a progress display.

`build()` compiles one translation unit per variant in parallel: by default as many nvcc
processes as there are CPUs, capped by memory (about 3 GB per sm_90a compile, so 4 GiB per
job are budgeted; 2 GiB for sm_80), or `OZAKI_BUILD_JOBS`. Where an artifact lives and
what its key covers is artifact.py's; this module adds, in an output directory:

    <out>/<name>/.lock                  serializes builds of one variant across processes
    <out>/<name>/.lock.owner            the lock instead where the filesystem has no flock
                                        (locks.py)
    <out>/.staging/<name>-<random>/     builds in progress, moved into place when done

Durability: every file of an artifact is fsynced, and its SHA-256 recorded in
artifact.json, before the staging folder is renamed into place (and the folder holding it
fsynced after), so a crash or a full disk leaves either no artifact or a whole one, and a
file damaged later is caught by `Artifact.verify()`. A build that fails, in nvcc or on the
filesystem (a full disk: any OSError while it writes), keeps its source and log in
`<key[:16]>.failed/` next to where the artifact would have gone; the error says where.

Interrupts: Ctrl-C (SIGINT to the process, or to its process group, nvcc included) stops
a build at once: its running nvcc processes are stopped, the queued ones never start, their
staging folders are removed and nothing is recorded as failed; the variants finished
before stay in the cache, and `BuildInterrupted` (a KeyboardInterrupt) says how many.

Permissions: folders and files are created with the modes a plain mkdir and open give,
0777 and 0666 less the umask (nvcc's library: 0777 less the umask), never mkdtemp's
private 0700. With the usual umask 022 every user can read and load the kernels of a
shared cache and only its owner writes there; for a cache several users build into, use
umask 002 and a group-owned setgid folder; umask 077 keeps a cache private.
"""

from __future__ import annotations

import concurrent.futures
import errno
import json
import logging
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import environment
from .arch import Arch
from .artifact import (
    LOG_FILE,
    METADATA_FILE,
    Artifact,
    artifact_dir,
    artifact_metadata,
    cache_key,
    current_artifact,
    file_sha256,
    resolve_out_dir,
)
from .errors import BuildInterrupted, BuildStorageError, CompileError, ToolchainError
from .locks import exclusive_lock
from .render import render
from .toolchain import Toolchain, nvcc_command, resolve_toolchain
from .variants import Variant

__all__ = ["BuildReport", "build", "default_jobs"]

log = logging.getLogger(__name__)

_STAGING_DIR = ".staging"
_LOCK_FILE = ".lock"
_MEMORY_PER_JOB: Mapping[Arch, int] = {Arch.SM90A: 4 << 30, Arch.SM80: 2 << 30}


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


class _Stop:
    """The interrupt of one build() call: the nvcc processes it runs, so that they can be
    stopped, and whether it was (a worker waiting for a lock or about to start nvcc gives
    up with BuildInterrupted)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen] = set()
        self.stopped = False

    def check(self) -> None:
        if self.stopped:
            raise BuildInterrupted()

    def run(self, command: Sequence[str], **kwargs) -> int:
        """The return code of `command` (subprocess.Popen's keyword arguments), run so that
        stop() can end it."""
        with self._lock:
            self.check()
            proc = subprocess.Popen(command, **kwargs)
            self._running.add(proc)
        try:
            return proc.wait()
        finally:
            with self._lock:
                self._running.discard(proc)

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            running = list(self._running)
        for proc in running:
            proc.terminate()
        for proc in running:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


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
    raised as a CompileError. An interrupt stops it (see Interrupts in the module's
    docstring): BuildInterrupted.
    """
    if jobs is not None and jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    ordered = list(dict.fromkeys(variants))  # drop repeats, keep order
    toolchain = toolchain if toolchain is not None else resolve_toolchain()
    out = resolve_out_dir(out_dir)
    why = environment.directory_problem(out)
    if why is not None:  # the kernel cache, before any work (OZAKI_CACHE_DIR a file, read-only, ...)
        setting, fix = (("out_dir", "pass a writable directory") if out_dir is not None else
                        ("the kernel cache (OZAKI_CACHE_DIR, else the default)",
                         "set OZAKI_CACHE_DIR to a writable directory"))
        raise ToolchainError(f"{setting} {out} cannot hold the kernels: {why}; {fix}")

    tracker = _Progress(len(ordered), progress)
    artifacts: dict[str, Artifact] = {}
    compiled: list[str] = []
    cached: list[str] = []
    pending: list[_Job] = []
    for variant in ordered:
        source = render(variant, templates_dir=toolchain.templates_dir)
        job = _Job(variant, source, cache_key(variant, toolchain, source))
        artifact = current_artifact(artifact_dir(out, variant, job.key), job.key)
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
        stop = _Stop()
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nvcc")
        try:
            futures = {pool.submit(_build_locked, job, out, toolchain, stop): job for job in pending}
            for future in concurrent.futures.as_completed(futures):
                name = futures[future].variant.name
                try:
                    artifact, seconds = future.result()
                except CompileError as exc:  # BuildStorageError too: a full disk, ...
                    failures[name] = exc
                    where = f" (log: {exc.log_path})" if exc.log_path is not None else ""
                    tracker.finished(f"FAILED {name}{where}")
                    continue
                artifacts[name] = artifact
                if seconds is None:
                    cached.append(name)
                    tracker.finished(f"cached {name} (built by another process)")
                else:
                    compiled.append(name)
                    tracker.finished(f"built {name} in {seconds:.1f} s")
        except KeyboardInterrupt:  # Ctrl-C here, or in nvcc (a worker's BuildInterrupted)
            tracker.note("interrupted: stopping the nvcc processes")
            stop.stop()
            pool.shutdown(wait=True, cancel_futures=True)
            raise BuildInterrupted(built=[v.name for v in ordered if v.name in artifacts],
                                   stopped=[j.variant.name for j in pending if j.variant.name not in artifacts]
                                   ) from None
        finally:
            pool.shutdown(wait=True)
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


# --- one variant ------------------------------------------------------------------------
def _build_locked(job: _Job, out: Path, toolchain: Toolchain, stop: _Stop) -> tuple[Artifact, float | None]:
    """Compile `job` unless, once the lock is ours, someone else already has.

    Returns the artifact and the compile time in seconds (None: it was already built).
    An OSError (a full disk, an unwritable folder) is a BuildStorageError; `stop`'s
    interrupt a BuildInterrupted.
    """
    variant_dir = out / job.variant.name
    final = artifact_dir(out, job.variant, job.key)
    try:
        variant_dir.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(variant_dir / _LOCK_FILE, job.variant.name, give_up=stop.check):
            artifact = current_artifact(final, job.key)
            if artifact is not None:
                return artifact, None
            _remove_abandoned_staging(out, job.variant.name)
            return _compile(job, out, final, toolchain, stop)
    except OSError as exc:  # before the build had a log; _compile's own are BuildStorageErrors
        raise BuildStorageError(job.variant, exc, None) from exc


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


def _make_staging(root: Path, name: str) -> Path:
    """A new folder `<root>/<name>-<random>`, made by mkdir so the umask sets its mode
    (mkdtemp's would be 0700: see Permissions in the module docstring)."""
    root.mkdir(parents=True, exist_ok=True)
    while True:
        folder = root / f"{name}-{secrets.token_hex(4)}"
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return folder


def _write_synced(path: Path, text: str) -> None:
    """A new file holding `text`, on disk when this returns."""
    with open(path, "x") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


def _fsync(path: Path, *, directory: bool = False) -> None:
    """Flush `path` (a file, or a folder's entries) to disk. Some filesystems cannot fsync
    a folder (EINVAL, ENOTSUP); that alone is not an error."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    except OSError as exc:
        if not directory or exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def _compile(job: _Job, out: Path, final: Path,
             toolchain: Toolchain, stop: _Stop) -> tuple[Artifact, float]:
    """Compile `job` in a staging folder and move it to `final`; on failure keep its source
    and log in `<final>.failed` (CompileError; BuildStorageError for an OSError); on an
    interrupt remove it (BuildInterrupted)."""
    variant = job.variant
    failed = final.with_name(final.name + ".failed")
    staging = _make_staging(out / _STAGING_DIR, variant.name)
    keep_staging = False
    try:
        return _compile_in(staging, job, final, failed, toolchain, stop)
    except OSError as exc:  # a full disk, a quota, ...: keep the log, say where
        log_path, keep_staging = _keep_failed(staging, failed)
        raise BuildStorageError(variant, exc, log_path) from exc
    finally:
        if not keep_staging and staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _keep_failed(staging: Path, failed: Path) -> tuple[Path | None, bool]:
    """Move a failed build's folder to `failed`; (its log or None, whether the staging
    folder must stay because the move failed too: then the log is kept there)."""
    try:
        shutil.rmtree(failed, ignore_errors=True)
        os.replace(staging, failed)
    except OSError as exc:
        log.debug("cannot move %s to %s: %s", staging, failed, exc)
        kept, keep_staging = staging, True
    else:
        kept, keep_staging = failed, False
    log_path = kept / LOG_FILE
    return (log_path if log_path.is_file() else None), keep_staging


def _compile_in(staging: Path, job: _Job, final: Path, failed: Path,
                toolchain: Toolchain, stop: _Stop) -> tuple[Artifact, float]:
    variant = job.variant
    source_file = f"{variant.name}.cu"
    library_file = f"lib{variant.name}.so"
    _write_synced(staging / source_file, job.source)
    command = nvcc_command(variant, toolchain, source=source_file, output=library_file)
    log_path = staging / LOG_FILE
    started = time.monotonic()
    with open(log_path, "w") as log_file:
        log_file.write(f"# command, run in the folder of this log:\n{shlex.join(command)}\n\n")
        log_file.flush()
        try:
            status = stop.run(command, cwd=staging, stdin=subprocess.DEVNULL, stdout=log_file,
                              stderr=subprocess.STDOUT)
        except OSError as exc:
            raise ToolchainError(f"cannot run {command[0]}: {exc}") from exc
        if stop.stopped or status == -signal.SIGINT:  # stopped, or Ctrl-C reached nvcc: not a failure
            raise BuildInterrupted()
        seconds = time.monotonic() - started
        returncode = status
        if returncode == 0 and not (staging / library_file).is_file():
            log_file.write(f"\n# nvcc exited 0 but wrote no {library_file}\n")
            returncode = -1
        log_file.write(f"\n# exit status {status} after {seconds:.1f} s\n")
        log_file.flush()
        os.fsync(log_file.fileno())
    if returncode != 0:
        shutil.rmtree(failed, ignore_errors=True)
        os.replace(staging, failed)  # keep the source and the full log
        raise CompileError(variant, command, failed / LOG_FILE, returncode)

    _fsync(staging / library_file)
    files = (library_file, source_file, LOG_FILE)
    metadata = artifact_metadata(variant, key=job.key, toolchain=toolchain,
                                 library=library_file, source=source_file,
                                 command=command, seconds=seconds,
                                 sha256={name: file_sha256(staging / name) for name in files})
    _write_synced(staging / METADATA_FILE, json.dumps(metadata, indent=2) + "\n")
    _fsync(staging, directory=True)
    if final.exists():  # corrupted, incomplete, or a different key with the same prefix
        shutil.rmtree(final)
    os.replace(staging, final)
    _fsync(final.parent, directory=True)
    shutil.rmtree(failed, ignore_errors=True)
    return Artifact.from_directory(final), seconds
