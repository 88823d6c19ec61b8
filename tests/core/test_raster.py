"""Tests for faceweave.core.raster: coverage, barycentric weights, depth order, culling."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from faceweave.core.facemodel import load_face_model
from faceweave.core.raster import Raster, rasterize

# Positive signed area (x1-x0)(y2-y0)-(x2-x0)(y1-y0) in image coordinates: the
# module's "front-facing" winding.
FRONT = np.array([[0, 1, 2]])
BACK = np.array([[0, 2, 1]])
LEGS = np.array([[0.0, 0.0], [9.0, 0.0], [0.0, 9.0]])


def _signed_area(vertices: np.ndarray, tri: np.ndarray) -> float:
    (x0, y0), (x1, y1), (x2, y2) = vertices[tri]
    return float((x1 - x0) * (y2 - y0) - (x2 - x0) * (y1 - y0))


class TestRasterize:
    def test_smoke_shapes_dtypes(self) -> None:
        raster = rasterize(LEGS, FRONT, (12, 15))
        assert isinstance(raster, Raster)
        assert raster.triangle.shape == (12, 15) and raster.triangle.dtype == np.int32
        assert raster.weights.shape == (12, 15, 3) and raster.weights.dtype == np.float32
        assert raster.covered.dtype == np.bool_

    @pytest.mark.parametrize("tris", [FRONT, BACK])
    def test_right_triangle_pixel_count(self, tris: np.ndarray) -> None:
        # Pixel centres with x, y >= 0 and x + y <= 9: 10 + 9 + ... + 1.
        raster = rasterize(LEGS, tris, (10, 10))
        assert int(raster.covered.sum()) == 55
        yy, xx = np.mgrid[0:10, 0:10]
        np.testing.assert_array_equal(raster.covered, xx + yy <= 9)

    def test_pixel_count_matches_area(self) -> None:
        vertices = np.array([[3.3, 4.1], [70.6, 12.2], [20.4, 55.9]])
        raster = rasterize(vertices, FRONT, (64, 80))
        area = abs(_signed_area(vertices, FRONT[0])) / 2
        assert abs(int(raster.covered.sum()) - area) < 0.05 * area

    def test_weights_reproduce_pixel_coordinates(self) -> None:
        vertices = np.array([[3.3, 4.1], [70.6, 12.2], [20.4, 55.9]], np.float32)
        raster = rasterize(vertices, FRONT, (64, 80))
        xy = raster.interpolate(vertices, FRONT, fill=-7.0)
        assert xy.shape == (64, 80, 2) and xy.dtype == np.float32
        yy, xx = np.mgrid[0:64, 0:80].astype(np.float32)
        cov = raster.covered
        np.testing.assert_allclose(xy[cov][:, 0], xx[cov], atol=1e-3)
        np.testing.assert_allclose(xy[cov][:, 1], yy[cov], atol=1e-3)
        np.testing.assert_array_equal(xy[~cov], -7.0)

    def test_weights_are_barycentric(self) -> None:
        vertices = np.array([[3.3, 4.1], [70.6, 12.2], [20.4, 55.9]])
        raster = rasterize(vertices, FRONT, (64, 80))
        w = raster.weights[raster.covered]
        np.testing.assert_allclose(w.sum(1), 1.0, atol=1e-5)
        assert w.min() >= -1e-4 and w.max() <= 1 + 1e-4
        np.testing.assert_array_equal(raster.weights[~raster.covered], 0.0)

    def test_vertex_pixel_gets_unit_weight(self) -> None:
        raster = rasterize(LEGS, FRONT, (10, 10))
        np.testing.assert_allclose(raster.weights[0, 0], [1, 0, 0], atol=1e-6)
        np.testing.assert_allclose(raster.weights[0, 9], [0, 1, 0], atol=1e-6)
        np.testing.assert_allclose(raster.weights[9, 0], [0, 0, 1], atol=1e-6)

    def test_docstring_example(self) -> None:
        r = rasterize(np.array([[0, 0], [9, 0], [0, 9]]), np.array([[0, 2, 1]]), (10, 10))
        assert int(r.covered.sum()) == 55

    def test_cull_back_faces(self) -> None:
        assert _signed_area(LEGS, FRONT[0]) > 0 > _signed_area(LEGS, BACK[0])
        assert rasterize(LEGS, FRONT, (10, 10), cull_back_faces=True).covered.sum() == 55
        assert rasterize(LEGS, BACK, (10, 10), cull_back_faces=True).covered.sum() == 0
        both = rasterize(LEGS, np.concatenate([BACK, FRONT]), (10, 10), cull_back_faces=True)
        assert set(np.unique(both.triangle[both.covered]).tolist()) == {1}

    @pytest.mark.parametrize("swap_order", [False, True])
    def test_depth_nearer_wins_regardless_of_order(self, swap_order: bool) -> None:
        # Two overlapping squares' halves: A (near, depth 1) and B (far, depth 5).
        vertices = np.array([[2, 2], [30, 2], [2, 30], [10, 10], [38, 10], [10, 38]], np.float64)
        depth = np.array([1, 1, 1, 5, 5, 5], np.float64)
        tris = np.array([[0, 1, 2], [3, 4, 5]])
        near_id, far_id = 0, 1
        if swap_order:
            tris = tris[::-1].copy()
            near_id, far_id = 1, 0
        raster = rasterize(vertices, tris, (40, 40), depth=depth)
        assert raster.triangle[12, 12] == near_id  # inside both
        assert raster.triangle[4, 4] == near_id  # only A
        assert raster.triangle[30, 12] == far_id  # only B
        # And depth reversed: the other one wins.
        raster = rasterize(vertices, tris, (40, 40), depth=-depth)
        assert raster.triangle[12, 12] == far_id

    def test_numpy_last_write_wins_for_repeated_flat_indices(self) -> None:
        # rasterize relies on this for its painter's order (see the module docstring).
        target = np.full(10, -1, np.int32)
        idx = np.array([3, 3, 3, 5, 3, 5, 7] * 1000)
        values = np.arange(len(idx), dtype=np.int32)
        target[idx] = values
        assert target[3] == values[np.nonzero(idx == 3)[0][-1]]
        assert target[5] == values[np.nonzero(idx == 5)[0][-1]]
        assert target[7] == values[-1]

    def test_many_overlapping_triangles_depth(self) -> None:
        rng = np.random.default_rng(0)
        n = 50
        base = np.array([[5.0, 5.0], [60.0, 8.0], [10.0, 58.0]])
        vertices = np.concatenate([base + rng.normal(scale=1.0, size=(3, 2)) for _ in range(n)])
        tris = np.arange(3 * n).reshape(n, 3)
        depth = np.repeat(rng.permutation(n).astype(np.float64), 3)
        raster = rasterize(vertices, tris, (64, 64), depth=depth)
        nearest = int(np.argmin(depth[::3]))
        assert raster.triangle[20, 20] == nearest

    @pytest.mark.parametrize(
        "vertices",
        [
            np.array([[-50.0, -50.0], [-20.0, -50.0], [-50.0, -20.0]]),
            np.array([[100.0, 100.0], [130.0, 100.0], [100.0, 130.0]]),
            np.array([[2.0, 2.0], [8.0, 8.0], [5.0, 5.0]]),  # degenerate
        ],
    )
    def test_off_grid_or_degenerate_is_empty(self, vertices: np.ndarray) -> None:
        raster = rasterize(vertices, FRONT, (16, 16))
        np.testing.assert_array_equal(raster.triangle, -1)
        np.testing.assert_array_equal(raster.weights, 0.0)

    def test_no_triangles(self) -> None:
        raster = rasterize(np.zeros((0, 2)), np.zeros((0, 3), np.int32), (8, 9))
        assert raster.triangle.shape == (8, 9)
        np.testing.assert_array_equal(raster.triangle, -1)
        out = raster.interpolate(np.zeros((0, 2)), np.zeros((0, 3), np.int32), fill=3.0)
        np.testing.assert_array_equal(out, 3.0)

    def test_partially_off_grid_is_clipped(self) -> None:
        vertices = np.array([[-20.0, -20.0], [30.0, -20.0], [-20.0, 30.0]])
        raster = rasterize(vertices, FRONT, (16, 16))
        yy, xx = np.mgrid[0:16, 0:16]
        np.testing.assert_array_equal(raster.covered, xx + yy <= 10)


class TestCanonicalMesh:
    def test_face_covered_without_holes(self) -> None:
        model = load_face_model()
        size = 320
        pts = model.canonical_extended[:, :2] * 100.0 + size / 2
        assert pts.min() > 2 and pts.max() < size - 3  # the whole face lies on the grid
        raster = rasterize(pts, model.render_triangles, (size, size), cull_back_faces=True)
        oval = np.zeros((size, size), np.uint8)
        ring = np.round(model.face_oval_polygon(pts) * 16).astype(np.int32)
        cv2.fillPoly(oval, [ring], 1, shift=4)
        agreement = np.mean(raster.covered == oval.astype(bool))
        assert agreement > 0.99
        inner = cv2.erode(oval, np.ones((3, 3), np.uint8)).astype(bool)
        assert not np.any(inner & ~raster.covered), "holes inside the face oval"
        assert not np.any(
            raster.covered & ~cv2.dilate(oval, np.ones((3, 3), np.uint8)).astype(bool)
        )

    def test_canonical_uv_round_trip(self) -> None:
        model = load_face_model()
        raster = model.uv_raster(64)
        uv = raster.interpolate(model.uv * 63, model.render_triangles)
        yy, xx = np.mgrid[0:64, 0:64].astype(np.float32)
        cov = raster.covered
        np.testing.assert_allclose(uv[cov][:, 0], xx[cov], atol=1e-3)
        np.testing.assert_allclose(uv[cov][:, 1], yy[cov], atol=1e-3)
