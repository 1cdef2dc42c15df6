"""What a build runs besides the variant: nvcc, the CUTLASS headers, our templates and
headers, and the nvcc command line.

`resolve_toolchain()` finds them once (running `nvcc --version` once per process and nvcc
file) and returns a frozen `Toolchain`; everything a cache key needs of the toolchain is
in it, including the hash of every one of our headers and the headers each includes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import posixpath
import re
import shutil
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from . import environment
from .arch import Arch
from .errors import ToolchainError
from .render import default_templates_dir
from .variants import Variant

__all__ = [
    "COMMON_FLAGS",
    "ARCH_FLAGS",
    "Header",
    "Toolchain",
    "resolve_toolchain",
    "locate_nvcc",
    "compile_flags",
    "nvcc_command",
]

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
    def library_dirs(self) -> tuple[Path, ...]:
        """Where the linker finds the CUDA runtime when nvcc's own profile does not say: an
        nvcc of NVIDIA's wheels keeps it in `<top>/lib`, where its nvcc.profile does not
        look (it names `<top>/lib64`). The same static runtime a toolkit links: not part
        of the cache key, as the include folders are not."""
        wheel_lib = self.nvcc.parent.parent / "lib"
        if (wheel_lib / "libcudart_static.a").is_file() and not (self.nvcc.parent.parent / "lib64").exists():
            return (wheel_lib,)
        return ()

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
    return locate_nvcc(explicit)[0]


def locate_nvcc(explicit: Path | str | None = None) -> tuple[Path, str]:
    """(nvcc, the setting that chose it). In order: `explicit`, `OZAKI_NVCC`,
    `$CUDA_HOME/bin/nvcc`, the NVIDIA toolkit wheels (`pip install ozaki-cutlass[nvcc]`,
    found by cuda-pathfinder), `nvcc` on PATH, /usr/local/cuda/bin/nvcc. Raises
    ToolchainError when none is there."""
    if explicit is not None:
        return _executable(Path(explicit), "the nvcc argument"), "the nvcc argument"
    override = environment.nvcc_override()
    if override is not None:
        return _executable(override, "OZAKI_NVCC"), "OZAKI_NVCC"
    cuda_home = environment.cuda_home()
    if cuda_home is not None:
        return _executable(cuda_home / "bin" / "nvcc", "CUDA_HOME"), "CUDA_HOME"
    wheel = _wheel_nvcc()
    if wheel is not None:
        return wheel, "the NVIDIA toolkit wheels (cuda-pathfinder)"
    on_path = shutil.which("nvcc")
    if on_path is not None:
        return Path(on_path), "PATH"
    if _FALLBACK_NVCC.is_file():
        return _FALLBACK_NVCC, str(_FALLBACK_NVCC.parent.parent)
    raise ToolchainError(
        "nvcc not found: pip install 'ozaki-cutlass[nvcc]' (NVIDIA's toolkit wheels), set OZAKI_NVCC or "
        "CUDA_HOME, or put nvcc on PATH"
    )


def _wheel_nvcc() -> Path | None:
    """The nvcc of NVIDIA's pip wheels (nvidia-cuda-nvcc with its crt, nvvm, runtime and
    cccl wheels), as cuda-pathfinder finds it inside site-packages; None without them.
    cuda-pathfinder also looks at CUDA_HOME and conda; only a wheel's nvcc is taken here,
    so that PATH keeps its place after it."""
    try:
        from cuda import pathfinder
    except ImportError:
        return None
    try:
        found = pathfinder.find_nvidia_binary_utility("nvcc")
    except Exception:  # noqa: BLE001 - an older pathfinder, or one that cannot answer
        return None
    if not found:
        return None
    path = Path(found)
    if "site-packages" not in path.parts and "dist-packages" not in path.parts:
        return None
    return path.absolute() if path.is_file() and os.access(path, os.X_OK) else None


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


#: The oldest CUTLASS major version the templates take: they are written against CUTLASS 4
#: (the nvidia-cutlass 4.2.0 wheel the package depends on); an older tree would fail in
#: nvcc, variant by variant, after minutes of compiling.
MIN_CUTLASS_MAJOR = 4


def _cutlass_version(root: Path) -> str:
    """The version of the CUTLASS tree at `root` (ToolchainError where it is older than
    MIN_CUTLASS_MAJOR or does not say)."""
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
    version = ".".join(parts)
    if int(parts[0]) < MIN_CUTLASS_MAJOR:
        raise ToolchainError(f"CUTLASS {version} at {root} is too old: the kernels need CUTLASS "
                             f"{MIN_CUTLASS_MAJOR} or newer (the nvidia-cutlass wheel this package installs: unset "
                             "CUTLASS_PATH to use it)")
    return version


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


# --- the command line -------------------------------------------------------------------
def compile_flags(arch: Arch) -> list[str]:
    """nvcc flags for `arch`, include directories aside."""
    return [*ARCH_FLAGS[arch], *COMMON_FLAGS]


def nvcc_command(variant: Variant, toolchain: Toolchain, *, source: str,
                 output: str) -> list[str]:
    """The nvcc argument list that compiles `source` into the shared library `output`."""
    includes = [f"-I{directory}" for directory in toolchain.include_dirs]
    libraries = [f"-L{directory}" for directory in toolchain.library_dirs]
    return [str(toolchain.nvcc), *compile_flags(variant.arch), *includes, *libraries, "-o", output, source]
