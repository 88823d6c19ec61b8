"""Metadata labels that say an output is synthetic: PNG text, XMP, EXIF, container tags.

Labels are a flat ``dict[str, str]`` (see :func:`image_labels`):

================================  ===================================================
``faceweave:synthetic``           ``"true"``
``faceweave:job``                 the job id
``faceweave:watermark``           the id the faint mark carries (:func:`watermark_id`)
``faceweave:tool``                ``"faceweave"``
``faceweave:version``             the package version
``Iptc4xmpExt:DigitalSourceType`` IPTC's ``compositeSynthetic``: real pixels mixed with
                                  synthetic ones, which is what a face swap is
``dc:description``                one human-readable sentence
================================  ===================================================

Where they go:

* **PNG**: one ``tEXt``/``iTXt`` chunk per label, plus an XMP packet in the standard
  ``XML:com.adobe.xmp`` iTXt chunk.
* **JPEG / WebP / AVIF**: the XMP packet (APP1 / XMP chunk / XMP item) and EXIF
  ``ImageDescription`` and ``Software``.
* **TIFF**: the same three as baseline TIFF tags (``XMP`` 700, ``ImageDescription`` 270,
  ``Software`` 305). BMP has no metadata: :func:`write_labeled_image` refuses it.
* **Video**: container tags (:func:`video_metadata`). MP4 and MOV keep only the tags
  they know (``comment``, ``description``, ``title``...; checked with PyAV 18 / FFmpeg
  Lavf 62), MKV and WebM keep any: the labels travel as ``key=value`` pairs in
  ``comment`` (kept by every container faceweave writes), the sentence in
  ``description``, and each label again as its own tag where the container keeps it.

Example:
    >>> labels = image_labels("job-42", version="0.1.0")
    >>> labels["faceweave:synthetic"]
    'true'
    >>> write_labeled_image("out/a.png", frame, labels)  # doctest: +SKIP
    >>> read_labels("out/a.png")["faceweave:job"]  # doctest: +SKIP
    'job-42'
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import numpy as np
from PIL import Image, PngImagePlugin, TiffImagePlugin, UnidentifiedImageError

from faceweave.errors import InputError, OutputError, UnsupportedFormatError
from faceweave.io.image import (
    ALPHA_EXTENSIONS,
    DEFAULT_QUALITY,
    TIFF_COMPRESSION,
    TIFF_PREDICTOR,
    XMP_PNG_KEY,
    PathLike,
    _atomic_write,
    image_extension,
    pil_image,
)
from faceweave.io.video import VIDEO_EXTENSIONS, _open_input
from faceweave.provenance.watermark import (
    DEFAULT_STRENGTH,
    STATEMENT,
    detect_watermark,
    embed_watermark,
    watermark_id,
)
from faceweave.types import Frame, check_frame, is_whole_number

__all__ = [
    "DIGITAL_SOURCE_TYPE",
    "LABELED_IMAGE_EXTENSIONS",
    "SURE_QUALITY",
    "image_labels",
    "labels_xmp",
    "mark_for_saving",
    "read_labels",
    "video_metadata",
    "write_labeled_image",
]

DIGITAL_SOURCE_TYPE = "http://cv.iptc.org/newscodes/digitalsourcetype/compositeSynthetic"
LABELED_IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff", ".avif")

_PREFIX = "faceweave:"
_SOURCE_TYPE_KEY = "Iptc4xmpExt:DigitalSourceType"
_DESCRIPTION_KEY = "dc:description"
_SENTENCE_START = "Synthetic media"
_XMP_NS = "urn:faceweave:xmp:1.0/"
_EXIF_DESCRIPTION = 0x010E  # ImageDescription
_EXIF_SOFTWARE = 0x0131  # Software
_TIFF_XMP = 700  # XMP packet, BYTE type (Adobe's XMP specification, part 3)
_TIFF_BYTE = 1
_COMMENT_SEPARATOR = "; "
# Tags MP4 / MOV / MKV / WebM / AVI all keep, and the ones only some keep.
_VIDEO_COMMENT = "comment"
_VIDEO_DESCRIPTION = "description"


def image_labels(
    job_id: str, *, tool: str = "faceweave", version: str | None = None
) -> dict[str, str]:
    """The labels of one output.

    Args:
        job_id: the job that made the output.
        tool: the tool's name.
        version: the tool's version; None uses ``faceweave.__version__``.

    Raises:
        InputError: empty job id.
    """
    if not isinstance(job_id, str):
        raise InputError(f"job id must be a str, got {type(job_id).__name__}")
    if not job_id:
        raise InputError("job id must not be empty")
    if not job_id.isprintable():  # (XMP, XML, holds no control character: a NUL lost it)
        raise InputError(f"job id must be printable characters, got {job_id!r}")
    if version is None:
        import faceweave  # late: faceweave/__init__ may import this package one day

        version = str(getattr(faceweave, "__version__", "unknown"))
    return {
        f"{_PREFIX}synthetic": "true",
        f"{_PREFIX}job": job_id,
        f"{_PREFIX}watermark": watermark_id(job_id),
        f"{_PREFIX}tool": tool,
        f"{_PREFIX}version": version,
        _SOURCE_TYPE_KEY: DIGITAL_SOURCE_TYPE,
        _DESCRIPTION_KEY: (f"{_SENTENCE_START}: faces altered by {tool} {version} (job {job_id})."),
    }


def video_metadata(
    job_id: str, *, tool: str = "faceweave", version: str | None = None
) -> dict[str, str]:
    """Container metadata for :class:`~faceweave.io.video.VideoWriter`'s ``metadata``.

    ``comment`` holds every label as ``key=value; ...`` (all containers keep it),
    ``description`` the sentence (MP4, MKV, WebM), and each label is repeated as its
    own tag for MKV / WebM (MP4 and MOV drop unknown tags silently). Merge it over a
    source's metadata, not under it: a copied ``comment`` would otherwise win.
    """
    labels = image_labels(job_id, tool=tool, version=version)
    metadata = {_tag_name(key): value for key, value in labels.items()}
    metadata[_VIDEO_COMMENT] = _COMMENT_SEPARATOR.join(
        f"{key}={value}" for key, value in labels.items() if key != _DESCRIPTION_KEY
    )
    metadata[_VIDEO_DESCRIPTION] = labels[_DESCRIPTION_KEY]
    return metadata


# Lossy formats whose low qualities can take the watermark away: below SURE_QUALITY
# mark_for_saving checks the mark in the file as it will be written, and strengthens it
# until it is found (WebP at 30, AVIF at 30 and JPEG at 15 lost it in a quarter to four
# fifths of the files at the default strength; at 1.5 to 2 times it, none on the
# package photos: docs/results.md).
_LOSSY = {".jpg": "JPEG", ".jpeg": "JPEG", ".webp": "WEBP", ".avif": "AVIF"}
SURE_QUALITY = 90
_STRENGTHS = (1.0, 1.5, 2.0, 3.0)  # times DEFAULT_STRENGTH


def mark_for_saving(frame: Frame, job_id: str, path: PathLike, quality: int) -> tuple[Frame, bool]:
    """``frame`` watermarked for ``job_id`` so that the mark is found in it once saved
    to ``path`` at ``quality``: at a lossy format's low quality the mark is checked in
    the encoded picture and made stronger (up to 3 times) until it is. Returns the
    marked frame and whether the mark was found (True without a check at a quality
    the mark is known to survive, or a lossless format; when it is never found, the
    mark at its usual strength: the stronger ones only showed more).

    Raises:
        InputError: a bad frame or job id.
    """
    kind = _LOSSY.get(Path(path).suffix.lower())
    usual = marked = embed_watermark(frame, job_id)
    if kind is None or quality >= SURE_QUALITY:
        return usual, True
    wanted = watermark_id(job_id)
    for times in _STRENGTHS:
        if times != 1.0:
            marked = embed_watermark(frame, job_id, strength=DEFAULT_STRENGTH * times)
        buffer = io.BytesIO()
        try:
            pil_image(marked).save(buffer, format=kind, quality=int(quality))
            buffer.seek(0)
            with Image.open(buffer) as image:
                saved = np.ascontiguousarray(np.asarray(image.convert("RGB"))[:, :, ::-1])
        except (OSError, ValueError):
            return marked, False  # (its writer says what is wrong)
        found = detect_watermark(saved)
        if found.found and found.payload == wanted:
            return marked, True
    # (None found: the stronger marks showed more and kept nothing)
    return usual, False


def write_labeled_image(
    path: PathLike, frame: Frame, labels: dict[str, str], *, quality: int = DEFAULT_QUALITY
) -> None:
    """Write a frame with its labels, atomically (as :func:`faceweave.io.image.write_image`).

    Encoding goes through Pillow, which writes the metadata; the bytes then take the
    same temporary-file, fsync and rename path as every other image faceweave writes.

    Args:
        path: ``.png``, ``.jpg``/``.jpeg``, ``.webp``, ``.tif``/``.tiff`` or ``.avif``
            (BMP cannot hold labels).
        frame: the picture.
        labels: from :func:`image_labels` (any ``str -> str`` works; keys are
            PNG keywords, so at most 79 Latin-1 characters).
        quality: 1..100 for JPEG, WebP and AVIF; ignored by PNG and TIFF.

    Shape:
        - frame: :math:`(H, W, 3)`, ``uint8``, BGR; or :math:`(H, W, 4)` BGRA
          (:func:`faceweave.io.image.restore_alpha`) for PNG, WebP, TIFF and AVIF.

    Raises:
        UnsupportedFormatError: an extension that cannot hold labels.
        InputError: bad frame, labels or quality, or an alpha channel for JPEG.
        OutputError: the file cannot be written.
    """
    path = Path(path)
    extension = image_extension(path)
    if extension not in LABELED_IMAGE_EXTENSIONS:
        raise UnsupportedFormatError(f"{path}: {extension} cannot hold metadata labels")
    rgba = isinstance(frame, np.ndarray) and frame.ndim == 3 and frame.shape[2] == 4
    if rgba and extension not in ALPHA_EXTENSIONS:
        raise InputError(f"{path}: {extension} cannot hold an alpha channel")
    check_frame(frame[:, :, :3] if rgba else frame)
    if not is_whole_number(quality) or not 1 <= quality <= 100:
        raise InputError(f"quality must be a whole number in 1..100, got {quality!r}")
    quality = int(quality)  # (a numpy integer: Pillow takes Python's)
    if not isinstance(labels, Mapping) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in labels.items()
    ):
        raise InputError(f"{path}: labels must map str to str (see image_labels)")
    image = pil_image(frame)
    xmp = _xmp_packet(labels)
    buffer = io.BytesIO()
    try:
        if extension == ".png":
            info = PngImagePlugin.PngInfo()
            for key, value in labels.items():
                if _latin1(value):
                    info.add_text(key, value)
                else:
                    info.add_itxt(key, value)
            info.add_itxt(XMP_PNG_KEY, xmp.decode("utf-8"))
            image.save(buffer, format="PNG", pnginfo=info, compress_level=3)
        elif extension in (".tif", ".tiff"):
            tags = TiffImagePlugin.ImageFileDirectory_v2()
            for tag, value in _description_tags(labels).items():
                tags[tag] = value
            tags[_TIFF_XMP] = xmp
            tags.tagtype[_TIFF_XMP] = _TIFF_BYTE
            for tag, setting in TIFF_PREDICTOR.items():  # as faceweave.io.image writes TIFF
                tags[tag] = setting
            image.save(buffer, format="TIFF", tiffinfo=tags, compression=TIFF_COMPRESSION)
        else:
            exif = Image.Exif()
            for tag, value in _description_tags(labels).items():
                exif[tag] = value
            kind = {".jpg": "JPEG", ".jpeg": "JPEG", ".webp": "WEBP", ".avif": "AVIF"}[extension]
            image.save(buffer, format=kind, quality=quality, exif=exif, xmp=xmp)
    except (ValueError, TypeError, UnicodeError) as exc:
        raise InputError(f"{path}: cannot store these labels: {exc}") from exc
    except OSError as exc:
        raise OutputError(f"{path}: cannot encode image: {exc}") from exc
    _atomic_write(path, buffer.getvalue())


def read_labels(path: PathLike) -> dict[str, str]:
    """The faceweave labels of an image or video file; empty when it has none.

    Returns the ``faceweave:*``, ``Iptc4xmpExt:DigitalSourceType`` and
    ``dc:description`` labels found in PNG text chunks, XMP, EXIF (as ``dc:description``
    when nothing better is there) or video container tags. Other metadata is ignored.

    Raises:
        InputError: the file is missing or unreadable.
        UnsupportedFormatError: neither an image nor a video faceweave reads.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if path.suffix.lower() in VIDEO_EXTENSIONS:
        return _video_labels(path)
    try:
        with Image.open(path) as image:
            return _image_labels(image)
    except UnidentifiedImageError:
        return _video_labels(path)  # an image extension on a video, or no extension
    except OSError as exc:
        raise InputError(f"{path}: cannot read metadata: {exc}") from exc


