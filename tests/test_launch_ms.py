"""tools.measure.launch_ms: back-to-back launches between two events (no GPU: a fake timer)."""

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
