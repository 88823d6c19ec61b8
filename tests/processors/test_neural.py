"""The neural engine (NeuralSwapper): its alignment, model contracts, mask, fusion and
pixel boost, on tiny ONNX models with inswapper's and ArcFace's signatures built here
(tests/neural_models.py), and its place in the Python API, the video pipeline and
the command line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

pytest.importorskip("onnx")
from cli_runner import run_cli as _cli  # noqa: E402  (tests/ is on sys.path)
from neural_models import (  # noqa: E402  (tests/ is on sys.path)
    tiny_embedder,
    tiny_enhancer,
    tiny_swapper,
)
from onnx import TensorProto  # noqa: E402
from synthetic_hands import FakeHands, hand_on_cheek  # noqa: E402  (tests/ is on sys.path)

import faceweave as fw  # noqa: E402
from faceweave.core.facemodel import load_face_model  # noqa: E402
from faceweave.core.hands import hand_silhouette  # noqa: E402
from faceweave.errors import (  # noqa: E402
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    BackendError,
    InputError,
    NoFaceError,
    UsageError,
)
from faceweave.io.image import read_image, write_image  # noqa: E402
from faceweave.processors.neural import (  # noqa: E402
    ARCFACE_TEMPLATE,
    EnhancedSwapper,
    FaceEnhancer,
    NeuralSwapper,
    alignment,
)
from faceweave.types import Face  # noqa: E402


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("neural")
    same, _, _ = tiny_swapper(root / "same.onnx", tint=0.0)
    tinted, emap, project = tiny_swapper(root / "tint.onnx", tint=0.9)
    no_emap, _, _ = tiny_swapper(root / "no_emap.onnx", with_emap=False)
    return {
        "embedder": tiny_embedder(root / "arcface.onnx"),
        "small_embedder": tiny_embedder(root / "arcface256.onnx", dim=256),
        "same": same,
        "tint": tinted,
        "emap": emap,
        "project": project,
        "no_emap": no_emap,
        "root": root,
    }


def _swapper(models: dict, source: Face | list[Face], kind: str = "tint", **options: object):
    return NeuralSwapper(
        source, swapper_model=models[kind], embedder_model=models["embedder"], **options
    )


def _face_region(face: Face, shape: tuple[int, ...], shrink: float = 0.5) -> np.ndarray:
    """The mesh's face oval, eroded to its inner ``shrink`` (clear of the feathered edge)."""
    points = face.landmarks_478[:, :2]
    centre = points.mean(axis=0)
    oval = load_face_model().face_oval_polygon(centre + shrink * (points - centre))
    region = np.zeros(shape[:2], np.uint8)
    cv2.fillPoly(region, [np.round(oval).astype(np.int32)], 1)
    return region.astype(bool)


# --- alignment -------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [112, 128, 224, 256])
def test_alignment_takes_the_five_points_to_the_template(size: int) -> None:
    # A face's five points, turned 20 degrees, scaled and moved.
    angle = np.deg2rad(20)
    turn = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    points = (ARCFACE_TEMPLATE - 56) @ turn.T * 2.7 + [400, 300]
    matrix = alignment(points, size)
    placed = points @ matrix[:, :2].T + matrix[:, 2]
    if size % 112 == 0:
        expected = ARCFACE_TEMPLATE * size / 112
    else:  # inswapper's 128 px crop: the 112 px template scaled, 8/128 of it to the right
        expected = ARCFACE_TEMPLATE * size / 128 + [8 * size / 128, 0]
    np.testing.assert_allclose(placed, expected, atol=1e-6)


# --- the swap --------------------------------------------------------------------------------


def test_a_model_that_returns_its_input_gives_the_target_back(
    models: dict, astronaut: np.ndarray, analyser: fw.FaceAnalyser, grace_hopper_face: Face
) -> None:
    """Crop, model and paste-back line up: a model returning its crop changes a smooth
    frame by resampling only (a crop one pixel off would change it by far more)."""
    smooth = cv2.GaussianBlur(astronaut, (0, 0), 3)
    face = analyser.get_faces(smooth)[0]
    swapper = _swapper(models, grace_hopper_face, "same", color="none", blend="alpha")
    out = swapper.swap(smooth, face)
    inside = _face_region(face, smooth.shape, shrink=0.9)
    error = np.abs(out.astype(float) - smooth)[inside].mean()
    assert error < 0.6
    # The same frame one pixel off, as a misplaced crop would give back.
    shifted = np.roll(smooth, 1, axis=1)
    assert np.abs(shifted.astype(float) - smooth)[inside].mean() > 3 * error
    far = np.ones(smooth.shape[:2], bool)
    x0, y0, x1, y1 = (int(v) for v in face.bbox)
    far[max(0, y0 - 60) : y1 + 60, max(0, x0 - 60) : x1 + 60] = False
    assert np.array_equal(out[far], smooth[far])


