"""Tests for faceweave.core.geometry: similarity fits, Euler angles, pose spaces, normals."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from faceweave.core.facemodel import load_face_model
from faceweave.core.geometry import (
    estimate_pose,
    euler_from_rotation,
    from_pose_space,
    rotation_from_euler,
    to_pose_space,
    umeyama,
    vertex_normals,
)
from faceweave.types import Pose

NOSE_TIP = 1  # MediaPipe's nose tip; vertex 4 is the point just above it
YAWS = (-60.0, -35.0, 0.0, 20.0, 60.0)
PITCHES = (-25.0, 0.0, 30.0)
ROLLS = (-30.0, 0.0, 15.0)


def _posed(canonical: np.ndarray, yaw: float, pitch: float, roll: float) -> np.ndarray:
    rotation = rotation_from_euler(yaw, pitch, roll)
    return 173.0 * canonical.astype(np.float64) @ rotation.T + np.array([311.0, 207.0, -40.0])


def _angle_error(a: float, b: float) -> float:
    return abs((a - b + 180.0) % 360.0 - 180.0)


class TestUmeyama:
    def test_smoke_shapes_dtypes(self) -> None:
        rng = np.random.default_rng(0)
        src = rng.normal(size=(20, 3)).astype(np.float32)
        rotation, scale, translation = umeyama(src, src)
        assert rotation.shape == (3, 3) and rotation.dtype == np.float64
        assert translation.shape == (3,) and translation.dtype == np.float64
        assert isinstance(scale, float)

    @pytest.mark.parametrize("dim", [2, 3])
    def test_exact_similarity_recovered(self, dim: int) -> None:
        rng = np.random.default_rng(dim)
        src = rng.normal(size=(40, dim))
        q, _ = np.linalg.qr(rng.normal(size=(dim, dim)))
        if np.linalg.det(q) < 0:
            q[:, 0] *= -1
        dst = 2.5 * src @ q.T + rng.normal(size=dim)
        rotation, scale, translation = umeyama(src, dst)
        np.testing.assert_allclose(rotation, q, atol=1e-10)
        assert scale == pytest.approx(2.5, abs=1e-10)
        np.testing.assert_allclose(scale * src @ rotation.T + translation, dst, atol=1e-9)

    def test_reflection_gives_proper_rotation(self) -> None:
        rng = np.random.default_rng(3)
        src = rng.normal(size=(30, 3))
        dst = src * np.array([-1.0, 1.0, 1.0])  # a mirror image: no rotation reproduces it
        rotation, _, _ = umeyama(src, dst)
        assert np.linalg.det(rotation) == pytest.approx(1.0, abs=1e-9)
        np.testing.assert_allclose(rotation @ rotation.T, np.eye(3), atol=1e-10)

    def test_weights_ignore_zero_weighted_outliers(self) -> None:
        rng = np.random.default_rng(4)
        src = rng.normal(size=(30, 3))
        rotation_true = rotation_from_euler(10, -20, 30)
        dst = 1.7 * src @ rotation_true.T + 5.0
        dst[:5] += 100.0  # gross outliers
        weights = np.ones(30)
        weights[:5] = 0.0
        rotation, scale, translation = umeyama(src, dst, weights=weights)
        np.testing.assert_allclose(rotation, rotation_true, atol=1e-9)
        assert scale == pytest.approx(1.7)
        np.testing.assert_allclose(translation, 5.0, atol=1e-8)


class TestEuler:
    @pytest.mark.parametrize(
        ("yaw", "pitch", "roll"),
        [(0, 0, 0), (30, -10, 5), (-60, 25, -40), (85, 60, 170), (-20, -80, -170)],
    )
    def test_round_trip(self, yaw: float, pitch: float, roll: float) -> None:
        assert euler_from_rotation(rotation_from_euler(yaw, pitch, roll)) == pytest.approx(
            (yaw, pitch, roll), abs=1e-9
        )

    def test_rotation_is_proper(self) -> None:
        rotation = rotation_from_euler(33, -12, 71)
        assert rotation.shape == (3, 3) and rotation.dtype == np.float64
        np.testing.assert_allclose(rotation @ rotation.T, np.eye(3), atol=1e-12)
        assert np.linalg.det(rotation) == pytest.approx(1.0)

    def test_returns_python_floats(self) -> None:
        assert all(type(v) is float for v in euler_from_rotation(np.eye(3)))

    def test_pitch_positive_looks_down(self) -> None:
        nose = np.array([0.0, 0.0, -1.0])  # z away from the camera: the nose points at it
        assert (rotation_from_euler(0, 20, 0) @ nose)[1] > 0  # y down

    def test_roll_positive_is_clockwise_on_screen(self) -> None:
        right = np.array([1.0, 0.0, 0.0])
        assert (rotation_from_euler(0, 0, 20) @ right)[1] > 0  # x right turns towards y down

    def test_yaw_positive_points_the_nose_to_image_left(self) -> None:
        """Pose documents 'yaw positive when the nose points to the image's left'."""
        nose = np.array([0.0, 0.0, -1.0])
        assert (rotation_from_euler(20, 0, 0) @ nose)[0] < 0


