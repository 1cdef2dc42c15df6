"""The runtime's settings from the environment, read here and nowhere else in the runtime.

| variable             | meaning                                                             |
| -------------------- | ------------------------------------------------------------------- |
| `OZAKI_TUNING_TABLE` | a tuning table (JSON) for the dispatcher instead of the packaged one |
| `OZAKI_OVERLAP`      | `0`: build A's and B's operands on one stream, not two (for measuring) |

The build's settings (`OZAKI_NVCC`, `CUDA_HOME`, `CUTLASS_PATH`, `OZAKI_CACHE_DIR`,
`OZAKI_BUILD_JOBS`, `XDG_CACHE_HOME`) belong to the generator, which runs without the
runtime: ``ozaki_cutlass.generator.environment`` reads them.

Values are read when asked for, never at import; an empty value counts as unset.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["overlap", "tuning_table", "tuning_table_setting"]


def tuning_table_setting() -> str | None:
    """`OZAKI_TUNING_TABLE` as given (unset or empty: None), unparsed: cheap enough for a
    memo key on a per-call path."""
    return os.environ.get("OZAKI_TUNING_TABLE") or None


def tuning_table() -> Path | None:
    """`OZAKI_TUNING_TABLE`: the dispatcher's table, instead of the packaged default."""
    value = tuning_table_setting()
    return Path(value).expanduser() if value else None


def overlap() -> bool:
    """`OZAKI_OVERLAP`: anything but `0` (or unset) builds A's and B's operands on two streams."""
    return os.environ.get("OZAKI_OVERLAP", "") != "0"
