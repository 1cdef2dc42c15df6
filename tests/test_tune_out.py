"""`ozaki-cutlass tune --out PATH`: an unwritable PATH is a one-line usage error (exit 2)
before any GPU work, and the table is written atomically (the old one survives a failure).
CPU only: anything that would touch a GPU raises."""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import stat

import pytest

from ozaki_cutlass.tools import cli, tune


@pytest.fixture
def no_gpu(monkeypatch):
    """Any GPU work tune does fails the test."""

    def touched(*args, **kwargs):
        raise AssertionError("tune touched the GPU")

    monkeypatch.setattr(tune.driver, "ensure_context", touched)
    monkeypatch.setattr(tune, "visible_arch", touched)
    monkeypatch.setattr(tune, "tune_candidates", touched)


def _regular_file(tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    return tmp_path / "a-file" / "tuning.json"


UNWRITABLE = {
    "under /proc": (lambda tmp_path: "/proc/ozaki-tuning.json", "cannot create a file in /proc"),
    "in a folder under /proc": (lambda tmp_path: "/proc/self/ozaki/tuning.json",
                                "the folder /proc/self/ozaki does not exist"),
    "in a missing folder": (lambda tmp_path: tmp_path / "missing" / "tuning.json",
                            "/missing does not exist"),
    "a regular file as folder": (_regular_file, "/a-file is not a folder"),
    "a folder": (lambda tmp_path: tmp_path, "is a folder"),
    "a device": (lambda tmp_path: "/dev/null", "is not a regular file"),
}


@pytest.mark.parametrize("make, reason", UNWRITABLE.values(), ids=UNWRITABLE.keys())
def test_an_unwritable_out_is_a_usage_error_before_any_gpu_work(tmp_path, no_gpu, caplog,
                                                                make, reason):
    out = make(tmp_path)
    assert cli.main(["tune", "--sizes", "1024", "--out", str(out)]) == 2
    (record,) = [r for r in caplog.records if r.levelno >= logging.ERROR]
    message = record.getMessage()
    assert message.startswith(f"--out {out}: ") and reason in message and "\n" not in message


def test_a_writable_out_passes_and_leaves_nothing_behind(tmp_path):
    assert tune.unwritable(tmp_path / "tuning.json") is None
    (tmp_path / "tuning.json").write_text("{}")
    assert tune.unwritable(tmp_path / "tuning.json") is None
    assert [p.name for p in tmp_path.iterdir()] == ["tuning.json"]


def test_the_table_is_written_whole(tmp_path):
    path = tmp_path / "tuning.json"
    table = {"gpu": "x", "entries": [{"arch": "sm_90a", "ms": 1.5}]}
    tune.write_table(path, table)
    assert json.loads(path.read_text()) == table
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~_umask()
    path.chmod(0o600)
    tune.write_table(path, table | {"gpu": "y"})
    assert json.loads(path.read_text())["gpu"] == "y"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # an existing table keeps its mode
    assert [p.name for p in tmp_path.iterdir()] == ["tuning.json"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("failing", ["fsync", "replace", "dump"])
def test_a_failed_write_leaves_the_old_table(tmp_path, monkeypatch, failing):
    path = tmp_path / "tuning.json"
    path.write_text('{"old": true}')

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    target = {"fsync": (os, "fsync"), "replace": (os, "replace"),
              "dump": (tune.json, "dump")}[failing]
    monkeypatch.setattr(*target, full)
    with pytest.raises(OSError, match="No space left"):
        tune.write_table(path, {"new": True})
    assert path.read_text() == '{"old": true}'
    assert [p.name for p in tmp_path.iterdir()] == ["tuning.json"]  # no temporary left


def test_a_link_to_a_table_is_followed(tmp_path):
    table = tmp_path / "shared" / "tuning.json"
    table.parent.mkdir()
    table.write_text("{}")
    link = tmp_path / "tuning.json"
    link.symlink_to(table)
    assert tune.unwritable(link) is None
    tune.write_table(link, {"new": True})
    assert link.is_symlink() and json.loads(table.read_text()) == {"new": True}


def test_each_kind_of_point_names_its_native_routine():
    # every kind of point tune measures has a name for its native timing
    made = {make for *_, (make, *_) in tune.kind_points([64], [(2, 64)])} | {"pair"}
    assert made == set(tune.NATIVE_ROUTINES)
    assert tune.native_line("pair", "CuPy's a @ b") == "native DGEMM (cuBLAS DGEMM via CuPy's a @ b)"
    assert tune.native_line("complex_pair", "CuPy's a @ b") == "native ZGEMM (cuBLAS ZGEMM via CuPy's a @ b)"
    assert tune.native_line("batch_pair", "x") == "native strided-batched DGEMM (cuBLAS strided-batched DGEMM via x)"


def test_the_arrays_label_native_dgemm_by_their_call():
    from ozaki_cutlass.tools import measure

    for arrays in (measure.CupyArrays, measure.OwnArrays):
        assert arrays.native_label == f"cuBLAS DGEMM via {arrays.native_call}"


def _fake_tune(monkeypatch, cands, times, default_moduli):
    """tune with everything the GPU would do faked: ``times(keywords)`` gives each timed
    call's ms by its gemm keywords; the contract picks ``default_moduli``. Returns the
    keywords of the timed calls, and of the calls timed against native."""
    from ozaki_cutlass.device.arch import Arch

    timed, against_native = [], []

    class Arrays:
        native_call, native_label = "a fake", "a fake native"

        def stream(self):
            return 0

        def pair(self, m, n, k, phi, seed):
            return ("a", m, k), ("b", k, n)

        def native(self, a, b):
            raise AssertionError("only timed through the fake time_against")

        def release(self):
            pass

    def event_times(calls, warmup, reps, stream):
        timed.extend(call.keywords for call in calls)
        return [[times(call.keywords)] * reps for call in calls], None

    def time_against(calls, native, warmup, reps, stream):
        against_native.extend(call.keywords for call in calls)
        return [3.0] * len(calls), 2.5   # the default calls slower than native: a native bucket

    monkeypatch.setattr(tune, "arrays_for", lambda choice: Arrays())
    monkeypatch.setattr(tune.driver, "ensure_context", lambda *args: None)
    monkeypatch.setattr(tune.driver, "event_times", event_times)
    monkeypatch.setattr(tune, "visible_arch", lambda *args: Arch.SM90A)
    monkeypatch.setattr(tune, "tune_candidates", lambda arch, variants, table: cands)
    monkeypatch.setattr(tune, "_unbuilt", lambda candidate, moduli: [])
    monkeypatch.setattr(tune, "discarding", lambda a, b, **kw: None)
    monkeypatch.setattr(tune, "time_against", time_against)
    monkeypatch.setattr(tune, "contract_moduli", lambda a, b: default_moduli)
    from ozaki_cutlass.tools import measure

    monkeypatch.setattr(measure, "gpu_identity", lambda *args: ("a GPU", "a driver"))
    return timed, against_native


def _g1_kernels():
    from ozaki_cutlass.device.arch import Arch
    from ozaki_cutlass.generator import catalog

    return catalog(Arch.SM90A, "i8_sm90a_*_pcrt_g1", full=True, epilogue=None)[:2]


def test_the_winner_meets_native_as_the_default_call(tmp_path, monkeypatch):
    """Where the contract cannot be asked (None), the candidates are ranked at --moduli and
    --mode alone; the winner is timed against native DGEMM as the auto policy runs it (the
    accuracy contract: no moduli or mode), and that time decides the bucket."""
    from ozaki_cutlass.dispatch import Candidate

    fast, slow = _g1_kernels()
    cands = [Candidate(path="fused", variant=fast), Candidate(path="fused", variant=slow)]
    timed, against_native = _fake_tune(monkeypatch, cands, lambda kw: 1.0 if kw["kernel"] == fast else 2.0, None)
    out = tmp_path / "tuning.json"
    assert cli.main(["tune", "--sizes", "64", "--moduli", "15", "--mode", "accurate", "--reps", "2",
                     "--out", str(out)]) == 0
    assert [kw["moduli"] for kw in timed] == [15, 15] and {kw["mode"] for kw in timed} == {"accurate"}
    assert against_native == [{"kernel": fast, "path": "fused"}]
    table = json.loads(out.read_text())
    entries = table["entries"]
    assert entries[0]["path"] == "native" and entries[1]["kernel"] == fast.name
    assert (entries[1]["ms"], entries[1]["native_ms"]) == (3.0, 2.5)
    # the head every results file has: date, GPU and driver (measure's gpu_identity), command
    assert (table["gpu"], table["driver"]) == ("a GPU", "a driver")
    assert table["command"] == f"ozaki-cutlass tune --sizes 64 --moduli 15 --mode accurate --reps 2 --out {out}"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", table["date"])


def test_the_auto_kernel_is_ranked_by_the_default_call(tmp_path, monkeypatch, capsys):
    """The kernel fastest at --moduli is not the auto policy's where another runs the
    default call (the contract's count, here 16) faster: each candidate is timed both ways
    in one alternation, the fastest default call heads the bucket for default calls alone
    ("calls": "default"), and each path's fastest at --moduli and --mode follows, fastest
    first, for calls that name a count."""
    from ozaki_cutlass.dispatch import Candidate, builtin_candidates
    from ozaki_cutlass.device.arch import Arch

    fast, slow = _g1_kernels()
    staged = next(c for c in builtin_candidates(Arch.SM90A) if c.path == "staged")
    cands = [Candidate(path="fused", variant=fast), Candidate(path="fused", variant=slow), staged]
    ms = {(fast, True): 1.0, (slow, True): 2.0, (staged.variant, True): 1.5,
          (fast, False): 4.0, (slow, False): 3.0, (staged.variant, False): 3.5}
    timed, against_native = _fake_tune(monkeypatch, cands, lambda kw: ms[kw["kernel"], "moduli" in kw], 16)
    out = tmp_path / "tuning.json"
    assert cli.main(["tune", "--sizes", "64", "--moduli", "15", "--mode", "accurate", "--reps", "2",
                     "--out", str(out)]) == 0
    assert [kw.get("moduli") for kw in timed] == [15, 15, 15, None, None, None]
    assert against_native == [{"kernel": slow, "path": "fused"}]
    entries = json.loads(out.read_text())["entries"]
    assert [(e["path"], e.get("kernel"), e.get("calls")) for e in entries] == [
        ("native", None, None), ("fused", slow.name, "default"), ("fused", fast.name, None),
        ("staged", staged.variant.name, None)]
    assert [e["ms"] for e in entries[2:]] == [1.0, 1.5]
    assert "as the default call (16 moduli)" in capsys.readouterr().out


def test_the_fastest_default_calls_are_timed_again_and_the_second_timing_decides(tmp_path, monkeypatch):
    """A default call whose time swings can win the first alternation's few rounds: the
    default calls within FINALIST_MARGIN of the fastest (up to FINALISTS) are timed again
    with native DGEMM for deciding_reps rounds, and the fastest there heads the bucket."""
    from ozaki_cutlass.dispatch import Candidate, builtin_candidates
    from ozaki_cutlass.device.arch import Arch
    from ozaki_cutlass.tools.measure import deciding_reps

    lucky, steady = _g1_kernels()
    staged = next(c for c in builtin_candidates(Arch.SM90A) if c.path == "staged")
    cands = [Candidate(path="fused", variant=lucky), Candidate(path="fused", variant=steady), staged]
    first = {lucky: 1.0, steady: 1.0 * tune.FINALIST_MARGIN, staged.variant: 1.0 * tune.FINALIST_MARGIN * 1.01}
    again = {lucky: 1.3, steady: 1.1}
    _fake_tune(monkeypatch, cands, lambda kw: first[kw["kernel"]] if "moduli" not in kw else 1.0, 16)
    finals = []

    def time_against(calls, native, warmup, reps, stream):
        finals.append(([call.keywords["kernel"] for call in calls], reps))
        return [again[call.keywords["kernel"]] for call in calls], 2.0

    monkeypatch.setattr(tune, "time_against", time_against)
    out = tmp_path / "tuning.json"
    assert cli.main(["tune", "--sizes", "64", "--reps", "2", "--out", str(out)]) == 0
    assert finals == [([lucky, steady], deciding_reps(2, 1.0))]
    entries = json.loads(out.read_text())["entries"]
    head = next(e for e in entries if e["path"] != "native")
    assert (head["kernel"], head["ms"], head["native_ms"]) == (steady.name, 1.1, 2.0)


def test_each_point_is_reported_as_it_finishes(tmp_path, monkeypatch, capsys):
    """A tune takes minutes: a header first, then each point's lines before the next point
    is timed (not all at the end)."""
    from ozaki_cutlass.dispatch import Candidate

    fast, slow = _g1_kernels()
    cands = [Candidate(path="fused", variant=fast), Candidate(path="fused", variant=slow)]
    _fake_tune(monkeypatch, cands, lambda kw: 1.0, 16)
    timed = tune.driver.event_times
    printed = []

    def event_times(calls, warmup, reps, stream):
        printed.append(capsys.readouterr().out)  # what was out when this point's timing began
        return timed(calls, warmup, reps, stream)

    monkeypatch.setattr(tune.driver, "event_times", event_times)
    assert cli.main(["tune", "--sizes", "64", "128", "--reps", "2", "--out", str(tmp_path / "t.json")]) == 0
    first, second = printed
    assert first.startswith("tune: 2 points, 2 candidates") and len(first.splitlines()) == 1
    labels = [line.split()[0] for line in second.splitlines()]
    assert labels and set(labels) == {"64"} and "the default call (accuracy contract)" in second
    assert "wrote" in capsys.readouterr().out


def test_a_candidate_not_built_at_the_contracts_count_is_left_out_of_its_ranking(tmp_path, monkeypatch, capsys):
    """tune builds nothing: a candidate whose kernels at the default call's moduli count are
    not built is timed at --moduli only, and said; where no default call is left, the
    --moduli ranking decides the bucket, as without a contract."""
    from ozaki_cutlass.dispatch import Candidate

    fast, slow = _g1_kernels()
    cands = [Candidate(path="fused", variant=fast), Candidate(path="fused", variant=slow)]
    ms = {(fast, True): 1.0, (slow, True): 2.0, (fast, False): 4.0, (slow, False): 3.0}
    timed, against_native = _fake_tune(monkeypatch, cands, lambda kw: ms[kw["kernel"], "moduli" in kw], 17)
    missing = {slow: ["a sibling"]}
    monkeypatch.setattr(tune, "_unbuilt", lambda c, moduli: missing.get(c.variant, []) if moduli == 17 else [])
    out = tmp_path / "tuning.json"
    assert cli.main(["tune", "--sizes", "64", "--reps", "2", "--out", str(out)]) == 0
    assert [kw.get("moduli") for kw in timed] == [15, 15, None]
    assert against_native == [{"kernel": fast, "path": "fused"}]  # the only default call timed
    assert "skipped: not built at 17 moduli (a sibling)" in capsys.readouterr().out

    missing[fast] = ["another"]
    timed.clear()
    against_native.clear()
    assert cli.main(["tune", "--sizes", "64", "--reps", "2", "--out", str(out)]) == 0
    assert [kw.get("moduli") for kw in timed] == [15, 15]
    assert against_native == [{"kernel": fast, "path": "fused"}]  # fastest at --moduli
