"""Tests for faceweave.core.brows: brows found above a lagging mesh, and lifted there."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from faceweave.core.brows import LIFT_BIAS, LIFT_MIN, BrowLift, brow_columns, brow_lifts
from faceweave.core.facemodel import FaceModel, load_face_model
from faceweave.core.geometry import estimate_pose

SKIN, BROW, HAIR = 175, 55, 35


@pytest.fixture(scope="module")
def model() -> FaceModel:
    return load_face_model()


def _face(model: FaceModel, iod: float = 120.0) -> tuple[np.ndarray, float]:
    """A frontal mesh (pixels) with eyes ``iod`` apart, and that distance."""
    canonical = model.canonical.astype(np.float64)
    scale = iod / float(np.linalg.norm(canonical[263, :2] - canonical[33, :2]))
    return canonical * scale + np.array([320.0, 260.0, 0.0]), iod


def _drawn(
    model: FaceModel,
    points: np.ndarray,
    raise_by: tuple[float, float],
    iod: float,
    fringe_above: float | None = None,
) -> np.ndarray:
    """Skin with the brows drawn ``raise_by`` (inter-ocular distances) above the
    mesh's (the model's left, right); a dark fringe down to ``fringe_above`` above
    the mesh's brows' top, when given."""
    image = np.full((520, 640, 3), SKIN, np.uint8)
    for (upper, lower), lift in zip(brow_columns(model), raise_by, strict=True):
        outline = np.r_[points[upper, :2], points[lower, :2][::-1]] - np.array([0.0, lift * iod])
        cv2.fillPoly(image, [np.round(outline * 16).astype(np.int32)], (BROW,) * 3, cv2.LINE_AA, 4)
    if fringe_above is not None:
        ids = np.r_[model.regions["left_eyebrow"], model.regions["right_eyebrow"]]
        top = float(points[ids, 1].min()) - fringe_above * iod
        image[: int(top)] = HAIR
    return image


class TestBrowColumns:
    def test_five_columns_upper_above_lower(self, model: FaceModel) -> None:
        for upper, lower in brow_columns(model):
            assert len(upper) == len(lower) == 5
            assert np.all(model.canonical[upper, 1] < model.canonical[lower, 1])
            assert np.all(np.diff(model.canonical[upper, 0]) > 0)
        ids = {int(i) for pair in brow_columns(model) for part in pair for i in part}
        assert ids == set(model.regions["left_eyebrow"]) | set(model.regions["right_eyebrow"])


class TestBrowLifts:
    def test_brows_on_the_mesh_are_left(self, model: FaceModel) -> None:
        points, iod = _face(model)
        assert brow_lifts(_drawn(model, points, (0.0, 0.0), iod), points, model) == (0.0, 0.0)

    def test_raised_brows_are_found_above_the_mesh(self, model: FaceModel) -> None:
        points, iod = _face(model)
        lifts = brow_lifts(_drawn(model, points, (0.1, 0.1), iod), points, model)
        np.testing.assert_allclose(lifts, 0.1 + LIFT_BIAS, atol=0.011)

    def test_one_raised_brow(self, model: FaceModel) -> None:
        points, iod = _face(model)
        left, right = brow_lifts(_drawn(model, points, (0.0, 0.14), iod), points, model)
        assert left == 0.0
        assert right == pytest.approx(0.14 + LIFT_BIAS, abs=0.011)

    def test_a_small_step_is_no_lift(self, model: FaceModel) -> None:
        points, iod = _face(model)
        step = LIFT_MIN - 0.02
        assert brow_lifts(_drawn(model, points, (step, step), iod), points, model) == (0.0, 0.0)

    def test_a_fringe_above_the_brows_is_no_brow(self, model: FaceModel) -> None:
        # Darker than the brows, down to just above them: the strongest dark band up
        # the face, but with no skin above it.
        points, iod = _face(model)
        image = _drawn(model, points, (0.0, 0.0), iod, fringe_above=0.03)
        assert brow_lifts(image, points, model) == (0.0, 0.0)

    def test_small_or_turned_faces_are_left(self, model: FaceModel) -> None:
        points, iod = _face(model, iod=30.0)
        assert brow_lifts(_drawn(model, points, (0.1, 0.1), iod), points, model) == (0.0, 0.0)
        points, iod = _face(model)
        image = _drawn(model, points, (0.1, 0.1), iod)
        assert brow_lifts(image, points, model, yaw=40.0) == (0.0, 0.0)

    def test_grey_image_and_a_face_at_the_border(self, model: FaceModel) -> None:
        points, iod = _face(model)
        image = _drawn(model, points, (0.1, 0.1), iod)
        grey = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
        assert brow_lifts(grey, points, model) == brow_lifts(image, points, model)
        # Brows whose search reaches past the frame's top are left as they are.
        assert brow_lifts(image[175:], points - np.array([0.0, 175.0, 0.0]), model) == (0.0, 0.0)


class TestBrowLift:
    def test_moves_the_brows_and_keeps_eyes_nose_lips_outline(self, model: FaceModel) -> None:
        points, iod = _face(model)
        pose = estimate_pose(points, model.canonical)
        lifted = BrowLift(model).apply(points, pose, (0.1, 0.05))
        assert lifted.shape == (478, 3) and lifted.dtype == np.float32
        moved = lifted - points
        for name, lift in (("left_eyebrow", 0.1), ("right_eyebrow", 0.05)):
            ids = model.regions[name]
            np.testing.assert_allclose(moved[ids, 1], -lift * iod, atol=1e-3)
            np.testing.assert_allclose(moved[ids, 0], 0.0, atol=1e-3)
        kept = np.r_[
            model.regions["left_eye"],
            model.regions["right_eye"],
            model.regions["nose"],
            model.regions["lips"],
            model.regions["face_oval"],
            np.arange(468, 478),
        ]
        np.testing.assert_allclose(moved[kept], 0.0, atol=1e-3)
        # Below the eyes nothing moves; the forehead between brows and hairline
        # follows part of the way, never further than the brows.
        eye_y = model.canonical[model.regions["left_eye"], 1].mean()
        np.testing.assert_allclose(moved[model.canonical[:478, 1] > eye_y], 0.0, atol=1e-3)
        forehead = np.flatnonzero(
            model.canonical[:478, 1] < model.canonical[model.regions["left_eyebrow"], 1].min()
        )
        assert np.all(moved[forehead, 1] <= 1e-3)
        assert np.all(moved[forehead, 1] >= -0.1 * iod - 1e-3)
        assert np.any(moved[forehead, 1] < -0.01 * iod)

    def test_no_lift_is_the_mesh_itself(self, model: FaceModel) -> None:
        points, _ = _face(model)
        pose = estimate_pose(points, model.canonical)
        np.testing.assert_allclose(
            BrowLift(model).apply(points, pose, (0.0, 0.0)), points.astype(np.float32)
        )

    def test_follows_the_pose(self, model: FaceModel) -> None:
        # A rolled face's brows move up its own axis, not the image's.
        points, iod = _face(model)
        angle = np.deg2rad(30.0)
        turn = np.array(
            [[np.cos(angle), -np.sin(angle), 0], [np.sin(angle), np.cos(angle), 0], [0, 0, 1]]
        )
        centre = points.mean(0)
        rolled = (points - centre) @ turn.T + centre
        pose = estimate_pose(rolled, model.canonical)
        moved = BrowLift(model).apply(rolled, pose, (0.1, 0.1)) - rolled
        ids = model.regions["left_eyebrow"]
        up = turn @ np.array([0.0, -1.0, 0.0])
        np.testing.assert_allclose(moved[ids] @ up, 0.1 * iod, rtol=1e-3)
