"""Tests for faceweave.core.facemodel: topology, canonical face, mirror, UV, holes, regions."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from faceweave.core.facemodel import (
    HOLE_EYE_LEFT,
    HOLE_EYE_RIGHT,
    HOLE_MOUTH,
    HOLE_NONE,
    N_LANDMARKS,
    N_MESH,
    FaceModel,
    load_face_model,
)


def _edge_counts(triangles: np.ndarray) -> Counter:
    edges = np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]])
    return Counter(map(tuple, np.sort(edges, axis=1).tolist()))


def _signed_areas(points: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    a, b, c = points[triangles[:, 0]], points[triangles[:, 1]], points[triangles[:, 2]]
    return (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0])


@pytest.fixture(scope="module")
def model() -> FaceModel:
    return load_face_model()


def test_cached_singleton(model: FaceModel) -> None:
    assert load_face_model() is model


def test_shapes_and_dtypes(model: FaceModel) -> None:
    assert model.canonical.shape == (N_LANDMARKS, 3) and model.canonical.dtype == np.float32
    assert model.triangles.shape == (852, 3) and model.triangles.dtype == np.int32
    assert model.render_triangles.dtype == np.int32 and model.render_triangles.shape[1] == 3
    assert model.hole_of_triangle.shape == (len(model.render_triangles),)
    assert model.mirror.shape == (N_LANDMARKS,) and model.mirror.dtype == np.int32
    assert model.uv.shape == (N_LANDMARKS + 3, 2) and model.uv.dtype == np.float32
    assert model.rigid_weights.shape == (N_LANDMARKS,)
    assert model.canonical_extended.shape == (N_LANDMARKS + 3, 3)


def test_canonical_normalised(model: FaceModel) -> None:
    c = model.canonical.astype(np.float64)
    np.testing.assert_allclose(c.mean(0), 0.0, atol=1e-5)
    assert np.sqrt((c**2).sum(1).mean()) == pytest.approx(1.0, abs=1e-4)
    # Frontal: the nose tip points at the camera (z away from it), the chin lies below the eyes.
    assert c[1, 2] < c[:, 2].mean() - 0.3
    assert c[152, 1] > c[33, 1]


def test_mesh_triangles_valid(model: FaceModel) -> None:
    tris = model.triangles
    assert tris.min() == 0 and tris.max() == N_MESH - 1
    assert np.all(tris[:, 0] != tris[:, 1]) and np.all(tris[:, 1] != tris[:, 2])
    assert np.all(tris[:, 0] != tris[:, 2])
    assert len(np.unique(tris)) == N_MESH
    assert len({tuple(sorted(t)) for t in tris.tolist()}) == len(tris)


def test_mesh_edges_manifold(model: FaceModel) -> None:
    counts = _edge_counts(model.triangles)
    assert max(counts.values()) <= 2


def test_render_mesh_closed_except_face_oval(model: FaceModel) -> None:
    counts = _edge_counts(model.render_triangles)
    ring = model.regions["face_oval_ring"]
    oval_edges = {
        tuple(sorted(e)) for e in zip(ring.tolist(), np.roll(ring, -1).tolist(), strict=True)
    }
    border = {e for e, n in counts.items() if n == 1}
    assert border == oval_edges
    assert all(n == 2 for e, n in counts.items() if e not in oval_edges)


def test_render_triangles_front_facing(model: FaceModel) -> None:
    areas = _signed_areas(model.canonical_extended[:, :2], model.render_triangles)
    assert np.all(areas > 0)
    areas_mesh = _signed_areas(model.canonical[:, :2], model.triangles)
    assert np.all(areas_mesh > 0)


def test_render_triangles_start_with_mesh(model: FaceModel) -> None:
    n = len(model.triangles)
    same = np.sort(model.render_triangles[:n], axis=1) == np.sort(model.triangles, axis=1)
    assert np.all(same)


def test_hole_codes(model: FaceModel) -> None:
    codes = model.hole_of_triangle
    n = len(model.triangles)
    assert set(np.unique(codes).tolist()) == {HOLE_NONE, HOLE_EYE_LEFT, HOLE_EYE_RIGHT, HOLE_MOUTH}
    assert np.all(codes[:n] == HOLE_NONE)
    for k, code in enumerate((HOLE_EYE_LEFT, HOLE_EYE_RIGHT, HOLE_MOUTH)):
        fan = model.render_triangles[codes == code]
        assert len(fan) == len(model.loops[k])
        centre = N_LANDMARKS + k
        assert np.all((fan == centre).sum(1) == 1)
        assert set(fan[fan != centre].tolist()) == set(model.loops[k].tolist())
    assert len(model.render_triangles) == n + sum(len(lp) for lp in model.loops)


def test_loops_sides(model: FaceModel) -> None:
    c = model.canonical
    left, right, mouth = (c[lp].mean(0) for lp in model.loops)
    assert left[0] < 0 < right[0]  # image-left eye first
    assert mouth[1] > max(left[1], right[1])
    np.testing.assert_allclose(
        model.canonical_extended[N_LANDMARKS:], [left, right, mouth], atol=1e-6
    )


def test_inner_lip_loop(model: FaceModel) -> None:
    inner_lip = {
        78,
        95,
        88,
        178,
        87,
        14,
        317,
        402,
        318,
        324,
        308,
        415,
        310,
        311,
        312,
        13,
        82,
        81,
        80,
        191,
    }
    assert set(model.loops[2].tolist()) == inner_lip


def test_mirror_involution(model: FaceModel) -> None:
    mirror = model.mirror
    np.testing.assert_array_equal(mirror[mirror], np.arange(N_LANDMARKS))
    assert set(mirror.tolist()) == set(range(N_LANDMARKS))


def test_mirror_reflects_canonical(model: FaceModel) -> None:
    reflected = model.canonical * np.array([-1.0, 1.0, 1.0], np.float32)
    err = np.linalg.norm(model.canonical[model.mirror] - reflected, axis=1)
    assert err.max() < 0.02  # canonical units (RMS radius 1)
    # Midline vertices are their own partners.
    midline = np.abs(model.canonical[:, 0]) < 1e-4
    np.testing.assert_array_equal(model.mirror[midline], np.nonzero(midline)[0])


def test_mirror_swaps_eye_loops(model: FaceModel) -> None:
    left, right, mouth = model.loops
    assert set(model.mirror[left].tolist()) == set(right.tolist())
    assert set(model.mirror[mouth].tolist()) == set(mouth.tolist())


def test_uv_range_and_symmetry(model: FaceModel) -> None:
    uv = model.uv
    assert uv.min() >= 0.0 and uv.max() <= 1.0
    # The mirror texel is the horizontally flipped one (prepare_source relies on it).
    np.testing.assert_allclose(uv[model.mirror, 0], 1.0 - uv[:N_LANDMARKS, 0], atol=0.01)
    np.testing.assert_allclose(uv[model.mirror, 1], uv[:N_LANDMARKS, 1], atol=0.01)


def test_uv_mesh_not_folded(model: FaceModel) -> None:
    areas = _signed_areas(model.uv, model.render_triangles)
    folded = np.nonzero(areas <= 0)[0]
    assert len(folded) == 0, (
        "MODEL DEFECT (facemodel._cylindrical_uv): the UV unwrap folds over at render triangles "
        f"{folded.tolist()} (vertices {model.render_triangles[folded].tolist()}, the nose wings), "
        "so a texture atlas texel there belongs to two triangles and unwraps the wrong source pixel"
    )


def test_regions(model: FaceModel) -> None:
    expected = {
        "face_oval",
        "lips",
        "left_eye",
        "right_eye",
        "left_eyebrow",
        "right_eyebrow",
        "irises",
        "nose",
    }
    assert expected <= set(model.regions)
    for name, idx in model.regions.items():
        assert idx.dtype == np.int32, name
        assert idx.min() >= 0 and idx.max() < N_LANDMARKS, name
    ring = model.regions["face_oval_ring"]
    assert set(ring.tolist()) == set(model.regions["face_oval"].tolist())
    assert len(ring) == len(set(ring.tolist()))


def test_face_oval_polygon(model: FaceModel) -> None:
    poly = model.face_oval_polygon(model.canonical)
    assert poly.shape == (36, 2) and poly.dtype == np.float32
    # An ordered ring: consecutive points are close, the ring is simple and encloses the face.
    steps = np.linalg.norm(np.diff(np.vstack([poly, poly[:1]]), axis=0), axis=1)
    assert steps.max() < 0.4
    x, y = poly[:, 0], poly[:, 1]
    assert abs(0.5 * np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y)) > 2.0


def test_extend(model: FaceModel) -> None:
    pts = np.random.default_rng(0).normal(size=(N_LANDMARKS, 2))
    ext = model.extend(pts)
    assert ext.shape == (N_LANDMARKS + 3, 2) and ext.dtype == np.float32
    np.testing.assert_allclose(ext[N_LANDMARKS + 2], pts[model.loops[2]].mean(0), atol=1e-5)


def test_rigid_weights(model: FaceModel) -> None:
    w = model.rigid_weights
    assert w.max() == 1.0 and w.min() > 0.0
    assert w[1] == 1.0 and w[152] < 1.0  # nose tip rigid, chin moves with the jaw


def test_uv_raster_cached(model: FaceModel) -> None:
    assert model.uv_raster(64) is model.uv_raster(64)
    assert model.uv_raster(64).triangle.shape == (64, 64)
