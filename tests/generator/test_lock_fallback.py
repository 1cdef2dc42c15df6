"""Filesystems without flock (Lustre, some NFS mounts): builds lock with O_EXCL owner files
instead, said once, and still compile each variant once; abandoned locks are broken. A
fake flock that raises stands in for such a filesystem."""

from __future__ import annotations

import concurrent.futures
import errno
import fcntl
import json
import logging
import multiprocessing
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from ozaki_cutlass.generator import Arch, BuildReport, build, default_variant, locks
from ozaki_cutlass.generator.errors import BuildStorageError
VARIANT = default_variant(Arch.SM80)


def _unsupported(code: int):
    def flock(fd, operation):
        raise OSError(code, os.strerror(code))

    return flock


@pytest.fixture(autouse=True)
def _fresh_memory():
    locks.FLOCK_SUPPORT.clear()
    yield
    locks.FLOCK_SUPPORT.clear()


@pytest.fixture
def no_flock(monkeypatch):
    monkeypatch.setattr(fcntl, "flock", _unsupported(errno.ENOSYS))


def owner_file(out_dir):
    return out_dir / VARIANT.name / ".lock.owner"


@pytest.mark.parametrize("code", [errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOLCK])
def test_builds_fall_back_to_owner_files_and_say_so_once(make_toolchain, fake_nvcc, out_dir,
                                                         monkeypatch, caplog, code):
    monkeypatch.setattr(fcntl, "flock", _unsupported(code))
    toolchain = make_toolchain()
    others = [default_variant(Arch.SM90A)]
    with caplog.at_level(logging.WARNING):
        report = build([VARIANT, *others], out_dir, toolchain=toolchain, progress=False)
        build([VARIANT, *others], out_dir, toolchain=toolchain, progress=False)
    assert report.compiled == (VARIANT.name, others[0].name)
    assert caplog.text.count("flock is not supported") == 1
    assert os.strerror(code) in caplog.text and "*.owner files instead" in caplog.text
    assert not owner_file(out_dir).exists()  # released


def test_another_flock_error_is_still_an_error(make_toolchain, out_dir, monkeypatch):
    monkeypatch.setattr(fcntl, "flock", _unsupported(errno.EIO))
    with pytest.raises(BuildStorageError, match="Input/output error"):
        build([VARIANT], out_dir, toolchain=make_toolchain(), progress=False)


def test_threads_building_one_variant_compile_it_once(make_toolchain, fake_nvcc, out_dir,
                                                      no_flock):
    fake_nvcc.configure(sleep=0.5)
    toolchain = make_toolchain()
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        reports = list(pool.map(
            lambda _: build([VARIANT], out_dir, toolchain=toolchain, progress=False), range(3)))
    assert len(fake_nvcc.calls()) == 1
    assert len({r.artifacts for r in reports}) == 1
    assert sorted(len(r.compiled) for r in reports) == [0, 0, 1]


def _build_without_flock(variant, out_dir, toolchain) -> tuple[float, BuildReport]:
    # Runs in a forked process, where the test's fake flock is in place too.
    started = time.time()
    return started, build([variant], out_dir, toolchain=toolchain, progress=False)


def test_two_processes_building_one_variant_compile_it_once(make_toolchain, fake_nvcc,
                                                            out_dir, no_flock):
    fake_nvcc.configure(sleep=2.0)
    toolchain = make_toolchain()
    context = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
        futures = [pool.submit(_build_without_flock, VARIANT, out_dir, toolchain)
                   for _ in range(2)]
        results = [f.result(timeout=120) for f in futures]
    (call,) = fake_nvcc.calls()
    (winner,) = [r for _, r in results if r.compiled]
    ((started, waiter),) = [(t, r) for t, r in results if not r.compiled]
    assert waiter.cached == (VARIANT.name,) and winner.artifacts == waiter.artifacts
    assert started < call["end"]  # the waiter was there during the compile: it waited
    assert not owner_file(out_dir).exists()


