"""The shape dispatcher: which kernel runs a problem.

A pure function of (problem, arch, table) over an ordered list of candidates; each
candidate says whether it supports the problem (and why not). The first that fits wins.
Nothing fitting raises :class:`NoKernelError` naming the shape and every rejection.

The tuning table is JSON (``ozaki-cutlass tune`` writes it on a GPU; the package ships a
default in ``ozaki_cutlass/data/tuning.json`` that says where and how it was measured):

    {"gpu": ..., "driver": ..., "date": ..., "command": ...,
     "entries": [{"arch": "sm_90a", "path": "fused", "kernel": "<variant name>",
                  "m": [lo, hi], "n": [lo, hi], "k": [lo, hi]}, ...]}

Bounds are inclusive; entries are tried in order. Without a table (or when no entry
fits) the built-in defaults for the arch are tried. A table that is not of this shape
(see :func:`table_problem`) raises TuningTableError (a ValueError) when it is loaded,
naming the file and how to fix it.

Entries with ``"path": "native"`` (no kernel) are where ``ozaki-cutlass tune`` measured
cuBLAS DGEMM faster than every emulated candidate: the ``auto`` policy of
``ozaki_cutlass.gemm`` (:func:`prefer_native`) sends such shapes to native DGEMM.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from .generator import Arch, Epilogue, GemmVariant, catalog, default_variant, variants_named
from .numerics import K_CHUNK, group_sizes

log = logging.getLogger(__name__)

PATHS = ("staged", "fused")
_MAX_INT = 2**31 - 1
_ANY = (0, _MAX_INT)  # every size, empty ones included (nothing is launched for them)


class NoKernelError(RuntimeError):
    """No candidate kernel supports the problem."""


class TuningTableError(ValueError):
    """A tuning table that cannot be used (unreadable, not JSON, not of the documented
    shape); the message names the file, what is wrong and how to fix it."""


def runs_on(built: Arch, gpu: Arch) -> bool:
    """sm_90a code runs on sm_90 only; sm_80 code (with its compute_80 PTX) on any 8.0+."""
    return built is gpu or built is Arch.SM80


@dataclass(frozen=True, slots=True)
class Problem:
    m: int
    n: int
    k: int
    moduli: int
    arch: Arch


def path_of(variant: GemmVariant) -> str:
    """The pipeline a variant runs: "fused" for a partial-CRT epilogue, else "staged"."""
    return "fused" if variant.epilogue is Epilogue.PARTIAL_CRT else "staged"


@dataclass(frozen=True, slots=True)
class Candidate:
    path: str
    variant: GemmVariant
    m: tuple[int, int] = _ANY
    n: tuple[int, int] = _ANY
    k: tuple[int, int] = _ANY
    source: str = "built-in"

    def rejection(self, p: Problem) -> str | None:
        """None when this candidate runs ``p``, else the reason it does not."""
        if not runs_on(self.variant.arch, p.arch):
            return f"built for {self.variant.arch.value}, the GPU needs {p.arch.value}"
        for dim, (lo, hi) in (("m", self.m), ("n", self.n), ("k", self.k)):
            value = getattr(p, dim)
            if not lo <= value <= hi:
                return f"{dim}={value} outside its bucket [{lo}, {hi}]"
        if self.path == "fused":
            if self.variant.epilogue is not Epilogue.PARTIAL_CRT:
                return "the fused path needs a partial-CRT epilogue variant"
            if self.variant.group_size > p.moduli:
                return f"group size {self.variant.group_size} exceeds {p.moduli} moduli"
            if p.k > K_CHUNK:
                return f"k={p.k} > {K_CHUNK}: one modulus's k must fit one exact int32 sum (the staged path chunks k)"
        elif self.variant.epilogue is not Epilogue.INT32_STORE:
            return "the staged path needs a plain int32-store variant"
        return None

    def describe(self) -> str:
        return f"{self.path}:{self.variant.name} ({self.source})"

    def kernels(self, moduli: int) -> list[GemmVariant]:
        """The kernels this candidate launches for ``moduli`` moduli: its variant, or for
        the fused path the siblings of each group size the moduli split into."""
        if self.path != "fused":
            return [self.variant]
        return [dataclasses.replace(self.variant, group_size=g)
                for g in sorted(set(group_sizes(moduli, self.variant.group_size)), reverse=True)]


@dataclass(frozen=True, slots=True)
class Choice:
    path: str
    variant: GemmVariant
    source: str


def variant_by_name(name: str, who: str) -> GemmVariant:
    """The one catalogued variant (any arch, any epilogue) called ``name``; ``who`` says
    where the name came from, for the error when it names none or several."""
    matches = variants_named(name)
    if len(matches) != 1:
        matches = matches or catalog(None, name, full=True, epilogue=None)  # a glob: count it
        raise ValueError(f"{who} {name!r}, which matches {len(matches)} catalogued variants; "
                         "give one exact name (see `ozaki-cutlass list --full`)")
    return matches[0]


def table_problem(table: object) -> str | None:
    """What makes ``table`` (parsed JSON) other than a tuning table of the shape in this
    module's docstring, or None when nothing does. Keys the dispatcher does not read
    ("measured", "tflops", the measurement's metadata) are not checked."""
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
    if "path" not in e:
        return f'has no "path" (one of {paths})'
    if e["path"] not in paths:
        return f"has path {e['path']!r}, expected one of {paths}"
    arches = tuple(a.value for a in Arch)
    if "arch" in e and e["arch"] not in arches:
        return f"has arch {e['arch']!r}, expected one of {arches}"
    for dim in "mnk":
        if dim in e and not _is_bucket(e[dim]):
            return f'has "{dim}": {e[dim]!r}, expected [lo, hi] with integers 0 <= lo <= hi'
    for key in ("ms", "native_ms"):
        if key in e and not (isinstance(e[key], (int, float)) and not isinstance(e[key], bool)):
            return f'has "{key}": {e[key]!r}, expected milliseconds (a number)'
    if e["path"] == "native":
        return None
    if "kernel" not in e:
        return f'has no "kernel" (a {e["path"]} entry names the variant it runs)'
    if not isinstance(e["kernel"], str):
        return f'has "kernel": {e["kernel"]!r}, expected a variant name (a string)'
    try:
        variant = variant_by_name(e["kernel"], "names")
    except ValueError as exc:
        return str(exc)
    if path_of(variant) != e["path"]:
        return f"says path {e['path']!r}, but {variant.name} runs the {path_of(variant)} path"
    if "arch" in e and variant.arch.value != e["arch"]:
        return f"says arch {e['arch']!r}, but {variant.name} is built for {variant.arch.value}"
    return None


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


_KEPT_CANDIDATES: dict[tuple[int, str], tuple[Candidate, ...]] = {}


def candidates_from_table(table: dict, source: str) -> list[Candidate]:
    """The table's entries as candidates, in order. choose() runs on every GEMM call, so
    the tables load_table() keeps (read once, alive and unchanged for the process: their
    ids are never reused) are looked up by identity; any other table by its content.
    A table not of the documented shape raises TuningTableError naming ``source``."""
    key = (id(table), source)
    cands = _KEPT_CANDIDATES.get(key)
    if cands is None:
        cands = _table_candidates(json.dumps(table, sort_keys=True), source)
        if any(t is table for t, _ in _KEPT_TABLES):
            _KEPT_CANDIDATES[key] = cands
    return list(cands)


@lru_cache(maxsize=64)
def _table_candidates(text: str, source: str) -> tuple[Candidate, ...]:
    table = json.loads(text)
    why = table_problem(table)
    if why is not None:
        raise TuningTableError(f"{source}: {why}; regenerate the table with `ozaki-cutlass tune` on the GPU")
    return tuple(Candidate(path=e["path"], variant=variants_named(e["kernel"])[0],
                           m=tuple(e.get("m", _ANY)), n=tuple(e.get("n", _ANY)),
                           k=tuple(e.get("k", _ANY)), source=source)
                 for e in table["entries"] if e["path"] != "native")  # native: read by prefer_native


@lru_cache(maxsize=None)
def builtin_candidates(arch: Arch) -> tuple[Candidate, ...]:
    """The staged path on the arch's default INT8 GEMM first: on the H200 it is as fast
    as or faster than the first fused kernels at n = 4096..16384 (docs/benchmarks.md),
    so the fused ones are chosen only through a tuning table or ``path="fused"``."""
    out = [Candidate(path="staged", variant=default_variant(arch))]
    out += [Candidate(path="fused", variant=v) for v in catalog(arch, epilogue=Epilogue.PARTIAL_CRT)]
    return tuple(out)


def load_table(path: str | None = None) -> tuple[dict, str]:
    """The tuning table: ``path`` if given, else ``OZAKI_TUNING_TABLE``, else the packaged
    default (which may be absent: then only the built-in candidates are tried). A file
    that cannot be read, is not JSON or not of the documented shape raises TuningTableError
    saying which file, what is wrong and how to fix it."""
    from .generator import environment

    if path is not None:
        return _read_table(str(path), f"tuning table {path}",
                           f"regenerate it with `ozaki-cutlass tune --out {path}` on the GPU")
    env = environment.tuning_table()
    if env is not None:
        return _read_table(str(env), f"OZAKI_TUNING_TABLE={env}",
                           "unset OZAKI_TUNING_TABLE to use the packaged table, or regenerate the "
                           f"file with `ozaki-cutlass tune --out {env}` on the GPU")
    return _read_table(None, f"the packaged table {_PACKAGED}",
                       "reinstall ozaki-cutlass, or set OZAKI_TUNING_TABLE to a table written by "
                       "`ozaki-cutlass tune`")


_PACKAGED = "ozaki_cutlass/data/tuning.json"
_KEPT_TABLES: list[tuple[dict, str]] = []


@lru_cache(maxsize=None)
def _read_table(path: str | None, where: str, fix: str) -> tuple[dict, str]:
    """``path``'s table (None: the packaged one), checked; ``where`` and ``fix`` word the
    error. Only a table read without error is kept."""
    try:
        if path is None:
            text, source = resources.files("ozaki_cutlass").joinpath("data/tuning.json").read_text(), _PACKAGED
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
    why = table_problem(table)
    if why is not None:
        raise TuningTableError(f"{where}: {why}; {fix}")
    kept = table, source
    _KEPT_TABLES.append(kept)
    return kept


_ON_FORGET: list = []  # callables run by forget_tables (the auto policy's remembered decisions)


def forget_tables() -> None:
    """Forget every table load_table() has read, the candidates made from them and what
    was decided from them (the auto policy's native-or-not per shape): the next call reads
    the file again. For tests, and for a process that rewrote its table; not safe while
    another thread dispatches."""
    for forget in _ON_FORGET:
        forget()
    _read_table.cache_clear()
    _table_candidates.cache_clear()
    _KEPT_CANDIDATES.clear()  # keyed by the ids of the kept tables: dropped with them
    _KEPT_TABLES.clear()


def choose(problem: Problem, *, table: dict | None = None, table_source: str = "table",
           path: str | None = None) -> Choice:
    """The first candidate (table entries, then built-in defaults) that supports
    ``problem``; ``path`` restricts to "staged" or "fused"."""
    if path is not None and path not in PATHS:
        raise ValueError(f"path must be one of {PATHS} or None, got {path!r}")
    cands = (candidates_from_table(table, table_source) if table else []) + list(builtin_candidates(problem.arch))
    reasons = []
    for c in cands:
        why = c.rejection(problem)
        if why is None and path is not None and c.path != path:
            why = f"path {c.path}, {path} requested"
        if why is None:
            return Choice(path=c.path, variant=c.variant, source=c.source)
        reasons.append(f"  {c.describe()}: {why}")
    raise NoKernelError(f"no kernel for m={problem.m}, n={problem.n}, k={problem.k}, "
                        f"{problem.moduli} moduli on {problem.arch.value}; tried:\n" + "\n".join(reasons))


# --------------------------------------------------------------------------- auto policy

@dataclass(frozen=True, slots=True)
class CostModel:
    """Predicted milliseconds of emulated and native DGEMM for an m x n x k problem:

        emulated = (N + coarse) * 2mnk / int8_rate + operand_s * (m + n) k + output_s * m n + fixed
        native   = 2mnk / fp64_rate

    N moduli, coarse = 1 in accurate mode (the coarse-bound GEMM); operand_s covers the
    per-entry stages of A and B (pack, scan, coarse, residues), output_s the CRT. Fitted
    to the phase times of the H200 run in docs/benchmarks.md (2026-11-29, 15 moduli,
    shapes 1024^3 .. 16384^3 and three rectangular ones): a guide for shapes no tuning
    table covers, not a measurement."""

    int8_rate: float = 1.45e15     # INT8 ops/s inside the pipeline
    fp64_rate: float = 55e12       # cuBLAS DGEMM flop/s
    operand_s: float = 2.6e-11     # seconds per operand entry
    output_s: float = 5.0e-11      # seconds per output entry
    fixed_s: float = 3.0e-4        # host work and launches per call
    margin: float = 1.1            # emulate only where predicted this much faster

    def emulated_ms(self, m: int, n: int, k: int, moduli: int, mode: str) -> float:
        gemms = moduli + (1 if mode == "accurate" else 0)
        return 1e3 * (gemms * 2.0 * m * n * k / self.int8_rate + self.operand_s * (m + n) * k
                      + self.output_s * m * n + self.fixed_s)

    def native_ms(self, m: int, n: int, k: int) -> float:
        return 1e3 * 2.0 * m * n * k / self.fp64_rate


H200_MODEL = CostModel()


def _inside(problem: Problem, entry: dict) -> bool:
    return all(lo <= v <= hi for v, (lo, hi) in
               zip((problem.m, problem.n, problem.k), (entry.get(d, _ANY) for d in "mnk")))


def prefer_native(problem: Problem, mode: str, *, table: dict | None = None,
                  table_source: str = "table") -> tuple[bool, str]:
    """Whether the ``auto`` policy runs ``problem`` as native DGEMM, and why. A tuning
    table's bucket that holds a native measurement decides first (a ``native`` entry, or
    a kernel entry with ``native_ms`` slower than its ``ms``); elsewhere, on sm_90 only,
    the H200 cost model decides (no other GPU has been measured: there the emulation is
    kept, unless a table from ``ozaki-cutlass tune`` on that GPU says otherwise)."""
    for e in (table or {}).get("entries", []):
        if e.get("arch", problem.arch.value) != problem.arch.value or not _inside(problem, e):
            continue
        if e.get("path") == "native":
            return True, f"{table_source}: native DGEMM measured faster in this bucket"
        if "native_ms" in e and "ms" in e:
            if e["ms"] < e["native_ms"]:
                return False, f"{table_source}: emulation measured faster in this bucket"
            return True, f"{table_source}: native DGEMM measured faster in this bucket"
    if problem.arch is Arch.SM90A:
        m, n, k = problem.m, problem.n, problem.k
        em, nat = H200_MODEL.emulated_ms(m, n, k, problem.moduli, mode), H200_MODEL.native_ms(m, n, k)
        if em * H200_MODEL.margin > nat:
            return True, f"H200 cost model: emulated {em:.3g} ms vs native {nat:.3g} ms"
        return False, f"H200 cost model: emulated {em:.3g} ms vs native {nat:.3g} ms"
    return False, f"no measurement for {problem.arch.value}: emulation kept"
