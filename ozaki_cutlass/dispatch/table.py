"""Tuning tables: reading, checking and keeping them.

The tuning table is JSON (``ozaki-cutlass tune`` writes it on a GPU; the package ships a
default in ``ozaki_cutlass/data/tuning.json`` that says where and how it was measured):

    {"gpu": ..., "driver": ..., "date": ..., "command": ...,
     "entries": [{"arch": "sm_90a", "path": "fused", "kernel": "<variant name>",
                  "m": [lo, hi], "n": [lo, hi], "k": [lo, hi]}, ...]}

Bounds are inclusive; entries are tried in order. Without a table (or when no entry
fits) the built-in defaults for the arch are tried. An entry with ``"complex": true``
(``ozaki-cutlass tune --zgemm`` writes them) is for complex calls alone, whose bucket is
that of their realified product (m x 2n x 2k) but whose cost is not a real call's (the
staged path runs Karatsuba's three products per modulus there); the other entries serve
real and complex calls alike. An entry with ``"calls": "default"`` (``ozaki-cutlass tune``
writes one where the fastest default call and the fastest call at the table's moduli
count run different kernels) is for calls under the accuracy contract alone (no moduli
count named); the calls that name a count read the entries after it. A table that is not of this shape
(see :func:`table_problem`) raises TuningTableError (a ValueError) when it is loaded,
naming the file and how to fix it.

Entries with ``"path": "native"`` (no kernel) are where ``ozaki-cutlass tune`` measured
cuBLAS DGEMM faster than the default call on the bucket's best candidate: the ``auto``
policy of ``ozaki_cutlass.gemm`` (``ozaki_cutlass.dispatch.policy.prefer_native``) sends
such shapes to native DGEMM.
"""

from __future__ import annotations

import json
import math
import reprlib
import threading
from importlib import resources
from pathlib import Path

from .. import config
from ..generator import Arch
from .variants import PATHS, path_of, variant_by_name

__all__ = ["ENTRY_KEYS", "TuningTableError", "TableCache", "TABLES", "load_table", "table_problem", "PACKAGED"]

PACKAGED = "ozaki_cutlass/data/tuning.json"

#: How deeply a table's JSON may nest. A tuning table needs 4 levels (the table, its
#: entries, an entry, a bucket); metadata may add a few. Deeper values are refused when
#: loaded, so that nothing walking the table later (json.dumps, repr) can recurse too far.
MAX_DEPTH = 32


#: The keys an entry may have: what the dispatcher reads, and what ``ozaki-cutlass tune``
#: records beside it ("tflops", "measured": the point timed, "operands": what it timed).
#: Any other key is refused: a misspelt one ("M" for "m") would otherwise widen a bucket
#: or drop a restriction without a word.
ENTRY_KEYS = ("arch", "path", "kernel", "m", "n", "k", "complex", "calls", "ms", "native_ms", "tflops", "measured",
              "operands")


class TuningTableError(ValueError):
    """A tuning table that cannot be used (unreadable, not JSON, not of the documented
    shape); the message names the file, what is wrong and how to fix it."""


def table_problem(table: object) -> str | None:
    """What makes ``table`` (parsed JSON) other than a tuning table of the shape in this
    module's docstring, or None when nothing does. An entry's keys are ENTRY_KEYS; those
    the dispatcher does not read ("measured", "tflops", "operands") and the table's
    metadata are not checked further, except that no value nests more than MAX_DEPTH
    levels."""
    if _deeper_than(table, MAX_DEPTH):
        return f"it nests more than {MAX_DEPTH} levels deep (a tuning table needs 4)"
    if not isinstance(table, dict):
        return f"the top level is a JSON {_json_type(table)}, not an object"
    entries = table.get("entries")
    if not isinstance(entries, list):
        return ('no "entries" list' if entries is None
                else f'"entries" is a JSON {_json_type(entries)}, not a list')
    for i, e in enumerate(entries):
        why = _entry_problem(e)
        if why is not None:
            return f"entry {i} {why}"
    return None


def _entry_problem(e: object) -> str | None:
    if not isinstance(e, dict):
        return f"is a JSON {_json_type(e)}, not an object"
    paths = PATHS + ("native",)
    unknown = [key for key in e if key not in ENTRY_KEYS]
    if unknown:
        return f"has {_show(unknown[0])}, not a key of a table entry (they are {', '.join(ENTRY_KEYS)})"
    if "path" not in e:
        return f'has no "path" (one of {paths})'
    if e["path"] not in paths:
        return f"has path {_show(e['path'])}, expected one of {paths}"
    arches = tuple(a.value for a in Arch)
    if "arch" in e and e["arch"] not in arches:
        return f"has arch {_show(e['arch'])}, expected one of {arches}"
    for dim in "mnk":
        if dim in e and not _is_bucket(e[dim]):
            return f'has "{dim}": {_show(e[dim])}, expected [lo, hi] with integers 0 <= lo <= hi'
    if "complex" in e and not isinstance(e["complex"], bool):
        return f'has "complex": {_show(e["complex"])}, expected true or false'
    if "calls" in e and e["calls"] != "default":
        return f'has "calls": {_show(e["calls"])}, expected "default" (or no "calls": every call)'
    for key in ("ms", "native_ms"):
        if key in e and not (isinstance(e[key], (int, float)) and not isinstance(e[key], bool)
                             and math.isfinite(e[key]) and e[key] > 0):
            return f'has "{key}": {_show(e[key])}, expected milliseconds (a finite number above 0)'
    if e["path"] == "native":
        return ('has a "kernel", but a native entry runs cuBLAS DGEMM (no kernel)' if "kernel" in e
                else None)
    if "kernel" not in e:
        return f'has no "kernel" (a {e["path"]} entry names the variant it runs)'
    if not isinstance(e["kernel"], str):
        return f'has "kernel": {_show(e["kernel"])}, expected a variant name (a string)'
    try:
        variant = variant_by_name(e["kernel"], "names")
    except ValueError as exc:
        return str(exc)
    if path_of(variant) != e["path"]:
        return f"says path {e['path']!r}, but {variant.name} runs the {path_of(variant)} path"
    if "arch" in e and variant.arch.value != e["arch"]:
        return f"says arch {e['arch']!r}, but {variant.name} is built for {variant.arch.value}"
    return None


