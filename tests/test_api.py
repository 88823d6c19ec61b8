"""Tests for faceweave.api: the FacePredictor / get_one_face convenience layer."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest
from portraits import in_small_source, small_source_photo  # tests/ is on sys.path

import faceweave as fw
from faceweave.errors import InputError, NoFaceError, UsageError
from faceweave.types import Face


@pytest.fixture(scope="module")
def predictor() -> fw.FacePredictor:
    return fw.FacePredictor(model="mesh", execution_provider="cpu")


@pytest.fixture(scope="module")
def reference_swap(
    predictor: fw.FacePredictor,
    grace_hopper: np.ndarray,
    grace_hopper_face: Face,
    astronaut: np.ndarray,
) -> np.ndarray:
    return predictor.swap(grace_hopper, astronaut, grace_hopper_face)


def test_swap_source_frame(reference_swap: np.ndarray, grace_hopper: np.ndarray) -> None:
    assert reference_swap.shape == grace_hopper.shape and reference_swap.dtype == np.uint8
    assert np.abs(reference_swap.astype(np.int16) - grace_hopper).mean() > 0.5


def test_swap_engine_builds_the_predictors_swapper(
    reference_swap: np.ndarray,
    grace_hopper: np.ndarray,
    grace_hopper_face: Face,
    astronaut_face: Face,
) -> None:
    """The engine layer under FacePredictor, public for apps that build many swappers
    on one set of models: its default is the embedded engine, as the predictor's."""
    engine = fw.SwapEngine()
    assert engine.name == "mesh" and engine.enhancer is None
    swapper = engine.swapper(astronaut_face, fw.SwapOptions())
    assert isinstance(swapper, fw.Swapper)
    np.testing.assert_array_equal(swapper.swap(grace_hopper, grace_hopper_face), reference_swap)
    with pytest.raises(UsageError, match="unknown engine 'simswap'"):
        fw.SwapEngine(fw.EngineSettings(engine="simswap"))
    with pytest.raises(UsageError, match="needs a swapper model and an embedder model"):
        fw.SwapEngine(fw.EngineSettings(engine="inswapper"))


@pytest.fixture
def astronaut_path(tmp_path: Path, astronaut: np.ndarray) -> Path:
    """The astronaut written to a PNG file."""
    path = tmp_path / "source.png"
    assert cv2.imwrite(str(path), astronaut)
    return path


def test_swap_source_path(
    predictor: fw.FacePredictor,
    grace_hopper: np.ndarray,
    grace_hopper_face: Face,
    reference_swap: np.ndarray,
    astronaut_path: Path,
) -> None:
    path = astronaut_path
    for source in (path, str(path)):
        out = predictor.swap(grace_hopper, source, grace_hopper_face)
        np.testing.assert_array_equal(out, reference_swap)


def test_swap_source_photos(
    predictor: fw.FacePredictor,
    grace_hopper: np.ndarray,
    grace_hopper_face: Face,
    reference_swap: np.ndarray,
    astronaut_path: Path,
) -> None:
    """A list of sources is several photos of one person; the same photo twice swaps
    as once, and the merged swapper is reused for the same list of paths."""
    path = astronaut_path
    out = predictor.swap(grace_hopper, [path, str(path)], grace_hopper_face)
    assert np.abs(out.astype(np.int16) - reference_swap).max() <= 1
    assert predictor.swapper([path, path]) is predictor.swapper([str(path), path])


def test_swap_source_face(
    predictor: fw.FacePredictor,
    grace_hopper: np.ndarray,
    grace_hopper_face: Face,
    astronaut_face: Face,
    reference_swap: np.ndarray,
) -> None:
    out = predictor.swap(grace_hopper, astronaut_face, grace_hopper_face)
    assert np.abs(out.astype(np.int16) - reference_swap).max() <= 2


def test_swap_default_target(
    predictor: fw.FacePredictor, grace_hopper: np.ndarray, astronaut_face: Face
) -> None:
    out = predictor.swap(grace_hopper, astronaut_face)
    assert out.shape == grace_hopper.shape
    assert np.abs(out.astype(np.int16) - grace_hopper).mean() > 0.5


def test_swapper_cached(predictor: fw.FacePredictor, astronaut_face: Face) -> None:
    assert predictor.swapper(astronaut_face) is predictor.swapper(astronaut_face)


