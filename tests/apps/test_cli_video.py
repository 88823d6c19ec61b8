"""``faceweave swap`` with video targets and ``--map``: exit codes, one-line messages, audio.

Clips are built here with PyAV from skimage's astronaut (sliding 2 px a frame, 30 fps)
with a 440 Hz AAC tone. In-process tests call :func:`faceweave.apps.cli.main`; the
``slow`` ones run ``python -m faceweave`` in a subprocess to see the real stderr.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import av
import clips  # tests/clips.py: tests/ is on sys.path under pytest
import cv2
import numpy as np
import pytest

from faceweave.apps import cli
from faceweave.errors import EXIT_ERROR, EXIT_NO_FACE, EXIT_OK, EXIT_USAGE
from faceweave.io import read_image, write_image
from faceweave.provenance import verify

REPO_ROOT = Path(__file__).resolve().parents[2]
PROGRESS_BAR = re.compile(r"^faceweave:\s+(\d+%\||\d+frame)")


def make_clip(path: Path, scene: np.ndarray | None, **options: object) -> Path:
    """The shared clip maker (tests/clips.py) at this module's small size."""
    options.setdefault("size", (320, 240))
    return clips.make_clip(path, scene, **options)  # type: ignore[arg-type]


def _run(*args: str | Path, cwd: Path, marked: bool = False) -> subprocess.CompletedProcess[str]:
    """Run the CLI; swaps skip the watermark unless ``marked`` (pixel checks need exact pixels)."""
    if args and args[0] == "swap" and not marked:
        args = (*args, "--no-watermark")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    env.pop("FACEWEAVE_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "faceweave", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _message_lines(stderr: str) -> list[str]:
    lines = stderr.replace("\r", "\n").splitlines()
    return [line for line in lines if line.strip() and not PROGRESS_BAR.match(line)]


def _frames(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="bgr24") for f in container.decode(video=0)]


def _audio(path: Path) -> list[bytes]:
    with av.open(str(path)) as container:
        return [bytes(p) for p in container.demux(audio=0) if p.size]


@pytest.fixture(scope="module")
def files(
    tmp_path_factory: pytest.TempPathFactory, astronaut: np.ndarray, grace_hopper: np.ndarray
) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cli_video")
    write_image(root / "hopper.png", grace_hopper)
    write_image(root / "astronaut.png", astronaut)
    return {
        "hopper": root / "hopper.png",
        "astronaut": root / "astronaut.png",
        "clip": make_clip(root / "clip.mp4", astronaut),
    }


