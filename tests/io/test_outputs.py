"""Live outputs and inputs: the factory, file and UDP streaming, clear errors; camera and pacer."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
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


def test_stream_urls_ffmpeg_would_refuse_late_are_usage_errors() -> None:
    for url, message in (
        ("udp://127.0.0.1", "give the port"),
        ("udp://127.0.0.1:0", "from 1 to 65535"),
        ("udp://127.0.0.1:99999", "from 1 to 65535"),
        ("udp://:5000", "no host"),
        ("rtmp:///live/key", "no host"),
    ):
        with pytest.raises(UsageError, match=message):
            check_output_spec(url)
    assert check_output_spec("UDP://127.0.0.1:5000") == "stream"
    # An unknown host: said before any model loads ("[Errno 5] Input/output error" after).
    with pytest.raises(OutputError, match="unknown host nosuchhost.invalid"):
        check_output_spec("udp://nosuchhost.invalid:27001")


def test_an_upper_case_scheme_is_sent_as_ffmpeg_knows_it() -> None:
    port = _free_udp_port()
    output = StreamOutput(f"UDP://127.0.0.1:{port}", W, H, FPS)  # ("Protocol not found")
    for packet in _packets(3):
        output.write(packet)
    output.close()


def _server(talk: Callable[[socket.socket], bool]) -> tuple[socket.socket, int]:
    """A TCP server on a free port that hands each connection to ``talk``, and keeps it
    open (until the server closes) where ``talk`` says so."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:  # (the server closed: its connections too)
                for each in held:
                    each.close()
                return
            if talk(connection):
                held.append(connection)
            else:
                connection.close()

    threading.Thread(target=serve, daemon=True).start()
    return server, int(server.getsockname()[1])


def _silent(connection: socket.socket) -> bool:
    return True  # (taken, and never a word)


def _closing(connection: socket.socket) -> bool:
    return False


def test_an_rtmp_server_that_never_answers_is_given_up_on_in_time() -> None:
    """A server that takes the connection and says nothing (another service on the
    port, an ingest overloaded) had held the session for good, deaf to Ctrl-C."""
    server, port = _server(_silent)
    began = time.monotonic()
    with pytest.raises(
        OutputError, match=r"no answer from 127\.0\.0\.1:\d+ to the handshake in 0\.5 s"
    ):
        StreamOutput(f"rtmp://127.0.0.1:{port}/live/key", W, H, FPS, timeout=0.5)
    assert time.monotonic() - began < 3.0
    server.close()
    closing, port = _server(_closing)
    with pytest.raises(OutputError, match="closed the connection|Connection reset"):
        StreamOutput(f"rtmp://127.0.0.1:{port}/live/key", W, H, FPS, timeout=0.5)
    closing.close()


def _rtmp_server(reply: bytes) -> tuple[socket.socket, int]:
    """A server that answers the RTMP handshake (S0, S1, S2), then, after the client's
    C2 and first message, ``reply`` (and nothing more)."""

    def talk(connection: socket.socket) -> bool:
        connection.recv(1537)
        connection.sendall(b"\x03" + bytes(3072))
        if reply:
            connection.recv(4096)
            connection.sendall(reply)
        return True

    return _server(talk)


def test_an_rtmp_server_must_answer_the_handshake_and_the_connect_command() -> None:
    """One that answered the handshake and then nothing had held the session for good
    too (FFmpeg's connection holds Python's lock: Ctrl-C and SIGTERM went unheard)."""
    from faceweave.io.outputs import _rtmp_answers

    window = b"\x02" + bytes(6) + b"\x00\x00\x04\x05" + bytes(4) + b"\x00\x26\x25\xa0"
    result = b"\x03" + bytes(6) + b"\x00\x00\x20\x14" + bytes(4) + b"\x02\x00\x07_result"
    server, port = _rtmp_server(window + result)
    _rtmp_answers(f"rtmp://127.0.0.1:{port}/live/key", 2.0)  # (no error)
    server.close()
    # Nothing after the handshake, or a window size and then nothing (a server's first
    # message before its _result: it had been taken for the answer).
    for reply in (b"", window):
        silent, port = _rtmp_server(reply)
        with pytest.raises(OutputError, match="no answer from .* to its connect command in 0.5"):
            _rtmp_answers(f"rtmp://127.0.0.1:{port}/live/key", 0.5)
        silent.close()


