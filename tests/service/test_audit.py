"""The audit log: rows for every operation with input/output hashes; append-only."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from faceweave.service import audit
from faceweave.service.db import Database
from tests.service.conftest import auth, make_key, submit, wait_for


def test_create_download_delete_are_logged_with_hashes(
    service: tuple[TestClient, Path], source_png: bytes, target_jpeg: bytes
) -> None:
    client, data_dir = service
    key = make_key(data_dir, "audited")
    job = submit(client, key, source_png, target_jpeg).json()
    done = wait_for(client, job["id"], key)
    result = client.get(done["result"]["url"], headers=auth(key)).content
    assert client.delete(f"/v1/jobs/{job['id']}", headers=auth(key)).status_code == 204

    db = Database(data_dir / "faceweave.db")
    try:
        rows = audit.entries(db.connection(), job_id=job["id"])
    finally:
        db.close()
    actions = [row.action for row in rows]
    assert actions == [
        "job.created",
        "job.started",
        "job.completed",
        "result.downloaded",
        "job.deleted",
    ]
    inputs = {
        "source": hashlib.sha256(source_png).hexdigest(),
        "target": hashlib.sha256(target_jpeg).hexdigest(),
    }
    output = hashlib.sha256(result).hexdigest()
    by_action = {row.action: row for row in rows}
    assert by_action["job.created"].inputs_sha256 == inputs
    assert by_action["job.completed"].inputs_sha256 == inputs
    assert by_action["job.completed"].output_sha256 == output
    assert by_action["result.downloaded"].output_sha256 == output
    assert by_action["job.deleted"].output_sha256 == output
    assert len({row.key_id for row in rows}) == 1 and rows[0].key_id is not None
    assert all(row.at > 0 for row in rows)


def test_rejected_uploads_are_logged(service: tuple[TestClient, Path]) -> None:
    client, data_dir = service
    key = make_key(data_dir, "rejected")
    response = client.post(
        "/v1/jobs", headers=auth(key), files={"source": ("a.png", b""), "target": ("b.png", b"")}
    )
    assert response.status_code == 422
    db = Database(data_dir / "faceweave.db")
    try:
        rejected = audit.entries(db.connection(), action="job.rejected")
    finally:
        db.close()
    assert any(row.detail == {"code": "empty_file", "status": 422} for row in rejected)


def test_audit_log_is_append_only(tmp_path: Path) -> None:
    make_key(tmp_path, "someone")  # writes a key.created row
    db = Database(tmp_path / "faceweave.db")
    conn = db.connection()
    try:
        assert conn.execute("SELECT COUNT(*) FROM audit_log").fetchone()[0] == 1
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("UPDATE audit_log SET action = 'nothing'")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("DELETE FROM audit_log")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            with db.transaction() as tx:
                tx.execute("DELETE FROM audit_log WHERE id = 1")
        assert conn.execute("SELECT action FROM audit_log").fetchall()[0][0] == "key.created"
        with pytest.raises(ValueError, match="unknown audit action"):
            audit.record(conn, "job.teleported")
    finally:
        db.close()
