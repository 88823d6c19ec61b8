"""Tests for faceweave.core.creases: the skin's detail in face space and what an
expression adds to it."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from faceweave.core import creases
from faceweave.core.facemodel import FaceModel, load_face_model
from faceweave.core.geometry import rotation_from_euler
from faceweave.types import Face


@pytest.fixture(scope="module")
def model() -> FaceModel:
    return load_face_model()


def _texel(model: FaceModel, vertex: int, size: int = creases.CREASE_SIZE) -> tuple[int, int]:
    u, v = np.round(model.uv[vertex] * (size - 1)).astype(int)
    return int(v), int(u)


def _draw_crease(frame: np.ndarray, face: Face, vertex: int = 9) -> np.ndarray:
    """A thin dark fold, a tenth of the face high, through the mesh vertex (9: between
    the brows, where frown lines run)."""
    out = frame.copy()
    x, y = face.landmarks_478[vertex, :2]
    half = 0.05 * face.size
    cv2.line(out, (int(x), int(y - half)), (int(x), int(y + half)), (40, 40, 60), 2, cv2.LINE_AA)
    return out


class TestZone:
    def test_takes_the_skin_that_folds_and_leaves_the_features(self, model: FaceModel) -> None:
        zone = creases.crease_zone(model)
        assert zone.shape == (creases.CREASE_SIZE,) * 2
        assert 0.0 <= float(zone.min()) and float(zone.max()) <= 1.0
        # Between the brows, the forehead, the nose's bridge, beside the eyes' outer
        # corners (crow's feet), under the eyes and the cheeks.
        for vertex in (9, 151, 168, 6, 143, 372, 139, 368, 111, 340, 205, 425):
            assert zone[_texel(model, vertex)] > 0.8, vertex
        # The brows, the lids' edges, the lips, the nose's tip, the face's outline.
        for vertex in (107, 336, 159, 145, 33, 263, 13, 14, 0, 17, 1, 4, 10, 152, 234, 454):
            assert zone[_texel(model, vertex)] < 0.15, vertex
        # The lids: up to the crease above and the band under the lower lid, where
        # eye make-up moves with them (read as creases, it ringed a swapped face's
        # eyes in dark on a target's widened eyes, vid_p04).
        for vertex in (27, 257, 23, 253, 230, 450):
            assert zone[_texel(model, vertex)] < 0.15, vertex
        with pytest.raises(ValueError):
            zone[0, 0] = 1.0  # shared and cached: read-only


class TestFaceDetail:
    def test_a_fold_drawn_on_the_skin_shows_where_it_is(
        self, model: FaceModel, astronaut: np.ndarray, astronaut_face: Face
    ) -> None:
        plain = creases.face_detail(astronaut, astronaut_face.landmarks_478, model)
        folded = creases.face_detail(
            _draw_crease(astronaut, astronaut_face), astronaut_face.landmarks_478, model
        )
        change = folded - plain
        v, u = _texel(model, 9)
        assert change[v - 6 : v + 7, u - 6 : u + 7].min() < -0.15
        # Nothing anywhere else: the cheeks, the forehead's top.
        far = np.ones_like(change, bool)
        far[v - 20 : v + 21, u - 20 : u + 21] = False
        assert float(np.abs(change[far]).max()) < 0.01

    def test_does_not_follow_the_light_level(
        self, model: FaceModel, astronaut: np.ndarray, astronaut_face: Face
    ) -> None:
        # A log-luma band: the same skin in a darker frame has the same detail.
        darker = np.round(astronaut.astype(np.float32) * 0.7).astype(np.uint8)
        zone = creases.crease_zone(model) > 0.5
        bright = creases.face_detail(astronaut, astronaut_face.landmarks_478, model)
        dark = creases.face_detail(darker, astronaut_face.landmarks_478, model)
        assert float(np.abs(bright - dark)[zone].mean()) < 0.01
        assert float(np.abs(bright)[zone].mean()) > 0.01  # there is detail to compare

    def test_a_large_face_is_shrunk_before_it_is_read(
        self, model: FaceModel, astronaut: np.ndarray, astronaut_face: Face
    ) -> None:
        # The same face at three times the size reads about the same detail (its
        # pores do not alias into the band).
        big = cv2.resize(astronaut, None, fx=3, fy=3, interpolation=cv2.INTER_CUBIC)
        points = astronaut_face.landmarks_478 * np.array([3, 3, 3], np.float32)
        zone = creases.crease_zone(model) > 0.5
        small = creases.face_detail(astronaut, astronaut_face.landmarks_478, model)
        large = creases.face_detail(big, points, model)
        assert float(np.corrcoef(small[zone], large[zone])[0, 1]) > 0.8

    def test_a_wider_band_takes_a_broad_fold_the_crease_band_misses(
        self, model: FaceModel, astronaut: np.ndarray, astronaut_face: Face
    ) -> None:
        # A soft fold 6 pixels wide (a smile's, beside the mouth) on a face at 2 pixels
        # a texel: the crease band barely reads it, a band to 5 texels does.
        folded = astronaut.copy()
        x, y = astronaut_face.landmarks_478[206, :2]
        cv2.line(folded, (int(x) - 12, int(y) - 12), (int(x) + 12, int(y) + 12), (90, 90, 110), 6)
        folded = cv2.GaussianBlur(folded, (0, 0), 2.0)
        plain = cv2.GaussianBlur(astronaut, (0, 0), 2.0)
        points = astronaut_face.landmarks_478
        v, u = _texel(model, 206)
        spot = (slice(v - 3, v + 4), slice(u - 3, u + 4))
        depth = {}
        for sigmas in (creases.CREASE_SIGMAS, (0.8, 5.0)):
            change = creases.face_detail(folded, points, model, sigmas=sigmas) - (
                creases.face_detail(plain, points, model, sigmas=sigmas)
            )
            depth[sigmas] = float(change[spot].min())
        assert depth[(0.8, 5.0)] < -0.15
        assert depth[(0.8, 5.0)] < 2.0 * depth[creases.CREASE_SIGMAS]

    def test_off_the_frame(self, model: FaceModel, astronaut_face: Face) -> None:
        points = astronaut_face.landmarks_478 + np.array([5000, 0, 0], np.float32)
        tiny = np.zeros((64, 64, 3), np.uint8)
        detail = creases.face_detail(tiny, points, model)
        assert detail.shape == (creases.CREASE_SIZE,) * 2 and not detail.any()


class TestTextureDetail:
    def test_a_face_texture_reads_as_its_photo(
        self, model: FaceModel, astronaut: np.ndarray, astronaut_face: Face
    ) -> None:
        # The same face unwrapped into its face-space texture (any side) has the
        # detail its photo has, texel for texel.
        from faceweave.processors.swap import prepare_source

        texture = prepare_source(astronaut_face, uv_size=256, log_advice=False).texture
        zone = creases.crease_zone(model) > 0.5
        photo = creases.face_detail(astronaut, astronaut_face.landmarks_478, model)
        for image in (texture, np.clip(texture, 0, 255).astype(np.uint8)):
            unwrapped = creases.texture_detail(image, model)
            assert unwrapped.shape == photo.shape
            assert float(np.corrcoef(photo[zone], unwrapped[zone])[0, 1]) > 0.7
        # A fourth channel is left out; a flat texture has no detail.
        with_alpha = np.dstack([texture, np.full(texture.shape[:2], 255.0, np.float32)])
        np.testing.assert_array_equal(
            creases.texture_detail(with_alpha, model), creases.texture_detail(texture, model)
        )
        flat = np.full((256, 256, 3), 140.0, np.float32)
        assert float(np.abs(creases.texture_detail(flat, model)).max()) < 1e-5


def test_a_turn_leaves_out_the_squeezed_far_side(model: FaceModel) -> None:
    zone = creases.crease_zone(model) > 0.5
    half = creases.CREASE_SIZE // 2
    rest = model.canonical
    front = creases.facing(rest * 100.0, rest, model)
    assert float(front[zone].mean()) > 0.95
    means = []
    for yaw in (15.0, 45.0):
        turned = (rest * 100.0) @ rotation_from_euler(yaw, 0.0, 0.0).T
        weights = creases.facing(turned.astype(np.float32), rest, model)
        sides = [
            float(weights[:, cols][zone[:, cols]].mean())
            for cols in (slice(0, half), slice(half, None))
        ]
        means.append(sorted(sides))
    (far15, near15), (far45, near45) = means
    assert near15 > 0.95 and near45 > 0.95  # the side turned towards the camera
    assert far45 < 0.35 < far15  # the far side fades as the turn squeezes it


def test_expression_creases_are_what_the_skin_shows_beyond_its_rest(model: FaceModel) -> None:
    zone = creases.crease_zone(model)
    rng = np.random.default_rng(0)
    rest = rng.normal(0, 0.05, zone.shape).astype(np.float32)
    assert not creases.expression_creases(rest, rest, zone).any()
    deeper = rest.copy()
    deeper[:, 90:93] -= 1.0  # far past the range: clipped
    change = creases.expression_creases(deeper, rest, zone, strength=0.5)
    lo, hi = creases.CREASE_RANGE
    assert float(change.min()) == pytest.approx(0.5 * lo)
    assert float(change.max()) <= 0.5 * hi
    assert not change[:, :80].any()


def test_the_rest_follows_a_running_median() -> None:
    deeper, shallower = creases.REST_STEPS
    rng = np.random.default_rng(1)
    skin = rng.normal(0, 0.05, (8, 8)).astype(np.float32)
    rest = creases.follow_rest(None, skin)
    np.testing.assert_array_equal(rest, skin)  # the first sample is the rest
    assert creases.follow_rest(rest, skin) is not rest  # a new array every time
    frown = skin - np.float32(0.2)
    # A frown of three samples moves the rest three steps, whatever its depth.
    held = rest
    for _ in range(3):
        held = creases.follow_rest(held, frown)
    np.testing.assert_allclose(held, skin - 3 * deeper, atol=1e-6)
    # Let go of three times as fast.
    released = creases.follow_rest(held, skin)
    np.testing.assert_allclose(released, np.minimum(held + shallower, skin + shallower), atol=1e-6)
    # Held long enough, it is the rest (to within a step).
    for _ in range(40):
        held = creases.follow_rest(held, frown)
    assert float(np.abs(held - frown).max()) <= max(deeper, shallower) + 1e-6
