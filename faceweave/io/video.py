"""Video files through PyAV: decode to :data:`~faceweave.types.Frame`, encode them back.

Reading decodes with FFmpeg's threads and hands out :class:`VideoFrame` objects that
keep the stream's own timestamps (``pts``), so variable-frame-rate video stays in sync
with its audio. A truncated or partly corrupt file is read as far as it decodes: the
reader logs one warning on the ``faceweave`` logger, records it in
:attr:`VideoReader.warnings` and ends the stream cleanly.

Writing encodes H.264 (``libx264``) by default, VP9 for ``.webm``. A source file's audio
tracks (all of them) are copied packet by packet, unchanged, interleaved with the video
as it is written; where the output container cannot hold a track's audio codec it is
re-encoded (AAC, or Opus for WebM) and the writer says so in
:attr:`VideoWriter.warnings`. The display rotation (phone videos) is written back as a
display matrix. The file is written to a hidden temporary file beside the destination
(``.<name>.<pid>-<random>.tmp``) and moved over it only when complete, so an error or Ctrl-C
never leaves half a video behind.

Timelines: every time in seconds here (``VideoFrame.time``, ``start``/``end``,
``trim_start``/``trim_end``) is measured from the start of the source's video stream,
so that trimming video and audio by the same numbers keeps them in sync.

Example:
    >>> stats = transcode("in.mp4", "out.mp4", lambda f: f.image)  # doctest: +SKIP
    >>> with VideoReader("in.mp4", start=2.0, end=4.0) as reader:  # doctest: +SKIP
    ...     for frame in reader:
    ...         print(frame.index, frame.time, frame.image.shape)
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import os
import time as _time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import av
import av.error
import cv2
import numpy as np
from av.video.stream import VideoStream
from numpy.typing import NDArray

from faceweave.errors import InputError, OutputError, UnsupportedFormatError
from faceweave.io.image import (
    PathLike,
    _check_directory,
    _check_frame,
    _fsync_directory,
    _one_line,
    _temp_file,
    _temp_name,
    check_input_file,
    list_files,
)
from faceweave.types import Frame, is_real_number

__all__ = [
    "DEFAULT_CRF",
    "DEFAULT_PRESET",
    "LiveAudioEncoder",
    "VIDEO_EXTENSIONS",
    "VideoFrame",
    "VideoInfo",
    "VideoReader",
    "VideoWriter",
    "check_time_range",
    "list_videos",
    "probe_video",
    "transcode",
    "upright",
    "video_extension",
]

logger = logging.getLogger("faceweave")

DEFAULT_PRESET = "auto"  # superfast up to 720p (AUTO_PRESET_MAX_PIXELS), ultrafast above
AUTO_PRESET_MAX_PIXELS = 1280 * 720
DEFAULT_CRF = 18  # x264 scale: 0 lossless, 18 visually lossless, 23 x264's default, 51 worst

# extension -> (FFmpeg muxer, default video encoder, audio encoder when copying is impossible)
_CONTAINERS: dict[str, tuple[str, str, str]] = {
    ".mp4": ("mp4", "libx264", "aac"),
    ".mov": ("mov", "libx264", "aac"),
    ".mkv": ("matroska", "libx264", "aac"),
    ".webm": ("webm", "libvpx-vp9", "libopus"),
    ".avi": ("avi", "mpeg4", "aac"),  # MPEG-4 Part 2 (Xvid-like): what AVI players expect
}
VIDEO_EXTENSIONS = tuple(_CONTAINERS)
_HALF = Fraction(1, 2)
# Each container's video encoder when none is asked for.
DEFAULT_VIDEO_ENCODERS = {extension: codec for extension, (_, codec, _) in _CONTAINERS.items()}
# Audio codecs copied as they are into MP4 and MOV: FFmpeg's muxers list more (Opus,
# FLAC, PCM), but refuse them when the file is written, or write files players skip.
# The rest are re-encoded. Matroska, WebM and AVI copy what their muxers list.
_COPY_AUDIO: dict[str, frozenset[str]] = {
    "mp4": frozenset({"aac", "mp3", "ac3", "eac3", "alac"}),
    "mov": frozenset({"aac", "mp3", "ac3", "eac3", "alac", "pcm_s16le", "pcm_s24le"}),
}

# The layout an audio encoder is given for a source's channel count.
_USUAL_LAYOUTS = {
    1: "mono",
    2: "stereo",
    3: "3.0",
    4: "quad",
    5: "5.0",
    6: "5.1",
    7: "6.1",
    8: "7.1",
}
# Errors FFmpeg raises on damaged data, as opposed to a missing file or a bug.
_DATA_ERRORS = (av.error.InvalidDataError, av.error.EOFError, av.error.FFmpegError, OSError)
# ISO 639-2 languages FFmpeg's QuickTime writer knows by their other code (it takes
# "ger" and "fra", not "deu" and "fre"); MP4 and Matroska take either.
_MOV_LANGUAGES = {
    "deu": "ger",
    "fre": "fra",
    "zho": "chi",
    "cze": "ces",
    "nld": "dut",
    "ell": "gre",
    "rum": "ron",
    "slo": "slk",
    "fas": "per",
    "isl": "ice",
    "sqi": "alb",
    "hye": "arm",
    "eus": "baq",
    "mya": "bur",
    "kat": "geo",
    "mkd": "mac",
    "msa": "may",
    "bod": "tib",
    "cym": "wel",
}
# Samples an encoder puts before the sound (FFmpeg's AAC: 1024), which MP4 and
# Matroska skip by their timestamps and AVI plays.
_ENCODER_PRIMING = {"aac": 1024}
# Audio frames this far from the end of the last one follow it (rounded timestamps).
_AUDIO_JITTER_S = 0.01
# An AVI track starting this much after the picture is re-encoded, led by silence.
_AVI_TIMING_TOLERANCE_S = 0.02
# How far ahead of the video audio packets are muxed; the muxer interleaves the rest.
_AUDIO_LEAD_S = 0.5
# A video stream ending this much (or 3 frames) before its announced length is truncated.
_TRUNCATION_TOLERANCE_S = 0.5
_X264_PRESETS = (
    "ultrafast",
    "superfast",
    "veryfast",
    "faster",
    "fast",
    "medium",
    "slow",
    "slower",
    "veryslow",
    "placebo",
)
# What --preset takes: x264's presets (other encoders map them to their own speeds), or
# auto (DEFAULT_PRESET).
VIDEO_PRESETS = (DEFAULT_PRESET, *_X264_PRESETS)


@dataclass(frozen=True)
class VideoInfo:
    """What :func:`probe_video` finds in a file.

    Attributes:
        width: coded frame width in pixels (before rotation).
        height: coded frame height in pixels (before rotation).
        fps: average frame rate; 0.0 when the container does not say.
        frame_count: frames in the video stream as the container reports them, or an
            estimate from duration * fps; 0 when unknown.
        duration: seconds; 0.0 when unknown.
        codec: video codec name (``"h264"``, ``"vp9"``...).
        has_audio: the file has an audio stream.
        audio_codec: its codec name, or None.
        rotation: clockwise degrees (0, 90, 180 or 270) a player turns the picture for
            display, from the display matrix (the old ``rotate`` tag convention).
        time_base: the video stream's time base: one ``pts`` tick in seconds.
    """

    width: int
    height: int
    fps: float
    frame_count: int
    duration: float
    codec: str
    has_audio: bool
    audio_codec: str | None
    rotation: int
    time_base: Fraction


@dataclass
class VideoFrame:
    """One decoded picture with its timestamp.

    Attributes:
        image: the picture, not rotated (as stored in the file).
        pts: presentation timestamp in the video stream's time base, as in the file;
            only a missing or backward timestamp (AVI with B-frames) is replaced by the
            previous one plus one frame, so ``pts`` always increases.
        time: seconds from the start of the video stream.
        index: 0, 1, 2... in the order the reader yields frames.
        duration: seconds it shows for, where the file says (an animated image's
            frames); None for a video's.

    Shape:
        - image: :math:`(H, W, 3)`, ``uint8``, BGR.
    """

    image: Frame
    pts: int
    time: float
    index: int
    duration: float | None = None


def check_time_range(start: float | None, end: float | None) -> None:
    """A reader's ``start`` and ``end`` seconds: finite, ``start`` 0 or more, ``end``
    over 0 and after ``start`` (None: the clip's own).

    Raises:
        InputError: any other.
    """
    if start is not None and not (is_real_number(start) and 0 <= start < float("inf")):
        raise InputError(f"start must be a number of 0 seconds or more, got {start!r}")
    if end is not None and not (is_real_number(end) and 0 < end < float("inf")):
        raise InputError(f"end must be a number of seconds over 0, got {end!r}")
    if end is not None and start is not None and end <= start:
        raise InputError(f"end ({end} s) must be after start ({start} s)")


def video_extension(path: PathLike) -> str:
    """The lower-case extension of ``path`` if faceweave writes that container.

    Raises:
        UnsupportedFormatError: any other extension.
    """
    extension = Path(path).suffix.lower()
    if extension not in _CONTAINERS:
        supported = ", ".join(VIDEO_EXTENSIONS)
        shown = extension or "no extension"
        raise UnsupportedFormatError(f"{path}: unsupported video format ({shown}); use {supported}")
    return extension


# cv2.rotate's code that turns a frame stored with a clockwise display rotation upright.
_UPRIGHT = {90: cv2.ROTATE_90_CLOCKWISE, 180: cv2.ROTATE_180, 270: cv2.ROTATE_90_COUNTERCLOCKWISE}


def upright(image: Frame, rotation: int) -> Frame:
    """A frame stored with a clockwise display ``rotation`` turned as a player shows it."""
    turn = _UPRIGHT.get(rotation % 360)
    return image if turn is None else cv2.rotate(image, turn)


def _tagged_end(stream: Any) -> float | None:
    """The second a stream ends at, from its ``DURATION`` tag (``HH:MM:SS.fraction``, as
    FFmpeg's Matroska muxer writes per track), or None."""
    text = (stream.metadata or {}).get("DURATION")
    if not isinstance(text, str):
        return None
    hours, _, rest = text.strip().partition(":")
    minutes, _, secs = rest.partition(":")
    try:
        seconds = int(hours) * 3600 + int(minutes) * 60 + float(secs)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds > 0 else None


def list_videos(directory: PathLike) -> list[Path]:
    """The video files (:data:`VIDEO_EXTENSIONS`, any case) directly inside
    ``directory``, sorted by name; hidden files and sub-directories are skipped.

    Raises:
        InputError: ``directory`` is missing or not a directory.
    """
    return list_files(directory, _CONTAINERS)


def probe_video(path: PathLike) -> VideoInfo:
    """Describe a video file: size, rate, length, codecs and rotation.

    The rotation is read from the first decoded frame (FFmpeg attaches the stream's
    display matrix to frames), so probing decodes one frame.

    Raises:
        InputError: the file is missing, unreadable or has no video stream.
        UnsupportedFormatError: not a container or video codec FFmpeg can read.
    """
    with VideoReader(path) as reader:
        rotation = 0
        with contextlib.suppress(StopIteration):
            next(iter(reader))
            rotation = reader.rotation
        return reader._info(rotation)


class VideoReader:
    """Decode a video file frame by frame; a context manager and an iterable.

    Args:
        path: the video file (or an FFmpeg URL).
        start: first second to yield (inclusive), from the start of the video stream.
            The reader seeks to the key frame before it and drops earlier frames.
        end: stop before this second (exclusive).
        threads: let FFmpeg decode with several threads (frame and slice threading).

    Attributes:
        warnings: one line per problem met while decoding (damaged data, seek failure).
        decode_errors: how many packets failed to decode.
        rotation: clockwise display rotation in degrees, known after the first frame.
        start_pts: the raw ``pts`` that maps to ``start`` (the stream start without trim).

    Raises:
        InputError: the file is missing, unreadable or has no video stream.
        UnsupportedFormatError: not a container or video codec FFmpeg can read.

    Example:
        >>> with VideoReader("clip.mp4", end=1.0) as reader:  # doctest: +SKIP
        ...     images = [frame.image for frame in reader]
    """

    def __init__(
        self,
        path: PathLike,
        *,
        start: float | None = None,
        end: float | None = None,
        threads: bool = True,
    ) -> None:
        self.path = path
        check_time_range(start, end)
        self.start = start
        self.end = end
        self.warnings: list[str] = []
        self.decode_errors = 0
        self.rotation = 0
        self._container = _open_input(path)
        try:
            self._stream = _video_stream(self._container, path)
            if threads:
                self._stream.thread_type = "AUTO"
        except BaseException:
            self._container.close()
            raise
        self._time_base: Fraction = self._stream.time_base or Fraction(1, 90000)
        self._origin_pts = self._stream.start_time or 0
        self.start_pts = self._origin_pts + (
            round(start / self._time_base) if start is not None else 0
        )
        self._logged = False
        self._first_dts: int | None = None  # the first packet's decode time (see _frames)
        self._closed = False

    @property
    def time_base(self) -> Fraction:
        """One ``pts`` tick of the video stream, in seconds."""
        return self._time_base

    @property
    def average_rate(self) -> Fraction | None:
        """The average frame rate as a fraction, None when unknown."""
        rate = self._stream.average_rate or self._stream.guessed_rate
        return Fraction(rate) if rate else None

    @property
    def info(self) -> VideoInfo:
        """Stream properties (rotation is 0 until a frame was decoded; see :func:`probe_video`)."""
        return self._info(self.rotation)

    def _info(self, rotation: int) -> VideoInfo:
        stream = self._stream
        rate = self.average_rate
        fps = float(rate) if rate else 0.0
        tagged = _tagged_end(stream)
        if stream.duration is not None:
            duration = float(stream.duration * self._time_base)
        elif tagged is not None:  # the video's own length, not its longest track's
            duration = tagged
        elif self._container.duration is not None:
            duration = self._container.duration / av.time_base
        else:
            duration = 0.0
        frame_count = stream.frames or (round(duration * fps) if fps else 0)
        audio = self._container.streams.audio
        return VideoInfo(
            width=stream.codec_context.width,
            height=stream.codec_context.height,
            fps=fps,
            frame_count=frame_count,
            duration=duration,
            codec=stream.codec_context.name,
            has_audio=bool(audio),
            audio_codec=audio[0].codec_context.name if audio else None,
            rotation=rotation,
            time_base=self._time_base,
        )

    def __enter__(self) -> VideoReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Release the file. Safe to call twice."""
        if not self._closed:
            self._closed = True
            self._container.close()

    def __iter__(self) -> Iterator[VideoFrame]:
        if self._closed:
            raise InputError(f"{self.path}: reader is closed")
        self._seek_to_start()
        index = 0
        last_pts: int | None = None
        end_pts = (
            self._origin_pts + round(self.end / self._time_base) if self.end is not None else None
        )
        frame_ticks = self._frame_ticks()
        # AVI stores a frame's decode time, not its presentation time: after B-frames an
        # H.264 stream's timestamps go back and forth (the frames ran up to two frames
        # late against the audio). Its frames are evenly spaced: they are counted.
        counted = self._container.format.name == "avi"
        previous: int | None = None  # the last frame decoded's (kept or not)
        self._first_dts = None
        for av_frame in self._frames():
            if counted:
                # From where the seek landed: the first packet's decode time is the
                # key frame's place in the stream (its frame's own timestamp is later
                # by the B-frame delay). Counted from the last frame kept, a trimmed
                # AVI had counted every frame as its first, and none came out.
                first = self._origin_pts if self._first_dts is None else self._first_dts
                pts = first if previous is None else previous + frame_ticks
            else:
                pts = av_frame.pts
            if pts is None:  # raw streams without timestamps: count frames
                pts = self._origin_pts if previous is None else previous + frame_ticks
            elif previous is not None and pts <= previous:
                # Timestamps going backwards: keep the order, step one frame.
                pts = previous + frame_ticks
            previous = pts
            if pts < self.start_pts:
                continue
            if end_pts is not None and pts >= end_pts:
                return
            if index == 0:
                self.rotation = _clockwise(av_frame.rotation)
            last_pts = pts
            image = cast(Frame, av_frame.to_ndarray(format="bgr24"))
            yield VideoFrame(
                image=image,
                pts=pts,
                time=float((pts - self._origin_pts) * self._time_base),
                index=index,
            )
            index += 1
        self._check_complete(last_pts)

    def _check_complete(self, last_pts: int | None) -> None:
        """Warn when the frames stop well before the length the header announces.

        A cut-off Matroska or fragmented file often ends without any decode error; its
        header still says how long it should be.
        """
        expected = self._expected_duration()
        if expected is None or (last_pts is None and self.start):
            return  # (no frame after a trimmed start: an empty range, not a cut file)
        if self.end is not None:
            expected = min(expected, self.end)
        reached = float((last_pts - self._origin_pts) * self._time_base) if last_pts else 0.0
        rate = self.average_rate
        tolerance = max(_TRUNCATION_TOLERANCE_S, 3 / float(rate) if rate else 0.0)
        if reached + tolerance < expected:
            self._warn(
                f"video ends at {reached:.2f} s of {expected:.2f} s (truncated file?); "
                "kept the frames that decode"
            )

    def _expected_duration(self) -> float | None:
        if self._stream.duration:
            return float(self._stream.duration * self._time_base)
        tagged = _tagged_end(self._stream)
        if tagged is not None:
            # Matroska's per-track DURATION tag: where the video ends (from time 0). The
            # file's duration is its longest track's: audio running on past the picture
            # had been read as a truncated video.
            return tagged - float(self._origin_pts * self._time_base)
        if self._container.duration:
            # Matroska's duration runs from time 0, not from the first timestamp: a file
            # whose frames start at 5 s had read as 5 s longer than it is.
            matroska = "matroska" in self._container.format.name
            start = 0 if matroska else (self._container.start_time or 0)
            origin = float(self._origin_pts * self._time_base)
            return (self._container.duration + start) / av.time_base - origin
        return None

    def _frame_ticks(self) -> int:
        rate = self.average_rate
        return max(1, round(1 / (rate * self._time_base))) if rate else 1

    def _seek_to_start(self) -> None:
        if self.start is None or self.start <= 0:
            return
        try:
            self._container.seek(self.start_pts, stream=self._stream, backward=True)
        except _DATA_ERRORS as exc:
            # Decoding from the beginning and dropping frames is slower but still right.
            self._warn(f"cannot seek to {self.start:.3f} s ({_one_line(exc)}); decoding from 0")

    def _frames(self) -> Iterator[av.VideoFrame]:
        """Decoded frames; damaged packets are skipped, a broken container ends the stream.
        The first packet's decode time is kept (``_first_dts``)."""
        packets = self._container.demux(self._stream)
        while True:
            try:
                packet = next(packets)
            except StopIteration:
                return
            except _DATA_ERRORS as exc:
                self._warn(f"stream ends early ({_one_line(exc)}); kept the frames decoded so far")
                yield from self._flush()
                return
            if self._first_dts is None and packet.size:
                self._first_dts = packet.dts
            try:
                decoded = packet.decode()
            except _DATA_ERRORS as exc:
                self.decode_errors += 1
                self._warn(f"damaged data skipped ({_one_line(exc)})")
                continue
            for av_frame in decoded:
                if av_frame.is_corrupt:
                    self._warn("damaged frame decoded with artefacts")
                yield av_frame

    def _flush(self) -> Iterator[av.VideoFrame]:
        with contextlib.suppress(*_DATA_ERRORS):
            yield from self._stream.decode(None)

    def _warn(self, message: str) -> None:
        line = f"{self.path}: {message}"
        if line not in self.warnings:
            self.warnings.append(line)
        if not self._logged:
            self._logged = True
            logger.warning("%s", line)


class VideoWriter:
    """Encode frames into a video file, atomically, optionally copying a source's audio.

    Args:
        path: destination; its extension (:data:`VIDEO_EXTENSIONS`) picks the container.
        width: frame width in pixels.
        height: frame height in pixels.
        fps: frame rate; used for frames written without a timestamp and as the
            encoder's rate-control hint. Defaults to ``1 / time_base`` when omitted.
        time_base: seconds per ``pts`` tick of :meth:`write`; pass the source stream's
            time base to keep its timestamps exactly. Defaults to ``1 / fps``.
        codec: video encoder; default ``libx264`` (``libvpx-vp9`` for ``.webm``).
        preset: x264 speed preset (``ultrafast`` ... ``veryslow``), mapped to the
            nearest setting of other encoders; ``auto`` (the default) is ``superfast``
            up to 720p and ``ultrafast`` above, where superfast alone takes half of a
            2-core machine and the job falls below real time (files are ~1.5x larger).
        crf: quality on the x264 CRF scale (0 lossless, 18 visually lossless, 51 worst),
            mapped to the equivalent of other encoders (x265 CRF+5, VP9 CRF*63/51,
            NVENC CQ, MPEG-4 qscale); None lets the encoder choose.
        pix_fmt: encoder pixel format; None: ``yuv420p``, what players take, or where
            the encoder has no such format (ProRes, x264's RGB) its own: 8-bit RGB when
            it takes that, else its first. With chroma subsampling (``yuv420p``) the
            width and height must be even: an odd one is padded by one pixel that
            repeats the last column or row, so the output is one pixel larger.
        audio_from: a file whose audio tracks (all of them, in order, with their
            language, title and disposition) are copied into the output.
        trim_start: the second of ``audio_from`` (from the start of its video stream)
            that becomes 0 in the output; audio packets before it are dropped.
        trim_end: the second of ``audio_from`` where its audio stops.
        live_audio: ``(rate, layout)`` of live sound given to :meth:`write_audio` (a
            microphone's), encoded as AAC (Opus for WebM); not with ``audio_from``.
        rotation: clockwise display rotation in degrees (a multiple of 90), written
            as a display matrix; the pixels are not rotated.
        metadata: container metadata (``title``, ``comment``...).
        encoder_options: extra FFmpeg options for the video encoder; they win over
            the ones derived from ``preset`` and ``crf``.

    Attributes:
        warnings: one line per compromise made (audio re-encoded, option ignored).
        frames_written: frames passed to :meth:`write` so far (and encoded).
        frames_dropped: frames left out: in AVI, those whose time rounds to the slot
            of the frame before (it stores one frame each 1 / fps).
        ends_at: where the output ends, in :attr:`time_base` ticks, set before
            :meth:`close`: the last frame lasts until then (a trimmed clip's end, an
            animation's held last frame). None: one frame period. AVI ignores it.
        audio_mode: ``"copy"`` (every audio track copied), ``"encode"`` (at least one
            re-encoded) or ``"none"``.

    Raises:
        UnsupportedFormatError: unknown extension, or an encoder this PyAV build lacks
            or the container cannot hold.
        InputError: bad sizes or rates, or ``audio_from`` cannot be read.
        OutputError: the directory is missing or not writable.

    Example:
        >>> with VideoWriter("out.mp4", width=640, height=480, fps=30) as writer:  # doctest: +SKIP
        ...     for image in images:
        ...         writer.write(image)
    """

    def __init__(
        self,
        path: PathLike,
        *,
        width: int,
        height: int,
        fps: float | Fraction | None = None,
        time_base: Fraction | None = None,
        codec: str | None = None,
        preset: str = DEFAULT_PRESET,
        crf: int | None = DEFAULT_CRF,
        pix_fmt: str | None = None,
        audio_from: PathLike | None = None,
        trim_start: float = 0.0,
        trim_end: float | None = None,
        live_audio: tuple[int, str] | None = None,
        rotation: int = 0,
        metadata: dict[str, str] | None = None,
        encoder_options: dict[str, str] | None = None,
    ) -> None:
        self.path = Path(path)
        extension = video_extension(self.path)
        format_name, default_codec, audio_encoder = _CONTAINERS[extension]
        _check_directory(self.path)
        if width <= 0 or height <= 0:
            raise InputError(f"frame size must be positive, got {width}x{height}")
        if rotation % 90:
            raise InputError(f"rotation must be a multiple of 90 degrees, got {rotation}")
        if trim_start < 0 or (trim_end is not None and trim_end <= trim_start):
            raise InputError(f"bad audio trim range {trim_start}..{trim_end} s")
        if live_audio is not None and audio_from is not None:
            raise InputError("a video writer takes audio from a file or live, not both")
        self._rate, self._time_base = _rate_and_time_base(fps, time_base)
        # AVI has no timestamps, only a frame counter: encode at 1/fps there, so a
        # variable frame rate becomes a constant one (frames keep their nearest slot).
        self._codec_time_base = 1 / self._rate if format_name == "avi" else self._time_base
        self.width, self.height = width, height
        self.warnings: list[str] = []
        self.frames_written = 0
        self.frames_dropped = 0
        self.audio_mode = "none"
        self._closed = True  # until the temporary file exists: nothing to clean up
        self._live_audio: LiveAudioEncoder | None = None
        self._last_pts: int | None = None
        self._held: list[av.Packet] = []  # the newest video packets, see _mux_video
        self._timed_by_dts = format_name in ("mp4", "mov")
        self._timed_by_pts = format_name in ("matroska", "webm")  # (AVI: by neither)
        self._next_pts: dict[int, int] = {}  # Matroska's: each frame's successor's pts
        self.ends_at: int | None = None
        self._first_dts: int | None = None
        self._pts_span: tuple[int, int] | None = None
        self._trim_start = trim_start
        self._trim_end = trim_end

        codec_name = codec or default_codec
        supported = _supported_codecs(format_name)
        _check_encoder(codec_name, supported, self.path)
        # By the encoder's own name: ``h264`` takes libx264's preset and crf.
        encoder = av.codec.Codec(codec_name, "w")
        codec_name = encoder.name
        pix_fmt = _encoder_pixel_format(encoder, pix_fmt)
        video_format = _pixel_format(pix_fmt)
        # Chroma subsampling halves a dimension: it must be even (see pix_fmt above).
        self._pad_x = width % 2 if video_format.chroma_width(2) < 2 else 0
        self._pad_y = height % 2 if video_format.chroma_height(2) < 2 else 0
        if preset == "auto":
            preset = "superfast" if width * height <= AUTO_PRESET_MAX_PIXELS else "ultrafast"
        self.preset = preset
        options = _encoder_options(codec_name, preset, crf, self.warnings)
        if format_name == "avi":
            # AVI stores no presentation timestamps: B-frames would come back out of order.
            options["bf"] = "0"
        options.update(encoder_options or {})

        self._audio = (
            _AudioSource(audio_from, trim_start, trim_end, non_negative=format_name == "avi")
            if audio_from is not None
            else None
        )
        self._stack = contextlib.ExitStack()
        # Named before it exists: abort() removes it wherever a stop signal lands.
        self._temp_path = _temp_name(self.path)
        self._closed = False
        try:
            try:
                self._fd, _ = self._stack.enter_context(_temp_file(self.path, self._temp_path))
            except OSError as exc:  # named by the output the user gave, not its temp file
                raise OutputError(f"{self.path}: cannot write: {exc.strerror or exc}") from exc
            container_options = {"movflags": "+faststart"} if format_name in ("mp4", "mov") else {}
            self._container = av.open(
                str(self._temp_path), "w", format=format_name, options=container_options
            )
            self._stack.callback(self._container.close)
            if metadata:
                self._container.metadata.update(metadata)
            self._video = cast(
                VideoStream,
                self._container.add_stream(codec_name, rate=self._rate, options=options),
            )
            self._video.width = width + self._pad_x
            self._video.height = height + self._pad_y
            self._video.pix_fmt = pix_fmt
            self._video.codec_context.time_base = self._codec_time_base
            self._video.time_base = self._codec_time_base
            if rotation % 360 and format_name == "avi":
                self.warnings.append(f"{self.path}: AVI cannot store a rotation; dropped")
            elif rotation % 360:
                # PyAV takes counter-clockwise degrees; ours are clockwise (the 'rotate' tag's).
                self._video.set_display_rotation(-(rotation % 360))
            if self._audio is not None:
                copyable = supported & _COPY_AUDIO.get(format_name, frozenset(supported))
                self.audio_mode = self._audio.attach(
                    self._container, copyable, audio_encoder, self.warnings
                )
            if live_audio is not None:
                self._live_audio = LiveAudioEncoder(
                    self._container, audio_encoder, *live_audio, untimed=format_name == "avi"
                )
                self.audio_mode = "encode"
        except BaseException as exc:
            self.abort()
            if isinstance(exc, av.error.FFmpegError):
                reason = _write_reason(exc, self._temp_path, self.path)
                raise OutputError(f"{self.path}: cannot start writing: {reason}") from exc
            raise

    @property
    def time_base(self) -> Fraction:
        """Seconds per ``pts`` tick of :meth:`write`."""
        return self._time_base

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def write(self, image: Frame, pts: int | None = None, time: float | None = None) -> None:
        """Encode one frame at its timestamp.

        Args:
            image: the picture, ``width`` x ``height``.
            pts: timestamp in :attr:`time_base` ticks from the start of the output.
            time: timestamp in seconds, used when ``pts`` is None. With neither, the
                frame follows the previous one after ``1 / fps``. A timestamp that does
                not increase is moved one tick after the previous frame. AVI stores
                frames at ``1 / fps`` only: there, timestamps are rounded to that grid,
                and a frame whose slot is taken is left out (:attr:`frames_dropped`).

        Shape:
            - image: :math:`(H, W, 3)`, ``uint8``, BGR.

        Raises:
            InputError: wrong dtype or size.
            OutputError: the encoder or the disk failed (the temporary file is removed).
        """
        if self._closed:
            raise OutputError(f"{self.path}: writer is closed")
        _check_frame(image)
        if image.shape[:2] != (self.height, self.width) or image.ndim != 3:
            raise InputError(
                f"frame must be ({self.height}, {self.width}, 3) for this writer, got {image.shape}"
            )
        if pts is None:
            if time is not None:
                pts = round(time / self._time_base)
            else:
                pts = round(self.frames_written / (self._rate * self._time_base))
        seconds = float(pts * self._time_base)
        if self._codec_time_base != self._time_base:
            # To the nearest slot, a tie to the earlier one: Python's round sends ties to
            # the even slot, and a trim landing half a frame off the grid (0.5 s into a
            # 25 fps clip) put the frames at 0, 2, 2 -> 3, 4, 4 -> 5...: gaps and a
            # picture late by turns.
            pts = math.ceil(Fraction(pts) * self._time_base / self._codec_time_base - _HALF)
        if self._last_pts is not None and pts <= self._last_pts:
            if self._codec_time_base != self._time_base:
                # AVI: a slot taken already (frames closer than 1 / fps: a variable
                # frame rate's faster stretch). Moved on a slot each, they had run late
                # of their sound, by 227 ms within a second; left out, the picture
                # keeps to its time (a gap is a repeated slot: FFmpeg fills it).
                self.frames_dropped += 1
                return
            pts = self._last_pts + 1
        if self._last_pts is not None and self._timed_by_pts:
            self._next_pts[self._last_pts] = pts
        self._last_pts = pts
        if self._pad_x or self._pad_y:
            image = cv2.copyMakeBorder(image, 0, self._pad_y, 0, self._pad_x, cv2.BORDER_REPLICATE)
        if self._video.pix_fmt == "yuv420p":
            # OpenCV's BT.601 conversion matches swscale's default within rounding and is
            # ~3x faster (multi-threaded, without the GIL): 1.3 ms at 1080p instead of 3.7.
            yuv = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_BGR2YUV_I420)
            frame = av.VideoFrame.from_ndarray(yuv, format="yuv420p")
        else:
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="bgr24")
        frame.pts = pts
        frame.time_base = self._codec_time_base
        try:
            self._mux_video(self._video.encode(frame))
            if self._audio is not None:
                self._audio.pump(self._container, seconds + _AUDIO_LEAD_S)
        except (av.error.FFmpegError, OSError) as exc:
            self.abort()
            raise OutputError(
                f"{self.path}: cannot write video: {_write_reason(exc, self._temp_path, self.path)}"
            ) from exc
        self.frames_written += 1

    def _mux_video(self, packets: list[av.Packet]) -> None:
        # The newest packets are held back until the next ones: the last frame's
        # duration is settled at close (_mux_last_video).
        if not packets:
            return
        for packet in packets:
            if packet.pts is not None and packet.dts is not None:
                if self._first_dts is None:
                    self._first_dts = packet.dts
                low, high = self._pts_span or (packet.pts, packet.pts)
                self._pts_span = (min(low, packet.pts), max(high, packet.pts))
                following = self._next_pts.pop(packet.pts, None)
                if following is not None:
                    # Matroska and WebM end a clip where its last-ending frame does:
                    # each frame lasts until the next one (one frame period each had
                    # put a B-frame of a trimmed clip's end past that end).
                    packet.duration = following - packet.pts
        self._container.mux(self._held)
        self._held = packets

    def _mux_last_video(self) -> None:
        # The last frame lasts until ends_at, or one frame period. MP4 and MOV measure a
        # track from its decode timestamps, which B-frames put behind the presentation
        # ones by the reorder delay, in frames: on a variable frame rate (a phone's
        # video, an animation) the delay at the end is not the delay at the start, and
        # the file read as ending early by the difference (a GIF of 1.3 s as 1.09): the
        # last packet's duration makes that up. Matroska and WebM take the duration of
        # the last frame shown.
        packets, self._held = self._held, []
        timed = self._timed_by_dts or self._timed_by_pts
        if packets and self._pts_span is not None and timed:
            low, high = self._pts_span
            last = packets[-1]
            shown_last = [p for p in packets if p.pts == high]
            if last.time_base is not None and shown_last:
                if self.ends_at is not None:
                    end = math.ceil(self.ends_at * self._time_base / last.time_base)
                    end = max(end, high + 1)
                else:  # (x264 leaves a duration 0: the muxer's default is a frame period)
                    period = shown_last[0].duration or round(1 / (self._rate * last.time_base))
                    end = high + max(1, period)
                if self._timed_by_dts and self._first_dts is not None and last.dts is not None:
                    last.duration = max(1, (end - low) - (last.dts - self._first_dts))
                else:
                    shown_last[0].duration = end - high
        self._container.mux(packets)

    def write_audio(self, samples: NDArray[np.float32], start: float) -> None:
        """Encode live sound (``live_audio``) heard from ``start`` seconds of the output.

        Shape:
            - samples: :math:`(C, N)`, float32 in -1..1, one row per channel.

        Raises:
            OutputError: the writer has no live audio, or the encoder or disk failed.
        """
        if self._closed or self._live_audio is None:
            raise OutputError(f"{self.path}: this writer takes no live audio")
        try:
            for packet in self._live_audio.encode(samples, start):
                self._container.mux(packet)
        except (av.error.FFmpegError, OSError, ValueError) as exc:
            self.abort()
            raise OutputError(
                f"{self.path}: cannot write audio: {_write_reason(exc, self._temp_path, self.path)}"
            ) from exc

    def close(self) -> None:
        """Flush the encoder, copy the remaining audio and move the file into place.

        Raises:
            OutputError: nothing was written, or finishing the file failed; nothing is
                left at ``path`` (an older file there is kept).
        """
        if self._closed:
            return
        if self.frames_written == 0:
            self.abort()
            raise OutputError(f"{self.path}: no frames were written")
        try:
            self._mux_video(self._video.encode(None))
            self._mux_last_video()
            if self._live_audio is not None:
                self._container.mux(self._live_audio.flush())
            if self._audio is not None:
                self._audio.pump(self._container, math.inf)
                self._audio.flush(self._container)
                self.warnings.extend(self._audio.warnings)
                if not self._audio.heard:  # (no track had sound to keep: none written)
                    self.audio_mode = "none"
            self._container.close()
            os.fsync(self._fd)  # same file: PyAV reopened the path _temp_file created
            os.replace(self._temp_path, self.path)
        except BaseException as exc:
            self.abort()
            if isinstance(exc, av.error.FFmpegError | OSError):
                reason = _write_reason(exc, self._temp_path, self.path)
                raise OutputError(f"{self.path}: cannot finish video: {reason}") from exc
            raise
        self._closed = True
        if self._audio is not None:
            self._audio.close()
        self._stack.close()
        _fsync_directory(self.path.parent)

    def abort(self) -> None:
        """Stop without producing a file: the temporary file is removed. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self._audio is not None:
            self._audio.close()
        with contextlib.suppress(Exception):
            self._stack.close()  # closes the container and the temporary file's descriptor
        temp_path = getattr(self, "_temp_path", None)
        if temp_path is not None:
            with contextlib.suppress(OSError):
                temp_path.unlink()

    def __del__(self) -> None:
        # A writer dropped without close() must not leave its temporary file behind.
        if not getattr(self, "_closed", True):
            self.abort()


def _cut_front(frame: Any, samples: int) -> Any:
    """An audio frame without its first ``samples`` samples."""
    data = frame.to_ndarray()
    # Planar formats have a row per channel; packed ones one row of interleaved samples.
    step = 1 if frame.format.is_planar else len(frame.layout.channels)
    cut = av.AudioFrame.from_ndarray(
        np.ascontiguousarray(data[:, samples * step :]),
        format=frame.format.name,
        layout=frame.layout,
    )
    cut.sample_rate = frame.sample_rate
    return cut


def _silence(template: Any, samples: int) -> Any:
    """``samples`` of silence in ``template``'s format, layout and rate."""
    data = template.to_ndarray()
    step = 1 if template.format.is_planar else len(template.layout.channels)
    zero = 128 if template.format.name.startswith("u8") else 0  # unsigned 8-bit: midpoint
    frame = av.AudioFrame.from_ndarray(
        np.full((data.shape[0], samples * step), zero, data.dtype),
        format=template.format.name,
        layout=template.layout,
    )
    frame.sample_rate = template.sample_rate
    return frame