class TestEstimatePose:
    @pytest.mark.parametrize("noise", [0.0, 0.01])
    def test_pose_grid_within_one_degree(self, noise: float) -> None:
        model = load_face_model()
        rng = np.random.default_rng(42)
        worst = 0.0
        for yaw, pitch, roll in itertools.product(YAWS, PITCHES, ROLLS):
            points = _posed(model.canonical, yaw, pitch, roll)
            # Noise is 1% of the face size (RMS radius 173 px -> about 1.7 px).
            points = points + rng.normal(scale=noise * 173.0, size=points.shape)
            pose = estimate_pose(points, model.canonical, weights=model.rigid_weights)
            errors = (
                _angle_error(pose.yaw, yaw),
                _angle_error(pose.pitch, pitch),
                _angle_error(pose.roll, roll),
            )
            worst = max(worst, *errors)
            assert max(errors) < 1.0, f"yaw/pitch/roll {yaw}/{pitch}/{roll}: got {pose}"
            assert pose.scale == pytest.approx(173.0, rel=0.01)
        assert worst < 1.0

    def test_returns_pose_types(self) -> None:
        model = load_face_model()
        pose = estimate_pose(_posed(model.canonical, 10, 5, -3), model.canonical)
        assert isinstance(pose, Pose)
        assert pose.rotation.shape == (3, 3) and pose.translation.shape == (3,)
        assert all(isinstance(v, float) for v in (pose.scale, pose.yaw, pose.pitch, pose.roll))

    def test_exact_without_noise(self) -> None:
        model = load_face_model()
        points = _posed(model.canonical, -45, 12, 7)
        pose = estimate_pose(points, model.canonical)
        np.testing.assert_allclose(pose.rotation, rotation_from_euler(-45, 12, 7), atol=1e-6)
        np.testing.assert_allclose(pose.translation, [311.0, 207.0, -40.0], atol=1e-3)


class TestPoseSpace:
    def test_inverse(self) -> None:
        model = load_face_model()
        points = _posed(model.canonical, 25, -10, 8)
        pose = estimate_pose(points, model.canonical)
        back = to_pose_space(points, pose)
        assert back.shape == (478, 3) and back.dtype == np.float64
        np.testing.assert_allclose(back, model.canonical, atol=1e-5)
        np.testing.assert_allclose(from_pose_space(back, pose), points, atol=1e-3)

    def test_round_trip_arbitrary_points(self) -> None:
        rng = np.random.default_rng(5)
        pose = Pose(
            rotation_from_euler(-30, 20, 50), 3.5, np.array([1.0, -2.0, 3.0]), -30.0, 20.0, 50.0
        )
        pts = rng.normal(size=(50, 3))
        np.testing.assert_allclose(to_pose_space(from_pose_space(pts, pose), pose), pts, atol=1e-12)
        np.testing.assert_allclose(from_pose_space(to_pose_space(pts, pose), pose), pts, atol=1e-12)


class TestVertexNormals:
    def test_shape_dtype_unit_length(self) -> None:
        model = load_face_model()
        normals = vertex_normals(model.canonical_extended, model.render_triangles)
        assert normals.shape == (481, 3) and normals.dtype == np.float64
        used = np.unique(model.render_triangles)
        np.testing.assert_allclose(np.linalg.norm(normals[used], axis=1), 1.0, atol=1e-9)
        # The irises (468..477) are not in the tessellation: no triangle, a zero normal, no NaN.
        assert np.all(np.isfinite(normals))
        np.testing.assert_array_equal(normals[468:478], 0.0)

    def test_nose_tip_faces_camera(self) -> None:
        model = load_face_model()
        normals = vertex_normals(model.canonical, model.triangles)
        for vertex in (NOSE_TIP, 4):
            assert normals[vertex, 2] < -0.9, normals[vertex]
        # Most of a frontal face looks at the camera.
        assert np.mean(normals[:468, 2] < 0) > 0.8

    def test_flat_ccw_triangle(self) -> None:
        # Positive signed area in image coordinates (the mesh's front-facing winding).
        vertices = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
        normals = vertex_normals(vertices, np.array([[0, 1, 2]]))
        np.testing.assert_allclose(normals, [[0, 0, -1]] * 3, atol=1e-12)

    def test_rotates_with_the_mesh(self) -> None:
        model = load_face_model()
        rotation = rotation_from_euler(30, -15, 10)
        normals = vertex_normals(model.canonical, model.triangles)
        rotated = vertex_normals(model.canonical @ rotation.T, model.triangles)
        np.testing.assert_allclose(rotated[:468], normals[:468] @ rotation.T, atol=1e-5)
