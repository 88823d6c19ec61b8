"""Tests for faceweave.core.shape: identity offsets and their harmonic fill."""

from __future__ import annotations

import numpy as np
import pytest

from faceweave.core.facemodel import N_LANDMARKS, load_face_model
from faceweave.core.shape import IdentityShape


@pytest.fixture(scope="module")
def identity() -> IdentityShape:
    return IdentityShape(load_face_model())


@pytest.fixture(scope="module")
def shapes() -> tuple[np.ndarray, np.ndarray]:
    model = load_face_model()
    rng = np.random.default_rng(7)
    target = model.canonical.astype(np.float64)
    source = target + rng.normal(scale=0.05, size=target.shape)
    return source, target


def test_partition(identity: IdentityShape) -> None:
    model = load_face_model()
    parts = [
        set(identity.anchors.tolist()),
        set(identity.fixed.tolist()),
        set(identity.free.tolist()),
    ]
    assert sum(len(p) for p in parts) == N_LANDMARKS
    assert set().union(*parts) == set(range(N_LANDMARKS))
    assert set(identity.fixed.tolist()) == set(model.regions["face_oval"].tolist()) | set(
        model.regions["lips"].tolist()
    )
    assert set(model.regions["nose"].tolist()) - parts[1] <= parts[0]
    assert identity.fill.shape == (len(identity.free), len(identity.anchors))


def test_shape_dtype(identity: IdentityShape, shapes: tuple[np.ndarray, np.ndarray]) -> None:
    delta = identity.identity_delta(shapes[0].astype(np.float32), shapes[1].astype(np.float32))
    assert delta.shape == (N_LANDMARKS, 3) and delta.dtype == np.float64
    assert np.all(np.isfinite(delta))


def test_zero_on_face_oval_and_lips(
    identity: IdentityShape, shapes: tuple[np.ndarray, np.ndarray]
) -> None:
    delta = identity.identity_delta(*shapes)
    model = load_face_model()
    np.testing.assert_array_equal(delta[model.regions["face_oval"]], 0.0)
    np.testing.assert_array_equal(delta[model.regions["lips"]], 0.0)


def test_equals_difference_on_anchors(
    identity: IdentityShape, shapes: tuple[np.ndarray, np.ndarray]
) -> None:
    source, target = shapes
    delta = identity.identity_delta(source, target)
    np.testing.assert_allclose(
        delta[identity.anchors], (source - target)[identity.anchors], atol=1e-12
    )


def test_zero_when_source_is_target(
    identity: IdentityShape, shapes: tuple[np.ndarray, np.ndarray]
) -> None:
    np.testing.assert_array_equal(identity.identity_delta(shapes[1], shapes[1]), 0.0)


def test_linear_in_the_difference(
    identity: IdentityShape, shapes: tuple[np.ndarray, np.ndarray]
) -> None:
    source, target = shapes
    delta = identity.identity_delta(source, target)
    half = identity.identity_delta(target + 0.5 * (source - target), target)
    np.testing.assert_allclose(half, 0.5 * delta, atol=1e-12)


def test_brows_share_scales_the_brows_anchors_alone(
    identity: IdentityShape, shapes: tuple[np.ndarray, np.ndarray]
) -> None:
    """``brows`` scales the offset on the brows' anchors; the nose's and the eye
    corners' stay the full difference, and the rest is the fill of both."""
    source, target = shapes
    model = load_face_model()
    brows = np.concatenate([model.regions["left_eyebrow"], model.regions["right_eyebrow"]])
    assert identity.on_brows.sum() == len(set(brows.tolist()))
    full = identity.identity_delta(source, target)
    shared = identity.identity_delta(source, target, brows=0.6)
    np.testing.assert_allclose(shared[brows], 0.6 * full[brows], atol=1e-12)
    others = identity.anchors[~identity.on_brows]
    np.testing.assert_allclose(shared[others], full[others], atol=1e-12)
    # Linear: the same as the fill of the two parts.
    brows_only = identity.identity_delta(source, target, brows=1.0) - identity.spread(
        np.where(identity.on_brows[:, None], 0.0, (source - target)[identity.anchors])
    )
    np.testing.assert_allclose(shared, full - 0.4 * brows_only, atol=1e-12)


def test_maximum_principle(identity: IdentityShape, shapes: tuple[np.ndarray, np.ndarray]) -> None:
    # Harmonic values lie within their boundary values: the anchors and the oval's zeros.
    source, target = shapes
    delta = identity.identity_delta(source, target)
    anchor_values = delta[identity.anchors]
    lo = np.minimum(anchor_values.min(0), 0.0)
    hi = np.maximum(anchor_values.max(0), 0.0)
    free = delta[identity.free]
    assert np.all(free >= lo - 1e-9) and np.all(free <= hi + 1e-9)


def test_constant_offset_spreads_between_zero_and_offset(identity: IdentityShape) -> None:
    target = load_face_model().canonical.astype(np.float64)
    source = target + np.array([0.1, -0.2, 0.05])
    delta = identity.identity_delta(source, target)
    free = delta[identity.free]
    for axis, value in enumerate((0.1, -0.2, 0.05)):
        lo, hi = sorted((0.0, value))
        assert np.all(free[:, axis] >= lo - 1e-9) and np.all(free[:, axis] <= hi + 1e-9)
    # The fill rows are convex combination weights minus what the oval holds: sums within [0, 1].
    sums = identity.fill.sum(1)
    assert np.all(sums >= -1e-9) and np.all(sums <= 1 + 1e-9)
    assert np.all(identity.fill >= -1e-9)
