"""``faceweave verify FILE``: is this file a faceweave output? Watermark and labels.

The watermark is the evidence that survives re-encoding, resizing and metadata
stripping; labels are the easy-to-read claim that any tool can remove or forge.
Both are reported; neither needs the original.

Proposed CLI exit codes (the CLI owns them): 0 when the watermark is found; 4 when it
is not (labels alone do not count: they are trivially copied onto any file); the usual
1 / 2 for unreadable files and bad arguments.

Example:
    >>> report = verify("out/swap.jpg")  # doctest: +SKIP
    >>> print(format_report(report))  # doctest: +SKIP
    out/swap.jpg: image 1024x768
    watermark: FOUND - synthetic, faceweave; job id 'job-42' (confidence 0.87, ...)
    labels: faceweave:synthetic=true, faceweave:job=job-42, ...
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from PIL import Image, UnidentifiedImageError

from faceweave.errors import InputError
from faceweave.io.animation import AnimationReader, is_animation
from faceweave.io.image import (
    DEFAULT_MAX_PIXELS,
    READ_IMAGE_EXTENSIONS,
    PathLike,
    check_input_file,
    is_heic,
    read_image,
)
from faceweave.io.video import VIDEO_EXTENSIONS, VideoReader
from faceweave.provenance.labels import read_labels
from faceweave.provenance.watermark import (
    WatermarkResult,
    detect_watermark,
    detect_watermark_frames,
)
from faceweave.types import Frame

__all__ = ["EXIT_NOT_MARKED", "VIDEO_SAMPLE_FRAMES", "VerifyReport", "format_report", "verify"]

EXIT_NOT_MARKED = 4  # proposed exit code of ``faceweave verify`` when no mark is found
VIDEO_SAMPLE_FRAMES = 5  # frames decoded from a video, spread over its length


@dataclass(frozen=True)
class VerifyReport:
    """What :func:`verify` finds in one file.

    Attributes:
        path: the file.
        kind: ``"image"`` or ``"video"``.
        watermark: the detection result (for a video, combined over the sampled frames).
        labels: the faceweave labels found in the metadata; empty when none.
        size: (width, height) of the picture.
    """

    path: str
    kind: Literal["image", "video"]
    watermark: WatermarkResult
    labels: dict[str, str] = field(default_factory=dict)
    size: tuple[int, int] = (0, 0)

    @property
    def marked(self) -> bool:
        """The watermark was found (the exit-code decision)."""
        return self.watermark.found

    @property
    def labels_agree(self) -> bool | None:
        """Labels name the same job as the mark; None when either is missing."""
        claimed = self.labels.get("faceweave:watermark")
        if not self.watermark.found or claimed is None:
            return None
        return claimed == self.watermark.payload


def verify(
    path: PathLike,
    *,
    video_frames: int = VIDEO_SAMPLE_FRAMES,
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> VerifyReport:
    """Look for the faceweave watermark and labels in an image or a video file.

    Args:
        path: a PNG, JPEG, WebP, BMP, TIFF, AVIF or HEIC image, or a video faceweave
            reads.
        video_frames: for a video, how many frames to decode, spread evenly over its
            length (each needs a seek; their soft bits are combined).
        max_pixels: refuse a larger image (``faceweave swap --max-pixels`` writes
            larger ones when asked).

    Raises:
        InputError: the file is missing, unreadable or has no decodable frame.
        UnsupportedFormatError: neither an image nor a video.
    """
    path = check_input_file(path, "an image or a video")
    if video_frames < 1:
        raise InputError(f"video_frames must be at least 1, got {video_frames}")
    try:
        return _verify(path, video_frames, max_pixels)
    except InputError as exc:
        if str(path) in str(exc):
            raise
        # (a frame's own check, "image too small: 1x1", had not said which file)
        raise type(exc)(f"{path}: {exc}") from exc


def _verify(path: Path, video_frames: int, max_pixels: int) -> VerifyReport:
    suffix = path.suffix.lower()
    if is_animation(path):  # (an animated WebP or PNG had been read as its first frame)
        frames, total = _sample_animation(path, video_frames, max_pixels)
        return VerifyReport(
            path=str(path),
            kind="video" if total > 1 else "image",
            watermark=detect_watermark_frames(frames) if total > 1 else detect_watermark(frames[0]),
            labels=read_labels(path),
            size=(frames[0].shape[1], frames[0].shape[0]),
        )
    # A file named as an image is read as one (a broken one is refused as such, not
    # handed to FFmpeg, which reads even a text file as a "video" of its characters).
    if suffix in READ_IMAGE_EXTENSIONS or (suffix not in VIDEO_EXTENSIONS and _is_image(path)):
        frame = read_image(path, max_pixels=max_pixels)
        return VerifyReport(
            path=str(path),
            kind="image",
            watermark=detect_watermark(frame),
            labels=read_labels(path),
            size=(frame.shape[1], frame.shape[0]),
        )
    frames = _sample_video(path, video_frames)
    return VerifyReport(
        path=str(path),
        kind="video",
        watermark=detect_watermark_frames(frames),
        labels=read_labels(path),
        size=(frames[0].shape[1], frames[0].shape[0]),
    )


def format_report(report: VerifyReport) -> str:
    """Human-readable lines for the CLI (no trailing newline)."""
    mark = report.watermark
    width, height = report.size
    lines = [f"{report.path}: {report.kind} {width}x{height}"]
    detail = f"confidence {mark.confidence:.2f}, {mark.bit_errors}/{mark.coded_bits} coded bits off"
    if report.kind == "video":
        detail += f", {mark.frames} frames, {mark.frames_found} decoded alone"
    if mark.found:
        lines.append(f"watermark: FOUND - {mark.statement}; job id {mark.payload!r} ({detail})")
    else:
        lines.append(f"watermark: not found ({detail})")
    if report.labels:
        shown = ", ".join(
            f"{key}={value}" for key, value in report.labels.items() if key != "dc:description"
        )
        lines.append(f"labels: {shown}")
        if "dc:description" in report.labels:
            lines.append(f"description: {report.labels['dc:description']}")
    else:
        lines.append("labels: none")
    if report.labels_agree is False:
        lines.append(
            "warning: the labels name another job than the watermark "
            f"({report.labels.get('faceweave:watermark')!r} vs {mark.payload!r})"
        )
    return "\n".join(lines)


def _is_image(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            if is_heic(handle.read(12)):
                return True  # a HEIC photo (read_image decodes it, or says why not)
        with Image.open(path) as image:
            return image.format in ("AVIF", "BMP", "JPEG", "PNG", "TIFF", "WEBP", "MPO")
    except Image.DecompressionBombError:
        return True  # an image: read_image refuses it as too large, in one line
    except (UnidentifiedImageError, OSError):
        return False


def _sample_animation(path: Path, count: int, max_pixels: int) -> tuple[list[Frame], int]:
    """Up to ``count`` frames spread over an animation, and its frame count."""
    with AnimationReader(path, max_pixels=max_pixels) as reader:
        total = max(1, reader.info.frame_count)
        wanted = {min(total - 1, int(total * (i + 0.5) / count)) for i in range(count)}
        frames = []
        for index, frame in enumerate(reader):
            if index in wanted:
                frames.append(frame.image)
            if index >= max(wanted):
                break
    if not frames:
        raise InputError(f"{path}: no frame could be decoded")
    return frames, total


def _sample_video(path: Path, count: int) -> list[Frame]:
    with VideoReader(path) as reader:
        duration = reader.info.duration
    starts = [duration * (i + 0.5) / count for i in range(count)] if duration > 0 else [0.0]
    frames: list[Frame] = []
    for start in starts:
        with VideoReader(path, start=start) as reader:
            for frame in reader:
                frames.append(frame.image)
                break
    if not frames:
        with VideoReader(path) as reader:  # the timeline is off: take the first frame
            frames.extend(frame.image for _, frame in zip(range(1), reader, strict=False))
    if not frames:
        raise InputError(f"{path}: no video frame could be decoded")
    return frames
