"""The camera: a network stream that closes or stalls is a lost camera, and closing one
whose read is blocked does not release the device under that read."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

import faceweave.io.camera as camera_module
import faceweave.pipeline.live as live_module
from faceweave.analysis.analyser import FaceAnalyser
from faceweave.errors import EXIT_ERROR
from faceweave.io.camera import Camera
from faceweave.io.image import write_image
from faceweave.io.outputs import FileOutput
from faceweave.io.video import VideoReader
from faceweave.pipeline.live import run_live
from faceweave.types import Face

REPO_ROOT = Path(__file__).resolve().parents[2]


class _BlockingCapture:
    """A cv2.VideoCapture whose second read blocks until ``go`` is set (a stalled
    stream); it records whether it was released while a read was in progress."""

    def __init__(self, device: object) -> None:
        self.reads = 0
        self.reading = False
        self.released = False
        self.released_during_read = False
        self.go = threading.Event()

    def isOpened(self) -> bool:  # noqa: N802 - OpenCV's name
        return True

    def set(self, prop: int, value: float) -> bool:
        return True

    def get(self, prop: int) -> float:
        return 0.0

    def read(self) -> tuple[bool, np.ndarray | None]:
        self.reading = True
        self.reads += 1
        if self.reads > 2:
            self.go.wait(10.0)
        else:  # a live frame is waited for (one that comes at once was buffered)
            time.sleep(0.03)
        self.reading = False
        return True, np.zeros((48, 64, 3), np.uint8)

    def release(self) -> None:
        self.released_during_read |= self.reading
        self.released = True


def test_closing_a_camera_whose_read_is_blocked_leaves_the_release_to_that_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Releasing OpenCV's capture under a read blocked on a stalled stream crashed the
    process (SIGSEGV at Ctrl-C or SIGTERM; the recording was lost with it)."""
    monkeypatch.setattr(camera_module.cv2, "VideoCapture", _BlockingCapture)
    camera = Camera("http://camera.invalid/stream")
    capture: Any = camera._capture
    packets = iter(camera)
    assert next(packets).image.shape == (48, 64, 3)
    reader = threading.Thread(target=lambda: next(packets, None), daemon=True)
    reader.start()
    deadline = time.monotonic() + 5.0
    while camera.waiting_s() == 0.0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert camera.waiting_s() > 0.0 and capture.reading
    began = time.monotonic()
    camera.close()
    assert time.monotonic() - began < 2.0  # it does not wait for the stalled read
    assert not capture.released
    capture.go.set()  # the stream wakes up (or OpenCV's own timeout ends the read)
    reader.join(5.0)
    assert not reader.is_alive()
    assert capture.released and not capture.released_during_read
    assert camera.waiting_s() == 0.0
    camera.close()  # twice is safe


class _BufferedCapture(_BlockingCapture):
    """A network camera that had frames buffered when the session began: its first
    read is slow (the stream's start), the next 4 come at once, then each frame takes
    a 30 fps period."""

    def read(self) -> tuple[bool, np.ndarray | None]:
        self.reads += 1
        if self.reads == 1 or self.reads > 5:  # a stream's first read is slow too
            time.sleep(1 / 30)
        return True, np.full((48, 64, 3), self.reads, np.uint8)


def test_frames_the_camera_held_before_the_session_are_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """They are old (a network stream's buffer held 1.7 s of them while the models
    loaded) and the latency measured from their read did not show it."""
    monkeypatch.setattr(camera_module.cv2, "VideoCapture", _BufferedCapture)
    with Camera("http://camera.invalid/stream") as camera:
        packets = iter(camera)
        first = next(packets)
        assert int(first.image[0, 0, 0]) == 6  # the first frame that was waited for
        assert camera.dropped == 5 and camera.captured == 1
        assert int(next(packets).image[0, 0, 0]) == 7  # from then on, every frame


class _MjpegCamera:
    """An IP camera on localhost: ``frames`` JPEGs at 30 fps as multipart MJPEG, then it
    closes the connection (``close``) or keeps it open and sends nothing (``stall``)."""

    def __init__(self, image: np.ndarray, frames: int, mode: str) -> None:
        jpeg = cv2.imencode(".jpg", image)[1].tobytes()
        self.stalled = threading.Event()
        self.release = threading.Event()
        camera = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self.send_response(200)
                self.send_header("Content-Type", "multipart/x-mixed-replace; boundary=frame")
                self.end_headers()
                try:
                    for _ in range(frames):
                        self.wfile.write(
                            b"--frame\r\nContent-Type: image/jpeg\r\n"
                            + f"Content-Length: {len(jpeg)}\r\n\r\n".encode()
                            + jpeg
                            + b"\r\n"
                        )
                        time.sleep(1 / 30)
                    if mode == "stall":
                        camera.stalled.set()
                        camera.release.wait(60.0)
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/cam"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def scene(astronaut: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(cv2.resize(astronaut, (320, 320))[40:280])


@pytest.fixture
def stalling_camera(scene: np.ndarray) -> Iterator[_MjpegCamera]:
    server = _MjpegCamera(scene, 45, "stall")
    yield server
    server.close()


def test_a_stream_that_stalls_ends_the_session_as_a_lost_camera_with_its_recording(
    stalling_camera: _MjpegCamera,
    tmp_path: Path,
    analyser: FaceAnalyser,
    grace_hopper_face: Face,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stalled stream blocks OpenCV's read without an error: the session had waited
    for OpenCV's own 30 s timeout, then ended as if the camera had simply finished
    (exit 0); a Ctrl-C meanwhile crashed it."""
    monkeypatch.setattr(live_module, "CAMERA_STALL_S", 1.0)
    camera = Camera(stalling_camera.url)
    path = tmp_path / "rec.mkv"
    output = FileOutput(path, camera.width, camera.height, camera.fps)
    began = time.monotonic()
    stats = run_live(camera, output, [grace_hopper_face], analyser=analyser, handle_sigint=False)
    assert stalling_camera.stalled.is_set()
    assert stats.stopped_by == "camera_lost"
    assert time.monotonic() - began < 15.0
    assert stats.frames_processed > 0
    with VideoReader(path) as reader:
        assert sum(1 for _ in reader) == stats.frames_processed


def test_live_says_a_lost_camera_and_exits_1_keeping_the_recording(
    scene: np.ndarray, tmp_path: Path, grace_hopper: np.ndarray
) -> None:
    """A camera whose stream closes (unplugged, a phone app quit): one line and exit 1,
    so that a supervising script can tell it from a session that ended as asked."""
    server = _MjpegCamera(scene, 300, "close")  # 10 s: past the models' loading
    source = tmp_path / "me.png"
    write_image(source, grace_hopper)
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    env.pop("FACEWEAVE_DEBUG", None)
    try:
        completed = subprocess.run(
            [
                sys.executable,
                "-m",
                "faceweave",
                "live",
                "--source",
                str(source),
                "--camera",
                server.url,
                "--output",
                str(tmp_path / "out.mp4"),
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        server.close()
    assert completed.returncode == EXIT_ERROR, completed.stderr
    last = completed.stderr.strip().splitlines()[-1]
    assert "lost after" in last and "the recording is kept" in last, completed.stderr
    assert "Traceback" not in completed.stderr
    with VideoReader(tmp_path / "out.mp4") as reader:
        assert sum(1 for _ in reader) > 0