# --- helpers ---------------------------------------------------------------------------------


def labels_xmp(labels: dict[str, str]) -> bytes:
    """``labels`` (see :func:`image_labels`) as an XMP packet, as the image files carry
    them: for :class:`~faceweave.io.animation.AnimationWriter`'s ``xmp`` (a WebP's XMP,
    an APNG's, a GIF's comment, which :func:`read_labels` reads back)."""
    return _xmp_packet(labels)


def _description_tags(labels: dict[str, str]) -> dict[int, str]:
    """EXIF / TIFF ``ImageDescription`` (the sentence) and ``Software`` (tool version)."""
    tags = {_EXIF_DESCRIPTION: labels.get(_DESCRIPTION_KEY, STATEMENT)}
    software = " ".join(
        v for v in (labels.get(f"{_PREFIX}tool"), labels.get(f"{_PREFIX}version")) if v
    )
    if software:
        tags[_EXIF_SOFTWARE] = software
    return tags


def _latin1(text: str) -> bool:
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        return False
    return True


def _tag_name(key: str) -> str:
    """``faceweave:job`` -> ``faceweave_job``: container tags avoid colons."""
    return re.sub(r"[^0-9A-Za-z_]", "_", key)


def _xmp_packet(labels: dict[str, str]) -> bytes:
    own = {
        key.removeprefix(_PREFIX): value
        for key, value in labels.items()
        if key.startswith(_PREFIX) and re.fullmatch(r"[A-Za-z_][\w.-]*", key.removeprefix(_PREFIX))
    }
    attributes = "".join(
        f"\n    faceweave:{name}={quoteattr(value)}" for name, value in own.items()
    )
    source_type = labels.get(_SOURCE_TYPE_KEY)
    if source_type:
        attributes += f"\n    Iptc4xmpExt:DigitalSourceType={quoteattr(source_type)}"
    tool = " ".join(v for v in (labels.get(f"{_PREFIX}tool"), labels.get(f"{_PREFIX}version")) if v)
    if tool:
        attributes += f"\n    xmp:CreatorTool={quoteattr(tool)}"
    description = labels.get(_DESCRIPTION_KEY)
    body = (
        '\n   <dc:description><rdf:Alt><rdf:li xml:lang="x-default">'
        f"{escape(description)}</rdf:li></rdf:Alt></dc:description>\n  "
        if description
        else ""
    )
    packet = (
        '<?xpacket begin="\ufeff" id="W5M0MpCehiHzreSzNTczkc9d"?>\n'
        '<x:xmpmeta xmlns:x="adobe:ns:meta/">\n'
        ' <rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">\n'
        '  <rdf:Description rdf:about=""\n'
        '    xmlns:dc="http://purl.org/dc/elements/1.1/"\n'
        '    xmlns:xmp="http://ns.adobe.com/xap/1.0/"\n'
        '    xmlns:Iptc4xmpExt="http://iptc.org/std/Iptc4xmpExt/2008-02-29/"\n'
        f'    xmlns:faceweave="{_XMP_NS}"{attributes}>{body}</rdf:Description>\n'
        " </rdf:RDF>\n"
        "</x:xmpmeta>\n"
        '<?xpacket end="w"?>'
    )
    return packet.encode("utf-8")


