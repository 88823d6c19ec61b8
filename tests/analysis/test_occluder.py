"""The face occluder (FaceOccluder): its model contract, its pre- and post-processing and
the occlusion it gives, on tiny ONNX models with XSeg's signature built here
(tests/neural_models.py: green is what covers the face)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

pytest.importorskip("onnx")
from neural_models import (  # noqa: E402  (tests/ is on sys.path)
    OCCLUDER_GREEN,
    green_patch,
    tiny_occluder,
)
from onnx import TensorProto  # noqa: E402

from faceweave.analysis.occluder import FaceOccluder, Occlusion, lay_back  # noqa: E402
from faceweave.core.align import alignment  # noqa: E402
from faceweave.errors import BackendError, InputError  # noqa: E402
from faceweave.types import Face  # noqa: E402


@pytest.fixture(scope="module")
def occluder_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_occluder(tmp_path_factory.mktemp("occluder") / "xseg.onnx")


@pytest.mark.parametrize(
    ("options", "size", "last"),
    [
        ({}, 256, True),
        ({"channels_last": False}, 256, False),
        ({"size": 192}, 192, True),
        ({"size": "side"}, 256, True),  # left open in the file: XSeg's 256
        ({"output": "flat"}, 256, True),
        ({"channels_last": False, "output": "flat"}, 256, False),
        ({"input_type": TensorProto.FLOAT16}, 256, True),
        ({"size": "side", "output_side": 128}, 128, True),  # the output's side, then
    ],
)
def test_occluder_reads_its_models_layout(
    tmp_path: Path, options: dict, size: int, last: bool
) -> None:
    occluder = FaceOccluder(tiny_occluder(tmp_path / "m.onnx", **options))
    assert (occluder.size, occluder.channels_last) == (size, last)
    crop = np.full((size, size, 3), (90, 130, 200), np.uint8)  # skin-like: seen
    crop[: size // 4] = OCCLUDER_GREEN  # covered
    raw = occluder.run(crop)
    assert raw.shape == (size, size) and raw.dtype == np.float32
    assert raw[: size // 4].max() == pytest.approx(0.0, abs=1e-3)
    assert raw[size // 4 :].min() == pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"output": "rgb"}, "expected [1, 256, 256, 1], [1, 1, 256, 256] or [1, 256, 256]"),
        ({"input_type": TensorProto.UINT8}, "expected float32 or float16"),
        ({"size": 4096}, "is over 2048 px a side: not a face occluder"),
        ({"size": "side", "output_side": 96, "output": "rgb"}, "expected [1, 96, 96, 1]"),
    ],
)
def test_occluder_refuses_another_signature(tmp_path: Path, options: dict, message: str) -> None:
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        FaceOccluder(tiny_occluder(tmp_path / "m.onnx", **options))


def test_occluder_refuses_other_models_and_files(tmp_path: Path) -> None:
    from neural_models import tiny_embedder, tiny_swapper

    with pytest.raises(InputError, match=r"output \[1, 512\], expected \[1, 112, 112, 1\]"):
        # One image input of the right layout, but an embedding out: not a mask.
        FaceOccluder(tiny_embedder(tmp_path / "arcface.onnx"))
    swapper, _, _ = tiny_swapper(tmp_path / "swap.onnx")
    with pytest.raises(InputError, match="expected one image input and one output"):
        FaceOccluder(swapper)
    with pytest.raises(InputError, match="model file not found"):
        FaceOccluder(tmp_path / "missing.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    with pytest.raises(InputError, match="not a loadable ONNX model"):
        FaceOccluder(tmp_path / "junk.onnx")
    with pytest.raises(InputError, match="a .onnx file's path"):
        FaceOccluder(42)  # type: ignore[arg-type]


def test_a_model_that_gives_nan_is_a_backend_error(
    tmp_path: Path, astronaut: np.ndarray, astronaut_face: Face
) -> None:
    occluder = FaceOccluder(tiny_occluder(tmp_path / "nan.onnx", nan=True))
    with pytest.raises(BackendError, match=r"not finite \(NaN or infinity\)"):
        occluder.occlusion(astronaut, astronaut_face)
    with pytest.raises(InputError, match="expected a Face, got str"):
        occluder.occlusion(astronaut, "face")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="uint8"):
        occluder.occlusion(astronaut.astype(np.float32), astronaut_face)


def test_occlusion_finds_what_covers_the_face_in_frame_pixels(
    occluder_file: Path, astronaut: np.ndarray, astronaut_face: Face
) -> None:
    frame, disc = green_patch(astronaut, astronaut_face)
    occlusion = FaceOccluder(occluder_file).occlusion(frame, astronaut_face)
    assert occlusion.visible.shape == (256, 256)
    np.testing.assert_allclose(occlusion.matrix, alignment(astronaut_face.landmarks_5, 256))
    h, w = frame.shape[:2]
    seen = occlusion.in_crop(np.array([[1.0, 0, 0], [0, 1.0, 0]]), (w, h))
    inner = cv2.erode(disc.astype(np.uint8), np.ones((7, 7), np.uint8)) > 0
    assert seen[inner].max() < 0.05  # the disc, covered
    # The rest of the face seen: its skin away from the disc's edge.
    face = np.zeros((h, w), np.uint8)
    hull = cv2.convexHull(astronaut_face.landmarks_478[:, :2].astype(np.int32))
    cv2.fillConvexPoly(face, hull, 1)
    away = (face > 0) & (cv2.dilate(disc.astype(np.uint8), np.ones((15, 15), np.uint8)) == 0)
    assert np.median(seen[away]) > 0.99
    # Its edge: covered a little past the disc (the smoothing's half taken as covered),
    # not a soft mix inside it.
    ring = (cv2.dilate(disc.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0) & ~disc
    assert seen[ring].mean() < 0.5


def test_occlusion_maps_into_other_crops(
    occluder_file: Path, astronaut: np.ndarray, astronaut_face: Face
) -> None:
    frame, _ = green_patch(astronaut, astronaut_face)
    occlusion = FaceOccluder(occluder_file).occlusion(frame, astronaut_face)
    # Its own crop, through the frame, is itself.
    own = occlusion.in_crop(cv2.invertAffineTransform(occlusion.matrix), (256, 256))
    np.testing.assert_allclose(own[8:-8, 8:-8], occlusion.visible[8:-8, 8:-8], atol=0.02)
    # A crop at twice the scale: the same mask, twice the size.
    big = alignment(astronaut_face.landmarks_5, 512)
    twice = occlusion.in_crop(cv2.invertAffineTransform(big), (512, 512))
    small = cv2.resize(twice, (256, 256), interpolation=cv2.INTER_AREA)
    assert np.abs(small - occlusion.visible)[16:-16, 16:-16].mean() < 0.02
    # Past what the occluder saw: seen.
    far = occlusion.in_crop(np.array([[1.0, 0, 5000], [0, 1.0, 5000]]), (32, 32))
    assert far.min() == 1.0


def test_cover_keeps_to_the_faces_own_area(
    occluder_file: Path, astronaut: np.ndarray, astronaut_face: Face
) -> None:
    occluder = FaceOccluder(occluder_file)
    assert (
        occluder.occlusion(astronaut, astronaut_face).cover(astronaut_face, astronaut.shape) is None
    )
    frame, disc = green_patch(astronaut, astronaut_face)
    cover = occluder.occlusion(frame, astronaut_face).cover(astronaut_face, frame.shape)
    assert cover is not None
    (rows, cols), covered = cover
    assert covered.shape == (rows.stop - rows.start, cols.stop - cols.start, 1)
    full = np.zeros(frame.shape[:2], np.float32)
    full[rows, cols] = covered[:, :, 0]
    assert full[disc].mean() > 0.95
    # The background round the head is outside the face in the occluder's crop too, but
    # no part of this face to keep.
    assert (
        full[~cv2.dilate(disc.astype(np.uint8), np.ones((15, 15), np.uint8)).astype(bool)].max()
        == 0.0
    )
    # Green far from the face (the frame's corner) covers nothing of it.
    corner = astronaut.copy()
    corner[:60, :60] = OCCLUDER_GREEN
    assert occluder.occlusion(corner, astronaut_face).cover(astronaut_face, corner.shape) is None


def test_lay_back_mixes_by_the_cover() -> None:
    out = np.full((10, 10, 3), 200, np.uint8)
    before = np.zeros((4, 4, 3), np.uint8)
    covered = np.zeros((4, 4, 1), np.float32)
    covered[:2] = 1.0
    covered[2:] = 0.25
    lay_back(out, before, ((slice(3, 7), slice(2, 6)), covered))
    assert (out[3:5, 2:6] == 0).all() and (out[5:7, 2:6] == 150).all()
    assert (out[:3] == 200).all() and (out[:, :2] == 200).all() and (out[7:] == 200).all()


def test_an_occlusion_checks_what_it_is_made_of() -> None:
    matrix = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    made = Occlusion(np.ones((8, 8), np.float64), matrix)
    assert made.visible.dtype == np.float32 and made.visible.flags.c_contiguous
    for visible in (np.ones((8, 8, 3), np.float32), np.ones((8, 8), np.uint8), np.ones((1, 8))):
        with pytest.raises(InputError, match=r"an \(S, S\) float mask"):
            Occlusion(visible, matrix)
    for bad in (np.eye(3), np.full((2, 3), np.nan)):
        with pytest.raises(InputError, match=r"a finite \(2, 3\) affine"):
            Occlusion(np.ones((8, 8), np.float32), bad)


def test_occlusion_is_frozen(
    occluder_file: Path, astronaut: np.ndarray, astronaut_face: Face
) -> None:
    occlusion = FaceOccluder(occluder_file).occlusion(astronaut, astronaut_face)
    assert isinstance(occlusion, Occlusion)
    with pytest.raises(AttributeError):
        occlusion.matrix = np.eye(2, 3)  # type: ignore[misc]