def test_options_forwarded(
    grace_hopper: np.ndarray, grace_hopper_face: Face, astronaut_face: Face
) -> None:
    out = fw.FacePredictor(fusion=0.0).swap(grace_hopper, astronaut_face, grace_hopper_face)
    np.testing.assert_array_equal(out, grace_hopper)
    with pytest.raises(UsageError):
        fw.FacePredictor(fusion=3.0).swap(grace_hopper, astronaut_face, grace_hopper_face)


@pytest.mark.parametrize(
    "kwargs", [{"model": "inswapper_128"}, {"execution_provider": "cuda"}, {"model": ""}]
)
def test_unknown_model_or_provider(kwargs: dict) -> None:
    with pytest.raises(UsageError):
        fw.FacePredictor(**kwargs)


def test_get_one_face_grey_is_none() -> None:
    assert fw.get_one_face(np.full((200, 200, 3), 127, np.uint8)) is None
    assert fw.get_many_faces(np.full((200, 200, 3), 127, np.uint8)) == []


def test_get_many_faces_finds_what_the_command_finds(
    astronaut: np.ndarray, astronaut_face: Face
) -> None:
    """A face cut by the frame's side: found by ``faceweave swap``'s search of a still,
    which get_many_faces now shares (it had used the fast default one, and found none;
    group photos' small faces were missed alike)."""
    x0, _, x1, _ = astronaut_face.bbox
    cut = np.ascontiguousarray(astronaut[:, : int(x1 - 0.6 * (x1 - x0))])
    assert fw.get_one_face(cut) is None  # the fast search: none
    (face,) = fw.get_many_faces(cut)
    assert face.bbox[2] > cut.shape[1]  # its box reaches out of the frame
    assert fw.api.still_analyser().detect_tiles == 2  # small faces of groups too


def test_get_many_faces_takes_its_largest_up_to_max_faces(
    astronaut: np.ndarray, astronaut_face: Face
) -> None:
    """Nine faces: the default finds the 8 largest, as the command's --max-faces does
    (it had said "all faces" and stopped at 8 with no way to ask for more)."""
    x0, y0, x1, y1 = (int(v) for v in astronaut_face.bbox)
    side = int(1.8 * (x1 - x0))
    cx, cy = (x0 + x1) // 2, (y0 + y1) // 2
    crop = astronaut[cy - side // 2 : cy + side // 2, cx - side // 2 : cx + side // 2]
    tiles = [cv2.resize(crop, (200 - 6 * i, 200 - 6 * i)) for i in range(9)]
    grid = np.full((3 * 200, 3 * 200, 3), 90, np.uint8)
    for i, tile in enumerate(tiles):
        row, col = divmod(i, 3)
        grid[row * 200 : row * 200 + tile.shape[0], col * 200 : col * 200 + tile.shape[1]] = tile
    assert len(fw.get_many_faces(grid)) == 8
    nine = fw.get_many_faces(grid, max_faces=9)
    two = fw.get_many_faces(grid, max_faces=2)
    assert len(nine) == 9 and len(two) == 2
    # The largest first, whatever the count: one analyser serves every count (one
    # each had held about 200 MiB).
    assert [f.bbox for f in two] == [f.bbox for f in nine[:2]]
    assert fw.api.still_analyser.cache_info().currsize == 1
    for bad in (0, 2.5, True, "9"):
        with pytest.raises(UsageError, match="max_faces"):
            fw.get_many_faces(grid, max_faces=bad)  # type: ignore[arg-type]


def test_get_one_face(astronaut: np.ndarray) -> None:
    face = fw.get_one_face(astronaut)
    assert isinstance(face, Face)
    assert face.landmarks_478.shape == (478, 3)


def test_source_without_face(
    predictor: fw.FacePredictor, grace_hopper: np.ndarray, grace_hopper_face: Face
) -> None:
    grey = np.full((200, 200, 3), 127, np.uint8)
    with pytest.raises(NoFaceError):
        predictor.swap(grace_hopper, grey, grace_hopper_face)
    with pytest.raises(ValueError):
        predictor.source_face(grey)


def test_a_small_source_face_is_found_as_faceweave_swap_finds_it(
    predictor: fw.FacePredictor, astronaut: np.ndarray, grace_hopper: np.ndarray
) -> None:
    """A source photo whose face is small in a large frame (the astronaut's, 55 px
    wide in 1080p): BlazeFace sees the frame whole at a few pixels a face, and the
    fast default analyser finds none; the source is then looked for as `faceweave
    swap` looks (tiles), and found (a NoFaceError before)."""
    photo = small_source_photo(astronaut)
    assert not fw.api.default_analyser().get_faces(photo)  # premise
    assert in_small_source(predictor.source_face(photo).bbox)  # the portrait's face
    out = predictor.swap(grace_hopper, photo)
    assert out.shape == grace_hopper.shape and not np.array_equal(out, grace_hopper)


def test_target_without_face(predictor: fw.FacePredictor, astronaut_face: Face) -> None:
    with pytest.raises(NoFaceError):
        predictor.swap(np.full((200, 200, 3), 127, np.uint8), astronaut_face)


@pytest.mark.parametrize(
    "frame",
    [
        np.zeros((64, 64), np.uint8),  # grey
        np.zeros((64, 64, 4), np.uint8),  # BGRA
        np.zeros((64, 64, 3), np.float32),
        None,
    ],
)
def test_swapper_refuses_frames_it_cannot_use(
    frame: object, astronaut_face: Face, grace_hopper_face: Face
) -> None:
    with pytest.raises(InputError, match="uint8 \\(H, W, 3\\) BGR|numpy image"):
        fw.Swapper(astronaut_face).swap(frame, grace_hopper_face)  # type: ignore[arg-type]


@pytest.mark.parametrize("faces", [None, "face", [None]])
def test_swapper_refuses_what_is_not_a_face(
    faces: object, astronaut_face: Face, grace_hopper: np.ndarray
) -> None:
    with pytest.raises(InputError, match="expected a Face"):
        fw.Swapper(astronaut_face).swap(grace_hopper, faces)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="expected a Face"):
        fw.source_advice(faces)  # type: ignore[arg-type]


