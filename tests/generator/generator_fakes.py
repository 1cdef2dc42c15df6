"""Fakes for generator tests: an nvcc that compiles nothing, tiny templates, a CUTLASS stub.

A plain module (not conftest.py) so that tests/test_cli.py can load it too.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

FAKE_NVCC_SCRIPT = Path(__file__).with_name("fake_nvcc.py")
FAKE_VERSION = "nvcc: fake\nCuda compilation tools, release 13.0, V13.0.88"


class FakeNvcc:
    """An executable `nvcc` in `directory`; `configure()` changes how it behaves."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / "nvcc"
        self.call_log = directory / "calls.jsonl"
        self.configure()

    def configure(self, *, version: str = FAKE_VERSION, fail: str = "", fail_if: str = "",
                  sleep: float = 0.0) -> None:
        config = {"version": version, "fail": fail, "fail_if": fail_if, "sleep": sleep,
                  "calls": str(self.call_log)}
        self.path.with_name("nvcc.json").write_text(json.dumps(config))
        # Replace the executable too (a new inode), as an nvcc upgrade would: the
        # generator caches `nvcc --version` per nvcc file.
        staged = self.path.with_name("nvcc.new")
        staged.write_text(f"#!{sys.executable}\n" + FAKE_NVCC_SCRIPT.read_text())
        staged.chmod(0o755)
        os.replace(staged, self.path)

    def calls(self) -> list[dict]:
        if not self.call_log.exists():
            return []
        return [json.loads(line) for line in self.call_log.read_text().splitlines()]

    def compiled(self) -> list[str]:
        """Variant names compiled so far, in call order."""
        return [Path(call["source"]).stem for call in self.calls()]

    def reset(self) -> None:
        self.call_log.unlink(missing_ok=True)


SM90_TEMPLATE = """\
// {{ generated_by }}
// {{ name }}: {{ tile_m }}x{{ tile_n }}x{{ tile_k }} cluster {{ cluster_m }}x{{ cluster_n }}
// stages {{ stages }}, epilogue {{ epilogue }}
// {{ kernel_schedule }} / {{ epilogue_schedule }}
#include "ozaki/fake.h"
extern "C" int {{ symbol }}_run(void) { return 0; }
"""

SM80_TEMPLATE = """\
// {{ generated_by }}
// {{ name }}: {{ tile_m }}x{{ tile_n }}x{{ tile_k }} warp {{ warp_m }}x{{ warp_n }}x{{ warp_k }}
// instruction {{ inst_m }}x{{ inst_n }}x{{ inst_k }}, stages {{ stages }}, epilogue {{ epilogue }}
#include "ozaki/fake.h"
#include <ozaki/sm80_only.h>
extern "C" int {{ symbol }}_run(void) { return 0; }
"""


# Our headers: both templates include fake.h, which includes detail.h next to it; only the
# sm_80 template includes sm80_only.h; nothing includes unused.h.
HEADERS = {
    "ozaki/fake.h": '#pragma once\n#include "detail.h"\n#include <cstdint>\n// version 1\n',
    "ozaki/detail.h": "#pragma once\n// version 1\n",
    "ozaki/sm80_only.h": "#pragma once\n// version 1\n",
    "ozaki/unused.h": "#pragma once\n// version 1\n",
}


def write_templates(directory: Path, *, sm90: str = SM90_TEMPLATE,
                    sm80: str = SM80_TEMPLATE) -> Path:
    (directory / "include" / "ozaki").mkdir(parents=True, exist_ok=True)
    (directory / "int8_gemm_sm90.cu.j2").write_text(sm90)
    (directory / "int8_gemm_sm80.cu.j2").write_text(sm80)
    for name, text in HEADERS.items():
        (directory / "include" / name).write_text(text)
    return directory


def write_cutlass_stub(root: Path) -> Path:
    """Just enough of a CUTLASS tree for the toolchain lookup (and version) to succeed."""
    (root / "include" / "cutlass").mkdir(parents=True, exist_ok=True)
    (root / "include" / "cutlass" / "cutlass.h").write_text("#pragma once\n")
    (root / "include" / "cutlass" / "version.h").write_text(
        "#define CUTLASS_MAJOR 4\n#define CUTLASS_MINOR 2\n#define CUTLASS_PATCH 0\n")
    return root