def _write_owner(path, *, pid: int, host: str, age: float = 0.0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"pid": pid, "host": host, "token": f"token-{pid}-{host}",
                                "started": time.time() - age}))
    if age:
        then = time.time() - age
        os.utime(path, (then, then))


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_the_lock_of_a_dead_process_on_this_host_is_broken(make_toolchain, fake_nvcc, out_dir,
                                                           no_flock, caplog):
    pid = _dead_pid()
    _write_owner(owner_file(out_dir), pid=pid, host=socket.gethostname())
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        report = build([VARIANT], out_dir, toolchain=make_toolchain(), progress=False)
    assert time.monotonic() - started < 10
    assert report.compiled == (VARIANT.name,) and len(fake_nvcc.calls()) == 1
    assert f"process {pid} on this host, is dead" in caplog.text
    assert not owner_file(out_dir).exists()
    assert list(owner_file(out_dir).parent.glob(".lock.owner.stale-*")) == []


def test_a_lock_not_refreshed_for_too_long_is_broken(make_toolchain, fake_nvcc, out_dir,
                                                     no_flock, caplog):
    age = locks.STALE_LOCK_SECONDS + 60
    _write_owner(owner_file(out_dir), pid=1, host="another-host", age=age)
    with caplog.at_level(logging.WARNING):
        report = build([VARIANT], out_dir, toolchain=make_toolchain(), progress=False)
    assert report.compiled == (VARIANT.name,)
    assert "process 1 on another-host" in caplog.text and "last refreshed" in caplog.text


def test_a_live_lock_is_waited_for(make_toolchain, fake_nvcc, out_dir, no_flock, caplog):
    """Held by a process on another host, recently refreshed: wait until it is released."""
    path = owner_file(out_dir)
    _write_owner(path, pid=1, host="another-host")
    release = threading.Timer(1.0, path.unlink)
    release.start()
    started = time.monotonic()
    try:
        with caplog.at_level(logging.INFO):
            build([VARIANT], out_dir, toolchain=make_toolchain(), progress=False)
    finally:
        release.cancel()
    assert time.monotonic() - started >= 1.0
    assert "waiting for process 1 on another-host" in caplog.text
    assert "breaking" not in caplog.text


def test_a_half_written_lock_is_not_broken_while_young(out_dir, no_flock):
    """An owner file being written (empty yet) is someone's live lock."""
    path = owner_file(out_dir)
    path.parent.mkdir(parents=True)
    path.write_text("")
    owner = locks._read_owner(path)
    assert owner.pid is None and locks._why_stale(owner) is None


def test_the_holder_refreshes_its_lock(out_dir, no_flock, monkeypatch):
    monkeypatch.setattr(locks, "HEARTBEAT_SECONDS", 0.05)
    path = owner_file(out_dir)
    path.parent.mkdir(parents=True)
    with locks.exclusive_lock(path.with_name(".lock"), VARIANT.name):
        first = path.stat().st_mtime_ns
        old = time.time() - 100
        os.utime(path, (old, old))
        time.sleep(0.5)
        assert path.stat().st_mtime_ns >= first
    assert not path.exists()


def test_a_lock_broken_while_held_is_left_to_its_new_owner(out_dir, no_flock, caplog):
    path = owner_file(out_dir)
    path.parent.mkdir(parents=True)
    with caplog.at_level(logging.WARNING):
        with locks.exclusive_lock(path.with_name(".lock"), VARIANT.name):
            _write_owner(path, pid=1, host="another-host")  # someone broke ours and took it
    assert path.exists()
    assert "was broken while" in caplog.text


def test_breaking_leaves_a_lock_that_replaced_the_abandoned_one(out_dir):
    """Two waiters judged one lock abandoned; the first broke it and took the lock: the
    second, breaking what it saw, must leave the first's lock in place."""
    path = owner_file(out_dir)
    _write_owner(path, pid=1, host="another-host", age=1000)
    seen = locks._read_owner(path)
    path.unlink()
    _write_owner(path, pid=os.getpid(), host=socket.gethostname())  # the first waiter's
    locks._break_lock(path, seen, "abandoned")
    assert json.loads(path.read_text())["pid"] == os.getpid()
    assert list(path.parent.glob(".lock.owner.stale-*")) == []
