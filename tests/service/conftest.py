"""Service fixtures: package face photos as upload bytes, apps on temporary data dirs, keys."""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from faceweave.service import ServiceConfig, create_app
from faceweave.service.auth import create_key, load_pepper
from faceweave.service.db import Database


def _png(rgb: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format="PNG")
    return buffer.getvalue()


def _jpeg(rgb: np.ndarray, quality: int = 90) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


@pytest.fixture(scope="session")
def astronaut_rgb() -> np.ndarray:
    from skimage import data

    return np.asarray(data.astronaut())


@pytest.fixture(scope="session")
def grace_hopper_rgb() -> np.ndarray:
    from matplotlib import cbook

    with cbook.get_sample_data("grace_hopper.jpg") as fh:
        return np.asarray(Image.open(fh).convert("RGB"))


@pytest.fixture(scope="session")
def source_png(astronaut_rgb: np.ndarray) -> bytes:
    """The astronaut (512x512) as PNG bytes: the source face."""
    return _png(astronaut_rgb)


@pytest.fixture(scope="session")
def target_jpeg(grace_hopper_rgb: np.ndarray) -> bytes:
    """Grace Hopper (512x600) as JPEG bytes: the target."""
    return _jpeg(grace_hopper_rgb)


def make_key(data_dir: Path, name: str) -> str:
    """Create an API key the way ``faceweave keys create`` does; returns the key."""
    data_dir.mkdir(parents=True, exist_ok=True)
    db = Database(data_dir / "faceweave.db")
    try:
        _, key = create_key(db, load_pepper(data_dir / "pepper.key"), name)
    finally:
        db.close()
    return key


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


AppFactory = Callable[..., TestClient]


@pytest.fixture
def make_client(tmp_path: Path) -> Iterator[AppFactory]:
    """Build a TestClient (lifespan running) on a fresh data dir; closed after the test."""
    clients: list[TestClient] = []

    def factory(**settings: Any) -> TestClient:
        settings.setdefault("data_dir", tmp_path / f"data{len(clients)}")
        settings.setdefault("workers", 1)
        settings.setdefault("preview_enabled", False)
        settings.setdefault("poll_interval_s", 0.05)
        client = TestClient(create_app(ServiceConfig(**settings)))
        client.__enter__()
        clients.append(client)
        return client

    yield factory
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, Path]]:
    """One shared running service (1 worker, previews on) and its data dir, per module."""
    data_dir = tmp_path_factory.mktemp("service")
    config = ServiceConfig(data_dir=data_dir, workers=1, poll_interval_s=0.05)
    with TestClient(create_app(config)) as client:
        yield client, data_dir


def wait_for(client: TestClient, job_id: str, key: str, timeout: float = 60.0) -> dict[str, Any]:
    """Poll a job until it is finished; returns its last JSON."""
    deadline = time.monotonic() + timeout
    while True:
        response = client.get(f"/v1/jobs/{job_id}", headers=auth(key))
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        if body["state"] in ("done", "failed", "cancelled"):
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} still {body['state']} after {timeout} s")
        time.sleep(0.05)


def submit(
    client: TestClient,
    key: str,
    source: bytes,
    target: bytes,
    *,
    names: tuple[str, str] = ("me.png", "photo.jpg"),
    **options: Any,
) -> Any:
    return client.post(
        "/v1/jobs",
        headers=auth(key),
        files={"source": (names[0], source), "target": (names[1], target)},
        data={name: str(value) for name, value in options.items()},
    )
