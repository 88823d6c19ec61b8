"""Tests for the debug overlay (faceweave.processors.debug)."""

from __future__ import annotations

import dataclasses

import numpy as np

from faceweave.processors.debug import draw_debug
from faceweave.types import Face


def _inside_box(face: Face, shape: tuple[int, ...], shrink: float = 0.2) -> tuple[slice, slice]:
    x0, y0, x1, y1 = face.bbox
    dx, dy = shrink * (x1 - x0), shrink * (y1 - y0)
    return (
        slice(max(0, int(y0 + dy)), min(shape[0], int(y1 - dy))),
        slice(max(0, int(x0 + dx)), min(shape[1], int(x1 - dx))),
    )


def test_overlay_is_a_copy_of_the_same_size(astronaut: np.ndarray, astronaut_face: Face) -> None:
    out = draw_debug(astronaut, [astronaut_face])
    assert out.shape == astronaut.shape and out.dtype == np.uint8
    assert not np.shares_memory(out, astronaut)
    assert np.array_equal(draw_debug(astronaut, []), astronaut)


def test_mesh_leaves_the_face_visible(astronaut: np.ndarray, astronaut_face: Face) -> None:
    """The wireframe is blended in: the face under it still correlates with the photo
    (opaque lines over a 100 px face cover it almost entirely)."""
    rows, cols = _inside_box(astronaut_face, astronaut.shape)
    grey = astronaut[rows, cols].astype(np.float32).mean(2)
    drawn = draw_debug(astronaut, [astronaut_face], mask=False)[rows, cols]
    corr = np.corrcoef(grey.ravel(), drawn.astype(np.float32).mean(2).ravel())[0, 1]
    assert corr > 0.8
    bare = draw_debug(astronaut, [astronaut_face], mesh=False, mask=False)[rows, cols]
    assert np.abs(drawn.astype(np.int16) - bare).max() > 10  # but the mesh is there


def test_label_stays_inside_the_frame(astronaut: np.ndarray, astronaut_face: Face) -> None:
    """A face at the top edge gets its label on a dark plate inside the image."""
    x0, y0, x1, y1 = astronaut_face.bbox
    top = dataclasses.replace(
        astronaut_face,
        bbox=(x0, 0.0, x1, y1 - y0),
        landmarks_478=astronaut_face.landmarks_478 - np.array([0.0, y0, 0.0], np.float32),
        landmarks_5=astronaut_face.landmarks_5 - np.array([0.0, y0], np.float32),
    )
    out = draw_debug(astronaut, [top], mesh=False, mask=False)
    changed = np.abs(out.astype(np.int16) - astronaut).max(2) > 0
    # The plate darkens a band at the very top, starting at the box's left edge.
    assert changed[0:3, int(x0) : int(x0) + 20].all()
    assert out[1, int(x0) + 1 : int(x0) + 4].max() < astronaut[1, int(x0) + 1 : int(x0) + 4].max()


def test_hands_kept_are_outlined(astronaut: np.ndarray) -> None:
    """A hand's kept area is outlined (magenta) with its bones; far from it, and with no
    hands given, the overlay is as before."""
    palm = np.array([[250.0, 400.0]])
    fan = [(0.0, 0.0)] + [(-12.0 - 8.0 * k, -8.0 - 10.0 * k) for k in range(4)]
    for dx in (-14.0, -4.0, 6.0, 16.0):
        fan += [(dx * (1.0 + 0.15 * k), -38.0 - 13.0 * k) for k in range(4)]
    hand = palm + np.array(fan)
    with_hand = draw_debug(astronaut, [], hands=[hand])
    magenta = (with_hand[..., 0] > 200) & (with_hand[..., 1] < 60) & (with_hand[..., 2] > 200)
    assert magenta[300:420, 180:320].sum() > 100
    assert magenta.sum() == magenta[300:420, 180:320].sum()
    assert np.array_equal(draw_debug(astronaut, [], hands=[]), astronaut)


def test_what_an_occluder_covers_is_tinted_and_outlined(astronaut: np.ndarray) -> None:
    covered = np.zeros((60, 80, 1), np.float32)
    covered[20:40, 30:50] = 1.0
    box = (slice(100, 160), slice(200, 280))
    out = draw_debug(astronaut, [], covers=[(box, covered)])
    region = out[box].astype(int) - astronaut[box]
    inside = region[25:35, 35:45]
    # Tinted towards orange (BGR 0, 165, 255): red up, blue down, where it is covered only.
    assert (inside[..., 2] >= 0).all() and (inside[..., 0] <= 0).all()
    assert np.abs(inside).max() > 20
    assert (out[:100] == astronaut[:100]).all() and (out[160:] == astronaut[160:]).all()
    assert (region[:15] == 0).all() and (region[45:] == 0).all()  # outline 1 px off the edge
