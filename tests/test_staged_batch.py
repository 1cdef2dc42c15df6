"""The batch's orchestration (paths.staged_batch) on the CPU, with its stages replaced by
recorders: each element's residues in its slot, one INT8 GEMM per k chunk over all the
run's planes, each element's CRT from its own planes, shifts and non-finite counts; runs
split where the contract's choices differ or the planes pass BATCH_BYTES; native
fallbacks left out. Its bits against the loop of single calls: tests/gpu/test_batched_gpu.py."""

import pytest

from ozaki_cutlass.device.arrays import Matrix
from ozaki_cutlass.numerics.contract import Choice
from ozaki_cutlass.numerics.moduli import K_CHUNK, padded_k, padded_n
from ozaki_cutlass.paths import staged_batch as SB
from ozaki_cutlass.paths.launch import Launch, PhaseTimer
from ozaki_cutlass.paths.scale import Scaled
from recorders import Calls, Gemm

BASES = {"ra": 1 << 40, "rb": 2 << 40, "c32": 3 << 40, "batch_mu": 4 << 40, "batch_nu": 5 << 40,
         "batch_nfa": 6 << 40, "batch_nfb": 7 << 40}


class Workspace:
    def __init__(self):
        self.asked = {}

    def get(self, name, nbytes):
        self.asked[name] = max(self.asked.get(name, 0), nbytes)
        return BASES.get(name, 1 << 36)


class Kern:
    def __init__(self):
        self.stages, self.gemm = Calls(), Gemm()


@pytest.fixture
def recorded(monkeypatch):
    """scale, residues, the contract and the copies replaced: element i's shifts and
    counts at 1000 + i, 2000 + i, 3000 + i, 4000 + i."""
    log = {"residues": [], "copies": []}

    def scale(kern, L, n_pad, ws, overlap):
        i = L.O.ptr
        return Scaled(a=None, b=None, mu=1000 + i, nu=2000 + i, nonfinite_a=3000 + i, nonfinite_b=4000 + i)

    monkeypatch.setattr(SB, "scale", scale)
    monkeypatch.setattr(SB, "residues", lambda kern, L, sc, ra, rb, *rest: log["residues"].append((L.O.ptr, ra, rb)))
    monkeypatch.setattr(SB.driver, "copy_async",
                        lambda dst, src, nbytes, stream: log["copies"].append((dst, src, nbytes)))
    return log


def launches(count, m, n, k, elements):
    """Element i writes to O.ptr = i (a tag the fakes read back)."""
    A, B = Matrix(1 << 30, m, k, k, 1, "cai", 0, None), Matrix(1 << 31, k, n, n, 1, "cai", 0, None)
    return [Launch(A=A, B=B, C=None, O=Matrix(i, m, n, n, 1, "cai", 0, None), m=m, n=n, k=k, alpha=1.0, beta=0.0,
                   moduli=count, mode="fast", stream=0) for i in range(elements)]


