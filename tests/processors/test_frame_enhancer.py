"""The frame enhancer (FrameEnhancer, ``--frame-enhancer-model``): its model contract, the
tiles that make one seamless frame, the blend, its errors, and the swap command's
images, folders and videos upscaled. The model is a tiny ONNX model with Real-ESRGAN's
signature built here (tests/neural_models.py): nearest-neighbour upscaling, times a
gain."""

from __future__ import annotations

import re
from pathlib import Path

import cv2
import numpy as np
import pytest

pytest.importorskip("onnx")
from cli_runner import run_cli as _cli  # noqa: E402  (tests/ is on sys.path)
from neural_models import (  # noqa: E402  (tests/ is on sys.path)
    tiny_embedder,
    tiny_frame_enhancer,
    tiny_occluder,
    tiny_swapper,
)
from onnx import TensorProto  # noqa: E402

import faceweave as fw  # noqa: E402
from faceweave.errors import (  # noqa: E402
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    BackendError,
    InputError,
    UsageError,
)
from faceweave.io.image import read_image, write_image  # noqa: E402


def _repeated(frame: np.ndarray, scale: int) -> np.ndarray:
    return np.repeat(np.repeat(frame, scale, axis=0), scale, axis=1)


@pytest.mark.parametrize(
    ("options", "scale", "tile"),
    [
        ({}, 2, 256),  # open sides: 256 px tiles, the scale from one run
        ({"scale": 4}, 4, 256),
        ({"tile": 96}, 2, 96),  # a fixed tile: the scale from its declared output
        ({"tile": 64, "scale": 3}, 3, 64),
        ({"input_type": TensorProto.FLOAT16}, 2, 256),
    ],
)
def test_tiles_make_one_seamless_frame(
    tmp_path: Path, options: dict, scale: int, tile: int
) -> None:
    enhancer = fw.FrameEnhancer(tiny_frame_enhancer(tmp_path / "m.onnx", **options), blend=1.0)
    assert (enhancer.scale, enhancer.tile) == (scale, tile)
    rng = np.random.default_rng(0)
    for shape in ((101, 77, 3), (9, 13, 3), (300, 530, 3)):  # tiles cut, one tile, many
        frame = rng.integers(0, 256, shape, np.uint8)
        out = enhancer.enhance(frame)
        assert out.shape == (shape[0] * scale, shape[1] * scale, 3) and out.dtype == np.uint8
        # Nearest-neighbour upscaling, tile by tile, is the whole frame's to the level.
        assert np.abs(out.astype(int) - _repeated(frame, scale)).max() <= 1
    assert enhancer.output_size(640, 360) == (640 * scale, 360 * scale)


def test_the_blend_mixes_the_model_with_lanczos(tmp_path: Path, astronaut: np.ndarray) -> None:
    darker = tiny_frame_enhancer(tmp_path / "dark.onnx", gain=0.5)
    frame = astronaut[:200, :240]
    plain = cv2.resize(frame, (480, 400), interpolation=cv2.INTER_LANCZOS4)
    assert np.array_equal(fw.FrameEnhancer(darker, blend=0.0).enhance(frame), plain)
    full = fw.FrameEnhancer(darker, blend=1.0).enhance(frame).astype(float)
    assert np.abs(full - _repeated(frame, 2) * 0.5).max() <= 1
    half = fw.FrameEnhancer(darker, blend=0.5).enhance(frame).astype(float)
    assert np.abs(half - (0.5 * plain + 0.5 * full)).max() <= 1
    for blend in (-0.1, 1.5, "high", True):
        with pytest.raises(UsageError, match="frame enhancer blend must be"):
            fw.FrameEnhancer(darker, blend=blend)  # type: ignore[arg-type]


