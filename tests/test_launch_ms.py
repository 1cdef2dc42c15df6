"""tools.measure.launch_ms and copy_rate_gbps: back-to-back launches between two events (no GPU:
a fake timer), and their refusal of sizes that measure nothing."""

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
