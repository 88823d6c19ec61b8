"""verify(): watermark and labels of marked / unmarked images and videos, and the report text."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest

from faceweave.errors import InputError
from faceweave.io.image import write_image
from faceweave.io.video import VideoWriter
from faceweave.provenance.labels import image_labels, video_metadata, write_labeled_image
from faceweave.provenance.verify import VerifyReport, format_report, verify
from faceweave.provenance.watermark import embed_watermark, watermark_id

JOB = "job-7"
LONG_JOB = "2f1c9a1e-5d0b-4c43-9f57-4f3a0b6e2d11"


def test_marked_labelled_jpeg(tmp_path: Path, astronaut: np.ndarray) -> None:
    path = tmp_path / "swap.jpg"
    write_labeled_image(path, embed_watermark(astronaut, LONG_JOB), image_labels(LONG_JOB))
    report = verify(path)
    assert report.kind == "image" and report.size == (512, 512)
    assert report.marked and report.watermark.payload == watermark_id(LONG_JOB)
    assert report.labels["faceweave:job"] == LONG_JOB
    assert report.labels_agree is True
    text = format_report(report)
    assert "watermark: FOUND - synthetic, faceweave" in text
    assert watermark_id(LONG_JOB) in text and "faceweave:synthetic=true" in text


def test_marked_labelled_tiff_and_avif_even_without_their_extension(
    tmp_path: Path, astronaut: np.ndarray
) -> None:
    """TIFF and AVIF outputs verify as images, also renamed without an extension
    (opened as images, not handed to FFmpeg: an AVIF is in MP4's box format)."""
    reports = []
    for extension in (".tiff", ".avif"):
        path = tmp_path / f"swap{extension}"
        write_labeled_image(path, embed_watermark(astronaut, JOB), image_labels(JOB))
        reports += [verify(path), verify(path.rename(tmp_path / f"swap_{extension[1:]}"))]
    for report in reports:
        assert report.kind == "image" and report.size == (512, 512)
        assert report.marked and report.watermark.payload == JOB
        assert report.labels["faceweave:job"] == JOB and report.labels_agree is True


def test_stripped_and_resized_copy_still_marked(tmp_path: Path, astronaut: np.ndarray) -> None:
    """Metadata gone, picture halved and re-encoded: the watermark still speaks."""
    small = cv2.resize(embed_watermark(astronaut, JOB), (256, 256), interpolation=cv2.INTER_AREA)
    path = tmp_path / "copy.jpg"
    write_image(path, small, quality=75)
    report = verify(path)
    assert report.marked and report.watermark.payload == JOB
    assert report.labels == {}
    assert "labels: none" in format_report(report)


def test_unmarked_image(tmp_path: Path, grace_hopper: np.ndarray) -> None:
    path = tmp_path / "plain.png"
    write_image(path, grace_hopper)
    report = verify(path)
    assert not report.marked and report.watermark.payload is None
    assert report.labels == {} and report.labels_agree is None
    assert "watermark: not found" in format_report(report)


def test_forged_labels_on_unmarked_image(tmp_path: Path, astronaut: np.ndarray) -> None:
    path = tmp_path / "forged.png"
    write_labeled_image(path, astronaut, image_labels(JOB))
    report = verify(path)
    assert not report.marked and report.labels["faceweave:synthetic"] == "true"


def test_labels_naming_another_job_are_flagged(tmp_path: Path, astronaut: np.ndarray) -> None:
    path = tmp_path / "mixed.png"
    write_labeled_image(path, embed_watermark(astronaut, JOB), image_labels("other"))
    report = verify(path)
    assert report.labels_agree is False
    assert "warning: the labels name another job" in format_report(report)


def _video(path: Path, frame: np.ndarray, *, job: str | None) -> None:
    height, width = frame.shape[:2]
    metadata = video_metadata(job) if job else None
    with VideoWriter(path, width=width, height=height, fps=10, metadata=metadata) as writer:
        for i in range(12):
            moving = np.roll(frame, 3 * i, axis=1)  # content changes, the mark does not move
            writer.write(embed_watermark(moving, job) if job else moving)


def test_marked_mp4(tmp_path: Path, astronaut: np.ndarray) -> None:
    path = tmp_path / "swap.mp4"
    _video(path, cv2.resize(astronaut, (384, 288)), job=JOB)
    report = verify(path, video_frames=3)
    assert report.kind == "video" and report.size == (384, 288)
    assert report.marked and report.watermark.payload == JOB
    assert report.watermark.frames == 3 and report.watermark.frames_found >= 2
    assert report.labels["faceweave:job"] == JOB
    assert "3 frames" in format_report(report)


@pytest.mark.parametrize("name", ["swap.webp", "swap.apng", "swap.gif", "still.gif"])
def test_marked_animation(tmp_path: Path, astronaut: np.ndarray, name: str) -> None:
    """An animated WebP or PNG is sampled as a video is (it had been read as its first
    frame, an image); a GIF of one frame is an image."""
    from faceweave.io.animation import AnimationWriter
    from faceweave.provenance.labels import labels_xmp

    labels = image_labels(JOB)
    frames = 1 if name.startswith("still") else 6
    picture = cv2.resize(astronaut, (384, 288))
    writer = AnimationWriter(
        tmp_path / name, width=384, height=288, fps=10, labels=labels, xmp=labels_xmp(labels)
    )
    for index in range(frames):
        writer.write(embed_watermark(np.roll(picture, 4 * index, axis=1), JOB))
    writer.close()
    report = verify(tmp_path / name, video_frames=3)
    assert report.kind == ("video" if frames > 1 else "image")
    assert report.marked and report.watermark.payload == JOB
    assert report.watermark.frames == min(frames, 3)
    assert report.labels["faceweave:job"] == JOB


def test_unmarked_mp4(tmp_path: Path, astronaut: np.ndarray) -> None:
    path = tmp_path / "plain.mp4"
    _video(path, cv2.resize(astronaut, (384, 288)), job=None)
    report = verify(path, video_frames=2)
    assert not report.marked and report.labels == {}


def test_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        verify(tmp_path / "missing.png")
    garbage = tmp_path / "garbage.png"
    garbage.write_bytes(b"not an image at all")
    with pytest.raises(InputError):  # UnsupportedFormatError is an InputError
        verify(garbage)
    (tmp_path / "a.png").write_bytes(b"")
    with pytest.raises(InputError):
        verify(tmp_path / "a.png", video_frames=0)
    # A frame too small to hold a mark is named (it had said "image too small: 1x1").
    write_image(tmp_path / "dot.png", np.zeros((1, 1, 3), np.uint8))
    with pytest.raises(InputError, match=r"dot\.png: image too small: 1x1"):
        verify(tmp_path / "dot.png")


def test_an_image_over_the_default_limit_is_verified_when_allowed(tmp_path: Path) -> None:
    """``swap --max-pixels`` writes images over 64 megapixels when asked; verify takes
    the same limit (it had refused its own outputs)."""
    path = tmp_path / "wide.png"
    write_image(path, np.zeros((300, 400, 3), np.uint8))
    with pytest.raises(InputError, match="more than the limit of 100000"):
        verify(path, max_pixels=100_000)
    assert verify(path, max_pixels=120_000).size == (400, 300)
    # An animation's frames too.
    from faceweave.io.animation import AnimationWriter

    writer = AnimationWriter(tmp_path / "wide.gif", width=400, height=300, fps=10)
    for _ in range(2):
        writer.write(np.zeros((300, 400, 3), np.uint8))
    writer.close()
    with pytest.raises(InputError, match="100000"):
        verify(tmp_path / "wide.gif", max_pixels=100_000)
    assert verify(tmp_path / "wide.gif", max_pixels=120_000).size == (400, 300)


def test_special_files_and_images_that_are_not(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="a directory"):
        verify(tmp_path)
    with pytest.raises(InputError, match="not a regular file"):
        verify("/dev/null")
    text = tmp_path / "notes.jpg"  # FFmpeg would read it as a "video" of its characters
    text.write_bytes(b"hello, this is text\n" * 200)
    with pytest.raises(InputError, match="not a supported image"):
        verify(text)


def test_bomb_header_is_refused_in_one_line(tmp_path: Path) -> None:
    """A PNG whose header claims 100000 x 100000 pixels: refused before decoding."""
    path = tmp_path / "bomb.png"
    write_image(path, np.zeros((8, 8, 3), np.uint8))
    data = bytearray(path.read_bytes())
    data[16:24] = (100_000).to_bytes(4, "big") * 2  # IHDR's width and height
    data[29:33] = zlib.crc32(bytes(data[12:29])).to_bytes(4, "big")  # and its CRC
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match="too large"):
        verify(path)


