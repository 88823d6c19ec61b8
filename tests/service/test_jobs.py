"""The durable queue without HTTP: atomic claims, crash recovery, cancellation, retention."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from faceweave.errors import OutputError, UsageError
from faceweave.processors.swap import SwapOptions
from faceweave.service.auth import create_key, load_pepper
from faceweave.service.db import Database, read_rows
from faceweave.service.errors import ServiceError
from faceweave.service.jobs import DELETED_KEPT_S, InputFile, JobOptions, JobStore
from faceweave.service.worker import Sweeper

INPUTS = {
    "source": InputFile("source", ".png", 10, "a" * 64, "s.png"),
    "target": InputFile("target", ".png", 10, "b" * 64, "t.png"),
}


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    db = Database(tmp_path / "faceweave.db")
    return JobStore(db, tmp_path / "jobs")


def _key(store: JobStore) -> str:
    record, _ = create_key(store.db, load_pepper(store.jobs_dir.parent / "pepper.key"), "k")
    return record.id


def _queue(store: JobStore, key_id: str, n: int) -> list[str]:
    ids = []
    for index in range(n):
        job_id = f"{index:032x}"
        store.job_dir(job_id).mkdir(parents=True)
        store.create(job_id, key_id, "image", JobOptions(), INPUTS, max_active=10_000)
        ids.append(job_id)
    return ids


def test_database_is_in_wal_mode(store: JobStore) -> None:
    assert store.db.query("PRAGMA journal_mode")[0][0] == "wal"


def _open_files(path: Path) -> int:
    """This process's descriptors open on ``path`` (or its WAL and shared-memory files)."""
    fds = Path("/proc/self/fd")
    count = 0
    for fd in fds.iterdir():
        try:
            count += str(fd.readlink()).startswith(str(path.resolve()))
        except OSError:  # closed meanwhile
            pass
    return count


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_a_threads_connection_closes_when_the_thread_ends(tmp_path: Path) -> None:
    """The web server's worker threads come and go (they end after a while idle): each
    one's connection goes with it. Kept, a server's descriptors grew without end."""
    db = Database(tmp_path / "faceweave.db")
    before = _open_files(db.path)
    counts = []
    for _ in range(4):
        threads = [
            threading.Thread(target=lambda: db.query("SELECT count(*) FROM jobs"))
            for _ in range(10)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        counts.append(_open_files(db.path))
    # (SQLite keeps a few closed connections' descriptors to reuse, while another
    # connection holds its locks.) Kept open, 30 threads' connections left 30 or more.
    assert counts[-1] - counts[0] < 10, counts
    # close() still closes those of threads that live on.
    started, stop = threading.Event(), threading.Event()

    def lives_on() -> None:
        db.query("SELECT 1")
        started.set()
        stop.wait(10)

    thread = threading.Thread(target=lives_on)
    thread.start()
    started.wait(10)
    assert _open_files(db.path) > before
    db.close()
    assert _open_files(db.path) == 0
    stop.set()
    thread.join()


CLOSE_WHILE_QUERIED = """
import sys, threading, time
from pathlib import Path
from faceweave.errors import OutputError
from faceweave.service.db import Database

for trial in range(5):
    db = Database(Path(sys.argv[1]) / f"t{trial}.db")
    stop, seen = threading.Event(), set()

    def user():
        while not stop.is_set():
            try:
                db.query("SELECT count(*) FROM audit_log")
                with db.transaction() as conn:
                    conn.execute("SELECT count(*) FROM jobs")
            except Exception as exc:
                seen.add(type(exc).__name__)
                return

    threads = [threading.Thread(target=user) for _ in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(0.1)
    db.close()
    stop.set()
    for thread in threads:
        thread.join()
    print(sorted(seen))
"""


def test_closing_the_database_while_threads_query_it_waits_for_them(tmp_path: Path) -> None:
    """A server stopping closes its database while a job's thread may still write its
    progress: each connection closes once its statement is done, and the threads are
    told the database is closed (closed mid-statement, the process crashed)."""
    done = subprocess.run(
        [sys.executable, "-c", CLOSE_WHILE_QUERIED, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:5] == ["['OutputError']"] * 5, done.stdout


def test_a_transaction_under_way_ends_before_another_thread_closes_the_database(
    tmp_path: Path,
) -> None:
    """Its own queries inside it still run, and it commits; closing inside one's own
    transaction is refused (it would wait for itself)."""
    db = Database(tmp_path / "faceweave.db")
    db.execute("CREATE TABLE t (v INTEGER)")
    inside, closed = threading.Event(), threading.Event()
    closer = threading.Thread(target=lambda: (inside.wait(10), db.close(), closed.set()))
    closer.start()
    with db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES (1)")
        inside.set()
        time.sleep(0.2)  # the closer is waiting now
        assert not closed.is_set()
        assert db.query("SELECT count(*) FROM t")[0][0] == 1
        with pytest.raises(OutputError, match="inside a transaction"):
            db.close()
    closer.join(10)
    assert closed.is_set()
    with pytest.raises(OutputError, match="closed"):
        db.query("SELECT 1")
    assert read_rows(db.path, "SELECT count(*) FROM t")[0][0] == 1


def test_concurrent_claims_never_share_a_job(store: JobStore, tmp_path: Path) -> None:
    ids = _queue(store, _key(store), 60)
    # Separate Database objects: as separate processes would, each with its own connections.
    claimed: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        db = Database(tmp_path / "faceweave.db")
        own = JobStore(db, tmp_path / "jobs")
        while (job := own.claim("w")) is not None:
            with lock:
                claimed.append(job.id)
        db.close()

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(claimed) == sorted(ids)  # every job once, none twice


def test_claims_are_oldest_first_and_running_jobs_are_requeued(
    store: JobStore, tmp_path: Path
) -> None:
    first, second = _queue(store, _key(store), 2)
    job = store.claim("w")
    assert job is not None and job.id == first and job.state == "running" and job.attempts == 1
    assert store.requeue_interrupted() == []  # its own server runs it
    # The server restarts (a new store, a new owner): the job it ran goes back.
    restarted = JobStore(Database(tmp_path / "faceweave.db"), tmp_path / "jobs")
    assert restarted.requeue_interrupted() == [first]
    again = restarted.claim("w")
    assert again is not None and again.id == first and again.attempts == 2
    assert store.get(second) is not None and store.get(second).state == "queued"  # type: ignore[union-attr]
    # The old run, still going somewhere, can no longer record anything for it.
    assert not store.set_progress(first, 0.5)
    assert not store.complete(job, ".png", "c" * 64)
    assert not store.fail(job, "no_face", "no face")
    assert restarted.set_progress(first, 0.5)


def test_a_living_servers_jobs_stay_its_own(tmp_path: Path) -> None:
    """Two servers on one data directory: one starting (or sweeping) puts back in the
    queue only the jobs of a server that has stopped, told by its lock."""
    from faceweave.service.instances import InstanceLock

    instances = tmp_path / "instances"
    first_lock, second_lock = InstanceLock(instances), InstanceLock(instances)
    first = JobStore(
        Database(tmp_path / "faceweave.db"),
        tmp_path / "jobs",
        owner=first_lock.id,
        alive=first_lock.alive,
    )
    second = JobStore(
        Database(tmp_path / "faceweave.db"),
        tmp_path / "jobs",
        owner=second_lock.id,
        alive=second_lock.alive,
    )
    a, b = _queue(first, _key(first), 2)
    assert first.claim("w") is not None and second.claim("w") is not None
    assert first.requeue_interrupted() == [] and second.requeue_interrupted() == []
    assert first_lock.alive(second_lock.id) and second_lock.alive(first_lock.id)
    second_lock.release()  # the second server stops (as its lock goes when it dies)
    assert not first_lock.alive(second_lock.id)
    # The first server's sweeper puts the second's job back and wakes a worker.
    woken: list[list[str]] = []
    sweeper = Sweeper(first, retention_hours=0, interval_s=60, on_requeued=woken.append)
    assert sweeper.recover() == [b] and woken == [[b]]
    assert first.get(a).state == "running"  # type: ignore[union-attr]
    assert first.get(b).state == "queued"  # type: ignore[union-attr]
    assert not first_lock.alive(None) and not first_lock.alive("../x")
    first_lock.release()


def test_a_servers_lock_goes_with_its_process(tmp_path: Path) -> None:
    """Killed (SIGKILL), a server's lock is let go by the kernel: its jobs go back."""
    import os
    import signal
    import subprocess
    import sys

    from faceweave.service.instances import InstanceLock

    instances = tmp_path / "instances"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from pathlib import Path\n"
            "from faceweave.service.instances import InstanceLock\n"
            f"lock = InstanceLock(Path({str(instances)!r}))\n"
            "print(lock.id, flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        other = child.stdout.readline().strip()
        mine = InstanceLock(instances)
        assert mine.alive(other)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        assert not mine.alive(other)
        assert mine.forget_dead() == [other]
        assert sorted(p.stem for p in instances.iterdir()) == [mine.id]
        mine.release()
        assert list(instances.iterdir()) == []
    finally:
        child.kill()
        child.wait(10)
        if child.stdout is not None:
            child.stdout.close()


def test_complete_fail_and_cancel_are_guarded_by_state(store: JobStore) -> None:
    key_id = _key(store)
    a, b = _queue(store, key_id, 2)
    job_a = store.claim("w")
    assert job_a is not None
    assert store.set_progress(a, 0.5)
    assert store.delete(a, key_id) is not None  # cancelled while running
    assert not store.set_progress(a, 0.6)
    assert not store.complete(job_a, ".png", "c" * 64)
    assert store.get(a) is None
    job_b = store.claim("w")
    assert job_b is not None
    assert store.fail(job_b, "no_face", "no face found")
    assert not store.complete(job_b, ".png", "c" * 64)  # failed stays failed
    failed = store.get(b)
    assert failed is not None and failed.state == "failed" and failed.error_code == "no_face"


def test_other_keys_do_not_see_a_job(store: JobStore) -> None:
    owner, other = _key(store), _key(store)
    (job_id,) = _queue(store, owner, 1)
    assert store.get(job_id, owner) is not None
    assert store.get(job_id, other) is None
    assert store.delete(job_id, other) is None
    assert store.list(other) == []


def test_active_job_cap(store: JobStore) -> None:
    key_id = _key(store)
    store.job_dir("f" * 32).mkdir(parents=True)
    store.create("f" * 32, key_id, "image", JobOptions(), INPUTS, max_active=1)
    with pytest.raises(ServiceError) as caught:
        store.create("e" * 32, key_id, "image", JobOptions(), INPUTS, max_active=1)
    assert caught.value.status == 429


def test_retention_sweep_deletes_old_finished_jobs(store: JobStore) -> None:
    key_id = _key(store)
    old, fresh, queued = _queue(store, key_id, 3)
    for job_id in (old, fresh):
        job = store.claim("w")
        assert job is not None and job.id == job_id
        store.result_path(job_id, ".png").write_bytes(b"x")
        assert store.complete(job, ".png", "d" * 64)
    store.db.connection().execute(
        "UPDATE jobs SET finished_at = ? WHERE id = ?", (time.time() - 7200, old)
    )
    sweeper = Sweeper(store, retention_hours=1.0, interval_s=60)
    assert sweeper.sweep() == [old]
    assert store.get(old) is None and not store.job_dir(old).exists()
    assert store.get(fresh) is not None and store.result_path(fresh, ".png").exists()
    assert store.get(queued) is not None
    assert Sweeper(store, retention_hours=0, interval_s=60).sweep() == []


def test_deleted_jobs_rows_go_an_hour_after_their_audit_rows_stay(store: JobStore) -> None:
    """A deleted or expired job's row is removed once DELETED_KEPT_S has passed, with
    retention or without: every job ever run had stayed in the database."""
    key_id = _key(store)
    gone, recent, kept = _queue(store, key_id, 3)
    for job_id in (gone, recent):
        assert store.delete(job_id, key_id) is not None
    store.db.connection().execute(
        "UPDATE jobs SET deleted_at = ? WHERE id = ?", (time.time() - DELETED_KEPT_S - 60, gone)
    )
    assert Sweeper(store, retention_hours=0, interval_s=60).sweep() == []
    rows = {row["id"] for row in store.db.query("SELECT id FROM jobs")}
    assert rows == {recent, kept}
    audited = {row["job_id"] for row in store.db.query("SELECT job_id FROM audit_log")}
    assert gone in audited
    assert store.get(kept) is not None


def test_orphan_directories_are_removed_once_old(store: JobStore) -> None:
    """A job directory with no job is an upload still arriving (here or at another
    server on the same data directory) until nothing in it has changed for an hour."""
    import os

    (job_id,) = _queue(store, _key(store), 1)
    old, arriving = store.jobs_dir / ("9" * 32), store.jobs_dir / ("8" * 32)
    for folder in (old, arriving):
        folder.mkdir()
        (folder / "source.upload").write_bytes(b"x")
    hour_ago = time.time() - 3700
    for path in (old, old / "source.upload", arriving):
        os.utime(path, (hour_ago, hour_ago))
    assert store.remove_orphan_dirs() == ["9" * 32]  # the other's file is being written
    assert arriving.is_dir() and store.job_dir(job_id).is_dir()
    assert store.remove_orphan_dirs(min_age_s=0) == ["8" * 32]


def test_job_ids_cannot_leave_the_jobs_dir(store: JobStore) -> None:
    with pytest.raises(ValueError):
        store.job_dir("../etc")


def test_options_from_form() -> None:
    options = JobOptions.from_form({"fusion": "0.25", "mask_eyes": "on", "max_faces": "3"})
    assert (options.fusion, options.mask_eyes, options.max_faces) == (0.25, True, 3)
    assert options.mask_glasses is True  # the default
    assert JobOptions.from_form({"mask_glasses": "false"}).mask_glasses is False
    zero = JobOptions.from_form({"fusion": "-0"}).fusion
    assert zero == 0.0 and str(zero) == "0.0"  # (it had been echoed back as -0.0)
    assert JobOptions.from_form({"mask_lips": "true"}).mask_lips is True
    assert JobOptions().mask_hands is False
    hands = JobOptions.from_form({"mask_hands": "true"})
    assert hands.mask_hands is True
    from faceweave.processors.swap import SwapOptions

    assert SwapOptions.from_settings(hands).mask_hands is True
    for bad in (
        {"fusion": "-1"},
        {"max_faces": "1.5"},
        {"quality": "0"},
        {"nope": "1"},
        {"light": "2"},
        {"shape": "-0.5"},
        {"mask_padding": "0 0 0.2"},
        {"mask_padding": "chin"},
        {"mask_padding": "0.5 0 0.5 0"},
        {"feather": "0.9"},
        {"max_faces": "1_0"},  # Python reads 10
    ):
        with pytest.raises(UsageError):
            JobOptions.from_form(bad)


def test_a_fraction_for_a_count_is_named_as_such() -> None:
    with pytest.raises(UsageError, match="max_faces must be a whole number, got '1.5'"):
        JobOptions.from_form({"max_faces": "1.5"})
    with pytest.raises(UsageError, match="quality must be a whole number, got 'high'"):
        JobOptions.from_form({"quality": "high"})
    assert JobOptions.from_form({"max_faces": "+2"}).max_faces == 2


def test_trim_options_say_the_range_they_take() -> None:
    """1e9 seconds is "0 or more" yet refused: the message names the upper bound."""
    for name in ("trim_start", "trim_end"):
        for text in ("1e9", "-1"):
            with pytest.raises(UsageError, match=f"{name} must be 0 .*less than 1e9 seconds"):
                JobOptions.from_form({name: text})
    assert JobOptions.from_form({"trim_end": "999999999"}).trim_end == 999999999


def test_mask_padding_from_a_form_and_back_from_storage() -> None:
    options = JobOptions.from_form({"mask_padding": "0 0 0.2 0", "feather": "0.05"})
    assert options.mask_padding == (0.0, 0.0, 0.2, 0.0) and options.feather == 0.05
    assert JobOptions.from_form({"mask_padding": "0.1"}).mask_padding == (0.1,) * 4
    assert JobOptions.from_form({"mask_padding": "0.1, 0.2"}).mask_padding == (0.1, 0.2) * 2
    # Stored as JSON (a list), read back equal.
    assert JobOptions.from_json(json.dumps(asdict(options))) == options
    assert SwapOptions.from_settings(options).mask_padding == (0.0, 0.0, 0.2, 0.0)


def test_look_options_reach_the_engine_with_its_defaults() -> None:
    """The swap settings a job shares with the engine default to the engine's own,
    and a job's values reach it (the worker builds SwapOptions.from_settings)."""
    from dataclasses import fields

    from faceweave.processors.swap import SwapOptions

    engine = SwapOptions()
    shared = [f.name for f in fields(JobOptions) if f.name in SwapOptions.__dataclass_fields__]
    assert {"fusion", "color", "blend", "gaze", "detail", "light", "shape", "mask_eyes"} <= set(
        shared
    )
    assert {"mask_lips", "mask_hands"} <= set(shared)
    for name in shared:
        assert getattr(JobOptions(), name) == getattr(engine, name), name
    options = JobOptions.from_form({"light": "0.9", "shape": "0.2"})
    swap = SwapOptions.from_settings(options)
    assert (swap.light, swap.shape) == (0.9, 0.2)


def test_version_1_database_gains_job_notes(tmp_path: Path) -> None:
    """A database written by the first schema is migrated in place: its jobs keep
    everything and read with no notes; a job completed afterwards keeps its notes."""
    import sqlite3

    from faceweave.service import db as db_module

    path = tmp_path / "faceweave.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in db_module._split_statements(db_module._SCHEMA_V1):
        conn.execute(statement)
    conn.execute("PRAGMA user_version=1")
    conn.close()
    store = JobStore(Database(path), tmp_path / "jobs")
    assert store.db.query("PRAGMA user_version")[0][0] == db_module.SCHEMA_VERSION == 3
    key_id = _key(store)
    first, second = _queue(store, key_id, 2)
    old = store.claim("w")
    assert old is not None and old.id == first and old.notes == ()
    assert store.complete(old, ".png", "c" * 64)
    job = store.claim("w")
    assert job is not None and job.id == second
    assert store.complete(job, ".png", "d" * 64, ("source face wears glasses: ...",))
    notes = {j.id: j.notes for j in store.list(key_id)}
    assert notes == {first: (), second: ("source face wears glasses: ...",)}


def test_schema_newer_than_the_code_is_refused(tmp_path: Path) -> None:
    from faceweave.errors import OutputError

    db = Database(tmp_path / "faceweave.db")
    db.connection().execute("PRAGMA user_version=99")
    db.close()
    with pytest.raises(OutputError, match="newer"):
        Database(tmp_path / "faceweave.db")


def test_a_server_starting_beside_another_keeps_its_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two servers starting at once: one's sweep of dead servers' lock files, run
    between the other's creating its file and locking it, had removed that file, and
    the other then read as dead to every peer."""
    import faceweave.service.instances as instances

    directory = tmp_path / "instances"
    other = instances.InstanceLock(directory)
    real = instances.fcntl.flock

    def racing(fd: int, operation: int) -> None:
        other.forget_dead()  # the other server's start-up, at the worst moment
        real(fd, operation)

    monkeypatch.setattr(instances.fcntl, "flock", racing)
    mine = instances.InstanceLock(directory)
    monkeypatch.setattr(instances.fcntl, "flock", real)
    assert mine.path.exists() and other.alive(mine.id)
    assert sorted(p.name for p in directory.iterdir()) == sorted(
        [f"{mine.id}.lock", f"{other.id}.lock"]
    )
    mine.release()
    other.release()
