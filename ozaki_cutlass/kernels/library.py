"""Loading generated kernel libraries: finding (or building) a variant's artifact, opening
it, binding its entry points and checking its ABI, and turning a non-zero status into a
typed error.

A built artifact is a shared library exporting ``<symbol>_<entry>`` for every entry of its
kind's ABI (``ozaki_cutlass.generator.abi``: one description gives the C prototypes the
templates render and the ctypes signatures bound here). Device pointers and streams are
plain integers here.
"""

from __future__ import annotations

import ctypes
import logging
import math
import threading
from collections.abc import Callable
from pathlib import Path

from ..generator import Arch, Artifact, abi, build, environment, find_artifact, list_artifacts
from ..generator.build import default_jobs
from ..generator.abi import LibraryAbi
from ..generator.errors import ToolchainError

log = logging.getLogger(__name__)


class KernelError(RuntimeError):
    """A generated kernel reported a CUDA or CUTLASS error."""


class UnsupportedProblem(ValueError):
    """A generated kernel cannot run this problem (sizes, alignment, strides)."""


def raise_for_status(status: int, last_error, where: str) -> None:
    """Turn a generated library's status into an exception with its own message:
    STATUS_UNSUPPORTED -> UnsupportedProblem (checked before any CUDA call), any other
    non-zero status -> KernelError."""
    if status == abi.STATUS_OK:
        return
    message = last_error().decode(errors="replace")
    if status == abi.STATUS_UNSUPPORTED:
        raise UnsupportedProblem(f"{where}: {message}")
    raise KernelError(f"{where}: {message}")


def bind(lib, spec: LibraryAbi, symbol: str, names=None) -> dict[str, Callable]:
    """``<symbol>_<entry>`` of ``lib`` for the entries of ``spec`` (those in ``names``, or
    all), each with the spec's ctypes signature: the one place the runtime sets argtypes."""
    functions = {}
    for entry in spec.entries:
        if names is None or entry.name in names:
            fn = getattr(lib, f"{symbol}_{entry.name}")
            fn.restype, fn.argtypes = entry.restype, entry.argtypes
            functions[entry.name] = fn
    return functions


class GeneratedLibrary:
    """A loaded generated library of one ABI kind (``ABI``): its entry points bound, its
    ABI version and variant name checked, and calls whose non-zero status raises with the
    library's own message."""

    ABI: LibraryAbi

    def __init__(self, artifact: Artifact):
        self.artifact = artifact
        self.variant = artifact.variant
        path = Path(artifact.library_path)
        self._lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
        # The identity first: a library of another ABI may lack the other entries.
        identity = bind(self._lib, self.ABI, artifact.symbol, ("abi_version", "name"))
        version = identity["abi_version"]()
        if version != self.ABI.version:
            raise KernelError(f"{path}: ABI version {version} (this runtime speaks {self.ABI.version})")
        built_for = identity["name"]().decode()
        if built_for != self.variant.name:
            raise KernelError(f"{path}: built for variant {built_for!r}, expected {self.variant.name!r}")
        self._fn = bind(self._lib, self.ABI, artifact.symbol)

    @property
    def name(self) -> str:
        return self.variant.name

    def _call(self, entry: str, *args, name_entry: bool = False) -> None:
        """Entry ``entry`` with ``args``; a non-zero status raises (see raise_for_status) with
        the library's name (and the entry's, where ``name_entry``) in the message, formatted
        only then: nothing but the call on the launch path."""
        status = self._fn[entry](*args)
        if status != abi.STATUS_OK:
            raise_for_status(status, self._fn["last_error"], f"{self.name}.{entry}" if name_entry else self.name)

    def _array(self, entry: str, param: str, values):
        """``values`` as the host array parameter ``param`` of ``entry`` takes it."""
        return self.ABI.entry(entry).host_array(param, values)

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


#: Rough seconds one nvcc compile takes while all cores compile (the H200 host: 15 sm_90a
#: kernels in about 70 s with 14 jobs; sm_80 ones build several times faster): only for
#: the first line of a first-use build, which says "about".
COMPILE_SECONDS = {Arch.SM90A: 55.0, Arch.SM80: 20.0}


def build_missing(variants, out_dir=None, *, progress: bool = True) -> int:
    """Build, in one parallel build, every variant of ``variants`` that is not built (the
    first call on a GPU passes every kernel the dispatcher may pick there); returns how
    many were built. A first line says how many, with how many jobs and about how long;
    the build prints a line per kernel. Raises what ``build`` raises (ToolchainError
    without nvcc, CompileError)."""
    variants = list(dict.fromkeys(variants))
    missing = [v for v in variants if find_artifact(v, out_dir) is None]
    if not missing:
        return 0
    jobs = default_jobs(missing)
    waves = math.ceil(len(missing) / jobs)
    about = waves * max(COMPILE_SECONDS.get(v.arch, 55.0) for v in missing)
    log.warning("building %d kernel%s for %s, %d at a time (about %.0f s; `ozaki-cutlass build` does this ahead "
                "of time)", len(missing), "s" if len(missing) > 1 else "", missing[0].arch.value, jobs, about)
    build(missing, out_dir, jobs=jobs, progress=progress)
    return len(missing)
