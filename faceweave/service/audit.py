"""The append-only operation log: who did what to which job, and when.

Rows are only ever inserted; SQLite triggers (see :mod:`~faceweave.service.db`)
abort any ``UPDATE`` or ``DELETE`` on the table. Each row may carry the SHA-256
of the job's inputs and of its output, so a result can be traced back to the
files it was made from.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["AuditEntry", "record", "entries"]

# The actions written; documented in docs/service.md.
ACTIONS = (
    "key.created",
    "key.revoked",
    "job.created",
    "job.rejected",
    "job.started",
    "job.requeued",
    "job.completed",
    "job.failed",
    "job.cancelled",
    "job.deleted",
    "job.expired",
    "result.downloaded",
    "preview",
)


@dataclass(frozen=True)
class AuditEntry:
    """One row of the audit log."""

    id: int
    at: float
    key_id: str | None
    action: str
    job_id: str | None
    inputs_sha256: dict[str, str] | None
    output_sha256: str | None
    detail: dict[str, Any] | None


def record(
    conn: sqlite3.Connection,
    action: str,
    *,
    key_id: str | None = None,
    job_id: str | None = None,
    inputs_sha256: dict[str, str] | None = None,
    output_sha256: str | None = None,
    detail: dict[str, Any] | None = None,
    at: float | None = None,
) -> None:
    """Append one row; call inside the transaction whose change it records (``at``:
    when it happened, if not now)."""
    if action not in ACTIONS:
        raise ValueError(f"unknown audit action {action!r}")
    conn.execute(
        "INSERT INTO audit_log (at, key_id, action, job_id, inputs_sha256, output_sha256, detail)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            time.time() if at is None else at,
            key_id,
            action,
            job_id,
            json.dumps(inputs_sha256, sort_keys=True) if inputs_sha256 else None,
            output_sha256,
            json.dumps(detail, sort_keys=True) if detail else None,
        ),
    )


def entries(
    conn: sqlite3.Connection, *, job_id: str | None = None, action: str | None = None
) -> list[AuditEntry]:
    """Rows in the order written, optionally only one job's or one action's."""
    sql = "SELECT * FROM audit_log"
    where: list[str] = []
    params: list[object] = []
    if job_id is not None:
        where.append("job_id = ?")
        params.append(job_id)
    if action is not None:
        where.append("action = ?")
        params.append(action)
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY id"
    return [
        AuditEntry(
            id=int(row["id"]),
            at=float(row["at"]),
            key_id=row["key_id"],
            action=row["action"],
            job_id=row["job_id"],
            inputs_sha256=json.loads(row["inputs_sha256"]) if row["inputs_sha256"] else None,
            output_sha256=row["output_sha256"],
            detail=json.loads(row["detail"]) if row["detail"] else None,
        )
        for row in conn.execute(sql, params).fetchall()
    ]
