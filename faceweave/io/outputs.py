"""Live outputs behind one interface: ``write(packet)`` then ``close()``.

=================  ==========================================================
``window``         an OpenCV window; keys drive the session (see below)
``virtualcam``     a virtual camera (v4l2loopback on Linux, OBS elsewhere)
                   through the optional ``pyvirtualcam`` package
``udp://H:P``      MPEG-TS over UDP, H.264 tuned for latency (``zerolatency``,
                   ``ultrafast``, no B-frames, a key frame every second)
``rtmp://...``     FLV to an RTMP server (OBS, nginx-rtmp, a streaming site)
``FILE.mp4``       a video file (:class:`~faceweave.io.video.VideoWriter`),
                   timed by the frames' capture times
=================  ==========================================================

A stream or a file can carry live sound too (``audio``: an
:class:`~faceweave.io.microphone.AudioCapture`, started when the output opens): the
sound heard since each frame's predecessor is encoded with it, timed by the same
clock, from the first frame on (AAC; Opus in WebM).

:func:`open_output` picks one from a spec string; :func:`check_output_spec` does
the cheap checks (a display exists, the scheme and extension are known) before any
model is loaded.

Window keys: ``n`` next source, ``+``/``-`` fusion, ``e`` toggle the effect (the
swap itself while no other effect exists), ``q`` or Esc quit. Keys other than
quit are handed to ``on_key``; quitting sets :attr:`WindowOutput.quit_requested`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import socket
import ssl
import struct
import sys
import time
import urllib.parse
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any, Protocol

import av
import av.error
import cv2
import numpy as np

from faceweave.errors import OutputError, UsageError
from faceweave.io.image import _one_line
from faceweave.io.microphone import AudioCapture
from faceweave.io.video import LiveAudioEncoder, VideoWriter, video_extension
from faceweave.pipeline.stages import Packet
from faceweave.provenance import embed_watermark, video_metadata
from faceweave.types import Frame

__all__ = [
    "FileOutput",
    "FrameOutput",
    "StreamOutput",
    "VirtualCamOutput",
    "WindowOutput",
    "check_output_spec",
    "has_display",
    "open_output",
]

logger = logging.getLogger("faceweave")

NO_DISPLAY = "no display: use --output FILE|udp://|rtmp://|virtualcam"
AUDIO_OUTPUTS = "live sound goes into a recording or a stream: --output FILE, udp:// or rtmp://"
_STREAM_TIME_BASE = Fraction(1, 1000)  # live timestamps in milliseconds (FLV's own unit)
_QUIT_KEYS = (ord("q"), ord("Q"), 27)  # 27: Esc
_RTMP_HANDSHAKE_BYTES = 1536  # C1: a timestamp, four zero bytes and 1528 of any kind
_V4L2_HINT = (
    "on Linux load v4l2loopback (sudo modprobe v4l2loopback devices=1 exclusive_caps=1); "
    "on Windows/macOS install OBS and start its virtual camera once"
)


class FrameOutput(Protocol):
    """Where live frames go."""

    def write(self, packet: Packet) -> None: ...

    def close(self) -> None: ...


def has_display() -> bool:
    """Whether a window can be shown. On Linux, OpenCV's windows (Qt, with its X11
    plugin alone) need an X server: ``DISPLAY`` set and answering. (A stale one, an SSH
    session's after it ended, or a Wayland desktop without XWayland had killed the
    process in Qt, exit 134 and no word.)"""
    if sys.platform.startswith("linux"):
        return _x_server_answers(os.environ.get("DISPLAY", ""))
    return True


def _x_server_answers(display: str, timeout: float = 1.0) -> bool:
    """Whether the X server ``display`` names (``:0``, ``unix:1``, ``host:10.0``)
    takes a connection (its Unix socket, the abstract one, or TCP port 6000 + N) and
    does not refuse it (see _x_refuses: a ``sudo`` shell without the user's cookie)."""
    host, _, rest = display.rpartition(":")
    number = rest.split(".", 1)[0]
    if not display or not number.isdigit():
        return False
    if host in ("", "unix") or host.startswith("/"):
        path = host if host.startswith("/") else f"/tmp/.X11-unix/X{number}"
        for address in (path, "\0" + path):  # (the file, or Linux's abstract socket)
            with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(timeout)
                sock.connect(address)
                return not _x_refuses(sock, number, socket.gethostname(), local=True)
        return False
    try:
        with socket.create_connection((host, 6000 + int(number)), timeout=timeout) as sock:
            return not _x_refuses(sock, number, host, local=False)
    except OSError:
        return False


def _x_refuses(sock: socket.socket, number: str, host: str, *, local: bool) -> bool:
    """Whether the X server on ``sock`` refuses the connection setup that Qt's would
    send: the MIT-MAGIC-COOKIE-1 for the display in ``XAUTHORITY`` (or
    ``~/.Xauthority``), or none. It had accepted the socket and refused the setup
    ("No protocol specified"), and Qt aborted the process, exit 134 and no word.
    Only an explicit refusal counts: a server slow to answer is left to Qt."""
    name, data = _x_cookie(number, host, local=local)
    pad = lambda blob: blob + bytes(-len(blob) % 4)  # noqa: E731
    setup = struct.pack("<BxHHHHxx", ord("l"), 11, 0, len(name), len(data))
    try:
        sock.sendall(setup + pad(name) + pad(data))
        reply = sock.recv(1)
    except OSError:
        return False
    return reply in (b"\x00", b"\x02")  # Failed, Authenticate (1: Success)


def _x_cookie(number: str, host: str, *, local: bool) -> tuple[bytes, bytes]:
    """The (name, data) of the first Xauthority entry for display ``number`` on
    ``host`` (a local one, a remote one's address, or a wildcard), as Xlib and xcb
    pick it; empty when there is none."""
    path = os.environ.get("XAUTHORITY") or os.path.expanduser("~/.Xauthority")
    try:
        with open(path, "rb") as handle:
            blob = handle.read(1 << 20)
    except OSError:
        return b"", b""
    offset = 0

    def field() -> bytes:
        nonlocal offset
        size = int.from_bytes(blob[offset : offset + 2], "big")
        value = blob[offset + 2 : offset + 2 + size]
        offset += 2 + size
        return value

    wanted = host.encode()
    try:
        while offset + 2 <= len(blob):
            family = int.from_bytes(blob[offset : offset + 2], "big")
            offset += 2
            address, display, name, data = field(), field(), field(), field()
            if display not in (b"", number.encode()):
                continue
            if family == 0xFFFF or (family == 256 and local and address == wanted):
                return name, data
            if (
                not local
                and family in (0, 6)
                and socket.inet_ntop(socket.AF_INET if family == 0 else socket.AF_INET6, address)
                == socket.gethostbyname(host)
            ):
                return name, data
    except (OSError, ValueError):
        pass
    return b"", b""


def check_output_spec(spec: str | None) -> str:
    """Cheap checks of an output spec; returns its kind (``window``, ``virtualcam``...).

    Raises:
        UsageError: a window without a display, or an unknown URL scheme.
        UnsupportedFormatError: a file with an extension faceweave does not write.
    """
    kind = _kind(spec)
    if kind == "window" and not has_display():
        display = os.environ.get("DISPLAY") if sys.platform.startswith("linux") else None
        if display:
            raise UsageError(
                f"no display: the X server {display} does not answer, or refuses the "
                "connection (an SSH session's that ended? a sudo shell without the "
                "user's XAUTHORITY? Wayland without XWayland?); use --output "
                "FILE|udp://|rtmp://|virtualcam"
            )
        raise UsageError(NO_DISPLAY)
    if kind == "stream":
        assert spec is not None
        _check_stream_url(spec)
    if kind == "file":
        assert spec is not None
        video_extension(spec)
    return kind


def open_output(
    spec: str | None,
    width: int,
    height: int,
    fps: float,
    *,
    on_key: Callable[[str], None] | None = None,
    audio: AudioCapture | None = None,
    watermark: str | None = None,
) -> FileOutput | StreamOutput | VirtualCamOutput | WindowOutput:
    """The output named by ``spec``: None or ``window``, ``virtualcam``, a URL or a file.

    ``audio`` (a stream or a file only) is started here and closed with the output.
    ``watermark`` (a job id) marks a file's frames and labels it (see :class:`FileOutput`);
    a window, a virtual camera or a stream is shown as it is.
    """
    kind = check_output_spec(spec)
    if audio is not None and kind not in ("stream", "file"):
        raise UsageError(AUDIO_OUTPUTS)
    if kind == "window":
        return WindowOutput(on_key=on_key)
    if kind == "virtualcam":
        return VirtualCamOutput(width, height, fps)
    assert spec is not None
    if kind == "stream":
        return StreamOutput(spec, width, height, fps, audio=audio)
    return FileOutput(spec, width, height, fps, audio=audio, watermark=watermark)


def _check_stream_url(url: str) -> None:
    """A usage error for a stream URL FFmpeg would refuse only once the models have
    loaded (a UDP one without a port, a port out of range, no host)."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:  # (a port that is not a number from 0 to 65535)
        raise UsageError(f"--output {url}: the port must be a number from 1 to 65535") from None
    if not parts.hostname:
        raise UsageError(f"--output {url}: no host")
    if port == 0:
        raise UsageError(f"--output {url}: the port must be a number from 1 to 65535")
    if parts.scheme.lower() == "udp" and port is None:
        raise UsageError(f"--output {url}: give the port to send to (udp://HOST:PORT)")
    if parts.scheme.lower() == "udp":
        try:  # (an unknown host had been found out after the models loaded)
            socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_DGRAM)
        except (OSError, UnicodeError) as exc:
            reason = getattr(exc, "strerror", None) or _one_line(exc)
            raise OutputError(
                f"{url}: cannot send: unknown host {parts.hostname} ({reason})"
            ) from None


def _lower_scheme(url: str) -> str:
    """The URL with its scheme in lower case (FFmpeg knows ``udp``, not ``UDP``)."""
    scheme, sep, rest = url.partition("://")
    return scheme.lower() + sep + rest


def _rtmp_answers(url: str, timeout: float) -> None:
    """Check that an RTMP server answers the handshake and then its ``connect``
    command, each within ``timeout`` seconds. FFmpeg's own connection takes no timeout
    and holds Python's lock: a server that took the connection and never answered
    (another service on the port, an overloaded ingest), or answered the handshake and
    then nothing, had held the session for good, deaf to Ctrl-C.

    Raises:
        OutputError: no connection, or no answer in time.
    """
    parts = urllib.parse.urlsplit(url)
    secure = parts.scheme.lower() == "rtmps"
    host = parts.hostname or ""
    port = parts.port or (443 if secure else 1935)
    step = "the handshake"
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw:
            sock: socket.socket = raw
            if secure:
                context = ssl.create_default_context()
                # (As FFmpeg's TLS, which does not verify by default: the check is
                # that something answers, the stream's own connection is FFmpeg's.)
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
                sock = context.wrap_socket(raw, server_hostname=host)
            sock.settimeout(timeout)
            sock.sendall(b"\x03" + bytes(_RTMP_HANDSHAKE_BYTES))  # C0 (version 3) + C1
            answer = _received(sock, 1 + 2 * _RTMP_HANDSHAKE_BYTES, url)  # S0, S1, S2
            sock.sendall(answer[1 : 1 + _RTMP_HANDSHAKE_BYTES])  # C2: S1 echoed
            step = "its connect command"
            app = parts.path.strip("/").split("/", 1)[0]
            sock.sendall(_rtmp_connect(app, f"{parts.scheme}://{host}:{port}/{app}"))
            _answered(sock, url, timeout)
    except OutputError:
        raise
    except TimeoutError:
        raise OutputError(
            f"{url}: cannot connect: no answer from {host}:{port} to {step} in {timeout:g} s"
        ) from None
    except socket.gaierror as exc:
        raise OutputError(f"{url}: cannot connect: unknown host {host} ({exc.strerror})") from None
    except (OSError, ssl.SSLError) as exc:
        reason = exc.strerror or _one_line(exc)
        raise OutputError(f"{url}: cannot connect to {host}:{port}: {reason}") from None


def _answered(sock: socket.socket, url: str, timeout: float) -> None:
    """Wait (``timeout`` seconds in all) for the server's answer to ``connect``: its
    ``_result`` or ``_error`` command. A server sends a window size and a bandwidth
    first; one that sent those and then nothing had held the session too. (The
    command's name is an AMF0 string at the start of its message: whole in its first
    chunk.)"""
    deadline = time.monotonic() + timeout
    seen = b""
    while b"_result" not in seen and b"_error" not in seen:
        left = deadline - time.monotonic()
        if left <= 0 or len(seen) > 1 << 16:
            raise TimeoutError
        sock.settimeout(left)
        chunk = sock.recv(4096)
        if not chunk:
            raise OutputError(f"{url}: cannot connect: the server closed the connection")
        seen = seen[-16:] + chunk


def _received(sock: socket.socket, size: int, url: str) -> bytes:
    """Exactly ``size`` bytes from ``sock`` (its timeout applies to each read)."""
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise OutputError(f"{url}: cannot connect: the server closed the connection")
        data += chunk
    return data


def _amf_string(text: str) -> bytes:
    data = text.encode()
    return len(data).to_bytes(2, "big") + data


def _rtmp_connect(app: str, tc_url: str) -> bytes:
    """An RTMP ``connect`` command message (AMF0) in chunks of 128 bytes on chunk
    stream 3, as a publisher such as FFmpeg sends it first."""
    fields = {"app": app, "type": "nonprivate", "flashVer": "FMLE/3.0", "tcUrl": tc_url}
    command = (
        b"\x02"
        + _amf_string("connect")
        + b"\x00"
        + struct.pack(">d", 1.0)  # transaction id
        + b"\x03"
        + b"".join(_amf_string(key) + b"\x02" + _amf_string(value) for key, value in fields.items())
        + b"\x00\x00\x09"
    )
    header = (
        b"\x03"  # fmt 0, chunk stream 3
        + bytes(3)  # timestamp
        + len(command).to_bytes(3, "big")
        + b"\x14"  # AMF0 command
        + bytes(4)  # message stream 0
    )
    chunks = [command[i : i + 128] for i in range(0, len(command), 128)]
    return header + b"\xc3".join(chunks)  # (fmt 3: the chunks after the first)


def _fitted(image: Frame, width: int, height: int) -> Frame:
    """``image`` at ``width`` x ``height``: as it is when it has that size, else scaled to
    fit inside and centred on black (a source that changed its resolution mid-session:
    its recording goes on, the picture not stretched)."""
    h, w = image.shape[:2]
    if (w, h) == (width, height):
        return image
    scale = min(width / w, height / h)
    size = (max(1, min(width, round(w * scale))), max(1, min(height, round(h * scale))))
    interpolation = cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR
    scaled = cv2.resize(image, size, interpolation=interpolation)
    canvas = np.zeros((height, width, 3), np.uint8)
    x, y = (width - size[0]) // 2, (height - size[1]) // 2
    canvas[y : y + size[1], x : x + size[0]] = scaled
    return canvas


def _kind(spec: str | None) -> str:
    if spec is None or spec == "window":
        return "window"
    if spec == "virtualcam":
        return "virtualcam"
    scheme = spec.split("://", 1)[0].lower() if "://" in spec else ""
    if scheme in ("udp", "rtmp", "rtmps"):
        return "stream"
    if scheme:
        raise UsageError(f"unsupported output URL {spec!r}: use udp:// or rtmp://")
    return "file"


class WindowOutput:
    """Shows frames in an OpenCV window and reads the keyboard.

    Args:
        title: window title.
        on_key: called with each key pressed other than quit (``"n"``, ``"+"``...).

    Raises:
        UsageError: there is no display.
    """

    def __init__(self, title: str = "faceweave", *, on_key: Callable[[str], None] | None = None):
        if not has_display():
            raise UsageError(NO_DISPLAY)
        self.title = title
        self.on_key = on_key
        self.quit_requested = False
        self._shown = False

    def write(self, packet: Packet) -> None:
        try:
            cv2.imshow(self.title, packet.image)
            self._shown = True
            key = cv2.waitKey(1) & 0xFF
        except cv2.error as exc:
            raise OutputError(f"cannot show a window: {_one_line(exc)}") from exc
        if key == 0xFF:
            return
        if key in _QUIT_KEYS:
            self.quit_requested = True
        elif self.on_key is not None:
            self.on_key(chr(key))

    def close(self) -> None:
        if self._shown:
            self._shown = False
            try:
                cv2.destroyWindow(self.title)
                cv2.waitKey(1)
            except cv2.error:
                pass


class VirtualCamOutput:
    """Sends frames to a virtual camera through ``pyvirtualcam`` (an optional package).

    Raises:
        OutputError: the package or the virtual camera device is missing.
    """

    def __init__(self, width: int, height: int, fps: float) -> None:
        try:
            import pyvirtualcam
        except ImportError as exc:
            raise OutputError(
                f"virtual camera: the pyvirtualcam package is not installed "
                f"(pip install pyvirtualcam); {_V4L2_HINT}"
            ) from exc
        try:
            self._camera: Any = pyvirtualcam.Camera(
                width=width, height=height, fps=fps, fmt=pyvirtualcam.PixelFormat.BGR
            )
        except (RuntimeError, OSError, ValueError) as exc:
            raise OutputError(
                f"virtual camera: cannot open a device ({_one_line(exc)}); {_V4L2_HINT}"
            ) from exc
        self.device = str(getattr(self._camera, "device", "virtual camera"))
        self._size = (width, height)
        self._closed = False

    def write(self, packet: Packet) -> None:
        image = _fitted(packet.image, *self._size)
        self._camera.send(np.ascontiguousarray(image))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._camera.close()


class _Encoder:
    """H.264 frames into an open PyAV container, timed by capture time in milliseconds."""

    def __init__(self, container: Any, width: int, height: int, fps: float, latency: bool) -> None:
        options = {"preset": "ultrafast", "tune": "zerolatency"} if latency else {}
        options.update({"g": str(max(1, round(fps))), "bf": "0"})
        self.stream = container.add_stream(
            "libx264", rate=Fraction(fps).limit_denominator(1001), options=options
        )
        # Chroma subsampling needs even sizes: pad odd ones with a repeated edge.
        self.pad_x, self.pad_y = width % 2, height % 2
        self.stream.width, self.stream.height = width + self.pad_x, height + self.pad_y
        self.stream.pix_fmt = "yuv420p"
        self.stream.codec_context.time_base = _STREAM_TIME_BASE
        self.width, self.height = width, height
        self._start: float | None = None
        self._last_pts = -1
        self._period = 1.0 / fps if fps > 0 else 0.0

    def encode(self, image: Frame, captured_at: float) -> list[Any]:
        image = _fitted(image, self.width, self.height)
        if self.pad_x or self.pad_y:
            image = cv2.copyMakeBorder(image, 0, self.pad_y, 0, self.pad_x, cv2.BORDER_REPLICATE)
        self._start = captured_at if self._start is None else self._start
        pts = max(round((captured_at - self._start) / _STREAM_TIME_BASE), self._last_pts + 1)
        self._last_pts = pts
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="bgr24")
        frame.pts, frame.time_base = pts, _STREAM_TIME_BASE
        return list(self.stream.encode(frame))

    @property
    def last_seconds(self) -> float:
        """Output seconds of the last frame's end (one frame period after it)."""
        return max(self._last_pts, 0) * float(_STREAM_TIME_BASE) + self._period

    def flush(self) -> list[Any]:
        return list(self.stream.encode(None))


class _Sound:
    """Live sound handed on with an output's frames: what was heard, in output seconds."""

    def __init__(self, capture: AudioCapture) -> None:
        self.capture = capture
        self.rate_and_layout = (capture.rate, capture.layout)

    def start(self) -> None:
        self.capture.start()

    def heard(self, start: float, until: float = math.inf) -> list[tuple[Any, float]]:
        """``(samples, second)`` of each chunk heard since the last call, its second
        counted from ``start`` (the first frame's capture time); sound from ``until``
        on is dropped (a session's end)."""
        heard = []
        for chunk in self.capture.take():
            second = chunk.captured_at - start
            if second >= until:
                break
            samples = chunk.samples
            if until - second < chunk.seconds:
                samples = samples[:, : math.ceil((until - second) * chunk.rate)]
            heard.append((samples, second))
        return heard

    def close(self) -> None:
        self.capture.close()
        if self.capture.error is not None:
            logger.warning("%s", self.capture.error)
        if self.capture.dropped_s > 0:
            logger.warning(
                "audio device %s: %.1f s of sound dropped (the output fell behind)",
                self.capture.spec,
                self.capture.dropped_s,
            )


class StreamOutput:
    """Streams H.264 over UDP (MPEG-TS) or RTMP (FLV), encoded for low latency.

    Args:
        url: ``udp://host:port`` or ``rtmp://host/app/key``.
        width, height, fps: the frames that will be written.
        timeout: seconds to wait for an RTMP server to answer.
        audio: live sound sent with the frames (AAC), started here.

    Raises:
        OutputError: the server cannot be reached, or sending fails.
    """

    def __init__(
        self,
        url: str,
        width: int,
        height: int,
        fps: float,
        *,
        timeout: float = 5.0,
        audio: AudioCapture | None = None,
    ):
        self.url = url
        url = _lower_scheme(url)
        is_udp = url.startswith("udp://")
        if not is_udp:
            _rtmp_answers(url, timeout)
        self._sound = _Sound(audio) if audio is not None else None
        self._audio: LiveAudioEncoder | None = None
        self._start: float | None = None
        target = url
        if is_udp and "pkt_size" not in url:  # 7 TS packets per datagram: no IP fragmentation
            target += ("&" if "?" in url else "?") + "pkt_size=1316"
        try:
            self._container: Any = av.open(
                target, "w", format="mpegts" if is_udp else "flv", timeout=timeout
            )
        except (av.error.FFmpegError, OSError) as exc:
            raise OutputError(f"{url}: cannot connect: {_one_line(exc)}") from exc
        try:
            self._encoder = _Encoder(self._container, width, height, fps, latency=True)
            if self._sound is not None:
                self._audio = LiveAudioEncoder(self._container, "aac", *self._sound.rate_and_layout)
            # Connect now (FFmpeg opens the URL when it writes the header), so an
            # unreachable server is reported before the session starts.
            self._container.start_encoding()
        except (av.error.FFmpegError, OSError) as exc:
            self._container.close()
            raise OutputError(f"{url}: cannot connect: {_one_line(exc)}") from exc
        except BaseException:
            self._container.close()
            if self._sound is not None:
                self._sound.close()
            raise
        self._closed = False
        if self._sound is not None:
            self._sound.start()

    def write(self, packet: Packet) -> None:
        self._start = packet.captured_at if self._start is None else self._start
        try:
            self._container.mux(self._encoder.encode(packet.image, packet.captured_at))
            self._send_sound()
        except (av.error.FFmpegError, OSError, ValueError) as exc:
            self._abandon()
            raise OutputError(f"{self.url}: cannot send: {_one_line(exc)}") from exc

    def _send_sound(self, until: float = math.inf) -> None:
        if self._sound is None or self._audio is None or self._start is None:
            return
        for samples, second in self._sound.heard(self._start, until):
            self._container.mux(self._audio.encode(samples, second))

    def close(self) -> None:
        if self._closed:
            return
        try:
            self._container.mux(self._encoder.flush())
            if self._audio is not None:
                self._send_sound(until=self._encoder.last_seconds)
                self._container.mux(self._audio.flush())
        except (av.error.FFmpegError, OSError, ValueError):
            pass  # the receiver went away: nothing more to deliver
        self._abandon()

    def _abandon(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self._container.close()
            except (av.error.FFmpegError, OSError):
                pass
        if self._sound is not None:
            self._sound.close()


# x264's preset for a live recording (see FileOutput).
LIVE_RECORDING_PRESET = "ultrafast"


class FileOutput:
    """Records live frames to a video file, timed by their capture times (atomic).

    Args:
        path: the file; its extension picks the container.
        width, height, fps: the frames that will be written (fps is a rate hint).
        audio: live sound recorded with the frames, started here.
        watermark: a job id: every recorded frame carries the provenance
            watermark with it and the container the synthetic-media labels, as a
            swapped video file's do. None: no mark.
    """

    def __init__(
        self,
        path: str | Path,
        width: int,
        height: int,
        fps: float,
        *,
        audio: AudioCapture | None = None,
        watermark: str | None = None,
    ) -> None:
        self.path = Path(path)
        self._watermark = watermark
        self._size = (width, height)
        self._sound = _Sound(audio) if audio is not None else None
        try:
            self._writer = VideoWriter(
                self.path,
                width=width,
                height=height,
                fps=Fraction(fps).limit_denominator(1001),
                time_base=_STREAM_TIME_BASE,
                # The encoder shares the CPU with the swap: with veryfast a 720p30
                # session on 2 cores dropped 222 of 901 frames (p50 latency 117 ms);
                # with ultrafast 17 (47 ms), at 2.8 times the file size.
                preset=LIVE_RECORDING_PRESET,
                live_audio=self._sound.rate_and_layout if self._sound is not None else None,
                metadata=video_metadata(watermark) if watermark is not None else None,
            )
        except BaseException:
            if self._sound is not None:
                self._sound.close()
            raise
        self._period = 1.0 / fps if fps > 0 else 0.0
        self._start: float | None = None
        self._last = 0.0
        if self._sound is not None:
            self._sound.start()

    def write(self, packet: Packet) -> None:
        self._start = packet.captured_at if self._start is None else self._start
        self._last = packet.captured_at - self._start
        image = _fitted(packet.image, *self._size)
        if self._watermark is not None:
            image = embed_watermark(image, self._watermark)
        self._writer.write(image, time=self._last)
        self._record_sound()

    def _record_sound(self, until: float = math.inf) -> None:
        if self._sound is None or self._start is None:
            return
        for samples, second in self._sound.heard(self._start, until):
            self._writer.write_audio(samples, second)

    def close(self) -> None:
        """Finish the file (a session without frames leaves none and says so); the
        sound ends with the last frame."""
        try:
            self._record_sound(until=self._last + self._period)
            self._writer.close()
        finally:
            if self._sound is not None:
                self._sound.close()

    def abort(self) -> None:
        self._writer.abort()
        if self._sound is not None:
            self._sound.close()
