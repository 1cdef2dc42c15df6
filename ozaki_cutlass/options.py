"""The settings of a GEMM call that the GPU path and the NumPy reference share: the
default moduli count, the scaling modes, and the checks of scalars and flags.

One home for them, so that ``ozaki_cutlass.gemm`` and ``ozaki_cutlass.reference.gemm``
accept and refuse the same values with the same words.
"""

from __future__ import annotations

import numpy as np

from .numerics.contract import ACCURACY_DEFAULT, target_of
from .numerics.moduli import validate_moduli_count
from .numerics.zgemm import as_complex_scalar

__all__ = ["DEFAULT_MODULI", "MAX_DIM", "MODES", "POLICIES", "as_scalar", "as_flag", "check_dtype",
           "check_host_matrix", "check_empty_batch", "not_a_matrix", "check_contract_policy", "check_sizes",
           "is_complex_scalar", "refuse_native_settings", "resolve_accuracy", "resolve_moduli", "validate_mode",
           "validate_policy"]

#: The moduli count used when ``moduli=None``: on well-scaled inputs (phi = 0.5) it
#: gives a normwise error no larger than float64 ``@`` (docs/accuracy.md measures it).
DEFAULT_MODULI = 15
MODES = ("fast", "accurate")
POLICIES = ("auto", "emulate", "native")


def as_scalar(x, name: str) -> float:
    """``x`` as a float, or TypeError naming ``name`` when it is not a real number."""
    if type(x) is float:  # the common case, first: gemm's native lane counts microseconds
        return x
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(x).__name__}")
    try:
        return float(x)
    except OverflowError:  # an int beyond float64's range
        raise ValueError(f"{name}={x} is outside float64's range") from None


def is_complex_scalar(x) -> bool:
    """Whether ``x`` is a Python or NumPy complex number (of any precision)."""
    return isinstance(x, (complex, np.complexfloating))


#: What trans_a / trans_b take besides False / True (BLAS's transa / transb).
OPS = ("N", "T", "C")


def as_op(flag, name: str) -> str:
    """``flag`` (False, True, "N", "T" or "C"; letters in either case) as "N", "T" or "C";
    TypeError or ValueError naming ``name`` otherwise. For real operands "C" is "T"."""
    if isinstance(flag, (bool, np.bool_)):
        return "T" if flag else "N"
    if isinstance(flag, str):
        if flag.upper() in OPS:
            return flag.upper()
        raise ValueError(f"{name} must be one of 'N', 'T', 'C' (or False / True), got {flag!r}")
    raise TypeError(f"{name} must be False, True, 'N', 'T' or 'C', got {type(flag).__name__}")


def as_trans(x, name: str) -> bool:
    """Whether a real operand's flag (False, True, "N", "T" or "C") transposes it."""
    return as_op(x, name) != "N"


def as_flag(x, name: str) -> bool:
    """``x`` as a bool, or TypeError naming ``name`` unless it is True or False."""
    if not isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(x).__name__}")
    return bool(x)


def check_dtype(dtype, name: str, expected=np.float64) -> None:
    """TypeError unless ``dtype`` is ``expected`` (float64, or complex128 on the complex
    path): no silent casts, in either direction."""
    if np.dtype(dtype) != np.dtype(expected):
        if np.dtype(dtype).newbyteorder("=") == np.dtype(expected):
            raise TypeError(f"{name} is {np.dtype(expected)} in the other byte order ({np.dtype(dtype).str}); "
                            f"pass {name}.astype(np.{np.dtype(expected)}) (exact)")
        why = ("a complex call takes complex128 operands throughout; convert the others explicitly"
               if np.dtype(expected).kind == "c" and np.dtype(dtype).kind != "c" else
               "the emulation is FP64; convert explicitly if a lower precision is intended")
        raise TypeError(f"{name} must be {np.dtype(expected)}, got {np.dtype(dtype)} ({why})")


