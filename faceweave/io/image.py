"""Still images: read any common file into a :data:`~faceweave.types.Frame`, write one back.

Reading goes through Pillow (HEIC through pi-heif's plugin for it): it reports the
size from the header before decoding (so decompression bombs are refused cheaply), it
refuses truncated files instead of padding them with grey
(``ImageFile.LOAD_TRUNCATED_IMAGES`` must stay at its default ``False``; faceweave
never changes it), and it applies EXIF orientation.
Writing goes through OpenCV, encoding in memory and replacing the destination
atomically, so a crash or a full disk never leaves half an image behind.

Example:
    >>> frame = read_image("face.jpg")  # doctest: +SKIP
    >>> write_image("out/face.png", frame)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import secrets
import time
import warnings
from collections.abc import Iterable, Iterator
from glob import escape as glob_escape
from pathlib import Path
from typing import Any, BinaryIO

import cv2
import numpy as np
from numpy.typing import NDArray
from PIL import Image, ImageCms, ImageOps, TiffImagePlugin, UnidentifiedImageError

from faceweave.errors import ImageTooLargeError, InputError, OutputError, UnsupportedFormatError
from faceweave.types import Frame

__all__ = [
    "DEFAULT_MAX_PIXELS",
    "DEFAULT_QUALITY",
    "IMAGE_EXTENSIONS",
    "check_input_file",
    "check_output_path",
    "image_extension",
    "list_files",
    "list_images",
    "make_output_dir",
    "output_path_for",
    "ALPHA_EXTENSIONS",
    "HEIC_BRANDS",
    "HEIF_EXTENSIONS",
    "READ_IMAGE_EXTENSIONS",
    "TIFF_COMPRESSION",
    "TIFF_MAGIC",
    "TIFF_PREDICTOR",
    "is_heic",
    "keep_alpha",
    "pil_image",
    "read_image",
    "read_image_and_alpha",
    "restore_alpha",
    "same_file",
    "write_bytes_atomic",
    "write_image",
]

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff", ".avif")
# HEIF photos coded in HEVC (an iPhone's HEIC): read (pi-heif decodes them), not written
# (no package here encodes HEVC); a folder's HEIC photos are written as JPEG.
HEIF_EXTENSIONS = (".heic", ".heif", ".hif")
READ_IMAGE_EXTENSIONS = (*IMAGE_EXTENSIONS, *HEIF_EXTENSIONS)
_HEIF_WRITTEN_AS = ".jpg"
# The formats we write with an alpha channel (a transparent photo keeps its transparency).
ALPHA_EXTENSIONS = (".png", ".webp", ".tif", ".tiff", ".avif")
DEFAULT_MAX_PIXELS = 64_000_000
DEFAULT_QUALITY = 95

# Pillow decoders we use; the JPEG one also opens the multi-picture (MPO) files phones write.
# HEIF last: AVIF files with a generic HEIF brand are Pillow's AVIF plugin's.
# A GIF is read too (its first frame: a GIF avatar as the source photo); as a target it
# is an animation (faceweave.io.animation).
_READ_FORMATS = ("AVIF", "BMP", "GIF", "JPEG", "PNG", "TIFF", "WEBP", "HEIF")
# Background for transparent pixels: white, as image viewers and browsers show them.
_ALPHA_BACKGROUND = 255.0
_PNG_COMPRESSION = 3  # zlib level: OpenCV's default, a good speed/size balance
# TIFF: written by Pillow, which marks an alpha channel as such (ExtraSamples:
# unassociated; OpenCV's TIFFs have no ExtraSamples tag, and readers other than Pillow
# may show them opaque); Deflate with horizontal differencing (Predictor 2): lossless,
# read by every TIFF reader, the size of OpenCV's (and 25% under Deflate alone).
TIFF_COMPRESSION = "tiff_adobe_deflate"
TIFF_PREDICTOR = {317: 2}
# The PNG text chunk's keyword an XMP packet is stored under (Adobe's XMP spec, part 3).
XMP_PNG_KEY = "XML:com.adobe.xmp"
TIFF_MAGIC = (b"II*\x00", b"MM\x00*")  # little- and big-endian
# ``ftyp`` brands of HEIF photos coded in HEVC (an iPhone's HEIC; Pillow's AVIF plugin
# reads the AV1 ones).
HEIC_BRANDS = (b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"hevm", b"hevs")
_TEMP_ATTEMPTS = 8

PathLike = str | os.PathLike[str]


def read_image(path: PathLike, *, max_pixels: int = DEFAULT_MAX_PIXELS) -> Frame:
    """Read a PNG, JPEG, WebP, BMP, TIFF, AVIF or HEIC file as a BGR frame.

    Grayscale is expanded to three channels, 16-bit samples are scaled to 8 bits
    (floating-point grey, as scientific TIFFs hold it, from 0..1 or 0..255; a HEIC's
    10-bit ones too), transparent pixels are composited over white and EXIF
    orientation (a HEIC's rotation and mirroring) is applied, so the frame looks like
    the picture a viewer shows. Of a multi-page TIFF, the first page is read; of a
    HEIC holding several pictures (a burst), its primary one.

    Args:
        path: the image file.
        max_pixels: refuse images with more pixels than this, checked on the
            header before any pixel is decoded. Pillow's own decompression-bomb
            limit (``2 * PIL.Image.MAX_IMAGE_PIXELS``) applies as well.

    Returns:
        The decoded frame.

    Shape:
        - Output: :math:`(H, W, 3)`, ``uint8``, BGR.

    Raises:
        InputError: the file is missing, a directory or not a regular file (a pipe, a
            device), unreadable, truncated or corrupt.
        UnsupportedFormatError: the content is empty or not an image format we read.
        ImageTooLargeError: width * height is more than ``max_pixels``.

    Example:
        >>> frame = read_image("face.jpg")  # doctest: +SKIP
        >>> frame.shape, frame.dtype  # doctest: +SKIP
        ((512, 512, 3), dtype('uint8'))
    """
    return read_image_and_alpha(path, max_pixels=max_pixels)[0]


def read_image_and_alpha(
    path: PathLike, *, max_pixels: int = DEFAULT_MAX_PIXELS
) -> tuple[Frame, NDArray[np.uint8] | None]:
    """:func:`read_image`, and the picture's transparency: its alpha channel, or None
    where every pixel is opaque (no alpha channel, or one at 255 throughout).

    The frame is the picture over white, as :func:`read_image` gives it; with
    :func:`restore_alpha` a frame made from it is written transparent again.

    Shape:
        - Output: :math:`(H, W, 3)` ``uint8`` BGR, and :math:`(H, W)` ``uint8`` or None.

    Raises:
        As :func:`read_image`.
    """
    if not isinstance(path, str | bytes | os.PathLike):
        # (os.fsdecode's own TypeError, unlike every other bad input here.)
        raise InputError(f"an image path is a str or a Path, got {type(path).__name__}")
    path = check_input_file(os.fsdecode(path), "an image")
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    with handle:
        return _decode(handle, path, max_pixels)


def restore_alpha(frame: Frame, alpha: NDArray[np.uint8]) -> NDArray[np.uint8]:
    """The BGRA picture that, shown over white, is ``frame``: ``alpha`` as the
    transparency, and the colours taken back out of their blend with white (a frame
    from :func:`read_image_and_alpha` gives the file's picture back, within a grey
    level where it is at least half opaque). Fully transparent pixels are black.

    Shape:
        - frame: :math:`(H, W, 3)`, ``uint8``; alpha: :math:`(H, W)`, ``uint8``.
        - Output: :math:`(H, W, 4)`, ``uint8`` BGRA.

    Raises:
        InputError: the shapes do not match.
    """
    _check_frame(frame)
    if frame.ndim != 3 or not isinstance(alpha, np.ndarray) or alpha.shape != frame.shape[:2]:
        raise InputError(
            f"alpha must be (H, W) for a (H, W, 3) frame, got "
            f"{getattr(alpha, 'shape', type(alpha).__name__)} for {frame.shape}"
        )
    a = alpha.astype(np.float32)[:, :, None] / 255.0
    over_white = _ALPHA_BACKGROUND * (1.0 - a)
    colour = (frame.astype(np.float32) - over_white) / np.maximum(a, 1e-6)
    colour = np.where(a > 0, np.clip(np.rint(colour), 0, 255), 0).astype(np.uint8)
    return np.ascontiguousarray(np.dstack([colour, alpha.astype(np.uint8)]))


def keep_alpha(frame: Frame, alpha: NDArray[np.uint8] | None, path: PathLike) -> NDArray[np.uint8]:
    """``frame`` to write to ``path`` with the picture's transparency ``alpha``
    (:func:`read_image_and_alpha`): BGRA (:func:`restore_alpha`) where ``path``'s
    format holds an alpha channel (:data:`ALPHA_EXTENSIONS`) and there is one, else
    ``frame`` as it is (over white)."""
    if alpha is None or Path(path).suffix.lower() not in ALPHA_EXTENSIONS:
        return frame
    return restore_alpha(frame, alpha)


def same_file(a: PathLike, b: PathLike) -> bool:
    """Whether two paths name the same file or directory (an existing one, by its inode,
    so links and relative paths count; else by where they resolve to)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        try:
            return Path(a).resolve() == Path(b).resolve()
        except (OSError, RuntimeError):  # a symlink loop, a name too long
            return False


def check_input_file(path: PathLike, what: str) -> Path:
    """``path`` as a Path if it is a regular file to read ``what`` (``"an image"``) from.

    Raises:
        InputError: it is missing, a directory, not a regular file (a pipe would wait
            for a writer, a device never end), or its name cannot be looked up (too
            long, a loop of links).
    """
    path = Path(path)
    try:
        if not path.exists():
            raise InputError(f"{path}: no such file")
        if path.is_dir():
            raise InputError(f"{path}: is a directory, not {what}")
        if not path.is_file():
            raise InputError(f"{path}: not a regular file")
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return path


def write_image(path: PathLike, frame: Frame, *, quality: int = DEFAULT_QUALITY) -> None:
    """Write a frame atomically; the format follows the file extension.

    The image is encoded in memory, written to a hidden temporary file in the
    destination directory (``.<name>.<pid>-<random>.tmp``), flushed to disk and moved
    over ``path`` in one step. On any failure the temporary file is removed and
    ``path`` is left as it was.

    Args:
        path: destination; its extension is one of :data:`IMAGE_EXTENSIONS`.
        frame: the image to write.
        quality: 1..100 for JPEG, WebP and AVIF; ignored by PNG, BMP and TIFF (lossless).

    Shape:
        - frame: :math:`(H, W, 3)` BGR or :math:`(H, W)` grayscale, ``uint8``; or
          :math:`(H, W, 4)` BGRA (:func:`restore_alpha`) for a format of
          :data:`ALPHA_EXTENSIONS`.

    Raises:
        UnsupportedFormatError: the extension is not one we write.
        InputError: ``frame`` is not a uint8 image or ``quality`` is out of range, or
            it has an alpha channel that the format cannot hold.
        OutputError: the directory is missing or not writable, or the write failed.
    """
    path = Path(path)
    extension = image_extension(path)
    _check_frame(frame, alpha=True)
    if frame.ndim == 3 and frame.shape[2] == 4 and extension not in ALPHA_EXTENSIONS:
        raise InputError(f"{path}: {extension} cannot hold an alpha channel")
    if not 1 <= quality <= 100:
        raise InputError(f"quality must be in 1..100, got {quality}")
    data = _encode(frame, extension, quality, path)
    _atomic_write(path, data)


def image_extension(path: PathLike) -> str:
    """The lower-case extension of ``path`` if faceweave writes that format.

    Raises:
        UnsupportedFormatError: any other extension.
    """
    extension = Path(path).suffix.lower()
    if extension in HEIF_EXTENSIONS:
        raise UnsupportedFormatError(
            f"{path}: HEIC is read but not written (no HEVC encoder here); "
            "write .jpg, or .avif for a smaller file of the same quality"
        )
    if extension not in IMAGE_EXTENSIONS:
        supported = ", ".join(IMAGE_EXTENSIONS)
        shown = extension or "no extension"
        raise UnsupportedFormatError(f"{path}: unsupported image format ({shown}); use {supported}")
    return extension


def check_output_path(path: PathLike, *, image: bool = True) -> Path:
    """Check, before any work is done, that an image (or with ``image=False`` any
    file) can be written to ``path``.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        UnsupportedFormatError: the extension is not one we write (an image only).
        OutputError: the directory is missing, not a directory or not writable,
            or ``path`` is a directory or another file that is not a regular file
            (a pipe, a device, a link to one).
    """
    path = Path(path)
    if image:
        image_extension(path)
    _check_directory(path)
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise OutputError(f"{path}: cannot write: permission denied on {path.parent}")
    return path


def make_output_dir(path: PathLike) -> Path:
    """Create the output directory of a batch (and its parents) if needed.

    Raises:
        OutputError: it cannot be created or written to (checked once here, so a
            batch fails before its first image rather than on each), or ``path``
            exists and is not a directory.
    """
    path = Path(path)
    try:
        if path.exists() and not path.is_dir():
            raise OutputError(f"{path}: exists and is not a directory")
        path.mkdir(parents=True, exist_ok=True)
    except OutputError:
        raise
    except OSError as exc:
        raise OutputError(f"{path}: cannot create directory: {exc.strerror or exc}") from exc
    if not os.access(path, os.W_OK | os.X_OK):
        raise OutputError(f"{path}: cannot write: permission denied")
    return path


def list_images(directory: PathLike) -> list[Path]:
    """The image files directly inside ``directory``, sorted by name.

    Files are picked by extension (any case); hidden files and sub-directories
    are skipped.

    Raises:
        InputError: ``directory`` is missing or not a directory.
    """
    return list_files(directory, READ_IMAGE_EXTENSIONS)


def list_files(directory: PathLike, extensions: Iterable[str]) -> list[Path]:
    """The files directly inside ``directory`` whose extension (any case) is one of
    ``extensions`` (lower case, with the dot), sorted by name; hidden files and
    sub-directories are skipped.

    Raises:
        InputError: ``directory`` is missing or not a directory.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(f"{directory}: no such directory")
    wanted = frozenset(extensions)
    return sorted(
        entry
        for entry in directory.iterdir()
        if entry.suffix.lower() in wanted and not entry.name.startswith(".") and entry.is_file()
    )


def output_path_for(
    source_path: PathLike,
    output_dir: PathLike,
    *,
    keep_format: bool = True,
    default_extension: str = ".png",
) -> Path:
    """Where a batch writes the result for ``source_path``: same name under ``output_dir``.

    Args:
        source_path: the input image.
        output_dir: the batch's output directory.
        keep_format: keep the input's extension when faceweave writes it (a HEIC
            photo, which it reads but does not write, becomes a JPEG); otherwise
            use ``default_extension``.
        default_extension: one of :data:`IMAGE_EXTENSIONS`.

    Example:
        >>> output_path_for("in/a.JPG", "out").as_posix()
        'out/a.JPG'
        >>> output_path_for("in/a.jpg", "out", keep_format=False).as_posix()
        'out/a.png'
        >>> output_path_for("in/IMG_0001.HEIC", "out").as_posix()
        'out/IMG_0001.jpg'
    """
    source_path = Path(source_path)
    if default_extension.lower() not in IMAGE_EXTENSIONS:
        raise UnsupportedFormatError(f"unsupported default extension {default_extension!r}")
    name = source_path.name
    if keep_format and source_path.suffix.lower() in HEIF_EXTENSIONS:
        name = source_path.stem + _HEIF_WRITTEN_AS
    elif not (keep_format and source_path.suffix.lower() in IMAGE_EXTENSIONS):
        name = source_path.stem + default_extension
    return Path(output_dir) / name


# --- reading ---------------------------------------------------------------------------------


@functools.cache
def _heif_reader() -> bool:
    """Register pi-heif's HEIF plugin with Pillow (once); False where it is missing."""
    try:
        import pi_heif
    except ImportError:
        return False
    pi_heif.register_heif_opener()
    return True


