"""Expression creases: the skin folds a face makes as it moves (frown lines between the
brows, crow's feet at a wink, a wrinkled nose), measured in face space.

A face-space texture cannot carry them: the source photo's skin is the source at
rest, and the target's own creases go with the target's texture. In a video the
target's skin at rest is known (:class:`~faceweave.pipeline.tracking.FaceTracker`
follows it with a running median of its detail, ``Face.rest_detail``: see
:func:`follow_rest`): what the skin shows now beyond that is its expression, and a
swap lays it on the source.

The detail is the log-luma band between CREASE_SIGMAS (texels of a CREASE_SIZE
texture): fine enough for a fold a few pixels wide, too fine for the broad light and
shade that a turn of the head changes. It is taken only in CREASE_ZONE (see
:func:`crease_zone`): the skin clear of the eyes, brows, lips, the nose's tip and
wings, and the face's outline, where a mesh that sits a pixel off from one frame to
the next would read a moving edge as a crease.
"""

from __future__ import annotations

import functools
import threading

import cv2
import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from faceweave.core.facemodel import FaceModel
from faceweave.core.geometry import vertex_normals

# Texture side (texels) and the band's two Gaussians (texels).
CREASE_SIZE = 128
CREASE_SIGMAS = (0.8, 2.5)
# Log-luma offsets kept: a crease darkens by up to about a third (exp(-0.4)), and
# what lightens between folds by a quarter.
CREASE_RANGE = (-0.4, 0.25)
# A texel's detail counts in full where the surface is foreshortened by at most
# FORESHORTENED[1] against the face at rest (the share of its facing the camera it
# keeps), not at all beyond FORESHORTENED[0]: a turned face's far side is squeezed
# and its detail there is not the detail at rest.
FORESHORTENED = (0.25, 0.5)
# A face is shrunk to the texture's size before it is read only when the texture
# would take under this share of its pixels across (a 720p face is read as it is).
SHRINK_BELOW = 0.6
# How far one sample (every half second in a track) moves the skin's detail at rest
# towards itself: a fold (darker) by the first, its going away by the second. A
# frown 0.1 deep becomes half of the rest after 2.5 s held, all of it after 5 s,
# and lets go in under 2 s.
REST_STEPS = (0.01, 0.03)
# The nose's tip and wings: a highlight and nostrils that move with the head's turn.
_NOSE_TIP = np.array(
    [1, 2, 4, 19, 45, 48, 64, 75, 94, 97, 98, 115, 129, 220, 240]
    + [275, 278, 294, 305, 326, 327, 344, 358, 440, 460]
)


@functools.lru_cache(maxsize=4)
def crease_zone(model: FaceModel, size: int = CREASE_SIZE) -> NDArray[np.float32]:
    """(S, S) weights in [0, 1] of the texels where creases are taken (read-only).

    The face's skin minus: the outline's band (``size`` / 32 texels), the brows, the
    eyes' lids (see :func:`_lids`), the lips and the nose's tip and wings (each a
    convex hull of its vertices, grown by a few texels), feathered by a Gaussian of
    ``size`` / 96. The lids move over the face: with only the openings cut, eye
    make-up moving with them (eyeliner under a lower lid) read as creases and ringed
    a swapped face's eyes in dark when the target widened hers (vid_p04)."""
    raster = model.uv_raster(size)
    grow = max(1, size // 64)
    edge = 2 * (size // 32) + 1
    zone = cv2.erode(
        raster.covered.astype(np.uint8),
        cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (edge, edge)),
    )
    uv = model.uv * (size - 1)
    cuts: list[tuple[NDArray[np.integer], int]] = [
        (model.regions["left_eyebrow"], grow),
        (model.regions["right_eyebrow"], grow),
        (_lids(model, model.loops[0]), grow),
        (_lids(model, model.loops[1]), grow),
        (model.regions["lips"], grow + 2),
        (_NOSE_TIP, grow + 1),
    ]
    for ids, reach in cuts:
        hull = cv2.convexHull(np.round(uv[ids]).astype(np.int32))
        cut = np.zeros_like(zone)
        cv2.fillConvexPoly(cut, hull, 1)
        cut = cv2.dilate(
            cut, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * reach + 1, 2 * reach + 1))
        )
        zone[cut > 0] = 0
    weights = np.clip(cv2.GaussianBlur(zone.astype(np.float32), (0, 0), size / 96.0), 0.0, 1.0)
    weights.setflags(write=False)
    return weights