def test_the_source_identity_reaches_the_model(
    models: dict, astronaut: np.ndarray, astronaut_face: Face, grace_hopper_face: Face
) -> None:
    """The model is given the source's unit embedding mapped by the file's embedding map,
    at unit length: the tint model paints the colour that latent gives."""
    swapper = _swapper(models, grace_hopper_face, color="none", blend="alpha")
    np.testing.assert_array_equal(swapper.model.emap, models["emap"])
    assert np.linalg.norm(swapper.source_embedding) == pytest.approx(1.0, abs=1e-5)
    latent = swapper.source_embedding @ models["emap"]
    latent /= np.linalg.norm(latent)
    rgb = 1 / (1 + np.exp(-2 * (latent @ models["project"])))
    out = swapper.swap(astronaut, astronaut_face)
    inside = _face_region(astronaut_face, astronaut.shape, shrink=0.6)
    inside &= _face_region(astronaut_face, astronaut.shape, shrink=1.0)  # no mouth: same oval
    painted = (out.astype(float) - 0.1 * astronaut)[inside].mean(axis=0)  # BGR
    np.testing.assert_allclose(painted, 0.9 * 255 * rgb[::-1], atol=4.0)
    # Another source, another identity, another colour.
    other = _swapper(models, astronaut_face, color="none", blend="alpha")
    assert np.abs(other.swap(astronaut, astronaut_face).astype(float) - out)[inside].mean() > 5


def test_several_photos_average_their_embeddings(
    models: dict, astronaut_face: Face, grace_hopper_face: Face
) -> None:
    one = _swapper(models, astronaut_face).source_embedding
    two = _swapper(models, grace_hopper_face).source_embedding
    both = _swapper(models, [astronaut_face, grace_hopper_face]).source_embedding
    np.testing.assert_allclose(both, (one + two) / np.linalg.norm(one + two), atol=1e-5)


def test_fusion_moves_from_the_target_to_the_source(
    models: dict, astronaut: np.ndarray, astronaut_face: Face, grace_hopper_face: Face
) -> None:
    swapper = _swapper(models, grace_hopper_face, color="none")
    assert np.array_equal(
        swapper.with_options(fusion=0.0).swap(astronaut, astronaut_face), astronaut
    )
    inside = _face_region(astronaut_face, astronaut.shape)
    full = swapper.swap(astronaut, astronaut_face).astype(float)
    changes = []
    for fusion in (0.05, 0.25, 0.5, 0.75):
        out = swapper.with_options(fusion=fusion).swap(astronaut, astronaut_face).astype(float)
        changes.append(np.abs(out - full)[inside].mean())
    assert all(a > b for a, b in zip(changes, changes[1:], strict=False)), changes
    # Between, the model is asked for the blend of both identities (unit embeddings).
    half = swapper.with_options(fusion=0.5)
    own = swapper.embedder.embed(astronaut, astronaut_face.landmarks_5)
    mixed = 0.5 * own + 0.5 * swapper.source_embedding
    expected = (mixed / np.linalg.norm(mixed)) @ models["emap"]
    np.testing.assert_allclose(
        half.latent_for(astronaut, astronaut_face)[0],
        expected / np.linalg.norm(expected),
        atol=1e-5,
    )


def test_the_target_mouth_opening_and_padding_stay_the_targets(
    models: dict, astronaut: np.ndarray, astronaut_face: Face, grace_hopper_face: Face
) -> None:
    """The astronaut smiles with her teeth showing: they stay hers; mask_padding gives
    the lower part of the face back."""
    swapper = _swapper(models, grace_hopper_face, color="none", blend="alpha")
    out = swapper.swap(astronaut, astronaut_face).astype(float)
    mouth = np.zeros(astronaut.shape[:2], np.uint8)
    ring = astronaut_face.landmarks_478[load_face_model().loops[2], :2]
    cv2.fillPoly(mouth, [np.round(ring).astype(np.int32)], 1)
    mouth = cv2.erode(mouth, np.ones((3, 3), np.uint8)).astype(bool)
    assert mouth.sum() > 50
    assert np.abs(out - astronaut)[mouth].mean() < 3
    assert np.abs(out - astronaut)[_face_region(astronaut_face, astronaut.shape)].mean() > 30
    cheeks_up = swapper.with_options(mask_padding=(0.0, 0.0, 0.6, 0.0))
    padded = cheeks_up.swap(astronaut, astronaut_face).astype(float)
    # The chin, a third of the way from the lower lip (mesh point 17) to its bottom (152;
    # the model's crop, aligned by the eyes and mouth corners, ends about there).
    lip, bottom = astronaut_face.landmarks_478[[17, 152], :2]
    x, y = (lip + (bottom - lip) / 3).astype(int)
    below = np.zeros(astronaut.shape[:2], bool)
    below[y - 5 : y + 5, x - 8 : x + 8] = True
    assert np.abs(out - astronaut).max(axis=-1)[below].mean() > 15
    assert np.abs(padded - astronaut)[below].max() == 0


def test_mask_lips_keeps_the_targets_lips(
    models: dict, grace_hopper: np.ndarray, grace_hopper_face: Face, astronaut_face: Face
) -> None:
    """With mask_lips Grace Hopper's lips stay hers; without it they are the model's."""
    from faceweave.processors.swap import OUTER_LIPS

    lips = np.zeros(grace_hopper.shape[:2], np.uint8)
    ring = grace_hopper_face.landmarks_478[list(OUTER_LIPS), :2]
    cv2.fillPoly(lips, [np.round(ring).astype(np.int32)], 1)
    lips = cv2.erode(lips, np.ones((3, 3), np.uint8)).astype(bool)
    assert lips.sum() > 300
    swapper = _swapper(models, astronaut_face, color="none", blend="alpha")
    swapped = swapper.swap(grace_hopper, grace_hopper_face).astype(float)
    kept = swapper.with_options(mask_lips=True).swap(grace_hopper, grace_hopper_face)
    kept = kept.astype(float)
    assert np.abs(swapped - grace_hopper)[lips].mean() > 20
    assert np.abs(kept - grace_hopper)[lips].mean() < 3
    face = _face_region(grace_hopper_face, grace_hopper.shape) & ~cv2.dilate(
        lips.astype(np.uint8), np.ones((25, 25), np.uint8)
    ).astype(bool)
    assert np.abs(kept - swapped)[face].max() <= 1  # the rest of the face as before


