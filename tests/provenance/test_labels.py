"""Labels: PNG text + XMP, JPEG/WebP XMP + EXIF, video container tags; atomic writes."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
from PIL import Image

from faceweave.errors import InputError, OutputError, UnsupportedFormatError
from faceweave.io.image import read_image, write_image
from faceweave.io.video import VideoWriter
from faceweave.provenance.labels import (
    DIGITAL_SOURCE_TYPE,
    image_labels,
    read_labels,
    video_metadata,
    write_labeled_image,
)
from faceweave.provenance.watermark import watermark_id

JOB = "2f1c9a1e-5d0b-4c43-9f57-4f3a0b6e2d11"


@pytest.fixture
def labels() -> dict[str, str]:
    return image_labels(JOB, version="9.9.9")


def test_image_labels_content(labels: dict[str, str]) -> None:
    assert labels["faceweave:synthetic"] == "true"
    assert labels["faceweave:job"] == JOB
    assert labels["faceweave:watermark"] == watermark_id(JOB)
    assert labels["faceweave:version"] == "9.9.9"
    assert labels["Iptc4xmpExt:DigitalSourceType"] == DIGITAL_SOURCE_TYPE
    assert "synthetic" in labels["dc:description"].lower()


def test_image_labels_default_version() -> None:
    import faceweave

    assert image_labels("j")["faceweave:version"] == faceweave.__version__
    with pytest.raises(InputError):
        image_labels("")


@pytest.mark.parametrize("extension", [".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff", ".avif"])
def test_round_trip(
    tmp_path: Path, astronaut: np.ndarray, labels: dict[str, str], extension: str
) -> None:
    path = tmp_path / f"out{extension}"
    write_labeled_image(path, astronaut, labels, quality=90)
    assert read_labels(path) == labels
    frame = read_image(path)
    assert frame.shape == astronaut.shape
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("extension", [".png", ".webp", ".tiff", ".avif"])
def test_a_transparent_picture_keeps_its_alpha_and_labels(
    tmp_path: Path, astronaut: np.ndarray, labels: dict[str, str], extension: str
) -> None:
    bgra = np.dstack([astronaut, np.tile(np.arange(512, dtype=np.uint8)[None, :] // 2, (512, 1))])
    path = tmp_path / f"out{extension}"
    write_labeled_image(path, bgra, labels, quality=100)
    assert read_labels(path) == labels
    stored = np.asarray(Image.open(path))
    assert stored.shape == (512, 512, 4)
    assert np.abs(stored[:, :, 3].astype(int) - bgra[:, :, 3]).max() <= (
        {".webp": 2, ".avif": 8}.get(extension, 0)
    )
    with pytest.raises(InputError, match="alpha"):
        write_labeled_image(tmp_path / "out.jpg", bgra, labels)


def test_png_has_text_chunks_and_xmp(tmp_path: Path, astronaut: np.ndarray) -> None:
    labels = image_labels("job-ü", version="1")  # non-Latin-1 values go to iTXt
    path = tmp_path / "out.png"
    write_labeled_image(path, astronaut, labels)
    with Image.open(path) as image:
        text = dict(image.text)  # type: ignore[attr-defined]
    assert text["faceweave:synthetic"] == "true"
    assert text["faceweave:job"] == "job-ü"
    xmp = text["XML:com.adobe.xmp"]
    assert "compositeSynthetic" in xmp and 'faceweave:synthetic="true"' in xmp
    assert np.array_equal(read_image(path), astronaut)  # lossless


def test_jpeg_has_xmp_and_exif(
    tmp_path: Path, astronaut: np.ndarray, labels: dict[str, str]
) -> None:
    path = tmp_path / "out.jpg"
    write_labeled_image(path, astronaut, labels)
    with Image.open(path) as image:
        assert b"compositeSynthetic" in image.info["xmp"]
        exif = image.getexif()
    assert "Synthetic media" in exif[0x010E]
    assert exif[0x0131] == "faceweave 9.9.9"


def test_tiff_has_xmp_and_description_tags(
    tmp_path: Path, astronaut: np.ndarray, labels: dict[str, str]
) -> None:
    """Baseline TIFF tags any TIFF reader shows (ImageDescription, Software), the XMP
    packet in tag 700, Deflate compression, and the pixels unchanged."""
    path = tmp_path / "out.tiff"
    write_labeled_image(path, astronaut, labels)
    with Image.open(path) as image:
        assert image.info["compression"] == "tiff_adobe_deflate"
        assert b"compositeSynthetic" in image.info["xmp"]
        tags = image.tag_v2  # type: ignore[attr-defined]
        assert tags[270].startswith("Synthetic media") and tags[305] == "faceweave 9.9.9"
    assert np.array_equal(read_image(path), astronaut)


def test_exif_only_jpeg_still_labelled(tmp_path: Path, astronaut: np.ndarray) -> None:
    """An editor that drops XMP but keeps EXIF leaves the description."""
    path = tmp_path / "exif.jpg"
    exif = Image.Exif()
    exif[0x010E] = image_labels(JOB, version="1")["dc:description"]
    Image.fromarray(astronaut[:, :, ::-1]).save(path, exif=exif)
    assert set(read_labels(path)) == {"dc:description"}


def test_unlabelled_files_have_no_labels(tmp_path: Path, astronaut: np.ndarray) -> None:
    for extension in (".png", ".jpg", ".webp", ".bmp", ".tif"):
        path = tmp_path / f"plain{extension}"
        write_image(path, astronaut)
        assert read_labels(path) == {}


def test_write_errors(tmp_path: Path, astronaut: np.ndarray, labels: dict[str, str]) -> None:
    with pytest.raises(UnsupportedFormatError):
        write_labeled_image(tmp_path / "a.bmp", astronaut, labels)
    with pytest.raises(UnsupportedFormatError):
        write_labeled_image(tmp_path / "a.gif", astronaut, labels)
    for quality in (0, "50", True, 50.0):
        with pytest.raises(InputError, match="quality"):
            write_labeled_image(tmp_path / "a.jpg", astronaut, labels, quality=quality)  # type: ignore[arg-type]
    for bad in (None, {"a": 1}, [("a", "b")]):
        with pytest.raises(InputError, match="labels must map str to str"):
            write_labeled_image(tmp_path / "a.png", astronaut, bad)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="job id must be a str"):
        image_labels(123)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="printable"):  # (XMP holds no NUL: it was lost)
        image_labels("x\x00y")
    # A numpy integer is a quality (Pillow had refused it as "these labels").
    write_labeled_image(tmp_path / "n.jpg", astronaut, labels, quality=np.int64(50))
    with pytest.raises(InputError):
        write_labeled_image(tmp_path / "a.png", astronaut[:, :, 0], labels)
    with pytest.raises(OutputError):
        write_labeled_image(tmp_path / "missing" / "a.png", astronaut, labels)
    with pytest.raises(InputError):
        read_labels(tmp_path / "nothing.png")


def test_write_is_atomic_keeps_old_file(
    tmp_path: Path, astronaut: np.ndarray, labels: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "out.png"
    path.write_bytes(b"old")

    def fail(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("faceweave.io.image.os.fsync", fail)
    with pytest.raises(OutputError):
        write_labeled_image(path, astronaut, labels)
    assert path.read_bytes() == b"old"
    assert not list(tmp_path.glob(".*.tmp"))


def _write_video(path: Path, metadata: dict[str, str] | None) -> None:
    rng = np.random.default_rng(0)
    with VideoWriter(path, width=64, height=48, fps=10, metadata=metadata) as writer:
        for _ in range(3):
            writer.write(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8))


@pytest.mark.parametrize("extension", [".mp4", ".mkv", ".mov", ".webm"])
def test_video_metadata_round_trip(tmp_path: Path, extension: str) -> None:
    path = tmp_path / f"clip{extension}"
    _write_video(path, video_metadata(JOB, version="9.9.9"))
    found = read_labels(path)
    expected = image_labels(JOB, version="9.9.9")
    if extension == ".mov":  # MOV keeps comment, not description
        expected.pop("dc:description")
    assert found == expected


def test_mp4_keeps_comment_and_description(tmp_path: Path) -> None:
    path = tmp_path / "clip.mp4"
    _write_video(path, video_metadata(JOB, version="1"))
    with av.open(str(path)) as container:
        tags = dict(container.metadata)
    assert "faceweave:synthetic=true" in tags["comment"]
    assert "Synthetic media" in tags["description"]


def test_mkv_separate_tags_survive_a_lost_comment(tmp_path: Path) -> None:
    metadata = video_metadata(JOB, version="1")
    metadata["comment"] = "re-tagged by another tool"
    path = tmp_path / "clip.mkv"
    _write_video(path, metadata)
    found = read_labels(path)
    assert found["faceweave:synthetic"] == "true"
    assert found["faceweave:job"] == JOB


def test_unlabelled_video(tmp_path: Path) -> None:
    path = tmp_path / "plain.mp4"
    _write_video(path, {"comment": "holiday"})
    assert read_labels(path) == {}


@pytest.mark.parametrize(("name", "quality"), [("a.webp", 30), ("a.avif", 30), ("a.jpg", 10)])
def test_a_low_quality_file_keeps_its_watermark(
    tmp_path: Path, astronaut: np.ndarray, name: str, quality: int
) -> None:
    """At a low quality the mark is checked in the picture as saved and made stronger
    until it is found (WebP and AVIF at 30 had lost it in most runs)."""
    from faceweave.io import read_image
    from faceweave.provenance.labels import mark_for_saving
    from faceweave.provenance.watermark import detect_watermark, embed_watermark

    for job in ("c1a2b3c", "cff0011", "c123456"):
        marked, kept = mark_for_saving(astronaut, job, tmp_path / name, quality)
        assert kept
        write_labeled_image(tmp_path / name, marked, image_labels(job), quality=quality)
        found = detect_watermark(read_image(tmp_path / name))
        assert found.found and found.payload == watermark_id(job), (name, job)
    # At a quality the mark survives, and in a lossless file, the mark as it always was.
    for path, quality in ((tmp_path / "b.jpg", 95), (tmp_path / "b.png", 10)):
        marked, kept = mark_for_saving(astronaut, JOB, path, quality)
        assert kept and np.array_equal(marked, embed_watermark(astronaut, JOB))