def test_frame_enhancer_refuses_other_models_and_files(tmp_path: Path) -> None:
    def refused(path: Path, message: str) -> None:
        with pytest.raises(InputError, match=re.escape(message)):
            fw.FrameEnhancer(path)

    refused(tiny_frame_enhancer(tmp_path / "rgba.onnx", channels=4), "expected [1, 3, scale x")
    refused(tiny_frame_enhancer(tmp_path / "odd.onnx", scale=1.5, tile=64), "a whole scale")
    refused(tiny_frame_enhancer(tmp_path / "thin.onnx", tile=33), "a fixed tile is 64 to 2048 px")
    refused(tiny_frame_enhancer(tmp_path / "int.onnx", input_type=TensorProto.UINT8), "float32")
    refused(tiny_occluder(tmp_path / "xseg.onnx"), "expected [1, 3, height, width] (RGB)")
    refused(tiny_embedder(tmp_path / "arcface.onnx"), "expected [1, 3, scale x height")
    swapper, _, _ = tiny_swapper(tmp_path / "swap.onnx")
    refused(swapper, "expected one image input and one output")
    refused(tmp_path / "missing.onnx", "model file not found")
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    refused(tmp_path / "junk.onnx", "not a loadable ONNX model")
    with pytest.raises(InputError, match="a .onnx file's path"):
        fw.FrameEnhancer(42)  # type: ignore[arg-type]


def test_frame_enhancer_errors(tmp_path: Path, astronaut: np.ndarray) -> None:
    with pytest.raises(InputError, match=r"nan.onnx: not a frame enhancer: on a test tile, the"):
        fw.FrameEnhancer(tiny_frame_enhancer(tmp_path / "nan.onnx", nan=True))
    x4 = tiny_frame_enhancer(tmp_path / "x4.onnx", scale=4)
    enhancer = fw.FrameEnhancer(x4, max_megapixels=2)
    with pytest.raises(
        InputError,
        match=r"a 512 x 512 frame upscaled x4 it would be 2048 x 2048 \(4.19 MP\), over the 2 MP",
    ):
        enhancer.enhance(astronaut)
    enhancer.check_size(350, 350)  # 1400 x 1400: 1.96 MP
    with pytest.raises(InputError, match=r"1440 x 1440 \(2.07 MP\), over the 2 MP limit"):
        enhancer.check_size(360, 360)
    with pytest.raises(InputError, match="two positive whole numbers"):
        enhancer.output_size(-10, "a")  # type: ignore[arg-type]
    for limit in (0, -1, float("nan"), float("inf"), True, "abc", None):
        with pytest.raises(UsageError, match="max_megapixels is a positive number"):
            fw.FrameEnhancer(x4, max_megapixels=limit)  # type: ignore[arg-type]
    # A huge finite output is white, not an overflow (warnings are errors here).
    huge = fw.FrameEnhancer(tiny_frame_enhancer(tmp_path / "huge.onnx", gain=1e38), blend=1.0)
    assert huge.enhance(np.full((20, 20, 3), 9, np.uint8)).min() == 255
    with pytest.raises(InputError, match="uint8"):
        enhancer.enhance(astronaut.astype(np.float32))
    # A model that fails on a frame later (here: NaN from the second run on).
    flaky = fw.FrameEnhancer(tiny_frame_enhancer(tmp_path / "x2.onnx"))
    flaky.model.run = lambda feeds: {"output": np.full((1, 3, 512, 512), np.nan, np.float32)}
    with pytest.raises(BackendError, match="not finite"):
        flaky.enhance(astronaut[:100, :100])


def test_swap_video_upscales_every_frame(
    tmp_path: Path, astronaut: np.ndarray, grace_hopper_face: fw.Face
) -> None:
    from clips import make_clip  # tests/clips.py

    from faceweave.io.video import VideoReader
    from faceweave.pipeline.video_job import swap_video

    clip = make_clip(tmp_path / "in.mp4", astronaut, frames=4, size=(320, 240), audio=False)
    enhancer = fw.FrameEnhancer(tiny_frame_enhancer(tmp_path / "x2.onnx"))
    stats = swap_video([grace_hopper_face], clip, tmp_path / "out.mp4", frame_enhancer=enhancer)
    assert stats.frames_written == 4
    with VideoReader(tmp_path / "out.mp4") as reader:
        frames = [p.image for p in reader]
    assert len(frames) == 4 and all(f.shape == (480, 640, 3) for f in frames)
    with pytest.raises(InputError, match="frame_enhancer is a FrameEnhancer, got str"):
        swap_video([grace_hopper_face], clip, tmp_path / "no.mp4", frame_enhancer="x2.onnx")  # type: ignore[arg-type]
    assert not (tmp_path / "no.mp4").exists()


