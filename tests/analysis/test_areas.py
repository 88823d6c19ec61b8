"""Face areas (FaceAreas, ``--mask-areas``): parts of each face swapped, from its mesh
with no model; the rest stays the target's, in both engines' front ends; a source
photo is looked at whole; and what a source photo is looked at with
(Occluder.for_source) for parsers and several occluders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import faceweave as fw
from faceweave.analysis.areas import AREAS, FaceAreas, checked_areas
from faceweave.errors import EXIT_OK, EXIT_USAGE, InputError, UsageError
from faceweave.processors.engines import EngineSettings, SwapEngine
from faceweave.types import Face

# Mesh points: the forehead's middle, an upper lid, below the lower lip, the upper lip,
# a cheek below the nose's line.
FOREHEAD, LID, CHIN, LIP, LOW_CHEEK = 151, 159, 18, 13, 212


def _seen_at(areas: FaceAreas, frame: np.ndarray, face: Face) -> dict[int, float]:
    occlusion = areas.occlusion(frame, face)
    h, w = frame.shape[:2]
    seen = occlusion.in_crop(np.array([[1.0, 0, 0], [0, 1.0, 0]]), (w, h))
    return {
        i: float(seen[int(round(face.landmarks_478[i, 1])), int(round(face.landmarks_478[i, 0]))])
        for i in (FOREHEAD, LID, CHIN, LIP, LOW_CHEEK)
    }


def test_checked_areas() -> None:
    assert checked_areas("mouth") == ("mouth",)
    assert checked_areas(["mouth", "upper-face", "mouth"]) == ("upper-face", "mouth")
    for junk, message in (
        (["nose"], "unknown face area 'nose'"),
        ([], "give one or more areas"),
        (b"mouth", "areas are a list of names"),
        (3, "areas are a list of names"),
    ):
        with pytest.raises(InputError, match=message):
            checked_areas(junk)
    with pytest.raises(UsageError, match=r"feather is a number in \[0, 0.06\]"):
        FaceAreas(["mouth"], feather=0.1)
    for junk in ([["mouth"]], [{"a": 1}]):  # unhashable names: one line, not a TypeError
        with pytest.raises(InputError, match="unknown face area"):
            checked_areas(junk)
    with pytest.raises(InputError, match="model is a FaceModel, got str"):
        FaceAreas(["mouth"], model="x")  # type: ignore[arg-type]


def test_each_area_keeps_its_own_part_of_the_face(
    astronaut: np.ndarray, astronaut_face: Face
) -> None:
    upper = _seen_at(FaceAreas(["upper-face"]), astronaut, astronaut_face)
    assert upper[FOREHEAD] > 0.95 and upper[LID] > 0.95
    assert upper[CHIN] < 0.05 and upper[LIP] < 0.05 and upper[LOW_CHEEK] < 0.05
    lower = _seen_at(FaceAreas(["lower-face"]), astronaut, astronaut_face)
    assert lower[FOREHEAD] < 0.05 and lower[LID] < 0.05
    assert lower[CHIN] > 0.95 and lower[LIP] > 0.95 and lower[LOW_CHEEK] > 0.95
    mouth = _seen_at(FaceAreas(["mouth"]), astronaut, astronaut_face)
    assert mouth[LIP] > 0.95 and max(mouth[FOREHEAD], mouth[LID], mouth[LOW_CHEEK]) < 0.05
    every = FaceAreas(list(AREAS)).occlusion(astronaut, astronaut_face)
    # All three are the whole face, to its outline (the blur is normalised by the face's).
    assert every.cover(astronaut_face, astronaut.shape) is None or (
        every.cover(astronaut_face, astronaut.shape)[1].max() < 0.02  # type: ignore[index]
    )


def _face_part(face: Face, shape: tuple[int, ...], points: list[int], radius: int) -> np.ndarray:
    import cv2

    area = np.zeros(shape[:2], np.uint8)
    for i in points:
        centre = tuple(int(v) for v in face.landmarks_478[i, :2])
        cv2.circle(area, centre, radius, 1, -1)
    return area > 0


def test_a_swap_changes_only_the_areas_asked_for(
    astronaut: np.ndarray, astronaut_face: Face, grace_hopper_face: Face
) -> None:
    eyes = _face_part(astronaut_face, astronaut.shape, [159, 386, 151], 8)
    chin = _face_part(astronaut_face, astronaut.shape, [18, 200, 199], 6)

    def moved(out: np.ndarray, where: np.ndarray) -> float:
        return float(np.abs(out[where].astype(int) - astronaut[where]).max(axis=1).mean())

    swapper = fw.Swapper(grace_hopper_face)
    full = swapper.swap(astronaut, [astronaut_face])
    assert moved(full, eyes) > 15 and moved(full, chin) > 5
    lower = swapper.with_occluder(FaceAreas(["lower-face"])).swap(astronaut, [astronaut_face])
    assert moved(lower, eyes) <= 1 and moved(lower, chin) > 0.6 * moved(full, chin)
    upper = swapper.with_occluder(FaceAreas(["upper-face"])).swap(astronaut, [astronaut_face])
    assert moved(upper, chin) <= 1 and moved(upper, eyes) > 0.6 * moved(full, eyes)


def test_a_source_photo_is_looked_at_whole(
    tmp_path: Path, astronaut: np.ndarray, grace_hopper_face: Face
) -> None:
    pytest.importorskip("onnx")
    from neural_models import tiny_parser  # tests/ is on sys.path

    areas = FaceAreas(["mouth"])
    assert areas.for_source() is None
    plain = fw.Swapper(grace_hopper_face)
    given = fw.Swapper(grace_hopper_face, occluder=areas)
    assert np.array_equal(given.source.valid, plain.source.valid)
    # Nothing to look at on the photo: with_occluder keeps the source as prepared.
    assert plain.with_occluder(areas).source is plain.source
    parser = fw.FaceParser(tiny_parser(tmp_path / "p.onnx", size=128), regions=["nose"])
    on_photo = parser.for_source()
    assert set(on_photo.regions) == {"nose", *fw.FaceParser(parser.model.path).regions}
    with_glasses = parser.with_regions(["all"])
    assert with_glasses.for_source() is with_glasses
    assert fw.Occluders([areas, with_glasses]).for_source() is with_glasses
    assert fw.Occluders([areas]).for_source() is None
    both = fw.Occluders([with_glasses, fw.FaceAreas(["mouth"])])
    assert fw.Occluders([with_glasses]).for_source() is not None
    assert both.for_source() is with_glasses


def test_the_engine_settings_the_api_and_the_command_line_take_areas(
    tmp_path: Path, astronaut: np.ndarray, astronaut_face: Face, grace_hopper: np.ndarray
) -> None:
    from cli_runner import run_cli  # tests/ is on sys.path

    from faceweave.io.image import read_image, write_image

    settings = EngineSettings(mask_areas=["mouth", "upper-face"])
    # No model file (a GPU provider would do nothing), but no plain engine either: a
    # video's and a live session's swappers are built with the areas.
    assert settings.mask_areas == ("upper-face", "mouth") and settings.embedded_only
    assert not settings.plain and EngineSettings().plain
    engine = SwapEngine(settings)
    assert isinstance(engine.occluder, FaceAreas) and engine.occluder.areas == settings.mask_areas
    assert EngineSettings(mask_areas=None).mask_areas == () == EngineSettings().mask_areas
    assert SwapEngine().occluder is None
    with pytest.raises(UsageError, match="unknown face area 'nose'"):
        EngineSettings(mask_areas=["nose"]).validated()
    eyes = _face_part(astronaut_face, astronaut.shape, [159, 386], 8)
    out = fw.FacePredictor(mask_areas=["lower-face"]).swap(astronaut, grace_hopper, astronaut_face)
    assert np.abs(out[eyes].astype(int) - astronaut[eyes]).max() <= 1

    write_image(tmp_path / "grace.png", grace_hopper)
    write_image(tmp_path / "astro.png", astronaut)
    common = ["swap", "-s", "grace.png", "-t", "astro.png", "--no-watermark"]
    done = run_cli(*common, "-o", "out.png", "--mask-areas", "lower-face", cwd=tmp_path)
    assert done.returncode == EXIT_OK, done.stderr
    kept = read_image(tmp_path / "out.png")
    assert np.abs(kept[eyes].astype(int) - astronaut[eyes]).max() <= 1
    bad = run_cli(*common, "-o", "bad.png", "--mask-areas", "nose", cwd=tmp_path)
    assert bad.returncode == EXIT_USAGE and "invalid choice: 'nose'" in bad.stderr
    assert not (tmp_path / "bad.png").exists()


@pytest.mark.slow
def test_a_video_and_its_frames_take_the_areas(
    tmp_path: Path, astronaut: np.ndarray, astronaut_face: Face, grace_hopper: np.ndarray
) -> None:
    """A video target (its sources as faces on the plain engine) swaps only the parts."""
    from cli_runner import run_cli
    from clips import make_clip  # tests/clips.py

    from faceweave.io.image import write_image
    from faceweave.io.video import VideoReader

    make_clip(tmp_path / "in.mp4", astronaut, frames=3, size=(512, 512), audio=False)
    write_image(tmp_path / "grace.png", grace_hopper)
    common = ["swap", "-s", "grace.png", "-t", "in.mp4", "--no-watermark"]
    for name, extra in (("full.mp4", []), ("lower.mp4", ["--mask-areas", "lower-face"])):
        done = run_cli(*common, "-o", name, *extra, cwd=tmp_path)
        assert done.returncode == EXIT_OK, done.stderr
    eyes = _face_part(astronaut_face, astronaut.shape, [159, 386], 8)

    def moved(name: str) -> list[float]:
        with VideoReader(tmp_path / name) as out, VideoReader(tmp_path / "in.mp4") as given:
            return [
                float(np.abs(a.image[eyes].astype(int) - b.image[eyes]).mean())
                for a, b in zip(out, given, strict=True)
            ]

    full, lower = moved("full.mp4"), moved("lower.mp4")
    # (The lower face only: the eyes move by the encoder's noise, about 3.)
    assert min(full) > 20 and max(lower) < 5, (full, lower)