def _encoder_takes(encoder: str, rate: int, layout: str) -> bool:
    """Whether ``encoder`` opens at this rate and channel layout."""
    formats = av.Codec(encoder, "w").audio_formats or []
    try:
        context: Any = av.CodecContext.create(encoder, "w")
        context.sample_rate = rate
        context.layout = layout
        if formats:
            context.format = formats[0].name
        context.open()
    except (av.error.FFmpegError, ValueError, TypeError):
        return False
    return True


def _encoder_rate_and_layout(encoder: str, rate: int, layout: Any) -> tuple[int, str]:
    """A sample rate and channel layout ``encoder`` takes, as near a source's as it can:
    Opus at 48 kHz; else the source's rate, or the next one up the encoder knows (AAC
    has no 192 or 50 kHz), or its highest; the source's layout, or the usual one of its
    channel count (AAC takes 2.1, Opus does not; PCM in AVI has "2 channels" in no
    stated order), or stereo."""
    rates = sorted(av.Codec(encoder, "w").audio_rates or ())
    if "opus" in encoder:
        rate = 48000
    elif rates and rate not in rates:
        rate = next((r for r in rates if r >= rate), rates[-1])
    channels = getattr(layout, "nb_channels", 0) or 0
    for name in (getattr(layout, "name", None), _USUAL_LAYOUTS.get(channels), "stereo"):
        if name and _encoder_takes(encoder, rate, name):
            return rate, name
    return rate, "stereo"