def _deeper_than(value: object, limit: int) -> bool:
    """Whether lists and dicts nest in ``value`` more than ``limit`` levels deep (walked
    without recursion, so any depth is answered)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            if depth > limit:
                return True
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return False


_SHOW = reprlib.Repr()
_SHOW.maxlevel, _SHOW.maxlist, _SHOW.maxdict, _SHOW.maxstring, _SHOW.maxother = 3, 6, 4, 60, 60


def _show(value: object) -> str:
    """A value in an error message: its repr, shortened (a table is the user's, of any size)."""
    return _SHOW.repr(value)


def _is_bucket(value: object) -> bool:
    return (isinstance(value, list) and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
            and 0 <= value[0] <= value[1])


def _json_type(value: object) -> str:
    for kind, name in ((dict, "object"), (list, "array"), (str, "string"), (bool, "boolean"),
                       ((int, float), "number")):
        if isinstance(value, kind):
            return name
    return "null"


class TableCache:
    """The tables this process has read (each file once, a failed read not kept) and what
    was derived from each (see ``candidates_from_table``); :meth:`clear` forgets them all,
    so the next call reads the file again. A kept table lives, unchanged, until then, so
    its ``id`` names it: a per-call lookup by identity instead of by content."""

    def __init__(self):
        self._lock = threading.Lock()
        self._read: dict[tuple, tuple[dict, str]] = {}
        self._kept_ids: set[int] = set()
        self.derived: dict = {}  # (id(table), source, what) -> what was made from a kept table
        self.choices: dict = {}  # (id(table), source, problem, path) -> the dispatcher's Choice

    def read(self, path: str | None, where: str, fix: str) -> tuple[dict, str]:
        key = (path, where, fix)
        found = self._read.get(key)
        if found is None:
            found = _read_table(path, where, fix)
            with self._lock:
                found = self._read.setdefault(key, found)
                self._kept_ids.add(id(found[0]))
        return found

    def is_kept(self, table: dict) -> bool:
        return id(table) in self._kept_ids

    def clear(self) -> None:
        with self._lock:
            self._read.clear()
            self._kept_ids.clear()
            self.derived.clear()
            self.choices.clear()


#: The one TableCache of the process (cleared by ``ozaki_cutlass.dispatch.forget_tables``).
TABLES = TableCache()


def load_table(path: str | None = None) -> tuple[dict, str]:
    """The tuning table: ``path`` if given, else ``OZAKI_TUNING_TABLE``, else the packaged
    default (which may be absent: then only the built-in candidates are tried). A file
    that cannot be read, is not JSON or not of the documented shape raises TuningTableError
    saying which file, what is wrong and how to fix it."""
    if path is not None:
        return TABLES.read(str(path), f"tuning table {path}",
                           f"regenerate it with `ozaki-cutlass tune --out {path}` on the GPU")
    env = config.tuning_table()
    if env is not None:
        return TABLES.read(str(env), f"OZAKI_TUNING_TABLE={env}",
                           "unset OZAKI_TUNING_TABLE to use the packaged table, or regenerate the "
                           f"file with `ozaki-cutlass tune --out {env}` on the GPU")
    return TABLES.read(None, f"the packaged table {PACKAGED}",
                       "reinstall ozaki-cutlass, or set OZAKI_TUNING_TABLE to a table written by "
                       "`ozaki-cutlass tune`")


def _read_table(path: str | None, where: str, fix: str) -> tuple[dict, str]:
    """``path``'s table (None: the packaged one), checked; ``where`` and ``fix`` word the
    error. Only a table read without error is kept."""
    try:
        if path is None:
            text, source = resources.files("ozaki_cutlass").joinpath("data/tuning.json").read_text(), PACKAGED
        else:
            text, source = Path(path).read_text(), path
    except FileNotFoundError:
        if path is not None:
            raise TuningTableError(f"{where} cannot be read: no such file; {fix}") from None
        text, source = '{"entries": []}', "no table"
    except (OSError, UnicodeDecodeError) as exc:
        raise TuningTableError(f"{where} cannot be read ({exc}); {fix}") from None
    try:
        table = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TuningTableError(f"{where} is not JSON ({exc}); {fix}") from None
    except RecursionError:  # the parser recurses per level of nesting
        raise TuningTableError(f"{where}: it nests more than {MAX_DEPTH} levels deep (a tuning table "
                               f"needs 4), too deep to read; {fix}") from None
    why = table_problem(table)
    if why is not None:
        raise TuningTableError(f"{where}: {why}; {fix}")
    return table, source
