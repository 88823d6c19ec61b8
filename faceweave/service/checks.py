"""Input checks at the door: nothing reaches a worker before it passes them.

- Uploads are parsed as they stream in and written to disk in chunks, off the
  event loop; a file larger than the limit aborts the request with 413 at once.
- The type comes from the content's magic bytes (PNG, JPEG, WebP, BMP, TIFF,
  AVIF, HEIC; MP4, MOV, Matroska, WebM), never from the file name or the client's ``Content-Type``.
- Images are decoded once with :func:`~faceweave.io.read_image`: the pixel limit
  is checked on the header first (decompression bombs), truncated or corrupt
  files are refused. Videos are probed for their length; a trim range must hold
  a frame.
- User file names are never used as paths (files are stored as
  ``source.<ext>``/``target.<ext>``); a name that looks like a path is refused.
"""

from __future__ import annotations

import codecs
import hashlib
import math
import os
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import anyio.to_thread
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header

from faceweave.errors import ImageTooLargeError, InputError
from faceweave.io.image import HEIC_BRANDS, TIFF_MAGIC, read_image
from faceweave.service.errors import ServiceError

if TYPE_CHECKING:  # pragma: no cover
    from starlette.requests import Request

    from faceweave.io.video import VideoInfo

__all__ = [
    "IMAGE_TYPES",
    "MediaType",
    "ReceivedFile",
    "Upload",
    "VIDEO_TYPES",
    "check_filename",
    "check_image",
    "check_video",
    "check_video_range",
    "receive_upload",
    "sniff",
]

SNIFF_BYTES = 64
MAX_FIELDS = 32
MAX_FIELD_BYTES = 1024
MAX_FILENAME = 255
_MULTIPART_OVERHEAD = 64 * 1024  # boundaries, part headers and option fields


@dataclass(frozen=True)
class MediaType:
    """A sniffed type: ``kind`` is ``image`` or ``video``; ``ext`` is how we store it."""

    kind: str
    ext: str
    mime: str


IMAGE_TYPES = {
    "png": MediaType("image", ".png", "image/png"),
    "jpeg": MediaType("image", ".jpg", "image/jpeg"),
    "webp": MediaType("image", ".webp", "image/webp"),
    "bmp": MediaType("image", ".bmp", "image/bmp"),
    "tiff": MediaType("image", ".tiff", "image/tiff"),
    "avif": MediaType("image", ".avif", "image/avif"),
    "heic": MediaType("image", ".heic", "image/heic"),
}
VIDEO_TYPES = {
    "mp4": MediaType("video", ".mp4", "video/mp4"),
    "mov": MediaType("video", ".mov", "video/quicktime"),
    "mkv": MediaType("video", ".mkv", "video/x-matroska"),
    "webm": MediaType("video", ".webm", "video/webm"),
    # Animated images: swapped frame by frame as a video is, and kept animated.
    "gif": MediaType("video", ".gif", "image/gif"),
    "animated_webp": MediaType("video", ".webp", "image/webp"),
    "apng": MediaType("video", ".apng", "image/apng"),
}
# QuickTime files written without an ``ftyp`` box start with one of these atoms.
_QUICKTIME_ATOMS = (b"moov", b"mdat", b"wide", b"free", b"skip", b"pnot")
_BMP_HEADER_SIZES = (12, 40, 52, 56, 64, 108, 124)
# ``ftyp`` brands of HEIF images: the MP4 family's box format, but no video (they had
# been taken for one, "cannot read the video"): AVIF (AV1 inside) and HEIC (HEVC inside,
# an iPhone's photos). A generic HEIF brand is AVIF where its list of compatible brands
# names AVIF, else HEIC.
_AVIF_BRANDS = (b"avif", b"avis")
_HEIF_BRANDS = (*HEIC_BRANDS, b"mif1", b"msf1")