def _lids(model: FaceModel, loop: NDArray[np.integer]) -> NDArray[np.intp]:
    """An eye opening's loop, the ring of vertices round it (sharing a triangle with
    it: the lids, from the lashes up to the crease and the lower lid's band) and, no
    further out to the sides than the eye's corners, the next ring (below the lower
    lid, where make-up sits; beside the corners the crow's feet stay)."""
    opening = np.asarray(loop, np.intp)
    lids = model.around(opening)
    around = model.around(lids)
    x = model.canonical[:, 0]
    within = (x[around] >= x[opening].min()) & (x[around] <= x[opening].max())
    return np.unique(np.concatenate([lids, around[within]]))


@functools.lru_cache(maxsize=4)
def _texel_weights(model: FaceModel, size: int) -> sparse.csr_matrix:
    """(S * S, V) each texel's barycentric weights over the extended mesh's vertices
    (a row of zeros off the mesh): a texel's position in a frame is one sparse
    product, a fifth of the time of interpolating over the raster."""
    raster = model.uv_raster(size)
    texels = np.flatnonzero(raster.covered.reshape(-1))
    corners = np.asarray(model.render_triangles)[raster.triangle.reshape(-1)[texels]]
    weights = raster.weights.reshape(-1, 3)[texels]
    return sparse.csr_matrix(
        (weights.reshape(-1), (np.repeat(texels, 3), corners.reshape(-1))),
        shape=(size * size, len(model.canonical_extended)),
        dtype=np.float32,
    )