class _AudioRun:
    """Audio frames laid end to end into an encoder (an output stream of its own).

    Each frame comes with the output sample it starts at. Within ``tolerance``
    seconds of where the run is, it follows on (rounded timestamps, a device's
    jitter); further off, the run follows the frame: a gap is kept as it is (or
    filled with silence, ``fill_gaps``: a container that plays its sound end to end
    whatever its timestamps, AVI), an overlap is cut from the frame. Sound before 0
    is cut off.
    """

    def __init__(
        self,
        container: Any,
        encoder: str,
        rate: int,
        layout: Any,
        *,
        tolerance: float,
        fill_gaps: bool,
    ) -> None:
        # A rate and layout the encoder takes (a 192 kHz interface into AAC: 96 kHz).
        self.rate, layout_name = _encoder_rate_and_layout(encoder, rate, layout)
        self.stream = container.add_stream(encoder, rate=self.rate)
        self.stream.layout = layout_name
        # Frames come in their source's own format (8-bit, 16-bit integers...); the
        # encoder takes one of its own, at its rate and layout.
        self._resampler = av.AudioResampler(
            format=self.stream.codec_context.codec.audio_formats[0].name,
            layout=layout_name,
            rate=self.rate,
        )
        self._tolerance = tolerance
        self._fill_gaps = fill_gaps
        # The encoder's priming comes out before 0 (AAC's first packet at -1024). A
        # container that plays its sound end to end (AVI, fill_gaps) takes no time
        # before 0: its muxer then moved every stream later by it, the video by a
        # frame after its first one (frames 0, 2, 3...: the picture late). There the
        # packets are moved instead; the sound left out at the start (lead) keeps it
        # on time.
        self._lift = _ENCODER_PRIMING.get(self.stream.codec_context.name, 0) if fill_gaps else 0
        self.next: int | None = None  # the sample the run is at (None: nothing yet)

    def add(self, frame: Any, at: int) -> list[Any]:
        """Packets for ``frame`` (its own rate), starting at output sample ``at``."""
        rate = frame.sample_rate
        if self.next is not None and abs(at - self.next) <= round(self._tolerance * rate):
            at = self.next  # end to end with what went before
        cut = max(0, -at, (self.next or 0) - at)
        if cut >= frame.samples:
            return []
        if cut:
            frame = _cut_front(frame, cut)
            at += cut
        packets = []
        while self._fill_gaps and (self.next or 0) < at:  # silence, a second at a time
            gap = min(at - (self.next or 0), rate)
            packets += self._encode(_silence(frame, gap), self.next or 0)
        return packets + self._encode(frame, at)

    def _encode(self, frame: Any, at: int) -> list[Any]:
        frame.pts = at
        frame.time_base = Fraction(1, frame.sample_rate)
        self.next = at + frame.samples
        return self._lifted(
            [
                packet
                for ready in self._resampler.resample(frame)
                for packet in self.stream.encode(ready)
            ]
        )

    def flush(self) -> list[Any]:
        """The packets the resampler and the encoder still hold."""
        packets = [
            packet
            for ready in self._resampler.resample(None)
            for packet in self.stream.encode(ready)
        ]
        return self._lifted(packets + list(self.stream.encode(None)))

    def _lifted(self, packets: list[Any]) -> list[Any]:
        """``packets`` moved later by the priming (see ``_lift``), in their time base."""
        if self._lift:
            for packet in packets:
                shift = round(self._lift / (self.rate * packet.time_base))
                if packet.pts is not None:
                    packet.pts += shift
                if packet.dts is not None:
                    packet.dts += shift
        return packets