def _parse_xmp(xmp: bytes | str) -> dict[str, str]:
    """The labels in an XMP packet (ours, or any with the same properties as attributes)."""
    from xml.etree import ElementTree

    text = xmp.decode("utf-8", errors="replace") if isinstance(xmp, bytes) else xmp
    start, end = text.find("<x:xmpmeta"), text.rfind("</x:xmpmeta>")
    if start < 0 or end < 0:
        return {}
    try:
        root = ElementTree.fromstring(text[start : end + len("</x:xmpmeta>")])
    except ElementTree.ParseError:
        return {}
    names = {
        f"{{{_XMP_NS}}}": _PREFIX,
        "{http://iptc.org/std/Iptc4xmpExt/2008-02-29/}": "Iptc4xmpExt:",
    }
    labels: dict[str, str] = {}
    rdf = "{http://www.w3.org/1999/02/22-rdf-syntax-ns#}"
    for description in root.iter(f"{rdf}Description"):
        for attribute, value in description.attrib.items():
            for namespace, prefix in names.items():
                if attribute.startswith(namespace):
                    labels[prefix + attribute.removeprefix(namespace)] = value
        for node in description.iter("{http://purl.org/dc/elements/1.1/}description"):
            text_value = "".join(node.itertext()).strip()
            if text_value:
                labels[_DESCRIPTION_KEY] = text_value
    return labels


