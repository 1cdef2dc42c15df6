"""When the staged path of a complex call runs Karatsuba's three products (paths.karatsuba),
and that it gives way, enqueuing nothing, where its buffers do not fit. Its bits against
the reference: tests/gpu/test_zgemm_gpu.py."""

import numpy as np
import pytest

from ozaki_cutlass import reference as R
from ozaki_cutlass.device import driver
from ozaki_cutlass.numerics import zgemm as Z
from ozaki_cutlass.numerics.accuracy import random_matrix
from ozaki_cutlass.numerics.moduli import crt_constants
from ozaki_cutlass.paths import karatsuba as K
from ozaki_cutlass.paths.karatsuba import karatsuba_applies, panel_columns, run_karatsuba
from ozaki_cutlass.paths.launch import Launch, PhaseTimer
from ozaki_cutlass.paths.scale import Scaled
from recorders import Calls, Gemm


def launch(**kw):
    base = dict(A=None, B=None, C=None, O=None, m=64, n=2 * 48, k=2 * 40, alpha=1.0, beta=0.0, moduli=14,
                mode="fast", stream=0, realified=True)
    return Launch(**(base | kw))


def scaled(inner_a=0, inner_b=0):
    return Scaled(a=None, b=None, mu=0, nu=0, nonfinite_a=0, nonfinite_b=0, inner_a=inner_a, inner_b=inner_b)


@pytest.fixture(autouse=True)
def every_size(monkeypatch):
    monkeypatch.setenv("OZAKI_KARATSUBA_MIN", "0")   # the conditions below, at any size


@pytest.mark.parametrize("kw, sc, runs", [
    ({}, scaled(), True),
    (dict(realified=False), scaled(), False),          # a real call
    (dict(mode="accurate"), scaled(), False),          # its column shifts may differ between 2j and 2j + 1
    ({}, scaled(inner_a=1234, inner_b=5678), False),   # equilibrated: inner scales may differ between 2l, 2l + 1
    (dict(k=0), scaled(), False),
])
def test_karatsuba_runs_only_where_it_gives_the_realified_bits(kw, sc, runs):
    assert karatsuba_applies(launch(**kw), sc) is runs


class _TightWorkspace:
    """Room for every buffer but an int32 plane set larger than ``limit`` bytes."""

    def __init__(self, limit):
        self.limit, self.held, self.dropped = limit, {}, []

    def get(self, name, nbytes):
        if name == "c32" and nbytes > self.limit:
            raise driver.OutOfMemoryError("no room")
        self.held[name] = nbytes
        return 4096

    def drop(self, *names):
        self.dropped += names

    def moduli(self):
        return 4096


def test_karatsuba_gives_way_with_nothing_enqueued_where_its_buffers_do_not_fit():
    class Kern:
        stages = Calls()
        gemm = Calls()

    L = launch()
    ws = _TightWorkspace(limit=4 * L.moduli * L.m * 2 * 48)   # the realified product's planes fit, 3/2 of them not
    assert run_karatsuba(Kern, L, ws, PhaseTimer(0, False), scaled(), None, False) is False
    assert Kern.stages.calls == [] and Kern.gemm.calls == []
    assert set(ws.dropped) == {"ra3", "rb3"}


class _Roomy:
    def get(self, name, nbytes):
        return {"c32": 1 << 40, "ra3": 2 << 40, "rb3": 3 << 40}.get(name, 1 << 36)

    def moduli(self):
        return 4096