def test_one_gemm_per_k_chunk_for_the_whole_batch(recorded):
    m, n, k, count, E = 24, 18, K_CHUNK + 40, 13, 5          # two k chunks
    kp, n_pad = padded_k(k), padded_n(n)
    plane = m * n_pad
    kern, ws = Kern(), Workspace()
    choices, launched = SB.run_staged_batch(kern, launches(count, m, n, k, E), ws, PhaseTimer(0, False), None,
                                            False, False)
    assert choices == [None] * E and launched == 2
    assert ws.asked == SB.batch_buffers(E, count, m, n, k)
    # element i's residues in slot i
    assert recorded["residues"] == [(i, BASES["ra"] + i * count * m * kp, BASES["rb"] + i * count * n_pad * kp)
                                    for i in range(E)]
    gemms = [a for name, a in kern.gemm.calls if name == "gemm"]
    assert len(gemms) == 2
    for ch, g in enumerate(gemms):
        k0 = ch * K_CHUNK
        assert g[:4] == (m, n_pad, min(K_CHUNK, kp - k0), E * count)
        assert g[4:10] == (BASES["ra"] + k0, kp, m * kp, BASES["rb"] + k0, kp, n_pad * kp)
        assert g[10:13] == (BASES["c32"] + 4 * ch * E * count * plane, n_pad, plane)
    crts = [a for name, a in kern.stages.calls if name == "crt_unscale"]
    assert [c[0] for c in crts] == [BASES["c32"] + 4 * i * count * plane for i in range(E)]
    assert all(c[1:8] == (count, m, n, n_pad, plane, 2, E * count * plane) for c in crts)
    assert [(c[9], c[10]) for c in crts] == [(BASES["batch_mu"] + 4 * i * m, BASES["batch_nu"] + 4 * i * n)
                                             for i in range(E)]
    assert [c[16] for c in crts] == list(range(E))                 # each into its own out
    nfs = [c[19] for c in crts]
    assert [(nf.row_flags, nf.col_flags) for nf in nfs] == [(BASES["batch_nfa"] + 4 * i * m,
                                                             BASES["batch_nfb"] + 4 * i * n) for i in range(E)]
    # each element's shifts and counts copied into its slot before the next element's stages
    want = []
    for i in range(E):
        want += [(BASES["batch_mu"] + 4 * i * m, 1000 + i, 4 * m), (BASES["batch_nu"] + 4 * i * n, 2000 + i, 4 * n),
                 (BASES["batch_nfa"] + 4 * i * m, 3000 + i, 4 * m), (BASES["batch_nfb"] + 4 * i * n, 4000 + i, 4 * n)]
    assert recorded["copies"] == want


def test_runs_split_where_the_choices_differ_and_native_elements_are_left_out(recorded, monkeypatch):
    m, n, k = 16, 12, 40
    picks = [Choice(16, "fast", 1e-17, 2**-53, False), Choice(16, "fast", 1e-17, 2**-53, False),
             Choice(None, None, 1e-10, 2**-53, False, native=True, reason="native"),
             Choice(17, "fast", 1e-17, 2**-53, True), Choice(16, "fast", 1e-17, 2**-53, False)]
    it = iter(picks)
    monkeypatch.setattr(SB, "run_contract", lambda *args: (next(it), "prescan"))
    kern = Kern()
    choices, launched = SB.run_staged_batch(kern, launches(16, m, n, k, 5), Workspace(), PhaseTimer(0, False),
                                            2**-53, True, False)
    assert choices == picks and launched == 3                      # runs [0, 1], [3], [4]: one chunk each
    assert [g[3] for name, g in kern.gemm.calls if name == "gemm"] == [2 * 16, 17, 16]
    crts = [a for name, a in kern.stages.calls if name == "crt_unscale"]
    assert [c[16] for c in crts] == [0, 1, 3, 4] and [c[1] for c in crts] == [16, 16, 17, 16]
    # the slots restart with each run
    assert [r[1] - BASES["ra"] for r in recorded["residues"]] == [0, 16 * m * 48, 0, 0]


def test_a_run_holds_what_batch_bytes_allow(recorded, monkeypatch):
    m, n, k, count = 32, 32, 64, 8
    per_element = count * (m + n) * k + 4 * count * m * n
    assert SB.batch_slots(count, m, n, k) == SB.BATCH_BYTES // per_element
    monkeypatch.setattr(SB, "BATCH_BYTES", 3 * per_element + 1)
    kern = Kern()
    _, launched = SB.run_staged_batch(kern, launches(count, m, n, k, 7), Workspace(), PhaseTimer(0, False), None,
                                      False, False)
    assert launched == 3 and [g[3] for name, g in kern.gemm.calls if name == "gemm"] == [3 * count, 3 * count, count]
    monkeypatch.setattr(SB, "BATCH_BYTES", 1)
    assert SB.batch_slots(count, m, n, k) == 1
