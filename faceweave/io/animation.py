"""Animated images (GIF, animated WebP, APNG) read and written as short videos.

A reaction GIF or a sticker is swapped as a video is: :class:`AnimationReader` yields
its frames with their timestamps (a :class:`~faceweave.io.video.VideoReader`'s
interface), and :class:`AnimationWriter` writes frames back as an animated image
(a :class:`~faceweave.io.video.VideoWriter`'s), so a video job reads and writes either.
FFmpeg decodes no animated WebP: both go through Pillow, which also composes each
frame from the parts a GIF or an APNG stores (a frame holds only what changed).

Timestamps count milliseconds (a time base of 1/1000 s), the unit these formats
store each frame's duration in. Transparent pixels are laid over white, as a still's
are; the output is opaque.

Example:
    >>> with AnimationReader("reaction.gif") as reader:  # doctest: +SKIP
    ...     images = [frame.image for frame in reader]
"""

from __future__ import annotations

import contextlib
import io
import itertools
import logging
import os
import struct
import warnings
from collections.abc import Callable, Iterator, Mapping
from fractions import Fraction
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
from PIL import Image, PngImagePlugin, UnidentifiedImageError

from faceweave.errors import (
    ImageTooLargeError,
    InputError,
    OutputError,
    UnsupportedFormatError,
)
from faceweave.io.image import (
    DEFAULT_MAX_PIXELS,
    DEFAULT_QUALITY,
    XMP_PNG_KEY,
    _one_line,
    _to_bgr,
    _to_srgb,
    check_input_file,
    write_bytes_atomic,
)
from faceweave.io.video import (
    VIDEO_EXTENSIONS,
    VideoFrame,
    VideoInfo,
    VideoReader,
    VideoWriter,
    check_time_range,
    probe_video,
    upright,
)
from faceweave.types import Frame

__all__ = [
    "ANIMATION_EXTENSIONS",
    "ANIMATION_MAX_BYTES",
    "AnimationReader",
    "AnimationWriter",
    "animation_bytes",
    "animation_extension",
    "clip_extension",
    "copy_clip",
    "end_as_the_source",
    "is_animation",
    "open_clip",
    "probe_clip",
]

logger = logging.getLogger("faceweave")

PathLike = str | os.PathLike[str]

# The animated formats read and written, by extension -> Pillow's format name. ``.png``
# and ``.webp`` are animations only when their file holds more than one frame (else
# they are stills); a ``.gif`` or an ``.apng`` is always read as one.
_FORMATS = {".gif": "GIF", ".webp": "WEBP", ".apng": "PNG", ".png": "PNG"}
ANIMATION_EXTENSIONS = tuple(_FORMATS)
# What an output animation may hold in memory before it is written (its frames are
# kept until the file is encoded in one go: Pillow writes these formats whole).
ANIMATION_MAX_BYTES = 2 << 30
# Browsers show a GIF frame of 10 ms or less (or none) for 100 ms, and so do we.
_GIF_SHORTEST_MS = 20
_GIF_DEFAULT_MS = 100
_MS = Fraction(1, 1000)
_MOST_COUNT = 65535  # a loop count's largest value in GIF, WebP and APNG (16 bits)
# What Pillow raises on a cut or broken animation (its GIF reader's struct.error and
# IndexError on a file cut between two frames among them).
_BROKEN_ERRORS = (OSError, ValueError, SyntaxError, IndexError, struct.error)
_DECODE_ERRORS = (EOFError, *_BROKEN_ERRORS)


