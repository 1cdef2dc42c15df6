"""The fused kernels' argument checks (templates/include/ozaki/group_gemm_abi.h; C ABI
generator.abi.GROUP_GEMM: several groups per call), run on the CPU through a host-only driver
(tests/host/check_group_abi.cu): what a call with `groups` groups is refused for, and
that each group's constants come from its own moduli. The GPU tests
(tests/gpu/test_fused_gemm.py) run the same checks through the built kernels.

About 15 s on 2 cores (the compilation, against CUTLASS's headers). Deselect with
`-m "not nvcc"`; skipped where nvcc or CUTLASS is missing.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ozaki_cutlass.generator import abi
from ozaki_cutlass.numerics.moduli import MODULI_TABLE

pytestmark = pytest.mark.nvcc

DRIVER = Path(__file__).resolve().parent / "host" / "check_group_abi.cu"
TILE_K = 128


@pytest.fixture(scope="module")
def check(tmp_path_factory, nvcc_toolchain):
    """check(G, m, n, k_pad, groups, lda, ldb, ldx, stride_x, moduli) -> the driver's line."""
    tc = nvcc_toolchain
    folder = tmp_path_factory.mktemp("group_abi")
    binary = folder / "check_group_abi"
    prelude = folder / "prelude.h"  # what the fused templates render before the headers
    prelude.write_text(abi.GROUP_GEMM.prelude())
    cmd = [str(tc.nvcc), "-x", "cu", "-std=c++17", "-O1", *(f"-I{d}" for d in tc.include_dirs),
           *(f"-L{d}" for d in tc.library_dirs),
           "-include", str(prelude), str(DRIVER), "-o", str(binary)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.fail(f"compiling the driver failed:\n{' '.join(cmd)}\n{proc.stderr[-4000:]}")

    def run(g, m, n, k_pad, groups, lda, ldb, ldx, stride_x, moduli):
        line = " ".join(str(v) for v in (g, m, n, k_pad, groups, lda, ldb, ldx, stride_x, TILE_K, *moduli))
        out = subprocess.run([str(binary)], input=line + "\n", capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    return run


def product(ms):
    p = 1
    for m in ms:
        p *= m
    return p


def test_twenty_one_modulus_groups_in_one_call(check):
    moduli = list(MODULI_TABLE[:20])
    k = 2 * TILE_K
    got = check(1, 5, 32, k, 20, 20 * k, 20 * k + 16, 48, 5 * 48, moduli)
    assert got == "ok " + " ".join(str(m) for m in moduli)


def test_each_group_gets_its_own_constants(check):
    moduli = list(MODULI_TABLE[:16])
    k = TILE_K
    got = check(4, 3, 4, k, 4, 16 * k, 16 * k, 4, 3 * 4, moduli)
    assert got == "ok " + " ".join(str(product(moduli[4 * q:4 * q + 4])) for q in range(4))


@pytest.mark.parametrize("g, groups, moduli, lda, ldx, stride_x, message", [
    # more than 20 moduli in one call
    (1, 21, list(MODULI_TABLE[:20]) + [181], 21 * TILE_K, 16, 16 * 4, "groups=21 must be in [1, 20]"),
    (4, 6, list(MODULI_TABLE[:20]) * 2, 24 * TILE_K, 4, 16, "groups=6 must be in [1, 5]"),
    (1, 0, [256], TILE_K, 16, 0, "groups=0"),
    # rows too short for every group's residues
    (1, 3, [256, 255, 253], 3 * TILE_K - 16, 16, 64, "lda=368 must be >= 384"),
    # partial planes that would overlap (m = 4 rows of ldx), or misaligned
    (1, 2, [256, 255], 2 * TILE_K, 16, 63, "stride_x=63 must be >= (m-1)*ldx+n=64"),
    (1, 2, [256, 255], 2 * TILE_K, 16, 72, "a multiple of 16"),
    (4, 2, list(MODULI_TABLE[:8]), 8 * TILE_K, 4, 14, "stride_x=14 must be >= (m-1)*ldx+n=16"),
    # the second group's moduli, named by their position in the call
    (4, 2, [256, 255, 253, 251, 241, 241, 239, 233], 8 * TILE_K, 4, 16, "moduli[5]=241: moduli not pairwise coprime"),
    (1, 2, [256, 1], 2 * TILE_K, 16, 64, "moduli[1]=1: modulus outside [2, 256]"),
])
def test_refusals(check, g, groups, moduli, lda, ldx, stride_x, message):
    n = ldx
    got = check(g, 4, n, TILE_K, groups, lda, lda, ldx, stride_x, moduli)
    assert got.startswith("refused ") and message in got, got


def test_one_group_ignores_stride_x(check):
    """With one group the partials' batch stride is unused (0 is fine), as the ABI says."""
    assert check(1, 4, 16, TILE_K, 1, TILE_K, TILE_K, 16, 0, [251]) == "ok 251"