# --- in-process: argument handling and errors ------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--map", "a.png=b.png", "--source", "a.png"], "--map replaces"),
        (["--crf", "20"], "--crf is for video targets"),
        (["--no-audio"], "--no-audio is for video targets"),
        ([], "give --source SRC, or --map SRC=REF"),
    ],
)
def test_source_and_video_options_must_fit(
    extra: list[str], fragment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if "--map" not in extra and extra != []:
        extra = [*extra, "--source", "a.png"]
    argv = ["swap", "-t", "b.png", "-o", str(tmp_path / "o.png"), *extra]
    assert cli.main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("faceweave: error: ") and fragment in err


@pytest.mark.parametrize(
    "extra",
    [
        ["--map", "a.png"],
        ["--crf", "60"],
        ["--fps", "0"],
        ["--fps", "1e10"],
        ["--preset", "bogus"],
        ["--encoder", "nope"],
        ["--encoder", "aac"],
    ],
)
def test_bad_video_option_values(
    extra: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["swap", "-s", "a.png", "-t", "b.mp4", "-o", str(tmp_path / "o.mp4"), *extra]
    assert cli.main(argv) == EXIT_USAGE
    assert extra[0] in capsys.readouterr().err


def test_an_image_target_with_a_video_output(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A transport stream (.ts) is not among the videos read: the error names the target,
    not the output's format."""
    stream = tmp_path / "clip.ts"
    stream.write_bytes(files["clip"].read_bytes())
    argv = ["swap", "-s", str(files["hopper"]), "-t", str(stream), "-o", str(tmp_path / "o.mp4")]
    assert cli.main(argv) == EXIT_USAGE
    assert f"{stream} is read as an image" in capsys.readouterr().err


def test_no_video_stream_is_one_line(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sound = make_clip(tmp_path / "sound.mp4", None, video=False)
    argv = ["swap", "-s", str(files["hopper"]), "-t", str(sound), "-o", str(tmp_path / "o.mp4")]
    assert cli.main(argv) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err == f"faceweave: error: {sound}: no video stream (contains audio)\n"
    assert not (tmp_path / "o.mp4").exists()


def test_unsupported_video_output_and_trim(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["swap", "-s", str(files["hopper"]), "-t", str(files["clip"])]
    assert cli.main([*base, "-o", str(tmp_path / "o.flv")]) == EXIT_USAGE  # (a bad argument)
    assert "unsupported video format" in capsys.readouterr().err
    argv = [*base, "-o", str(tmp_path / "o.mp4"), "--trim-start", "1", "--trim-end", "0.5"]
    assert cli.main(argv) == EXIT_USAGE
    assert "--trim-end" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_an_encoder_the_container_cannot_hold_is_a_usage_error(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """libx264 into WebM conflicts: a usage error before any model loads or any frame is
    read (it was exit 1 after a progress bar), for a video target and a folder's videos."""
    folder = tmp_path / "clips"
    folder.mkdir()
    (folder / "clip.webm").write_bytes(b"not read")
    base = ["swap", "-s", str(files["hopper"]), "--encoder", "libx264"]
    for target, output in ((files["clip"], tmp_path / "o.webm"), (folder, tmp_path / "out")):
        assert cli.main([*base, "-t", str(target), "-o", str(output)]) == EXIT_USAGE
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--encoder libx264:" in err, err
        assert "container cannot hold libx264 video" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clips"]


def test_image_options_for_a_video_target_are_usage_errors(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--quality`` (JPEG/WebP) had been ignored for a video; ``--debug`` was refused."""
    base = ["swap", "-s", str(files["hopper"]), "-t", str(files["clip"])]
    for extra, message in (
        (
            ["--quality", "10"],
            "--quality is for image targets and animated WebP outputs (a video's is --crf)",
        ),
        (["--debug", str(tmp_path / "d.png")], "--debug is for image targets"),
    ):
        assert cli.main([*base, "-o", str(tmp_path / "o.mp4"), *extra]) == EXIT_USAGE
        assert capsys.readouterr().err == f"faceweave: error: {message}\n"
    assert list(tmp_path.iterdir()) == []


def test_preset_and_crf_an_encoder_does_not_use_are_usage_errors(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """AVI's mpeg4 has no speed preset and FFV1 no quality scale: asked for, they are a
    usage error before any work (they had been ignored, the job run at its defaults)."""
    base = ["swap", "-s", str(files["hopper"]), "-t", str(files["clip"])]
    cases = [
        (["-o", str(tmp_path / "o.avi"), "--preset", "veryslow"], "--preset", "mpeg4"),
        (["-o", str(tmp_path / "o.mkv"), "--encoder", "ffv1", "--crf", "10"], "--crf", "ffv1"),
    ]
    for extra, flag, codec in cases:
        assert cli.main([*base, *extra]) == EXIT_USAGE
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        assert err.startswith(f"faceweave: error: {flag} is not used by the {codec} encoder")
    assert list(tmp_path.iterdir()) == []


def test_a_trim_with_no_frame_in_it(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The 1 s clip: past its end is a usage error before anything loads; a range between
    two frames says so (it had read as an undecodable file, with a truncation warning)."""
    base = ["swap", "-s", str(files["hopper"]), "-t", str(files["clip"]), "--quiet"]
    assert cli.main([*base, "-o", str(tmp_path / "a.mp4"), "--trim-start", "5"]) == EXIT_USAGE
    assert "past the end" in capsys.readouterr().err
    argv = [*base, "-o", str(tmp_path / "b.mp4"), "--trim-start", "0.51", "--trim-end", "0.52"]
    assert cli.main(argv) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.endswith("no frame from 0.51 s to 0.52 s (--trim-start/--trim-end)\n"), err
    assert "truncated" not in err
    assert list(tmp_path.iterdir()) == []


def test_video_without_faces_exits_3_unless_skipped(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    grey = make_clip(tmp_path / "grey.mp4", None, frames=6)
    argv = ["swap", "-s", str(files["hopper"]), "-t", str(grey), "--quiet"]
    (tmp_path / "a.mp4").write_bytes(b"an older file")
    assert cli.main([*argv, "-o", str(tmp_path / "a.mp4")]) == EXIT_NO_FACE
    assert "no face found in any frame; nothing written" in capsys.readouterr().err
    # As for an image: no output (it had been written unchanged), and an older file kept.
    assert (tmp_path / "a.mp4").read_bytes() == b"an older file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.mp4", "grey.mp4"]
    assert cli.main([*argv, "-o", str(tmp_path / "b.mp4"), "--skip-no-face"]) == EXIT_OK
    assert len(_frames(tmp_path / "b.mp4")) == 6
    # Nothing was swapped: no watermark, no label saying it is synthetic (the swap is
    # marked by default; this clip had carried both).
    report = verify(tmp_path / "b.mp4")
    assert not report.marked and not report.labels, report


def test_no_audio_leaves_the_sound_out(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["swap", "-s", str(files["astronaut"]), "-t", str(files["clip"]), "--no-watermark"]
    assert cli.main([*argv, "-o", str(tmp_path / "out.mkv"), "--no-audio"]) == EXIT_OK
    assert "audio none" in capsys.readouterr().err
    with av.open(str(tmp_path / "out.mkv")) as container:
        assert not container.streams.audio
    assert len(_frames(tmp_path / "out.mkv")) == 30


@pytest.mark.parametrize(
    ("selector", "all_faces"), [([], False), (["--face-selector", "many"], True)]
)
def test_a_video_that_swaps_every_face_sweeps_its_tiles(
    files: dict[str, Path],
    astronaut: np.ndarray,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    selector: list[str],
    all_faces: bool,
) -> None:
    """Small faces beside a close one are looked for (video_analyser's ``all_faces``)
    only where more than one face is swapped: with ``one`` they would cost a fit a
    frame each for nothing."""
    from faceweave.pipeline import video_job

    asked: list[bool] = []
    made = video_job.video_analyser

    def recording(**options: Any) -> Any:
        asked.append(options["all_faces"])
        return made(**options)

    monkeypatch.setattr(video_job, "video_analyser", recording)
    clip = make_clip(tmp_path / "short.mp4", astronaut, frames=3, audio=False)
    argv = ["swap", "-s", str(files["hopper"]), "-t", str(clip), "--no-watermark", "--quiet"]
    assert cli.main([*argv, "-o", str(tmp_path / "out.mp4"), *selector]) == EXIT_OK
    assert asked == [all_faces]


def test_a_folder_swaps_its_images_then_its_videos(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Video makers' batches: a folder's videos had been left out ("no images" when it
    held only videos). Each is swapped to a video of its name, with its audio and the
    video options; a broken one is one line, and the others are still done."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a_photo.png").write_bytes(files["hopper"].read_bytes())
    (folder / "b_clip.mp4").write_bytes(files["clip"].read_bytes())
    (folder / "c_broken.mp4").write_bytes(os.urandom(2000))
    make_clip(folder / "d_grey.mkv", None, frames=6)
    out = tmp_path / "out"
    argv = ["swap", "-s", str(files["astronaut"]), "-t", str(folder), "-o", str(out)]
    code = cli.main([*argv, "--trim-end", "0.5", "--quiet", "--no-watermark"])
    err = capsys.readouterr().err
    assert code == EXIT_ERROR, err  # the broken file's error outranks the grey clip's no face
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert lines[0].startswith(f"faceweave: error: {folder / 'c_broken.mp4'}: "), err
    assert "d_grey.mkv: no face found in any frame; nothing written" in lines[1], err
    assert sorted(p.name for p in out.iterdir()) == ["a_photo.png", "b_clip.mp4"]
    assert len(_frames(out / "b_clip.mp4")) == 15  # --trim-end 0.5 at 30 fps
    assert _audio(out / "b_clip.mp4")  # its sound kept
    assert (
        np.abs(read_image(out / "a_photo.png").astype(int) - read_image(files["hopper"])).max() > 50
    )


def test_a_trim_past_one_videos_end_is_that_files_error(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """In a batch, a --trim-start past one short video's end fails that file (exit 1,
    the others done), not the command's usage (exit 2, as if no file had been done)."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a_clip.mp4").write_bytes(files["clip"].read_bytes())  # 1 s
    make_clip(folder / "b_short.mp4", None, frames=6)  # 0.2 s
    out = tmp_path / "out"
    argv = ["swap", "-s", str(files["astronaut"]), "-t", str(folder), "-o", str(out), "-q"]
    assert cli.main([*argv, "--trim-start", "0.5", "--no-watermark"]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert "--trim-start 0.5 s is past the end of" in err and "b_short.mp4 (0.20 s" in err, err
    assert sorted(p.name for p in out.iterdir()) == ["a_clip.mp4"]


def test_video_options_need_a_video_in_the_folder(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a_photo.png").write_bytes(files["astronaut"].read_bytes())
    argv = ["swap", "-s", str(files["hopper"]), "-t", str(folder), "-o", str(tmp_path / "out")]
    assert cli.main([*argv, "--crf", "20"]) == EXIT_USAGE
    assert "--crf is for video targets" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def _gif(path: Path, scene: np.ndarray, frames: int, durations: list[int]) -> Path:
    """``scene`` sliding right by 2 px a frame at 320x240, as an animated GIF, WebP or
    PNG (by ``path``'s extension) playing twice."""
    from PIL import Image

    height = 240
    wide = cv2.resize(scene, (round(scene.shape[1] * height / scene.shape[0]), height))
    pictures = []
    for index in range(frames):
        shift = np.float32([[1, 0, 2 * index - 40], [0, 1, 0]])
        moved = cv2.warpAffine(wide, shift, (320, height), borderMode=cv2.BORDER_REFLECT)
        pictures.append(Image.fromarray(moved[:, :, ::-1].copy()))
    pictures[0].save(path, save_all=True, append_images=pictures[1:], duration=durations, loop=1)
    return path


def test_an_animated_target_is_swapped_frame_by_frame(
    files: dict[str, Path],
    astronaut: np.ndarray,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A reaction GIF (or an animated WebP) had been unsupported (a GIF) or swapped as its
    first frame alone (a WebP): every frame is swapped, and the output keeps the
    target's format, timing and loop count, or becomes a video."""
    from faceweave.io.animation import AnimationReader

    durations = [60, 60, 120, 60, 90]
    gif = _gif(tmp_path / "reaction.gif", astronaut, 5, durations)
    argv = ["swap", "-s", str(files["hopper"]), "-t", str(gif), "--no-watermark"]
    assert cli.main([*argv, "-o", str(tmp_path / "out.gif")]) == EXIT_OK
    assert "out.gif: 5 frames, 5 faces swapped in 5 frames" in capsys.readouterr().err
    with AnimationReader(gif) as before, AnimationReader(tmp_path / "out.gif") as after:
        pairs = list(zip(before, after, strict=True))
        assert after.durations_ms == tuple(durations) and after.plays == 2  # (loop=1)
    import faceweave as fw

    for old, new in pairs:
        change = np.abs(old.image.astype(int) - new.image.astype(int)).max(axis=2)
        face = fw.get_one_face(old.image)
        assert face is not None
        x0, y0, x1, y1 = (round(v) for v in face.bbox)
        # Her face changed; the rest is the target's but for the GIF's 256 colours
        # (dithered: a few levels).
        assert change[y0:y1, x0:x1].mean() > 20
        outside = np.ones_like(change, bool)
        outside[max(0, y0 - 30) : y1 + 30, max(0, x0 - 30) : x1 + 30] = False
        assert np.median(change[outside]) <= 8
    assert cli.main([*argv, "-o", str(tmp_path / "out.mp4"), "--crf", "30", "-q"]) == EXIT_OK
    assert len(_frames(tmp_path / "out.mp4")) == 5
    # An encoder's options are for a video output.
    assert cli.main([*argv, "-o", str(tmp_path / "x.gif"), "--crf", "30"]) == EXIT_USAGE
    assert "--crf is for a video output; x.gif is an animated image" in capsys.readouterr().err
    assert not (tmp_path / "x.gif").exists()
    # A video to an animated WebP, trimmed; and the frame analysed at a time.
    video = ["swap", "-s", str(files["hopper"]), "-t", str(files["clip"]), "--no-watermark", "-q"]
    assert cli.main([*video, "-o", str(tmp_path / "clip.webp"), "--trim-end", "0.2"]) == EXIT_OK
    with AnimationReader(tmp_path / "clip.webp") as reader:
        assert reader.info.frame_count == 6 and reader.plays == 0
    assert cli.main(["analyse", str(gif), "--at", "0.25"]) == EXIT_OK
    assert f"{gif} at 0.24 s: 320x240, 1 face(s)" in capsys.readouterr().out


def test_an_animated_result_is_watermarked_and_labelled(
    files: dict[str, Path], astronaut: np.ndarray, tmp_path: Path
) -> None:
    """Animated results had carried no labels at all, and a GIF made on a web palette
    (dithered, as many old GIFs are) lost its watermark too: its frames had been
    mapped to 256 colours without dithering. Now each format carries the labels
    (WebP and APNG as XMP and text, GIF as an XMP comment) and the mark is found."""
    from PIL import Image, ImageSequence

    plain = _gif(tmp_path / "plain.gif", astronaut, 4, [80] * 4)
    with Image.open(plain) as image:
        frames = [frame.convert("RGB").convert("P") for frame in ImageSequence.Iterator(image)]
    dithered = tmp_path / "dithered.gif"  # (Pillow's web palette, Floyd-Steinberg)
    frames[0].save(dithered, save_all=True, append_images=frames[1:], duration=80, loop=0)
    for target, name in ((dithered, "o.gif"), (plain, "o.webp"), (plain, "o.apng")):
        argv = ["swap", "-s", str(files["hopper"]), "-t", str(target), "-q"]
        assert cli.main([*argv, "-o", str(tmp_path / name)]) == EXIT_OK
        report = verify(tmp_path / name)
        assert report.marked, (name, report)
        assert report.labels.get("faceweave:synthetic") == "true", (name, report.labels)
        assert report.labels.get("faceweave:job") == report.watermark.payload, name


def test_an_animations_last_frame_keeps_its_time_in_a_video_and_at_a_new_rate(
    files: dict[str, Path], astronaut: np.ndarray, tmp_path: Path
) -> None:
    """A GIF's last frame is often a long hold: as a video its last frame had lasted one
    average frame (0.64 s of 0.98), and at --fps one input frame's time."""
    from faceweave.io.animation import AnimationReader

    gif = _gif(tmp_path / "hold.gif", astronaut, 3, [60, 60, 500])
    argv = ["swap", "-s", str(files["hopper"]), "-t", str(gif), "--no-watermark", "-q"]
    assert cli.main([*argv, "-o", str(tmp_path / "o.mp4")]) == EXIT_OK
    with av.open(str(tmp_path / "o.mp4")) as container:
        stream = container.streams.video[0]
        times = [float(f.pts * f.time_base) for f in container.decode(stream)]
        duration = container.duration
    # The last frame again one frame period (207 ms, the mean) before the end: 0.62 s.
    assert times[:3] == pytest.approx([0.0, 0.06, 0.12], abs=0.002)
    assert times[-1] == pytest.approx(0.62 - 0.207, abs=0.002)
    assert duration is not None and duration / 1e6 == pytest.approx(0.62, abs=0.002)
    # Trimmed inside a frame: the file ends at the trim's end (it had lasted a mean
    # frame period past it, and MP4 had read as ending early by the B-frames' delay).
    for name in ("t.mp4", "t.mkv", "t.gif"):
        trim = ["--trim-start", "0.03", "--trim-end", "0.14"]  # (30, 60, 20 ms of frames)
        assert cli.main([*argv, "-o", str(tmp_path / name), *trim]) == EXIT_OK
        with av.open(str(tmp_path / name)) as container:
            assert container.duration is not None
            assert container.duration / 1e6 == pytest.approx(0.11, abs=0.004), name
    assert cli.main([*argv, "-o", str(tmp_path / "o.gif"), "--fps", "10"]) == EXIT_OK
    with AnimationReader(tmp_path / "o.gif") as reader:
        # 0.62 s in whole 100-ms slots (it had been 400: the last frame for one mean
        # frame's time).
        assert sum(reader.durations_ms) == 700


def test_a_faceless_animation_goes_to_a_video_unmarked_with_its_timing(
    files: dict[str, Path], tmp_path: Path
) -> None:
    """Nothing swapped (--skip-no-face): the animation's own frames, written again
    without the mark, its last frame held as long as it holds it."""
    ramp = np.repeat(np.linspace(40, 200, 320, dtype=np.uint8)[None, :, None], 240, axis=0)
    scene = np.ascontiguousarray(np.repeat(ramp, 3, axis=2))  # (no face; its frames differ)
    gif = _gif(tmp_path / "ramp.gif", scene, 3, [60, 60, 500])
    argv = ["swap", "-s", str(files["hopper"]), "-t", str(gif), "-q", "--skip-no-face"]
    assert cli.main([*argv, "-o", str(tmp_path / "o.mp4")]) == EXIT_OK
    with av.open(str(tmp_path / "o.mp4")) as container:
        stream = container.streams.video[0]
        times = [float(f.pts * f.time_base) for f in container.decode(stream)]
    assert times == pytest.approx([0.0, 0.06, 0.12, 0.62 - 0.207], abs=0.002)
    assert not verify(tmp_path / "o.mp4").marked


def test_a_video_stored_turned_goes_upright_into_an_animation(
    files: dict[str, Path], astronaut: np.ndarray, tmp_path: Path
) -> None:
    """An animated image stores no display rotation: a phone video's frames are turned
    as a player shows them (they had come out sideways)."""
    from faceweave.io.animation import AnimationReader

    clip = make_clip(tmp_path / "phone.mp4", astronaut, frames=4, audio=False, display_rotation=90)
    argv = ["swap", "-s", str(files["hopper"]), "-t", str(clip), "--no-watermark", "-q"]
    for name in ("o.gif", "o.webp"):
        assert cli.main([*argv, "-o", str(tmp_path / name)]) == EXIT_OK
        with AnimationReader(tmp_path / name) as reader:
            assert (reader.info.width, reader.info.height) == (320, 240), name  # as shown
    grey = make_clip(tmp_path / "grey.mp4", None, frames=4, audio=False, display_rotation=90)
    argv = ["swap", "-s", str(files["hopper"]), "-t", str(grey), "-q", "--skip-no-face"]
    assert cli.main([*argv, "-o", str(tmp_path / "grey.gif")]) == EXIT_OK  # (copied unmarked)
    with AnimationReader(tmp_path / "grey.gif") as reader:
        assert (reader.info.width, reader.info.height) == (320, 240)


def test_an_animated_webps_quality_is_its_quality(
    files: dict[str, Path], astronaut: np.ndarray, tmp_path: Path
) -> None:
    gif = _gif(tmp_path / "a.gif", astronaut, 3, [100] * 3)
    argv = ["swap", "-s", str(files["hopper"]), "-t", str(gif), "--no-watermark", "-q"]
    sizes = []
    for quality in ("20", "95"):
        output = tmp_path / f"q{quality}.webp"
        assert cli.main([*argv, "-o", str(output), "--quality", quality]) == EXIT_OK
        sizes.append(output.stat().st_size)
    assert sizes[0] < 0.6 * sizes[1]
    assert cli.main([*argv, "-o", str(tmp_path / "q.gif"), "--quality", "50"]) == EXIT_USAGE


def test_an_animation_too_long_to_hold_is_refused_before_any_work(
    files: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from faceweave.pipeline import video_job

    # 30 frames of 320x240: 2.3 MB as GIF indices, 6.9 MB as WebP's RGB.
    monkeypatch.setattr(video_job, "ANIMATION_MAX_BYTES", 3 << 20)
    argv = ["swap", "-s", str(files["hopper"]), "-t", str(files["clip"]), "-q"]
    assert cli.main([*argv, "-o", str(tmp_path / "o.webp")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "30 frames of 320x240 are too many for an animated image" in err, err
    assert "write a video (.mp4)" in err and not (tmp_path / "o.webp").exists()
    assert cli.main([*argv, "-o", str(tmp_path / "o.gif"), "--no-watermark"]) == EXIT_OK


def test_a_folders_animations_are_swapped_as_its_videos_are(
    files: dict[str, Path],
    astronaut: np.ndarray,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    _gif(folder / "a.webp", astronaut, 3, [100] * 3)
    (folder / "b_still.webp").write_bytes(
        cv2.imencode(".webp", read_image(files["astronaut"]))[1].tobytes()
    )
    _gif(folder / "c.gif", astronaut, 2, [100] * 2)
    out = tmp_path / "out"
    argv = ["swap", "-s", str(files["hopper"]), "-t", str(folder), "-o", str(out)]
    assert cli.main([*argv, "--no-watermark"]) == EXIT_OK
    err = capsys.readouterr().err
    assert "out/a.webp: 3 frames" in err and "out/c.gif: 2 frames" in err, err
    assert "3 of 3 file(s) swapped" in err, err
    assert sorted(p.name for p in out.iterdir()) == ["a.webp", "b_still.webp", "c.gif"]


def _group(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Two people side by side, the left one scaled to the right one's height."""
    h = right.shape[0]
    return np.ascontiguousarray(np.hstack([cv2.resize(left, (h, h)), right]))


def _tinted(image: np.ndarray, gains: tuple[float, float, float]) -> np.ndarray:
    """The image with its B, G, R channels scaled (a source told apart by its tint)."""
    return np.clip(image.astype(np.float32) * gains, 0, 255).astype(np.uint8)


def test_map_on_a_group_photo(
    files: dict[str, Path],
    tmp_path: Path,
    astronaut: np.ndarray,
    grace_hopper: np.ndarray,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Two sources told apart by tint (no colour transfer): each lands on its own person."""
    group = _group(astronaut, grace_hopper)
    h = grace_hopper.shape[0]
    write_image(tmp_path / "group.png", group)
    write_image(tmp_path / "red.png", _tinted(grace_hopper, (0.5, 0.6, 1.6)))
    write_image(tmp_path / "blue.png", _tinted(grace_hopper, (1.6, 0.6, 0.5)))
    argv = [
        "swap",
        "--map",
        f"{tmp_path / 'red.png'}={files['astronaut']}",
        "--map",
        f"{tmp_path / 'blue.png'}={files['hopper']}",
        "-t",
        str(tmp_path / "group.png"),
        "-o",
        str(tmp_path / "out.png"),
        "--color",
        "none",
    ]
    assert cli.main(argv) == EXIT_OK, capsys.readouterr().err
    change = read_image(tmp_path / "out.png").astype(float) - group
    left, right = change[:, :h], change[:, h:]
    redness = [float(c[..., 2].sum() - c[..., 0].sum()) / 1e6 for c in (left, right)]
    assert redness[0] > 0.5 and redness[1] < -0.5, redness


def test_a_reference_that_matches_nobody_says_how_near_it_came(
    files: dict[str, Path],
    tmp_path: Path,
    astronaut: np.ndarray,
    grace_hopper: np.ndarray,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A --map entry that found nobody while another was swapped is named (it had been
    silent), and both it and a --reference-face that found nobody give the nearest
    distance: a turned face of the right person is often just over the threshold."""
    write_image(tmp_path / "group.png", _group(astronaut, grace_hopper))
    out = ["-o", str(tmp_path / "out.png"), "--no-watermark"]
    both_her = ["--map", f"{files['hopper']}={files['astronaut']}"] * 2
    assert cli.main(["swap", *both_her, "-t", str(tmp_path / "group.png"), *out]) == EXIT_OK
    err = capsys.readouterr().err
    assert re.search(
        r"--map entry \d matched no face \(the nearest face is at identity "
        r"distance 0\.\d\d, over --reference-distance 0\.6\)",
        err,
    ), err
    argv = ["swap", "-s", str(files["hopper"]), "--reference-face", str(files["astronaut"])]
    assert cli.main([*argv, "-t", str(files["hopper"]), *out]) == EXIT_NO_FACE
    err = capsys.readouterr().err
    assert "no face matching the reference found in the target (the nearest" in err, err


@pytest.mark.parametrize(("position", "reddened"), [(0, "left"), (1, "right")])
def test_the_reference_face_is_taken_from_a_frame_of_the_target(
    position: int,
    reddened: str,
    tmp_path: Path,
    astronaut: np.ndarray,
    grace_hopper: np.ndarray,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """FaceFusion's reference frame and position: no still of the person needed."""
    group = _group(astronaut, grace_hopper)
    clip = make_clip(tmp_path / "group.mp4", group, frames=10, size=(640, 320), audio=False)
    write_image(tmp_path / "red.png", _tinted(grace_hopper, (0.5, 0.6, 1.6)))
    argv = ["swap", "-s", str(tmp_path / "red.png"), "-t", str(clip), "--no-watermark"]
    argv += ["-o", str(tmp_path / "out.mp4"), "--color", "none", "--quiet"]
    argv += ["--reference-frame", "0.1", "--reference-position", str(position)]
    assert cli.main([*argv, "--face-order", "left-right"]) == EXIT_OK, capsys.readouterr().err
    change = _frames(tmp_path / "out.mp4")[5].astype(float) - _frames(clip)[5]
    halves = {"left": change[:, :320], "right": change[:, 320:]}
    redness = {side: float(c[..., 2].sum() - c[..., 0].sum()) / 1e6 for side, c in halves.items()}
    other = "right" if reddened == "left" else "left"
    assert redness[reddened] > 0.3 and abs(redness[other]) < 0.05, redness


def test_a_frames_faces_are_found_as_a_photos_and_numbered_as_swap_counts_them(
    tmp_path: Path, astronaut: np.ndarray, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reference frame's faces are found as an image target's are, a face cut by the
    frame's side too (the video analyser alone found 1 of 2 here, and of a crowd shot's
    faces as few as 1 of 4); ``analyse --at --face-order`` shows the numbers swap uses."""
    scene = np.ascontiguousarray(np.hstack([astronaut, astronaut[:, :216]]))  # one face cut
    clip = make_clip(tmp_path / "two.mp4", scene, frames=10, size=(728, 512), audio=False)
    assert cli.main(["analyse", str(clip), "--at", "0.1", "--json"]) == EXIT_OK
    by_size = json.loads(capsys.readouterr().out)
    argv = ["analyse", str(clip), "--at", "0.1", "--json", "--face-order", "left-right"]
    assert cli.main(argv) == EXIT_OK
    by_x = json.loads(capsys.readouterr().out)
    assert len(by_x) == 2 and by_x[0]["bbox"][0] < by_x[1]["bbox"][0], by_x
    assert by_size == [by_x[0], by_x[1]]  # the whole face is the larger
    write_image(tmp_path / "src.png", astronaut)
    argv = ["swap", "-s", str(tmp_path / "src.png"), "-t", str(clip), "--no-watermark"]
    argv += ["-o", str(tmp_path / "out.mp4"), "--quiet", "--face-order", "left-right"]
    argv += ["--reference-frame", "0.1", "--reference-position", "1"]
    assert cli.main(argv) == EXIT_OK, capsys.readouterr().err
    assert cli.main(["analyse", str(tmp_path / "src.png"), "--at", "1"]) == EXIT_USAGE
    assert "--at picks a video's frame" in capsys.readouterr().err
    # --at reads seconds as --reference-frame does: 0 is the first frame, and past the
    # end is a usage error (it had shown the last frame without a word).
    assert cli.main(["analyse", str(clip), "--at", "0", "--json"]) == EXIT_OK
    capsys.readouterr()
    assert cli.main(["analyse", str(clip), "--at", "0.4"]) == EXIT_USAGE
    assert f"--at 0.4 s is past the end of {clip} (0.33 s long)" in capsys.readouterr().err
    # An image's limit on a video would do nothing (it had been taken without a word).
    assert cli.main(["analyse", str(clip), "--max-pixels", "100"]) == EXIT_USAGE
    assert "--max-pixels limits images" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "code", "fragment"),
    [
        (
            ["--reference-position", "1"],
            EXIT_USAGE,
            "--reference-position is for --reference-frame",
        ),
        (["--reference-frame", "9"], EXIT_USAGE, "--reference-frame 9 s is past the end of"),
        (
            ["--reference-frame", "0", "--reference-face", "x.png"],
            EXIT_USAGE,
            "give --reference-face IMG or --reference-frame SECONDS, not both",
        ),
        (
            ["--reference-frame", "0", "--reference-position", "3"],
            EXIT_NO_FACE,
            "at 0.00 s: no face at --reference-position 3 (1 found, counted from 0",
        ),
        # Inside the last frame's time (it is on screen until 1.0 s): that frame. It had
        # been "no frame at 0.99 s" (the first frame at or after it was looked for).
        (
            ["--reference-frame", "0.99", "--reference-position", "3"],
            EXIT_NO_FACE,
            "at 0.97 s: no face at --reference-position 3 (1 found",
        ),
    ],
)
def test_reference_frame_errors(
    extra: list[str],
    code: int,
    fragment: str,
    files: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["swap", "-s", str(files["astronaut"]), "-t", str(files["clip"])]
    assert cli.main([*argv, "-o", str(tmp_path / "o.mp4"), *extra]) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err, err
    assert list(tmp_path.iterdir()) == []


def test_reference_frame_needs_one_video_target(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["swap", "-s", str(files["astronaut"]), "--reference-frame", "0"]
    assert cli.main([*argv, "-t", str(files["hopper"]), "-o", str(tmp_path / "o.png")]) == 2
    assert "--reference-frame is for video targets" in capsys.readouterr().err
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "clip.mp4").write_bytes(files["clip"].read_bytes())
    assert cli.main([*argv, "-t", str(folder), "-o", str(tmp_path / "out")]) == EXIT_USAGE
    assert "give a video --target" in capsys.readouterr().err


# --- end to end, in a subprocess -------------------------------------------------------------


@pytest.mark.slow
def test_swap_video_end_to_end(files: dict[str, Path], tmp_path: Path) -> None:
    output = tmp_path / "out.mp4"
    result = _run(
        "swap", "-s", files["hopper"], "-t", files["clip"], "-o", output, cwd=tmp_path, marked=True
    )
    assert result.returncode == EXIT_OK, result.stderr
    assert re.search(r"30/30 \[.*frame/s\]", result.stderr), result.stderr  # bar: fps and ETA
    lines = _message_lines(result.stderr)
    # Grace Hopper wears glasses: one line of advice on the source, then the summary.
    assert len(lines) == 2, result.stderr
    assert lines[0].startswith("faceweave: warning: source face wears glasses"), lines[0]
    assert "30 frames, 30 faces swapped" in lines[1], result.stderr
    assert len(_frames(output)) == 30
    assert _audio(output) == _audio(files["clip"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mp4"]
    # Marked by default: the watermark in the frames and the labels in the container.
    report = verify(output)
    assert report.marked, report
    assert report.labels.get("faceweave:synthetic") == "true", report.labels


@pytest.mark.slow
def test_truncated_video_gives_output_and_one_warning(
    files: dict[str, Path], astronaut: np.ndarray, tmp_path: Path
) -> None:
    full = make_clip(tmp_path / "full.mkv", astronaut, frames=30)
    cut = tmp_path / "cut.mkv"
    cut.write_bytes(full.read_bytes()[: full.stat().st_size * 6 // 10])
    output = tmp_path / "out.mp4"
    source = files["astronaut"]  # no glasses: no advice line besides the decoder's warning
    result = _run("swap", "-s", source, "-t", cut, "-o", output, "--quiet", cwd=tmp_path)
    assert result.returncode == EXIT_OK, result.stderr
    lines = _message_lines(result.stderr)
    assert len(lines) == 1 and lines[0].startswith("faceweave: warning: "), result.stderr
    assert "cut.mkv" in lines[0]
    assert 5 <= len(_frames(output)) < 30


def test_a_video_whose_frames_all_fail_to_decode_is_said_once(
    files: dict[str, Path], astronaut: np.ndarray, tmp_path: Path
) -> None:
    """The decoder's warning had shown bare (no "faceweave: warning:"), then again in
    the error line; analyse had blamed an --at it was not given."""
    from faceweave.io.video import VideoWriter

    whole = tmp_path / "whole.mp4"  # (its index first, as faceweave writes MP4)
    with VideoWriter(whole, width=320, height=240, fps=10) as writer:
        for index in range(10):
            writer.write(cv2.resize(np.roll(astronaut, 5 * index, axis=1), (320, 240)))
    data = whole.read_bytes()
    start = data.index(b"mdat") + 8  # (its frames' data cut short, its index kept)
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: start + 200])
    for argv, error in (
        (["analyse", cut], f"faceweave: error: {cut}: no video frame could be decoded"),
        (["swap", "-s", files["astronaut"], "-t", cut, "-o", tmp_path / "o.mp4", "-q"], None),
    ):
        result = _run(*argv, cwd=tmp_path)
        assert result.returncode == EXIT_ERROR, result.stderr
        lines = _message_lines(result.stderr)
        assert all(line.startswith("faceweave: ") for line in lines), result.stderr
        assert len(lines) <= 2 and "--at" not in result.stderr, result.stderr
        if error is not None:
            assert lines[-1] == error, result.stderr
        assert lines[-1].count("cut.mp4") == 1, lines[-1]
        assert result.stderr.count("damaged data skipped") <= 1, result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_stop_signal_mid_video_leaves_nothing(
    signum: int, files: dict[str, Path], astronaut: np.ndarray, tmp_path: Path
) -> None:
    """``timeout``, ``docker stop`` or systemd end a job with SIGTERM, a closed terminal
    with SIGHUP: the half-written video goes, as after Ctrl-C."""
    clip = make_clip(tmp_path / "long.mp4", astronaut, frames=120)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    args = ["swap", "-s", files["astronaut"], "-t", clip, "-o", out_dir / "o.mp4", "--quiet"]
    job = subprocess.Popen(
        [sys.executable, "-m", "faceweave", *map(str, args)],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120.0
        while not list(out_dir.glob(".o.mp4.*.tmp")) and job.poll() is None:
            assert time.monotonic() < deadline, "no temporary output appeared"
            time.sleep(0.05)
        assert job.poll() is None, "the job ended before it could be stopped"
        job.send_signal(signum)
        _, stderr = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 128 + signum, stderr
    assert _message_lines(stderr)[-1] == f"faceweave: stopped by {signal.Signals(signum).name}"
    assert list(out_dir.iterdir()) == []