def test_wide_products_run_in_panels_that_cover_every_column_once(monkeypatch):
    """Past PANEL_BYTES of int32 products the GEMMs and the CRT run per panel of complex
    columns: B's rows, the output's, the shifts' and the NaN/Inf source's columns offset
    to the panel, each column in exactly one panel."""
    assert panel_columns(16, 8192, 8192, 1) == 8192                   # the default bytes: one panel at 8192^3,
    assert panel_columns(17, 16384, 16384, 1) == 4096                 # four at 16384^3
    m, nc, kc, count = 64, 1000, 40, 14
    monkeypatch.setattr(K, "PANEL_BYTES", 4 * 3 * count * m * 300)   # 4 panels of 256 columns (the last 232)
    assert panel_columns(count, m, nc, 1) == 256 and panel_columns(count, m, 1024, 1) == 256
    class Mat:
        def __init__(self, ptr, rs, cs):
            self.ptr, self.rs, self.cs = ptr, rs, cs
    A, B, O = Mat(1 << 30, 2 * kc, 1), Mat(1 << 31, 2 * nc, 1), Mat(1 << 32, 2 * nc, 1)
    L = launch(A=A, B=B, O=O, m=m, n=2 * nc, k=2 * kc, moduli=count)
    sc = Scaled(a=(1 << 24, m, 2 * kc, 2 * kc, 1), b=(1 << 25, 2 * nc, 2 * kc, 2 * kc, 1), mu=1 << 20, nu=1 << 21,
                nonfinite_a=1 << 22, nonfinite_b=1 << 23)
    class Kern:
        stages = Calls()
        gemm = Gemm()
    assert run_karatsuba(Kern, L, _Roomy(), PhaseTimer(0, False), sc, crt_constants(count), False)
    kq, nq = 48, 1000                                                 # kc and nc rounded up to 16 and 4
    parts = [a for name, a in Kern.stages.calls if name == "residues_karatsuba"]
    # B's parts from Bhat's odd columns (every other vector, every other shift, Im first), then A's
    want_b = ((1 << 25) + 8 * 2 * kc, nc, 2 * kc, 4 * kc, 1, (1 << 21) + 4, 2, count, 4096, 3 << 40, nq, kq, True,
              nq * kq, count * nq * kq, 0)
    want_a = (1 << 24, m, 2 * kc, 2 * kc, 1, 1 << 20, 1, count, 4096, 2 << 40, m, kq, False, m * kq, count * m * kq, 0)
    assert parts == [want_b, want_a]
    gemms = [a for name, a in Kern.gemm.calls if name == "gemm"]
    crts = [a for name, a in Kern.stages.calls if name == "crt_unscale_karatsuba"]
    assert [g[1] for g in gemms] == [256, 256, 256, 232]              # panel widths (n of each GEMM)
    assert [g[7] - (3 << 40) for g in gemms] == [j0 * kq for j0 in (0, 256, 512, 768)]   # B's rows
    assert [c[3] for c in crts] == [512, 512, 512, 464]               # realified widths: 2 * 1000 in all
    assert [c[12] - (1 << 21) for c in crts] == [4 * 2 * j0 for j0 in (0, 256, 512, 768)]      # nu
    assert [c[18] - (1 << 32) for c in crts] == [8 * 2 * j0 for j0 in (0, 256, 512, 768)]      # out
    nfs = [c[21] for c in crts]
    assert [nf.b - (1 << 31) for nf in nfs] == [8 * 2 * j0 for j0 in (0, 256, 512, 768)]
    assert [nf.col_flags - (1 << 23) for nf in nfs] == [4 * 2 * j0 for j0 in (0, 256, 512, 768)]
    assert all(nf.a == 1 << 30 and nf.row_flags == 1 << 22 for nf in nfs)


# --- the numerics it rests on, on the reference's own stages ---------------------------

def _complex(m, n, phi, rng):
    return random_matrix(m, n, phi, rng) + 1j * random_matrix(m, n, phi, rng)


