"""Browser end-to-end fixtures: Debian's chromium driven by Playwright, a live service.

Skipped (with the reason) when ``/usr/bin/chromium`` or the ``playwright`` package is
missing; ``tools/install_browser.sh`` installs chromium. Playwright never downloads a
browser here: it drives the system one through ``executable_path``.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

CHROMIUM = Path("/usr/bin/chromium")
BASE_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--use-fake-ui-for-media-stream",
    "--use-fake-device-for-media-stream",
]
Y4M_W, Y4M_H, Y4M_FPS = 320, 240, 15


def _require_browser() -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing; run tools/install_browser.sh (as root)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.skip("the playwright package is not installed")


@pytest.fixture(autouse=True)
def _browser_available() -> None:
    _require_browser()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RunningServer:
    """uvicorn serving an app on 127.0.0.1 in a thread of this process."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)

    def __enter__(self) -> RunningServer:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the service did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def service_app(data_dir: Path, **settings: Any) -> Any:
    """The real service (1 worker, no previews, or as ``settings`` say) with the live
    router."""
    from faceweave.service import ServiceConfig, create_app
    from faceweave.service.app import require_key
    from faceweave.service.live import create_live_router

    settings = {"workers": 1, "preview_enabled": False, "poll_interval_s": 0.1, **settings}
    config = ServiceConfig(data_dir=data_dir, **settings)
    app = create_app(config)
    if not any(getattr(route, "path", None) == "/v1/live/offer" for route in app.routes):
        app.include_router(create_live_router(auth=require_key, max_pixels=config.max_pixels))
    return app


def make_key(data_dir: Path) -> str:
    """An API key, created the way ``faceweave keys create`` does."""
    from faceweave.service.auth import create_key, load_pepper
    from faceweave.service.db import Database

    data_dir.mkdir(parents=True, exist_ok=True)
    db = Database(data_dir / "faceweave.db")
    try:
        _, key = create_key(db, load_pepper(data_dir / "pepper.key"), "browser-test")
    finally:
        db.close()
    return key


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(base URL, API key) of a running service on a temporary data dir."""
    data_dir = tmp_path / "data"
    key = make_key(data_dir)
    with RunningServer(service_app(data_dir)) as server:
        yield server.url, key


@pytest.fixture
def neural_service(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(base URL, API key) of a running service on the neural engine: tiny ONNX models
    with inswapper's and ArcFace's signatures (tests/neural_models.py), the swap tinted,
    a face occluder with XSeg's and a face parser with BiSeNet's, swapping skin and nose,
    and a frame enhancer with Real-ESRGAN's (x2)."""
    pytest.importorskip("onnx")
    from neural_models import (  # tests/ on sys.path
        tiny_embedder,
        tiny_frame_enhancer,
        tiny_occluder,
        tiny_parser,
        tiny_swapper,
    )

    from faceweave.processors.engines import EngineSettings

    swapper, _, _ = tiny_swapper(tmp_path / "swap.onnx", tint=0.9)
    engine = EngineSettings(
        engine="inswapper",
        swapper_model=swapper,
        embedder_model=tiny_embedder(tmp_path / "arcface.onnx"),
        occluder_model=tiny_occluder(tmp_path / "xseg.onnx"),
        parser_model=tiny_parser(tmp_path / "bisenet.onnx", size=128),
        mask_regions=("skin", "nose"),
    )
    data_dir = tmp_path / "data"
    key = make_key(data_dir)
    upscaler = tiny_frame_enhancer(tmp_path / "x2.onnx", scale=2)
    with RunningServer(
        service_app(data_dir, engine=engine, frame_enhancer_model=upscaler)
    ) as server:
        yield server.url, key


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Launch headless chromium with extra arguments; returns a new page."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browsers: list[Any] = []

        def factory(*extra: str) -> Any:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=[*BASE_ARGS, *extra], timeout=30_000
            )
            browsers.append(browser)
            context = browser.new_context(accept_downloads=True)
            context.set_default_timeout(30_000)
            return context.new_page()

        yield factory
        for browser in browsers:
            browser.close()


def letterbox(face_bgr: np.ndarray, width: int = Y4M_W, height: int = Y4M_H) -> np.ndarray:
    side = min(width, height)
    face = cv2.resize(face_bgr, (side, side), interpolation=cv2.INTER_AREA)
    frame = np.full((height, width, 3), 90, np.uint8)
    x0 = (width - side) // 2
    frame[:, x0 : x0 + side] = face
    return frame


def write_y4m(path: Path, frames: list[np.ndarray], fps: int = Y4M_FPS) -> Path:
    """A raw YUV4MPEG2 (I420) file: what chromium's fake camera plays in a loop."""
    height, width = frames[0].shape[:2]
    with path.open("wb") as handle:
        handle.write(f"YUV4MPEG2 W{width} H{height} F{fps}:1 Ip A1:1 C420jpeg\n".encode())
        for frame in frames:
            handle.write(b"FRAME\n")
            handle.write(cv2.cvtColor(frame, cv2.COLOR_BGR2YUV_I420).tobytes())
    return path


@pytest.fixture
def fake_camera(tmp_path: Path, astronaut: np.ndarray) -> tuple[Path, np.ndarray]:
    """(y4m file, its BGR picture): two seconds of the astronaut at 320x240, 15 fps."""
    picture = letterbox(np.asarray(astronaut))
    return write_y4m(tmp_path / "camera.y4m", [picture] * 30), picture
