"""Crash safety: kill -9 the real server 3 times mid-job during a 20-job run; after the
restarts every job completes exactly once."""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from PIL import Image

from faceweave.service import audit
from faceweave.service.db import Database
from tests.service.conftest import auth, make_key, submit, wait_for

pytestmark = pytest.mark.slow

JOBS = 20
KILLS = 3


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """``python -m faceweave.service`` in a subprocess."""

    def __init__(self, data_dir: Path, log: Path, workers: int = 1) -> None:
        self.data_dir = data_dir
        self.log = log
        self.workers = workers
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> None:
        command = [
            sys.executable,
            "-m",
            "faceweave.service",
            "--data",
            str(self.data_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            str(self.workers),
            "--no-preview",
            "--log-level",
            "warning",
            "--rate-limit",
            "1000",
            "--rate-burst",
            "1000",
        ]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log.read_text()[-2000:]
            try:
                if httpx.get(self.url + "/healthz", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"server did not start: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = Server(tmp_path / "data", tmp_path / "server.log")
    yield running
    running.stop()


def _jpeg(rgb: np.ndarray, size: int) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(rgb).resize((size, size)).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def _wait_until_one_runs(client: httpx.Client, ids: list[str]) -> list[str]:
    """Poll until a job is running (so the kill lands mid-job); returns the running ids.

    One list call reads every state at once: polling job by job took long enough for a
    job seen running to finish before the kill.
    """
    deadline = time.monotonic() + 60
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        listed = client.get("/v1/jobs").json()["jobs"]
        states = {job["id"]: job["state"] for job in listed if job["id"] in ids}
        running = [job_id for job_id, state in states.items() if state == "running"]
        if running:
            return running
        time.sleep(0.01)
    raise AssertionError(f"no job started running: {states}")


def test_kill_9_three_times_during_20_jobs_loses_nothing_and_runs_nothing_twice(
    server: Server, astronaut_rgb: np.ndarray, grace_hopper_rgb: np.ndarray
) -> None:
    key = make_key(server.data_dir, "durable")
    server.start()
    # Large targets (PNG out, Poisson) make each job take long enough to be killed mid-way.
    source = _jpeg(astronaut_rgb, 512)
    target = _jpeg(grace_hopper_rgb, 2000)
    ids: list[str] = []
    # (job seen running, wall time of the kill that followed)
    killed_running: list[tuple[str, float]] = []
    running: list[str] = []
    with httpx.Client(base_url=server.url, headers=auth(key), timeout=30) as client:
        for _ in range(JOBS):
            response = client.post(
                "/v1/jobs",
                files={"source": ("s.jpg", source), "target": ("t.jpg", target)},
                data={"output_format": "png", "blend": "poisson"},
            )
            assert response.status_code == 202, response.text
            ids.append(response.json()["id"])
        running = _wait_until_one_runs(client, ids)
    for kill in range(KILLS):
        killed_at = time.time()
        server.kill()
        killed_running += [(job_id, killed_at) for job_id in running]
        server.start()
        if kill < KILLS - 1:
            with httpx.Client(base_url=server.url, headers=auth(key), timeout=30) as client:
                running = _wait_until_one_runs(client, ids)

    with httpx.Client(base_url=server.url, headers=auth(key), timeout=30) as client:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            jobs = {job["id"]: job for job in client.get("/v1/jobs").json()["jobs"]}
            assert set(jobs) == set(ids)
            if all(job["state"] == "done" for job in jobs.values()):
                break
            assert all(job["state"] in ("queued", "running", "done") for job in jobs.values()), jobs
            time.sleep(0.2)
        else:
            raise AssertionError(f"jobs did not finish: {[j['state'] for j in jobs.values()]}")
        for job_id in ids:
            assert client.get(f"/v1/jobs/{job_id}/result").status_code == 200
    server.stop()

    db = Database(server.data_dir / "faceweave.db")
    try:
        conn = db.connection()
        for job_id in ids:
            completed = audit.entries(conn, job_id=job_id, action="job.completed")
            assert len(completed) == 1, job_id  # exactly once
        requeued = {row.job_id for row in audit.entries(conn, action="job.requeued")}
        # A job seen running was killed mid-way and run again, unless it finished in
        # the moment between that look and the kill (its completion is then older).
        for job_id, killed_at in killed_running:
            if job_id not in requeued:
                (done,) = audit.entries(conn, job_id=job_id, action="job.completed")
                assert done.at <= killed_at, job_id
            else:
                assert jobs[job_id]["attempts"] >= 2
        assert requeued & {job_id for job_id, _ in killed_running}  # some kill landed mid-job
    finally:
        db.close()
    for job_id in ids:
        files = sorted(p.name for p in (server.data_dir / "jobs" / job_id).iterdir())
        assert files == ["result.png", "source.jpg", "target.jpg"], files  # no temp files left


def test_a_job_run_again_first_removes_what_its_killed_run_left(
    make_client: Any, tmp_path: Path, source_png: bytes, target_jpeg: bytes
) -> None:
    """A server killed while writing a result (``kill -9``: nothing could clean up)
    leaves ``.result.<ext>.<pid>-<random>.tmp``; the job's next run removes it."""
    data_dir = tmp_path / "data"
    key = make_key(data_dir, "k")
    client = make_client(data_dir=data_dir, workers=0)  # nothing runs: the job stays queued
    response = submit(client, key, source_png, target_jpeg)
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    client.__exit__(None, None, None)
    job_dir = data_dir / "jobs" / job_id
    (job_dir / ".result.png.0badc0de.tmp").write_bytes(b"half a result")
    client = make_client(data_dir=data_dir, workers=1)
    assert wait_for(client, job_id, key)["state"] == "done"
    assert not list(job_dir.glob(".*.tmp")), sorted(p.name for p in job_dir.iterdir())


def test_two_servers_on_one_data_directory_leave_each_others_jobs_alone(
    tmp_path: Path, astronaut_rgb: np.ndarray, grace_hopper_rgb: np.ndarray
) -> None:
    """One server takes the requests (no workers), another runs the jobs. Restarting
    the first while the second runs a job leaves that job alone (it had been put back
    in the queue, the runner had seen it "cancelled" and deleted its inputs, and it
    failed on its next run); killing the runner puts its job back once a runner starts."""
    data_dir = tmp_path / "data"
    front = Server(data_dir, tmp_path / "front.log", workers=0)
    runner = Server(data_dir, tmp_path / "runner.log", workers=1)
    key = make_key(data_dir, "two")
    source = _jpeg(astronaut_rgb, 512)
    target = _jpeg(grace_hopper_rgb, 2000)
    try:
        runner.start()
        front.start()
        with httpx.Client(base_url=front.url, headers=auth(key), timeout=30) as client:
            ids = []
            for _ in range(3):
                response = client.post(
                    "/v1/jobs",
                    files={"source": ("s.jpg", source), "target": ("t.jpg", target)},
                    data={"output_format": "png", "blend": "poisson"},
                )
                assert response.status_code == 202, response.text
                ids.append(response.json()["id"])
            _wait_until_one_runs(client, ids)
        front.stop()
        front.start()  # while the runner runs a job
        with httpx.Client(base_url=front.url, headers=auth(key), timeout=30) as client:
            running = _wait_until_one_runs(client, ids)
        runner.kill()  # mid-job: this one goes back to the queue when a runner starts
        runner.start()
        with httpx.Client(base_url=front.url, headers=auth(key), timeout=30) as client:
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline:
                jobs = {job["id"]: job for job in client.get("/v1/jobs").json()["jobs"]}
                if all(job["state"] == "done" for job in jobs.values()):
                    break
                assert all(
                    job["state"] in ("queued", "running") or job["state"] == "done"
                    for job in jobs.values()
                ), jobs
                time.sleep(0.2)
            else:
                raise AssertionError(f"jobs did not finish: {jobs}")
    finally:
        front.stop()
        runner.stop()
    db = Database(data_dir / "faceweave.db")
    try:
        conn = db.connection()
        requeued = {row.job_id for row in audit.entries(conn, action="job.requeued")}
        for job_id in ids:
            assert len(audit.entries(conn, job_id=job_id, action="job.completed")) == 1
            assert not audit.entries(conn, job_id=job_id, action="job.failed")
        # Only the job the killed runner ran went back; the front's restart took none.
        assert requeued <= set(running), (requeued, running)
    finally:
        db.close()
    # Each server removed its lock when it stopped.
    assert list((data_dir / "instances").iterdir()) == []