def test_swapper_takes_a_tuple_of_faces(
    astronaut_face: Face, grace_hopper: np.ndarray, grace_hopper_face: Face
) -> None:
    swapper = fw.Swapper(astronaut_face)
    together = swapper.swap(grace_hopper, (grace_hopper_face,))
    assert np.array_equal(together, swapper.swap(grace_hopper, grace_hopper_face))


@pytest.mark.parametrize(
    "options",
    [
        {"fusion": "0.5"},
        {"fusion": None},
        {"fusion": [0.5]},
        {"shape": None},
        {"mask_mouth": "no"},
        {"uv_size": "256"},
        {"color": 3},
        {"bogus": 1},
    ],
)
def test_swap_options_of_the_wrong_kind_are_usage_errors(
    options: dict, astronaut_face: Face
) -> None:
    with pytest.raises(UsageError):
        fw.Swapper(astronaut_face, **options)
    with pytest.raises(UsageError):
        fw.FacePredictor(**options)  # at once, not at the first swap


def test_numpy_numbers_are_numbers(astronaut_face: Face) -> None:
    swapper = fw.Swapper(astronaut_face, fusion=np.float32(0.5), mask_eyes=np.bool_(True))
    assert swapper.options.fusion == 0.5 and type(swapper.options.fusion) is float
    assert swapper.options.mask_eyes is True
    with pytest.raises(UsageError):
        swapper.with_options(fusion="x")


def test_what_is_not_a_source(grace_hopper: np.ndarray) -> None:
    with pytest.raises(InputError, match="FacePredictor takes image paths"):
        fw.Swapper("me.jpg")  # type: ignore[arg-type]
    with pytest.raises(NoFaceError):
        fw.Swapper(None)  # type: ignore[arg-type]


def test_a_face_from_another_frame_is_refused(
    astronaut_face: Face, grace_hopper: np.ndarray, grace_hopper_face: Face
) -> None:
    smaller = cv2.resize(grace_hopper, None, fx=0.5, fy=0.5)
    with pytest.raises(InputError, match="found in a 512x600 frame"):
        fw.Swapper(astronaut_face).swap(smaller, grace_hopper_face)


def test_which_source_photo_has_no_face(
    predictor: fw.FacePredictor, grace_hopper: np.ndarray, grace_hopper_face: Face
) -> None:
    grey = np.full((200, 200, 3), 127, np.uint8)
    with pytest.raises(NoFaceError, match="source photo 2"):
        predictor.swap(grace_hopper, [grace_hopper, grey], grace_hopper_face)
    with pytest.raises(NoFaceError):
        predictor.swap(grace_hopper, [], grace_hopper_face)


