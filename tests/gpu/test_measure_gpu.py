"""The measuring commands' GPU parts: cuBLAS's own FP64 emulation (its error against a
double-double product, the bits it reports), NVML energy over a loop of calls, and native
DGEMM timed on our own DeviceArrays without CuPy (the bits of policy="native"; demo and
bench running with CuPy hidden)."""

import importlib.util
import json
import math

import numpy as np
import pytest

import ozaki_cutlass
from ozaki_cutlass.device import cublas, driver, energy
from ozaki_cutlass.device.arrays import DeviceArray
from ozaki_cutlass.device.cublas_emulation import emulation_problem, forget_emulation
from ozaki_cutlass.numerics.accuracy import dd_product, normwise_error, random_matrix, same_bits
from ozaki_cutlass.tools import cli, demo, measure

pytestmark = pytest.mark.gpu


@pytest.fixture
def own():
    driver.ensure_context()
    return measure.OwnArrays()


@pytest.fixture
def no_cupy(monkeypatch):
    """importlib says CuPy is not installed (the measuring commands ask it that way)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "cupy" else real(name, *a))


def test_cublas_emulation_is_fp64_accurate(own, rng):
    why = emulation_problem()
    if why is not None:
        pytest.skip(f"cuBLAS FP64 emulation not available: {why}")
    a, b = random_matrix(640, 384, 0.5, rng), random_matrix(384, 520, 0.5, rng)
    da, db = own.upload(a), own.upload(b)
    emu = measure.CublasEmulation(da, db)
    out, bits = emu.probe()
    got = out.get()
    hi, lo = dd_product(a, b)
    err = normwise_error(got, hi, lo)
    native_err = normwise_error(a @ b, hi, lo)
    # dynamic mantissa control promises FP64's accuracy or better (native DGEMM's, where it falls back)
    assert err < 1e-15 and err <= 4 * native_err, (err, native_err)
    again = emu()
    assert isinstance(again, DeviceArray) and same_bits(again.get(), got)  # the timed call: the same product
    forget_emulation()
    if bits < 0:  # cuBLAS's choice, not ours: the bench skips the row with this reason
        pytest.skip(f"cuBLAS ran native DGEMM, not its emulation, on this GPU (it reported {bits} mantissa bits)")
    assert 40 <= bits <= 79, bits  # dynamic control: about FP64's 53 bits, at most cuBLAS's cap


def test_cublas_emulation_on_cupy_arrays_gives_the_same_bits(own, rng):
    cp = pytest.importorskip("cupy")
    if emulation_problem() is not None:
        pytest.skip(f"cuBLAS FP64 emulation not available: {emulation_problem()}")
    a, b = random_matrix(300, 200, 1.0, rng), random_matrix(200, 100, 1.0, rng)
    ours = measure.CublasEmulation(own.upload(a), own.upload(b))()
    theirs = measure.CublasEmulation(cp.asarray(a), cp.asarray(b))()
    assert isinstance(theirs, cp.ndarray) and same_bits(cp.asnumpy(theirs), ours.get())
    forget_emulation()


def test_cublas_emulations_workspace_grows_behind_a_call_in_flight(own, rng):
    """A larger product grows the emulation's workspace while the call before it may still
    run on the old one, which is freed without cuCtxSynchronize (that would end any
    thread's capture): cuMemFree waits for the GPU's work. Each result has the bits of
    the same product run again afterwards."""
    if emulation_problem() is not None:
        pytest.skip(f"cuBLAS FP64 emulation not available: {emulation_problem()}")
    forget_emulation()
    small = measure.CublasEmulation(own.upload(random_matrix(512, 768, 0.5, rng)),
                                    own.upload(random_matrix(768, 640, 0.5, rng)))
    big = measure.CublasEmulation(own.upload(random_matrix(2048, 3072, 0.5, rng)),
                                  own.upload(random_matrix(3072, 2560, 0.5, rng)))
    first = small()
    grown = big()  # enqueued right behind the first: the workspace grows now
    driver.synchronize(small.stream)
    assert same_bits(first.get(), small().get()) and same_bits(grown.get(), big().get())
    forget_emulation()


def test_energy_of_a_loop_is_positive_and_finite(own, rng):
    try:
        meter = energy.counter(0)
    except energy.EnergyUnavailable as exc:
        pytest.skip(f"energy n/a here: {exc}")
    n = 4096
    da, db = own.pair(n, n, n, 0.5, 1)
    call = lambda: own.native(da, db)  # noqa: E731
    times, _ = driver.event_times([call], 1, 3)
    ms = float(np.median(times[0]))
    e = measure.measure_energy(call, ms, 2.0 * n**3, meter, 1.0)
    assert e["calls"] >= 3 and e["seconds"] >= 0.8
    assert math.isfinite(e["joules"]) and e["joules"] > 0
    assert 20.0 < e["watts"] < 2000.0, e  # an H200 draws 100-700 W
    assert math.isfinite(e["gflop_per_joule"]) and e["gflop_per_joule"] > 0
    assert e["ms_per_call"] == pytest.approx(ms, rel=0.5)  # the loop ran the call that was timed


def test_native_dgemm_on_our_arrays_is_policy_natives(own, rng):
    a, b = random_matrix(1000, 700, 0.5, rng), random_matrix(700, 900, 0.5, rng)
    da, db = own.upload(a), own.upload(b)
    assert same_bits(da.get(), a) and same_bits(own.rows(da, [3, 999]), a[[3, 999]])
    got = own.native(da, db)
    assert isinstance(got, DeviceArray)
    want = ozaki_cutlass.gemm(a, b, policy="native")  # NumPy in: uploaded to buffers of ours, cuBLASLt
    assert same_bits(got.get(), want)
    assert normwise_error(got.get()[:8], *dd_product(a[:8], b)) < 1e-14
    assert own.same_bits(got, own.native(da, db)) and not own.same_bits(got, own.upload(want * 2))


def test_demo_times_native_dgemm_without_cupy(no_cupy, capsys):
    assert demo.gpu_demo(n=1024, seed=3) == 0
    out = capsys.readouterr().out
    assert "skipped" not in out and "ozaki_cutlass DeviceArrays (CuPy not used)" in out
    native = next(line for line in out.splitlines() if line.startswith("native DGEMM"))
    ms, tflops, ratio, err = (float(x) for x in native.split()[2:6])
    assert ms > 0 and tflops > 0 and ratio == 1.0 and err < 1e-14


def test_bench_runs_without_cupy(no_cupy, tmp_path, capsys):
    out = tmp_path / "bench.json"
    argv = ["bench", "--shapes", "1024", "--warmup", "1", "--reps", "2", "--energy-seconds", "0.3",
            "--json", str(out)]
    assert cli.main(argv) == 0
    record = json.loads(out.read_text())
    assert record["arrays"] == "own" and "policy='native'" in record["native"]
    (row,) = record["rows"]
    assert row["native_error"] < 1e-14 and row["staged"]["error"] < 1e-15 and row["fused"]["error"] < 1e-15
    assert row["bit_identical"] is True
    emu = row["cublas"]
    if "skipped" in emu:  # said, with the reason
        assert emu["skipped"] and f"cuBLAS-emu skipped: {emu['skipped']}" in capsys.readouterr().out
    else:
        assert emu["mantissa_bits"] >= 0 and emu["error"] < 1e-15 and emu["tflops"] > 0
    if record["energy"].startswith("energy n/a"):
        assert "native_energy" not in row
    else:
        assert row["native_energy"]["gflop_per_joule"] > 0 and row["fused"]["energy"]["joules"] > 0


def test_tune_runs_without_cupy(no_cupy, tmp_path, capsys):
    out = tmp_path / "tuning.json"
    argv = ["tune", "--sizes", "512", "--zgemm", "128", "--batched", "2x128", "--warmup", "0", "--reps", "2",
            "--out", str(out)]
    assert cli.main(argv) == 0
    table = json.loads(out.read_text())
    assert "native DGEMM: cuBLAS DGEMM via ozaki_cutlass.gemm(policy='native')" in table["inputs"]
    winner = next(e for e in table["entries"] if e["path"] != "native")
    assert winner["native_ms"] > 0 and winner["ms"] > 0
    # complex calls on our own DeviceArrays; batches need 3-D arrays (CuPy): said, skipped
    assert any("complex128 128^3" in e.get("operands", "") for e in table["entries"])
    assert not any(e.get("operands") == "batches of 2" for e in table["entries"])
    assert "skipped: batched operands are 3-D" in capsys.readouterr().out


def test_bench_complex_and_batched_rows(tmp_path, capsys):
    pytest.importorskip("cupy")
    out = tmp_path / "bench.json"
    argv = ["bench", "--zgemm", "256", "--batched", "3x128", "--moduli", "16", "--warmup", "1", "--reps", "2",
            "--energy-seconds", "0", "--arrays", "cupy", "--json", str(out)]
    assert cli.main(argv) == 0
    record = json.loads(out.read_text())
    assert record["rows"] == []   # --zgemm / --batched without --shapes: only those rows
    zrow, brow = record["complex_and_batched_rows"]
    assert (zrow["kind"], zrow["n"], brow["kind"], brow["batch"], brow["n"]) == ("zgemm", 256, "batched", 3, 128)
    for row in (zrow, brow):
        assert set(row["calls"]) == {"native", "auto", "emulation"} and row["moduli"] == 16
        assert all(c["ms"] > 0 and c["tflops"] > 0 for c in row["calls"].values())
        assert row["calls"]["native"]["x_native"] == 1.0
        assert row["calls"]["emulation"]["error"] < 1e-15 and row["calls"]["native"]["error"] < 1e-14
    assert brow["chose"]["batched"] in ("one launch", "one call per element")
    text = capsys.readouterr().out
    assert "complex 256^3" in text and "3 x 128^3" in text


def test_bench_complex_rows_say_they_need_cupy(no_cupy, capsys):
    assert cli.main(["bench", "--zgemm", "256", "--energy-seconds", "0", "--reps", "1"]) == 0
    assert "complex and batched rows: skipped" in capsys.readouterr().out
