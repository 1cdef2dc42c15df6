"""`ozaki-cutlass tune` on the GPU: a small sweep writes a table the dispatcher reads back."""

import json

import numpy as np
import pytest

import ozaki_cutlass
from ozaki_cutlass import dispatch, reference
from ozaki_cutlass.tools import cli, tune
from ozaki_cutlass.numerics.accuracy import random_matrix, same_bits
from ozaki_cutlass.generator import Arch

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy", reason="ozaki-cutlass tune needs CuPy")


def test_tune_writes_a_table_the_dispatcher_uses(tmp_path, capsys):
    out = tmp_path / "tuning.json"
    assert cli.main(["tune", "--sizes", "512", "--warmup", "0", "--reps", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    table = json.loads(out.read_text())
    assert table["command"] == f"ozaki-cutlass tune --sizes 512 --warmup 0 --reps 2 --out {out}"
    assert table["moduli"] == 15 and table["mode"] == "accurate"
    # the timed GPU's own line of nvidia-smi (a two-GPU host once put both in the driver field)
    assert table["gpu"] != "unknown" and table["driver"] != "unknown"
    assert "\n" not in table["gpu"] + table["driver"]
    # one size: one bucket; its winner first (with native DGEMM's time, which the auto
    # policy reads; for the default call alone where another kernel ran fastest at
    # --moduli), then each path's fastest at --moduli (without it), fastest first
    kernel_entries = [e for e in table["entries"] if e["path"] != "native"]
    entry = kernel_entries[0]
    assert "native_ms" in entry and all("native_ms" not in e for e in kernel_entries[1:])
    assert entry.get("calls", "default") == "default" and all("calls" not in e for e in kernel_entries[1:])
    named = kernel_entries[1:] if "calls" in entry else kernel_entries
    assert len({e["path"] for e in named}) == len(named) <= 2
    assert [e["ms"] for e in named[1:]] == sorted(e["ms"] for e in named[1:])
    assert entry["arch"] in {a.value for a in Arch} and entry["measured"] == [512, 512, 512]
    assert entry["m"][0] <= 512 <= entry["m"][1] and entry["ms"] > 0 and entry["native_ms"] > 0
    # each candidate timed twice: at --moduli and --mode, and as the default call (the
    # contract's count); the fastest default calls (up to FINALISTS within FINALIST_MARGIN,
    # the fastest among them) timed again with native, and the winner the fastest there;
    # the other path's entry the fastest of its calls at --moduli (printed ms: 2 decimals)
    timed, default, final = {}, {}, {}
    for line in printed.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0] == "512" and fields[-1] == "ms":
            if "the default call (accuracy contract), alternating with native" in line:
                final[fields[1].rstrip(":")] = float(fields[-2])
            elif "as the default call (" in line:
                default[fields[1]] = float(fields[-2])
            elif "native" not in line:
                timed[fields[1]] = float(fields[-2])
    assert default and set(default) <= set(timed)
    assert final and set(final) <= set(default) and len(final) <= tune.FINALISTS
    assert min(default[name] for name in final) == min(default.values())
    assert all(default[name] - 0.005 <= (min(default.values()) + 0.005) * tune.FINALIST_MARGIN for name in final)
    assert final[f"{entry['path']}:{entry['kernel']}"] == min(final.values())
    for other in kernel_entries[1:]:  # the fastest timed line of its path
        assert timed[f"{other['path']}:{other['kernel']}"] == min(
            ms for name, ms in timed.items() if name.startswith(other["path"] + ":"))
    # the first entry a call naming a count reads: the fastest timed line of all
    assert timed[f"{named[0]['path']}:{named[0]['kernel']}"] == min(timed.values())
    # the dispatcher reads it back, and a call routed by it gives the reference's bits
    table_, source = dispatch.load_table(str(out))
    assert any(c.variant.name == entry["kernel"] for c in dispatch.candidates_from_table(table_, source))
    rng = np.random.default_rng(5)
    a, b = random_matrix(512, 512, 0.5, rng), random_matrix(512, 512, 0.5, rng)
    got = ozaki_cutlass.gemm(a, b, kernel=entry["kernel"], path=entry["path"], policy="emulate")
    assert same_bits(got, reference.gemm(a, b))


def test_tune_measures_complex_and_batched_calls_in_their_problems_buckets(tmp_path, capsys, monkeypatch):
    out = tmp_path / "tuning.json"
    argv = ["tune", "--sizes", "256", "--zgemm", "256", "--batched", "4x256", "--mode", "fast", "--warmup", "0",
            "--reps", "2", "--out", str(out)]
    assert cli.main(argv) == 0
    table = json.loads(out.read_text())
    entries = table["entries"]
    assert table["mode"] == "fast"
    complex_ = [e for e in entries if "complex128 256^3" in e.get("operands", "")]
    batched = [e for e in entries if e.get("operands") == "batches of 4"]
    assert complex_ and batched
    best = next(e for e in complex_ if e["path"] != "native")
    assert best["measured"] == [256, 512, 512] and best["ms"] > 0 and best["native_ms"] > 0
    assert entries.index(complex_[0]) < entries.index(batched[0]) < entries.index(
        next(e for e in entries if e["measured"] == [256, 256, 256] and "operands" not in e))
    assert "complex 256^3" in capsys.readouterr().out
    # the complex entries are for complex calls alone; with the table in effect a complex
    # call of that size runs its winner
    assert all(e["complex"] is True for e in complex_) and all("complex" not in e for e in batched)
    monkeypatch.setenv("OZAKI_TUNING_TABLE", str(out))
    rng = np.random.default_rng(3)
    a, b = (cp.asarray(random_matrix(256, 256, 0.5, rng) + 1j * random_matrix(256, 256, 0.5, rng))
            for _ in range(2))
    timings = {}
    ozaki_cutlass.gemm(a, b, policy="emulate", timings=timings)
    assert (timings["path"], timings["kernel"]) == (best["path"], best["kernel"])


def test_tune_extend_keeps_the_old_entries_after_the_new(tmp_path):
    old = tmp_path / "old.json"
    assert cli.main(["tune", "--sizes", "256", "--warmup", "0", "--reps", "1", "--out", str(old)]) == 0
    new = tmp_path / "new.json"
    argv = ["tune", "--sizes", "--zgemm", "128", "--extend", str(old), "--warmup", "0", "--reps", "1",
            "--out", str(new)]
    assert cli.main(argv) == 0
    before, after = json.loads(old.read_text()), json.loads(new.read_text())
    fresh = [e for e in after["entries"] if "complex128 128^3" in e.get("operands", "")]
    assert fresh and after["entries"] == fresh + before["entries"]
    assert after["extends"]["path"] == str(old) and after["extends"]["command"] == before["command"]
    dispatch.load_table(str(new))   # a table the dispatcher reads