def _decode(
    handle: BinaryIO, path: Path, max_pixels: int
) -> tuple[Frame, NDArray[np.uint8] | None]:
    heif = _heif_reader()
    try:
        with warnings.catch_warnings():
            # We enforce our own limit below, and a header too broken to open gets its
            # own error: Pillow's warnings (bomb, "Corrupt EXIF data") would be noise.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            warnings.simplefilter("ignore", UserWarning)
            image = Image.open(handle, formats=_READ_FORMATS if heif else _READ_FORMATS[:-1])
    except Image.DecompressionBombError as exc:
        # Pillow's own, higher limit tripped first: say ours, as the check below does.
        found = re.search(r"\((\d+) pixels\)", str(exc))
        size = f"is {found.group(1)} pixels, " if found else "is "
        raise ImageTooLargeError(
            f"{path}: image too large: {size}more than the limit of {max_pixels}"
        ) from exc
    except UnidentifiedImageError as exc:
        if path.stat().st_size == 0:
            raise UnsupportedFormatError(f"{path}: empty file") from exc
        if _starts_with(handle, TIFF_MAGIC):
            raise _tiff_error(handle, path) from exc
        if is_heic(_head(handle, 12)):
            if heif:
                raise _heif_error(handle, path) from exc
            raise UnsupportedFormatError(
                f"{path}: a HEIC photo (an iPhone's), which this installation cannot "
                "read (pi-heif is missing: pip install pi-heif), or save it as JPEG "
                "(the iPhone's Settings > Camera > Formats > Most Compatible)"
            ) from exc
        raise UnsupportedFormatError(
            f"{path}: not a supported image (PNG, JPEG, WebP, BMP, TIFF, AVIF, HEIC or GIF)"
        ) from exc
    except (OSError, ValueError, SyntaxError) as exc:  # Pillow's broken-header errors
        raise InputError(f"{path}: corrupt image header: {_one_line(exc)}") from exc
    with image:
        width, height = image.size
        if width * height > max_pixels:
            raise ImageTooLargeError(
                f"{path}: {width}x{height} is {width * height} pixels, "
                f"more than the limit of {max_pixels}"
            )
        if width == 0 or height == 0:
            raise InputError(f"{path}: image has no pixels ({width}x{height})")
        try:
            image.load()
        except (OSError, ValueError, SyntaxError, EOFError, RuntimeError) as exc:
            # (RuntimeError: libheif's, through pi-heif, for HEVC data it cannot decode.)
            raise InputError(f"{path}: truncated or corrupt image: {_one_line(exc)}") from exc
        # (Read before the turn: a turned copy has no TIFF tags.)
        layout = (_tiff_tag(image, 258), _tiff_tag(image, 339))
        upright = _to_srgb(_apply_orientation(image))
        return _to_bgr(upright, path, layout)