def test_pixel_boost_keeps_more_of_a_large_face(
    models: dict, astronaut: np.ndarray, analyser: fw.FaceAnalyser, grace_hopper_face: Face
) -> None:
    """At twice the size the astronaut's face is larger than the model's 128 px: through
    a model that returns its input, the boosted crops (2 x 2 interleaved runs) lose
    less of it than one run at 128 px."""
    large = cv2.resize(astronaut, None, fx=2, fy=2, interpolation=cv2.INTER_CUBIC)
    face = analyser.get_faces(large)[0]
    inside = _face_region(face, large.shape, shrink=0.9)
    errors = []
    for boost in (1, 2, 4):
        swapper = _swapper(models, grace_hopper_face, "same", color="none", pixel_boost=boost)
        errors.append(np.abs(swapper.swap(large, face).astype(float) - large)[inside].mean())
    assert errors[0] > 1.5 * errors[1] and errors[1] > 1.5 * errors[2], errors


def test_colour_match_takes_the_targets_skin_colour(
    models: dict, astronaut: np.ndarray, astronaut_face: Face, grace_hopper_face: Face
) -> None:
    inside = _face_region(astronaut_face, astronaut.shape, shrink=0.7)
    target_mean = astronaut[inside].mean(axis=0)
    gaps = {}
    for color in ("none", "rct", "lct"):
        out = _swapper(models, grace_hopper_face, color=color).swap(astronaut, astronaut_face)
        gaps[color] = np.abs(out[inside].mean(axis=0) - target_mean).max()
    assert gaps["none"] > 20
    assert gaps["rct"] < 8 and gaps["lct"] < 8, gaps


@pytest.mark.parametrize("turns", [1, 2, 3])
def test_a_face_turned_by_quarter_turns_is_aligned_upright(
    models: dict,
    astronaut: np.ndarray,
    analyser: fw.FaceAnalyser,
    grace_hopper_face: Face,
    turns: int,
) -> None:
    """``Face.landmarks_5`` come in the face's own order (its right eye first), not by
    image x, which mirrors them past a quarter turn and collapses the alignment: on
    her side and upside down the astronaut is aligned at her upright scale, a model
    returning its input gives her back, and a source photo gives its upright identity."""
    upright = analyser.get_faces(astronaut)[0]
    face = analyser.get_faces(np.ascontiguousarray(np.rot90(astronaut, turns)))[0]
    # Swapped on a smooth copy, which a model returning its input gives back closely.
    turned = np.ascontiguousarray(np.rot90(cv2.GaussianBlur(astronaut, (0, 0), 3), turns))
    scale = np.linalg.norm(alignment(face.landmarks_5, 128)[:, 0])
    assert scale == pytest.approx(
        np.linalg.norm(alignment(upright.landmarks_5, 128)[:, 0]), rel=0.1
    )
    same = _swapper(models, grace_hopper_face, "same", color="none", blend="alpha")
    inside = _face_region(face, turned.shape, shrink=0.9)
    assert np.abs(same.swap(turned, face).astype(float) - turned)[inside].mean() < 0.6
    tinted = _swapper(models, grace_hopper_face, color="none").swap(turned, face)
    assert np.abs(tinted.astype(float) - turned)[inside].mean() > 20
    as_source = _swapper(models, face).source_embedding
    assert float(as_source @ _swapper(models, upright).source_embedding) > 0.99


@pytest.mark.parametrize("feather", [0.2, 0.5])
def test_a_wide_feather_still_swaps_the_face(
    models: dict,
    astronaut: np.ndarray,
    astronaut_face: Face,
    grace_hopper_face: Face,
    feather: float,
) -> None:
    narrow = _swapper(models, grace_hopper_face, color="none", blend="alpha")
    wide = narrow.with_options(feather=feather)
    centre = _face_region(astronaut_face, astronaut.shape, shrink=0.3)
    for swapper in (narrow, wide):
        changed = np.abs(swapper.swap(astronaut, astronaut_face).astype(float) - astronaut)
        assert changed[centre].mean() > 30
    # Wider, the feather reaches further in: less of the oval's rim is swapped.
    rim = _face_region(astronaut_face, astronaut.shape, 0.95) & ~_face_region(
        astronaut_face, astronaut.shape, 0.75
    )
    changes = [
        np.abs(s.swap(astronaut, astronaut_face).astype(float) - astronaut)[rim].mean()
        for s in (narrow, wide)
    ]
    assert changes[1] < changes[0]


def test_a_face_filling_the_frame_comes_back_through_a_pass_through_model(
    models: dict, astronaut: np.ndarray, analyser: fw.FaceAnalyser, grace_hopper_face: Face
) -> None:
    """The crop reaches beyond the frame on every side: the frame is continued there,
    so no black border reaches the face's edge through any blend."""
    close = cv2.resize(cv2.GaussianBlur(astronaut, (0, 0), 2)[85:185, 172:278], None, fx=3, fy=3)
    face = analyser.get_faces(close)[0]
    assert face.bbox[1] < 0  # the forehead is cut by the frame's top
    for blend in ("alpha", "multiband", "poisson"):
        swapper = _swapper(models, grace_hopper_face, "same", color="none", blend=blend)
        change = swapper.swap(close, face).astype(float) - close
        border = np.concatenate([change[:2].ravel(), change[:, :2].ravel(), change[:, -2:].ravel()])
        assert np.abs(border).mean() < 1.0, blend
        assert np.abs(change).mean() < 1.0, blend