def sniff(head: bytes) -> MediaType | None:
    """The media type of a file from its first bytes (at least 32), or None.

    Example:
        >>> sniff(b"\\x89PNG\\r\\n\\x1a\\n" + bytes(24)).ext
        '.png'
        >>> sniff(b"hello, world") is None
        True
    """
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        # An APNG's animation control chunk comes before its first picture (here
        # seen where it follows the header chunk, as the usual encoders write it).
        return VIDEO_TYPES["apng"] if b"acTL" in head[:SNIFF_BYTES] else IMAGE_TYPES["png"]
    if head.startswith((b"GIF87a", b"GIF89a")):
        return VIDEO_TYPES["gif"]
    if head.startswith(b"\xff\xd8\xff"):
        return IMAGE_TYPES["jpeg"]
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        # An extended WebP (VP8X) whose flags byte has the animation bit.
        animated = head[12:16] == b"VP8X" and len(head) > 20 and head[20] & 0x02
        return VIDEO_TYPES["animated_webp"] if animated else IMAGE_TYPES["webp"]
    if head[:2] == b"BM" and len(head) >= 18:
        if int.from_bytes(head[14:18], "little") in _BMP_HEADER_SIZES:
            return IMAGE_TYPES["bmp"]
    if head.startswith(TIFF_MAGIC):
        return IMAGE_TYPES["tiff"]
    if head[4:8] == b"ftyp":
        brand = head[8:12]
        if brand in _AVIF_BRANDS or (brand in _HEIF_BRANDS and _compatible_avif(head)):
            return IMAGE_TYPES["avif"]
        if brand in _HEIF_BRANDS:  # a phone's HEIC photo in the MP4 family's box format
            return IMAGE_TYPES["heic"]
        return VIDEO_TYPES["mov" if brand == b"qt  " else "mp4"]
    if head[4:8] in _QUICKTIME_ATOMS:
        return VIDEO_TYPES["mov"]
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return VIDEO_TYPES["webm" if b"webm" in head[:SNIFF_BYTES] else "mkv"]
    return None


def _compatible_avif(head: bytes) -> bool:
    """Whether an ``ftyp`` box's compatible brands (after its major brand and minor
    version) name AVIF."""
    end = min(int.from_bytes(head[:4], "big"), len(head))
    brands = head[16:end]
    return any(brands[i : i + 4] in _AVIF_BRANDS for i in range(0, len(brands) - 3, 4))


def check_filename(name: str) -> str:
    """A user's file name made safe for display, or a 422 if it looks like a path.

    Browsers and curl send only the base name; a name with a directory, ``..``
    or control characters is a broken or hostile client. The name is never
    used as a path either way.
    """
    if "/" in name or "\\" in name or "\x00" in name or name in (".", ".."):
        raise ServiceError(
            422,
            "bad_filename",
            "file names must not contain a path ('/', '\\' or '..') or a NUL character",
        )
    cleaned = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C")
    return cleaned[:MAX_FILENAME]


@dataclass
class ReceivedFile:
    """A file part written to disk as it arrived."""

    field: str
    path: Path
    filename: str
    size: int = 0
    sha256: str = ""
    head: bytes = b""


@dataclass
class Upload:
    """A parsed multipart request: text fields and the files written to disk."""

    fields: dict[str, str] = field(default_factory=dict)
    files: dict[str, ReceivedFile] = field(default_factory=dict)


class _Part:
    def __init__(self) -> None:
        self.headers: dict[bytes, bytes] = {}
        self.header_name = b""
        self.header_value = b""
        self.name = ""
        self.filename: str | None = None
        self.data = bytearray()
        self.file: ReceivedFile | None = None
        self.handle: BinaryIO | None = None
        self.hasher = hashlib.sha256()