def _to_srgb(image: Image.Image) -> Image.Image:
    """``image`` in sRGB, where it carries a colour profile of another space (a camera's
    Adobe RGB, a phone's Display P3, a CMYK print's): every frame is worked on, mixed
    with others and written as sRGB, the colours a viewer shows for a file with no
    profile. (Its profile had been dropped: a viewer showed the output's colours
    flatter than the input's, even at fusion 0.) An sRGB profile, or one that cannot
    be read, leaves the pixels as they are."""
    icc = image.info.get("icc_profile")
    if not icc or image.mode not in ("RGB", "RGBA", "CMYK", "P"):
        return image
    if image.mode == "P":  # (its palette's colours are the profile's too)
        image = image.convert("RGBA" if "transparency" in image.info else "RGB")
    try:
        profile = ImageCms.ImageCmsProfile(io.BytesIO(icc))
        if "srgb" in ImageCms.getProfileDescription(profile).lower().replace(" ", ""):
            return image
        mode = "RGBA" if image.mode == "RGBA" else "RGB"
        converted = ImageCms.profileToProfile(
            image,
            profile,
            _srgb_profile(),
            outputMode=mode,
            renderingIntent=ImageCms.Intent.PERCEPTUAL,
        )
    except (ImageCms.PyCMSError, OSError, ValueError, TypeError):
        return image
    return converted if converted is not None else image


