"""The durable job queue.

A job moves ``queued -> running -> done | failed | cancelled``; each move is
one SQLite transaction together with its audit row. A worker takes a job with a
single ``UPDATE ... WHERE state = 'queued' ... RETURNING``: SQLite runs it under
the write lock, so two workers (threads or processes) never get the same job.
Jobs found ``running`` when the service starts were interrupted (crash,
``kill -9``, power loss) and go back to ``queued``; they run again from the
start. Files live in ``<data>/jobs/<id>/``: ``source.<ext>``, ``target.<ext>``,
``reference.<ext>`` and ``result.<ext>``; user file names are never used as paths.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from faceweave.analysis.selection import ORDERS, SELECTORS
from faceweave.errors import UsageError
from faceweave.processors.swap import (
    BLEND_MODES,
    COLOR_MODES,
    GAZE_MODES,
    SwapOptions,
    css_sides,
)
from faceweave.service import audit
from faceweave.service.db import Database
from faceweave.service.errors import ServiceError, disk_full

__all__ = [
    "FINAL_STATES",
    "InputFile",
    "Job",
    "JobOptions",
    "JobStore",
    "OUTPUT_FORMATS",
    "STATES",
    "VISIBLE_STATES",
]

STATES = ("queued", "running", "done", "failed", "cancelled")
# The states a client sees: DELETE cancels an unfinished job and deletes it in the
# same move, so a cancelled job is gone (404) and never listed.
VISIBLE_STATES = ("queued", "running", "done", "failed")
FINAL_STATES = ("done", "failed", "cancelled")
OUTPUT_FORMATS = ("auto", "png", "jpg", "webp")
# More photos of the source person, merged with the first (see faceweave.merge_sources).
EXTRA_SOURCES = ("source_2", "source_3")
ROLES = ("source", *EXTRA_SOURCES, "target", "reference")


def source_roles(inputs: Mapping[str, object]) -> list[str]:
    """The source photos a job was given, in order: ``source``, then any extras."""
    return [role for role in ("source", *EXTRA_SOURCES) if role in inputs]


# The look of a swap defaults to the engine's own settings, so the two cannot drift apart.
_ENGINE = SwapOptions()
MAX_FACES_LIMIT = 32


@dataclass(frozen=True)
class JobOptions:
    """What a job does: the command line's ``swap`` options.

    Attributes:
        fusion: 0 keeps the target, 1 is a full swap.
        color: colour mode (see :data:`~faceweave.COLOR_MODES`).
        blend: blend mode (see :data:`~faceweave.BLEND_MODES`).
        gaze: ``target`` (the eyes follow the target's) or ``source`` (the source
            photo's gaze).
        face_selector: ``one``, ``many`` or ``reference`` (needs a reference image).
        face_order: order of the target faces (see :func:`~faceweave.order_faces`).
        max_faces: at most this many target faces are detected.
        reference_distance: largest identity distance to the reference face.
        detail: 0 keeps the source's fine detail as it is, 1 matches it to the target's
            (a crisper source's toned down, a softer one's made up with grain on a
            large face).
        light: 0 keeps the source's shading, 1 takes the target's light and shade.
        creases: how much of the creases the target's expression makes the swapped
            face takes, 0 to 1: in videos its frown lines and crow's feet, in a still
            image the folds beside a smile wider than the source's.
        shape: 0 keeps the target's face geometry, 1 takes the source's face shape.
        mask_mouth: keep the target's open mouth.
        mask_lips: keep the target's own lips (crisp lip movement in a video; less of
            the source's likeness).
        mask_eyes: keep the target's eyes.
        mask_glasses: keep the target's glasses frames and tinted lenses in front of the
            swapped face.
        mask_hands: keep the target's hands in front of its faces (MediaPipe's hand
            landmarker round each face; 10-25 ms a face more).
        mask_padding: (top, right, bottom, left) fractions of the face given back to
            the target; in a form, 1, 2 or 4 numbers as in CSS (``"0 0 0.2 0"``).
        feather: width of the face mask's soft edge, as a fraction of the face.
        skip_no_face: a target without a (matching) face is returned unchanged
            instead of failing the job.
        output_format: ``auto`` (JPEG for JPEG and HEIC targets, PNG otherwise; the
            target's container for videos), ``png``, ``jpg`` or ``webp``.
        quality: JPEG/WebP quality 1..100.
        keep_audio: a video's sound is kept (all its tracks); false leaves it out.
        trim_start: a video is swapped from this second (0: its start).
        trim_end: a video is swapped up to this second (0: its end).
        upscale: the result goes through the server's frame enhancer, where it runs
            one (see ``/healthz``): that many times larger each way; false keeps the
            target's size. (Previews are not upscaled.)
    """

    fusion: float = _ENGINE.fusion
    color: str = _ENGINE.color
    blend: str = _ENGINE.blend
    gaze: str = _ENGINE.gaze
    detail: float = _ENGINE.detail
    light: float = _ENGINE.light
    creases: float = _ENGINE.creases
    shape: float = _ENGINE.shape
    face_selector: str = "one"
    face_order: str = "large-small"
    max_faces: int = 8
    reference_distance: float = 0.6
    mask_mouth: bool = _ENGINE.mask_mouth
    mask_lips: bool = _ENGINE.mask_lips
    mask_eyes: bool = _ENGINE.mask_eyes
    mask_glasses: bool = _ENGINE.mask_glasses
    mask_hands: bool = _ENGINE.mask_hands
    mask_padding: tuple[float, float, float, float] = _ENGINE.mask_padding
    feather: float = _ENGINE.feather
    skip_no_face: bool = False
    output_format: str = "auto"
    quality: int = 95
    keep_audio: bool = True
    trim_start: float = 0.0
    trim_end: float = 0.0
    upscale: bool = True

    def __post_init__(self) -> None:
        # Stored jobs come back from JSON with a list.
        if isinstance(self.mask_padding, list):
            object.__setattr__(self, "mask_padding", tuple(self.mask_padding))

    def validated(self) -> JobOptions:
        """Return ``self`` when every option is valid; raise :class:`UsageError` otherwise."""
        if not 0.0 <= self.fusion <= 1.0:  # also refuses NaN
            raise UsageError(f"fusion must be between 0 and 1, got {self.fusion}")
        if not 0.0 <= self.detail <= 1.0:
            raise UsageError(f"detail must be between 0 and 1, got {self.detail}")
        if not 0.0 <= self.light <= 1.0:
            raise UsageError(f"light must be between 0 and 1, got {self.light}")
        if not 0.0 <= self.creases <= 1.0:
            raise UsageError(f"creases must be between 0 and 1, got {self.creases}")
        if not 0.0 <= self.shape <= 1.0:
            raise UsageError(f"shape must be between 0 and 1, got {self.shape}")
        _choice("color", self.color, COLOR_MODES)
        _choice("blend", self.blend, BLEND_MODES)
        _choice("gaze", self.gaze, GAZE_MODES)
        _choice("face_selector", self.face_selector, SELECTORS)
        _choice("face_order", self.face_order, ORDERS)
        _choice("output_format", self.output_format, OUTPUT_FORMATS)
        if not 1 <= self.max_faces <= MAX_FACES_LIMIT:
            raise UsageError(f"max_faces must be between 1 and {MAX_FACES_LIMIT}")
        if not 0.0 <= self.reference_distance <= 10.0:
            raise UsageError("reference_distance must be between 0 and 10")
        if not 1 <= self.quality <= 100:
            raise UsageError(f"quality must be between 1 and 100, got {self.quality}")
        if not 0.0 <= self.trim_start < 1e9:
            raise UsageError(
                f"trim_start must be 0 or more and less than 1e9 seconds, got {self.trim_start}"
            )
        if not 0.0 <= self.trim_end < 1e9:
            raise UsageError(
                "trim_end must be 0 (the end) or more and less than 1e9 seconds, "
                f"got {self.trim_end}"
            )
        if self.trim_end and self.trim_end <= self.trim_start:
            raise UsageError(
                f"trim_end ({self.trim_end:g} s) must come after trim_start ({self.trim_start:g} s)"
            )
        SwapOptions.from_settings(self)  # the look, as the engine checks it (mask_padding, feather)
        return self

    @property
    def video_only(self) -> list[str]:
        """The video options set to other than their defaults (an image job has none)."""
        return self._changed(("keep_audio", "trim_start", "trim_end"))

    @property
    def image_only(self) -> list[str]:
        """The image options set to other than their defaults (a video job has none)."""
        return self._changed(("output_format", "quality"))

    def _changed(self, names: tuple[str, ...]) -> list[str]:
        defaults = type(self)()
        return [name for name in names if getattr(self, name) != getattr(defaults, name)]

    @classmethod
    def from_form(cls, fields: dict[str, str]) -> JobOptions:
        """Options from multipart form fields (strings); unknown fields are an error.

        Raises:
            UsageError: an unknown field or a value of the wrong kind.
        """
        defaults = cls()
        values: dict[str, Any] = {}
        for name, text in fields.items():
            if name not in cls.__dataclass_fields__:
                known = ", ".join(cls.__dataclass_fields__)
                raise UsageError(f"unknown option {name!r}; options are: {known}")
            kind = type(getattr(defaults, name))
            values[name] = _parse(name, text, kind)
        return cls(**values).validated()

    @classmethod
    def from_json(cls, text: str) -> JobOptions:
        return cls(**json.loads(text))


def _choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise UsageError(f"unknown {name} {value!r}; choose from {', '.join(choices)}")


def _parse(name: str, text: str, kind: type) -> object:
    text = text.strip()
    if kind is tuple:
        return _sides(name, text)
    if kind is bool:
        lowered = text.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise UsageError(f"{name} must be true or false, got {text!r}")
    if kind is int and not text.lstrip("+-").isdigit():
        raise UsageError(f"{name} must be a whole number, got {text[:40]!r}")
    try:
        if "_" in text:  # Python reads 1_0 as 10; a client means no such number
            raise ValueError(text)
        if kind is int:
            return int(text)
        if kind is float:
            value = float(text)
            if value != value or value in (float("inf"), float("-inf")):
                raise ValueError(text)
            return value + 0.0  # (-0 as 0: it had been echoed back as -0.0)
    except ValueError:
        raise UsageError(f"{name} must be a number, got {text[:40]!r}") from None
    if len(text) > 40:
        raise UsageError(f"{name} is too long")
    return text


def _sides(name: str, text: str) -> tuple[float, ...]:
    """1, 2 or 4 numbers (spaces or commas between) for top, right, bottom, left, as in CSS."""
    try:
        return css_sides(text.replace(",", " ").split())
    except UsageError as error:
        raise UsageError(f"{name} {error}") from None


@dataclass(frozen=True)
class InputFile:
    """An uploaded file as stored: where, what, and its hash."""

    role: str
    ext: str
    size: int
    sha256: str
    name: str = ""  # the user's file name, for display only; never a path


@dataclass(frozen=True)
class Job:
    """A job row."""

    id: str
    key_id: str
    state: str
    kind: str
    options: JobOptions
    inputs: dict[str, InputFile]
    progress: float
    result_ext: str | None
    result_sha256: str | None
    error_code: str | None
    error_message: str | None
    attempts: int
    created_at: float
    started_at: float | None
    finished_at: float | None
    deleted_at: float | None = field(default=None)
    notes: tuple[str, ...] = ()  # what the source photo shows in the result (source_advice)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Job:
        inputs = {role: InputFile(**value) for role, value in json.loads(row["inputs"]).items()}
        return cls(
            id=row["id"],
            key_id=row["key_id"],
            state=row["state"],
            kind=row["kind"],
            options=JobOptions.from_json(row["options"]),
            inputs=inputs,
            progress=float(row["progress"]),
            result_ext=row["result_ext"],
            result_sha256=row["result_sha256"],
            error_code=row["error_code"],
            error_message=row["error_message"],
            attempts=int(row["attempts"]),
            created_at=float(row["created_at"]),
            started_at=row["started_at"],
            finished_at=row["finished_at"],
            deleted_at=row["deleted_at"],
            notes=tuple(json.loads(row["notes"])),
        )

    def inputs_sha256(self) -> dict[str, str]:
        return {role: item.sha256 for role, item in self.inputs.items()}


# A job directory with no job row is an upload still arriving (at this server or at
# another on the same data directory) or one a crash cut short: it is removed only
# once nothing in it has changed for this long.
ORPHAN_AGE_S = 3600.0
# A deleted or expired job's row is removed this long after (its audit rows stay, with
# its hashes): kept, every job ever run stayed in the database.
DELETED_KEPT_S = 3600.0
# Downloads whose audit rows wait in memory while the disk is full (see
# JobStore.record_download); past it they go unrecorded.
UNRECORDED_MOST = 10_000
logger = logging.getLogger(__name__)


class JobStore:
    """Jobs in the database and their files on disk.

    Args:
        db: the service database.
        jobs_dir: ``<data>/jobs``.
        owner: this server's id (see :class:`~faceweave.service.instances.InstanceLock`),
            kept with each job it runs; a fresh id by default.
        alive: whether a server id is running now (its jobs are not put back in the
            queue); by default only this store's own ``owner`` is.
    """

    def __init__(
        self,
        db: Database,
        jobs_dir: Path,
        *,
        owner: str | None = None,
        alive: Callable[[str | None], bool] | None = None,
    ) -> None:
        self.db = db
        self.jobs_dir = jobs_dir
        self.owner = owner or secrets.token_hex(8)
        self._alive = alive or (lambda other: other == self.owner)
        # Downloads made while the disk was full, their audit rows written later (see
        # record_download).
        self._unrecorded: list[dict[str, Any]] = []
        self._unrecorded_lock = threading.Lock()
        jobs_dir.mkdir(parents=True, exist_ok=True)

    # --- files ---------------------------------------------------------------------------------

    def job_dir(self, job_id: str) -> Path:
        if not job_id.isalnum():  # ids are hex; never let one walk out of jobs_dir
            raise ValueError(f"bad job id {job_id!r}")
        return self.jobs_dir / job_id

    def input_path(self, job: Job, role: str) -> Path:
        return self.job_dir(job.id) / f"{role}{job.inputs[role].ext}"

    def result_path(self, job_id: str, ext: str) -> Path:
        return self.job_dir(job_id) / f"result{ext}"

    def remove_files(self, job_id: str) -> None:
        shutil.rmtree(self.job_dir(job_id), ignore_errors=True)

    def remove_partial_outputs(self, job_id: str) -> list[str]:
        """Delete the temporary files (``.<name>.<pid>-<random>.tmp``) a run of this job left
        when its process was killed (``kill -9``, a power cut: nothing could clean up);
        called before the job runs again. Returns the names removed."""
        removed = []
        for entry in self.job_dir(job_id).glob(".*.tmp"):
            with contextlib.suppress(OSError):
                entry.unlink()
                removed.append(entry.name)
        return removed

    def remove_orphan_dirs(self, min_age_s: float = ORPHAN_AGE_S) -> list[str]:
        """Delete job directories with no live job in which nothing has changed for
        ``min_age_s`` (an upload cut short by a crash; a younger one may be arriving,
        here or at another server on the same data directory)."""
        live = {row["id"] for row in self.db.query("SELECT id FROM jobs WHERE deleted_at IS NULL")}
        removed = []
        now = time.time()
        for entry in self.jobs_dir.iterdir():
            if not entry.is_dir() or entry.name in live:
                continue
            if now - _last_change(entry) < min_age_s:
                continue
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry.name)
        return removed

    # --- transitions ---------------------------------------------------------------------------

    def create(
        self,
        job_id: str,
        key_id: str,
        kind: str,
        options: JobOptions,
        inputs: dict[str, InputFile],
        *,
        max_active: int,
    ) -> Job:
        """Queue a job whose files are already in :meth:`job_dir`.

        Raises:
            ServiceError: 429 when the key already has ``max_active`` unfinished jobs.
        """
        now = time.time()
        with self.db.transaction() as conn:
            active = conn.execute(
                "SELECT COUNT(*) FROM jobs WHERE key_id = ? AND state IN ('queued', 'running')",
                (key_id,),
            ).fetchone()[0]
            if active >= max_active:
                raise ServiceError(
                    429,
                    "too_many_jobs",
                    f"this key already has {active} unfinished jobs (limit {max_active}); "
                    "wait for some to finish",
                    headers={"Retry-After": "5"},
                )
            conn.execute(
                "INSERT INTO jobs (id, key_id, state, kind, options, inputs, created_at)"
                " VALUES (?, ?, 'queued', ?, ?, ?, ?)",
                (
                    job_id,
                    key_id,
                    kind,
                    json.dumps(asdict(options), sort_keys=True),
                    json.dumps({role: asdict(item) for role, item in inputs.items()}),
                    now,
                ),
            )
            audit.record(
                conn,
                "job.created",
                key_id=key_id,
                job_id=job_id,
                inputs_sha256={role: item.sha256 for role, item in inputs.items()},
                detail={"kind": kind},
            )
        job = self.get(job_id)
        assert job is not None
        return job

    def claim(self, worker: str) -> Job | None:
        """Take the oldest queued job and mark it running; None when the queue is empty."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "UPDATE jobs SET state = 'running', started_at = ?, progress = 0,"
                " attempts = attempts + 1, owner = ?"
                " WHERE id = (SELECT id FROM jobs WHERE state = 'queued' AND deleted_at IS NULL"
                "             ORDER BY created_at, id LIMIT 1)"
                " AND state = 'queued' RETURNING *",
                (time.time(), self.owner),
            ).fetchone()
            if row is None:
                return None
            audit.record(
                conn,
                "job.started",
                key_id=row["key_id"],
                job_id=row["id"],
                detail={"worker": worker, "attempt": row["attempts"]},
            )
        return Job.from_row(row)

    def set_progress(self, job_id: str, progress: float) -> bool:
        """Record progress of a job this server runs; False when it no longer does
        (cancelled, or taken back: see :meth:`requeue_interrupted`)."""
        changed = self.db.execute(
            "UPDATE jobs SET progress = ? WHERE id = ? AND state = 'running' AND owner = ?",
            (min(1.0, max(0.0, float(progress))), job_id, self.owner),
        )
        return bool(changed)

    def is_running(self, job_id: str) -> bool:
        rows = self.db.query("SELECT state FROM jobs WHERE id = ?", (job_id,))
        return bool(rows) and rows[0]["state"] == "running"

    def is_deleted(self, job_id: str) -> bool:
        """Whether the job is gone (deleted, or never was): its files may go too."""
        rows = self.db.query("SELECT deleted_at FROM jobs WHERE id = ?", (job_id,))
        return not rows or rows[0]["deleted_at"] is not None

    def complete(
        self, job: Job, result_ext: str, result_sha256: str, notes: tuple[str, ...] = ()
    ) -> bool:
        """Mark a running job done, with ``notes`` on its source; False (and nothing
        changed) when it was cancelled meanwhile."""
        with self.db.transaction() as conn:
            changed = conn.execute(
                "UPDATE jobs SET state = 'done', progress = 1, finished_at = ?, result_ext = ?,"
                " result_sha256 = ?, notes = ? WHERE id = ? AND state = 'running' AND owner = ?",
                (
                    time.time(),
                    result_ext,
                    result_sha256,
                    json.dumps(list(notes)),
                    job.id,
                    self.owner,
                ),
            ).rowcount
            if changed:
                audit.record(
                    conn,
                    "job.completed",
                    key_id=job.key_id,
                    job_id=job.id,
                    inputs_sha256=job.inputs_sha256(),
                    output_sha256=result_sha256,
                )
        return bool(changed)

    def fail(self, job: Job, code: str, message: str) -> bool:
        """Mark a running job failed; False when it was cancelled meanwhile."""
        with self.db.transaction() as conn:
            changed = conn.execute(
                "UPDATE jobs SET state = 'failed', finished_at = ?, error_code = ?,"
                " error_message = ? WHERE id = ? AND state = 'running' AND owner = ?",
                (time.time(), code, message[:1000], job.id, self.owner),
            ).rowcount
            if changed:
                audit.record(
                    conn,
                    "job.failed",
                    key_id=job.key_id,
                    job_id=job.id,
                    inputs_sha256=job.inputs_sha256(),
                    detail={"code": code, "message": message[:200]},
                )
        return bool(changed)

    def requeue_interrupted(self) -> list[str]:
        """Put jobs left ``running`` by a server that is gone (it died under them) back
        in the queue; a running server's jobs stay its own. Returns their ids."""
        owners = [
            row["owner"]
            for row in self.db.query("SELECT DISTINCT owner FROM jobs WHERE state = 'running'")
        ]
        gone = [owner for owner in owners if not self._alive(owner)]
        requeued: list[str] = []
        for owner in gone:
            with self.db.transaction() as conn:
                rows = conn.execute(
                    "UPDATE jobs SET state = 'queued', progress = 0, started_at = NULL,"
                    " owner = NULL WHERE state = 'running' AND owner IS ? RETURNING id, key_id",
                    (owner,),
                ).fetchall()
                for row in rows:
                    audit.record(conn, "job.requeued", key_id=row["key_id"], job_id=row["id"])
            requeued.extend(row["id"] for row in rows)
        return requeued

    def requeue(self, job: Job, reason: str) -> bool:
        """Put a running job back in the queue (its run could not finish for a reason of
        the server's: a full disk); False when it was cancelled meanwhile."""
        with self.db.transaction() as conn:
            changed = conn.execute(
                "UPDATE jobs SET state = 'queued', progress = 0, started_at = NULL, owner = NULL"
                " WHERE id = ? AND state = 'running' AND owner = ?",
                (job.id, self.owner),
            ).rowcount
            if changed:
                audit.record(
                    conn,
                    "job.requeued",
                    key_id=job.key_id,
                    job_id=job.id,
                    detail={"reason": reason},
                )
        return bool(changed)

    def delete(self, job_id: str, key_id: str) -> Job | None:
        """Cancel the job if unfinished, forget it and delete its files; None if not found.

        On a full disk the database may have no room to record it: the job's files are
        then deleted first (the way to make room is to delete jobs), and it is tried
        again.
        """
        try:
            return self._delete(job_id, key_id)
        except (sqlite3.Error, OSError) as exc:
            if not disk_full(exc) or self.get(job_id, key_id) is None:
                raise
        self.remove_files(job_id)
        return self._delete(job_id, key_id)

    def _delete(self, job_id: str, key_id: str) -> Job | None:
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT * FROM jobs WHERE id = ? AND key_id = ? AND deleted_at IS NULL",
                (job_id, key_id),
            ).fetchone()
            if row is None:
                return None
            job = Job.from_row(row)
            now = time.time()
            if job.state in ("queued", "running"):
                conn.execute(
                    "UPDATE jobs SET state = 'cancelled', finished_at = ? WHERE id = ?",
                    (now, job_id),
                )
                audit.record(
                    conn,
                    "job.cancelled",
                    key_id=key_id,
                    job_id=job_id,
                    detail={"was": job.state},
                )
            conn.execute("UPDATE jobs SET deleted_at = ? WHERE id = ?", (now, job_id))
            audit.record(
                conn,
                "job.deleted",
                key_id=key_id,
                job_id=job_id,
                inputs_sha256=job.inputs_sha256(),
                output_sha256=job.result_sha256,
            )
        self.remove_files(job_id)
        return job

    def expire(self, finished_before: float) -> list[str]:
        """Forget finished jobs older than ``finished_before`` and delete their files."""
        with self.db.transaction() as conn:
            rows = conn.execute(
                "UPDATE jobs SET deleted_at = ? WHERE deleted_at IS NULL"
                " AND state IN ('done', 'failed', 'cancelled') AND finished_at < ?"
                " RETURNING id, key_id, result_sha256",
                (time.time(), finished_before),
            ).fetchall()
            for row in rows:
                audit.record(
                    conn,
                    "job.expired",
                    key_id=row["key_id"],
                    job_id=row["id"],
                    output_sha256=row["result_sha256"],
                )
        for row in rows:
            self.remove_files(row["id"])
        return [row["id"] for row in rows]

    def purge_deleted(self, deleted_before: float) -> int:
        """Remove the rows of jobs deleted (or expired) before ``deleted_before``, in a
        final state (a deleted job is cancelled first); returns how many."""
        with self.db.transaction() as conn:
            done = conn.execute(
                "DELETE FROM jobs WHERE deleted_at IS NOT NULL AND deleted_at < ?"
                f" AND state IN ({', '.join('?' * len(FINAL_STATES))})",
                (deleted_before, *FINAL_STATES),
            )
            return int(done.rowcount)

    def record_download(self, job: Job, key_id: str) -> None:
        """Audit a download. While the disk is full the row waits in memory (up to
        UNRECORDED_MOST, with its time) for a later download to write it: a full disk
        had refused results with 507, and a client could not save them before deleting
        jobs to make room."""
        row = {
            "at": time.time(),
            "key_id": key_id,
            "job_id": job.id,
            "inputs_sha256": job.inputs_sha256(),
            "output_sha256": job.result_sha256,
        }
        with self._unrecorded_lock:
            rows = [*self._unrecorded, row]
            try:
                with self.db.transaction() as conn:
                    for waiting in rows:
                        audit.record(conn, "result.downloaded", **waiting)
            except (OSError, sqlite3.Error) as exc:
                if not disk_full(exc):
                    raise
                if len(self._unrecorded) < UNRECORDED_MOST:
                    self._unrecorded.append(row)
                logger.warning(
                    "disk full: %d downloads wait to be written to the audit log",
                    len(self._unrecorded),
                )
            else:
                self._unrecorded.clear()

    # --- reads ---------------------------------------------------------------------------------

    def get(self, job_id: str, key_id: str | None = None) -> Job | None:
        """A live job; with ``key_id``, only if that key owns it (others see nothing)."""
        sql = "SELECT * FROM jobs WHERE id = ? AND deleted_at IS NULL"
        params: tuple[object, ...] = (job_id,)
        if key_id is not None:
            sql += " AND key_id = ?"
            params += (key_id,)
        rows = self.db.query(sql, params)
        return Job.from_row(rows[0]) if rows else None

    def list(
        self, key_id: str, *, state: str | None = None, limit: int = 50, before: float | None = None
    ) -> list[Job]:
        """A key's live jobs, newest first."""
        sql = "SELECT * FROM jobs WHERE key_id = ? AND deleted_at IS NULL"
        params: list[object] = [key_id]
        if state is not None:
            sql += " AND state = ?"
            params.append(state)
        if before is not None:
            sql += " AND created_at < ?"
            params.append(before)
        sql += " ORDER BY created_at DESC, id DESC LIMIT ?"
        params.append(limit)
        return [Job.from_row(row) for row in self.db.query(sql, tuple(params))]

    def count(self, state: str) -> int:
        rows = self.db.query(
            "SELECT COUNT(*) AS n FROM jobs WHERE state = ? AND deleted_at IS NULL", (state,)
        )
        return int(rows[0]["n"])


def _last_change(directory: Path) -> float:
    """When ``directory`` or a file in it last changed (Unix seconds; now if it is gone)."""
    try:
        latest = directory.stat().st_mtime
        with os.scandir(directory) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    latest = max(latest, entry.stat(follow_symlinks=False).st_mtime)
    except OSError:
        return time.time()
    return latest
