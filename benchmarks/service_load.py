"""Load test for the faceweave service: many concurrent clients, every job must complete.

Starts ``python -m faceweave.service`` on 127.0.0.1 with a fresh data folder under
``out/bench/service_load/`` (or uses ``--url`` with ``--key``), creates one API key
per client, and runs ``--clients`` threads that together submit ``--jobs`` small
image jobs (a 192 px astronaut source onto a 192 px Grace Hopper) and poll each job
until it is finished. Meanwhile every status call (``GET /v1/jobs/{id}``) is timed.

Reports: jobs done / failed / lost, wall time, jobs per second, the latency of
status calls and submissions (median, p95, p99, max), and, for a local server, the
audit log's ``job.completed`` rows per job (must be exactly 1).

Example:
    python benchmarks/service_load.py                    # 50 clients, 200 jobs
    python benchmarks/service_load.py --clients 10 --jobs 20 --workers 2
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from PIL import Image

REPO_ROOT = Path(__file__).resolve().parents[1]
OUT = REPO_ROOT / "out" / "bench" / "service_load"
POLL_S = 0.5


def _images(size: int) -> tuple[bytes, bytes]:
    from matplotlib import cbook
    from skimage import data

    with cbook.get_sample_data("grace_hopper.jpg") as fh:
        hopper = Image.open(fh).convert("RGB")
    astronaut = Image.fromarray(np.asarray(data.astronaut()))
    out = []
    for image in (astronaut, hopper):
        buffer = io.BytesIO()
        image.resize((size, size)).save(buffer, format="JPEG", quality=90)
        out.append(buffer.getvalue())
    return out[0], out[1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]

    return {
        "n": len(values),
        "median_ms": round(statistics.median(values) * 1000, 1),
        "p95_ms": round(at(0.95) * 1000, 1),
        "p99_ms": round(at(0.99) * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }


def _client(
    url: str, key: str, n_jobs: int, source: bytes, target: bytes, results: dict[str, Any]
) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    status_times: list[float] = []
    submit_times: list[float] = []
    finished: dict[str, str] = {}
    errors: list[str] = []
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        pending: list[str] = []
        for _ in range(n_jobs):
            began = time.perf_counter()
            response = client.post(
                "/v1/jobs", files={"source": ("s.jpg", source), "target": ("t.jpg", target)}
            )
            submit_times.append(time.perf_counter() - began)
            if response.status_code != 202:
                errors.append(f"submit {response.status_code}: {response.text[:200]}")
                continue
            pending.append(response.json()["id"])
        while pending:
            time.sleep(POLL_S)
            for job_id in list(pending):
                began = time.perf_counter()
                response = client.get(f"/v1/jobs/{job_id}")
                status_times.append(time.perf_counter() - began)
                if response.status_code != 200:
                    errors.append(f"status {response.status_code}: {response.text[:200]}")
                    continue
                state = response.json()["state"]
                if state in ("done", "failed", "cancelled"):
                    finished[job_id] = state
                    pending.remove(job_id)
    with results["lock"]:
        results["status"].extend(status_times)
        results["submit"].extend(submit_times)
        results["finished"].update(finished)
        results["errors"].extend(errors)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=1, help="server worker threads")
    parser.add_argument("--size", type=int, default=192, help="image side in pixels")
    parser.add_argument("--url", help="use a running server instead of starting one")
    parser.add_argument("--key", help="API key for --url (one key shared by every client)")
    args = parser.parse_args(argv)

    source, target = _images(args.size)
    server: subprocess.Popen[bytes] | None = None
    data_dir = OUT / "data"
    if args.url:
        if not args.key:
            parser.error("--url needs --key")
        url, keys = args.url, [args.key] * args.clients
    else:
        from faceweave.service.auth import create_key, load_pepper
        from faceweave.service.db import Database

        shutil.rmtree(data_dir, ignore_errors=True)
        data_dir.mkdir(parents=True)
        db = Database(data_dir / "faceweave.db")
        pepper = load_pepper(data_dir / "pepper.key")
        keys = [create_key(db, pepper, f"client-{i}")[1] for i in range(args.clients)]
        db.close()
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        log = (OUT / "server.log").open("wb")
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "faceweave.service",
                "--data",
                str(data_dir),
                "--port",
                str(port),
                "--workers",
                str(args.workers),
                "--no-preview",
                "--log-level",
                "warning",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                print("server did not start; see", OUT / "server.log", file=sys.stderr)
                return 1
            time.sleep(0.2)

    results: dict[str, Any] = {
        "lock": threading.Lock(),
        "status": [],
        "submit": [],
        "finished": {},
        "errors": [],
    }
    per_client = [
        args.jobs // args.clients + (i < args.jobs % args.clients) for i in range(args.clients)
    ]
    threads = [
        threading.Thread(target=_client, args=(url, keys[i], n, source, target, results))
        for i, n in enumerate(per_client)
    ]
    began = time.perf_counter()
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - began
    finally:
        if server is not None:
            server.terminate()
            server.wait(60)

    states = list(results["finished"].values())
    report: dict[str, Any] = {
        "clients": args.clients,
        "jobs_submitted": args.jobs,
        "server_workers": args.workers,
        "image_size": args.size,
        "cpus": os.cpu_count(),
        "done": states.count("done"),
        "failed": states.count("failed"),
        "lost": args.jobs - len(states),
        "errors": results["errors"][:10],
        "wall_s": round(wall, 1),
        "jobs_per_s": round(len(states) / wall, 2),
        "status_latency": _percentiles(results["status"]),
        "submit_latency": _percentiles(results["submit"]),
    }
    if server is not None:
        from faceweave.service import audit
        from faceweave.service.db import Database

        db = Database(data_dir / "faceweave.db")
        completed = audit.entries(db.connection(), action="job.completed")
        db.close()
        per_job: dict[str, int] = {}
        for row in completed:
            per_job[row.job_id or ""] = per_job.get(row.job_id or "", 0) + 1
        report["completed_rows"] = len(completed)
        report["jobs_completed_more_than_once"] = sum(1 for n in per_job.values() if n > 1)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    ok = report["done"] == args.jobs and not report["errors"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