class LiveAudioEncoder:
    """Live sound into an open output container: chunks timed by when they were heard.

    Chunks come with the second of the output they start at (their capture time less
    the first video frame's). They are laid end to end, as an encoder expects; where a
    chunk's own time and that run part by more than ``resync`` seconds (the device
    stalled, or its clock drifted), the run follows the chunk's time: a gap is left
    as it is (or filled with silence, ``untimed``), an overlap is cut from the chunk.
    Sound from before 0 is cut off.

    Args:
        container: a PyAV output container, before its first packet.
        encoder: the audio encoder (``aac``, ``libopus``...).
        rate: samples per second of the chunks.
        layout: their channel layout (``mono`` or ``stereo``).
        resync: seconds the run may part from the chunks' times.
        untimed: the container plays its sound end to end whatever its timestamps
            (AVI): gaps are filled with silence, and the encoder's priming is made up
            for by leaving out as much sound at the start.
    """

    def __init__(
        self,
        container: Any,
        encoder: str,
        rate: int,
        layout: str,
        *,
        resync: float = 0.2,
        untimed: bool = False,
    ) -> None:
        self.rate = rate
        self.layout = layout
        self._run = _AudioRun(
            container, encoder, rate, av.AudioLayout(layout), tolerance=resync, fill_gaps=untimed
        )
        priming = _ENCODER_PRIMING.get(encoder, 0) if untimed else 0
        self._lead = round(priming * rate / self._run.rate)

    def encode(self, samples: NDArray[np.float32], start: float) -> list[Any]:
        """Packets for ``samples`` (float32, planar: one row per channel) heard from
        ``start`` seconds of the output on."""
        frame = av.AudioFrame.from_ndarray(
            np.ascontiguousarray(samples, np.float32), format="fltp", layout=self.layout
        )
        frame.sample_rate = self.rate
        return self._run.add(frame, round(start * self.rate) - self._lead)

    def flush(self) -> list[Any]:
        """The packets the resampler and the encoder still hold."""
        return self._run.flush()


