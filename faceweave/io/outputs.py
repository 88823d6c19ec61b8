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

import logging
import math
import os
import sys
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
_V4L2_HINT = (
    "on Linux load v4l2loopback (sudo modprobe v4l2loopback devices=1 exclusive_caps=1); "
    "on Windows/macOS install OBS and start its virtual camera once"
)


class FrameOutput(Protocol):
    """Where live frames go."""

    def write(self, packet: Packet) -> None: ...

    def close(self) -> None: ...


def has_display() -> bool:
    """Whether a window can be shown (on Linux: an X11 or Wayland display is set)."""
    if sys.platform.startswith("linux"):
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


def check_output_spec(spec: str | None) -> str:
    """Cheap checks of an output spec; returns its kind (``window``, ``virtualcam``...).

    Raises:
        UsageError: a window without a display, or an unknown URL scheme.
        UnsupportedFormatError: a file with an extension faceweave does not write.
    """
    kind = _kind(spec)
    if kind == "window" and not has_display():
        raise UsageError(NO_DISPLAY)
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
        self._closed = False

    def write(self, packet: Packet) -> None:
        self._camera.send(np.ascontiguousarray(packet.image))

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
        self._start: float | None = None
        self._last_pts = -1
        self._period = 1.0 / fps if fps > 0 else 0.0

    def encode(self, image: Frame, captured_at: float) -> list[Any]:
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
        self._sound = _Sound(audio) if audio is not None else None
        self._audio: LiveAudioEncoder | None = None
        self._start: float | None = None
        is_udp = url.lower().startswith("udp://")
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
        image = packet.image
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