def test_the_blend_fades_out_before_the_crop_ends(
    models: dict, astronaut: np.ndarray, astronaut_face: Face, grace_hopper_face: Face
) -> None:
    """A multiband blend's wide band of low frequencies would stop at the aligned
    crop's square edge, a straight line across the neck; it fades out before it."""
    out = _swapper(models, grace_hopper_face, color="none").swap(astronaut, astronaut_face)
    inverse = cv2.invertAffineTransform(alignment(astronaut_face.landmarks_5, 128))
    edge = np.concatenate(
        [[(t, 1.0) for t in range(1, 127)], [(t, 126.0) for t in range(1, 127)]]
        + [[(1.0, t) for t in range(1, 127)], [(126.0, t) for t in range(1, 127)]]
    )
    x, y = np.round(edge @ inverse[:, :2].T + inverse[:, 2]).astype(int).T
    seen = (x >= 0) & (x < astronaut.shape[1]) & (y >= 0) & (y < astronaut.shape[0])
    assert seen.sum() > 300
    change = np.abs(out.astype(int) - astronaut)[y[seen], x[seen]]
    assert change.max() <= 2


# --- what it refuses -------------------------------------------------------------------------


def test_a_model_whose_output_is_not_finite_is_an_error(
    models: dict, astronaut: np.ndarray, astronaut_face: Face, grace_hopper_face: Face
) -> None:
    broken, _, _ = tiny_swapper(models["root"] / "nan.onnx", tint=float("nan"))
    swapper = NeuralSwapper(
        grace_hopper_face, swapper_model=broken, embedder_model=models["embedder"]
    )
    with pytest.raises(BackendError, match="output is not finite"):
        swapper.swap(astronaut, astronaut_face)


def test_a_model_with_its_weights_in_a_side_file_loads_from_any_folder(
    models: dict, grace_hopper_face: Face, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    model, emap, _ = tiny_swapper(folder / "external.onnx", tint=0.5, external=True)
    assert (folder / "external.onnx.data").is_file()
    monkeypatch.chdir(tmp_path)
    swapper = _swapper({**models, "external": model}, grace_hopper_face, "external")
    np.testing.assert_array_equal(swapper.model.emap, emap)


def test_the_embedded_engines_options_are_refused(models: dict, grace_hopper_face: Face) -> None:
    for option, value in (
        ("light", 1.0),
        ("shape", 0.0),
        ("detail", 0.0),
        ("creases", 0.0),
        ("gaze", "source"),
        ("mask_eyes", True),
        ("mask_glasses", False),
    ):
        with pytest.raises(UsageError, match=f"{option}: the embedded engine's"):
            _swapper(models, grace_hopper_face, **{option: value})
    with pytest.raises(UsageError, match="light"):
        _swapper(models, grace_hopper_face).with_options(light=0.0)


def test_model_files_with_other_signatures_are_one_line_errors(
    models: dict, grace_hopper_face: Face, tmp_path: Path
) -> None:
    cases = [
        ({"swapper_model": models["embedder"]}, "missing source, target"),
        ({"embedder_model": models["tint"]}, "not an embedding model"),
        ({"swapper_model": models["no_emap"]}, "no 512x512 embedding map"),
        ({"embedder_model": models["small_embedder"]}, "no 256x512 embedding map"),
        ({"swapper_model": tmp_path / "none.onnx"}, "model file not found"),
        (
            {"swapper_model": tiny_swapper(tmp_path / "out64.onnx", output_size=64)[0]},
            r"output \[1, 3, 64, 64\], expected \[1, 3, 128, 128\]",
        ),
    ]
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a model")
    cases.append(({"embedder_model": garbage}, "not a loadable ONNX model"))
    for change, message in cases:
        files = {"swapper_model": models["tint"], "embedder_model": models["embedder"], **change}
        with pytest.raises(InputError, match=message) as caught:
            NeuralSwapper(grace_hopper_face, **files)
        assert "\n" not in str(caught.value)
    # Both missing: the swap model is named, as the engine's settings name it.
    absent = {"swapper_model": tmp_path / "s.onnx", "embedder_model": tmp_path / "e.onnx"}
    with pytest.raises(InputError, match="s.onnx: model file not found"):
        NeuralSwapper(grace_hopper_face, **absent)


def test_bad_options_and_sources(models: dict, grace_hopper_face: Face) -> None:
    with pytest.raises(UsageError, match="colour mode 'sh'"):
        _swapper(models, grace_hopper_face, color="sh")
    with pytest.raises(UsageError, match="pixel_boost"):
        _swapper(models, grace_hopper_face, pixel_boost=5)
    with pytest.raises(UsageError, match="pixel_boost"):
        _swapper(models, grace_hopper_face).with_options(pixel_boost=True)
    with pytest.raises(UsageError, match="fusion"):
        _swapper(models, grace_hopper_face, fusion=2.0)
    with pytest.raises(NoFaceError):
        _swapper(models, [])
    with pytest.raises(InputError, match="carries no frame"):
        _swapper(models, Face(**{**grace_hopper_face.__dict__, "frame": None, "_cache": {}}))
    with pytest.raises(InputError, match="takes source faces"):
        _swapper(models, "grace.png")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="expected a Face or a list of Face"):
        _swapper(models, grace_hopper_face).swap(grace_hopper_face.frame, None)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="swapper_model is a .onnx file's path"):
        NeuralSwapper(grace_hopper_face, swapper_model=None, embedder_model=models["embedder"])  # type: ignore[arg-type]


