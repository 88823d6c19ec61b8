"""SQLite storage: one database file in WAL mode, its schema and migrations.

WAL lets the request threads read while a worker writes. Every change that must
be all-or-nothing (a state transition and its audit row) runs in
:meth:`Database.transaction`, which takes the write lock up front
(``BEGIN IMMEDIATE``) so two writers never deadlock half-way. Each thread gets its
own connection (sqlite3 connections must not be shared between threads while in
use); they are closed together by :meth:`Database.close`.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path

from faceweave.errors import InputError, OutputError

__all__ = ["SCHEMA_VERSION", "Database", "read_rows"]

SCHEMA_VERSION = 3
_BUSY_TIMEOUT_MS = 10_000

# Version 1. Times are Unix seconds (REAL); JSON is stored as TEXT.
_SCHEMA_V1 = """
CREATE TABLE keys (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    hash        TEXT NOT NULL UNIQUE,
    created_at  REAL NOT NULL,
    revoked_at  REAL
);

CREATE TABLE jobs (
    id               TEXT PRIMARY KEY,
    key_id           TEXT NOT NULL REFERENCES keys(id),
    state            TEXT NOT NULL
                     CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),
    kind             TEXT NOT NULL CHECK (kind IN ('image', 'video')),
    options          TEXT NOT NULL,
    inputs           TEXT NOT NULL,
    result_ext       TEXT,
    result_sha256    TEXT,
    progress         REAL NOT NULL DEFAULT 0,
    error_code       TEXT,
    error_message    TEXT,
    attempts         INTEGER NOT NULL DEFAULT 0,
    created_at       REAL NOT NULL,
    started_at       REAL,
    finished_at      REAL,
    deleted_at       REAL
);
CREATE INDEX jobs_queue ON jobs (state, created_at);
CREATE INDEX jobs_by_key ON jobs (key_id, created_at);

CREATE TABLE audit_log (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    at             REAL NOT NULL,
    key_id         TEXT,
    action         TEXT NOT NULL,
    job_id         TEXT,
    inputs_sha256  TEXT,
    output_sha256  TEXT,
    detail         TEXT
);
CREATE INDEX audit_by_job ON audit_log (job_id);