def test_face_selection_refuses_what_is_not_faces(astronaut_face: Face) -> None:
    with pytest.raises(InputError):
        fw.select_faces(None)  # type: ignore[arg-type]
    with pytest.raises(InputError):
        fw.select_faces([None])  # type: ignore[list-item]
    with pytest.raises(InputError):
        fw.select_faces([astronaut_face], "reference", reference="me.jpg")  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        fw.select_faces([astronaut_face], "reference", reference=astronaut_face, max_distance="1")  # type: ignore[arg-type]
    with pytest.raises(InputError):
        fw.face_distance(astronaut_face, None)  # type: ignore[arg-type]


def test_a_changed_source_is_another_source(
    predictor: fw.FacePredictor,
    grace_hopper: np.ndarray,
    grace_hopper_face: Face,
    astronaut: np.ndarray,
    reference_swap: np.ndarray,
    tmp_path: Path,
) -> None:
    """The swapper is reused only for the same source: a file written anew under the
    same name, or a frame buffer refilled with another photo (a camera loop's), is
    another source (both had kept swapping the first person)."""
    upload = tmp_path / "upload.png"
    cv2.imwrite(str(upload), grace_hopper)
    first = predictor.swap(grace_hopper, upload, grace_hopper_face)
    cv2.imwrite(str(upload), astronaut)
    os.utime(upload, ns=(1, 1))  # another modification time, whatever the clock's grain
    np.testing.assert_array_equal(
        predictor.swap(grace_hopper, upload, grace_hopper_face), reference_swap
    )
    assert np.abs(first.astype(np.int16) - reference_swap).max() > 20
    buffer = grace_hopper.copy()
    before = predictor.swapper(buffer)
    assert predictor.swapper(buffer) is before  # unchanged: reused
    buffer[:] = 0
    buffer[:512, :512] = astronaut
    assert predictor.swapper(buffer) is not before


def test_wrong_arguments_are_faceweave_errors(
    astronaut: np.ndarray, astronaut_face: Face, tmp_path: Path
) -> None:
    """What app builders pass by mistake is one of faceweave's errors with a line that
    says what is wrong, not an AttributeError, TypeError, cv2.error or LinAlgError from
    deep inside."""
    from faceweave.io import read_image
    from faceweave.pipeline import FaceTracker, swap_video

    tracker = FaceTracker(fw.FaceAnalyser(mode="video"))
    grey = np.zeros((64, 64), np.uint8)
    engine = fw.SwapEngine()
    cases: list[tuple[Callable[[], object], type[Exception], str]] = [
        (lambda: tracker.update(None, 0.0), InputError, "numpy image"),  # type: ignore[arg-type]
        (lambda: tracker.update(grey, 0.0), InputError, "uint8 \\(H, W, 3\\)"),
        (lambda: tracker.update(astronaut, float("nan")), InputError, "finite"),
        (lambda: tracker.update(astronaut, "0"), InputError, "number of seconds"),  # type: ignore[arg-type]
        (lambda: fw.SwapEngine("mesh"), UsageError, "EngineSettings"),  # type: ignore[arg-type]
        (lambda: engine.swapper(astronaut_face, {"fusion": 2}), UsageError, "fusion"),
        (lambda: engine.swapper(astronaut_face, {"fuzion": 1}), UsageError, "fuzion"),
        (lambda: engine.swapper(astronaut_face, 0.5), UsageError, "SwapOptions or a mapping"),  # type: ignore[arg-type]
        (lambda: fw.prepare_source(None), InputError, "source Face"),  # type: ignore[arg-type]
        (lambda: fw.merge_sources([astronaut_face]), InputError, "prepare_source"),  # type: ignore[list-item]
        (lambda: fw.order_faces(None, "large-small"), InputError, "list of Face"),  # type: ignore[arg-type]
        (lambda: fw.order_faces([1, 2], "large-small"), InputError, "list of Face"),  # type: ignore[list-item]
        (lambda: read_image(None), InputError, "str or a Path, got NoneType"),  # type: ignore[arg-type]
        (
            lambda: fw.Swapper(astronaut_face).swap(astronaut, [None]),  # type: ignore[list-item]
            InputError,
            "got a list with NoneType in it",
        ),
        (lambda: fw.FaceAnalyser(min_score="0.5"), UsageError, "min_score"),  # type: ignore[arg-type]
        (lambda: fw.FaceAnalyser(detect_tiles="2"), UsageError, "detect_tiles"),  # type: ignore[arg-type]
        (lambda: fw.FaceAnalyser(detect_tiles=0), UsageError, "detect_tiles"),
        (lambda: fw.FaceAnalyser(tile_most_px=10), UsageError, "tile_most_px"),
        (lambda: fw.FaceAnalyser(tile_most_px=480.5), UsageError, "tile_most_px"),  # type: ignore[arg-type]
        (lambda: fw.FaceAnalyser(sweep_tiles=1), UsageError, "sweep_tiles"),  # type: ignore[arg-type]
        (lambda: fw.FaceAnalyser(sweep_tiles=True, detect_tiles=2), UsageError, "mode='video'"),
        (lambda: fw.FaceAnalyser(sweep_tiles=True, mode="video"), UsageError, "detect_tiles"),
        (lambda: fw.FaceAnalyser(max_faces=True), UsageError, "max_faces"),
        (lambda: fw.FaceAnalyser(detector_angles=90), UsageError, "detector_angles"),  # type: ignore[arg-type]
        (lambda: fw.FaceAnalyser(detector="foo"), UsageError, "unknown detector 'foo'"),
        (lambda: fw.SwapOptions(uv_size=10**6).validated(), UsageError, "at most 2048"),
        (
            lambda: swap_video(astronaut_face, tmp_path / "in.mp4", tmp_path / "o.mp4", options=0),  # type: ignore[arg-type]
            UsageError,
            "SwapOptions or a mapping",
        ),
        (
            lambda: swap_video("me.jpg", tmp_path / "in.mp4", tmp_path / "o.mp4"),  # type: ignore[arg-type]
            InputError,
            "source faces",
        ),
    ]
    for call, kind, match in cases:
        with pytest.raises(kind, match=match):
            call()
    no_embedding = fw.FaceAnalyser(with_embedding=False).get_faces(astronaut)[0]
    with pytest.raises(InputError, match="with_embedding=False"):
        fw.face_distance(no_embedding, astronaut_face)