# --- the face enhancer -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def enhancers(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("enhancers")
    return {
        "same": tiny_enhancer(root / "same.onnx"),
        "darker": tiny_enhancer(root / "darker.onnx", scale=0.5, shift=-0.5),
        "codeformer": tiny_enhancer(root / "codeformer.onnx", weight_input=True),
        "nan": tiny_enhancer(root / "nan.onnx", scale=float("nan")),
        "two_images": tiny_enhancer(root / "two.onnx", image_inputs=2),
        "half_weight": tiny_enhancer(
            root / "half.onnx", weight_input=True, weight_type=TensorProto.FLOAT16
        ),
        "int_weight": tiny_enhancer(
            root / "int.onnx", weight_input=True, weight_type=TensorProto.INT64
        ),
    }


def test_an_enhancer_that_returns_its_input_gives_the_frame_back(
    enhancers: dict, astronaut: np.ndarray, analyser: fw.FaceAnalyser
) -> None:
    """The face aligned to the FFHQ template at 512 px and pasted back lines up."""
    smooth = cv2.GaussianBlur(astronaut, (0, 0), 3)
    face = analyser.get_faces(smooth)[0]
    out = FaceEnhancer(enhancers["same"], blend=1.0).enhance(smooth, face)
    inside = _face_region(face, smooth.shape, shrink=0.9)
    assert np.abs(out.astype(float) - smooth)[inside].mean() < 0.6
    shifted = np.roll(smooth, 1, axis=1)
    assert np.abs(shifted.astype(float) - smooth)[inside].mean() > 1.5


def test_the_enhancers_blend_is_its_strength_and_only_the_face_changes(
    enhancers: dict, astronaut: np.ndarray, astronaut_face: Face
) -> None:
    inside = _face_region(astronaut_face, astronaut.shape, shrink=0.6)
    changes = {}
    for blend in (0.0, 0.5, 1.0):
        out = FaceEnhancer(enhancers["darker"], blend=blend).enhance(astronaut, astronaut_face)
        changes[blend] = (astronaut.astype(float) - out)[inside].mean()
        x0, y0, x1, y1 = (int(v) for v in astronaut_face.bbox)
        far = np.ones(astronaut.shape[:2], bool)
        far[max(0, y0 - 40) : y1 + 40, max(0, x0 - 40) : x1 + 40] = False
        assert np.array_equal(out[far], astronaut[far])
    # The model maps x to (x - 1) / 2 in -1..1: a pixel of v (0..255) to v / 2.
    expected = (astronaut.astype(float) / 2)[inside].mean()
    assert changes[0.0] == 0
    assert changes[1.0] == pytest.approx(expected, rel=0.05)
    assert changes[0.5] == pytest.approx(expected / 2, rel=0.05)
    # A strength that is no finite number is refused (NaN had gone into the pixels).
    enhancer = FaceEnhancer(enhancers["darker"])
    for strength in (float("nan"), float("inf"), "x", True):
        with pytest.raises(UsageError, match="strength"):
            enhancer.enhance(astronaut, astronaut_face, strength=strength)  # type: ignore[arg-type]


@pytest.mark.parametrize("model", ["codeformer", "half_weight"])
def test_codeformers_weight_input_is_fed(
    enhancers: dict, astronaut: np.ndarray, astronaut_face: Face, model: str
) -> None:
    """In the type its model declares (double, or float16 in a half-precision export);
    numpy numbers are numbers."""
    inside = _face_region(astronaut_face, astronaut.shape, shrink=0.6)
    full = FaceEnhancer(enhancers[model], blend=np.float32(1.0), weight=1)
    half = FaceEnhancer(enhancers[model], blend=1.0, weight=np.float64(0.5))
    same = full.enhance(astronaut, astronaut_face).astype(float)
    assert np.abs(same - astronaut)[inside].mean() < 3
    # output = input * 0.5: a face of v in -1..1 goes to v / 2, 127.5 + (v - 127.5) / 2.
    halved = half.enhance(astronaut, astronaut_face).astype(float)
    expected = (127.5 + (astronaut.astype(float) - 127.5) / 2)[inside].mean()
    assert halved[inside].mean() == pytest.approx(expected, abs=3)


