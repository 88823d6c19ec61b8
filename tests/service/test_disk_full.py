"""A full disk is the server's passing condition: uploads get 507 with Retry-After,
queued jobs wait for room instead of failing, and deleting a job (the way to make room)
still works. The disk is made "full" by raising ENOSPC where the service writes."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import faceweave.service.checks as checks_module
import faceweave.service.worker as worker_module
from faceweave.errors import OutputError
from faceweave.service import audit
from faceweave.service.db import Database
from faceweave.service.errors import disk_full
from faceweave.service.jobs import JobStore
from tests.service.conftest import auth, make_key, submit, wait_for


def _no_space() -> OSError:
    return OSError(errno.ENOSPC, "No space left on device")


def _database_full() -> sqlite3.OperationalError:
    error = sqlite3.OperationalError("database or disk is full")
    error.sqlite_errorcode = sqlite3.SQLITE_FULL  # type: ignore[attr-defined]
    return error


def test_what_counts_as_a_full_disk() -> None:
    assert disk_full(_no_space())
    assert disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert disk_full(_database_full())
    try:  # as the writers raise it: an OutputError from the OSError
        try:
            raise _no_space()
        except OSError as exc:
            raise OutputError("result.png: cannot write: No space left on device") from exc
    except OutputError as exc:
        assert disk_full(exc)
    assert not disk_full(OSError(errno.EACCES, "Permission denied"))
    assert not disk_full(sqlite3.OperationalError("database is locked"))
    assert not disk_full(OutputError("result.png: cannot write: permission denied"))
    assert not disk_full(None)


def test_an_upload_that_finds_the_disk_full_gets_507_and_leaves_nothing(
    make_client: Any,
    tmp_path: Path,
    source_png: bytes,
    target_jpeg: bytes,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """It had been 500 ``internal`` (the docs' "a bug"), with two tracebacks in the log."""
    data_dir = tmp_path / "data"
    key = make_key(data_dir, "k")
    client = make_client(data_dir=data_dir, workers=0)

    def full(*args: object) -> None:
        raise _no_space()

    monkeypatch.setattr(checks_module._UploadParser, "_flush", full)
    response = submit(client, key, source_png, target_jpeg)
    assert response.status_code == 507, response.text
    assert response.json()["error"]["code"] == "insufficient_storage"
    assert int(response.headers["Retry-After"]) > 0
    assert client.get("/v1/jobs", headers=auth(key)).json()["jobs"] == []
    assert not any((data_dir / "jobs").iterdir())
    assert not [r for r in caplog.records if r.exc_info], "no traceback for a full disk"


def test_a_job_that_finds_the_disk_full_waits_in_the_queue_and_then_runs(
    make_client: Any,
    tmp_path: Path,
    source_png: bytes,
    target_jpeg: bytes,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its result could not be written: it had failed for good (``output_error``), lost
    to its client though the disk was the server's and soon had room again."""
    monkeypatch.setattr(worker_module, "DISK_FULL_RETRY_S", 0.05)
    writes = []
    write_result = worker_module.write_result

    def first_finds_it_full(path: Path, *args: Any, **kwargs: Any) -> bool:
        writes.append(path)
        if len(writes) == 1:
            try:
                raise _no_space()
            except OSError as exc:
                raise OutputError(f"{path.name}: cannot write: No space left on device") from exc
        return bool(write_result(path, *args, **kwargs))

    monkeypatch.setattr(worker_module, "write_result", first_finds_it_full)
    data_dir = tmp_path / "data"
    key = make_key(data_dir, "k")
    client = make_client(data_dir=data_dir, workers=1)
    response = submit(client, key, source_png, target_jpeg)
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    body = wait_for(client, job_id, key)
    assert body["state"] == "done", body
    assert body["attempts"] == 2 and len(writes) == 2
    db = Database(data_dir / "faceweave.db")
    try:
        requeued = audit.entries(db.connection(), job_id=job_id, action="job.requeued")
    finally:
        db.close()
    assert [entry.detail for entry in requeued] == [{"reason": "disk full"}]


def test_a_job_is_deleted_when_the_database_has_no_room_to_record_it(
    make_client: Any,
    tmp_path: Path,
    source_png: bytes,
    target_jpeg: bytes,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Deleting jobs is how room is made; it had been 500 while the disk was full. The
    job's files go first, then the delete is recorded."""
    data_dir = tmp_path / "data"
    key = make_key(data_dir, "k")
    client = make_client(data_dir=data_dir, workers=0)
    job_id = submit(client, key, source_png, target_jpeg).json()["id"]
    job_dir = data_dir / "jobs" / job_id
    assert job_dir.is_dir()
    delete = JobStore._delete
    seen = []

    def full_until_files_go(self: JobStore, job_id: str, key_id: str) -> Any:
        # (A delete that finds no job of that key writes nothing: no room needed.)
        if self.get(job_id, key_id) is None:
            return delete(self, job_id, key_id)
        seen.append(job_dir.exists())
        if job_dir.exists():
            raise _database_full()
        return delete(self, job_id, key_id)

    monkeypatch.setattr(JobStore, "_delete", full_until_files_go)
    response = client.delete(f"/v1/jobs/{job_id}", headers=auth(key))
    assert response.status_code == 204, response.text
    assert seen == [True, False]
    assert client.get(f"/v1/jobs/{job_id}", headers=auth(key)).status_code == 404
    # Another key's job is not touched: nothing to delete, nothing removed.
    other = make_key(data_dir, "other")
    second = submit(client, key, source_png, target_jpeg).json()["id"]
    job_dir = data_dir / "jobs" / second
    response = client.delete(f"/v1/jobs/{second}", headers=auth(other))
    assert response.status_code == 404 and job_dir.is_dir()


def test_a_result_is_downloaded_while_the_disk_is_full(
    make_client: Any,
    tmp_path: Path,
    source_png: bytes,
    target_jpeg: bytes,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A download's audit row could not be written on a full disk, and the result was
    refused with 507: a client could not save its results before deleting jobs to make
    room. The result comes; its row waits in memory for the next download's."""
    data_dir = tmp_path / "data"
    key = make_key(data_dir, "k")
    client = make_client(data_dir=data_dir, workers=1)
    job_id = submit(client, key, source_png, target_jpeg).json()["id"]
    assert wait_for(client, job_id, key)["state"] == "done"
    record = audit.record
    full = [True]

    def no_room(conn: sqlite3.Connection, action: str, **fields: Any) -> None:
        if full[0] and action == "result.downloaded":
            raise _database_full()
        record(conn, action, **fields)

    monkeypatch.setattr(audit, "record", no_room)
    url = f"/v1/jobs/{job_id}/result"
    first = client.get(url, headers=auth(key))
    assert first.status_code == 200 and first.content
    full[0] = False
    assert client.get(url, headers=auth(key)).status_code == 200
    store = client.app.state.service.store
    with store.db.transaction() as conn:
        rows = audit.entries(conn, job_id=job_id, action="result.downloaded")
    assert len(rows) == 2 and rows[0].at <= rows[1].at
    # Anything else than a full disk is no reason to serve unrecorded.
    monkeypatch.setattr(
        audit, "record", lambda *a, **k: (_ for _ in ()).throw(sqlite3.OperationalError("x"))
    )
    assert client.get(url, headers=auth(key)).status_code == 500


def test_a_commit_that_fails_leaves_no_transaction_open(tmp_path: Path) -> None:
    """A COMMIT that fails (SQLITE_FULL on a full disk; here a deferred foreign key)
    leaves SQLite's transaction open: the thread's next transaction failed with
    "cannot start a transaction within a transaction"."""
    db = Database(tmp_path / "t.db")
    try:
        conn = db.connection()
        conn.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
        conn.execute(
            "CREATE TABLE child (parent INTEGER REFERENCES parent(id)"
            " DEFERRABLE INITIALLY DEFERRED)"
        )
        with pytest.raises(sqlite3.IntegrityError), db.transaction() as tx:
            tx.execute("INSERT INTO child VALUES (1)")
        assert not conn.in_transaction
        with db.transaction() as tx:
            tx.execute("INSERT INTO parent VALUES (1)")
        assert db.query("SELECT COUNT(*) AS n FROM child")[0]["n"] == 0
        assert db.query("SELECT COUNT(*) AS n FROM parent")[0]["n"] == 1
    finally:
        db.close()