@pytest.mark.slow
def test_command_line_upscales_images_folders_and_videos(
    tmp_path: Path, astronaut: np.ndarray, grace_hopper: np.ndarray
) -> None:
    from clips import make_clip  # tests/clips.py

    from faceweave.io.video import VideoReader

    model = tiny_frame_enhancer(tmp_path / "x2.onnx")
    write_image(tmp_path / "grace.png", grace_hopper)
    write_image(tmp_path / "astro.png", astronaut)
    flags = ["--frame-enhancer-model", model, "--frame-enhancer-blend", "1"]
    done = _cli("swap", "-s", "grace.png", "-t", "astro.png", "-o", "out.png", *flags, cwd=tmp_path)
    assert done.returncode == EXIT_OK, done.stderr
    out = read_image(tmp_path / "out.png")
    assert out.shape == (1024, 1024, 3)
    # The swap, upscaled: the background (away from the face) is the target's, repeated.
    assert np.abs(out[:200, 800:].astype(int) - _repeated(astronaut, 2)[:200, 800:]).mean() < 3

    # A folder: a transparent PNG keeps its transparency, upscaled; a faceless image
    # with --skip-no-face is written upscaled too (every output alike); a video.
    folder = tmp_path / "in"
    folder.mkdir()
    rgba = np.dstack([astronaut, np.full(astronaut.shape[:2], 255, np.uint8)])
    rgba[:64, :64, 3] = 0
    cv2.imwrite(str(folder / "clear.png"), rgba)
    write_image(folder / "wall.png", np.full((120, 160, 3), 180, np.uint8))
    make_clip(folder / "clip.mp4", astronaut, frames=3, size=(320, 240), audio=False)
    grey = np.full((240, 320, 3), 128, np.uint8)
    make_clip(folder / "grey.mp4", grey, frames=2, size=(160, 120), audio=False)
    done = _cli(
        "swap", "-s", "grace.png", "-t", "in", "-o", "out", "--skip-no-face", *flags, cwd=tmp_path
    )
    assert done.returncode == EXIT_OK, done.stderr
    assert "wall.png: no face found; written upscaled, not swapped" in done.stderr
    assert "grey.mp4: no face found in any frame; written upscaled, not swapped" in done.stderr
    clear = cv2.imread(str(tmp_path / "out" / "clear.png"), cv2.IMREAD_UNCHANGED)
    assert clear.shape == (1024, 1024, 4)
    assert clear[:120, :120, 3].max() == 0 and clear[200:, 200:, 3].min() == 255
    assert read_image(tmp_path / "out" / "wall.png").shape == (240, 320, 3)
    with VideoReader(tmp_path / "out" / "clip.mp4") as reader:
        shapes = {p.image.shape for p in reader}
    assert shapes == {(480, 640, 3)}

    for extra, code, message in (
        (["--frame-enhancer-blend", "0.5"], EXIT_USAGE, "--frame-enhancer-blend is for"),
        (
            ["--frame-enhancer-model", model, "--max-pixels", "500000"],
            EXIT_ERROR,
            "astro.png: upscaled x2 it would be 1024 x 1024 (1.05 MP), over the 0.5 MP limit "
            "(--max-pixels)",
        ),
        (["--frame-enhancer-model", "nope.onnx"], EXIT_ERROR, "nope.onnx: model file not found"),
        (["--frame-enhancer-model", "grace.png"], EXIT_ERROR, "not a loadable ONNX model"),
    ):
        failed = _cli(
            "swap", "-s", "grace.png", "-t", "astro.png", "-o", "bad.png", *extra, cwd=tmp_path
        )
        assert failed.returncode == code, failed.stderr
        assert message in failed.stderr and "Traceback" not in failed.stderr
        assert not (tmp_path / "bad.png").exists()