-- The audit log is append-only: rows can be added, never changed or removed.
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;
"""

# Version 2: what the source photo will show in the result (source_advice), per job.
_SCHEMA_V2 = """
ALTER TABLE jobs ADD COLUMN notes TEXT NOT NULL DEFAULT '[]';
"""

# Version 3: the server that runs a job (see faceweave.service.instances): a server that
# starts puts back in the queue only the running jobs whose server is gone.
_SCHEMA_V3 = """
ALTER TABLE jobs ADD COLUMN owner TEXT;
"""

_MIGRATIONS = {1: _SCHEMA_V1, 2: _SCHEMA_V2, 3: _SCHEMA_V3}


class _Held:
    """One thread's connection, closed when the thread's local data goes (the thread
    ended) or by :meth:`Database.close`. (A connection is not freed when its last
    reference goes: its statement cache refers back to it.)"""

    __slots__ = ("conn", "use", "depth", "__weakref__")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        # Held by its thread while a statement or transaction runs: close() from
        # another thread waits for it (closing a connection mid-statement crashed the
        # process).
        self.use = threading.RLock()
        self.depth = 0  # its thread's blocks under way (a query inside a transaction)

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.conn.close()

    def __del__(self) -> None:
        self.close()


class Database:
    """The service's SQLite database.

    Args:
        path: the database file; its directory must exist.

    Example:
        >>> db = Database(tmp_path / "faceweave.db")  # doctest: +SKIP
        >>> with db.transaction() as conn:  # doctest: +SKIP
        ...     conn.execute("INSERT INTO ...")
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._local = threading.local()
        # Every thread's connection, for close(). Weakly: a thread that ends (the web
        # server's worker threads end after a while idle) closes its connection as its
        # thread-local data goes; held here, each stayed open for good.
        self._connections: weakref.WeakSet[_Held] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._closing = threading.Lock()
        self._closed = False
        try:
            conn = self.connection()
            conn.execute("PRAGMA journal_mode=WAL")
        except sqlite3.Error as exc:
            raise OutputError(f"{self.path}: cannot open the database: {exc}") from exc
        self._migrate()

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (opened on first use), in autocommit mode."""
        return self._held().conn

    def _held(self) -> _Held:
        held: _Held | None = getattr(self._local, "held", None)
        if held is not None and held.depth:
            return held  # inside this thread's own block, which close() waits for
        if self._closed:
            raise OutputError(f"{self.path}: database is closed")
        if held is None:
            conn = sqlite3.connect(
                self.path,
                timeout=_BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,  # we issue BEGIN ourselves
                check_same_thread=False,  # closed from another thread by close()
            )
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA foreign_keys=ON")
            # WAL + NORMAL is durable against process crashes (kill -9); FULL also
            # survives power loss at the cost of an fsync per commit.
            conn.execute("PRAGMA synchronous=FULL")
            held = self._local.held = _Held(conn)
            with self._lock:
                self._connections.add(held)
        return held

    @contextlib.contextmanager
    def _using(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection, not closed by close() until the block ends."""
        held = self._held()
        with held.use:
            if self._closed and not held.depth:  # (closed while this thread waited)
                raise OutputError(f"{self.path}: database is closed")
            held.depth += 1
            try:
                yield held.conn
            finally:
                held.depth -= 1

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: committed when the block ends, rolled back on error."""
        with self._using() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except BaseException:
                # A COMMIT that fails (SQLITE_FULL: the disk is full) leaves the
                # transaction open, and this thread's next BEGIN failed with it.
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise

    def query(self, sql: str, params: tuple[object, ...] = ()) -> list[sqlite3.Row]:
        """Run a read-only statement and return every row."""
        with self._using() as conn:
            return list(conn.execute(sql, params).fetchall())

    def execute(self, sql: str, params: tuple[object, ...] = ()) -> int:
        """Run one statement on its own (autocommit); returns the rows it changed."""
        with self._using() as conn:
            return int(conn.execute(sql, params).rowcount)

    def close(self) -> None:
        """Close every thread's connection, each once its statement or transaction
        under way (if any) has ended; later use raises OutputError.

        Raises:
            OutputError: called inside this thread's own transaction.
        """
        mine: _Held | None = getattr(self._local, "held", None)
        if mine is not None and mine.depth:
            raise OutputError(f"{self.path}: the database cannot close inside a transaction")
        with self._closing:  # (a second close returns once the first is done)
            with self._lock:
                self._closed = True
                held_now = list(self._connections)
                self._connections.clear()
            for held in held_now:
                with held.use:
                    held.close()
            self._local = threading.local()

    def _migrate(self) -> None:
        with self.transaction() as conn:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise OutputError(
                    f"{self.path}: database schema {version} is newer than this faceweave "
                    f"({SCHEMA_VERSION}); upgrade faceweave"
                )
            for target in range(version + 1, SCHEMA_VERSION + 1):
                for statement in _split_statements(_MIGRATIONS[target]):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version={target}")


def read_rows(path: Path, sql: str, params: tuple[object, ...] = ()) -> list[sqlite3.Row]:
    """Rows of one query, the database opened read-only: for a store this process may
    only read (another user's, a read-only mount), where opening it to write fails.
    A WAL database whose folder cannot be written is read as it is on disk (SQLite's
    ``immutable``: nothing else may be writing it then anyway).

    Raises:
        InputError: it cannot be read.
    """
    uri = Path(path).resolve().as_uri()
    last: sqlite3.Error | None = None
    for mode in ("mode=ro", "mode=ro&immutable=1"):
        try:
            with contextlib.closing(sqlite3.connect(f"{uri}?{mode}", uri=True)) as conn:
                conn.row_factory = sqlite3.Row
                return list(conn.execute(sql, params).fetchall())
        except sqlite3.OperationalError as exc:
            last = exc
    raise InputError(f"{path}: cannot read the database: {last}")


def _split_statements(script: str) -> list[str]:
    """Split a schema script into statements (``executescript`` would commit our transaction).

    ``sqlite3.complete_statement`` knows that a trigger body's semicolons do not end it.
    """
    statements: list[str] = []
    current = ""
    for line in script.splitlines(keepends=True):
        if line.strip().startswith("--") and not current.strip():
            continue
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    if current.strip():
        statements.append(current.strip())
    return statements
