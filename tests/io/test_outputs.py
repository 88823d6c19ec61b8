"""Live outputs and inputs: the factory, file and UDP streaming, clear errors; camera and pacer."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import av
import av.error
import numpy as np
import pytest

from faceweave.errors import InputError, OutputError, UnsupportedFormatError, UsageError
from faceweave.io.camera import Camera, FilePacer
from faceweave.io.outputs import (
    NO_DISPLAY,
    FileOutput,
    StreamOutput,
    VirtualCamOutput,
    WindowOutput,
    check_output_spec,
    open_output,
)
from faceweave.pipeline.stages import Packet

W, H, FPS = 160, 120, 30


def _packets(count: int, *, start: float = 100.0, width: int = W, height: int = H) -> list[Packet]:
    packets = []
    for index in range(count):
        image = np.full((height, width, 3), (index * 8) % 255, np.uint8)
        packets.append(Packet(index, None, index / FPS, image, captured_at=start + index / FPS))
    return packets


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_output_kinds_and_cheap_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert check_output_spec("udp://127.0.0.1:1234") == "stream"
    assert check_output_spec("rtmp://127.0.0.1/live/key") == "stream"
    assert check_output_spec("virtualcam") == "virtualcam"
    assert check_output_spec(str(tmp_path / "a.mp4")) == "file"
    with pytest.raises(UsageError, match="udp:// or rtmp://"):
        check_output_spec("http://example.com/x")
    with pytest.raises(UnsupportedFormatError):
        check_output_spec(str(tmp_path / "a.gif"))
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setattr("sys.platform", "linux")
    for spec in (None, "window"):
        with pytest.raises(UsageError, match="no display") as info:
            check_output_spec(spec)
        assert str(info.value) == NO_DISPLAY
    with pytest.raises(UsageError):
        WindowOutput()


def test_file_output_times_frames_by_capture(tmp_path: Path) -> None:
    path = tmp_path / "rec.mp4"
    output = open_output(str(path), W, H, FPS)
    assert isinstance(output, FileOutput)
    for packet in _packets(15):
        output.write(packet)
    output.close()
    with av.open(str(path)) as container:
        frames = list(container.decode(video=0))
    assert len(frames) == 15
    assert frames[-1].time == pytest.approx(14 / FPS, abs=2e-3)
    assert list(tmp_path.iterdir()) == [path]


def test_file_output_without_frames_leaves_nothing(tmp_path: Path) -> None:
    output = FileOutput(tmp_path / "rec.mkv", W, H, FPS)
    with pytest.raises(OutputError, match="no frames"):
        output.close()
    assert list(tmp_path.iterdir()) == []


def test_udp_stream_is_received() -> None:
    port = _free_udp_port()
    received: list[tuple[int, int]] = []
    errors: list[BaseException] = []
    listening = threading.Event()

    def receive() -> None:
        try:
            listening.set()
            url = f"udp://127.0.0.1:{port}?timeout=4000000"  # microseconds
            with av.open(url, format="mpegts", timeout=5.0) as container:
                for frame in container.decode(video=0):
                    received.append((frame.width, frame.height))
                    if len(received) >= 5:
                        return
        except (av.error.FFmpegError, OSError) as exc:
            errors.append(exc)

    thread = threading.Thread(target=receive, daemon=True)
    thread.start()
    listening.wait(2)
    time.sleep(0.5)  # let the receiver bind its socket before anything is sent
    output = open_output(f"udp://127.0.0.1:{port}", W + 1, H, FPS)  # odd width is padded
    assert isinstance(output, StreamOutput)
    for packet in _packets(90, width=W + 1):
        output.write(packet)
        time.sleep(0.005)
    output.close()
    thread.join(6)
    assert received, f"nothing received ({errors})"
    assert received[0] == (W + 2, H)


def test_unreachable_rtmp_is_one_clear_error() -> None:
    with pytest.raises(OutputError, match="rtmp://127.0.0.1:1/live/key: cannot connect"):
        StreamOutput("rtmp://127.0.0.1:1/live/key", W, H, FPS, timeout=2.0)


def test_virtual_camera_error_names_v4l2loopback() -> None:
    try:
        camera = VirtualCamOutput(W, H, FPS)
    except OutputError as exc:
        assert "v4l2loopback" in str(exc)
    else:  # a machine with a virtual camera device: it must work
        camera.write(_packets(1)[0])
        camera.close()


def test_camera_that_cannot_open_is_named() -> None:
    with pytest.raises(InputError, match="camera 97: cannot open"):
        Camera(97)


def test_file_pacer_plays_at_real_time(tmp_path: Path) -> None:
    path = tmp_path / "clip.mkv"
    output = FileOutput(path, W, H, FPS)
    for packet in _packets(12):
        output.write(packet)
    output.close()
    with FilePacer(path) as pacer:
        assert (pacer.width, pacer.height) == (W, H) and pacer.fps == pytest.approx(FPS, rel=0.05)
        began = time.perf_counter()
        packets = list(pacer)
        elapsed = time.perf_counter() - began
    assert len(packets) + pacer.dropped == 12
    assert elapsed >= 11 / FPS * 0.9
    stamps = [p.captured_at for p in packets]
    assert stamps == sorted(stamps) and all(p.pts is None for p in packets)