def test_ffmpegs_own_rtmp_server_answers_the_connect_command(tmp_path: Path) -> None:
    """The command is RTMP as a server reads it: FFmpeg's listening RTMP server (in a
    child process: its wait holds Python's lock) answers it."""
    import subprocess
    import sys

    from faceweave.io.outputs import _rtmp_answers

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    url = f"rtmp://127.0.0.1:{port}/live/key"
    script = (
        "import av\n"
        "try:\n"
        f"    av.open({url!r}, 'r', options={{'listen': '1'}}, timeout=20)\n"
        "except Exception:\n"
        "    pass\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script])
    try:
        for attempt in range(200):  # until it listens (refused before)
            try:
                _rtmp_answers(url, 5.0)
                break
            except OutputError as error:
                if "refused" not in str(error) or attempt == 199:
                    raise
                time.sleep(0.05)
    finally:
        child.kill()
        child.wait()


def test_a_display_that_does_not_answer_is_no_display(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A DISPLAY left from an ended SSH session (or Wayland without XWayland) had killed
    the process in Qt (exit 134, no word): it is looked at before any window opens."""
    monkeypatch.setattr("sys.platform", "linux")
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setenv("DISPLAY", ":87")  # (no X server 87 here)
    with pytest.raises(UsageError, match="the X server :87 does not answer"):
        check_output_spec("window")
    monkeypatch.delenv("DISPLAY")
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-9")  # (OpenCV's Qt has no Wayland plugin)
    with pytest.raises(UsageError) as info:
        check_output_spec("window")
    assert str(info.value) == NO_DISPLAY
    # A socket that takes the connection is a display (a path, as macOS's launchd
    # names its X server's: "/private/tmp/.../org.xquartz:0").
    from faceweave.io.outputs import _x_server_answers

    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "x"))
        server.listen(1)
        assert _x_server_answers(f"{tmp_path / 'x'}:0")
    assert not _x_server_answers(f"{tmp_path / 'y'}:0") and not _x_server_answers("nonsense")


def _x_server(path: Path, status: bytes, heard: list[bytes]) -> socket.socket:
    """A Unix socket that reads a connection setup (into ``heard``) and answers its
    first byte ``status`` (0 Failed, 1 Success, 2 Authenticate)."""
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(2)

    def serve() -> None:
        try:
            connection, _ = server.accept()
        except OSError:
            return
        with connection:
            heard.append(connection.recv(4096))
            connection.sendall(status + bytes(7))

    threading.Thread(target=serve, daemon=True).start()
    return server


def test_an_x_server_that_refuses_the_setup_is_no_display(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that takes the connection and refuses its setup ("No protocol
    specified": a sudo shell without the user's cookie) had let Qt abort the process,
    exit 134 and no word; the setup carries the display's cookie from XAUTHORITY."""
    import struct

    from faceweave.io.outputs import _x_server_answers

    cookie = bytes(range(16))
    entry = b"".join(
        len(part).to_bytes(2, "big") + part
        for part in (socket.gethostname().encode(), b"0", b"MIT-MAGIC-COOKIE-1", cookie)
    )
    other = b"".join(
        len(part).to_bytes(2, "big") + part for part in (b"elsewhere", b"0", b"X", b"Y")
    )
    (tmp_path / "xauth").write_bytes(
        struct.pack(">H", 256) + other + struct.pack(">H", 256) + entry
    )
    monkeypatch.setenv("XAUTHORITY", str(tmp_path / "xauth"))
    for status, answers in ((b"\x00", False), (b"\x02", False), (b"\x01", True)):
        heard: list[bytes] = []
        path = tmp_path / f"x{status[0]}"
        with _x_server(path, status, heard):
            assert _x_server_answers(f"{path}:0") is answers
        setup = heard[0]
        assert setup[:1] == b"l" and struct.unpack("<HH", setup[2:6]) == (11, 0)
        assert b"MIT-MAGIC-COOKIE-1" in setup and setup.endswith(cookie)


def test_frames_of_another_size_are_recorded_fitted(tmp_path: Path) -> None:
    """A source that changes its resolution mid-session (a camera, a stream): its
    recording goes on, each frame fitted inside the first one's size on black (the
    writer had refused it and the recording was deleted)."""
    path = tmp_path / "rec.mp4"
    output = FileOutput(path, W, H, FPS)
    packets = _packets(4) + _packets(4, start=101.0, width=80, height=120)
    for packet in packets:
        packet.image[:] = 200
        output.write(packet)
    output.close()
    with av.open(str(path)) as container:
        frames = [f.to_ndarray(format="bgr24") for f in container.decode(video=0)]
    assert len(frames) == 8 and all(f.shape == (H, W, 3) for f in frames)
    last = frames[-1].astype(int)
    assert abs(last[:, 40:120].mean() - 200) < 6  # the 80x120 picture, centred
    assert last[:, :30].mean() < 10 and last[:, 130:].mean() < 10  # black either side


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
