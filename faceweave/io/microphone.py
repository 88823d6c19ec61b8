"""Live sound: a microphone (or any FFmpeg input device) captured beside the camera.

``faceweave live --audio DEVICE`` records or streams it with the swapped picture. A
device is named ``FORMAT:NAME``, as FFmpeg names its input devices: ``alsa:default``,
``alsa:hw:1,0``, ``pulse:default``, ``avfoundation::0`` (macOS),
``dshow:audio=Microphone (USB)`` (Windows), or ``lavfi:sine=frequency=440`` (FFmpeg's
test tone, played at real time as a device would); ``default`` is the platform's usual
microphone. Which formats exist depends on the FFmpeg inside PyAV
(:func:`input_formats`).

Chunks of samples are read in a thread and stamped on the camera's clock
(``time.perf_counter()``) with the moment their first sample was heard: the device's
own sample count since the first chunk, set again when that and this clock part by
more than :data:`RESYNC_S` (a device that stalled, or one whose clock runs fast).
:meth:`AudioCapture.of_file` plays a video file's own sound instead (``--audio
input``), each chunk stamped when the :class:`~faceweave.io.camera.FilePacer`
playing the file's picture shows the frame of its time.

Example:
    >>> with AudioCapture("alsa:default") as microphone:  # doctest: +SKIP
    ...     microphone.start()
    ...     chunks = microphone.take()  # everything heard since the last take()
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

import av
import av.error
import numpy as np
from numpy.typing import NDArray

from faceweave.errors import InputError, UsageError
from faceweave.io.image import _one_line
from faceweave.io.video import _video_start

__all__ = ["RESYNC_S", "AudioCapture", "AudioChunk", "input_formats", "parse_device"]

# The device's sample clock and perf_counter may part by this much before the stamps
# follow perf_counter again.
RESYNC_S = 0.2
# FFmpeg's input devices (and lavfi's virtual sources) that capture sound.
_DEVICE_FORMATS = ("alsa", "pulse", "oss", "jack", "sndio", "avfoundation", "dshow", "lavfi")
# Virtual sources produce samples as fast as they are read: they are paced to real time.
_VIRTUAL_FORMATS = ("lavfi",)
# PyAV's Linux wheels carry their own ALSA library, which looks for its configuration
# where it was built; the system's is the one that names the devices.
_SYSTEM_ALSA_CONFIG = "/usr/share/alsa/alsa.conf"


@dataclass(frozen=True)
class AudioChunk:
    """Samples heard together.

    Attributes:
        samples: float32, planar, one row per channel, in -1..1.
        rate: samples per second.
        captured_at: ``time.perf_counter()`` when the first sample was heard.
    """

    samples: NDArray[np.float32]
    rate: int
    captured_at: float

    @property
    def seconds(self) -> float:
        return self.samples.shape[1] / self.rate


def input_formats() -> list[str]:
    """The sound input formats the FFmpeg in PyAV has, of :data:`_DEVICE_FORMATS`."""
    return [name for name in _DEVICE_FORMATS if name in av.formats_available]


def parse_device(spec: str) -> tuple[str, str]:
    """``(format, name)`` of a device spec (see the module's docstring).

    Raises:
        UsageError: an empty name, or a format this FFmpeg lacks.
    """
    if spec == "default":
        if sys.platform == "darwin":
            return "avfoundation", ":0"
        if sys.platform.startswith("win"):
            raise UsageError(
                "name the microphone on Windows: --audio 'dshow:audio=NAME' "
                "(ffmpeg -list_devices true -f dshow -i dummy lists them)"
            )
        return ("pulse" if "pulse" in av.formats_available else "alsa"), "default"
    kind, _, name = spec.partition(":")
    available = input_formats()
    if not name or kind not in _DEVICE_FORMATS:
        raise UsageError(
            f"audio device {spec!r}: expected FORMAT:NAME with FORMAT one of "
            f"{', '.join(available)} (as alsa:default), or default"
        )
    if kind not in available:
        raise UsageError(
            f"audio device {spec!r}: this build of FFmpeg has no {kind} input; "
            f"it has {', '.join(available) or 'none'}"
        )
    return kind, name


class AudioCapture:
    """Sound from an input device, read in a thread once :meth:`start` is called.

    Args:
        spec: the device (see the module's docstring).
        max_seconds: sound kept for :meth:`take` (an output takes it with each frame:
            enough for a camera that stalls for seconds); older chunks are dropped
            (counted in ``dropped_s``) when nobody takes them.

    Attributes:
        rate: samples per second.
        channels: channel count.
        layout: FFmpeg's name of the channel layout (``mono``, ``stereo``...).
        dropped_s: seconds of sound dropped because nobody took them.
        error: why capture ended early (one line), or None.

    Raises:
        UsageError: a malformed spec or a format FFmpeg lacks.
        InputError: the device cannot be opened or gives no sound.
    """

    def __init__(
        self, spec: str, *, max_seconds: float = 30.0, paced_by: PacedFile | None = None
    ) -> None:
        self.spec = spec
        self._pacer = paced_by
        self._virtual = False
        if paced_by is not None:
            kind, name, what = None, spec, f"{spec}: no sound to play"
        else:
            kind, name = parse_device(spec)
            what = f"audio device {spec} gives no sound"
            if kind == "alsa" and "ALSA_CONFIG_PATH" not in os.environ:
                if os.path.exists(_SYSTEM_ALSA_CONFIG):
                    os.environ["ALSA_CONFIG_PATH"] = _SYSTEM_ALSA_CONFIG
            self._virtual = kind in _VIRTUAL_FORMATS
        try:
            self._container: Any = av.open(name, format=kind)
        except (av.error.FFmpegError, OSError, ValueError) as exc:
            raise InputError(f"cannot open audio device {spec}: {_reason(exc)}") from exc
        if not self._container.streams.audio:
            self._container.close()
            raise InputError(what)
        self._stream = self._container.streams.audio[0]
        # A file's sound is timed from its picture's first frame, as the pacer plays it.
        self._media_origin = _video_start(self._container)
        context = self._stream.codec_context
        self.rate = int(context.sample_rate or 48000)
        # More than two channels are mixed down to stereo.
        self.layout = _layout_name(context.layout.nb_channels if context.layout else 1)
        self.channels = 1 if self.layout == "mono" else 2
        self._resampler = av.AudioResampler(format="fltp", layout=self.layout, rate=self.rate)
        self.max_seconds = max_seconds
        self.dropped_s = 0.0
        self.error: str | None = None
        self._chunks: collections.deque[AudioChunk] = collections.deque()
        self._buffered_s = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False

    def start(self) -> None:
        """Begin capturing (once; later calls do nothing)."""
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._run, name="faceweave-audio", daemon=True)
            self._thread.start()

    def take(self) -> list[AudioChunk]:
        """The chunks heard since the last call, oldest first."""
        with self._lock:
            chunks = list(self._chunks)
            self._chunks.clear()
            self._buffered_s = 0.0
        return chunks

    def close(self) -> None:
        """Stop capturing and close the device. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._thread is not None:
            # A device read returns within one period (tens of ms); the thread then sees
            # the stop and closes the device itself.
            self._thread.join(timeout=2.0)
        else:
            self._container.close()

    def __enter__(self) -> AudioCapture:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @classmethod
    def of_file(cls, path: str | os.PathLike[str], pacer: PacedFile) -> AudioCapture:
        """A video file's own sound (its first audio track), played as ``pacer`` plays
        the file's picture: each chunk is heard when the frames of its time are shown,
        loop after loop.

        Raises:
            InputError: the file has no sound or cannot be read.
        """
        return cls(str(path), paced_by=pacer)

    def _run(self) -> None:
        if self._pacer is not None:
            self._run_with(self._pacer)
            return
        origin: float | None = None  # perf_counter of the first sample (sample clock)
        count = 0  # samples since then
        began = time.perf_counter()
        try:
            for frame in self._container.decode(self._stream):
                if self._stop.is_set():
                    break
                for ready in self._resampler.resample(frame):
                    samples = np.ascontiguousarray(ready.to_ndarray(), np.float32)
                    n = samples.shape[1]
                    if self._virtual and ready.time is not None:
                        # Heard once its last sample is due, as from a device.
                        due = began + ready.time + n / self.rate
                        pause = due - time.perf_counter()
                        if pause > 0 and self._stop.wait(pause):
                            return
                    heard = time.perf_counter() - n / self.rate
                    if origin is None or abs(heard - (origin + count / self.rate)) > RESYNC_S:
                        origin = heard - count / self.rate
                    self._push(AudioChunk(samples, self.rate, origin + count / self.rate))
                    count += n
        except (av.error.FFmpegError, OSError, ValueError) as exc:
            if not self._stop.is_set():
                self.error = f"audio device {self.spec} stopped: {_one_line(exc)}"
        finally:
            self._container.close()

    def _run_with(self, pacer: PacedFile) -> None:
        """A file's sound, each chunk heard when the pacer shows its time's frame."""
        loop = 0
        try:
            while not self._stop.is_set():
                origin = self._loop_origin(pacer, loop)
                if origin is None:
                    return
                for frame in self._container.decode(self._stream):
                    ended = False
                    for ready in self._resampler.resample(frame):
                        if ready.time is None:
                            continue
                        samples = np.ascontiguousarray(ready.to_ndarray(), np.float32)
                        heard = origin + ready.time - self._media_origin
                        # Sound from before the picture's first frame belongs to no pass.
                        early = round((origin - heard) * self.rate)
                        if early >= samples.shape[1]:
                            continue
                        if early > 0:
                            samples, heard = samples[:, early:], heard + early / self.rate
                        due = heard + samples.shape[1] / self.rate
                        pause = due - time.perf_counter()
                        if pause > 0 and self._stop.wait(pause):
                            return
                        if self._stop.is_set():
                            return
                        # A pass's sound ends where the next pass's picture starts: sound
                        # running on past the last frame (AAC's padding is enough) had
                        # pushed each pass later than the last.
                        end = self._next_origin(pacer, loop)
                        if end is not None and heard + samples.shape[1] / self.rate > end:
                            samples = samples[:, : max(0, round((end - heard) * self.rate))]
                            ended = True
                        if samples.shape[1]:
                            self._push(AudioChunk(samples, self.rate, heard))
                        if ended:
                            break
                    if ended:
                        break
                if not pacer.loop:
                    return
                loop += 1
                self._container.seek(0)
                self._resampler = av.AudioResampler(
                    format="fltp", layout=self.layout, rate=self.rate
                )
        except (av.error.FFmpegError, OSError, ValueError) as exc:
            if not self._stop.is_set():
                self.error = f"{self.spec}: sound stopped: {_one_line(exc)}"
        finally:
            self._container.close()

    @staticmethod
    def _next_origin(pacer: PacedFile, loop: int) -> float | None:
        """When the pass after ``loop`` starts, once the pacer knows it."""
        origins = pacer.loop_origins
        return origins[loop + 1] if len(origins) > loop + 1 else None

    def _loop_origin(self, pacer: PacedFile, loop: int) -> float | None:
        """When the pacer shows media time 0 of its ``loop``-th pass (None: it ended)."""
        while len(pacer.loop_origins) <= loop:
            if pacer.finished or self._stop.wait(0.005):
                return None
        return pacer.loop_origins[loop]

    def _push(self, chunk: AudioChunk) -> None:
        with self._lock:
            self._chunks.append(chunk)
            self._buffered_s += chunk.seconds
            while self._buffered_s > self.max_seconds and len(self._chunks) > 1:
                old = self._chunks.popleft()
                self._buffered_s -= old.seconds
                self.dropped_s += old.seconds


class PacedFile(Protocol):
    """What :meth:`AudioCapture.of_file` needs of a file played at real time
    (:class:`~faceweave.io.camera.FilePacer`)."""

    loop: bool
    # perf_counter of media time 0 of each pass over the file, as it starts
    loop_origins: list[float]
    # no further pass will start
    finished: bool


def _reason(exc: BaseException) -> str:
    """FFmpeg's words for an error, without the error number PyAV puts first (a
    filter's "[Errno 1279870712] Filter not found")."""
    reason = getattr(exc, "strerror", None)
    if isinstance(reason, str) and reason.strip():
        return " ".join(reason.split())
    return _one_line(exc)


def _layout_name(channels: int) -> str:
    return {1: "mono", 2: "stereo"}.get(channels, "stereo")