def test_cli_json_report_of_a_marked_image(
    tmp_path: Path, astronaut: np.ndarray, capsys: pytest.CaptureFixture[str]
) -> None:
    from faceweave.apps import cli

    path = tmp_path / "swap.png"
    write_labeled_image(path, embed_watermark(astronaut, JOB), image_labels(JOB))
    assert cli.main(["verify", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["watermark"]["found"] is True and report["watermark"]["payload"] == JOB
    assert report["labels"]["faceweave:job"] == JOB
    # What the text report says, the JSON says too (the labels' disagreement had gone).
    assert report["size"] == [astronaut.shape[1], astronaut.shape[0]]
    assert report["watermark"]["coded_bits"] > report["watermark"]["bit_errors"] >= 0
    assert report["labels_agree"] is True
    forged = tmp_path / "forged.png"
    write_labeled_image(forged, embed_watermark(astronaut, JOB), image_labels("other-job"))
    assert cli.main(["verify", str(forged), "--json", "--max-pixels", "300000"]) == 0
    assert json.loads(capsys.readouterr().out)["labels_agree"] is False


def test_report_is_frozen(tmp_path: Path, astronaut: np.ndarray) -> None:
    path = tmp_path / "x.png"
    write_image(path, astronaut)
    report = verify(path)
    assert isinstance(report, VerifyReport)
    with pytest.raises(AttributeError):
        report.kind = "video"  # type: ignore[misc]