def _wanted(key: str) -> bool:
    return key.startswith(_PREFIX) or key in (_SOURCE_TYPE_KEY, _DESCRIPTION_KEY)


def _image_labels(image: Image.Image) -> dict[str, str]:
    labels: dict[str, str] = {}
    xmp = image.info.get("xmp") or image.info.get(XMP_PNG_KEY)
    comment = image.info.get("comment")  # a GIF's (an animation's labels, see labels_xmp)
    if not xmp and isinstance(comment, bytes) and b"<x:xmpmeta" in comment:
        xmp = comment
    if xmp:
        labels.update(_parse_xmp(xmp))
    text = getattr(image, "text", None) or {}  # PNG tEXt / iTXt / zTXt
    labels.update({str(k): str(v) for k, v in text.items() if _wanted(str(k))})
    if _DESCRIPTION_KEY not in labels:
        exif_description = image.getexif().get(_EXIF_DESCRIPTION)
        if isinstance(exif_description, str) and exif_description.startswith(_SENTENCE_START):
            labels[_DESCRIPTION_KEY] = exif_description
    return labels


def _video_labels(path: Path) -> dict[str, str]:
    with _open_input(path) as container:
        tags = {str(k).lower(): str(v) for k, v in container.metadata.items()}
    labels: dict[str, str] = {}
    for part in tags.get(_VIDEO_COMMENT, "").split(_COMMENT_SEPARATOR):
        key, sep, value = part.partition("=")
        if sep and _wanted(key.strip()):
            labels[key.strip()] = value.strip()
    if labels and _VIDEO_DESCRIPTION in tags:
        labels[_DESCRIPTION_KEY] = tags[_VIDEO_DESCRIPTION]
    if not labels and tags.get(_tag_name(f"{_PREFIX}synthetic")) == "true":
        # The comment was overwritten (MKV / WebM keep the separate tags).
        for key in ("synthetic", "job", "watermark", "tool", "version"):
            tag = tags.get(_tag_name(_PREFIX + key))
            if tag is not None:
                labels[_PREFIX + key] = tag
    return labels
