"""Loading generated kernel libraries: finding (or building) a variant's artifact, opening
it, checking its ABI, and turning a non-zero status into a typed error.

A built artifact is a shared library exporting ``<symbol>_run`` and friends (ABI in
``templates/include/ozaki/int8_gemm_entry.h``). This module opens it with ctypes, checks
the ABI and the variant name, and wraps the calls so a non-zero status raises a typed
error carrying the library's own message. Device pointers and streams come from
``ozaki_cutlass._cuda`` (cuda-python) or any framework: they are plain integers here.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from pathlib import Path

from ..generator import environment
from ..generator import Artifact, build, find_artifact, list_artifacts
from ..generator.errors import ToolchainError

log = logging.getLogger(__name__)

ABI_VERSION = 1
GROUP_ABI_VERSION = 2  # the fused kernels (ozaki::kGroupAbiVersion, group_gemm_abi.h)
_i64 = ctypes.c_int64
_int = ctypes.c_int
_ptr = ctypes.c_void_p


class KernelError(RuntimeError):
    """A generated kernel reported a CUDA or CUTLASS error."""


class UnsupportedProblem(ValueError):
    """A generated kernel cannot run this problem (sizes, alignment, strides)."""


def raise_for_status(status: int, last_error, where: str) -> None:
    """Turn a generated library's status into an exception with its own message:
    1 -> UnsupportedProblem (checked before any CUDA call), 2 -> KernelError."""
    if status == 0:
        return
    message = last_error().decode(errors="replace")
    if status == 1:
        raise UnsupportedProblem(f"{where}: {message}")
    raise KernelError(f"{where}: {message}")


def open_library(library: Path, symbol: str, name: str, abi_version: int = ABI_VERSION) -> ctypes.CDLL:
    """``library`` opened with ctypes after checking its ABI version and variant name."""
    lib = ctypes.CDLL(str(library), mode=ctypes.RTLD_LOCAL)
    abi = getattr(lib, f"{symbol}_abi_version")
    abi.restype, abi.argtypes = _int, []
    if abi() != abi_version:
        raise KernelError(f"{library}: ABI version {abi()} (this runtime speaks {abi_version})")
    got = getattr(lib, f"{symbol}_name")
    got.restype, got.argtypes = ctypes.c_char_p, []
    if got().decode() != name:
        raise KernelError(f"{library}: built for variant {got().decode()!r}, expected {name!r}")
    err = getattr(lib, f"{symbol}_last_error")
    err.restype, err.argtypes = ctypes.c_char_p, []
    return lib


class GeneratedLibrary:
    """A loaded generated library: ``<symbol>_run`` with its argument types, the
    workspace query, and status checking with the library's own message."""

    RUN_ARGTYPES: list = []
    WORKSPACE_ARGTYPES = [_int, _int, _int, _int]
    ABI = ABI_VERSION

    def __init__(self, artifact: Artifact):
        self.artifact = artifact
        self.variant = artifact.variant
        sym = artifact.symbol
        self._lib = open_library(Path(artifact.library_path), sym, self.variant.name, self.ABI)
        self._run = getattr(self._lib, f"{sym}_run")
        self._run.restype, self._run.argtypes = _int, self.RUN_ARGTYPES
        if self.WORKSPACE_ARGTYPES is not None:  # None: a library without a workspace query
            self._ws = getattr(self._lib, f"{sym}_workspace_size")
            self._ws.restype, self._ws.argtypes = ctypes.c_size_t, self.WORKSPACE_ARGTYPES
        self._err = getattr(self._lib, f"{sym}_last_error")

    @property
    def name(self) -> str:
        return self.variant.name

    def _check(self, status: int) -> None:
        raise_for_status(status, self._err, self.name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


class LoadedKernels:
    """The process's memory of kernel libraries: where each variant's artifact is (finding
    it renders the template and hashes headers, which must not happen on every GEMM call;
    artifacts are content-addressed and never change in place), each library opened (one
    per artifact directory and class), and which library a (class, variant, directory)
    loaded, so that a GEMM call's lookup is one dictionary read. :meth:`clear` forgets all
    three (loaded libraries stay mapped while something holds them)."""

    def __init__(self):
        self._located: dict = {}
        self._opened: dict = {}
        self._loaded: dict = {}
        self._lock = threading.Lock()

    @staticmethod
    def _where(out_dir) -> tuple:
        """The directory part of a key: the default one is keyed by OZAKI_CACHE_DIR, so a
        process that changes it looks in the new one."""
        return ("default", environment.setting("OZAKI_CACHE_DIR")) if out_dir is None else ("dir", str(out_dir))

    def load(self, cls: type, variant, out_dir=None, *, build_missing: bool = True, progress: bool = True):
        """The opened ``cls`` library of ``variant`` (see :func:`load_library`)."""
        key = (cls, variant, self._where(out_dir))
        lib = self._loaded.get(key)
        if lib is None:
            art = self.locate(variant, out_dir, build_missing=build_missing, progress=progress)
            lib = self._loaded[key] = self.open(cls, str(art.directory))
        return lib

    def locate(self, variant, out_dir=None, *, build_missing: bool = True, progress: bool = True) -> Artifact:
        """The artifact of ``variant`` (see :func:`locate`)."""
        key = (variant, self._where(out_dir))
        art = self._located.get(key)
        if art is None or not art.library_path.is_file():
            art = _locate(variant, out_dir, build_missing=build_missing, progress=progress)
            self._located[key] = art
        return art

    def open(self, cls: type, directory: str):
        """One ``cls`` (a GeneratedLibrary) per artifact directory and process."""
        key = (cls, directory)
        lib = self._opened.get(key)
        if lib is None:
            with self._lock:
                lib = self._opened.get(key)
                if lib is None:
                    lib = self._opened[key] = cls(Artifact.from_directory(directory))
        return lib

    def clear(self) -> None:
        with self._lock:
            self._located.clear()
            self._opened.clear()
            self._loaded.clear()


#: The one LoadedKernels of the process.
KERNELS = LoadedKernels()


def load_library(cls: type, variant, out_dir=None, *, build_missing: bool = True, progress: bool = True):
    """The loaded ``cls`` library of ``variant``, building it first (with progress) when missing."""
    return KERNELS.load(cls, variant, out_dir, build_missing=build_missing, progress=progress)


def locate(variant, out_dir=None, *, build_missing: bool = True, progress: bool = True) -> Artifact:
    """The artifact of ``variant``, remembered for the process (:data:`KERNELS`)."""
    return KERNELS.locate(variant, out_dir, build_missing=build_missing, progress=progress)


def _locate(variant, out_dir=None, *, build_missing: bool = True, progress: bool = True) -> Artifact:
    """The artifact of ``variant``: built for the current sources and toolchain (building
    it, with progress, when missing). Without a toolchain (no nvcc or CUTLASS here) an
    artifact built elsewhere for the same variant and ABI is used, with a warning, since
    whether it is current cannot be checked."""
    try:
        art = find_artifact(variant, out_dir)
    except ToolchainError as exc:
        found = [a for a in list_artifacts(out_dir) if a.variant == variant]
        if not found:
            raise ToolchainError(f"{variant.name} is not built and cannot be built here: {exc}") from exc
        art = max(found, key=lambda a: a.library_path.stat().st_mtime)
        log.warning("using %s without checking it is current (%s)", art.directory, exc)
        return art
    if art is None:
        if not build_missing:
            raise FileNotFoundError(f"{variant.name} is not built in {out_dir or 'the default cache'}; "
                                    f"run: ozaki-cutlass build --arch {variant.arch.value} --variants '{variant.name}'")
        log.info("building %s", variant.name)
        (art,) = build([variant], out_dir, progress=progress).artifacts
    return art