def face_detail(
    frame: NDArray[np.uint8],
    landmarks: NDArray[np.floating],
    model: FaceModel,
    size: int = CREASE_SIZE,
    sigmas: tuple[float, float] = CREASE_SIGMAS,
) -> NDArray[np.float32]:
    """(S, S) the face's log-luma detail in face space (0 off the mesh): the band
    between the Gaussians of ``sigmas`` (texels).

    ``landmarks``: its (478, 3) mesh in ``frame`` pixels. A face much larger than
    the texture is first shrunk (area filter) to about its size, so that its pores
    do not alias into the band."""
    verts = model.extend(np.asarray(landmarks, np.float32))
    raster = model.uv_raster(size)
    h, w = frame.shape[:2]
    x0, y0 = (max(0, int(np.floor(v)) - 2) for v in verts[:, :2].min(0))
    x1, y1 = (int(np.ceil(v)) + 3 for v in verts[:, :2].max(0))
    x1, y1 = min(w, x1), min(h, y1)
    if x1 - x0 < 4 or y1 - y0 < 4:
        return np.zeros((size, size), np.float32)
    crop = frame[y0:y1, x0:x1]
    # (Grey before the shrink: a third of the pixels to average.)
    grey = cv2.cvtColor(crop, cv2.COLOR_BGR2GRAY) if crop.ndim == 3 else crop
    scale = min(1.0, size / max(x1 - x0, y1 - y0))
    if scale < SHRINK_BELOW:
        grey = cv2.resize(grey, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    else:
        scale = 1.0
    xy = _texel_weights(model, size) @ (
        (verts[:, :2] - np.array([x0, y0], np.float32)) * np.float32(scale)
    )
    luma = cv2.remap(
        grey.astype(np.float32),
        np.ascontiguousarray(xy[:, 0].reshape(size, size), np.float32),
        np.ascontiguousarray(xy[:, 1].reshape(size, size), np.float32),
        cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_REPLICATE,
    )
    return _log_band(luma, raster.covered, sigmas)


def texture_detail(
    texture: NDArray[np.generic],
    model: FaceModel,
    size: int = CREASE_SIZE,
    sigmas: tuple[float, float] = CREASE_SIGMAS,
) -> NDArray[np.float32]:
    """(S, S) the log-luma detail of a face-space ``texture`` (BGR, or BGRA whose
    fourth channel is left out; any side, laid out as the model's UV map) as
    :func:`face_detail` reads it from a photo: shrunk (area filter) to ``size``."""
    bgr = np.ascontiguousarray(np.asarray(texture)[..., :3], np.float32)
    luma = cv2.cvtColor(
        cv2.resize(bgr, (size, size), interpolation=cv2.INTER_AREA), cv2.COLOR_BGR2GRAY
    )
    return _log_band(luma, model.uv_raster(size).covered, sigmas)


def _log_band(
    luma: NDArray[np.float32], covered: NDArray[np.bool_], sigmas: tuple[float, float]
) -> NDArray[np.float32]:
    """The log of ``luma`` (0..255, offset by 8 so that black is no pole) between the
    Gaussians of ``sigmas``, 0 where not ``covered``."""
    log = cv2.log(cv2.add(luma, 8.0))
    fine, coarse = sigmas
    band = cv2.GaussianBlur(log, (0, 0), fine) - cv2.GaussianBlur(log, (0, 0), coarse)
    band[~covered] = 0.0
    return np.asarray(band, np.float32)


def facing(
    landmarks: NDArray[np.floating],
    rest: NDArray[np.floating],
    model: FaceModel,
    size: int = CREASE_SIZE,
) -> NDArray[np.float32]:
    """(S, S) weights in [0, 1]: how little each texel is foreshortened now against
    the face at rest (``rest``: its pose-space shape, facing the camera), see
    FORESHORTENED; a texel turned away (its normal's depth part flipped) gets 0.
    Worked out on a grid a quarter as fine (it is smooth) and enlarged."""
    now = vertex_normals(model.extend(np.asarray(landmarks, np.float32)), model.render_triangles)
    then = _rest_normals(rest, model)
    kept = now[:, 2] * np.sign(then[:, 2]) / np.maximum(np.abs(then[:, 2]), 0.2)
    low, high = FORESHORTENED
    ramp = np.clip((kept - low) / (high - low), 0.0, 1.0).astype(np.float32)
    small = max(8, size // 4)
    texels = np.asarray(_texel_weights(model, small) @ ramp, np.float32).reshape(small, small)
    return np.asarray(cv2.resize(texels, (size, size), interpolation=cv2.INTER_LINEAR))


# The normals of the last few faces at rest, by the array's identity (a track's rest
# shape changes every half second; the array is held here, so its id is not reused).
# Swaps run on several threads (a video job's stage, live sessions): one lock.
_REST_NORMALS: dict[int, tuple[NDArray[np.floating], NDArray[np.float64]]] = {}
_REST_NORMALS_LOCK = threading.Lock()


def _rest_normals(rest: NDArray[np.floating], model: FaceModel) -> NDArray[np.float64]:
    with _REST_NORMALS_LOCK:
        held = _REST_NORMALS.get(id(rest))
    if held is not None and held[0] is rest:
        return held[1]
    normals = vertex_normals(model.extend(np.asarray(rest, np.float32)), model.render_triangles)
    with _REST_NORMALS_LOCK:
        while len(_REST_NORMALS) >= 16:
            _REST_NORMALS.pop(next(iter(_REST_NORMALS)))
        _REST_NORMALS[id(rest)] = (rest, normals)
    return normals


def follow_rest(
    rest: NDArray[np.float32] | None, detail: NDArray[np.float32]
) -> NDArray[np.float32]:
    """The skin's detail at rest after one more sample of it (a new array: faces in
    flight keep the one they were given).

    A running median: each sample moves every texel a fixed step towards itself
    (REST_STEPS), whatever its distance, so a fold held briefly moves the rest a
    little and one held for long becomes part of it; a fold that goes away is let
    go three times as fast as it came. The first sample is the rest."""
    if rest is None or rest.shape != detail.shape:
        return np.array(detail, np.float32)
    deeper, shallower = REST_STEPS
    step = np.where(detail < rest, np.float32(-deeper), np.float32(shallower))
    return np.asarray(rest + np.where(detail == rest, np.float32(0.0), step), np.float32)


def expression_creases(
    detail: NDArray[np.float32],
    rest: NDArray[np.float32],
    zone: NDArray[np.float32],
    strength: float = 1.0,
) -> NDArray[np.float32]:
    """(S, S) log-luma change the face's expression makes to its skin: its detail now
    minus at rest, in the crease zone (or any other (S, S) weights), within
    CREASE_RANGE, times ``strength``."""
    change = np.clip((detail - rest) * zone, *CREASE_RANGE)
    return np.asarray(change * np.float32(strength), np.float32)