def test_an_enhanced_swapper_restores_the_swapped_faces_of_either_engine(
    models: dict,
    enhancers: dict,
    astronaut: np.ndarray,
    astronaut_face: Face,
    grace_hopper_face: Face,
) -> None:
    enhancer = FaceEnhancer(enhancers["darker"])
    inside = _face_region(astronaut_face, astronaut.shape, shrink=0.6)
    for swapper in (fw.Swapper(grace_hopper_face), _swapper(models, grace_hopper_face)):
        plain = swapper.swap(astronaut, astronaut_face)
        enhanced = EnhancedSwapper(swapper, enhancer)
        out = enhanced.swap(astronaut, astronaut_face)
        np.testing.assert_array_equal(out, enhancer.enhance(plain, astronaut_face))
        assert (plain.astype(float) - out)[inside].mean() > 20
        assert enhanced.options == swapper.options
        assert np.array_equal(
            enhanced.with_options(fusion=0.0).swap(astronaut, astronaut_face), astronaut
        )
        # Faded in with the swap below FUSION_FADE_IN: at 0.05, a quarter of its blend.
        low = enhanced.with_options(fusion=0.05)
        faint = low.swap(astronaut, astronaut_face).astype(float)
        alone = low.swapper.swap(astronaut, astronaut_face).astype(float)
        # The darkening model halves a pixel: at blend 0.8 and a quarter strength, a
        # pixel v darkens by 0.25 * 0.8 * v / 2.
        darkening = (alone - faint)[inside].mean()
        assert darkening == pytest.approx(0.25 * 0.8 * alone[inside].mean() / 2, rel=0.1)
        # The restored face's mask follows a changed feather; other changes keep it.
        assert enhanced.with_options(feather=0.1).enhancer.feather == 0.1
        assert enhanced.with_options(fusion=0.5).enhancer is enhancer


def test_hands_stay_in_front_of_a_restored_face(
    models: dict,
    enhancers: dict,
    astronaut: np.ndarray,
    astronaut_face: Face,
    grace_hopper_face: Face,
) -> None:
    """The enhancer redraws its whole crop: with mask_hands the hands are laid back
    over its output too, for either engine."""
    hand = hand_on_cheek(astronaut_face)
    finder = FakeHands(lambda frame, boxes: [hand])
    silhouette = hand_silhouette(hand.landmarks, astronaut.shape[:2])
    inside = cv2.erode((silhouette == 1.0).astype(np.uint8), np.ones((7, 7), np.uint8)) > 0
    for swapper in (fw.Swapper(grace_hopper_face), _swapper(models, grace_hopper_face)):
        enhanced = EnhancedSwapper(swapper, FaceEnhancer(enhancers["darker"]))
        plain = enhanced.swap(astronaut, astronaut_face)
        assert np.abs(plain.astype(int) - astronaut)[inside].mean() > 20
        kept = enhanced.with_options(mask_hands=True)
        kept.swapper._hand_finder = finder
        out = kept.swap(astronaut, astronaut_face)
        np.testing.assert_array_equal(out[inside], astronaut[inside])


def test_enhancer_models_and_values_it_refuses(
    enhancers: dict, astronaut: np.ndarray, astronaut_face: Face, grace_hopper_face: Face
) -> None:
    with pytest.raises(InputError, match="not a face restoration model"):
        FaceEnhancer(enhancers["two_images"])
    with pytest.raises(InputError, match="weight is tensor.int64., expected"):
        FaceEnhancer(enhancers["int_weight"])
    with pytest.raises(InputError, match="a folder, not a model file"):
        FaceEnhancer(enhancers["same"].parent)
    enhancer = FaceEnhancer(enhancers["same"])
    with pytest.raises(InputError, match="expected a Face or a list of Face"):
        enhancer.enhance(astronaut, None)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="found in a 512x600 frame, not in this 512x512 one"):
        enhancer.enhance(astronaut, grace_hopper_face)
    with pytest.raises(InputError, match="swapper is a Swapper"):
        EnhancedSwapper(None, enhancer)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="enhancer is a FaceEnhancer"):
        EnhancedSwapper(fw.Swapper(grace_hopper_face), "gfpgan.onnx")  # type: ignore[arg-type]
    with pytest.raises(BackendError, match="not finite"):
        FaceEnhancer(enhancers["nan"]).enhance(astronaut, astronaut_face)
    for bad in ({"blend": 1.5}, {"blend": "a lot"}, {"weight": -1.0}):
        with pytest.raises(UsageError, match="enhancer"):
            FaceEnhancer(enhancers["same"], **bad)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="model file not found"):
        FaceEnhancer(enhancers["same"].parent / "none.onnx")


# --- the Python API, the video pipeline, the command line ------------------------------------


def test_face_predictor_runs_the_neural_engine(
    models: dict, astronaut: np.ndarray, grace_hopper: np.ndarray
) -> None:
    predictor = fw.FacePredictor(
        model="inswapper",
        swapper_model=models["tint"],
        embedder_model=models["embedder"],
        color="none",
    )
    out = predictor.swap(astronaut, grace_hopper)
    assert isinstance(predictor.swapper(grace_hopper), NeuralSwapper)
    x0, y0, x1, y1 = (int(v) for v in fw.get_one_face(astronaut).bbox)
    assert np.abs(out.astype(float) - astronaut)[y0:y1, x0:x1].mean() > 10
    with pytest.raises(UsageError, match="needs swapper_model and embedder_model"):
        fw.FacePredictor(model="inswapper")
    with pytest.raises(UsageError, match="enhancer_blend= is for enhancer_model="):
        fw.FacePredictor(enhancer_blend=0.5)
    with pytest.raises(UsageError, match="is for model='inswapper'"):
        fw.FacePredictor(swapper_model=models["tint"])
    with pytest.raises(UsageError, match="not available for the 'mesh' engine"):
        fw.FacePredictor(execution_provider="cuda")
    # An enhancer's model may run on another provider (here none is built in: the
    # runtime's refusal, not the embedded engine's).
    with pytest.raises(BackendError, match="not available in this onnxruntime build"):
        fw.FacePredictor(enhancer_model=models["embedder"], execution_provider="tensorrt")
    neural = {"swapper_model": models["tint"], "embedder_model": models["embedder"]}
    with pytest.raises(UsageError, match="light=: the mesh engine's option"):
        fw.FacePredictor(model="inswapper", light=0.2, **neural)
    with pytest.raises(UsageError, match="color='sh' is the mesh engine's"):
        fw.FacePredictor(model="inswapper", color="sh", **neural)
    with pytest.raises(InputError, match="swapper_model is a .onnx file's path, got int"):
        fw.FacePredictor(model="inswapper", swapper_model=5, embedder_model=models["embedder"])
    with pytest.raises(UsageError, match=r"enhancer blend must be within \[0, 1\]"):
        fw.FacePredictor(enhancer_model=models["embedder"], enhancer_blend=1.5)
    with pytest.raises(UsageError, match="enhancer weight must be a number"):
        fw.FacePredictor(enhancer_model=models["embedder"], enhancer_weight="high")
    with pytest.raises(BackendError, match="not available in this onnxruntime build"):
        fw.FacePredictor(
            model="inswapper",
            execution_provider="tensorrt",
            swapper_model=models["tint"],
            embedder_model=models["embedder"],
        )


