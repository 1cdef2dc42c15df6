"""Exclusive locks across processes, hosts and threads, on any filesystem.

`exclusive_lock(path)` holds `flock` on `path`. Where the filesystem does not support
flock (Lustre, NFS mounts without it: flock raises ENOSYS, EOPNOTSUPP or ENOLCK), which is
said once per filesystem and process, the lock is instead the owner file `<path>.owner`:
created with O_EXCL, holding its holder's pid, host, a random token and start time. Its
holder refreshes the file's mtime every `HEARTBEAT_SECONDS` (30 s) while it holds it;
waiters poll it and break it when it is abandoned: its holder is a process on this host
that no longer exists, or it has not been refreshed for `STALE_LOCK_SECONDS` (5 minutes:
a holder on another host that died; clocks of the hosts sharing the filesystem must agree
to well within that). A holder whose lock was broken finds out when it releases it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["exclusive_lock", "FLOCK_SUPPORT", "FlockSupport", "OWNER_SUFFIX",
           "STALE_LOCK_SECONDS", "HEARTBEAT_SECONDS"]

log = logging.getLogger(__name__)

OWNER_SUFFIX = ".owner"  # the owner file of a lock at `path` is `<path>.owner`
STALE_LOCK_SECONDS = 300.0  # an owner file not refreshed for this long is abandoned
HEARTBEAT_SECONDS = 30.0  # how often its holder refreshes it
# What flock raises on a filesystem that does not support it (ENOTSUP is EOPNOTSUPP here).
_NO_FLOCK = frozenset({errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOLCK})


class FlockSupport:
    """Which filesystems (by device) refused flock as unsupported: the switch to owner lock
    files is said once per filesystem and process. `clear()` forgets them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._unsupported: set[int] = set()

    def unsupported(self, directory: Path, error: OSError) -> None:
        device = directory.stat().st_dev
        with self._lock:
            if device in self._unsupported:
                return
            self._unsupported.add(device)
        log.warning("flock is not supported on the filesystem of %s (%s): locks there are "
                    "*%s files instead", directory, error.strerror or error, OWNER_SUFFIX)

    def clear(self) -> None:
        with self._lock:
            self._unsupported.clear()


#: The one FlockSupport of the process.
FLOCK_SUPPORT = FlockSupport()


@contextlib.contextmanager
def exclusive_lock(path: Path, what: str, give_up=None) -> Iterator[None]:
    """An exclusive lock, across processes, hosts and threads, held for the `with` block:
    `flock` on `path`, or, where the filesystem does not support flock, the owner file
    `<path>.owner` (see the module's docstring). `what` names the work, for messages.
    `give_up`: a callable that a waiter asks between its tries; where it raises, the
    waiter stops waiting with that exception (a build's interrupt)."""
    with open(path, "a") as handle:
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                log.warning("waiting for another process building %s (lock %s)", what, path)
                _wait_for_flock(handle, give_up)
        except OSError as exc:
            if exc.errno not in _NO_FLOCK:
                raise
            FLOCK_SUPPORT.unsupported(path.parent, exc)
        else:
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
            return
    with _owner_lock(path.with_name(path.name + OWNER_SUFFIX), what, give_up):
        yield


def _wait_for_flock(handle, give_up) -> None:
    """flock(LOCK_EX) on `handle`, tried again and again (so that `give_up` is asked in
    between) rather than blocking where nothing could stop it."""
    delay = 0.05
    while True:
        if give_up is not None:
            give_up()
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            time.sleep(delay)
            delay = min(2 * delay, 1.0)


@dataclass(frozen=True, slots=True)
class _Owner:
    """What an owner lock file holds (None fields: a file being written, or not ours)."""

    inode: int
    mtime: float
    pid: int | None = None
    host: str | None = None
    token: str | None = None

    def describe(self) -> str:
        if self.pid is None:
            return "a process"
        return f"process {self.pid} on {self.host}"


def _read_owner(path: Path) -> _Owner | None:
    """The owner lock file at `path`, or None if there is none."""
    try:
        with open(path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            text = handle.read(4096)
    except FileNotFoundError:
        return None
    owner = _Owner(inode=stat.st_ino, mtime=stat.st_mtime)
    try:
        record = json.loads(text)
        pid, host, token = record["pid"], record["host"], record["token"]
    except (ValueError, TypeError, KeyError):  # being written, or not a lock of ours
        return owner
    if not (isinstance(pid, int) and pid > 0 and isinstance(host, str) and isinstance(token, str)):
        return owner
    return _Owner(inode=stat.st_ino, mtime=stat.st_mtime, pid=pid, host=host, token=token)


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's
        return True
    return True


def _why_stale(owner: _Owner) -> str | None:
    """Why the lock `owner` holds is abandoned, or None if it may be alive."""
    if owner.host == socket.gethostname() and owner.pid is not None \
            and not _process_exists(owner.pid):
        return f"its holder, process {owner.pid} on this host, is dead"
    age = time.time() - owner.mtime
    if age > STALE_LOCK_SECONDS:
        return (f"it was last refreshed {age:.0f} s ago (its holder refreshes it every "
                f"{HEARTBEAT_SECONDS:.0f} s)")
    return None


def _break_lock(path: Path, owner: _Owner, reason: str) -> None:
    """Remove the abandoned lock `owner` at `path`, unless someone replaced it meanwhile.

    Renamed aside first (atomic), so that of several waiters breaking it at once only one
    succeeds; if what was renamed is not the file judged abandoned as it was then (another
    inode or token, or refreshed since), it goes back."""
    aside = path.with_name(f"{path.name}.stale-{secrets.token_hex(4)}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:  # released, or broken by another waiter
        return
    moved = _read_owner(aside)
    try:
        if moved is not None and moved != owner:  # replaced, or refreshed: a live lock
            with contextlib.suppress(FileExistsError):
                os.link(aside, path)  # put it back
            return
        log.warning("breaking the build lock %s of %s: %s", path, owner.describe(), reason)
    finally:
        aside.unlink(missing_ok=True)


def _heartbeat(path: Path, stop: threading.Event) -> None:
    """Refresh the owner lock file's mtime until `stop`: a live holder's lock never looks
    abandoned, however long its compile takes."""
    while not stop.wait(HEARTBEAT_SECONDS):
        try:
            os.utime(path)
        except OSError as exc:
            log.debug("cannot refresh %s: %s", path, exc)


@contextlib.contextmanager
def _owner_lock(path: Path, what: str, give_up=None) -> Iterator[None]:
    """An exclusive lock that needs no flock: the file `path`, created with O_EXCL and
    holding our pid, host and a token; waiters poll it and break it when abandoned."""
    token = secrets.token_hex(8)
    record = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "token": token,
                         "started": time.time()})
    delay, said = 0.05, False
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            owner = _read_owner(path)
            if owner is None:  # released in the meantime
                continue
            reason = _why_stale(owner)
            if reason is not None:
                _break_lock(path, owner, reason)
                continue
            if not said:
                log.warning("waiting for %s building %s (lock %s)", owner.describe(), what, path)
                said = True
            if give_up is not None:
                give_up()
            time.sleep(delay)
            delay = min(2 * delay, 1.0)
            continue
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(record)
                handle.flush()
                os.fsync(handle.fileno())
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        break
    stop = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(path, stop), daemon=True,
                            name=f"lock-heartbeat-{what}")
    beat.start()
    try:
        yield
    finally:
        stop.set()
        beat.join()
        owner = _read_owner(path)
        if owner is not None and owner.token == token:
            path.unlink(missing_ok=True)
        else:
            log.warning("the build lock %s was broken while %s held it", path, what)
