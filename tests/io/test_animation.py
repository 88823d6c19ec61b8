"""Animated images (GIF, WebP, APNG): read frame by frame with their timing, written back
atomically; small synthetic animations written with Pillow itself."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from faceweave.errors import ImageTooLargeError, InputError, OutputError, UnsupportedFormatError
from faceweave.io.animation import (
    AnimationReader,
    AnimationWriter,
    animation_extension,
    clip_extension,
    copy_clip,
    is_animation,
    open_clip,
    probe_clip,
)
from faceweave.io.video import VideoReader

WIDTH, HEIGHT = 40, 30


def _frames(count: int) -> list[Image.Image]:
    """Frames of distinct flat colours (exact in a GIF's palette too): frame i has red
    20 * i, green 255 - 20 * i, blue 100."""
    return [
        Image.fromarray(np.full((HEIGHT, WIDTH, 3), (20 * i, 255 - 20 * i, 100), np.uint8))
        for i in range(count)
    ]


def _animation(path: Path, durations: list[int], **options: object) -> Path:
    frames = _frames(len(durations))
    fmt = {".gif": "GIF", ".webp": "WEBP"}.get(path.suffix, "PNG")
    extra = {"lossless": True} if fmt == "WEBP" else {}
    frames[0].save(
        path,
        format=fmt,
        save_all=True,
        append_images=frames[1:],
        duration=durations,
        **extra,
        **options,  # type: ignore[arg-type]
    )
    return path


@pytest.mark.parametrize("name", ["a.gif", "a.webp", "a.png", "a.apng"])
def test_frames_come_with_their_own_times(tmp_path: Path, name: str) -> None:
    durations = [40, 40, 100, 200, 60]
    path = _animation(tmp_path / name, durations, loop=2)
    assert is_animation(path)
    with open_clip(path) as reader:
        assert isinstance(reader, AnimationReader)
        frames = list(reader)
        assert reader.durations_ms == tuple(durations)
        info = reader.info
        # Pillow's loop=2: a GIF repeats twice after its first play; the others play twice.
        assert reader.plays == (3 if name.endswith(".gif") else 2)
    assert [f.pts for f in frames] == [0, 40, 80, 180, 380]
    assert [f.index for f in frames] == list(range(5))
    assert info.frame_count == 5 and info.duration == pytest.approx(0.44)
    assert (info.width, info.height, info.has_audio, info.rotation) == (WIDTH, HEIGHT, False, 0)
    assert info.fps == pytest.approx(5 / 0.44, rel=1e-3)
    # Pixels are BGR, the colours Pillow wrote (exactly: flat colours).
    for i, frame in enumerate(frames):
        assert frame.image.shape == (HEIGHT, WIDTH, 3) and frame.image.dtype == np.uint8
        assert tuple(frame.image[5, 5]) == (100, 255 - 20 * i, 20 * i)


def test_stills_are_not_animations_and_other_files_are_not_either(tmp_path: Path) -> None:
    still = tmp_path / "still.png"
    _frames(1)[0].save(still)
    webp = tmp_path / "still.webp"
    _frames(1)[0].save(webp)
    broken = tmp_path / "broken.webp"
    broken.write_bytes(b"RIFF\x00\x00")
    assert not is_animation(still) and not is_animation(webp) and not is_animation(broken)
    assert not is_animation(tmp_path / "missing.png")
    assert not is_animation(tmp_path / "clip.mp4")
    assert is_animation(tmp_path / "any.gif")  # (its reader says what is wrong with it)
    with open_clip(still) as reader:  # (a still goes to FFmpeg's reader, as before)
        assert isinstance(reader, VideoReader)


def test_start_and_end_pick_the_frames_shown_then(tmp_path: Path) -> None:
    path = _animation(tmp_path / "a.gif", [100, 100, 100, 100])
    with AnimationReader(path, start=0.15, end=0.3) as reader:
        frames = list(reader)
    # The frame shown at 0.15 s (from 0.1 s) comes first, at the start; 0.3 s is excluded.
    assert [(f.pts, f.index) for f in frames] == [(150, 0), (200, 1)]
    assert reader.start_pts == 150
    assert tuple(frames[0].image[0, 0]) == (100, 235, 20)
    with AnimationReader(path, start=0.5) as reader:
        assert list(reader) == []
    for bad in ({"start": -1.0}, {"end": 0.0}, {"start": 0.3, "end": 0.2}, {"end": float("nan")}):
        with pytest.raises(InputError):
            AnimationReader(path, **bad)  # type: ignore[arg-type]


def test_gif_durations_as_browsers_show_them(tmp_path: Path) -> None:
    """A GIF frame of 10 ms or less (0: none given) is shown for 100 ms."""
    path = _animation(tmp_path / "a.gif", [0, 10, 50])
    with AnimationReader(path) as reader:
        assert reader.durations_ms == (100, 100, 50)


def test_transparent_pixels_are_laid_over_white(tmp_path: Path) -> None:
    """A sticker's transparent half, in its first frame (a palette's transparent index)
    and in a later one (which Pillow composes as RGBA)."""
    frames = []
    for i in range(2):
        rgba = np.zeros((HEIGHT, WIDTH, 4), np.uint8)
        rgba[:, : WIDTH // 2] = (200, 10 * i, 0, 255)
        frames.append(Image.fromarray(rgba, "RGBA"))
    path = tmp_path / "sticker.gif"
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=50)
    with AnimationReader(path) as reader:
        images = [f.image for f in reader]
    for i, image in enumerate(images):
        assert tuple(image[0, 0]) == (0, 10 * i, 200)
        assert tuple(image[0, -1]) == (255, 255, 255)


def test_broken_files_are_clear_errors(tmp_path: Path) -> None:
    path = _animation(tmp_path / "a.gif", [50] * 6)
    data = path.read_bytes()
    cut = tmp_path / "cut.gif"
    cut.write_bytes(data[: len(data) * 2 // 3])
    with AnimationReader(cut) as reader:
        frames = list(reader)
    assert 1 <= len(frames) < 6 and reader.warnings and "kept" in reader.warnings[0]
    header_only = tmp_path / "header.gif"
    header_only.write_bytes(data[:20])
    with pytest.raises(InputError):
        AnimationReader(header_only)
    empty = tmp_path / "empty.gif"
    empty.write_bytes(b"")
    with pytest.raises(UnsupportedFormatError, match="empty file"):
        AnimationReader(empty)
    text = tmp_path / "text.gif"
    text.write_text("not a gif")
    with pytest.raises(UnsupportedFormatError, match="not an animated image"):
        AnimationReader(text)
    with pytest.raises(InputError, match="no such file"):
        AnimationReader(tmp_path / "missing.gif")
    with pytest.raises(ImageTooLargeError):
        AnimationReader(path, max_pixels=WIDTH * HEIGHT - 1)


@pytest.mark.parametrize("name", ["out.gif", "out.webp", "out.apng", "out.png"])
def test_written_animations_read_back_with_their_timing(tmp_path: Path, name: str) -> None:
    images = [np.asarray(f)[:, :, ::-1].copy() for f in _frames(4)]
    path = tmp_path / name
    writer = AnimationWriter(
        path, width=WIDTH, height=HEIGHT, fps=25, time_base=Fraction(1, 90000), plays=3
    )
    for i, image in enumerate(images):
        writer.write(image, pts=i * 3600 + (i == 3) * 3600)  # 40 ms apart, then 80
    assert not path.exists()
    writer.close()
    assert writer.frames_written == 4
    with AnimationReader(path) as reader:
        frames = list(reader)
        assert reader.plays == 3
        # The last frame lasts as long as the one before it.
        assert reader.durations_ms == (40, 40, 80, 80)
    for image, frame in zip(images, frames, strict=True):
        tolerance = 0 if name.endswith("png") or name.endswith("gif") else 8
        assert np.abs(frame.image.astype(int) - image).max() <= tolerance
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no temp file left


def test_gif_frames_under_twenty_ms_are_dropped(tmp_path: Path) -> None:
    """60 fps in a GIF: browsers would show each 16.7-ms frame for 100 ms (six times
    too slow). On the GIF's 10-ms clock the frames fall at 0, 20, 30, 50, 70, 80 ms:
    those less than 20 ms after the last one kept are dropped."""
    path = tmp_path / "fast.gif"
    writer = AnimationWriter(path, width=WIDTH, height=HEIGHT, fps=60, time_base=Fraction(1, 60))
    images = [np.asarray(f)[:, :, ::-1].copy() for f in _frames(6)]
    for i, image in enumerate(images):
        writer.write(image, pts=i)
    writer.close()
    assert writer.frames_written == 6 and writer.frames_dropped == 2
    with AnimationReader(path) as reader:
        durations = reader.durations_ms
        kept = [f.image for f in reader]
    assert durations == (20, 30, 20, 20)
    assert all(np.array_equal(a, images[i]) for a, i in zip(kept, (0, 1, 3, 4), strict=True))


def test_writer_failures_leave_nothing(tmp_path: Path) -> None:
    image = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
    with pytest.raises(UnsupportedFormatError, match="unsupported animation format"):
        AnimationWriter(tmp_path / "o.mp4", width=WIDTH, height=HEIGHT)
    writer = AnimationWriter(tmp_path / "o.gif", width=WIDTH, height=HEIGHT)
    with pytest.raises(OutputError, match="frame is 30x40"):
        writer.write(np.zeros((WIDTH, HEIGHT, 3), np.uint8))
    with pytest.raises(OutputError, match="no frame"):
        writer.close()
    small = AnimationWriter(
        tmp_path / "o.webp", width=WIDTH, height=HEIGHT, max_bytes=3 * WIDTH * HEIGHT * 2
    )
    small.write(image)
    small.write(image)
    with pytest.raises(OutputError, match="write a video"):
        small.write(image)
    small.abort()
    missing = AnimationWriter(tmp_path / "no" / "o.gif", width=WIDTH, height=HEIGHT)
    missing.write(image)
    with pytest.raises(OutputError):
        missing.close()
    with (
        pytest.raises(ValueError, match="boom"),
        AnimationWriter(tmp_path / "ctx.gif", width=WIDTH, height=HEIGHT) as ctx,
    ):
        ctx.write(image)
        raise ValueError("boom")
    assert list(tmp_path.iterdir()) == []


def test_extensions_probe_and_copy(tmp_path: Path) -> None:
    assert animation_extension("A.GIF") == ".gif"
    assert clip_extension("x.MKV") == ".mkv" and clip_extension("x.apng") == ".apng"
    with pytest.raises(UnsupportedFormatError, match=r"\.flv.*an animated image"):
        clip_extension("x.flv")
    source = _animation(tmp_path / "a.webp", [30, 30, 60], loop=0)
    assert probe_clip(source).frame_count == 3
    seen: list[tuple[int, int]] = []
    assert copy_clip(source, tmp_path / "b.gif", progress=lambda d, t: seen.append((d, t))) == 3
    assert seen[-1] == (3, 3)
    with AnimationReader(tmp_path / "b.gif") as reader:
        assert reader.durations_ms == (30, 30, 60) and reader.plays == 0


@pytest.mark.parametrize(
    ("source", "loop", "plays"),
    [("a.gif", None, 1), ("a.gif", 0, 0), ("a.gif", 1, 2), ("a.webp", 1, 1), ("a.apng", 3, 3)],
)
def test_plays_are_carried_across_formats(
    tmp_path: Path, source: str, loop: int | None, plays: int
) -> None:
    """A GIF's loop count is its repeats after the first play (none: it plays once); a
    WebP's and an APNG's count the plays: a GIF that played once had come out of a WebP
    looping for ever, one that played twice as a WebP playing once."""
    options = {} if loop is None else {"loop": loop}
    path = _animation(tmp_path / source, [40, 40, 40], **options)
    with AnimationReader(path) as reader:
        assert reader.plays == plays
    for name in ("b.gif", "b.webp", "b.apng"):
        copy_clip(path, tmp_path / name)
        with AnimationReader(tmp_path / name) as reader:
            assert reader.plays == plays, (source, name)
    raw = (tmp_path / "b.gif").read_bytes()
    assert (b"NETSCAPE2.0" in raw) == (plays != 1)  # (one play: no loop extension at all)


def test_a_gif_cut_between_two_frames_keeps_the_frames_before(tmp_path: Path) -> None:
    """Cut where one frame ends and the next begins, Pillow's frame count had raised an
    IndexError ("internal error"); every cut keeps what decodes, with a warning."""
    path = _animation(tmp_path / "a.gif", [50] * 6)
    data = path.read_bytes()
    cuts = 0
    for end in range(40, len(data), 7):
        cut = tmp_path / "cut.gif"
        cut.write_bytes(data[:end])
        try:
            reader = AnimationReader(cut)
        except InputError:
            continue  # (not even a first frame)
        with reader:
            frames = list(reader)
        assert 1 <= len(frames) <= len(reader.durations_ms) <= 6
        assert len(frames) == 6 or reader.warnings, end
        cuts += 1
    assert cuts > 10


@pytest.mark.parametrize("name", ["a.gif", "a.webp", "a.apng"])
def test_an_animation_carries_its_labels(tmp_path: Path, name: str) -> None:
    """Labels as the image files carry them: a WebP's XMP, an APNG's text chunks and
    XMP, a GIF's comment (an XMP packet), read back by read_labels."""
    from faceweave.provenance import image_labels, labels_xmp, read_labels

    labels = image_labels("job-42", version="9.9.9")
    writer = AnimationWriter(
        tmp_path / name, width=32, height=24, fps=10, labels=labels, xmp=labels_xmp(labels)
    )
    for index in range(3):
        writer.write(np.full((24, 32, 3), 40 * index, np.uint8))
    writer.close()
    assert read_labels(tmp_path / name) == labels
    with AnimationReader(tmp_path / name) as reader:
        assert reader.info.frame_count == 3
