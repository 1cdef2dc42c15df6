"""tools.measure.launch_ms, copy_rate_gbps and operands_launch: back-to-back launches between
two events, both operands launched as a call launches them (no GPU: a fake timer and a fake
fork), and their refusal of what measures nothing."""

import pytest

from ozaki_cutlass.tools import measure


def test_launch_ms_is_the_events_time_over_the_launches(monkeypatch):
    log = []

    class FakeTimer:
        def __init__(self, stream):
            log.append(("timer on", stream))

        def start(self):
            log.append("start")

        def stop(self):
            log.append("stop")
            return 12.0

    monkeypatch.setattr(measure.driver, "EventTimer", FakeTimer)
    assert measure.launch_ms(lambda: log.append("launch"), 4, stream=7) == 3.0
    assert log == [("timer on", 7), "start", "launch", "launch", "launch", "launch", "stop"]


@pytest.mark.parametrize("reps", [0, -3])
def test_launch_ms_refuses_no_launches(reps):
    with pytest.raises(ValueError, match="reps must be at least 1"):
        measure.launch_ms(lambda: None, reps)


@pytest.mark.parametrize("nbytes,rounds", [(4, 5), (2**20, 0)])
def test_copy_rate_refuses_sizes_that_copy_nothing(nbytes, rounds):
    with pytest.raises(ValueError, match="copy_rate_gbps"):
        measure.copy_rate_gbps(nbytes, rounds)


def test_operands_launch_one_stream_runs_a_then_b_on_the_legacy_stream():
    log = []
    measure.operands_launch(lambda i, stream: log.append((i, stream)), "one stream")()
    assert log == [(0, 0), (1, 0)]


def test_operands_launch_two_streams_forks_b_off_and_joins_it(monkeypatch):
    log = []

    class FakeFork:
        def __init__(self, ws, sh, on):
            log.append(("fork", ws, sh, on))

        def __enter__(self):
            return 5   # the side stream

        def __exit__(self, *exc):
            log.append("join")

    monkeypatch.setattr(measure, "Fork", FakeFork)
    measure.operands_launch(lambda i, stream: log.append((i, stream)), "two streams", ws="W")()
    assert log == [("fork", "W", 0, True), (1, 5), (0, 0), "join"]


def test_operands_launch_refuses_unknown_launches_and_two_streams_without_a_workspace():
    with pytest.raises(ValueError, match="how must be one of"):
        measure.operands_launch(lambda i, s: None, "three streams")
    with pytest.raises(ValueError, match="need a workspace"):
        measure.operands_launch(lambda i, s: None, "two streams")


def test_alternating_medians_times_the_calls_in_turn_and_takes_each_ones_median(monkeypatch):
    order, results = [], iter([5.0, 1.0, 3.0, 2.0, 4.0, 9.0])
    monkeypatch.setattr(measure, "launch_ms", lambda f, reps: (order.append((f(), reps)), next(results))[1])
    got = measure.alternating_medians({"a": lambda: "a", "b": lambda: "b"}, rounds=3, reps=7)
    assert order == [("a", 7), ("b", 7)] * 3        # round by round, in turn
    assert got == {"a": 4.0, "b": 2.0}              # a: 5, 3, 4; b: 1, 2, 9


def test_alternating_medians_refuses_no_rounds():
    with pytest.raises(ValueError, match="rounds must be at least 1"):
        measure.alternating_medians({"a": lambda: None}, rounds=0, reps=1)


def test_alone_arguments_are_the_stage_scripts_common_options():
    import argparse

    ap = argparse.ArgumentParser()
    measure.add_alone_arguments(ap, rounds=7)
    args = ap.parse_args([])
    assert (args.rounds, args.other, args.json) == (7, None, None)
    args = ap.parse_args(["--rounds", "3", "--other", "tree", "--json", "f.json"])
    assert (args.rounds, args.other, args.json) == (3, ["tree"], "f.json")
    assert ap.parse_args(["--other", "a", "b/c"]).other == ["a", "b/c"]  # several trees, one alternation
    with pytest.raises(SystemExit):
        ap.parse_args(["--rounds", "0"])


def test_alone_setup_loads_both_trees_and_prints_the_copy_rate(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(measure.driver, "ensure_context", lambda: calls.append("context"))
    monkeypatch.setattr(measure, "visible_arch", lambda: "sm_90a")
    monkeypatch.setattr(measure, "stage_libraries", lambda arch, other: calls.append((arch, other)) or {"this": 1})
    monkeypatch.setattr(measure, "copy_rate_gbps", lambda: 4242.4)
    assert measure.alone_setup(["tree"]) == ({"this": 1}, 4242.4)
    assert calls == ["context", ("sm_90a", ["tree"])]  # the context before any library
    assert capsys.readouterr().out == "copy 4242 GB/s\n"
