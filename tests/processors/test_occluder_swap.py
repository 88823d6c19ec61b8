"""Swaps with a face occluder (FaceSwapping.with_occluder, ``--occluder-model``): what it
finds in front of a target face stays the target's and is left out of what the swap
measures on it, in both engines, under an enhancer and over several faces; and the
occluder through the engine settings, the Python API and the command line. The
occluder is a tiny ONNX model with XSeg's signature built here
(tests/neural_models.py): green is what covers the face."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

pytest.importorskip("onnx")
from cli_runner import run_cli as _cli  # noqa: E402  (tests/ is on sys.path)
from neural_models import (  # noqa: E402  (tests/ is on sys.path)
    changed,
    face_away,
    green_microphone,
    green_patch,
    tiny_embedder,
    tiny_enhancer,
    tiny_occluder,
    tiny_swapper,
)

import faceweave as fw  # noqa: E402
from faceweave.errors import EXIT_ERROR, EXIT_OK, InputError  # noqa: E402
from faceweave.io.image import read_image, write_image  # noqa: E402
from faceweave.processors.engines import EngineSettings, SwapEngine  # noqa: E402
from faceweave.types import Face  # noqa: E402


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("occluded")
    swapper, _, _ = tiny_swapper(root / "tint.onnx", tint=0.9)
    return {
        "occluder": tiny_occluder(root / "xseg.onnx"),
        "embedder": tiny_embedder(root / "arcface.onnx"),
        "swapper": swapper,
        "enhancer": tiny_enhancer(root / "darker.onnx", scale=0.5, shift=-0.5),
    }


@pytest.fixture(scope="module")
def occluder(files: dict[str, Path]) -> fw.FaceOccluder:
    return fw.FaceOccluder(files["occluder"])


def _regions(face: Face, disc: np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """The disc's inside (clear of its edge) and the face's skin away from it."""
    inner = cv2.erode(disc.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
    return inner, face_away(face, shape, disc)


def _check_kept(swapper, occluder, frame, bare_frame, disc, face) -> None:
    """The plain swap paints over the disc; with the occluder the disc stays to the grey
    level, and the rest of the face is swapped as on the frame without the disc."""
    inner, away = _regions(face, disc, frame.shape)
    plain = swapper.swap(frame, [face])
    kept = swapper.with_occluder(occluder).swap(frame, [face])
    bare = swapper.swap(bare_frame, [face])
    assert changed(plain, frame, inner).mean() > 60
    assert changed(kept, frame, inner).max() <= 1
    assert changed(kept, frame, away).mean() > 20  # still swapped
    assert np.median(changed(kept, bare, away)) <= 2


def test_the_mesh_engine_keeps_what_covers_the_face(
    occluder: fw.FaceOccluder, astronaut: np.ndarray, astronaut_face: Face, grace_hopper_face: Face
) -> None:
    frame, disc = green_patch(astronaut, astronaut_face)
    swapper = fw.Swapper(grace_hopper_face)
    _check_kept(swapper, occluder, frame, astronaut, disc, astronaut_face)


@pytest.mark.parametrize("color", ["lct", "none"])
def test_the_neural_engine_keeps_what_covers_the_face(
    files: dict[str, Path],
    occluder: fw.FaceOccluder,
    astronaut: np.ndarray,
    astronaut_face: Face,
    grace_hopper_face: Face,
    color: str,
) -> None:
    frame, disc = green_patch(astronaut, astronaut_face)
    swapper = fw.NeuralSwapper(
        grace_hopper_face,
        swapper_model=files["swapper"],
        embedder_model=files["embedder"],
        color=color,
    )
    _check_kept(swapper, occluder, frame, astronaut, disc, astronaut_face)


def test_an_enhancer_does_not_redraw_what_covers_the_face(
    files: dict[str, Path],
    occluder: fw.FaceOccluder,
    astronaut: np.ndarray,
    astronaut_face: Face,
    grace_hopper_face: Face,
) -> None:
    frame, disc = green_patch(astronaut, astronaut_face)
    enhanced = fw.EnhancedSwapper(fw.Swapper(grace_hopper_face), fw.FaceEnhancer(files["enhancer"]))
    _check_kept(enhanced, occluder, frame, astronaut, disc, astronaut_face)
    with_it = enhanced.with_occluder(occluder)
    assert isinstance(with_it, fw.EnhancedSwapper) and with_it.occluder is occluder
    assert enhanced.occluder is None
    with pytest.raises(InputError, match="an occlusion is an Occlusion or None"):
        with_it.swap(frame, [astronaut_face], occlusions=[frame])  # type: ignore[list-item]


def test_each_face_keeps_its_own_cover_and_its_neighbours_swap(
    occluder: fw.FaceOccluder, pair_frame: np.ndarray, pair_faces: list[Face], astronaut_face: Face
) -> None:
    first, second = pair_faces[:2]
    frame, disc = green_patch(pair_frame, first)
    swapper = fw.Swapper(astronaut_face).with_occluder(occluder)
    out = swapper.swap(frame, [first, second])
    inner, away_first = _regions(first, disc, frame.shape)
    _, away_second = _regions(second, np.zeros_like(disc), frame.shape)
    assert changed(out, frame, inner).max() <= 1
    assert changed(out, frame, away_first).mean() > 8  # swapped
    # The second face is swapped as without the occluder (it covers nothing of it).
    alone = fw.Swapper(astronaut_face).swap(frame, [second])
    assert changed(out, alone, away_second).max() <= 1


def test_with_occluder_makes_a_copy_that_keeps_it(
    occluder: fw.FaceOccluder, astronaut: np.ndarray, astronaut_face: Face, grace_hopper_face: Face
) -> None:
    swapper = fw.Swapper(grace_hopper_face)
    occluded = swapper.with_occluder(occluder)
    assert swapper.occluder is None and occluded.occluder is occluder
    assert occluded.model is swapper.model
    assert occluded.with_options(fusion=0.5).source is occluded.source  # shared
    assert occluded.with_options(fusion=0.5).occluder is occluder
    assert occluded.with_occluder(None).occluder is None
    with pytest.raises(InputError, match="occluder is a FaceOccluder"):
        swapper.with_occluder("xseg.onnx")  # type: ignore[arg-type]
    assert occluded.occlusions(astronaut, [astronaut_face])[0] is not None
    assert swapper.occlusions(astronaut, [astronaut_face]) == [None]
    with pytest.raises(InputError, match="2 occlusions given for 1 faces"):
        occluded.swap(astronaut, [astronaut_face], occlusions=[None, None])
    found = occluded.occlusions(astronaut, [astronaut_face])
    for bad, message in (
        (["x"], "an occlusion is an Occlusion or None, got str"),
        (5, "occlusions are a list of Occlusion"),
        (iter(found), "occlusions are a list of Occlusion"),
    ):
        for either in (occluded, occluded.with_options(fusion=0.0)):  # checked at fusion 0 too
            with pytest.raises(InputError, match=message):
                either.swap(astronaut, [astronaut_face], occlusions=bad)  # type: ignore[arg-type]
    # Given, they are used (without an occluder of its own too).
    assert np.array_equal(
        swapper.swap(astronaut, [astronaut_face], occlusions=found),
        occluded.swap(astronaut, [astronaut_face]),
    )


def test_what_covers_the_source_photos_face_is_hidden(
    occluder: fw.FaceOccluder,
    analyser: fw.FaceAnalyser,
    astronaut: np.ndarray,
    astronaut_face: Face,
    grace_hopper: np.ndarray,
    grace_hopper_face: Face,
) -> None:
    """A source photo with a microphone at its mouth's corner: without the occluder its
    head is carried onto the target as a blob by the mouth; with it, those texels are
    taken from the face's other side (and its light is fitted without them), and the
    swap is the swap of the photo without the microphone."""
    held = analyser.get_faces(green_microphone(astronaut, astronaut_face))[0]
    bare = fw.Swapper(astronaut_face).swap(grace_hopper, [grace_hopper_face])
    plain = fw.Swapper(held).swap(grace_hopper, [grace_hopper_face])
    given = fw.Swapper(held, occluder=occluder)
    kept = given.swap(grace_hopper, [grace_hopper_face])
    blob = np.abs(plain.astype(int) - bare).max(axis=2) > 30
    assert blob.sum() > 150  # the microphone's head, carried

    def redness(image: np.ndarray) -> float:  # Lab a's median over the blob (green: low)
        return float(np.median(cv2.cvtColor(image, cv2.COLOR_BGR2LAB)[blob][:, 1]))

    # Carried, green (a 15 under the bare swap's); kept out, the skin's (within 4).
    assert redness(plain) < redness(bare) - 10 and abs(redness(kept) - redness(bare)) <= 4
    off = [np.median(np.abs(o[blob].astype(int) - bare[blob]).max(axis=1)) for o in (plain, kept)]
    assert off[1] < 0.5 * off[0]  # (the other cheek's texels, in their own light)
    # with_occluder prepares the source again with it: the same swap.
    later = fw.Swapper(held).with_occluder(occluder)
    assert later.source is not given.source
    assert np.abs(later.swap(grace_hopper, [grace_hopper_face]).astype(int) - kept).max() <= 1
    assert later.with_occluder(occluder).source is later.source  # the same one: kept
    # At another texture size the source is prepared again with it too.
    assert np.array_equal(
        later.with_options(uv_size=256).source.valid,
        fw.Swapper(held, occluder=occluder, uv_size=256).source.valid,
    )
    # A prepared source is kept as it is.
    prepared = fw.Swapper(fw.prepare_source(held))
    assert prepared.with_occluder(occluder).source is prepared.source
    with pytest.raises(InputError, match="occluder is a FaceOccluder"):
        fw.Swapper(held, occluder="xseg.onnx")  # type: ignore[arg-type]


def test_fusion_0_runs_no_occluder(
    files: dict[str, Path], astronaut: np.ndarray, astronaut_face: Face, grace_hopper_face: Face
) -> None:
    class Counting(fw.FaceOccluder):
        calls = 0

        def occlusion(self, frame: np.ndarray, face: Face) -> fw.Occlusion:
            Counting.calls += 1
            return super().occlusion(frame, face)

    swapper = fw.Swapper(grace_hopper_face, fusion=0.0).with_occluder(Counting(files["occluder"]))
    assert Counting.calls == 1  # the source photo's, once
    assert np.array_equal(swapper.swap(astronaut, [astronaut_face]), astronaut)
    assert Counting.calls == 1
    swapper.with_options(fusion=0.5).swap(astronaut, [astronaut_face])
    assert Counting.calls == 2


def test_occlusions_found_once_serve_every_sources_swap(
    files: dict[str, Path],
    pair_frame: np.ndarray,
    pair_faces: list[Face],
    astronaut_face: Face,
    grace_hopper_face: Face,
) -> None:
    """swap_targets takes the targets' occlusions (as the command's --debug overlay
    finds them), each source's swapper its own faces' share, and finds none again."""
    from faceweave.pipeline.video_job import SwapTarget, swap_targets

    class Counting(fw.FaceOccluder):
        calls = 0

        def occlusion(self, frame: np.ndarray, face: Face) -> fw.Occlusion:
            Counting.calls += 1
            return super().occlusion(frame, face)

    occluder = Counting(files["occluder"])
    frame, _ = green_patch(pair_frame, pair_faces[0])
    swappers = [
        fw.Swapper(astronaut_face, occluder=occluder),
        fw.Swapper(grace_hopper_face, occluder=occluder),
    ]
    targets = [SwapTarget(pair_faces[0], 1, 0), SwapTarget(pair_faces[1], 0, 1)]
    found = swappers[0].occlusions(frame, [t.face for t in targets])
    Counting.calls = 0
    given = swap_targets(frame, targets, swappers, occlusions=found)
    assert Counting.calls == 0
    assert np.array_equal(given, swap_targets(frame, targets, swappers))
    assert Counting.calls == 2  # found by each swapper for its own face
    with pytest.raises(InputError, match="1 occlusions given for 2 faces"):
        swap_targets(frame, targets, swappers, occlusions=found[:1])


def test_the_engine_settings_load_the_occluder_once_for_every_swapper(
    files: dict[str, Path], tmp_path: Path, grace_hopper_face: Face, astronaut_face: Face
) -> None:
    settings = EngineSettings(occluder_model=str(files["occluder"]))  # a string path too
    assert settings.occluder_model == files["occluder"] and not settings.embedded_only
    engine = SwapEngine(settings)
    first, second = engine.swappers([[grace_hopper_face], [astronaut_face]])
    assert first.occluder is engine.occluder and second.occluder is engine.occluder
    enhanced = SwapEngine(
        EngineSettings(occluder_model=files["occluder"], enhancer_model=files["enhancer"])
    ).swapper(grace_hopper_face)
    assert isinstance(enhanced, fw.EnhancedSwapper) and enhanced.occluder is not None
    with pytest.raises(InputError, match="model file not found"):
        EngineSettings(occluder_model=tmp_path / "missing.onnx").validated()
    assert SwapEngine().swapper(grace_hopper_face).occluder is None


def test_the_python_api_takes_an_occluder_model(
    files: dict[str, Path], astronaut: np.ndarray, astronaut_face: Face, grace_hopper: np.ndarray
) -> None:
    frame, disc = green_patch(astronaut, astronaut_face)
    predictor = fw.FacePredictor(occluder_model=files["occluder"])
    out = predictor.swap(frame, grace_hopper, astronaut_face)
    inner, away = _regions(astronaut_face, disc, frame.shape)
    assert changed(out, frame, inner).max() <= 1
    assert changed(out, frame, away).mean() > 20
    # The embedded engine runs on the CPU: a GPU provider is refused unless a model is
    # given (occluder_model=None is none).
    with pytest.raises(fw.UsageError, match="not available for the 'mesh' engine"):
        fw.FacePredictor(execution_provider="cuda", occluder_model=None)


def test_a_video_keeps_what_covers_the_face_on_every_frame(
    occluder: fw.FaceOccluder,
    astronaut: np.ndarray,
    astronaut_face: Face,
    grace_hopper_face: Face,
    tmp_path: Path,
) -> None:
    from clips import make_clip  # tests/clips.py

    from faceweave.io.video import VideoReader
    from faceweave.pipeline.video_job import swap_video

    frame, _ = green_patch(astronaut, astronaut_face, radius=0.15)
    clip = make_clip(tmp_path / "in.mp4", frame, frames=6, size=(400, 400), audio=False)

    def green_pixels(path: Path) -> list[int]:
        with VideoReader(path) as reader:
            return [
                int(((p.image[..., 1] > 180) & (p.image[..., [0, 2]].max(axis=2) < 90)).sum())
                for p in reader
            ]

    before = green_pixels(clip)
    swap_video([fw.Swapper(grace_hopper_face).with_occluder(occluder)], clip, tmp_path / "o.mp4")
    swap_video([fw.Swapper(grace_hopper_face)], clip, tmp_path / "plain.mp4")
    kept, plain = green_pixels(tmp_path / "o.mp4"), green_pixels(tmp_path / "plain.mp4")
    assert len(kept) == len(before) == 6 and min(before) > 100
    assert all(k >= 0.9 * b for k, b in zip(kept, before, strict=True))
    assert all(p < 0.5 * b for p, b in zip(plain, before, strict=True))  # painted over


@pytest.mark.slow
def test_command_line_swaps_with_an_occluder(
    files: dict[str, Path],
    astronaut: np.ndarray,
    astronaut_face: Face,
    grace_hopper: np.ndarray,
    tmp_path: Path,
) -> None:
    frame, disc = green_patch(astronaut, astronaut_face)
    write_image(tmp_path / "grace.png", grace_hopper)
    write_image(tmp_path / "target.png", frame)
    common = ["swap", "-s", "grace.png", "-t", "target.png", "--no-watermark"]
    done = _cli(
        *common,
        *("-o", "out.png", "--occluder-model", files["occluder"], "--debug", "debug.png"),
        cwd=tmp_path,
    )
    assert done.returncode == EXIT_OK, done.stderr
    out = read_image(tmp_path / "out.png")
    inner, away = _regions(astronaut_face, disc, frame.shape)
    assert changed(out, frame, inner).max() <= 1
    assert changed(out, frame, away).mean() > 20
    # The overlay tints what the occluder covers orange: the green disc takes red.
    assert read_image(tmp_path / "debug.png")[inner][:, 2].mean() > 50 > frame[inner][:, 2].max()

    missing = _cli(*common, "-o", "a.png", "--occluder-model", "nope.onnx", cwd=tmp_path)
    assert missing.returncode == EXIT_ERROR
    assert "nope.onnx: model file not found" in missing.stderr and "Traceback" not in missing.stderr
    wrong = _cli(*common, "-o", "b.png", "--occluder-model", files["embedder"], cwd=tmp_path)
    assert wrong.returncode == EXIT_ERROR
    assert "(the mask)" in wrong.stderr and "Traceback" not in wrong.stderr
    assert not (tmp_path / "a.png").exists() and not (tmp_path / "b.png").exists()
