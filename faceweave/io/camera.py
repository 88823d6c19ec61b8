"""Live input: a camera through OpenCV, or a video file played at its own pace.

Both are iterables of :class:`~faceweave.pipeline.stages.Packet` whose
``captured_at`` is stamped (``time.perf_counter()``) the moment the frame arrives,
so the pipeline measures capture-to-output latency from there. ``pts`` is None
(live frames have no container timestamp); ``time`` is seconds since the first frame.

:class:`FilePacer` stands in for a camera in tests and benchmarks: it sleeps until
each frame is due, and like a camera it does not wait for a slow consumer: a frame
that is more than one frame period late is dropped (counted in ``dropped``).

Example:
    >>> with Camera(0, width=1280, height=720, fps=30) as camera:  # doctest: +SKIP
    ...     for packet in camera:
    ...         show(packet.image)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.errors import InputError
from faceweave.io.image import PathLike
from faceweave.io.video import VideoReader, probe_video, upright
from faceweave.pipeline.stages import Packet

__all__ = ["Camera", "FilePacer", "LiveSource", "Mirrored"]

# A camera that returns no frame this many times in a row is gone (unplugged, closed).
_MAX_READ_FAILURES = 30
# At a session's start, the first frame and every read after it that returns within
# half a frame period are frames the device or the stream had buffered (a live one is
# waited for: half a period on average): skipped, for at most _BUFFERED_MAX_S.
_BUFFERED_MAX_S = 3.0
# How long close() waits for a read in progress to return before it leaves the device
# to that read (see Camera.close).
_CLOSE_WAIT_S = 0.5


class LiveSource:
    """Common surface of live inputs: size, rate, counters, context manager, iteration."""

    width: int
    height: int
    fps: float
    captured: int = 0  # frames that arrived
    dropped: int = 0  # frames dropped before entering the pipeline (late file frames)
    lost: bool = False  # a camera that stopped giving frames (a file's end is no loss)

    def __iter__(self) -> Iterator[Packet]:  # pragma: no cover - overridden
        raise NotImplementedError

    def waiting_s(self) -> float:
        """How long the read in progress has waited for its frame (0 when none waits):
        a camera whose stream stalls blocks in its read without an error."""
        return 0.0

    def close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def __enter__(self) -> LiveSource:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Camera(LiveSource):
    """A camera (or any source ``cv2.VideoCapture`` opens) as a stream of packets.

    Args:
        device: camera index (0 is the default camera) or a device path / URL.
        width: requested frame width; the driver may pick the nearest it supports.
        height: requested frame height.
        fps: requested frame rate.

    Raises:
        InputError: the device cannot be opened (missing, or busy in another program).
    """

    def __init__(
        self,
        device: int | str,
        *,
        width: int | None = None,
        height: int | None = None,
        fps: float | None = None,
    ) -> None:
        self.device = device
        self._capture = cv2.VideoCapture(device)
        if not self._capture.isOpened():
            self._capture.release()
            name = f"camera {device}" if isinstance(device, int) else f"{device}"
            raise InputError(
                f"{name}: cannot open the camera (no such device, no permission, "
                "or in use by another program)"
            )
        if width:
            self._capture.set(cv2.CAP_PROP_FRAME_WIDTH, width)
        if height:
            self._capture.set(cv2.CAP_PROP_FRAME_HEIGHT, height)
        if fps:
            self._capture.set(cv2.CAP_PROP_FPS, fps)
        self.width = int(self._capture.get(cv2.CAP_PROP_FRAME_WIDTH)) or (width or 640)
        self.height = int(self._capture.get(cv2.CAP_PROP_FRAME_HEIGHT)) or (height or 480)
        self.fps = float(self._capture.get(cv2.CAP_PROP_FPS)) or float(fps or 30.0)
        self._closed = False
        self._released = False
        # Held while a read is in progress: the device is released only between reads.
        self._reading = threading.Lock()
        self._read_since: float | None = None

    def waiting_s(self) -> float:
        since = self._read_since
        return 0.0 if since is None else time.perf_counter() - since

    def _read(self) -> tuple[bool, NDArray[np.uint8] | None]:
        with self._reading:
            if self._closed:
                self._release()
                return False, None
            self._read_since = time.perf_counter()
            try:
                ok, image = self._capture.read()
            finally:
                self._read_since = None
            if self._closed:  # closed while this read waited: close() left it to us
                self._release()
        return ok, image

    def __iter__(self) -> Iterator[Packet]:
        start: float | None = None
        failures = 0
        index = 0
        # Frames the device (or a network stream's buffer) held before the session
        # read them: taken at once, not waited for. They are skipped (counted as
        # dropped): the first frame a session showed had been 1.7 s old.
        buffered = not self._is_file()
        at_once = 0.5 / max(self.fps, 1.0)
        began = time.perf_counter()
        while not self._closed:
            asked = time.perf_counter()
            ok, image = self._read()
            now = time.perf_counter()
            if self._closed:
                return
            if buffered and ok and image is not None:
                # (The first read is skipped either way: a stream's first one is slow,
                # its buffer behind it.)
                first = self.dropped == 0
                if (first or now - asked < at_once) and now - began < _BUFFERED_MAX_S:
                    self.dropped += 1
                    continue
                buffered = False
            if not ok or image is None:
                failures += 1
                if failures >= _MAX_READ_FAILURES:
                    # (A video file given as the device ends; --input plays one.)
                    self.lost = not self._is_file()
                    return
                continue
            failures = 0
            start = now if start is None else start
            self.captured += 1
            if image.ndim == 2:
                image = cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
            yield Packet(
                index=index,
                pts=None,
                time=now - start,
                image=np.ascontiguousarray(image[:, :, :3]),
                captured_at=now,
            )
            index += 1

    def _is_file(self) -> bool:
        return isinstance(self.device, str) and Path(self.device).is_file()

    def close(self) -> None:
        """Release the device. Safe to call twice, from any thread.

        A read still waiting for a stalled stream's next frame cannot be cut short, and
        releasing the device under it crashed the process (OpenCV's FFmpeg backend;
        the recording was lost with it): after ``_CLOSE_WAIT_S`` the release is left to
        that read, for when it returns.
        """
        if self._closed:
            return
        self._closed = True
        if self._reading.acquire(timeout=_CLOSE_WAIT_S):
            try:
                self._release()
            finally:
                self._reading.release()

    def _release(self) -> None:
        if not self._released:
            self._released = True
            self._capture.release()


class FilePacer(LiveSource):
    """A video file played at its own frame rate, as if it were a camera.

    Args:
        path: the video file.
        loop: start again at the end instead of stopping.
        realtime: sleep until each frame is due; False yields as fast as it decodes.

    Attributes:
        dropped: frames skipped because they were already more than a frame late.

    Raises:
        InputError: the file cannot be read or has no video stream.
    """

    def __init__(self, path: PathLike, *, loop: bool = False, realtime: bool = True) -> None:
        self.path = Path(path)
        self.loop = loop
        self.realtime = realtime
        # A phone video stored sideways plays upright, as a player shows it (and as the
        # file job reads it): its frames are turned by the display rotation.
        self.rotation = probe_video(path).rotation
        self._reader = VideoReader(path)
        info = self._reader.info
        sideways = self.rotation in (90, 270)
        self.width, self.height = (
            (info.height, info.width) if sideways else (info.width, info.height)
        )
        self.fps = info.fps or 30.0
        self._closed = False
        # perf_counter of media time 0 of each pass (the file's own sound follows it)
        self.loop_origins: list[float] = []
        self.finished = False

    def __iter__(self) -> Iterator[Packet]:
        try:
            yield from self._play()
        finally:
            self.finished = True

    def _play(self) -> Iterator[Packet]:
        period = 1.0 / self.fps
        start: float | None = None
        offset = 0.0  # media time of the current loop's start
        index = 0
        while not self._closed:
            last = 0.0
            played = 0
            for frame in self._reader:
                played += 1
                due_media = offset + frame.time
                last = frame.time
                if start is None:
                    start = time.perf_counter() - due_media
                if played == 1:
                    self.loop_origins.append(start + offset)
                due = start + due_media
                now = time.perf_counter()
                if self.realtime:
                    if now < due:
                        time.sleep(due - now)
                        now = time.perf_counter()
                    elif now - due > period:
                        self.dropped += 1  # a camera would have overwritten it by now
                        continue
                self.captured += 1
                image = upright(frame.image, self.rotation)
                # Played in real time, a frame was captured when it was due, as a camera's
                # is when it is exposed: stamped when read, one late by a few ms (the
                # models loading) had been recorded 8 ms after the one before it.
                stamp = due if self.realtime else now
                yield Packet(index=index, pts=None, time=due_media, image=image, captured_at=stamp)
                index += 1
                if self._closed:
                    return
            if not self.loop or played == 0:  # a file with no frame to play loops forever
                return
            offset += last + period
            self._reader.close()
            self._reader = VideoReader(self.path)

    def close(self) -> None:
        """Release the file. Safe to call twice."""
        self.finished = True
        if not self._closed:
            self._closed = True
            self._reader.close()


class Mirrored(LiveSource):
    """Another live source flipped left to right, as a mirror (a selfie view).

    Sizes, rate and counters are the wrapped source's; closing closes it.
    """

    def __init__(self, source: LiveSource) -> None:
        self.source = source
        self.width, self.height, self.fps = source.width, source.height, source.fps

    def __iter__(self) -> Iterator[Packet]:
        for packet in self.source:
            self.captured, self.dropped = self.source.captured, self.source.dropped
            packet.image = cv2.flip(packet.image, 1)
            yield packet
        self.captured, self.dropped = self.source.captured, self.source.dropped
        self.lost = self.source.lost

    def waiting_s(self) -> float:
        return self.source.waiting_s()

    def close(self) -> None:
        self.source.close()
