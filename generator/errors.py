"""The generator's typed errors: what went wrong is in the type, the details in the fields."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

__all__ = [
    "GeneratorError",
    "IllegalVariantError",
    "ToolchainError",
    "CompileError",
    "BuildStorageError",
    "CorruptArtifactError",
    "BuildInterrupted",
]

# How many lines at the end of an nvcc log a CompileError message quotes.
LOG_TAIL_LINES = 20


class _Named(Protocol):
    """What an error needs of a variant (any kind: GEMM, stages, prologue): its name.

    A protocol, not an import of the variant classes: the variants raise these errors,
    so this module stays below them.
    """

    @property
    def name(self) -> str: ...


class GeneratorError(Exception):
    """Base class of every error the generator raises on purpose."""


class IllegalVariantError(GeneratorError, ValueError):
    """A GemmVariant whose fields CUTLASS cannot instantiate (the message says which rule)."""


class ToolchainError(GeneratorError):
    """nvcc, the CUTLASS headers, our templates or a build setting is missing or invalid."""


class CompileError(GeneratorError):
    """nvcc failed on a variant's translation unit.

    Carries the variant, the exact command (an argument list) and the path of the full
    log, which survives the failure (it is kept next to where the artifact would have gone).
    """

    def __init__(self, variant: _Named, command: Sequence[str], log_path: Path,
                 returncode: int) -> None:
        self.variant = variant
        self.command = list(command)
        self.log_path = Path(log_path)
        self.returncode = returncode
        super().__init__(self._message())

    def _message(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError as exc:
            lines = [f"(log unreadable: {exc})"]
        tail = "\n".join("    " + line for line in lines[-LOG_TAIL_LINES:])
        return (
            f"nvcc failed (exit {self.returncode}) for variant {self.variant.name}\n"
            f"  command (run in {self.log_path.parent}): {shlex.join(self.command)}\n"
            f"  log: {self.log_path}\n"
            f"  last {min(len(lines), LOG_TAIL_LINES)} lines of the log:\n{tail}"
        )

    def __reduce__(self):
        # Exceptions pickle through their args; rebuild from the fields instead, so a
        # CompileError crosses process boundaries intact.
        return (type(self), (self.variant, self.command, self.log_path, self.returncode))


class BuildStorageError(CompileError):
    """Building a variant failed on the filesystem, not in nvcc: a full disk, a quota, an
    unwritable folder (any OSError while the build writes or moves its files).

    A CompileError so that a build's other variants still finish and callers that report
    compile failures report this one too; its message is one line: the OSError and where
    the log was kept (`log_path`; None when the build failed before it had one).
    """

    def __init__(self, variant: _Named, error: OSError, log_path: Path | None) -> None:
        self.variant = variant
        self.error = error
        self.command = []
        self.log_path = Path(log_path) if log_path is not None else None
        self.returncode = None
        Exception.__init__(self, self._message())

    def _message(self) -> str:
        kept = (f"its log is kept in {self.log_path}" if self.log_path is not None
                else "it failed before writing a log")
        return f"building {self.variant.name} failed: {self.error}; {kept}"

    def __reduce__(self):
        return (type(self), (self.variant, self.error, self.log_path))


class CorruptArtifactError(GeneratorError):
    """A built artifact's files do not match the SHA-256 hashes its artifact.json records
    (a truncated copy, a flipped byte, a file deleted): it must not be loaded.

    `problems` says what differs, one entry per file; the message is one line.
    """

    def __init__(self, directory: Path, problems: Sequence[str]) -> None:
        self.directory = Path(directory)
        self.problems = tuple(problems)
        super().__init__(f"the kernel artifact {self.directory} is corrupted: "
                         + "; ".join(self.problems))

    def __reduce__(self):
        return (type(self), (self.directory, self.problems))


class BuildInterrupted(KeyboardInterrupt):
    """A build stopped by an interrupt (Ctrl-C): its nvcc processes were stopped, their
    staging folders removed and nothing recorded as failed; the variants finished before
    it stay in the cache. A KeyboardInterrupt, so that it ends the caller's work as the
    interrupt would."""

    def __init__(self, built: Sequence[str] = (), stopped: Sequence[str] = ()) -> None:
        self.built, self.stopped = tuple(built), tuple(stopped)
        super().__init__(f"{len(self.built)} variant(s) built and cached, {len(self.stopped)} stopped "
                         "or not started")
