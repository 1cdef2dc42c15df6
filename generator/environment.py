"""Every environment variable the generator reads (the build's settings), read here and
nowhere else. The runtime's own settings are read by ``ozaki_cutlass.config``.

| variable          | meaning                                                        |
| ----------------- | -------------------------------------------------------------- |
| `OZAKI_NVCC`      | the nvcc to run (wins over `CUDA_HOME` and `PATH`)             |
| `CUDA_HOME`       | a CUDA toolkit; nvcc is `$CUDA_HOME/bin/nvcc`                  |
| `CUTLASS_PATH`    | a CUTLASS source tree (holding `include/`) instead of the wheel |
| `OZAKI_CACHE_DIR` | where artifacts are built and looked up                        |
| `OZAKI_BUILD_JOBS`| how many nvcc processes run at once                            |
| `XDG_CACHE_HOME`  | the user cache dir (default `~/.cache`) when installed         |

Values are read when asked for, never at import; an empty value counts as unset.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ToolchainError

__all__ = [
    "nvcc_override",
    "cuda_home",
    "cutlass_path",
    "cache_dir",
    "build_jobs",
    "user_cache_dir",
    "default_out_dir",
    "directory_problem",
    "blocking_part",
]

# The repository root when this package runs from a source checkout (generator/ is
# installed in place as ozaki_cutlass.generator), else None.
_CHECKOUT_MARKER = "pyproject.toml"


def _get(name: str) -> str | None:
    value = os.environ.get(name, "")
    return value or None


def setting(name: str) -> str | None:
    """The raw value of one of the settings above (unset or empty: None), without parsing:
    cheap enough for a memo key on a per-call path."""
    return _get(name)


def _path(name: str) -> Path | None:
    value = _get(name)
    return Path(value).expanduser() if value else None


def nvcc_override() -> Path | None:
    """`OZAKI_NVCC`: the nvcc executable to use."""
    return _path("OZAKI_NVCC")


def cuda_home() -> Path | None:
    """`CUDA_HOME`: the root of a CUDA toolkit."""
    return _path("CUDA_HOME")


def cutlass_path() -> Path | None:
    """`CUTLASS_PATH`: a CUTLASS tree to include instead of the nvidia-cutlass wheel's."""
    return _path("CUTLASS_PATH")


def cache_dir() -> Path | None:
    """`OZAKI_CACHE_DIR`: the artifact directory."""
    return _path("OZAKI_CACHE_DIR")


def build_jobs() -> int | None:
    """`OZAKI_BUILD_JOBS`: parallel nvcc processes (a positive integer)."""
    value = _get("OZAKI_BUILD_JOBS")
    if value is None:
        return None
    try:
        jobs = int(value)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise ToolchainError(f"OZAKI_BUILD_JOBS={value!r} must be a positive integer")
    return jobs


def user_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/ozaki-cutlass`, or `~/.cache/ozaki-cutlass`."""
    base = _path("XDG_CACHE_HOME") or Path.home() / ".cache"
    return base / "ozaki-cutlass"


def source_checkout() -> Path | None:
    """The repository root if this package runs from a source checkout, else None."""
    package_dir = Path(__file__).resolve().parent
    root = package_dir.parent
    if package_dir.name == "generator" and (root / _CHECKOUT_MARKER).is_file():
        return root
    return None


def default_out_dir() -> Path:
    """Where artifacts go: `OZAKI_CACHE_DIR`, else `<repo>/build` in a source checkout,
    else the user cache dir."""
    explicit = cache_dir()
    if explicit is not None:
        return explicit.resolve()
    root = source_checkout()
    if root is not None:
        return root / "build"
    return user_cache_dir()


def blocking_part(path: Path) -> Path | None:
    """The nearest existing part of `path` where it is not a directory (so `path` cannot
    become one), else None. Makes nothing."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    return None if existing.is_dir() else existing


def directory_problem(path: Path) -> str | None:
    """Why artifacts cannot be written in `path` (made with its parents when missing), or
    None: the directory is made, then a file is created in it and removed."""
    import tempfile

    try:
        existing = blocking_part(path)
        if existing is not None:
            return f"{existing} is not a directory" + (" (a file is there)" if existing.is_file() else "")
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot create the directory {path} ({exc.strerror or exc})"
    try:
        with tempfile.TemporaryFile(dir=path, prefix=".ozaki-write-probe-"):
            pass
    except OSError as exc:
        return f"cannot create a file in {path} ({exc.strerror or exc})"
    return None
