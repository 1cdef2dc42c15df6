"""The runtime's settings from the environment, read here and nowhere else in the runtime.

| variable              | meaning                                                              |
| --------------------- | -------------------------------------------------------------------- |
| `OZAKI_TUNING_TABLE`  | a tuning table (JSON) for the dispatcher instead of the packaged one |
| `OZAKI_OVERLAP`       | off: build A's and B's operands on one stream, not two (measuring)   |
| `OZAKI_KARATSUBA_MIN` | the smallest m, n and k of a complex call that runs Karatsuba on the |
|                       | staged path (default 8192; the same bits either way)                 |
| `OZAKI_SPECULATE`     | off: a contract call waits for its own choice before it runs (the    |
|                       | same bits either way)                                                |
| `OZAKI_GRAPHS`        | off: never replay a repeated call's launches as a CUDA graph (the    |
|                       | same bits either way)                                                |

The build's settings (`OZAKI_NVCC`, `CUDA_HOME`, `CUTLASS_PATH`, `OZAKI_CACHE_DIR`,
`OZAKI_BUILD_JOBS`, `XDG_CACHE_HOME`) belong to the generator, which runs without the
runtime: ``ozaki_cutlass.generator.environment`` reads them.

Values are read when asked for, never at import; an empty value counts as unset. The
three switches are on when unset; `0`, `false`, `off` or `no` turn them off, `1`, `true`,
`on` or `yes` on (any case), and any other value is refused (ValueError naming the
variable) rather than read as one or the other.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["overlap", "speculate", "graphs", "tuning_table", "tuning_table_setting", "karatsuba_min",
           "KARATSUBA_MIN_DEFAULT", "SWITCHES"]

#: paths.karatsuba: at 8192^3 on an H200 the default call with Karatsuba ran 1.18-1.19x the
#: realified product on the fused path (54.71 against 64.43 ms, 52.83 against 62.67;
#: docs/benchmarks.md, "The parts straight from the residue kernel" and the section after it);
#: its overheads grow as the output and the operands, its saving as the product, so below
#: that it is not known to win.
KARATSUBA_MIN_DEFAULT = 8192


def tuning_table_setting() -> str | None:
    """`OZAKI_TUNING_TABLE` as given (unset or empty: None), unparsed: cheap enough for a
    memo key on a per-call path."""
    return os.environ.get("OZAKI_TUNING_TABLE") or None


def tuning_table() -> Path | None:
    """`OZAKI_TUNING_TABLE`: the dispatcher's table, instead of the packaged default."""
    value = tuning_table_setting()
    return Path(value).expanduser() if value else None


def karatsuba_min() -> int:
    """`OZAKI_KARATSUBA_MIN`: a non-negative integer (unset: KARATSUBA_MIN_DEFAULT); a
    complex call runs Karatsuba's three products (on the staged path, where they give the
    realified product's bits) only when its m, n and k are all at least this."""
    value = os.environ.get("OZAKI_KARATSUBA_MIN") or None
    if value is None:
        return KARATSUBA_MIN_DEFAULT
    try:
        parsed = int(value)
    except ValueError:
        parsed = -1
    if parsed < 0:
        raise ValueError(f"OZAKI_KARATSUBA_MIN={value!r}: expected a non-negative integer (unset: "
                         f"{KARATSUBA_MIN_DEFAULT})")
    return parsed


_OFF = ("0", "false", "off", "no")
_ON = ("1", "true", "on", "yes")


def _switch(name: str) -> bool:
    """A switch's value: on when unset or empty (see the module's docstring)."""
    value = os.environ.get(name, "")
    if value == "" or value == "1":  # the common cases first: read on every call
        return True
    word = value.strip().lower()
    if word in _OFF or word in _ON:
        return word in _ON
    raise ValueError(f"{name}={value!r}: expected 0 or 1 (or false / true, off / on, no / yes; unset: on)")


def overlap() -> bool:
    """`OZAKI_OVERLAP`: on (unset) builds A's and B's operands on two streams."""
    return _switch("OZAKI_OVERLAP")


def speculate() -> bool:
    """`OZAKI_SPECULATE`: on (unset) lets a contract call run the choice its key's last two
    calls agreed on while its own certificate is read (execute.py)."""
    return _switch("OZAKI_SPECULATE")


def graphs() -> bool:
    """`OZAKI_GRAPHS`: on (unset) lets a repeated emulated call replay its launches as a
    CUDA graph (device.graphs, execute.py)."""
    return _switch("OZAKI_GRAPHS")


#: The switches by variable, for what reports the settings (``ozaki-cutlass doctor``).
SWITCHES = {"OZAKI_OVERLAP": overlap, "OZAKI_SPECULATE": speculate, "OZAKI_GRAPHS": graphs}
