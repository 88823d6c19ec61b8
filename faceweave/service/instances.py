"""Which servers are running on a data directory.

Several ``faceweave serve`` processes may share one ``--data`` (one answers requests
with ``--workers 0``, others run the jobs). Each holds an exclusive ``flock`` on its
own file, ``<data>/instances/<id>.lock``, for as long as it runs; the kernel lets go
of it when the process ends, however it ends (``kill -9`` included). A job a server
runs carries that server's id (its ``owner``), so a server starting, or sweeping,
puts back in the queue only the running jobs whose owner is gone, never a living
peer's (which had then seen its job "cancelled" and deleted its files).

Without ``fcntl`` (Windows) no peer can be told alive: as before, every job left
running by another id is taken to be a dead server's.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["InstanceLock"]


class InstanceLock:
    """This process's mark on a data directory: an id, and a lock held while it lives.

    Args:
        directory: ``<data>/instances`` (made if missing).

    Example:
        >>> lock = InstanceLock(Path("faceweave-data/instances"))  # doctest: +SKIP
        >>> lock.alive(other_id)  # doctest: +SKIP
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.id = secrets.token_hex(8)
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{self.id}.lock"
        # Locked before it is seen under its name: another server starting at the same
        # moment would take an unlocked lock file for a dead server's and remove it.
        hidden = directory / f".{self.id}.new"
        self._fd: int | None = os.open(hidden, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        if fcntl is not None:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.replace(hidden, self.path)

    def alive(self, owner: str | None) -> bool:
        """Whether the server ``owner`` (an id, as jobs store it) is running now:
        this one, or one that holds its lock. None (a job from before owners were
        kept) and unknown ids are not."""
        if owner is None or not owner.isalnum():
            return False
        if owner == self.id:
            return self._fd is not None
        if fcntl is None:  # pragma: no cover - Windows
            return False
        try:
            fd = os.open(self.directory / f"{owner}.lock", os.O_RDWR)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True  # held: its server runs
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        finally:
            os.close(fd)

    def forget_dead(self) -> list[str]:
        """Remove the lock files of servers that have ended; returns their ids."""
        gone = []
        for entry in self.directory.glob("*.lock"):
            if not self.alive(entry.stem):
                with contextlib.suppress(OSError):
                    entry.unlink()
                    gone.append(entry.stem)
        return gone

    def release(self) -> None:
        """Let go of the lock and remove its file (the server is stopping)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        os.close(self._fd)
        self._fd = None
