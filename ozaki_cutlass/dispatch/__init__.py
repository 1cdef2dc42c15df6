"""The shape dispatcher: which kernel runs a problem (``candidates``: candidates, each
saying whether it fits and why not, tried in order), from which tuning table (``table``),
and whether the ``auto`` policy runs native DGEMM instead (``policy``).

The process-wide state is the tables read (``table.TABLES``) and the auto decisions taken
from them (``policy.DECISIONS``); :func:`forget_tables` clears both.
"""

from .candidates import ANY, Candidate, Choice, NoKernelError, Problem, builtin_candidates, candidates_from_table, choose
from .policy import (DECISIONS, H200_MODEL, MEASURED_MARGIN, CostModel, emulation_measured_faster,
                     prefer_native)
from .table import TABLES, TuningTableError, load_table, table_problem
from .targets import kernel_targets
from .variants import PATHS, path_of, runs_on, variant_by_name

__all__ = ["ANY", "DECISIONS", "MEASURED_MARGIN", "PATHS", "TABLES", "Candidate", "Choice", "CostModel", "H200_MODEL",
           "NoKernelError", "Problem", "TuningTableError", "builtin_candidates", "candidates_from_table", "choose",
           "emulation_measured_faster", "forget_tables", "kernel_targets", "load_table", "path_of", "prefer_native",
           "runs_on", "table_problem", "variant_by_name"]


def forget_tables() -> None:
    """Forget every table load_table() has read, the candidates made from them and what
    was decided from them (the auto policy's native-or-not per shape, and the native fast
    lane's plans): the next call reads the file again. For tests, and for a process that
    rewrote its table; not safe while another thread dispatches."""
    DECISIONS.clear()
    TABLES.clear()