def _last_byte(path: Path) -> bytes:
    with path.open("rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1)


def _plays(image_format: str, loop: object) -> int:
    """How many times an animation plays in all (0: for ever) from its ``loop`` as
    Pillow reads it: a GIF's NETSCAPE count is the repeats after the first play (none:
    it plays once); a WebP's and an APNG's count the plays."""
    count = loop if isinstance(loop, int) and loop >= 0 else None
    if image_format == "GIF":
        return 1 if count is None else 0 if count == 0 else count + 1
    return 0 if count is None else count


def is_animation(path: PathLike) -> bool:
    """Whether ``path`` is read as an animation: a ``.gif`` or ``.apng`` file, or a
    ``.webp`` or ``.png`` one that holds several frames. Reads the header only (a WebP
    and a PNG say in it whether they are animated); a file that cannot be opened is
    not (its reader then says why)."""
    extension = Path(path).suffix.lower()
    if extension in (".gif", ".apng"):
        return True
    if extension not in _FORMATS:
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Image.open(path, formats=(_FORMATS[extension],)) as image:
                return bool(getattr(image, "is_animated", False))
    except (OSError, ValueError, SyntaxError, UnidentifiedImageError, Image.DecompressionBombError):
        return False


def animation_extension(path: PathLike) -> str:
    """The lower-case extension of ``path`` if faceweave writes animations to it.

    Raises:
        UnsupportedFormatError: any other extension.
    """
    extension = Path(path).suffix.lower()
    if extension not in _FORMATS:
        shown = extension or "no extension"
        raise UnsupportedFormatError(
            f"{path}: unsupported animation format ({shown}); use {', '.join(_FORMATS)}"
        )
    return extension


def open_clip(
    path: PathLike, *, start: float | None = None, end: float | None = None
) -> VideoReader | AnimationReader:
    """A reader of ``path``'s frames: an :class:`AnimationReader` for an animated image
    (:func:`is_animation`), else a :class:`~faceweave.io.video.VideoReader`."""
    if is_animation(path):
        return AnimationReader(path, start=start, end=end)
    return VideoReader(path, start=start, end=end)


def animation_bytes(path: PathLike, width: int, height: int) -> int:
    """The bytes an :class:`AnimationWriter` to ``path`` holds per frame of this size (a
    GIF's frame as its palette's indices, the others' as RGB)."""
    return (1 if animation_extension(path) == ".gif" else 3) * int(width) * int(height)


def probe_clip(path: PathLike) -> VideoInfo:
    """:func:`~faceweave.io.video.probe_video` for a video or an animated image."""
    if is_animation(path):
        with AnimationReader(path) as reader:
            return reader.info
    return probe_video(path)


def clip_extension(path: PathLike) -> str:
    """The lower-case extension of ``path`` if faceweave writes a video or an animated
    image to it.

    Raises:
        UnsupportedFormatError: any other extension.
    """
    extension = Path(path).suffix.lower()
    if extension not in (*VIDEO_EXTENSIONS, *_FORMATS):
        shown = extension or "no extension"
        raise UnsupportedFormatError(
            f"{path}: unsupported video format ({shown}); use "
            f"{', '.join(VIDEO_EXTENSIONS)} or an animated image ({', '.join(_FORMATS)})"
        )
    return extension


def copy_clip(
    source: PathLike,
    output: PathLike,
    *,
    start: float | None = None,
    end: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    **video_options: Any,
) -> int:
    """Write ``source``'s frames (a video's or an animation's) from ``start`` to ``end``
    to ``output``, unchanged but for the format; the frames written. An animated image
    ``output`` (:data:`ANIMATION_EXTENSIONS`) plays as often as an animated source did
    (a video's copy for ever), its frames turned as a player shows them; any other is
    a video (``video_options``: :class:`~faceweave.io.video.VideoWriter`'s ``codec``,
    ``preset``, ``crf``...), an animation's last frame held as long as it holds it.
    (A video's copy to a video, with its sound: :func:`~faceweave.io.video.transcode`.)"""
    animated = Path(output).suffix.lower() in _FORMATS
    with open_clip(source, start=start, end=end) as reader:
        total = reader.info.frame_count
        writer: AnimationWriter | VideoWriter | None = None
        origin = reader.start_pts
        last: tuple[Frame, int] | None = None
        try:
            for frame in reader:
                pts = frame.pts - origin
                image = upright(frame.image, reader.rotation) if animated else frame.image
                if writer is None:
                    height, width = image.shape[:2]
                    rate, ticks = reader.average_rate, reader.time_base
                    writer = (
                        AnimationWriter(
                            output,
                            width=width,
                            height=height,
                            fps=rate,
                            time_base=ticks,
                            plays=reader.plays if isinstance(reader, AnimationReader) else 0,
                        )
                        if animated
                        else VideoWriter(
                            output,
                            width=width,
                            height=height,
                            fps=rate,
                            time_base=ticks,
                            rotation=reader.rotation,
                            **video_options,
                        )
                    )
                writer.write(image, pts=pts)
                last = (image, pts)
                if progress is not None:
                    progress(writer.frames_written, total)
            if writer is None or last is None:
                raise InputError(f"{source}: no frame to copy")
            end_as_the_source(reader, writer, last)
            writer.close()
        except BaseException:
            if writer is not None:
                writer.abort()
            raise
        return writer.frames_written


def end_as_the_source(
    reader: VideoReader | AnimationReader,
    writer: VideoWriter | AnimationWriter,
    last: tuple[Frame, int],
) -> None:
    """Make ``writer``'s output, written from ``reader``'s frames (their timestamps
    less ``reader.start_pts``; ``last``: the last image written and its timestamp), end
    when an animated source does (a GIF's last frame is often a long hold; a trimmed
    one's is cut at the trim's end): the writer is told its end, and a video, whose
    players step through a long hold poorly, takes the last frame again one frame
    period before it. A video source's ending is its own."""
    if not isinstance(reader, AnimationReader):
        return
    end = reader.end_pts - reader.start_pts
    rate = reader.average_rate
    if isinstance(writer, VideoWriter) and rate is not None:
        period = round(1000 / float(rate))
        if end - last[1] > 1.5 * period:
            writer.write(last[0], pts=end - period)
    writer.ends_at = end


class AnimationReader:
    """Decode an animated GIF, WebP or PNG frame by frame, as a
    :class:`~faceweave.io.video.VideoReader` decodes a video (the same attributes,
    iteration and context manager).

    Args:
        path: the animated image.
        start: first second to yield (inclusive).
        end: stop before this second (exclusive).
        max_pixels: refuse a canvas with more pixels than this.

    Attributes:
        plays: how many times the animation plays in all, 0 for ever (a GIF's loop
            count is the repeats after the first play, and none is one play; a WebP's
            and an APNG's count the plays).
        warnings: one line per problem met while decoding (a file cut short).
        decode_errors: always 0 (a frame that fails to decode ends the animation).
        rotation: always 0 (these formats store none).
        start_pts: the timestamp (ms) that maps to ``start``.

    Raises:
        InputError: the file is missing, unreadable, truncated in its first frame or
            corrupt.
        UnsupportedFormatError: not a GIF, WebP or PNG.
        ImageTooLargeError: the canvas has more than ``max_pixels`` pixels.
    """

    def __init__(
        self,
        path: PathLike,
        *,
        start: float | None = None,
        end: float | None = None,
        max_pixels: int = DEFAULT_MAX_PIXELS,
    ) -> None:
        check_time_range(start, end)
        self.path = path
        self.start = start
        self.end = end
        self.warnings: list[str] = []
        self.decode_errors = 0
        self.rotation = 0
        self.start_pts = round(start * 1000) if start is not None else 0
        self._closed = False
        checked = check_input_file(path, "an animated image")
        if checked.stat().st_size == 0:
            raise UnsupportedFormatError(f"{path}: empty file")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)
                warnings.simplefilter("ignore", UserWarning)
                self._image = Image.open(checked, formats=("GIF", "WEBP", "PNG"))
        except Image.DecompressionBombError as exc:
            raise ImageTooLargeError(f"{path}: image too large: {_one_line(exc)}") from exc
        except UnidentifiedImageError as exc:
            raise UnsupportedFormatError(
                f"{path}: not an animated image (GIF, WebP or PNG)"
            ) from exc
        except _BROKEN_ERRORS as exc:
            raise InputError(f"{path}: corrupt image header: {_one_line(exc)}") from exc
        try:
            width, height = self._image.size
            if width * height > max_pixels:
                raise ImageTooLargeError(
                    f"{path}: {width}x{height} is {width * height} pixels, "
                    f"more than the limit of {max_pixels}"
                )
            if width == 0 or height == 0:
                raise InputError(f"{path}: image has no pixels ({width}x{height})")
            self._format = str(self._image.format)
            self.plays = _plays(self._format, self._image.info.get("loop"))
            self._durations = self._read_durations()
            if self._format == "GIF" and not self.warnings and _last_byte(checked) != b";":
                # (Cut between two frames, a GIF reads as shorter without an error.)
                self._warn(
                    f"the file ends without a GIF's trailer (cut short?); kept the "
                    f"{len(self._durations)} frame(s) in it"
                )
        except BaseException:
            self._image.close()
            raise

    def _read_durations(self) -> list[int]:
        """Each frame's duration in ms (seeking reads the frame headers and data; the
        frames a GIF's file cuts short are left out here, and warned of)."""
        durations: list[int] = []
        try:
            count = int(getattr(self._image, "n_frames", 1))
        except _DECODE_ERRORS:
            count = 1 << 20  # (a file cut between two frames: read up to the cut)
        for index in range(count):
            try:
                self._image.seek(index)
                if self._format == "WEBP" or index == 0:
                    # (A WebP frame's duration is known once decoded; a first frame
                    # that does not decode is the file's error, not an empty clip.)
                    self._image.load()
            except EOFError:
                if index == 0:
                    raise InputError(f"{self.path}: truncated or corrupt: no frame") from None
                if count < 1 << 20:
                    self._warn(f"frames after {index} do not decode; kept {index}")
                break
            except _BROKEN_ERRORS as exc:
                if index == 0:
                    raise InputError(
                        f"{self.path}: truncated or corrupt: {_one_line(exc)}"
                    ) from exc
                self._warn(f"frames after {index} do not decode ({_one_line(exc)}); kept {index}")
                break
            durations.append(self._duration())
        self._image.seek(0)
        return durations

    def _duration(self) -> int:
        value = self._image.info.get("duration")
        try:
            ms = round(float(value)) if value is not None else 0
        except (TypeError, ValueError):
            ms = 0
        if self._format == "GIF" and ms <= 10:
            return _GIF_DEFAULT_MS
        return ms if ms > 0 else _GIF_DEFAULT_MS

    @property
    def time_base(self) -> Fraction:
        """One ``pts`` tick: a millisecond."""
        return _MS

    @property
    def average_rate(self) -> Fraction | None:
        """The average frame rate as a fraction."""
        total = sum(self._durations)
        if not total:
            return None
        return Fraction(len(self._durations) * 1000, total).limit_denominator(1001)

    @property
    def end_pts(self) -> int:
        """The timestamp (ms) at which the last frame yielded stops showing: the
        animation's end, or ``end``."""
        total = sum(self._durations)
        return min(total, round(self.end * 1000)) if self.end is not None else total

    @property
    def durations_ms(self) -> tuple[int, ...]:
        """Each frame's duration in milliseconds."""
        return tuple(self._durations)

    @property
    def info(self) -> VideoInfo:
        """What a video's probe says, for the animation (no audio, no rotation)."""
        rate = self.average_rate
        width, height = self._image.size
        return VideoInfo(
            width=width,
            height=height,
            fps=float(rate) if rate else 0.0,
            frame_count=len(self._durations),
            duration=sum(self._durations) / 1000,
            codec={"PNG": "apng"}.get(self._format, self._format.lower()),
            has_audio=False,
            audio_codec=None,
            rotation=0,
            time_base=_MS,
        )

    def __enter__(self) -> AnimationReader:
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
            self._image.close()

    def __iter__(self) -> Iterator[VideoFrame]:
        if self._closed:
            raise InputError(f"{self.path}: reader is closed")
        end_pts = round(self.end * 1000) if self.end is not None else None
        pts = 0
        index = 0
        for number, duration in enumerate(self._durations):
            shown_until = pts + duration
            if end_pts is not None and pts >= end_pts:
                return
            # A frame shown from before the start until after it is the first one shown.
            if shown_until > self.start_pts:
                try:
                    self._image.seek(number)
                    self._image.load()
                    image = self._frame()
                except _DECODE_ERRORS as exc:
                    self._warn(f"frame {number} does not decode ({_one_line(exc)}); kept {number}")
                    return
                at = max(pts, self.start_pts) if index == 0 else pts
                until = min(shown_until, end_pts) if end_pts is not None else shown_until
                yield VideoFrame(
                    image=image, pts=at, time=at / 1000, index=index, duration=(until - at) / 1000
                )
                index += 1
            pts = shown_until

    def _frame(self) -> Frame:
        frame = self._image
        # (A GIF's frames after the first come as RGB or RGBA; its first as a palette.)
        converted = frame.convert("RGBA") if frame.mode in ("P", "PA", "LA", "La") else frame
        return _to_bgr(_to_srgb(converted), Path(self.path))[0]

    def _warn(self, message: str) -> None:
        line = f"{self.path}: {message}"
        if line not in self.warnings:
            self.warnings.append(line)
            logger.warning("%s", line)


