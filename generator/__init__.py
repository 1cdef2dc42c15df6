"""Generator: kernel variants, Jinja2 rendering and nvcc builds (installed as ozaki_cutlass.generator).

Data flows one way: `GemmVariant` -> `render()` -> `build()` -> `Artifact` (a shared
library plus its `artifact.json`). Nothing here imports the runtime.
"""

from .arch import Arch
from .artifact import ARTIFACT_ABI_VERSION, Artifact, cache_key, find_artifact, list_artifacts, load_metadata
from .build import BuildReport, build
from .environment import default_out_dir
from .errors import (BuildInterrupted, BuildStorageError, CompileError, CorruptArtifactError, GeneratorError,
                     IllegalVariantError, ToolchainError)
from .gemm_catalog import catalog, default_variant, variants_named
from .render import render, write_if_different
from .toolchain import Toolchain, resolve_toolchain
from .variants import Epilogue, GemmVariant, Schedule, StagesVariant

__all__ = [
    "ARTIFACT_ABI_VERSION",
    "Arch",
    "Artifact",
    "BuildInterrupted",
    "BuildReport",
    "BuildStorageError",
    "CompileError",
    "CorruptArtifactError",
    "Epilogue",
    "GemmVariant",
    "GeneratorError",
    "IllegalVariantError",
    "Schedule",
    "StagesVariant",
    "Toolchain",
    "ToolchainError",
    "build",
    "cache_key",
    "catalog",
    "variants_named",
    "default_out_dir",
    "default_variant",
    "find_artifact",
    "list_artifacts",
    "load_metadata",
    "render",
    "resolve_toolchain",
    "write_if_different",
]
