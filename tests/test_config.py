"""The runtime's settings from the environment (ozaki_cutlass/config.py): the switches
read as documented, and a value that is neither on nor off is refused, naming the
variable, rather than read as on (``OZAKI_GRAPHS=false`` once meant on)."""

import pytest

from ozaki_cutlass import config


@pytest.mark.parametrize("name", sorted(config.SWITCHES))
def test_switches_read_the_usual_words_and_refuse_others(name, monkeypatch):
    read = config.SWITCHES[name]
    monkeypatch.delenv(name, raising=False)
    assert read() is True
    for value, expected in [("", True), ("1", True), ("0", False), ("false", False), ("OFF", False), (" no ", False),
                            ("True", True), ("on", True), ("yes", True)]:
        monkeypatch.setenv(name, value)
        assert read() is expected, value
    for value in ("maybe", "2", "-1", "disable"):
        monkeypatch.setenv(name, value)
        with pytest.raises(ValueError, match=f"^{name}='{value}': expected 0 or 1"):
            read()


def test_karatsuba_min_takes_a_non_negative_integer(monkeypatch):
    monkeypatch.delenv("OZAKI_KARATSUBA_MIN", raising=False)
    assert config.karatsuba_min() == config.KARATSUBA_MIN_DEFAULT
    monkeypatch.setenv("OZAKI_KARATSUBA_MIN", "0")
    assert config.karatsuba_min() == 0
    for value in ("-5", "1e4", "many"):
        monkeypatch.setenv("OZAKI_KARATSUBA_MIN", value)
        with pytest.raises(ValueError, match="OZAKI_KARATSUBA_MIN=.*expected a non-negative integer"):
            config.karatsuba_min()