class AnimationWriter:
    """Write frames as an animated GIF, WebP or PNG, atomically, as a
    :class:`~faceweave.io.video.VideoWriter` writes a video (``write``, ``close``,
    ``abort``). Frames are kept until :meth:`close` encodes the file in one go.

    Args:
        path: destination; its extension (:data:`ANIMATION_EXTENSIONS`) picks the
            format (``.png`` and ``.apng``: APNG).
        width: frame width in pixels.
        height: frame height in pixels.
        fps: frame rate, for frames written without a timestamp and the last frame's
            duration when only one was written.
        time_base: one ``pts`` tick in seconds.
        plays: how many times it plays in all, 0 for ever (written as each format
            counts: a GIF's repeats after the first play).
        quality: WebP quality, 1-100 (GIF and PNG ignore it).
        max_bytes: refuse to hold more frame data than this (an
            :class:`~faceweave.errors.OutputError` names a video instead).
        labels: metadata labels (``str -> str``, see
            :func:`faceweave.provenance.image_labels`), stored as PNG text chunks in
            an APNG; ``xmp``: the same as an XMP packet, stored in a WebP and an APNG,
            and as a GIF's comment.

    GIF frames are reduced to 256 colours each as they come (a palette by Pillow's
    fast octree, the frame mapped onto it with Floyd-Steinberg dithering: mapped
    without, a dithered GIF's picture lost its provenance watermark), and frames that
    a GIF's 10-ms clock would show for under 20 ms (browsers show those for 100 ms)
    are dropped.

    Raises:
        UnsupportedFormatError: an extension not in :data:`ANIMATION_EXTENSIONS`.
        OutputError: the file cannot be written (nothing is left behind).
    """

    audio_mode = "none"

    def __init__(
        self,
        path: PathLike,
        *,
        width: int,
        height: int,
        fps: float | Fraction | None = None,
        time_base: Fraction | None = None,
        plays: int = 0,
        quality: int = DEFAULT_QUALITY,
        max_bytes: int = ANIMATION_MAX_BYTES,
        labels: Mapping[str, str] | None = None,
        xmp: bytes | None = None,
    ) -> None:
        self.path = Path(path)
        self.labels = dict(labels or {})
        self.xmp = xmp
        self._format = _FORMATS[animation_extension(path)]
        if width <= 0 or height <= 0:
            raise OutputError(f"{path}: frame size must be positive, got {width}x{height}")
        self.width, self.height = int(width), int(height)
        rate = float(fps) if fps else 0.0
        self._frame_ms = 1000 / rate if rate > 0 else float(_GIF_DEFAULT_MS)
        self._time_base = Fraction(time_base) if time_base else Fraction(1, 1000)
        self.plays = max(0, int(plays))
        self.quality = int(quality)
        self.max_bytes = max_bytes
        self.warnings: list[str] = []
        self.frames_dropped = 0
        # When the last frame stops showing (``time_base`` ticks), where the caller
        # knows; else it lasts as long as the one before it.
        self.ends_at: int | None = None
        self._frames: list[Image.Image] = []
        self._starts_ms: list[float] = []
        self._written = 0
        self._held = 0
        self._done = False

    @property
    def frames_written(self) -> int:
        """Frames given to :meth:`write` (a GIF may drop some, see the class)."""
        return self._written

    def write(self, image: Frame, pts: int | None = None) -> None:
        """Add one BGR frame shown from ``pts`` (in ``time_base`` ticks; None: one frame
        after the last)."""
        if self._done:
            raise OutputError(f"{self.path}: writer is closed")
        if image.shape[:2] != (self.height, self.width):
            raise OutputError(
                f"{self.path}: frame is {image.shape[1]}x{image.shape[0]}, "
                f"the animation {self.width}x{self.height}"
            )
        start = (
            float(pts * self._time_base) * 1000
            if pts is not None
            else (self._starts_ms[-1] + self._frame_ms if self._starts_ms else 0.0)
        )
        self._written += 1
        if self._format == "GIF" and self._starts_ms:
            # On the GIF's 10-ms clock, each frame shown at least 20 ms.
            if round(start / 10) * 10 - round(self._starts_ms[-1] / 10) * 10 < _GIF_SHORTEST_MS:
                self.frames_dropped += 1
                return
        size = animation_bytes(self.path, self.width, self.height)
        if self._held + size > self.max_bytes:
            raise OutputError(
                f"{self.path}: too many frames for an animated image ({self._written} of "
                f"{self.width}x{self.height} held, over {self.max_bytes >> 20} MiB); "
                "write a video (.mp4) or fewer frames (--trim-end, --fps)"
            )
        rgb = Image.fromarray(np.ascontiguousarray(image[:, :, ::-1]))
        if self._format == "GIF":
            # (Pillow dithers only onto a palette it is given: about 6 ms at 512x512)
            palette = rgb.quantize(256, method=Image.Quantize.FASTOCTREE)
            frame = rgb.quantize(palette=palette, dither=Image.Dither.FLOYDSTEINBERG)
        else:
            frame = rgb
        self._held += size
        self._frames.append(frame)
        self._starts_ms.append(start)

    def _durations(self) -> list[int]:
        starts = self._starts_ms
        if self._format == "GIF":
            ticks = [round(start / 10) * 10 for start in starts]
        else:
            ticks = [round(start) for start in starts]
        durations = [max(1, later - earlier) for earlier, later in itertools.pairwise(ticks)]
        last = durations[-1] if durations else max(1, round(self._frame_ms))
        if self.ends_at is not None:
            last = max(1, round(float(self.ends_at * self._time_base) * 1000 - starts[-1]))
        if self._format == "GIF":
            last = max(_GIF_SHORTEST_MS, round(last / 10) * 10)
        return [*durations, last]

    def close(self) -> None:
        """Encode the frames and write the file (temp file + rename)."""
        if self._done:
            return
        self._done = True
        if not self._frames:
            raise OutputError(f"{self.path}: no frame to write")
        options: dict[str, Any] = {"duration": self._durations()}
        # (Each format's count is 16 bits: more plays than it holds play for ever.)
        if self._format != "GIF":
            options["loop"] = self.plays if self.plays <= _MOST_COUNT else 0
        elif self.plays != 1:  # (a GIF without a loop count plays once)
            repeats = self.plays - 1 if self.plays else 0
            options["loop"] = repeats if repeats <= _MOST_COUNT else 0
        if self._format == "WEBP":
            options.update(quality=self.quality, method=4)
        elif self._format == "GIF":
            options.update(optimize=False)
        if self.xmp and self._format in ("WEBP", "GIF"):
            options["xmp" if self._format == "WEBP" else "comment"] = self.xmp
        elif self._format == "PNG" and (self.labels or self.xmp):
            info = PngImagePlugin.PngInfo()
            for key, value in self.labels.items():
                info.add_itxt(key, value)
            if self.xmp:
                info.add_itxt(XMP_PNG_KEY, self.xmp.decode("utf-8"))
            options["pnginfo"] = info
        buffer = io.BytesIO()
        try:
            first, rest = self._frames[0], self._frames[1:]
            first.save(buffer, format=self._format, save_all=True, append_images=rest, **options)
        except (OSError, ValueError, RuntimeError, OverflowError) as exc:
            raise OutputError(f"{self.path}: cannot encode: {_one_line(exc)}") from exc
        finally:
            self._frames = []
            self._held = 0
        write_bytes_atomic(self.path, buffer.getvalue())

    def abort(self) -> None:
        """Drop the frames; nothing is written."""
        self._done = True
        self._frames = []
        self._held = 0

    def __enter__(self) -> AnimationWriter:
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
            with contextlib.suppress(OutputError):
                self.abort()