@functools.lru_cache(maxsize=1)
def _srgb_profile() -> ImageCms.ImageCmsProfile:
    return ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB"))


def _head(handle: BinaryIO, size: int) -> bytes:
    """The first ``size`` bytes of the file (fewer, or none, where it cannot say)."""
    try:
        handle.seek(0)
        return handle.read(size)
    except OSError:
        return b""


def _starts_with(handle: BinaryIO, prefixes: tuple[bytes, ...]) -> bool:
    return _head(handle, max(len(prefix) for prefix in prefixes)).startswith(prefixes)


def is_heic(head: bytes) -> bool:
    """Whether a file starting with ``head`` (its first 12 bytes or more) is a HEIC
    photo: an ``ftyp`` box with a HEVC brand (:data:`HEIC_BRANDS`)."""
    return head[4:8] == b"ftyp" and head[8:12] in HEIC_BRANDS


def _heif_error(handle: BinaryIO, path: Path) -> InputError:
    """Why pi-heif could not open a file with a HEIC brand: libheif's own reason."""
    import pi_heif

    handle.seek(0)
    try:
        pi_heif.open_heif(handle)
    except Exception as exc:  # noqa: BLE001 - any failure is the reason we report
        reason = _one_line(exc)
    else:
        reason = "unknown"
    return InputError(f"{path}: truncated or corrupt HEIC: {reason}")