@pytest.mark.parametrize("seed, phi", [(0, 0.5), (1, 6.0), (2, 20.0)])
def test_karatsuba_on_the_references_residues_is_the_realified_product(seed, phi):
    """Fast mode, no equilibration: Bhat's columns 2j and 2j + 1 get one shift, so the
    scaled integers of Re b and Im b are the same in both roles, and per modulus
    P1 - P2 and P3 - P1 - P2 (the kernels' combination, on the reference's residues) are
    the realified product's residues of Re and Im."""
    rng = np.random.default_rng(seed)
    a, b = _complex(7, 11, phi, rng), _complex(11, 5, phi, rng)
    a[2, 3] = 0.0
    consts = crt_constants(13)
    ah, bh = Z.realify_left(a), Z.realify_right(b)
    s = R.choose_scaling(ah, bh, consts, "fast")
    assert np.array_equal(s.nu[0::2], s.nu[1::2])
    bi = R.scale_to_integers(bh, s.nu, 0)
    assert np.array_equal(bi[0::2, 0::2], bi[1::2, 1::2]) and np.array_equal(bi[0::2, 1::2], -bi[1::2, 0::2])
    ra = R.residues(R.scale_to_integers(ah, s.mu, 1), consts.moduli)      # (N, m, 2k)
    rb = R.residues(bi.T.copy(), consts.moduli)                             # (N, 2n, 2k): Bhat's columns
    realified = R.modular_products(ra, rb, consts.moduli).astype(np.int64)  # (N, m, 2n) in [0, p)
    p = np.array(consts.moduli, dtype=np.int64)[:, None, None]
    # Bhat's column 2j + 1 holds both roles: Im b at its even rows, Re b at its odd ones, with
    # the very residues column 2j holds (one shift): P_residues_karatsuba reads only it
    assert np.array_equal(rb[:, 0::2, 0::2], rb[:, 1::2, 1::2])
    ar, ai = ra[:, :, 0::2].astype(np.int64), ra[:, :, 1::2].astype(np.int64)
    br, bi_ = rb[:, 1::2, 1::2].astype(np.int64), rb[:, 1::2, 0::2].astype(np.int64)
    p1, p2 = ar @ br.transpose(0, 2, 1), ai @ bi_.transpose(0, 2, 1)
    p3 = ((ar + ai) % p) @ ((br + bi_) % p).transpose(0, 2, 1)
    assert np.array_equal((p1 - p2) % p, realified[:, :, 0::2])
    assert np.array_equal((p3 - p1 - p2) % p, realified[:, :, 1::2])


def test_accurate_mode_may_give_the_pair_of_columns_different_shifts():
    """Why accurate mode runs the realified product: its column shifts see the coarse
    bound of each entry, which differs between Bhat's columns 2j and 2j + 1."""
    rng = np.random.default_rng(1)
    a, b = _complex(9, 13, 6.0, rng), _complex(13, 7, 6.0, rng)
    s = R.choose_scaling(Z.realify_left(a), Z.realify_right(b), crt_constants(14), "accurate")
    assert not np.array_equal(s.nu[0::2], s.nu[1::2])


def test_the_size_threshold_and_its_setting(monkeypatch):
    from ozaki_cutlass import config

    monkeypatch.delenv("OZAKI_KARATSUBA_MIN")
    assert config.karatsuba_min() == config.KARATSUBA_MIN_DEFAULT == 8192
    big = launch(m=8192, n=2 * 8192, k=2 * 8192)
    assert karatsuba_applies(big, scaled())
    assert not karatsuba_applies(launch(m=8192, n=2 * 8192, k=2 * 4096), scaled())   # k below it
    assert not karatsuba_applies(launch(), scaled())
    monkeypatch.setenv("OZAKI_KARATSUBA_MIN", "40")    # launch(): complex m, n, k = 64, 48, 40
    assert karatsuba_applies(launch(), scaled())
    monkeypatch.setenv("OZAKI_KARATSUBA_MIN", "41")
    assert not karatsuba_applies(launch(), scaled())
    for bad in ("-1", "many", "1.5"):
        monkeypatch.setenv("OZAKI_KARATSUBA_MIN", bad)
        with pytest.raises(ValueError, match="OZAKI_KARATSUBA_MIN"):
            karatsuba_applies(launch(), scaled())