class _AudioTrack:
    """One audio stream of a source file and its output stream (copied or re-encoded)."""

    def __init__(self, stream: Any, number: int) -> None:
        self.input = stream
        self.number = number  # 1-based, as a player lists tracks
        self.output: Any = None
        self.run: _AudioRun | None = None  # re-encoded: its encoder's run
        self.offset: int | None = None  # copied: source ticks that become 0 in the output
        # Seconds of the encoder's priming AVI cannot skip: that much of the sound is
        # left out at the start, so the rest is heard on time.
        self.lead_s = 0.0
        self.done = False
        self.copied = False  # any of its packets went into the output

    @property
    def heard(self) -> bool:
        """Whether any of its sound went into the output."""
        return self.copied or (self.run is not None and self.run.next is not None)

    @property
    def time_base(self) -> Fraction:
        return self.input.time_base or Fraction(1, 48000)


class _AudioSource:
    """The audio tracks of a source file, all copied (or re-encoded) into a writer's output.

    Every audio stream is kept, in order, with its language, title and disposition (a
    recording's second track is often a commentary or a separate microphone).
    """

    def __init__(
        self, path: PathLike, trim_start: float, trim_end: float | None, *, non_negative: bool
    ) -> None:
        self.path = path
        # AVI cannot store negative timestamps; FFmpeg would shift the video to make room.
        self._non_negative = non_negative
        self.warnings: list[str] = []
        self._container = _open_input(path)
        self._tracks: list[_AudioTrack] = []
        for number, stream in enumerate(self._container.streams.audio, 1):
            if stream.codec_context is None:  # a codec this FFmpeg build does not know
                self.warnings.append(f"{path}: audio track {number}: unknown codec; left out")
            else:
                self._tracks.append(_AudioTrack(stream, number))
        subtitles = len(self._container.streams.subtitles)
        if subtitles:
            # (Dropped without a word, a film's subtitles had gone missing unnoticed.)
            tracks = "a subtitle track" if subtitles == 1 else f"{subtitles} subtitle tracks"
            self.warnings.append(f"{path}: {tracks} left out (the picture and sound are kept)")
        origin = _video_start(self._container)
        self._start = origin + trim_start  # source seconds that become 0 in the output
        self._end = origin + trim_end if trim_end is not None else None
        self._trimmed = trim_start > 0
        self._packets: Iterator[av.Packet] | None = None
        self._pending: av.Packet | None = None
        self._by_index: dict[int, _AudioTrack] = {}
        self._done = not self._tracks

    def attach(
        self, container: Any, supported: set[str], encoder: str, writer_warnings: list[str]
    ) -> str:
        """Add an output stream per audio track; returns ``"copy"`` (all copied),
        ``"encode"`` (at least one re-encoded) or ``"none"`` (no audio)."""
        if not self._tracks:
            return "none"
        for track in self._tracks:
            self._attach_track(track, container, supported, encoder, writer_warnings)
            self._by_index[track.input.index] = track
        self._packets = self._container.demux([track.input for track in self._tracks])
        return "encode" if any(track.run is not None for track in self._tracks) else "copy"

    def _attach_track(
        self,
        track: _AudioTrack,
        container: Any,
        supported: set[str],
        encoder: str,
        writer_warnings: list[str],
    ) -> None:
        source = track.input
        # The codec's own name (mp3), not its decoder's (mp3float).
        name = source.codec_context.codec.canonical_name
        # AVI keeps no audio timestamps: a copied track plays from 0 packet after packet,
        # so one that starts late, or a trim's first packet, lands early or late.
        # There a track is re-encoded, cut to the sample and led by silence.
        late = self._starts_after_origin(track)
        timed = self._non_negative and (self._trimmed or late > _AVI_TIMING_TOLERANCE_S)
        if name in supported and not timed:
            track.output = container.add_stream_from_template(source)
        else:
            if name in supported and name.startswith("pcm_"):
                encoder = "pcm_s16le"  # PCM stays lossless
            # AVI plays its sound end to end: a late start or a gap is silence there.
            track.run = _AudioRun(
                container,
                encoder,
                source.codec_context.sample_rate or 48000,
                source.codec_context.layout,
                tolerance=_AUDIO_JITTER_S,
                fill_gaps=self._non_negative,
            )
            track.output = track.run.stream
            if self._non_negative:
                track.lead_s = _ENCODER_PRIMING.get(encoder, 0) / track.run.rate
            which = (
                f"audio track {track.number}: " if len(self._container.streams.audio) > 1 else ""
            )
            writer_warnings.append(
                f"{self.path}: {which}audio {name} re-encoded to {encoder} to keep its timing "
                "(AVI keeps no audio timestamps)"
                if name in supported
                else f"{self.path}: {which}audio codec {name} cannot go into this container; "
                f"re-encoded to {encoder}"
            )
        if source.metadata.get("language"):
            track.output.metadata["language"] = source.metadata["language"]
        # MP4 and MOV keep a track's title in its user data, which FFmpeg reads as "name"
        # (a commentary track of an MP4 had lost its title).
        title = source.metadata.get("title") or source.metadata.get("name")
        if title:
            track.output.metadata["title"] = title
        language = source.metadata.get("language")
        if language and container.format.name == "mov":
            track.output.metadata["language"] = _MOV_LANGUAGES.get(language, language)
        with contextlib.suppress(AttributeError, TypeError, ValueError):
            track.output.disposition = source.disposition

    def _starts_after_origin(self, track: _AudioTrack) -> float:
        """Seconds a track's first sound comes after the output's 0 (0 if not later)."""
        start = track.input.start_time
        if start is None:
            return 0.0
        return max(0.0, float(start * track.time_base) - self._start)

    def pump(self, container: Any, until: float) -> None:
        """Mux source audio up to ``until`` output seconds."""
        if self._done or self._packets is None:
            return
        while True:
            packet = self._pending or self._next_packet()
            self._pending = None
            if packet is None:
                self._done = True
                return
            track = self._by_index.get(packet.stream.index)
            if track is None or track.done:
                continue
            pts = packet.pts if packet.pts is not None else packet.dts
            if pts is None:
                continue
            time_base = track.time_base
            start = float(pts * time_base)
            if self._end is not None and start >= self._end:
                track.done = True
                if all(other.done for other in self._tracks):
                    self._done = True
                    return
                continue
            if self._trimmed and start + float((packet.duration or 0) * time_base) <= self._start:
                continue
            if start - self._start > until:
                self._pending = packet
                return
            if track.run is not None:
                self._encode_packet(container, track.run, track.lead_s, packet)
                continue
            if track.offset is None:
                track.offset = round(self._start / time_base)
                if self._non_negative:  # the AAC priming packet: start the audio at 0
                    track.offset = min(
                        track.offset, pts, packet.dts if packet.dts is not None else pts
                    )
            packet.pts = pts - track.offset
            if packet.dts is not None:
                packet.dts -= track.offset
            packet.stream = track.output
            track.copied = True
            container.mux(packet)

    def _next_packet(self) -> av.Packet | None:
        assert self._packets is not None
        while True:
            try:
                packet = next(self._packets)
            except StopIteration:
                return None
            except _DATA_ERRORS as exc:
                self.warnings.append(f"{self.path}: audio ends early ({_one_line(exc)})")
                return None
            if packet.size:
                return packet

    def _encode_packet(
        self, container: Any, run: _AudioRun, lead_s: float, packet: av.Packet
    ) -> None:
        try:
            frames: list[Any] = packet.decode()  # AudioFrame (PyAV types it by stream)
        except _DATA_ERRORS:
            return
        for frame in frames:
            if frame.time is None:
                continue
            # The output sample it starts at (its timestamp is rounded, to the
            # millisecond in Matroska: the run lays frames end to end through that).
            at = round((frame.time - self._start - lead_s) * frame.sample_rate)
            for packet_out in run.add(frame, at):
                container.mux(packet_out)

    def flush(self, container: Any) -> None:
        for track in self._tracks:
            if not track.heard and track.output is not None:
                # MP4 and MOV then leave the track out, Matroska keeps it empty: say so.
                which = f"audio track {track.number}" if len(self._tracks) > 1 else "audio"
                span = "the trimmed range" if self._trimmed or self._end is not None else "it"
                self.warnings.append(f"{self.path}: {which} has no sound in {span}")
            if track.run is not None:
                container.mux(track.run.flush())

    @property
    def heard(self) -> bool:
        """Whether any track had sound to keep."""
        return any(track.heard for track in self._tracks)

    def close(self) -> None:
        self._container.close()


