"""The swap's edge colour match (swap._match_edge_colour) on synthetic faces."""

from __future__ import annotations

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.processors.swap import EDGE_MAX_OFFSET, _match_edge_colour, _outer_falloff

SIZE = 128


def _face_share(dip: bool) -> NDArray[np.float32]:
    """A round face: the source's share is 1 inside, falling to 0 over a feathered
    edge; with ``dip``, a small patch inside where it falls to 0.3 (texels left to
    the target, as a source's glare is)."""
    yy, xx = np.mgrid[:SIZE, :SIZE].astype(np.float32)
    r = np.hypot(xx - SIZE / 2, yy - SIZE / 2)
    share = np.clip((54.0 - r) / 12.0, 0.0, 1.0)
    if dip:
        share[np.hypot(xx - 64, yy - 40) < 14] = 0.3
    return share.astype(np.float32)


def _skin() -> NDArray[np.float32]:
    yy, xx = np.mgrid[:SIZE, :SIZE].astype(np.float32)
    return (np.hypot(xx - SIZE / 2, yy - SIZE / 2) < 60).astype(np.float32)


def _noisy(level: float, seed: int) -> NDArray[np.float32]:
    noise = np.random.default_rng(seed).normal(0.0, 6.0, (SIZE, SIZE, 1))
    return np.clip(level + noise + np.zeros((SIZE, SIZE, 3)), 0, 255).astype(np.float32)


def _small(image: NDArray[np.float32]) -> NDArray[np.uint8]:
    return cv2.resize(image, (SIZE // 2, SIZE // 2), interpolation=cv2.INTER_AREA).astype(np.uint8)


def test_the_outer_falloff_is_the_edge_not_a_dip_inside() -> None:
    share = cv2.resize(_face_share(dip=True), (32, 32), interpolation=cv2.INTER_AREA)
    outer = _outer_falloff(share, 0.8)
    ring = (share > 0.1) & (share < 0.8)
    # The feathered edge counts ...
    assert outer[ring].sum() > 20
    # ... the dip inside (share 0.3, far from the edge) does not.
    assert not outer[9:13, 14:18].any()
    assert ((share > 0.1) & (share < 0.8))[9:13, 14:18].all()
    # No cell under the bound reaches the border: nothing is outer.
    assert not _outer_falloff(np.ones((8, 8), np.float32), 0.8).any()


def test_a_dip_inside_the_face_does_not_recolour_it() -> None:
    # Source and target agree on the face; inside the dip the source is brighter
    # (a glare the target shows through). The dip is no edge: nothing moves.
    source = _noisy(150.0, 1)
    yy, xx = np.mgrid[:SIZE, :SIZE]
    source[np.hypot(xx - 64, yy - 40) < 14] += 10.0
    target = _noisy(150.0, 2)
    out = _match_edge_colour(source.copy(), _small(target), _face_share(dip=True), _skin())
    assert np.abs(out - source).max() < 2.5


def test_the_edge_takes_the_targets_colour_and_the_middle_keeps_its_own() -> None:
    source = _noisy(150.0, 1)
    target = _noisy(150.0, 2)
    # The target's skin is far darker towards the face's edge (by 60 grey levels):
    # the edge takes the cut's worth of it, and inward the cut offset fades.
    yy, xx = np.mgrid[:SIZE, :SIZE]
    r = np.hypot(xx - SIZE / 2, yy - SIZE / 2)
    target -= (60.0 * np.clip((r - 30.0) / 15.0, 0.0, 1.0))[..., None]
    out = _match_edge_colour(source.copy(), _small(target), _face_share(dip=False), _skin())
    change = (out - source).mean(-1)
    edge = (r > 44) & (r < 50)
    assert change[edge].mean() < -15.0
    assert change[edge].min() >= -EDGE_MAX_OFFSET - 1e-3
    # Inside the band the cut offset fades (cut after the fade, the large offset
    # came in at the cut's full size: 9 grey levels at 30 px from the middle) ...
    assert np.abs(change[r < 30]).max() < 5.0
    # ... and the face's middle keeps the colour match's result.
    assert np.abs(change[r < 12]).max() < 1.0
