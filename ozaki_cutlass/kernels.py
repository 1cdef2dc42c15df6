"""Loading generated kernel libraries and calling their C entry points.

A built artifact is a shared library exporting ``<symbol>_run`` and friends (ABI in
``templates/include/ozaki/int8_gemm_entry.h``). This module opens it with ctypes, checks
the ABI and the variant name, and wraps the calls so a non-zero status raises a typed
error carrying the library's own message. Device pointers and streams come from
``ozaki_cutlass._cuda`` (cuda-python) or any framework: they are plain integers here.
"""

from __future__ import annotations

import ctypes
import logging
from functools import lru_cache
from pathlib import Path

from .generator import environment
from .generator.build import Artifact, build, find_artifact, list_artifacts
from .generator.errors import ToolchainError
from .generator.variants import GemmVariant

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


def _open(library: Path, symbol: str, name: str, abi_version: int = ABI_VERSION) -> ctypes.CDLL:
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
        self._lib = _open(Path(artifact.library_path), sym, self.variant.name, self.ABI)
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


class Int8Gemm(GeneratedLibrary):
    """One generated INT8 GEMM (int8 x int8 -> int32, TN, batched), ready to launch."""

    RUN_ARGTYPES = [_int, _int, _int, _int, _ptr, _i64, _i64, _ptr, _i64, _i64, _ptr, _i64, _i64,
                    _ptr, ctypes.c_size_t, _ptr]

    def workspace_size(self, m: int, n: int, k: int, batch: int = 1) -> int:
        return int(self._ws(m, n, k, batch))

    def __call__(self, m, n, k, batch, a, lda, stride_a, b, ldb, stride_b, c, ldc, stride_c,
                 workspace=0, workspace_bytes=0, stream=0) -> None:
        """C[b] = A[b] B[b]^T; pointers and the stream are integer handles."""
        self._check(self._run(m, n, k, batch, a, lda, stride_a, b, ldb, stride_b, c, ldc, stride_c,
                              workspace or None, workspace_bytes, stream or None))


@lru_cache(maxsize=None)
def _loaded(cls: type, directory: str):
    """One ``cls`` (a GeneratedLibrary) per artifact directory and process."""
    return cls(Artifact.from_directory(directory))


def load_library(cls: type, variant, out_dir=None, *, build_missing: bool = True, progress: bool = True):
    """The loaded ``cls`` library of ``variant``, building it first (with progress) when missing."""
    return _loaded(cls, str(locate(variant, out_dir, build_missing=build_missing, progress=progress).directory))


_LOCATED: dict = {}


def locate(variant, out_dir=None, *, build_missing: bool = True, progress: bool = True) -> Artifact:
    """Memoized per process (artifacts are content-addressed and never change in place):
    computing a cache key renders the template and hashes headers, which must not happen
    on every GEMM call. The default directory is keyed by OZAKI_CACHE_DIR, so a process
    that changes it looks in the new one."""
    key = (variant, ("default", environment.setting("OZAKI_CACHE_DIR")) if out_dir is None else str(out_dir))
    art = _LOCATED.get(key)
    if art is None or not art.library_path.is_file():
        art = _locate(variant, out_dir, build_missing=build_missing, progress=progress)
        _LOCATED[key] = art
    return art


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


def load_int8_gemm(variant: GemmVariant, out_dir=None, *, build_missing: bool = True,
                   progress: bool = True) -> Int8Gemm:
    """The loaded kernel of ``variant``, building it first (with progress) when missing."""
    return load_library(Int8Gemm, variant, out_dir, build_missing=build_missing, progress=progress)


class GroupGemm(GeneratedLibrary):
    """One generated fused modulus-group GEMM (partial-CRT epilogue; sm_90a or sm_80, one C
    ABI, group_gemm_sm90.h): for consecutive groups of G moduli, every modulus's residues
    concatenated along k, group q's X = CRT of (A_h B_h^T mod m_h over its moduli h) mod
    their product, q * stride_x elements into x. One launch for all groups where the
    kernel batches them (sm_90a, G = 1), else one per group."""

    RUN_ARGTYPES = [_int, _int, _int, _int, _int, _ptr, _i64, _ptr, _i64, _ptr, _i64, _i64,
                    ctypes.POINTER(ctypes.c_uint32), _ptr, ctypes.c_size_t, _ptr]
    WORKSPACE_ARGTYPES = [_int, _int, _int, _int, _int]
    ABI = GROUP_ABI_VERSION

    @property
    def group_size(self) -> int:
        return self.variant.group_size

    def workspace_size(self, m: int, n: int, k_pad: int, groups: int = 1) -> int:
        return int(self._ws(m, n, k_pad, self.group_size, groups))

    def __call__(self, m, n, k_pad, moduli, a, lda, b, ldb, x, ldx, stride_x=0, workspace=0,
                 workspace_bytes=0, stream=0) -> None:
        """``moduli``: groups * G values, group q's G moduli at [q*G, (q+1)*G)."""
        groups, rest = divmod(len(moduli), self.group_size)
        if rest or not groups:
            raise UnsupportedProblem(f"{self.name}: {len(moduli)} moduli do not make whole groups of "
                                     f"{self.group_size}")
        mods = (ctypes.c_uint32 * len(moduli))(*moduli)
        self._check(self._run(m, n, k_pad, self.group_size, groups, a, lda, b, ldb, x, ldx, stride_x,
                              mods, workspace or None, workspace_bytes, stream or None))


def load_group_gemm(variant: GemmVariant, out_dir=None, *, progress: bool = True) -> GroupGemm:
    """The loaded fused kernel of ``variant``, building it first (with progress) when missing."""
    return load_library(GroupGemm, variant, out_dir, progress=progress)