def test_swap_engine_and_swap_video_take_options_as_a_mapping_and_one_source(
    astronaut_face: Face, tmp_path: Path
) -> None:
    """``SwapEngine.swapper`` and ``swap_video`` take options as SwapOptions, a mapping
    of them (checked as Swapper's keywords) or None, and ``swap_video`` one source on
    its own as well as a list."""
    from faceweave.pipeline.video_job import build_swappers, source_list

    engine = fw.SwapEngine()
    assert engine.swapper(astronaut_face, {"fusion": 0.8}).options.fusion == 0.8
    assert engine.swapper(astronaut_face).options == fw.SwapOptions()
    assert build_swappers([astronaut_face], {"fusion": 0.5})[0].options.fusion == 0.5
    assert source_list(astronaut_face) == [astronaut_face]


def test_with_options_prepares_the_source_again_for_another_uv_size(
    astronaut_face: Face, grace_hopper_face: Face, caplog: pytest.LogCaptureFixture
) -> None:
    """A swapper made from a Face changes its uv_size by preparing the face again (it
    had said "the prepared source was built for another uv_size", of a source the
    user never prepared); a prepared source says at which size it was built."""
    swapper = fw.Swapper(astronaut_face)
    smaller = swapper.with_options(uv_size=256)
    assert smaller.source.albedo.shape[0] == 256
    # Also after another change first (the faces are carried along), and without the
    # source's advice logged again.
    chained = swapper.with_options(fusion=0.5).with_options(uv_size=320)
    assert chained.source.albedo.shape[0] == 320 and chained.options.fusion == 0.5
    assert chained.source.advice == swapper.source.advice
    grace = fw.Swapper(grace_hopper_face)  # her glasses: one line of advice, logged once
    assert grace.source.advice
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="faceweave"):
        again = grace.with_options(uv_size=256)
    assert again.source.advice == grace.source.advice and not caplog.records
    prepared = fw.prepare_source(astronaut_face, uv_size=256)
    with pytest.raises(UsageError, match="built at uv_size 256, not 384"):
        fw.Swapper(prepared)