def _tiff_error(handle: BinaryIO, path: Path) -> InputError:
    """Why Pillow could not open a file with a TIFF header: a sample layout it does not
    decode (it reads 8- and 16-bit samples, grey floats, CMYK and palettes, not
    floating-point colour), or a broken or cut-off file."""
    handle.seek(0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Corrupt EXIF data": the reason follows
            TiffImagePlugin.TiffImageFile(handle).close()
    except Exception as exc:  # noqa: BLE001 - any failure is the reason we report
        reason = _one_line(exc)
    else:
        reason = "unknown"
    if "pixel mode" in reason:
        return UnsupportedFormatError(
            f"{path}: a TIFF sample layout we cannot read ({reason}; floating-point "
            "colour, for one); save it with 8- or 16-bit samples"
        )
    return InputError(f"{path}: truncated or corrupt TIFF: {reason}")


def _apply_orientation(image: Image.Image) -> Image.Image:
    try:
        return ImageOps.exif_transpose(image)
    except Exception:  # noqa: BLE001 - a broken EXIF block must not hide readable pixels
        return image


def _tiff_tag(image: Image.Image, tag: int) -> int | None:
    """A TIFF's tag as one number (BitsPerSample 258, SampleFormat 339...), else None."""
    tags = getattr(image, "tag_v2", None)
    value = tags.get(tag) if tags is not None else None
    if isinstance(value, tuple):
        value = value[0] if value else None
    return int(value) if isinstance(value, int) else None


def _to_bgr(
    image: Image.Image, path: Path, layout: tuple[int | None, int | None] = (None, None)
) -> tuple[Frame, NDArray[np.uint8] | None]:
    """The picture over white, and its alpha channel (None where all opaque). ``layout``:
    a TIFF's bits per sample and sample format (1 unsigned, 2 signed), where known."""
    mode = image.mode
    if mode.startswith("I;16") or mode == "I" or mode == "F":
        samples = np.asarray(image).astype(np.float32)
        if mode == "F":
            # Floating-point grey: 0..1 (the usual range) or already 0..255.
            samples = np.nan_to_num(samples, nan=0.0, posinf=0.0, neginf=0.0)
            scale = 255.0 if samples.max(initial=0.0) <= 1.0 else 1.0
        elif mode == "I" and layout[0] == 32:
            # 32-bit integer grey (a scientific TIFF's): its full range, as 16-bit's
            # (scaled as 16-bit, all but black had come out white: "no face found").
            if layout[1] == 2:  # signed: 0..2^31-1, negatives black
                scale = 255.0 / (2**31 - 1)
            else:  # unsigned, which Pillow holds in a signed 32-bit array
                samples = np.asarray(image).view(np.uint32).astype(np.float64)
                scale = 255.0 / (2**32 - 1)
        else:
            scale = 1.0 / 257.0
        gray = np.clip(np.rint(samples * scale), 0, 255).astype(np.uint8)
        return np.ascontiguousarray(np.repeat(gray[:, :, None], 3, axis=2)), None
    has_alpha = mode in ("RGBA", "LA", "PA", "RGBa", "La") or (
        mode in ("P", "L", "RGB") and "transparency" in image.info
    )
    opacity: NDArray[np.uint8] | None = None
    try:
        if has_alpha:
            rgba_u8 = np.asarray(image.convert("RGBA"), dtype=np.uint8)
            rgba = rgba_u8.astype(np.float32)
            alpha = rgba[:, :, 3:4] / 255.0
            rgb = rgba[:, :, :3] * alpha + _ALPHA_BACKGROUND * (1.0 - alpha)
            rgb_u8 = np.clip(np.rint(rgb), 0, 255).astype(np.uint8)
            if rgba_u8[:, :, 3].min() < 255:
                opacity = np.ascontiguousarray(rgba_u8[:, :, 3])
        else:
            rgb_u8 = np.asarray(image.convert("RGB"), dtype=np.uint8)
    except (OSError, ValueError) as exc:
        raise UnsupportedFormatError(f"{path}: unsupported pixel mode {mode}") from exc
    bgr: Frame = np.ascontiguousarray(rgb_u8[:, :, ::-1])
    return bgr, opacity


# --- writing ---------------------------------------------------------------------------------


def _check_frame(frame: NDArray[np.generic], *, alpha: bool = False) -> None:
    """``alpha``: a (H, W, 4) BGRA frame passes too."""
    if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8:
        dtype = getattr(frame, "dtype", type(frame).__name__)
        raise InputError(f"frame must be a uint8 numpy array, got {dtype}")
    channels = (3, 4) if alpha else (3,)
    if not (frame.ndim == 2 or (frame.ndim == 3 and frame.shape[2] in channels)):
        shapes = "(H, W, 3), (H, W, 4)" if alpha else "(H, W, 3)"
        raise InputError(f"frame must have shape {shapes} or (H, W), got {frame.shape}")
    if frame.shape[0] == 0 or frame.shape[1] == 0:
        raise InputError(f"frame has no pixels: {frame.shape}")


def pil_image(frame: NDArray[np.uint8]) -> Image.Image:
    """A Pillow image of a BGR, BGRA or grayscale frame (RGB, RGBA or L)."""
    if frame.ndim == 2:
        return Image.fromarray(np.ascontiguousarray(frame), "L")
    if frame.shape[2] == 4:
        return Image.fromarray(np.ascontiguousarray(frame[:, :, [2, 1, 0, 3]]), "RGBA")
    return Image.fromarray(np.ascontiguousarray(frame[:, :, ::-1]), "RGB")


def _encode(frame: Frame, extension: str, quality: int, path: Path) -> bytes:
    pillow: dict[str, Any] | None = None
    if extension == ".avif":  # (OpenCV's wheels have no AVIF codec: Pillow's libavif)
        pillow = {"format": "AVIF", "quality": quality}
    elif extension in (".tif", ".tiff"):
        pillow = {"format": "TIFF", "compression": TIFF_COMPRESSION, "tiffinfo": TIFF_PREDICTOR}
    if pillow is not None:
        encoded = io.BytesIO()
        try:
            pil_image(frame).save(encoded, **pillow)
        except (OSError, ValueError) as exc:
            raise OutputError(f"{path}: cannot encode image: {_one_line(exc)}") from exc
        return encoded.getvalue()
    params: list[int] = []
    if extension in (".jpg", ".jpeg"):
        params = [cv2.IMWRITE_JPEG_QUALITY, quality]
    elif extension == ".webp":
        params = [cv2.IMWRITE_WEBP_QUALITY, quality]
    elif extension == ".png":
        params = [cv2.IMWRITE_PNG_COMPRESSION, _PNG_COMPRESSION]
    try:
        ok, buffer = cv2.imencode(extension, np.ascontiguousarray(frame), params)
    except cv2.error as exc:
        raise OutputError(f"{path}: cannot encode image: {_one_line(exc)}") from exc
    if not ok:
        raise OutputError(f"{path}: cannot encode image as {extension}")
    return buffer.tobytes()


def _check_directory(path: Path) -> None:
    directory = path.parent
    try:
        if not directory.exists():
            raise OutputError(f"{path}: directory {directory} does not exist")
        if not directory.is_dir():
            raise OutputError(f"{path}: {directory} is not a directory")
        if path.is_dir():
            raise OutputError(f"{path}: is a directory")
        if path.exists() and not path.is_file():
            # A pipe, a device or a link to one: the rename would put a regular file in
            # its place, and nothing would reach what the name stood for.
            raise OutputError(f"{path}: not a regular file (a pipe or a device?)")
    except OutputError:
        raise
    except OSError as exc:  # a name too long, a loop of links
        raise OutputError(f"{path}: cannot write: {exc.strerror or exc}") from exc


def write_bytes_atomic(path: PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` as :func:`write_image` writes an image: a temporary
    file beside it, flushed, then moved over ``path`` in one step.

    Raises:
        OutputError: the directory is missing or not writable, or the write failed.
    """
    _atomic_write(Path(path), data)


def _atomic_write(path: Path, data: bytes) -> None:
    _check_directory(path)
    directory = path.parent
    temp_path: Path | None = None
    try:
        with _temp_file(path) as (fd, temp_path):
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        os.replace(temp_path, path)
        temp_path = None
        _fsync_directory(directory)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write: {exc.strerror or _one_line(exc)}") from exc
    finally:
        if temp_path is not None:
            with contextlib.suppress(OSError):
                temp_path.unlink()


def _temp_name(path: Path) -> Path:
    """A fresh ``.<name>.<pid>-<random>.tmp`` beside ``path`` (not created)."""
    return path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")


# A temporary file whose writer is gone and that has not changed for this long is what a
# killed run left (SIGKILL, a power cut: nothing could clean up); the next write of the
# same output removes it. (A live writer's file changes with every frame or is written
# in one go; the age also spares a writer on another machine sharing the folder.)
STALE_TEMP_S = 10.0


def _remove_stale_temps(path: Path) -> None:
    """Remove the temporary files of ``path`` left by writers that were killed."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.(\d+)-[0-9a-f]{{8}}\.tmp")
    with contextlib.suppress(OSError):
        for entry in path.parent.glob(f".{glob_escape(path.name)}.*.tmp"):
            found = pattern.fullmatch(entry.name)
            if found is None or _process_alive(int(found.group(1))):
                continue
            with contextlib.suppress(OSError):
                if time.time() - entry.stat().st_mtime > STALE_TEMP_S:
                    entry.unlink()


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process (EPERM): alive
        return True
    return True


@contextlib.contextmanager
def _temp_file(path: Path, temp_path: Path | None = None) -> Iterator[tuple[int, Path]]:
    """Create ``.<name>.<pid>-<random>.tmp`` beside ``path``; yields (fd, temp path).

    With ``temp_path`` (from :func:`_temp_name`) that name is created, once: a caller
    that knows the name before the file exists can remove it whenever it is stopped
    (Ctrl-C or SIGTERM can land between any two steps, even before this function's
    clean-up is in place). An interruption here removes the file it created.

    ``os.open`` with mode 0o666 lets the umask decide the final permissions, as a
    plain ``open(path, "wb")`` would (``tempfile.mkstemp`` would force 0o600).
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    _remove_stale_temps(path)
    for attempt in range(_TEMP_ATTEMPTS):
        name = temp_path or _temp_name(path)
        try:
            fd = os.open(name, flags, 0o666)
        except FileExistsError:
            if temp_path is not None or attempt == _TEMP_ATTEMPTS - 1:
                raise
            continue
        except BaseException:
            # A stop signal that landed once the file was made, before its descriptor
            # was named: the random name is this call's own.
            with contextlib.suppress(OSError):
                name.unlink()
            raise
        try:
            yield fd, name
        except BaseException:
            with contextlib.suppress(OSError):
                name.unlink()
            raise
        finally:
            os.close(fd)
        return


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable where the platform allows it (POSIX)."""
    if os.name != "posix":
        return
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