def test_a_video_is_swapped_by_the_neural_engine(
    models: dict, astronaut: np.ndarray, grace_hopper_face: Face, tmp_path: Path
) -> None:
    from clips import make_clip  # tests/clips.py

    from faceweave.io.video import VideoReader
    from faceweave.pipeline.video_job import swap_video

    clip = make_clip(tmp_path / "in.mp4", astronaut, frames=8, size=(320, 240))
    out = tmp_path / "out.mp4"
    swapper = _swapper(models, grace_hopper_face, color="none")
    stats = swap_video([swapper], clip, out)
    assert stats.frames_swapped == 8

    def frames(path: Path) -> list[np.ndarray]:
        with VideoReader(path) as reader:
            return [packet.image for packet in reader]

    before, after = frames(clip), frames(out)
    assert len(after) == 8
    assert all(np.abs(a.astype(float) - b).mean() > 1 for a, b in zip(after, before, strict=True))


def test_live_swaps_with_the_neural_engine_at_the_fusion_the_keys_set(
    models: dict, astronaut: np.ndarray, grace_hopper_face: Face, tmp_path: Path
) -> None:
    from clips import make_clip  # tests/clips.py

    from faceweave.io.camera import FilePacer
    from faceweave.io.outputs import FileOutput
    from faceweave.pipeline.live import LiveControls, run_live

    clip = make_clip(tmp_path / "cam.mp4", astronaut, frames=10, size=(320, 240), audio=False)
    capture = FilePacer(clip, realtime=False)
    output = FileOutput(tmp_path / "rec.mp4", capture.width, capture.height, capture.fps)
    swapper = _swapper(models, grace_hopper_face, color="none")
    stats = run_live(
        capture, output, [swapper], controls=LiveControls(fusion=0.5), handle_sigint=False
    )
    assert stats.stopped_by == "end" and stats.frames_processed > 0
    assert swapper.options.fusion == 1.0  # the half fusion was a variant of it
    with av.open(str(clip)) as camera, av.open(str(tmp_path / "rec.mp4")) as recording:
        before = next(camera.decode(video=0)).to_ndarray(format="bgr24").astype(int)
        after = next(recording.decode(video=0)).to_ndarray(format="bgr24").astype(int)
    assert (np.abs(after - before).max(axis=2) > 40).sum() > 200  # the face, not codec noise


def test_a_model_that_fails_live_leaves_frames_unswapped_and_the_session_on(
    models: dict, astronaut: np.ndarray, grace_hopper_face: Face, tmp_path: Path, caplog
) -> None:
    """A live session whose model fails on its frames (NaN out) shows them as they came
    and goes on to the end, its recording kept; the warning is said once, not per
    frame."""
    from clips import make_clip  # tests/clips.py

    from faceweave.io.camera import FilePacer
    from faceweave.io.outputs import FileOutput
    from faceweave.pipeline.live import run_live

    broken, _, _ = tiny_swapper(tmp_path / "nan.onnx", tint=float("nan"))
    clip = make_clip(tmp_path / "cam.mp4", astronaut, frames=8, size=(320, 240), audio=False)
    capture = FilePacer(clip, realtime=False)
    output = FileOutput(tmp_path / "rec.mp4", capture.width, capture.height, capture.fps)
    swapper = NeuralSwapper(
        grace_hopper_face, swapper_model=broken, embedder_model=models["embedder"], color="none"
    )
    with caplog.at_level("WARNING", logger="faceweave"):
        stats = run_live(capture, output, [swapper], handle_sigint=False)
    shown = stats.frames_processed  # (a live session drops what it cannot keep up with)
    assert stats.stopped_by == "end" and shown > 0
    assert stats.frames_unswapped == shown and f"{shown} shown unswapped" in stats.summary()
    failures = [r for r in caplog.records if "live swap failed" in r.getMessage()]
    assert len(failures) == 1 and "not finite" in failures[0].getMessage()
    with av.open(str(clip)) as camera, av.open(str(tmp_path / "rec.mp4")) as recording:
        before = [f.to_ndarray(format="bgr24").astype(int) for f in camera.decode(video=0)]
        after = next(recording.decode(video=0)).to_ndarray(format="bgr24").astype(int)
    # As it came (the encoder's noise): a camera frame after its first (which warmed the
    # models up and is not shown); on a busy machine the session may drop the next ones.
    assert min(np.abs(after - frame).mean() for frame in before[1:]) < 3


def _error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [
        line
        for line in result.stderr.splitlines()
        if line.startswith("faceweave:") or "Traceback" in line
    ]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.slow