def transcode(
    src: PathLike,
    dst: PathLike,
    process: Callable[[VideoFrame], Frame] | None = None,
    *,
    start: float | None = None,
    end: float | None = None,
    keep_audio: bool = True,
    progress: Callable[[int, int], None] | None = None,
    **writer_options: Any,
) -> dict[str, Any]:
    """Decode ``src``, pass every frame through ``process``, encode to ``dst``.

    Timestamps are kept (variable frame rate stays in sync), the audio is copied
    unchanged over the same time range, the rotation and the container's metadata are
    written back. Synchronous and single-threaded apart from FFmpeg's own threads.

    Args:
        src: input video.
        dst: output video (atomic: nothing appears there unless it succeeds).
        process: frame -> new image of the same size; None copies the pictures.
        start: first second of ``src`` to keep.
        end: second of ``src`` where to stop.
        keep_audio: copy the source's audio.
        progress: called as ``progress(frames_done, frames_expected)`` after each frame;
            ``frames_expected`` is an estimate, 0 when unknown.
        **writer_options: :class:`VideoWriter` arguments (``codec``, ``preset``,
            ``crf``, ``pix_fmt``, ``metadata``...).

    Returns:
        ``frames`` written, ``decode_warnings`` (list of lines), ``decode_errors``,
        ``writer_warnings``, ``audio`` (``"copy"``, ``"encode"`` or ``"none"``),
        ``seconds`` of wall time and ``fps`` achieved.

    Raises:
        InputError: ``src`` cannot be read, has no video stream or no frame decodes.
        UnsupportedFormatError: see :class:`VideoReader` and :class:`VideoWriter`.
        OutputError: ``dst`` cannot be written.
    """
    video_extension(dst)
    began = _time.perf_counter()
    writer: VideoWriter | None = None
    with VideoReader(src, start=start, end=end) as reader:
        info = reader.info
        expected = info.frame_count
        if info.fps and (start or end is not None):
            span = (end if end is not None else info.duration) - (start or 0.0)
            trimmed = max(0, round(span * info.fps))
            expected = min(expected, trimmed) if expected else trimmed
        try:
            for frame in reader:
                if writer is None:
                    options: dict[str, Any] = {
                        "time_base": reader.time_base,
                        "fps": reader.average_rate,
                        "rotation": reader.rotation,
                        "metadata": _copyable_metadata(reader),
                        "audio_from": src if keep_audio and info.has_audio else None,
                        "trim_start": start or 0.0,
                        "trim_end": end,
                    }
                    options.update(writer_options)
                    height, width = frame.image.shape[:2]
                    writer = VideoWriter(dst, width=width, height=height, **options)
                image = process(frame) if process is not None else frame.image
                writer.write(image, pts=frame.pts - reader.start_pts)
                if progress is not None:
                    progress(frame.index + 1, int(expected))
            if writer is None:
                detail = f" ({reader.warnings[0]})" if reader.warnings else ""
                raise InputError(f"{src}: no video frame could be decoded{detail}")
            writer.close()
        except BaseException:
            if writer is not None:
                writer.abort()
            raise
    seconds = _time.perf_counter() - began
    return {
        "frames": writer.frames_written,
        "decode_warnings": list(reader.warnings),
        "decode_errors": reader.decode_errors,
        "writer_warnings": list(writer.warnings),
        "audio": writer.audio_mode,
        "seconds": seconds,
        "fps": writer.frames_written / seconds if seconds > 0 else 0.0,
    }


