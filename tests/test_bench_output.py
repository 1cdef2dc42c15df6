"""The benchmark's shapes, CSV and plot, on synthetic measurements (no GPU needed)."""

import argparse
import csv
import json
import re

import pytest

from ozaki_cutlass.tools.arguments import matrix_shape, parse_shape
from ozaki_cutlass.tools.bench import CSV_FIELDS, write_csv, write_plot


def _row(m, n, k, native_ms, staged_ms, fused_ms):
    flops = 2.0 * m * n * k
    phases = {"scale": 1.0, "residues": 1.0, "int8_gemm": 2.0, "crt": 0.5}
    row = {"m": m, "n": n, "k": k, "native_ms": native_ms, "native_tflops": flops / native_ms / 1e9,
           "native_error": 3e-15, "bit_identical": True}
    for path, ms in (("staged", staged_ms), ("fused", fused_ms)):
        row[path] = {"kernel": f"k_{path}", "ms": ms, "tflops": flops / ms / 1e9,
                     "phases_ms": phases | {"total": ms}, "error": 2e-16}
    return row


def test_parse_shape():
    assert parse_shape("4096") == (4096, 4096, 4096)
    assert parse_shape("65536x1024x4096") == (65536, 1024, 4096)
    for bad in ("4096x1024", "0", "axbxc", "1x2x3x4"):
        with pytest.raises(ValueError, match="shape"):
            parse_shape(bad)


def test_matrix_shape():
    """The stage-alone scripts' MxN shapes (scripts/combine_alone.py, shifts_alone.py)."""
    assert matrix_shape("4096") == (4096, 4096)
    assert matrix_shape("16384X1024") == (16384, 1024)
    for bad in ("8x8x8", "0x4", "axb", "0"):
        with pytest.raises(argparse.ArgumentTypeError, match="shape"):
            matrix_shape(bad)


def test_csv_one_record_per_shape_and_path(tmp_path):
    rows = [_row(4096, 4096, 4096, 2.0, 4.0, 5.0), _row(65536, 1024, 4096, 10.0, 8.0, 9.0)]
    out = tmp_path / "bench.csv"
    write_csv(rows, ["staged", "fused"], out)
    with open(out) as f:
        records = list(csv.DictReader(f))
    assert list(records[0]) == list(CSV_FIELDS)
    assert [(r["m"], r["path"]) for r in records] == [
        ("4096", "native"), ("4096", "staged"), ("4096", "fused"),
        ("65536", "native"), ("65536", "staged"), ("65536", "fused")]
    staged = records[1]
    assert float(staged["ratio_to_native"]) == pytest.approx(0.5)
    assert float(staged["tflops"]) == pytest.approx(2 * 4096**3 / 4.0 / 1e9)
    assert float(records[5]["ratio_to_native"]) == pytest.approx(10.0 / 9.0)