def test_command_line_swaps_with_the_neural_engine(
    models: dict, astronaut: np.ndarray, grace_hopper: np.ndarray, tmp_path: Path
) -> None:
    source, target = tmp_path / "grace.png", tmp_path / "astronaut.png"
    write_image(source, grace_hopper)
    write_image(target, astronaut)
    engine = [
        "--engine",
        "inswapper",
        "--swapper-model",
        models["tint"],
        "--embedder-model",
        models["embedder"],
    ]
    common = ["swap", "-s", source, "-t", target, "--no-watermark"]
    done = _cli(*common, "-o", "out.png", *engine, "--pixel-boost", "2", cwd=tmp_path)
    assert done.returncode == EXIT_OK, done.stderr
    out = read_image(tmp_path / "out.png")
    changed = np.abs(out.astype(int) - astronaut).max(axis=2) > 0
    ys, xs = np.nonzero(changed)
    assert changed.sum() > 2000
    assert 100 < xs.min() and xs.max() < 380 and ys.max() < 300  # around her face only

    usage = _cli(*common, "-o", "a.png", "--swapper-model", models["tint"], cwd=tmp_path)
    assert usage.returncode == EXIT_USAGE
    assert "add --engine inswapper" in _error_line(usage)
    usage = _cli(*common, "-o", "b.png", "--engine", "inswapper", cwd=tmp_path)
    assert usage.returncode == EXIT_USAGE
    assert "needs --swapper-model and --embedder-model" in _error_line(usage)
    usage = _cli(*common, "-o", "c.png", *engine, "--color", "sh", cwd=tmp_path)
    assert usage.returncode == EXIT_USAGE
    wrong = [*engine[:3], models["embedder"], *engine[4:]]
    failed = _cli(*common, "-o", "d.png", *wrong, cwd=tmp_path)
    assert failed.returncode == EXIT_ERROR
    assert "missing source, target" in _error_line(failed)
    usage = _cli(*common, "-o", "e.png", *engine, "--light", "1", "--mask-eyes", cwd=tmp_path)
    assert usage.returncode == EXIT_USAGE
    assert "--mask-eyes --light: the mesh engine's options" in _error_line(usage)
    broken, _, _ = tiny_swapper(tmp_path / "nan.onnx", tint=float("nan"))
    failed = _cli(*common, "-o", "f.png", *engine[:3], broken, *engine[4:], cwd=tmp_path)
    assert failed.returncode == EXIT_ERROR
    assert "output is not finite" in _error_line(failed)
    names = ("a.png", "b.png", "c.png", "d.png", "e.png", "f.png")
    assert not any((tmp_path / name).exists() for name in names)

    # A face enhancer on the embedded engine's swap: darker than the plain swap.
    darker = tiny_enhancer(tmp_path / "darker.onnx", scale=0.5, shift=-0.5)
    plain = _cli(*common, "-o", "mesh.png", cwd=tmp_path)
    restored = _cli(*common, "-o", "restored.png", "--enhancer-model", darker, cwd=tmp_path)
    assert plain.returncode == EXIT_OK and restored.returncode == EXIT_OK, restored.stderr
    lighter = read_image(tmp_path / "mesh.png").astype(float)
    darkened = read_image(tmp_path / "restored.png").astype(float)
    assert (lighter - darkened).max() > 40 and (darkened - lighter).max() <= 2
    usage = _cli(*common, "-o", "g.png", "--enhancer-blend", "0.5", cwd=tmp_path)
    assert usage.returncode == EXIT_USAGE
    assert "--enhancer-blend is for --enhancer-model" in _error_line(usage)
    usage = _cli(*common, "-o", "g.png", "--enhancer-weight", "0.5", cwd=tmp_path)
    assert usage.returncode == EXIT_USAGE
    assert "--enhancer-weight is for --enhancer-model" in _error_line(usage)
    # A video with the enhancer: the source photo's advice keeps its prefix.
    from clips import make_clip  # tests/clips.py

    short = make_clip(tmp_path / "short.mp4", astronaut, frames=5, size=(320, 240), audio=False)
    enhanced = _cli(*common[:4], short, "-o", "enh.mp4", "--enhancer-model", darker, cwd=tmp_path)
    assert enhanced.returncode == EXIT_OK, enhanced.stderr
    advice = [line for line in enhanced.stderr.splitlines() if "wears glasses" in line]
    assert advice and all(line.startswith("faceweave: warning: ") for line in advice), advice
    missing = _cli(*common, "-o", "h.png", "--enhancer-model", "none.onnx", cwd=tmp_path)
    assert missing.returncode == EXIT_ERROR and "model file not found" in _error_line(missing)

    from clips import make_clip  # tests/clips.py

    clip = make_clip(tmp_path / "cam.mp4", astronaut, frames=15, size=(320, 240), audio=False)
    live = _cli("live", "-s", source, "-i", clip, "-o", "live.mp4", *engine, "-q", cwd=tmp_path)
    assert live.returncode == EXIT_OK, live.stderr
    with av.open(str(tmp_path / "live.mp4")) as container:
        assert container.streams.video[0].frames > 0
    video = _cli(*common[:4], clip, "-o", "swapped.mp4", *engine, "-q", cwd=tmp_path)
    assert video.returncode == EXIT_OK, video.stderr
    with av.open(str(tmp_path / "swapped.mp4")) as container:
        assert container.streams.video[0].frames == 15
