"""``ozaki-cutlass doctor``: what this machine gives the package, one line each: the
package, Python, the GPU and its driver, the nvcc found and where from, CUTLASS, cuBLAS,
the array libraries, the kernel cache, the tuning table, the settings from the environment
(each value, and what is wrong with one that cannot be used), and which kernels the
dispatcher may pick here are built or missing. It changes nothing and needs no GPU (it
says what it did not find)."""

from __future__ import annotations

import importlib.util
import os
import platform
import sys
from pathlib import Path

from .. import __version__, config
from ..device.arch import arch_for_capability, compute_capability
from ..device.driver import driver_refusal
from ..device.cublas import NativeUnavailable, library, version
from ..dispatch import TuningTableError, kernel_targets, load_table
from ..generator import Arch, ToolchainError, default_out_dir, find_artifact, resolve_toolchain
from ..generator.environment import blocking_part, build_jobs
from ..generator.toolchain import locate_nvcc

__all__ = ["doctor_main"]


def _nvcc_source() -> str:
    try:
        return locate_nvcc()[1]
    except ToolchainError:
        return "?"


def _gpu() -> tuple[str, Arch | None]:
    capability = compute_capability(0)
    if capability is None:
        try:
            from cuda.bindings import driver as cu

            cu.cuInit(0)
            status, cuda = cu.cuDriverGetVersion()
            why = driver_refusal(int(cuda)) if status == cu.CUresult.CUDA_SUCCESS else None
        except Exception:  # noqa: BLE001 - no driver library, or broken bindings: the line below says so
            why = None
        if why is not None:
            return f"none usable: {why}", None
        return "none usable (no driver, no GPU or no cuda-bindings): the GPU path is off", None
    arch = arch_for_capability(*capability)
    name = "?"
    try:
        from cuda.bindings import driver as cu

        _, dev = cu.cuDeviceGet(0)
        _, raw = cu.cuDeviceGetName(64, dev)
        name = raw.split(b"\0", 1)[0].decode(errors="replace")
        _, cuda = cu.cuDriverGetVersion()
        name += f", driver CUDA {cuda // 1000}.{cuda % 1000 // 10}"
        if driver_refusal(int(cuda)) is not None:
            name += " (too old: the GPU path needs CUDA 13.0+)"
    except Exception:  # noqa: BLE001 - the capability answered; the name is a courtesy
        pass
    kernels = f"builds {arch.value}" if arch is not None else "below 8.0: not supported"
    return f"{name}, compute capability {capability[0]}.{capability[1]} ({kernels})", arch


def _module(name: str) -> str:
    if importlib.util.find_spec(name) is None:
        return "not installed"
    module = __import__(name)
    return getattr(module, "__version__", "installed")


def _cache_state(out: Path) -> str:
    """What the kernel cache folder is, without making it."""
    if out.is_dir():
        return "exists" if os.access(out, os.W_OK | os.X_OK) else "exists, not writable: builds fail there"
    existing = blocking_part(out)
    if existing is not None:
        return f"unusable: {existing} is not a directory (set OZAKI_CACHE_DIR to a writable one)"
    return "not made yet"


def _settings() -> list[tuple[str, str]]:
    """The environment's settings of the runtime and the build, each checked."""
    def shown(name: str, read) -> str:
        value = os.environ.get(name) or None
        try:
            got = read()
        except (ValueError, ToolchainError) as exc:
            return f"REFUSED: {exc}"
        return f"{value!r}: {got}" if value is not None else f"unset: {got}"

    rows = [(name, shown(name, lambda read=read: "on" if read() else "off")) for name, read in config.SWITCHES.items()]
    rows.append(("OZAKI_KARATSUBA_MIN", shown("OZAKI_KARATSUBA_MIN", config.karatsuba_min)))
    rows.append(("OZAKI_BUILD_JOBS", shown("OZAKI_BUILD_JOBS", lambda: build_jobs() or "by CPUs and memory")))
    return rows


def doctor_main(args) -> int:
    rows = [("ozaki-cutlass", f"{__version__} at {Path(__file__).resolve().parents[1]}"),
            ("python", f"{platform.python_version()} ({sys.executable})")]
    gpu, arch = _gpu()
    rows.append(("GPU 0", gpu))
    try:
        toolchain = resolve_toolchain()
        release = next((line for line in toolchain.nvcc_version.splitlines() if "release" in line), "")
        rows += [("nvcc", f"{toolchain.nvcc} (from {_nvcc_source()}); {release.strip()}"),
                 ("CUTLASS", f"{toolchain.cutlass_version} at {toolchain.cutlass_root}")]
    except ToolchainError as exc:
        toolchain = None
        rows.append(("nvcc / CUTLASS", f"missing: {exc}"))
    try:
        library()
        from importlib.metadata import version as package_version
        rows.append(("cuBLAS", "libcublas {}.{}.{} (through nvmath-python {})".format(
            *version(), package_version("nvmath-python"))))
    except NativeUnavailable as exc:
        rows.append(("cuBLAS", f"not found: native DGEMM is off ({exc})"))
    except Exception as exc:  # noqa: BLE001 - a library that loads but cannot answer
        rows.append(("cuBLAS", f"found, but did not answer: {exc}"))
    rows += [("CuPy", _module("cupy")), ("PyTorch", _module("torch"))]
    out = default_out_dir()
    rows.append(("kernel cache", f"{out} ({_cache_state(out)})"))
    try:
        table, source = load_table()
        rows.append(("tuning table", f"{source} ({len(table.get('entries', []))} entries)" if table else
                     "none: the built-in candidates"))
    except TuningTableError as exc:
        rows.append(("tuning table", f"REFUSED: {exc}"))
    rows += _settings()
    if arch is not None and toolchain is not None:
        try:
            targets = kernel_targets(arch, load_table())
            missing = [v.name for v in targets if find_artifact(v, out) is None]
            state = "all built" if not missing else f"{len(missing)} missing (the first call builds them, or run " \
                                                    f"`ozaki-cutlass build`): {', '.join(missing)}"
            rows.append(("kernels", f"{len(targets)} the dispatcher may pick on {arch.value}: {state}"))
        except (ToolchainError, TuningTableError, OSError) as exc:
            rows.append(("kernels", f"cannot tell: {exc}"))
    elif arch is None:
        rows.append(("kernels", "no GPU: nothing to build for here (`ozaki-cutlass build --arch ...` builds anyway)"))
    else:
        rows.append(("kernels", "no toolchain: built kernels are used as found, nothing can be built"))
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    return 0