def check_empty_batch(dtypes: dict, alpha, beta) -> np.dtype:
    """What the elements of an empty batch would have refused, though none runs: the
    dtypes (``dtypes``: name -> dtype of a, b and, where given, c and out; None for one
    not known) and the scalars. Returns the result's dtype (complex128 where a or b is
    complex, else float64)."""
    cplx = any(d is not None and np.dtype(d).kind == "c" for d in (dtypes["a"], dtypes["b"]))
    expected = np.dtype(np.complex128 if cplx else np.float64)
    for name, dtype in dtypes.items():
        check_dtype(np.dtype(object) if dtype is None else dtype, name, expected)
    for name, x in (("alpha", alpha), ("beta", beta)):
        (as_complex_scalar if cplx else as_scalar)(x, name)
    return expected


def not_a_matrix(name: str, shape) -> ValueError:
    """The error for an operand of ``shape`` that is not 2-D, in the same words wherever it
    is found (gemm's batches are 3-D; contract and prepare take 2-D operands only)."""
    shape = tuple(shape)
    return ValueError(f"{name} must be 2-D (gemm also takes 3-D: a batch), got {len(shape)}-D with shape {shape}")


def check_host_matrix(x, name: str, dtype=np.float64) -> np.ndarray:
    """``x`` if it is a 2-D NumPy array of ``dtype`` (float64 unless told; TypeError or
    ValueError naming ``name`` otherwise). A masked array is refused: its mask would be
    ignored (np.ma.dot honours it), so a result would be silently wrong."""
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError(f"{name} is a masked array: the mask would be ignored; pass {name}.filled(value) "
                        f"or {name}.data explicitly")
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(x).__name__}")
    if x.ndim != 2:
        raise not_a_matrix(name, x.shape)
    check_dtype(x.dtype, name, dtype)
    return x


def validate_mode(mode: object) -> str:
    """``mode`` checked; None means "accurate" (the default of ``gemm`` and the reference)."""
    if mode is None:
        return "accurate"
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return mode  # type: ignore[return-value]


def resolve_moduli(moduli: object) -> int:
    return DEFAULT_MODULI if moduli is None else validate_moduli_count(moduli)


def resolve_accuracy(moduli: object, accuracy: object, mode: object) -> tuple[int | None, str, float | None]:
    """(count, mode, target) of a call. An explicit ``moduli`` runs exactly that count, no
    contract: target None, ``mode`` None meaning "accurate". Else the accuracy contract
    (count None): the target of ``accuracy`` (None: "dgemm"), ``mode`` None meaning "fast"."""
    if moduli is not None:
        if accuracy is not None:
            raise ValueError("give moduli= (exactly that count, no accuracy contract) or accuracy= "
                             "(the contract chooses the count), not both")
        return validate_moduli_count(moduli), validate_mode(mode), None
    return None, "fast" if mode is None else validate_mode(mode), target_of(
        ACCURACY_DEFAULT if accuracy is None else accuracy)


def validate_policy(policy: object) -> str:
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    return policy  # type: ignore[return-value]


def check_contract_policy(policy: object) -> str:
    """``policy`` of a ``contract`` question, checked: "native" runs no contract."""
    if validate_policy(policy) == "native":
        raise ValueError("policy='native' runs native DGEMM: there is no contract to ask about")
    return policy  # type: ignore[return-value]


def refuse_native_settings(policy: str, **settings) -> None:
    """ValueError where ``policy="native"`` (cuBLAS DGEMM, or float64 ``@`` in the
    reference) comes with settings that only the emulation takes (gemm's moduli, mode,
    accuracy, kernel, path): they would be ignored, and an accuracy asked for not met."""
    given = [name for name, value in settings.items() if value is not None]
    if policy == "native" and given:
        raise ValueError(f"policy='native' runs native DGEMM: {', '.join(n + '=' for n in given)} "
                         f"{'sets' if len(given) == 1 else 'set'} the emulation; leave "
                         f"{'it' if len(given) == 1 else 'them'} unset, or use policy 'auto' or 'emulate'")


#: The largest dimension the kernels take: they index with int, with room for padding.
MAX_DIM = 2**31 - 1 - 256


def check_sizes(**dims: int) -> None:
    """ValueError for a dimension the kernels cannot index (they use int sizes, with room
    for padding)."""
    for dim, value in dims.items():
        if value > MAX_DIM:
            raise ValueError(f"{dim}={value} is out of range: the kernels take sizes up to {MAX_DIM}")
