"""The shape dispatcher's candidates: which kernel runs a problem.

A pure function of (problem, arch, table) over an ordered list of candidates; each
candidate says whether it supports the problem (and why not). The first that fits wins.
Nothing fitting raises :class:`NoKernelError` naming the shape and every rejection.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from functools import lru_cache

from ..generator import Arch, Epilogue, GemmVariant, catalog, default_variant, variants_named
from ..numerics.moduli import K_CHUNK, group_sizes
from .table import TABLES, TuningTableError, table_problem
from .variants import PATHS, runs_on

__all__ = ["ANY", "NoKernelError", "Problem", "Candidate", "Choice", "builtin_candidates", "candidates_from_table",
           "choose"]

MAX_INT = 2**31 - 1
ANY = (0, MAX_INT)  # every size, empty ones included (nothing is launched for them)


class NoKernelError(RuntimeError):
    """No candidate kernel supports the problem."""


@dataclass(frozen=True, slots=True)
class Problem:
    m: int
    n: int
    k: int
    moduli: int
    arch: Arch
    realified: bool = False  # a complex call's realified product (tables may hold entries for those alone)
    contract: bool = False  # a call under the accuracy contract (no moduli count named)


@dataclass(frozen=True, slots=True)
class Candidate:
    path: str
    variant: GemmVariant
    m: tuple[int, int] = ANY
    n: tuple[int, int] = ANY
    k: tuple[int, int] = ANY
    source: str = "built-in"
    complex: bool = False  # a table entry for complex calls (their realified products) alone
    default_calls: bool = False  # a table entry for calls under the accuracy contract alone

    def rejection(self, p: Problem) -> str | None:
        """None when this candidate runs ``p``, else the reason it does not."""
        if not runs_on(self.variant.arch, p.arch):
            return f"built for {self.variant.arch.value}, the GPU needs {p.arch.value}"
        if self.complex and not p.realified:
            return "an entry for complex calls"
        if self.default_calls and not p.contract:
            return "an entry for the default call (the accuracy contract), a moduli count was named"
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


@lru_cache(maxsize=None)
def builtin_candidates(arch: Arch) -> tuple[Candidate, ...]:
    """The staged path on the arch's default INT8 GEMM first: on the H200 it is as fast
    as or faster than the first fused kernels at n = 4096..16384 (docs/benchmarks.md),
    so the fused ones are chosen only through a tuning table or ``path="fused"``."""
    out = [Candidate(path="staged", variant=default_variant(arch))]
    out += [Candidate(path="fused", variant=v) for v in catalog(arch, epilogue=Epilogue.PARTIAL_CRT)]
    return tuple(out)


def candidates_from_table(table: dict, source: str) -> list[Candidate]:
    """The table's entries as candidates, in order. choose() runs on every GEMM call, so
    for the tables load_table() keeps (see TableCache) the answer is kept too and looked
    up by identity; any other table by its content. A table not of the documented shape
    raises TuningTableError naming ``source``."""
    key = (id(table), source, "candidates")
    cands = TABLES.derived.get(key)
    if cands is None:
        cands = _table_candidates(json.dumps(table, sort_keys=True), source)
        if TABLES.is_kept(table):
            TABLES.derived[key] = cands
    return list(cands)


@lru_cache(maxsize=64)
def _table_candidates(text: str, source: str) -> tuple[Candidate, ...]:
    """A pure function of the table's text (a memo, never stale)."""
    table = json.loads(text)
    why = table_problem(table)
    if why is not None:
        raise TuningTableError(f"{source}: {why}; regenerate the table with `ozaki-cutlass tune` on the GPU")
    return tuple(Candidate(path=e["path"], variant=variants_named(e["kernel"])[0],
                           m=tuple(e.get("m", ANY)), n=tuple(e.get("n", ANY)),
                           k=tuple(e.get("k", ANY)), source=source, complex=e.get("complex", False),
                           default_calls=e.get("calls") == "default")
                 for e in table["entries"] if e["path"] != "native")  # native: read by prefer_native


#: The most dispatcher answers kept (TableCache.choices); past it they are forgotten.
MAX_CHOICES = 4096


def choose(problem: Problem, *, table: dict | None = None, table_source: str = "table",
           path: str | None = None) -> Choice:
    """The first candidate (table entries, then built-in defaults) that supports
    ``problem``; ``path`` restricts to "staged" or "fused". It runs on every GEMM call:
    the answer under a table load_table() keeps is kept too, by the table's identity, the
    problem and the path (a pure function of those; forget_tables() forgets it)."""
    if path is not None and path not in PATHS:
        raise ValueError(f"path must be one of {PATHS} or None, got {path!r}")
    keep = table is not None and TABLES.is_kept(table)
    key = (id(table), table_source, problem, path)
    if keep:
        found = TABLES.choices.get(key)
        if found is not None:
            return found
    choice = _first_fit(problem, table, table_source, path)
    if keep:
        if len(TABLES.choices) >= MAX_CHOICES:
            TABLES.choices.clear()
        TABLES.choices[key] = choice
    return choice


def _first_fit(problem: Problem, table: dict | None, table_source: str, path: str | None) -> Choice:
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
