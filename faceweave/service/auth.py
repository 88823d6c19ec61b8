"""API keys and per-key rate limits.

A key is ``fw_`` followed by 43 URL-safe characters (256 random bits). It is
shown once, when created; the database keeps only
``HMAC-SHA256(pepper, key)``, where the pepper is a random secret in
``<data>/pepper.key`` (mode 0600), outside the database. A stolen database alone
therefore neither reveals keys nor lets anyone test guesses offline. Because
keys are long random strings, a fast keyed hash is enough: there is no
low-entropy password to stretch. Lookup is by the hash itself (a unique index),
so no secret is compared byte by byte.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from faceweave.errors import InputError, OutputError, UsageError
from faceweave.service import audit
from faceweave.service.db import Database, read_rows

__all__ = [
    "ApiKey",
    "KEY_PREFIX",
    "RateLimiter",
    "authenticate",
    "check_pepper",
    "create_key",
    "hash_key",
    "list_keys",
    "load_pepper",
    "revoke_key",
]

KEY_PREFIX = "fw_"
_KEY_BYTES = 32
_PEPPER_BYTES = 32
_MAX_NAME = 100


@dataclass(frozen=True)
class ApiKey:
    """A key's public record (never the key itself)."""

    id: str
    name: str
    created_at: float
    revoked_at: float | None


_ACTIVE_KEYS = "SELECT COUNT(*) AS n FROM keys WHERE revoked_at IS NULL"


def check_pepper(path: Path, db_path: Path) -> None:
    """Before a server starts: refuse a pepper missing beside a key store with active
    keys (see :func:`load_pepper`), the store only read.

    Raises:
        InputError: so.
    """
    if not path.exists() and db_path.is_file():
        _refuse_lost_pepper(path, read_rows(db_path, _ACTIVE_KEYS)[0]["n"])


def _refuse_lost_pepper(path: Path, active: int) -> None:
    if active:
        raise InputError(
            f"{path}: missing, but the key store holds {active} active key(s) checked with "
            "it: put it back beside faceweave.db (or revoke those keys and create new ones)"
        )


def load_pepper(path: Path, db: Database | None = None) -> bytes:
    """Read the pepper, creating it (mode 0600) the first time: when ``db`` (the
    key store it goes with) holds no active key.

    Raises:
        OutputError: it cannot be read or created.
        InputError: it is missing while ``db`` holds active keys, hashed with it (a
            database restored without it: a new pepper had been made without a word,
            and every key was refused, though listed as active).
    """
    try:
        return bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:
        raise OutputError(f"{path}: cannot read the key pepper: {exc}") from exc
    if db is not None:
        _refuse_lost_pepper(path, db.query(_ACTIVE_KEYS)[0]["n"])
    pepper = secrets.token_bytes(_PEPPER_BYTES)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process created it just now
        return load_pepper(path)
    except OSError as exc:
        raise OutputError(f"{path}: cannot create the key pepper: {exc.strerror}") from exc
    with os.fdopen(fd, "w") as handle:
        handle.write(pepper.hex() + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    return pepper


def hash_key(pepper: bytes, key: str) -> str:
    """The stored form of ``key``: hex HMAC-SHA256 under the pepper."""
    return hmac.new(pepper, key.encode("utf-8"), hashlib.sha256).hexdigest()


def create_key(db: Database, pepper: bytes, name: str) -> tuple[ApiKey, str]:
    """Create a key; returns its record and the key itself (shown once, never stored).

    Raises:
        UsageError: ``name`` is empty or too long.
    """
    name = name.strip()
    if not name or len(name) > _MAX_NAME or not name.isprintable():
        raise UsageError(f"key name must be 1..{_MAX_NAME} printable characters")
    key = KEY_PREFIX + secrets.token_urlsafe(_KEY_BYTES)
    record = ApiKey(id=secrets.token_hex(8), name=name, created_at=time.time(), revoked_at=None)
    with db.transaction() as conn:
        conn.execute(
            "INSERT INTO keys (id, name, hash, created_at) VALUES (?, ?, ?, ?)",
            (record.id, record.name, hash_key(pepper, key), record.created_at),
        )
        audit.record(conn, "key.created", key_id=record.id, detail={"name": name})
    return record, key


def list_keys(db: Database | Path) -> list[ApiKey]:
    """Every key's record, oldest first; ``db`` an open database or the path of one,
    then only read (a store this process may not write)."""
    sql = "SELECT * FROM keys ORDER BY created_at"
    rows = db.query(sql) if isinstance(db, Database) else read_rows(db, sql)
    return [ApiKey(row["id"], row["name"], row["created_at"], row["revoked_at"]) for row in rows]


def revoke_key(db: Database, key_id: str) -> bool:
    """Revoke a key by id (its jobs stay); False when no such active key exists."""
    with db.transaction() as conn:
        changed = conn.execute(
            "UPDATE keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
            (time.time(), key_id),
        ).rowcount
        if changed:
            audit.record(conn, "key.revoked", key_id=key_id)
    return bool(changed)


def authenticate(db: Database, pepper: bytes, key: str) -> ApiKey | None:
    """The active key matching ``key``, or None."""
    if not key.startswith(KEY_PREFIX) or len(key) > 200:
        return None
    rows = db.query(
        "SELECT * FROM keys WHERE hash = ? AND revoked_at IS NULL", (hash_key(pepper, key),)
    )
    if not rows:
        return None
    row = rows[0]
    return ApiKey(row["id"], row["name"], row["created_at"], row["revoked_at"])


class RateLimiter:
    """Token buckets, one per key: ``burst`` requests at once, refilled at ``rate`` per second.

    Args:
        rate: tokens added per second.
        burst: bucket size.

    Example:
        >>> limiter = RateLimiter(rate=1.0, burst=2)
        >>> limiter.take("k"), limiter.take("k"), limiter.take("k") > 0
        (0.0, 0.0, True)
    """

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = float(burst)
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, last refill)
        self._lock = threading.Lock()

    def take(self, key: str, cost: float = 1.0, *, now: float | None = None) -> float:
        """Take ``cost`` tokens; returns 0.0 when allowed, else the seconds to wait."""
        now = time.monotonic() if now is None else now
        with self._lock:
            tokens, last = self._buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens >= cost:
                self._buckets[key] = (tokens - cost, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (cost - tokens) / self.rate

    @staticmethod
    def retry_after(wait_s: float) -> str:
        """``Retry-After`` header value: whole seconds, at least 1."""
        return str(max(1, math.ceil(wait_s)))