class _UploadParser:
    """Streams ``multipart/form-data`` into files under ``directory``.

    python-multipart's callbacks only collect what arrived; the async loop in
    :meth:`parse` then writes file data in a worker thread, so the event loop
    never waits on the disk.
    """

    def __init__(self, directory: Path, file_fields: tuple[str, ...], max_file_bytes: int) -> None:
        self.directory = directory
        self.file_fields = file_fields
        self.max_file_bytes = max_file_bytes
        self.upload = Upload()
        self.part = _Part()
        self.pending: list[tuple[_Part, bytes]] = []
        self.finished: list[_Part] = []
        self.open_parts: list[_Part] = []
        self.charset = "utf-8"

    # callbacks (synchronous, no I/O)
    def on_part_begin(self) -> None:
        self.part = _Part()

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self.part.header_name += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self.part.header_value += data[start:end]

    def on_header_end(self) -> None:
        self.part.headers[self.part.header_name.lower()] = self.part.header_value
        self.part.header_name = self.part.header_value = b""

    def on_headers_finished(self) -> None:
        _, options = parse_options_header(self.part.headers.get(b"content-disposition"))
        if b"name" not in options:
            raise ServiceError(400, "bad_multipart", "a form part has no name")
        part = self.part
        part.name = options[b"name"].decode(self.charset, errors="replace")
        if b"filename" in options:
            part.filename = options[b"filename"].decode(self.charset, errors="replace")
        if part.name in self.file_fields:
            if part.filename is None:
                raise ServiceError(422, "bad_field", f"{part.name!r} must be a file upload")
            if part.name in self.upload.files:
                raise ServiceError(422, "bad_field", f"{part.name!r} was sent twice")
            display = check_filename(part.filename)
            part.file = ReceivedFile(part.name, self.directory / f"{part.name}.upload", display)
            self.upload.files[part.name] = part.file
            self.open_parts.append(part)
        elif part.filename is not None:
            expected = ", ".join(self.file_fields)
            raise ServiceError(
                422, "bad_field", f"unexpected file {part.name[:40]!r}; files are: {expected}"
            )
        elif len(self.upload.fields) >= MAX_FIELDS:
            raise ServiceError(422, "bad_field", f"more than {MAX_FIELDS} form fields")

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        chunk = data[start:end]
        part = self.part
        if part.file is None:
            if len(part.data) + len(chunk) > MAX_FIELD_BYTES:
                raise ServiceError(422, "bad_field", f"form field {part.name[:40]!r} is too long")
            part.data.extend(chunk)
            return
        part.file.size += len(chunk)
        if part.file.size > self.max_file_bytes:
            raise ServiceError(
                413,
                "upload_too_large",
                f"{part.name} is larger than the limit of {self.max_file_bytes} bytes",
            )
        self.pending.append((part, chunk))

    def on_part_end(self) -> None:
        part = self.part
        if part.file is None:
            if part.name in self.upload.fields:
                raise ServiceError(422, "bad_field", f"{part.name[:40]!r} was sent twice")
            self.upload.fields[part.name] = part.data.decode(self.charset, errors="replace")
        else:
            self.finished.append(part)

    # I/O, in a worker thread
    def _flush(self, pending: list[tuple[_Part, bytes]], finished: list[_Part]) -> None:
        for part, chunk in pending:
            if part.handle is None:
                part.handle = open(part.file.path, "xb")  # type: ignore[union-attr]  # noqa: SIM115
            if part.file is not None and len(part.file.head) < SNIFF_BYTES:
                part.file.head += chunk[: SNIFF_BYTES - len(part.file.head)]
            part.hasher.update(chunk)
            part.handle.write(chunk)
        for part in finished:
            assert part.file is not None
            if part.handle is None:  # an empty file: no data callback ever came
                part.handle = open(part.file.path, "xb")  # noqa: SIM115
            part.handle.flush()
            os.fsync(part.handle.fileno())
            part.handle.close()
            part.file.sha256 = part.hasher.hexdigest()

    def close_all(self) -> None:
        for part in self.open_parts:
            if part.handle is not None and not part.handle.closed:
                part.handle.close()

    async def parse(self, request: Request) -> Upload:
        content_type = request.headers.get("content-type", "")
        mime, params = parse_options_header(content_type)
        if mime != b"multipart/form-data":
            raise ServiceError(415, "expected_multipart", "send the files as multipart/form-data")
        if b"boundary" not in params:
            raise ServiceError(400, "bad_multipart", "multipart/form-data without a boundary")
        charset = params.get(b"charset", b"utf-8").decode("latin-1")
        try:
            self.charset = codecs.lookup(charset).name
        except LookupError:
            self.charset = "latin-1"
        if "name".encode(self.charset, errors="replace") != b"name":
            # A part's headers are ASCII at heart (UTF-16's names had come out as
            # garbage, "a form part has no name"): only a charset that keeps ASCII.
            self.charset = "utf-8"
        callbacks = {
            "on_part_begin": self.on_part_begin,
            "on_part_data": self.on_part_data,
            "on_part_end": self.on_part_end,
            "on_header_field": self.on_header_field,
            "on_header_value": self.on_header_value,
            "on_header_end": self.on_header_end,
            "on_headers_finished": self.on_headers_finished,
        }
        try:
            parser = MultipartParser(params[b"boundary"], callbacks)  # type: ignore[arg-type]
            async for chunk in request.stream():
                parser.write(chunk)
                if self.pending or self.finished:
                    pending, finished = self.pending, self.finished
                    self.pending, self.finished = [], []
                    await anyio.to_thread.run_sync(self._flush, pending, finished)
            parser.finalize()
        except (FormParserError, ValueError) as exc:
            if "header size" in str(exc) or "header count" in str(exc):
                # (A file name of thousands of characters had read as "malformed".)
                raise ServiceError(
                    400,
                    "bad_multipart",
                    "a form part's headers are too large (a file name over 4000 "
                    "characters?), or too many",
                ) from exc
            raise ServiceError(400, "bad_multipart", "malformed multipart/form-data") from exc
        finally:
            self.close_all()
        unfinished = [f.field for f in self.upload.files.values() if not f.sha256]
        if unfinished:
            raise ServiceError(400, "bad_multipart", "the request ended inside a file")
        return self.upload