# --- helpers ---------------------------------------------------------------------------------


def _open_input(path: PathLike) -> Any:
    text = os.fspath(path)
    is_url = "://" in text
    if not is_url:
        if check_input_file(text, "a video").stat().st_size == 0:
            raise UnsupportedFormatError(f"{path}: empty file")
    try:
        return av.open(text, "r", timeout=10.0 if is_url else None)
    except av.error.InvalidDataError as exc:
        raise UnsupportedFormatError(f"{path}: not a video file FFmpeg can read") from exc
    except (av.error.FFmpegError, OSError) as exc:
        raise InputError(f"{path}: cannot open: {_one_line(exc)}") from exc


def _main_video(streams: Any) -> Any:
    """The video stream a file is about: not a cover picture (attached_pic), and of
    several, the largest picture (a thumbnail track may come first); None if none."""
    if not streams:
        return None
    moving = [
        s for s in streams if not int(s.disposition) & int(av.stream.Disposition.attached_pic)
    ]
    candidates = moving or list(streams)

    def area(stream: Any) -> int:
        context = stream.codec_context
        return int(context.width or 0) * int(context.height or 0) if context is not None else 0

    return max(candidates, key=area)  # the first of the largest


def _video_start(container: Any) -> float:
    """The second a file's picture starts at (its main video stream's first
    timestamp), from which its sound is timed; 0 without one."""
    video = _main_video(container.streams.video)
    first = video.start_time if video is not None else None
    return float(first * video.time_base) if first and video.time_base else 0.0


