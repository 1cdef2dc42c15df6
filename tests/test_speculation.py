"""A contract call runs the choice its key's last two calls agreed on while its own
certificate is read (execute._emulate, paths.contract.Guesses), on the CPU with the GPU's
pieces replaced: what runs, in which order, and when it must not. The bits of hits and
misses against the reference: tests/gpu/test_contract_gpu.py."""

import threading
import types

import pytest

from ozaki_cutlass import execute
from ozaki_cutlass.device.arrays import Matrix
from ozaki_cutlass.numerics.contract import U, Choice
from ozaki_cutlass.paths import contract as PC
from ozaki_cutlass.paths.launch import Launch, PhaseTimer

from recorders import OnePool


def choice(moduli, equilibrated=False, native=False, mode="fast"):
    if native:
        return Choice(None, None, 1.0, U, equilibrated, native=True, reason="native")
    return Choice(moduli, mode, U / 2, U, equilibrated)


class Pending:
    """The contract's stages: the choice the certificate will give, and when it is read."""

    def __init__(self, log, chosen):
        self.log, self.chosen = log, chosen
        self.prescan = PC.Prescan("a-scan", "b-scan")

    def choose(self, target, mode, may_fall_back):
        self.log.append(("read", self.chosen.moduli))
        return self.chosen

    def prescan_for(self, equilibrated):
        return self.prescan if equilibrated else PC.Prescan("a-unshifted", "b-unshifted")


@pytest.fixture
def world(monkeypatch):
    """_emulate with its contract, workspace and path replaced; ``world.call(chosen)`` runs
    one call whose certificate gives ``chosen``; ``world.log`` says what happened."""
    monkeypatch.setattr(PC, "GUESSES", PC.Guesses())
    monkeypatch.setattr(execute, "GUESSES", PC.GUESSES)
    log = []
    ws = types.SimpleNamespace(lock=threading.Lock(), captured=False)
    monkeypatch.setattr(execute, "WORKSPACES", OnePool(ws))
    monkeypatch.setattr(execute, "_RUNS", {"staged": lambda kern, L, ws, timer, overlap:
                                           log.append(("run", L.moduli, L.mode, L.prescan.a))})
    O = Matrix(1 << 40, 8, 8, 8, 1, "cai", 0, None)

    def call(chosen, beta=0.0, shape=(8, 8, 8), fall_back=True):
        monkeypatch.setattr(execute, "start_contract", lambda *args: log.append(("start",)) or Pending(log, chosen))
        m, n, k = shape
        L = Launch(A=O, B=O, C=O if beta else None, O=O, m=m, n=n, k=k, alpha=1.0, beta=beta, moduli=None,
                   mode="fast", stream=0)
        timer = PhaseTimer(0, False)
        log.clear()
        got = execute._emulate(types.SimpleNamespace(path="staged", stages=None), L, 0, timer, U, fall_back)
        return got, list(log), timer.notes.get("speculation")

    return types.SimpleNamespace(call=call, log=log)


def test_no_guess_until_two_calls_agree(world):
    for _ in range(2):
        got, log, spec = world.call(choice(16))
        assert got == choice(16) and spec is None
        assert log == [("start",), ("read", 16), ("run", 16, "fast", "a-unshifted")]  # waits, then runs


def test_a_hit_runs_once_before_the_read(world):
    world.call(choice(16))
    world.call(choice(16))
    got, log, spec = world.call(choice(16))
    assert got == choice(16) and spec == "hit"
    assert log == [("start",), ("run", 16, "fast", "a-unshifted"), ("read", 16)]


def test_a_miss_runs_the_calls_own_choice_after(world):
    for _ in range(2):
        world.call(choice(16))
    got, log, spec = world.call(choice(17))
    assert got == choice(17) and spec == "miss"
    assert log == [("start",), ("run", 16, "fast", "a-unshifted"), ("read", 17), ("run", 17, "fast", "a-unshifted")]
    _, log, spec = world.call(choice(17))  # the last two differ: no guess
    assert spec is None and log[1] == ("read", 17)


def test_an_equilibration_unlike_the_guess_is_a_miss(world):
    """The guess ran without the inner shifts; a choice that equilibrates needs them."""
    for _ in range(2):
        world.call(choice(16))
    got, log, spec = world.call(choice(16, equilibrated=True))
    assert spec == "miss" and log[-1] == ("run", 16, "fast", "a-scan")


def test_a_native_choice_runs_nothing_more(world):
    for _ in range(2):
        world.call(choice(16))
    got, log, spec = world.call(choice(None, native=True))
    assert got.native and spec == "miss"
    assert log == [("start",), ("run", 16, "fast", "a-unshifted"), ("read", None)]  # the caller runs native
    for _ in range(3):  # native choices are never guessed
        _, log, spec = world.call(choice(None, native=True))
        assert spec is None and ("read", None) in log and not any(e[0] == "run" for e in log)


@pytest.mark.parametrize("beta", [1.0, -0.5])
def test_no_guess_where_c_is_read(world, beta):
    """With beta != 0 the result may be C itself (out=c): a second run would read the
    first one's result."""
    for _ in range(3):
        _, log, spec = world.call(choice(16), beta=beta)
        assert spec is None and log[1] == ("read", 16)


def test_speculation_off(world, monkeypatch):
    monkeypatch.setenv("OZAKI_SPECULATE", "0")
    for _ in range(3):
        _, log, spec = world.call(choice(16))
        assert spec is None and log[1] == ("read", 16)


def test_keys_are_apart(world):
    for _ in range(2):
        world.call(choice(16), shape=(8, 8, 8))
    _, log, spec = world.call(choice(16), shape=(8, 8, 16))
    assert spec is None
    _, log, spec = world.call(choice(16), shape=(8, 8, 8))
    assert spec == "hit"


def test_guesses_forget_the_oldest_beyond_their_limit():
    g = PC.Guesses()
    for key in range(PC.Guesses.LIMIT):
        g.record(key, choice(16))
        g.record(key, choice(16))
    g.record(0, choice(16))  # key 0 recorded last: now key 1 is the oldest
    g.record("new", choice(16))
    g.record("new", choice(16))  # one key too many: key 1 goes
    assert g.guess(1) is None
    assert g.guess(0) == choice(16) and g.guess(2) == choice(16) and g.guess("new") == choice(16)
    assert sum(g.guess(key) is not None for key in range(PC.Guesses.LIMIT)) == PC.Guesses.LIMIT - 1