async def receive_upload(
    request: Request,
    directory: Path,
    *,
    file_fields: tuple[str, ...],
    max_file_bytes: int,
) -> Upload:
    """Parse a multipart request, writing its files into ``directory`` (which must exist).

    Files are written as ``<field>.upload``; the caller renames them once their
    type is known and removes ``directory`` on any error.

    Raises:
        ServiceError: 413 when a file exceeds ``max_file_bytes`` (or the declared
            body could not fit), 415 when the body is not multipart, 4xx for a
            malformed body, unknown fields or path-like file names.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit():
        if int(declared) > max_file_bytes * len(file_fields) + _MULTIPART_OVERHEAD:
            raise ServiceError(
                413,
                "upload_too_large",
                f"request body of {declared} bytes is larger than the upload limit "
                f"({max_file_bytes} bytes per file)",
            )
    return await _UploadParser(directory, file_fields, max_file_bytes).parse(request)


def check_media(received: ReceivedFile, allowed: tuple[str, ...]) -> MediaType:
    """The sniffed type of an uploaded file; 422 when empty, 415 when not an allowed kind."""
    if received.size == 0:
        raise ServiceError(422, "empty_file", f"{received.field} is empty")
    media = sniff(received.head)
    if media is None or media.kind not in allowed:
        wanted = " or ".join(
            "an image (PNG, JPEG, WebP, BMP, TIFF, AVIF, HEIC)"
            if kind == "image"
            else "a video (MP4, MOV, MKV, WebM) or an animated GIF, WebP or PNG"
            for kind in allowed
        )
        raise ServiceError(
            415, "unsupported_type", f"{received.field} is not {wanted} (judged by its content)"
        )
    return media


def check_image(path: Path, *, max_pixels: int, role: str, upscale: int = 1) -> tuple[int, int]:
    """Decode an image fully; returns (width, height). Blocking: run it in a thread.
    ``upscale``: the result is that many times larger each way (the server's frame
    enhancer), and must fit ``max_pixels`` too.

    Raises:
        ImageTooLargeError: over ``max_pixels`` (checked on the header first), or
            upscaled over it.
        InputError: truncated, corrupt or unreadable.
    """
    try:
        frame = read_image(path, max_pixels=max_pixels)
    except InputError as exc:
        # read_image names the path; the client knows the file by its role.
        message = str(exc).replace(str(path), role)
        raise type(exc)(message) from exc
    height, width = frame.shape[:2]
    if width < 8 or height < 8:
        raise ServiceError(422, "image_too_small", f"{role} is {width}x{height}; at least 8x8")
    if upscale > 1 and (width * upscale) * (height * upscale) > max_pixels:
        raise ImageTooLargeError(
            _upscaled_message(f"{role} is", width, height, upscale, max_pixels)
        )
    return width, height


def _upscaled_message(what: str, width: int, height: int, scale: int, max_pixels: int) -> str:
    """Why ``what`` (``"target is"``, ``"target frames are"``) cannot be upscaled."""
    return (
        f"{what} {width}x{height}: upscaled x{scale} by the server's frame enhancer, "
        f"{width * scale}x{height * scale} is more than {max_pixels} pixels "
        "(upscale=false keeps the target's size)"
    )


def check_video(
    path: Path,
    *,
    max_seconds: float,
    max_pixels: int,
    role: str,
    upscale: int = 1,
    trim_start: float = 0.0,
    trim_end: float = 0.0,
) -> float:
    """Probe a video; returns its length in seconds. Blocking: run it in a thread.
    ``upscale``: as :func:`check_image`'s.

    Raises:
        ServiceError: 413 when longer than ``max_seconds`` or frames larger than
            ``max_pixels`` (upscaled too); 422 when unreadable or of unknown length.
    """
    from faceweave.io.animation import probe_clip

    try:
        info = probe_clip(path)
    except InputError as exc:
        # Its reason (no video stream, only sound), without the server's path.
        reason = " ".join(str(exc).replace(str(path), "").split()).lstrip(": ")
        raise ServiceError(
            422, "bad_video", f"{role}: cannot read the video" + (f": {reason}" if reason else "")
        ) from exc
    duration = info.duration or (info.frame_count / info.fps if info.fps > 0 else 0.0)
    if duration <= 0:
        raise ServiceError(422, "bad_video", f"{role}: cannot tell the video's length")
    if info.width < 8 or info.height < 8:  # as check_image: no face fits
        raise ServiceError(
            422, "image_too_small", f"{role} frames are {info.width}x{info.height}; at least 8x8"
        )
    if duration > max_seconds:
        raise ServiceError(
            413,
            "video_too_long",
            f"{role} is {duration:.1f} s long; the limit is {max_seconds:g} s",
        )
    if info.width * info.height > max_pixels:
        raise ServiceError(
            413,
            "video_too_large",
            f"{role} frames are {info.width}x{info.height}, more than {max_pixels} pixels",
        )
    if upscale > 1 and (info.width * upscale) * (info.height * upscale) > max_pixels:
        raise ServiceError(
            413,
            "video_too_large",
            _upscaled_message(f"{role} frames are", info.width, info.height, upscale, max_pixels),
        )
    _check_animation_held(path, info, duration, role, upscale, trim_start, trim_end)
    return float(duration)


def _check_animation_held(
    path: Path,
    info: VideoInfo,
    duration: float,
    role: str,
    upscale: int,
    trim_start: float,
    trim_end: float,
) -> None:
    """An animated result is held whole until it is written (see
    :data:`~faceweave.io.animation.ANIMATION_MAX_BYTES`): a target whose frames, over
    the trim, would be more is refused here (it had been taken, and failed in its job
    with the command line's advice)."""
    from faceweave.io.animation import ANIMATION_EXTENSIONS, ANIMATION_MAX_BYTES, animation_bytes

    if path.suffix.lower() not in ANIMATION_EXTENSIONS or duration <= 0:
        return
    span = (trim_end or duration) - trim_start
    frames = math.ceil(info.frame_count * max(0.0, min(1.0, span / duration)))
    width, height = info.width * upscale, info.height * upscale
    if frames * animation_bytes(path, width, height) > ANIMATION_MAX_BYTES:
        raise ServiceError(
            413,
            "video_too_large",
            f"{role} has {frames} frames of {width}x{height} to swap: more than an animated "
            f"result holds ({ANIMATION_MAX_BYTES >> 20} MiB); send fewer or smaller frames, "
            "or a part of it (trim_start, trim_end)",
        )


def check_video_range(path: Path, *, start: float, end: float, duration: float, role: str) -> None:
    """Refuse a trim range (``end`` 0: to the video's end) in which the job's reader
    finds no frame, such as a start after the last frame but before the video's end
    (``duration`` is only for the message). Decodes from the key frame before ``start``
    to the first frame in range. Blocking: run it in a thread.

    Raises:
        ServiceError: 422 ``bad_option`` when the range holds no frame.
    """
    from faceweave.io.animation import open_clip

    with open_clip(path, start=start or None, end=end or None) as reader:
        for _ in reader:
            return
    span = f"trim_start {start:g} s to " + (f"trim_end {end:g} s" if end else "its end")
    raise ServiceError(
        422, "bad_option", f"the {role} ({duration:.2f} s long) has no frame from {span}"
    )