def _video_stream(container: Any, path: PathLike) -> Any:
    stream = _main_video(container.streams.video)
    if stream is None:
        kinds = ", ".join(sorted({stream.type for stream in container.streams})) or "nothing"
        raise InputError(f"{path}: no video stream (contains {kinds})")
    if stream.codec_context is None:
        raise UnsupportedFormatError(f"{path}: video codec not supported by FFmpeg")
    return stream


def _clockwise(counter_clockwise: float | None) -> int:
    return int(round(-(counter_clockwise or 0)) % 360)


def _rate_and_time_base(
    fps: float | Fraction | None, time_base: Fraction | None
) -> tuple[Fraction, Fraction]:
    if fps is None and time_base is None:
        raise InputError("give fps or time_base")
    rate = Fraction(fps).limit_denominator(1001) if fps is not None else None
    tb = Fraction(time_base) if time_base is not None else None
    if (rate is not None and rate <= 0) or (tb is not None and tb <= 0):
        raise InputError(f"fps and time_base must be positive, got {fps} and {time_base}")
    if rate is None:
        assert tb is not None
        rate = 1 / tb
    return rate, tb if tb is not None else 1 / rate


def _write_reason(exc: BaseException, temp_path: Path, path: Path) -> str:
    """Why writing failed, for an error about the output (which it names): a system
    error's reason alone ("No space left on device"), FFmpeg's whole message (the call
    and its last log line say more than its reason) with the hidden temporary file's
    name replaced by the output's."""
    reason = getattr(exc, "strerror", None)
    if not isinstance(exc, av.error.FFmpegError) and isinstance(reason, str) and reason:
        return reason
    return _one_line(exc).replace(str(temp_path), str(path))


def _supported_codecs(format_name: str) -> set[str]:
    with av.open(io.BytesIO(), "w", format=format_name) as probe:
        return set(probe.supported_codecs)


def video_encoder_problem(codec_name: str) -> str | None:
    """Why ``codec_name`` cannot encode video here (a reason to show), or None."""
    try:
        encoder = av.codec.Codec(codec_name, "w")
    except (av.error.FFmpegError, ValueError):
        return f"video encoder {codec_name!r} is not available in this PyAV build"
    if encoder.type != "video":
        return f"{codec_name!r} is not a video encoder (it encodes {encoder.type})"
    return None


def check_video_encoder(path: PathLike, codec: str | None = None) -> str:
    """Check, before any work, that ``path``'s container takes video from ``codec``
    (None: its default encoder), and return the encoder's own name (``h264`` is
    ``libx264``).

    Raises:
        UnsupportedFormatError: an unknown extension, an encoder that is not
            available, or one the container cannot hold.
    """
    path = Path(path)
    format_name, default_codec, _ = _CONTAINERS[video_extension(path)]
    codec_name = codec or default_codec
    _check_encoder(codec_name, _supported_codecs(format_name), path)
    return str(av.codec.Codec(codec_name, "w").name)


def encoder_settings(codec_name: str) -> frozenset[str]:
    """Which of a writer's ``preset`` and ``crf`` change ``codec_name``'s output (an
    encoder's own name: see :func:`check_video_encoder`); the others are not used."""

    def options(preset: str, crf: int | None) -> dict[str, str]:
        return _encoder_options(codec_name, preset, crf, [])

    used = set()
    if options(_X264_PRESETS[0], None) != options(_X264_PRESETS[-1], None):
        used.add("preset")
    if options("medium", 0) != options("medium", 51):
        used.add("crf")
    return frozenset(used)


def _check_encoder(codec_name: str, supported: set[str], path: Path) -> None:
    problem = video_encoder_problem(codec_name)
    if problem is not None:
        raise UnsupportedFormatError(f"{path}: {problem}")
    encoder = av.codec.Codec(codec_name, "w")
    if encoder.name not in supported and codec_name not in supported:
        raise UnsupportedFormatError(
            f"{path}: the {path.suffix} container cannot hold {codec_name} video"
        )


def _encoder_pixel_format(encoder: av.codec.Codec, asked: str | None) -> str:
    """The pixel format to encode in (see VideoWriter's ``pix_fmt``)."""
    takes = [f.name for f in encoder.video_formats or ()]
    if asked is not None:
        if takes and asked not in takes:
            raise UnsupportedFormatError(
                f"{encoder.name} does not take pixel format {asked}; it takes {', '.join(takes)}"
            )
        return asked
    if not takes or "yuv420p" in takes:
        return "yuv420p"
    return next((name for name in ("bgr24", "rgb24", "bgr0") if name in takes), takes[0])


def _pixel_format(pix_fmt: str) -> av.VideoFormat:
    try:
        return av.VideoFormat(pix_fmt)
    except (ValueError, av.error.FFmpegError) as exc:
        raise UnsupportedFormatError(f"unknown pixel format {pix_fmt!r}") from exc


def _mpeg4_qscale(crf: int) -> int:
    """MPEG-4 Part 2's quantiser for an x264 CRF: the same quantiser step. H.264's step
    is 0.625 x 2^(QP / 6) and MPEG-4's 2 x qscale, so CRF 18 is qscale 2 and 23 is 4.
    (A linear map of 0..51 onto 1..31 made CRF 18 qscale 12: blocky, 36 dB against
    libx264's 43 on a talking head's background.)"""
    return max(1, min(31, round(0.625 * 2 ** (crf / 6) / 2)))


def _encoder_options(
    codec_name: str, preset: str, crf: int | None, warnings: list[str]
) -> dict[str, str]:
    if preset not in _X264_PRESETS:
        raise InputError(
            f"unknown preset {preset!r}; use auto or one of {', '.join(_X264_PRESETS)}"
        )
    if crf is not None and not 0 <= crf <= 51:
        raise InputError(f"crf must be in 0..51, got {crf}")
    speed = _X264_PRESETS.index(preset)  # 0 fastest .. 9 slowest
    options: dict[str, str] = {}
    if codec_name in ("libx264", "libx265"):
        options["preset"] = preset
        if crf is not None:
            options["crf"] = str(crf if codec_name == "libx264" else min(51, crf + 5))
        if codec_name == "libx265":
            options["x265-params"] = "log-level=error"
    elif codec_name in ("libvpx-vp9", "libvpx"):
        options["deadline"] = "realtime" if speed <= 2 else "good"
        options["cpu-used"] = str(max(0, 8 - speed))
        options["row-mt"] = "1"
        if crf is not None:
            options["crf"] = str(round(crf * 63 / 51))
            options["b"] = "0"
    elif codec_name.endswith("_nvenc"):
        options["preset"] = f"p{min(7, 1 + speed * 6 // 9)}"
        if crf is not None:
            options["rc"] = "vbr"
            options["cq"] = str(crf)
    elif codec_name == "mpeg4":
        if crf is not None:
            qscale = _mpeg4_qscale(crf)
            # A constant quantiser, like ffmpeg's -q:v (which PyAV cannot pass per frame).
            options["qmin"] = options["qmax"] = str(qscale)
    elif crf is not None:
        warnings.append(f"crf and preset are not mapped for {codec_name}; encoder defaults used")
    return options


def _copyable_metadata(reader: VideoReader) -> dict[str, str]:
    # Tags the muxer recomputes (encoder, brands) would be wrong or duplicated if copied.
    skip = {"encoder", "major_brand", "minor_version", "compatible_brands", "creation_time"}
    return {
        key: value for key, value in reader._container.metadata.items() if key.lower() not in skip
    }