def test_plot_png(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [_row(n, n, n, 2.0 * (n / 4096) ** 3, 3.0 * (n / 4096) ** 3, 3.5 * (n / 4096) ** 3)
            for n in (1024, 4096, 16384)]
    out = tmp_path / "bench.png"
    write_plot(rows, ["staged", "fused"], out, "synthetic")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_csv_and_plot_carry_the_auto_policy(tmp_path):
    rows = [_row(4096, 4096, 4096, 2.0, 4.0, 5.0), _row(8192, 8192, 8192, 20.0, 16.0, 19.0)]
    rows[0]["auto"] = {"ms": 2.1, "tflops": 65.4, "native_ms": 2.0, "ratio": 2.0 / 2.1, "chose": "native",
                       "why": "table: native DGEMM measured faster in this bucket"}
    rows[1]["auto"] = {"ms": 16.0, "tflops": 68.7, "native_ms": 20.5, "ratio": 20.5 / 16.0, "chose": "staged",
                       "why": "emulation faster"}
    out = tmp_path / "bench.csv"
    write_csv(rows, ["staged"], out)
    with open(out) as f:
        auto = [r for r in csv.DictReader(f) if r["path"] == "auto"]
    assert [a["kernel"].split(":")[0] for a in auto] == ["native", "staged"]
    rows[1]["auto"] |= {"kernel": "i8_x", "speculation": "hit"}
    write_csv(rows, ["staged"], out)
    with open(out) as f:
        assert [r for r in csv.DictReader(f) if r["path"] == "auto"][1]["kernel"].startswith("staged i8_x: ")
    assert float(auto[1]["ratio_to_native"]) == pytest.approx(20.5 / 16.0)
    pytest.importorskip("matplotlib")
    write_plot(rows, ["staged"], tmp_path / "b.png", "t")
    assert (tmp_path / "b.png").stat().st_size > 1000


def test_tune_points_cover_every_size_and_put_shapes_first():
    from ozaki_cutlass.tools.tune import tune_points

    points = tune_points([4096, 1024, 16384], [(4096, 4096, 65536)])
    assert [p[:3] for p in points] == [(4096, 4096, 65536), (1024,) * 3, (4096,) * 3, (16384,) * 3]
    rect = points[0][3]
    assert rect["k"][0] <= 65536 <= rect["k"][1] and rect["k"][1] < 2 * 65536 and rect["m"][0] > 2048
    squares = [p[3]["m"] for p in points[1:]]
    assert squares[0][0] == 1 and squares[-1][1] == 2**31 - 1
    assert all(a[1] + 1 == b[0] for a, b in zip(squares, squares[1:]))  # no gap, no overlap
    for n, (lo, hi) in zip((1024, 4096, 16384), squares):
        assert lo <= n <= hi


def test_tune_candidates_keep_the_tables_kernels_once():
    """A re-tune times the built-in candidates, the default staged set, every kernel of the
    table in effect (so an earlier winner is never dropped unseen) and the --variants
    matches, each kernel once; other arches' table entries are left out."""
    from ozaki_cutlass.tools.tune import tune_candidates
    from ozaki_cutlass.dispatch import builtin_candidates
    from ozaki_cutlass.generator import Arch, catalog

    swizzled = "i8_sm90a_128x256x128_c1x1_coop_s0_int32_g1_sw8"
    default = catalog("sm_90a")[0].name
    table = {"entries": [
        {"path": "staged", "kernel": swizzled, "m": [1, 9], "n": [1, 9], "k": [1, 9]},
        {"path": "staged", "kernel": default, "m": [10, 99], "n": [10, 99], "k": [10, 99]},
        {"path": "native", "m": [100, 999], "n": [100, 999], "k": [100, 999], "ms": 1.0},
        {"path": "staged", "kernel": "i8_sm80_128x128x64_w64x64x64_ms_s4_int32_g1"},
    ]}
    cands = tune_candidates(Arch.SM90A, ["i8_sm90a_256x128x128_c2x1_coop_s0_int32_g1"], (table, "t.json"))
    names = [c.variant.name for c in cands]
    assert len(names) == len(set(names))
    assert {c.variant.name for c in builtin_candidates(Arch.SM90A)} <= set(names)
    assert {v.name for v in catalog("sm_90a")} <= set(names)
    assert swizzled in names and "i8_sm90a_256x128x128_c2x1_coop_s0_int32_g1" in names
    assert all(c.variant.arch is Arch.SM90A for c in cands)
    assert next(c for c in cands if c.variant.name == swizzled).source == "from the table in effect"


def test_gpu_identity_reads_the_first_line_of_nvidia_smi():
    from ozaki_cutlass.tools.measure import parse_gpu_identity

    # a two-GPU host once gave the table a driver of "580.159.04\nNVIDIA H200"
    assert parse_gpu_identity("NVIDIA H200, 580.159.04\nNVIDIA H200, 580.159.04\n") == ("NVIDIA H200", "580.159.04")
    assert parse_gpu_identity("NVIDIA H200, 580.159.04") == ("NVIDIA H200", "580.159.04")
    for text in ("", "\n", "NVIDIA H200", "NVIDIA H200, ", "a, b, c"):
        assert parse_gpu_identity(text) == ("unknown", "unknown")


def test_bucket_entries_keep_the_best_kernel_of_each_path():
    """tune's entries for one bucket: native first where it won, the winner with native's
    time (what the auto policy reads), then the fastest of the other path, so that a call
    asking for that path gets its tuned kernel; the dispatcher reads them that way."""
    from ozaki_cutlass import dispatch
    from ozaki_cutlass.tools.tune import bucket_entries
    from ozaki_cutlass.dispatch import Candidate, Problem
    from ozaki_cutlass.generator import Arch, catalog

    staged = [Candidate(path="staged", variant=v) for v in catalog("sm_90a")[:3]]
    fused = next(c for c in dispatch.builtin_candidates(Arch.SM90A) if c.path == "fused")
    timings = [(12.0, staged[0]), (10.5, staged[1]), (9.0, fused), (11.0, staged[2])]
    box = {"m": [1000, 3000], "n": [1000, 3000], "k": [1000, 3000], "measured": [2048, 2048, 2048]}
    entries = bucket_entries("sm_90a", box, 2.0 * 2048**3, timings, fused, 9.2, 8.0)
    assert [(e["path"], e.get("kernel")) for e in entries] == [
        ("native", None), ("fused", fused.variant.name), ("staged", staged[1].variant.name)]
    assert entries[1]["native_ms"] == 8.0 and entries[1]["ms"] == 9.2 and "native_ms" not in entries[2]
    assert entries[2]["ms"] == 10.5 and entries[2]["tflops"] == pytest.approx(2.0 * 2048**3 / 10.5e9)
    table = {"entries": entries}
    problem = Problem(2048, 2048, 2048, 15, Arch.SM90A)
    assert dispatch.prefer_native(problem, "accurate", table=table)[0]
    assert dispatch.choose(problem, table=table).variant == fused.variant
    assert dispatch.choose(problem, table=table, path="staged").variant == staged[1].variant
    # emulation faster: no native entry, the winner's native_ms says so
    entries = bucket_entries("sm_90a", box, 1.0, timings[:2], staged[1], 10.4, 11.0)
    assert [e["path"] for e in entries] == ["staged"] and entries[0]["kernel"] == staged[1].variant.name
    assert not dispatch.prefer_native(problem, "accurate", table={"entries": entries})[0]
    # emulation faster, but by less than the margin: native first all the same
    near = 11.0 / dispatch.MEASURED_MARGIN * 1.001
    entries = bucket_entries("sm_90a", box, 1.0, timings[:2], staged[1], near, 11.0)
    assert [e["path"] for e in entries] == ["native", "staged"] and entries[0]["ms"] == 11.0
    assert dispatch.prefer_native(problem, "accurate", table={"entries": entries})[0]
    assert dispatch.prefer_native(problem, "accurate", table={"entries": entries[1:]})[0]


def test_bucket_entries_mark_a_default_call_winner_that_a_count_does_not_share():
    """Where the fastest default call and the fastest call at the table's count run
    different kernels: the default call's winner first, marked "calls": "default" with
    native's time, then every path's fastest at the count, fastest first; the dispatcher
    gives each kind of call its own."""
    from ozaki_cutlass import dispatch
    from ozaki_cutlass.tools.tune import bucket_entries
    from ozaki_cutlass.dispatch import Candidate, Problem
    from ozaki_cutlass.generator import Arch, catalog

    staged = [Candidate(path="staged", variant=v) for v in catalog("sm_90a")[:2]]
    fused = [c for c in dispatch.builtin_candidates(Arch.SM90A) if c.path == "fused"][:2]
    timings = [(12.0, staged[0]), (10.5, staged[1]), (9.0, fused[0]), (9.5, fused[1])]
    box = {"m": [1000, 3000], "n": [1000, 3000], "k": [1000, 3000], "measured": [2048, 2048, 2048]}
    entries = bucket_entries("sm_90a", box, 2.0 * 2048**3, timings, fused[1], 9.9, 12.0)
    assert [(e["path"], e["kernel"], e.get("calls")) for e in entries] == [
        ("fused", fused[1].variant.name, "default"), ("fused", fused[0].variant.name, None),
        ("staged", staged[1].variant.name, None)]
    assert entries[0]["native_ms"] == 12.0 and all("native_ms" not in e for e in entries[1:])
    table = {"entries": entries}
    named, default = Problem(2048, 2048, 2048, 15, Arch.SM90A), Problem(2048, 2048, 2048, 15, Arch.SM90A,
                                                                         contract=True)
    assert dispatch.choose(default, table=table).variant == fused[1].variant
    assert dispatch.choose(named, table=table).variant == fused[0].variant
    assert dispatch.choose(named, table=table, path="staged").variant == staged[1].variant
    assert not dispatch.prefer_native(default, "fast", table=table)[0]
    # the default call's winner a staged kernel, the count's fastest a fused one: the
    # staged entry at the count follows (its path's fastest there: the same kernel)
    entries = bucket_entries("sm_90a", box, 1.0, timings, staged[1], 9.9, 12.0)
    assert [(e["path"], e["kernel"], e.get("calls")) for e in entries] == [
        ("staged", staged[1].variant.name, "default"), ("fused", fused[0].variant.name, None),
        ("staged", staged[1].variant.name, None)]


def _energy(gfj):
    return {"calls": 100, "seconds": 1.0, "joules": 500.0, "watts": 500.0, "gflop_per_joule": gfj,
            "ms_per_call": 10.0}


def _with_alternatives(row, cublas_row):
    """A row with cuBLAS's emulation (measured, or skipped) and energy on every row."""
    row["native_energy"] = _energy(70.0)
    for path in ("staged", "fused"):
        row[path]["energy"] = _energy(85.0)
    row["cublas"] = cublas_row
    return row


def test_csv_carries_cublas_emulation_energy_and_skips(tmp_path):
    measured = {"kernel": "cuBLAS 13.1.1 FP64 emulation: 55 mantissa bits (7 INT8 slices)", "mantissa_bits": 55,
                "ms": 8.0, "tflops": 2 * 4096**3 / 8.0 / 1e9, "error": 1.1e-16, "energy": _energy(20.0)}
    rows = [_with_alternatives(_row(4096, 4096, 4096, 2.0, 4.0, 5.0), measured),
            _with_alternatives(_row(8192, 8192, 8192, 16.0, 14.0, 13.0),
                               {"skipped": "libcublas 13.0.2 has no FP64 emulation"})]
    out = tmp_path / "bench.csv"
    write_csv(rows, ["staged", "fused"], out)
    with open(out) as f:
        records = list(csv.DictReader(f))
    assert [(r["m"], r["path"]) for r in records] == [
        ("4096", "native"), ("4096", "cublas_emulation"), ("4096", "staged"), ("4096", "fused"),
        ("8192", "native"), ("8192", "cublas_emulation"), ("8192", "staged"), ("8192", "fused")]
    emu = records[1]
    assert emu["mantissa_bits"] == "55" and float(emu["ratio_to_native"]) == pytest.approx(0.25)
    assert float(emu["gflop_per_joule"]) == 20.0 and float(emu["error"]) == 1.1e-16
    assert float(records[0]["gflop_per_joule"]) == 70.0 and float(records[2]["watts"]) == 500.0
    skipped = records[5]
    assert skipped["kernel"] == "skipped: libcublas 13.0.2 has no FP64 emulation" and skipped["ms"] == ""


def _png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_plot_has_an_error_panel_and_an_energy_panel_when_measured(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [_row(n, n, n, 2.0 * (n / 4096) ** 3, 3.0 * (n / 4096) ** 3, 3.5 * (n / 4096) ** 3) for n in (1024, 4096)]
    write_plot(rows, ["staged", "fused"], tmp_path / "two.png", "no energy")
    measured = {"kernel": "k", "mantissa_bits": 55, "ms": 8.0, "tflops": 17.0, "error": 1e-16, "energy": _energy(20)}
    rows = [_with_alternatives(r, dict(measured)) for r in rows]
    write_plot(rows, ["staged", "fused"], tmp_path / "three.png", "with energy")
    (w2, h2), (w3, h3) = _png_size(tmp_path / "two.png"), _png_size(tmp_path / "three.png")
    assert h2 == h3 and w3 == pytest.approx(1.5 * w2, rel=0.02)  # speed and error; then energy too


def test_arrays_for_takes_our_own_arrays_without_cupy(monkeypatch):
    import importlib.util

    from ozaki_cutlass.tools import measure

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "cupy" else real(name, *a))
    monkeypatch.setattr(measure.driver, "ensure_context", lambda ordinal=0: None)
    arrays = measure.arrays_for("auto")
    assert isinstance(arrays, measure.OwnArrays) and "policy='native'" in arrays.native_label
    assert isinstance(measure.arrays_for("own"), measure.OwnArrays)
    with pytest.raises(RuntimeError, match="--arrays cupy: CuPy is not installed.*--arrays own"):
        measure.arrays_for("cupy")
    with pytest.raises(ValueError, match="expected one of auto, cupy, own"):
        measure.arrays_for("torch")


def test_cublas_emulation_row_is_skipped_with_the_reason(monkeypatch, capsys):
    import numpy as np

    from ozaki_cutlass.device import cublas, cublas_emulation
    from ozaki_cutlass.tools import bench

    class Emulation:
        bits = 55

        def __init__(self, a, b):
            if a == "old":
                raise cublas_emulation.EmulationUnavailable("libcublas 13.0.2 has no FP64 emulation (cuBLAS 13.1 ...)")

        def probe(self):
            return np.ones((2, 3)), Emulation.bits

    class Arrays:
        @staticmethod
        def rows(x, index):
            return x[index]

    monkeypatch.setattr(bench, "CublasEmulation", Emulation)
    monkeypatch.setattr(cublas, "version", lambda: (13, 1, 1))
    ref = (np.ones((2, 3)), np.zeros((2, 3)))
    emu, row = bench._cublas_emulation("old", "b", Arrays, [0, 1], ref)
    assert emu is None and row == {"skipped": "libcublas 13.0.2 has no FP64 emulation (cuBLAS 13.1 ...)"}
    emu, row = bench._cublas_emulation("a", "b", Arrays, [0, 1], ref)
    assert isinstance(emu, Emulation) and row["mantissa_bits"] == 55 and row["probe_error"] == 0.0
    assert "cuBLAS 13.1.1 FP64 emulation: 55 mantissa bits (7 INT8 slices)" in row["kernel"]
    Emulation.bits = -1
    emu, row = bench._cublas_emulation("a", "b", Arrays, [0, 1], ref)
    assert emu is None and "ran native DGEMM, not its emulation" in row["skipped"]
    printed = _row(4096, 4096, 4096, 2.0, 4.0, 5.0) | {"cublas": row}
    bench._print_row(printed, ["staged", "fused"])
    out = capsys.readouterr().out
    assert "4096x4096x4096 cuBLAS-emu skipped: cuBLAS reported -1 mantissa bits" in out
    assert out.count("n/a") == 3  # no energy measured: each timed row says so


def test_own_arrays_time_native_dgemm_through_our_cublas_path(monkeypatch):
    import numpy as np

    from ozaki_cutlass.tools import measure

    seen = []
    monkeypatch.setattr(measure, "gemm", lambda a, b, **kw: seen.append((a, b, kw)) or "C")
    monkeypatch.setattr(measure.driver, "ensure_context", lambda ordinal=0: None)
    arrays = measure.OwnArrays()
    assert arrays.native("A", "B") == "C" and seen == [("A", "B", {"policy": "native"})]
    # rows are read one by one at ptr + 8 cols i, after the array's stream
    reads = []

    def read_back(ptr, host, stream=0):
        reads.append((ptr, host.shape, stream))
        host[:] = ptr
        return host

    monkeypatch.setattr(measure.driver, "read_back", read_back)
    x = type("X", (), {"ptr": 0x1000, "shape": (6, 5), "stream": 9})()
    got = arrays.rows(x, np.array([0, 3]))
    assert reads == [(0x1000, (5,), 9), (0x1000 + 8 * 5 * 3, (5,), 9)]
    assert got.shape == (2, 5) and got[1, 0] == 0x1000 + 120


def test_bench_main_end_to_end_on_fakes(monkeypatch, tmp_path, capsys):
    """bench's whole loop on the CPU: NumPy arrays for device arrays, a fake gemm (the
    reference's bits), fake events and a fake energy counter; every row lands in the JSON,
    the CSV and the printout, and energy is taken over the timed calls."""
    import json

    import numpy as np

    from ozaki_cutlass import reference
    from ozaki_cutlass.tools import bench, cli
    from ozaki_cutlass.tools.measure import gpu_identity

    class Arrays:
        name, native_label = "fake", "numpy a @ b"

        @staticmethod
        def pair(m, n, k, phi, seed):
            rng = np.random.default_rng(seed)
            return rng.random((m, k)) - 0.5, rng.random((k, n)) - 0.5

        native = staticmethod(lambda a, b: a @ b)
        rows = staticmethod(lambda x, index: x[index])
        host = staticmethod(lambda x: x)
        same_bits = staticmethod(lambda x, y: bool(np.array_equal(x.view(np.int64), y.view(np.int64))))
        stream = staticmethod(lambda: 0)
        release = staticmethod(lambda: None)

    def fake_gemm(a, b, timings=None, moduli=None, mode=None, path=None, **kw):
        if timings is not None:
            timings.update({"scale": 0.1, "residues": 0.2, "int8_gemm": 0.3, "crt": 0.1, "total": 0.7,
                            "path": path or "fused", "kernel": f"k_{path}"}
                           | ({} if path or moduli else {"speculation": "hit"}))  # the default call's
        return reference.gemm(a, b, moduli=moduli or 15, mode=mode or "accurate")

    class Emulation:
        def __init__(self, a, b):
            self.a, self.b = a, b

        def __call__(self):
            return self.a @ self.b

        def probe(self):
            return self(), 55

    energy_calls = []

    def fake_energy(call, ms, flops, meter, seconds, stream):
        energy_calls.append((call, ms))
        return {"calls": 3, "seconds": 1.0, "joules": 10.0, "watts": 10.0, "gflop_per_joule": flops / 1e10,
                "ms_per_call": ms}

    def event_times(calls, warmup, reps, stream=0):
        return [[1.0 + i] * reps for i in range(len(calls))], [c() for c in calls]

    monkeypatch.setattr(bench, "arrays_for", lambda choice: Arrays())
    monkeypatch.setattr(bench, "gemm", fake_gemm)
    monkeypatch.setattr(bench, "CublasEmulation", Emulation)
    monkeypatch.setattr(bench, "measure_energy", fake_energy)
    monkeypatch.setattr(bench, "forget_emulation", lambda: None)
    monkeypatch.setattr(bench, "compute_capability", lambda: (9, 0))
    monkeypatch.setattr(bench, "_energy_counter", lambda seconds: (object(), "energy: fake counter"))
    monkeypatch.setattr(bench, "emulation_problem", lambda: None)
    monkeypatch.setattr(bench.cublas, "version", lambda: (13, 1, 1))
    monkeypatch.setattr(bench.driver, "ensure_context", lambda ordinal=0: None)
    monkeypatch.setattr(bench.driver, "event_times", event_times)
    out = tmp_path / "b.json"
    assert cli.main(["bench", "--shapes", "48x40x32", "--reps", "3", "--json", str(out),
                     "--csv", str(tmp_path / "b.csv")]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["native_ms"] == 1.0 and row["cublas"]["ms"] == 2.0 and row["staged"]["ms"] == 3.0
    assert row["fused"]["ms"] == 4.0 and row["auto"]["ms"] == 1.0 and row["bit_identical"] is True
    assert row["cublas"]["mantissa_bits"] == 55 and row["cublas"]["error"] < 1e-15
    assert row["native_energy"]["gflop_per_joule"] == pytest.approx(2 * 48 * 40 * 32 / 1e10)
    assert {"energy"} <= set(row["cublas"]) & set(row["staged"]) & set(row["auto"])
    # energy taken over the timed calls, with their medians: native, cuBLAS, staged, fused, auto
    assert [ms for _, ms in energy_calls] == [1.0, 2.0, 3.0, 4.0, 1.0]
    printed = capsys.readouterr().out
    assert "cuBLAS FP64 emulation: libcublas 13.1.1, strategy eager" in printed
    assert "48x40x32 cuBLAS-emu" in printed and "55 mantissa bits (7 INT8 slices)" in printed
    assert len((tmp_path / "b.csv").read_text().splitlines()) == 1 + 5
    # the fake's arrays are neither CuPy's nor PyTorch's: graphs, no replay lane
    record = json.loads(out.read_text())
    assert record["graphs"] is True and record["replay_lane"] is False
    assert record["command"] == f"ozaki-cutlass bench --shapes 48x40x32 --reps 3 --json {out} --csv {tmp_path / 'b.csv'}"
    assert (record["gpu"], record["driver"]) == gpu_identity()
    assert "graphs: a path's repeated call replays" in printed and "the replay lane takes CuPy" in printed
    # the auto row names the kernel it ran (the fake's timings give path and kernel)
    assert row["auto"]["kernel"] == "k_None" and row["auto"]["chose"] == "fused"
    auto_line = next(line for line in printed.splitlines() if " auto " in line)
    assert "-> fused k_None (" in auto_line and " run ahead: hit; " in auto_line
    assert row["auto"]["speculation"] == "hit"


def test_the_header_says_where_the_replay_lane_runs():
    from ozaki_cutlass.tools import bench

    assert bench.graphs_line("cupy").endswith("from its third call through the replay lane (no checks in front)")
    assert "replay lane takes CuPy or PyTorch arrays only" in bench.graphs_line("own")


def test_kind_points_are_the_problems_the_dispatcher_decides():
    """A complex n^3 call is decided by its realified n x 2n x 2n (an entry for complex
    calls alone), a batch by its element (an entry real calls read too)."""
    from ozaki_cutlass.tools.tune import kind_points

    (z, bt) = kind_points([1024], [(64, 512)])
    label, m, n, k, box, flops, make = z
    assert (m, n, k) == (1024, 2048, 2048) and flops == 8.0 * 1024**3 and make == ("complex_pair", 1024)
    assert all(box[d][0] <= v <= box[d][1] < 2 * v for d, v in (("m", m), ("n", n), ("k", k)))
    assert "complex128 1024^3" in box["operands"] and box["complex"] is True
    label, m, n, k, box, flops, make = bt
    assert (m, n, k) == (512,) * 3 and flops == 2.0 * 64 * 512**3 and make == ("batch_pair", 64, 512)
    assert box["operands"] == "batches of 64" and box["k"][0] <= 512 <= box["k"][1] and "complex" not in box
    assert kind_points(None, None) == []


def test_a_complex_row_says_what_the_default_call_ran(capsys):
    """The auto line names the path, moduli, mode and kernel, and Karatsuba where it ran."""
    from ozaki_cutlass.tools.bench_kinds import _chose, print_kind_row

    timings = {"path": "staged", "kernel": "i8_k", "moduli": 16, "mode": "fast", "policy": "cost model",
               "products": "karatsuba: 3 per modulus", "contract": {"bound": 1e-17, "native": False}}
    chose = _chose(timings)
    assert chose["products"] == "karatsuba: 3 per modulus" and chose["bound"] == 1e-17
    call = {"ms": 60.0, "tflops": 70.0, "x_native": 1.5, "error": 1e-19, "native_ms": 90.0}
    print_kind_row({"kind": "complex", "n": 8192, "chose": chose, "native": "cuBLAS ZGEMM", "moduli": 15,
                    "mode": "accurate", "calls": {"native": call | {"x_native": 1.0}, "auto": call, "emulation": call}})
    auto = next(line for line in capsys.readouterr().out.splitlines() if " auto " in line)
    assert "-> staged, 16 moduli fast, i8_k, karatsuba: 3 per modulus (cost model)" in auto
    assert "complex 8192^3" in auto and "native 90 ms in its A/B run" in auto


def test_a_scripts_results_file_has_its_date_gpu_command_settings_and_rows(tmp_path, monkeypatch):
    from ozaki_cutlass.tools import measure

    monkeypatch.setattr(measure, "gpu_identity", lambda *args: ("NVIDIA H200", "580.159.04"))
    monkeypatch.setattr(measure.sys, "argv", ["scripts/shifts_alone.py", "--shapes", "16384x1024", "--other", "a b"])
    path = tmp_path / "rows.json"
    measure.write_rows(str(path), [{"n": 8192, "ms": 54.7}], reps=5, phi=0.5)
    saved = json.loads(path.read_text())
    assert saved["reps"] == 5 and saved["phi"] == 0.5 and saved["rows"] == [{"n": 8192, "ms": 54.7}]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", saved["date"])
    assert (saved["gpu"], saved["driver"]) == ("NVIDIA H200", "580.159.04")
    assert saved["command"] == "python scripts/shifts_alone.py --shapes 16384x1024 --other 'a b'"
    assert list(saved)[-1] == "rows"  # the settings first, the rows last


def test_a_results_file_made_from_other_files_names_no_gpu_of_its_own(tmp_path, monkeypatch):
    """gpu=False (a table from the runs' files, an ncu page's mix, the host's reference):
    the date and the command, and the GPU never asked."""
    from ozaki_cutlass.tools import measure

    def asked(*args):
        raise AssertionError("gpu_identity asked")

    monkeypatch.setattr(measure, "gpu_identity", asked)
    monkeypatch.setattr(measure.sys, "argv", ["scripts/stage_table.py", "table", "r.json:n.csv", "--json", "t.json"])
    path = tmp_path / "table.json"
    measure.write_results(str(path), {"bandwidth_tbs": 4.2, "tables": []}, gpu=False)
    saved = json.loads(path.read_text())
    assert list(saved) == ["date", "command", "bandwidth_tbs", "tables"]
    assert saved["command"] == "python scripts/stage_table.py table r.json:n.csv --json t.json"


def test_gpu_identity_is_unknown_where_it_cannot_ask(monkeypatch):
    """Nothing to ask (no bindings, a driver call that fails, no nvidia-smi): the identity
    is "unknown", not an error or a guess."""
    import subprocess

    from ozaki_cutlass.device.driver import CudaError
    from ozaki_cutlass.tools import measure

    def no_bindings():
        raise ImportError("cuda.bindings")

    monkeypatch.setattr(measure.driver, "bindings", no_bindings)
    assert measure.gpu_identity() == ("unknown", "unknown")

    def failing_check(result, what="CUDA call"):
        raise CudaError(f"{what} failed: CUDA_ERROR_NO_DEVICE")

    class FakeBindings:
        def __getattr__(self, name):
            return lambda *args: (0, b"0000:00:00.0")

    monkeypatch.setattr(measure.driver, "bindings", FakeBindings)
    monkeypatch.setattr(measure.driver, "check", failing_check)
    assert measure.gpu_identity() == ("unknown", "unknown")

    def no_smi(*args, **kwargs):
        raise FileNotFoundError("nvidia-smi")

    monkeypatch.setattr(measure.driver, "check", lambda result, what="": result[1])
    monkeypatch.setattr(measure.subprocess, "run", no_smi)
    assert measure.gpu_identity() == ("unknown", "unknown")
    monkeypatch.setattr(measure.subprocess, "run",
                        lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout="NVIDIA H200, 580.159.04\n"))
    assert measure.gpu_identity() == ("NVIDIA H200", "580.159.04")
