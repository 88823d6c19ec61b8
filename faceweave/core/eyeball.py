"""Eyeballs in iris coordinates: the source's eye content placed at the target's gaze.

A face mesh's eye opening is a hole bounded by the lids. Warped like skin, a fan
from the lids to a centre, the source's eyeball follows the source's lids: the
iris keeps the source's gaze (every output stares where the source photo looked)
and is stretched with the opening (a wide-eyed target gets an oval iris and the
source's lash line smeared inwards; a squinting source gives a blurred slit).

Here the eyeball is resampled in **iris coordinates** instead: the iris centre is
the origin and its radius the unit, fitted as an affine map from the mesh's five
iris points (centre, then the contour at +x, -y, -x, +y in the image). So the
iris stays round (foreshortened as the target's is), keeps its size against the
eye and sits where the target's iris is: the target's gaze. What the source's
lids hid is filled in: the top of the iris from its vertical mirror or, failing
that, from its mean radial profile; the white from the target's own, which keeps
the shadow the target's lids cast on it. The eyeball's colours are brought to the
target's by a white balance (the photo's white to the target's), not by the
skin's colour map. A nearly closed opening (a blink, a wink) fades the painted eye
out: the target's own lids and lashes show in the gap.

All functions are pure numpy/OpenCV; image points are (x, y) pixels.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.core.color import LUMA_BGR

# The five iris points in iris coordinates, in the mesh's order (centre, then the
# contour at +x, -y, -x, +y in the image: the same for both eyes).
UNIT_IRIS = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, -1.0], [-1.0, 0.0], [0.0, 1.0]])
# Patch extent (half-width, half-height) in iris radii: an eye is about five iris
# radii wide and a gaze moves the iris up to a radius off centre.
PATCH_SPAN = (3.5, 2.5)
PATCH_RES = 16  # patch pixels per iris radius
# Plausible iris radius over eye width (corner to corner): 0.16-0.31 over the dev
# set's faces up to 40 degrees of yaw; outside, the iris fit is not trusted.
IRIS_RATIO_RANGE = (0.12, 0.42)
# Iris aspect (its fitted axes' ratio) beyond which the fit is taken as broken
# (a profile's far eye): the foreshortening of a 60 degree turn is 0.5.
IRIS_MAX_ASPECT = 2.5
# An iris under this radius (pixels) in the photo gives no patch: p33's 33 px face,
# an iris of about 1.5 px, drew a flat white almond with a speck for an iris.
MIN_IRIS_RADIUS_PX = 3.0
# Lid margin left out of what the photo shows of the eyeball, in iris radii.
LID_MARGIN = 0.12
# Least share of the iris disc, and area of white (in squared iris radii), that the
# photo must show to fill in the rest.
MIN_IRIS_SEEN = 0.3
MIN_WHITE_SEEN = 0.5
# Least lightness (8-bit luma) of the white's lighter part over the iris: 36-144
# for the dev set's open eyes, 1-24 for closed, shadowed or tinted ones.
MIN_CONTRAST = 25.0
# ...and its median lightness over the iris's at least this: over the dev set's
# accepted eyes 7-120 (Grace Hopper's, behind thick lenses, 7-12). p19's eye behind
# rimless glasses passed the test above on a glint of the lens's edge, the rest of
# its "white" as dark as the iris (0): balanced to a target's white, it drew a
# grey-blue, glassy eye.
MIN_WHITE_MEDIAN_CONTRAST = 4.0
# The white's Lab chroma over that of the skin around the eye (the patch outside the
# opening): 0.03-0.89 for the dev set's open eyes; 0.94-1.14 where the "white" was
# skin or seen through a warm-tinted lens (Grace Hopper's, drawn red-orange when
# brought to a target's white): such an eye is not white-balanced. Skin under
# MIN_SKIN_CHROMA (a black-and-white photo) gives no measure.
MAX_WHITE_CHROMA = 0.9
MIN_SKIN_CHROMA = 8.0
# The iris is drawn at the source's size against the eye's width, but at most this
# factor from the target's fitted iris.
IRIS_MAX_SCALE = 1.3
# The white's colour is measured from this many iris radii out (clear of the iris's
# dark rim).
WHITE_FROM = 1.15
# The white drawn over the target's own iris where the iris has moved (gaze "source"):
# a shade of the target's white, as under the lids.
SHADED_WHITE = 0.85
# A nearly closed opening (see open_share): the lids' gap across the eye over its
# width (lid_gap), from which the painted eye fades out (none at the first, all of it
# from the second). MediaPipe's mesh never quite closes the lids: on the development
# clips a closed eye reads 0.006-0.04 (0.02-0.11 as the ring's whole extent across the
# eye, which counts the curve the closed lids meet along), a narrowed or downcast eye
# 0.05-0.2 and an open one 0.25-0.45. An eyeball drawn in that gap showed a closed or
# winking target's eye as a half-open one, its iris in the slit; without it, and with
# the source's weight there falling alike (see swap._fade_shut_eyes), the target's
# own lids and lashes show there.
CLOSED_GAP = (0.08, 0.16)
# Bounds of the white balance (see white_gain): the overall gain, and each channel's
# gain against it. A white's tint, measured on a few dozen pixels next to lashes and
# make-up, varies by up to 30% between the dev photos' eyes (blue over red 0.8-1.3)
# where their light hardly differs: most of it is not the light's.
WHITE_GAIN_RANGE = (0.4, 2.5)
WHITE_TINT_RANGE = 1.1
# A target's white is read no darker than this share of its lids' skin around the
# opening (their lighter part, in the opening's box; luma). A narrowed eye (Biden
# smiling) shows lashes and shadow where its white is measured: 0.51 of the lids,
# and the source's eyeball came out a grey almond with no white. The dev photos' other
# eyes read 0.75-1.45.
WHITE_MIN_OF_LIDS = 0.8


_IRIS_PINV = np.linalg.pinv(np.hstack([UNIT_IRIS, np.ones((5, 1))]))  # (3, 5)


def iris_affine(iris_5: NDArray[np.floating]) -> NDArray[np.float64]:
    """(2, 3) least-squares affine map from iris coordinates to image points.

    Args:
        iris_5: (5, 2) the mesh's iris points (centre, +x, -y, -x, +y).
    """
    return np.asarray((_IRIS_PINV @ np.asarray(iris_5, np.float64)[:, :2]).T, np.float64)


def plausible_iris(affine: NDArray[np.float64], eye_width: float) -> bool:
    """Whether an iris fit is usable: its radius against the eye's width, its aspect."""
    (a, b, _), (c, d, _) = affine.tolist()
    axis_1, axis_2 = math.hypot(a, c), math.hypot(b, d)
    if eye_width <= 1e-6 or min(axis_1, axis_2) <= 1e-6:
        return False
    radius = math.sqrt(abs(a * d - b * c))
    lo, hi = IRIS_RATIO_RANGE
    return lo <= radius / eye_width <= hi and max(axis_1, axis_2) / min(axis_1, axis_2) <= (
        IRIS_MAX_ASPECT
    )


def _patch_to_iris() -> NDArray[np.float64]:
    """(3, 3) patch pixels -> iris coordinates."""
    half_w, half_h = PATCH_SPAN
    n = float(PATCH_RES)
    return np.array([[1.0 / n, 0.0, -half_w], [0.0, 1.0 / n, -half_h], [0.0, 0.0, 1.0]])


def patch_size() -> tuple[int, int]:
    """(width, height) of an eye patch; odd, so the iris centre is a pixel centre."""
    half_w, half_h = PATCH_SPAN
    return int(round(2 * half_w * PATCH_RES)) + 1, int(round(2 * half_h * PATCH_RES)) + 1


def patch_to_image(affine: NDArray[np.float64]) -> NDArray[np.float64]:
    """(2, 3) patch pixels -> image points, for an iris fit ``affine``."""
    return np.asarray(affine @ _patch_to_iris(), np.float64)


@dataclass(frozen=True, eq=False)
class EyePatch:
    """One eyeball in iris coordinates (see :func:`patch_size`).

    Attributes:
        pixels: (PH, PW, 3) float32 the photo's eyeball, the hidden part of the
            iris filled in.
        alpha: (PH, PW) float32 where ``pixels`` hold the eye (the opening as
            photographed, and the whole iris); elsewhere the white is filled in.
        white: (3,) float32 the colour of the photo's white (its lighter part).
        size: the iris radius over the eye's width (corner to corner).
        gaze: (2,) where the iris centre sat in the opening: its offset from the lid
            ring's centroid along the corner-to-corner line and across it, in eye
            widths (:func:`paint_eye` with ``gaze="source"``).
        balanced: whether ``white`` can white-balance the eye (False where the
            photo's "white" is as colourful as the skin around it: a warm lens, a
            squint; such an eye is drawn in the photo's colours and colour-mapped
            with the skin, see :func:`paint_eye`).
    """

    pixels: NDArray[np.float32]
    alpha: NDArray[np.float32]
    white: NDArray[np.float32]
    size: float
    gaze: NDArray[np.float64]
    balanced: bool = True

    @functools.cached_property
    def clear_of_iris(self) -> NDArray[np.uint8]:
        """(PH, PW) 255 away from the iris and its dark rim (where the white is)."""
        pw, ph = patch_size()
        r = _iris_radius_grid(pw, ph, _patch_to_iris()[:2])
        return np.where(r > WHITE_FROM, 255, 0).astype(np.uint8)

    def mirrored(self) -> EyePatch:
        """The patch mirrored left-right (the other eye's)."""
        return EyePatch(
            np.ascontiguousarray(self.pixels[:, ::-1]),
            np.ascontiguousarray(self.alpha[:, ::-1]),
            self.white,
            self.size,
            self.gaze,
            self.balanced,
        )


def _eye_frame(
    lids: NDArray[np.floating], corners: NDArray[np.floating]
) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
    """An eye's centre (its lid ring's centroid), (2, 2) axes as columns (corner to
    corner, and across) and width."""
    c = np.asarray(corners, np.float64)
    ax, ay = float(c[1, 0] - c[0, 0]), float(c[1, 1] - c[0, 1])
    width = max(math.hypot(ax, ay), 1e-6)
    ax, ay = ax / width, ay / width
    across = np.array([[ax, -ay], [ay, ax]])
    return np.asarray(lids)[:, :2].mean(0).astype(np.float64), across, width


def open_share(lids: NDArray[np.floating], corners: NDArray[np.floating]) -> float:
    """How much of a painted eye an opening shows, 0 to 1, from the widest gap between
    its lids across the eye over its width (see CLOSED_GAP)."""
    low, high = CLOSED_GAP
    return min(max((lid_gap(lids, corners) - low) / (high - low), 0.0), 1.0)


def lid_gap(lids: NDArray[np.floating], corners: NDArray[np.floating]) -> float:
    """The widest gap between an opening's lids, across the eye, over its width: the
    ring's height at its tallest. The ring is cut at its ends (its points furthest
    along the eye) into the two lids, and the height is taken at every point of
    either, where it peaks (it is piecewise linear between them). The ring's whole
    extent across the eye counts the lids' curve too: a closed eye whose lids meet
    along an arc read as a narrowed one."""
    _, axes, width = _eye_frame(lids, corners)
    points = np.asarray(lids, np.float64)[:, :2]
    along, across = points @ axes[:, 0], points @ axes[:, 1]
    first, last = int(along.argmin()), int(along.argmax())
    count = len(along)
    one = (np.arange(count) - first) % count <= (last - first) % count
    other = ~one
    other[[first, last]] = True
    heights = []
    for lid in (one, other):
        order = np.argsort(along[lid])
        heights.append(np.interp(along, along[lid][order], across[lid][order]))
    return float(np.abs(heights[0] - heights[1]).max()) / width


def _iris_radius_grid(width: int, height: int, to_iris: NDArray[np.float64]) -> NDArray[np.float32]:
    """(height, width) distance from the iris centre in iris radii, per pixel."""
    x = np.arange(width, dtype=np.float32)[None, :]
    y = np.arange(height, dtype=np.float32)[:, None]
    m = to_iris.astype(np.float32)
    u = m[0, 0] * x + m[0, 1] * y + m[0, 2]
    v = m[1, 0] * x + m[1, 1] * y + m[1, 2]
    return np.asarray(np.sqrt(u * u + v * v), np.float32)


def _chroma(bgr: NDArray[np.floating]) -> float:
    """CIE Lab chroma of one 8-bit BGR colour."""
    lab = cv2.cvtColor(np.asarray(bgr, np.float32).reshape(1, 1, 3) / 255.0, cv2.COLOR_BGR2Lab)
    return float(np.hypot(lab[0, 0, 1], lab[0, 0, 2]))


def _lighter_mean(
    image: NDArray[np.float32], mask: NDArray[np.uint8]
) -> NDArray[np.float32] | None:
    """(3,) mean colour of the masked pixels at least as light as their mean (the
    white without the lids' shadow and lashes); None under four pixels."""
    if cv2.countNonZero(mask) < 4:
        return None
    luma = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
    lighter = cv2.compare(luma, cv2.mean(luma, mask)[0], cv2.CMP_GE) & mask
    return np.array(cv2.mean(image, lighter)[:3], np.float32)


def _white_against_lids(
    white: NDArray[np.float32], back: NDArray[np.float32], opening: NDArray[np.uint8]
) -> NDArray[np.float32]:
    """``white`` lightened, its tint kept, to WHITE_MIN_OF_LIDS of the lids' skin
    around ``opening`` (the lighter part of a band about a third of the opening's
    height wide, within ``back``) where it reads darker."""
    k = max(3, int(0.6 * np.sqrt(cv2.countNonZero(opening)))) | 1
    band = cv2.dilate(opening, np.ones((k, k), np.uint8)) & cv2.bitwise_not(opening)
    lids = _lighter_mean(back, band)
    if lids is None:
        return white
    floor = WHITE_MIN_OF_LIDS * float(LUMA_BGR @ lids)
    level = float(LUMA_BGR @ white)
    if level >= floor:
        return white
    return (white * (floor / max(level, 1.0))).astype(np.float32)


def eye_patch(
    image: NDArray[np.generic],
    lids: NDArray[np.floating],
    iris_5: NDArray[np.floating],
    corners: NDArray[np.floating],
) -> EyePatch | None:
    """The eyeball in iris coordinates, the hidden part of the iris filled in.

    Args:
        image: (H, W, 3) the photo.
        lids: (K, 2) the eye opening's boundary ring in image points.
        iris_5: (5, 2) the iris points (see :func:`iris_affine`).
        corners: (2, 2) the eye's corners, image-left first.

    Returns:
        The :class:`EyePatch` (not ``balanced`` where its "white" is as colourful
        as the skin around the eye, see MAX_WHITE_CHROMA), or None when the photo
        shows too little of the iris or of the white, no white lighter than the iris
        (a squint, a lens's glare, a shadow), or an iris under MIN_IRIS_RADIUS_PX
        (a small face).
    """
    pw, ph = patch_size()
    affine = iris_affine(iris_5)
    centre, across, width = _eye_frame(lids, corners)
    radius = float(np.sqrt(abs(np.linalg.det(affine[:, :2]))))
    if radius < MIN_IRIS_RADIUS_PX:
        return None
    size = radius / width
    gaze = across.T @ (affine[:, 2] - centre) / width
    to_image = patch_to_image(affine)
    patch = cv2.warpAffine(
        np.asarray(image),
        to_image,
        (pw, ph),
        flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
        borderMode=cv2.BORDER_REPLICATE,
    ).astype(np.float32)
    to_patch = cv2.invertAffineTransform(to_image)
    ring = np.asarray(lids, np.float64)[:, :2] @ to_patch[:, :2].T + to_patch[:, 2]
    opening = np.zeros((ph, pw), np.uint8)
    cv2.fillPoly(opening, [np.round(ring * 16).astype(np.int32)], 255, cv2.LINE_8, shift=4)
    # The lid margin's own pixels (lashes, their shadow) are not eyeball.
    margin = 2 * int(round(LID_MARGIN * PATCH_RES)) + 1
    opening = cv2.erode(opening, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (margin, margin))) > 0
    r = _iris_radius_grid(pw, ph, _patch_to_iris()[:2])
    iris = r < 1.0
    seen_iris = iris & opening
    # The white: clear of the iris's dark rim.
    seen_white = opening & (r > WHITE_FROM)
    if (
        seen_iris.sum() < MIN_IRIS_SEEN * np.pi * PATCH_RES**2
        or seen_white.sum() < MIN_WHITE_SEEN * PATCH_RES**2
    ):
        return None
    white = _lighter_mean(patch, seen_white.astype(np.uint8) * 255)
    assert white is not None  # seen_white has at least MIN_WHITE_SEEN squared radii
    iris_luma = float(patch[seen_iris].mean(0) @ LUMA_BGR)
    if float(white @ LUMA_BGR) - iris_luma < MIN_CONTRAST:
        return None
    # Most of it must be lighter than the iris too (see MIN_WHITE_MEDIAN_CONTRAST).
    if float(np.median(patch[seen_white] @ LUMA_BGR)) - iris_luma < MIN_WHITE_MEDIAN_CONTRAST:
        return None
    # A white as colourful as the lids' skin is not a white to balance on (a squint the
    # mesh read as open, a lens's tint).
    lids_skin = ~cv2.dilate(opening.astype(np.uint8), np.ones((9, 9), np.uint8)).astype(bool)
    skin_chroma = _chroma(np.median(patch[lids_skin], axis=0))
    balanced = not (
        skin_chroma >= MIN_SKIN_CHROMA and _chroma(white) > MAX_WHITE_CHROMA * skin_chroma
    )
    # Iris: the vertical mirror where the other lid showed it, else its radial profile.
    bins = np.minimum((r * 8).astype(np.int32), 7)
    counts = np.bincount(bins[seen_iris], minlength=8).astype(np.float64)
    profile = np.stack(
        [np.bincount(bins[seen_iris], patch[..., c][seen_iris], minlength=8) for c in range(3)],
        axis=1,
    )
    have = counts > 0
    centres = np.arange(8, dtype=np.float64)
    profile = np.stack(
        [np.interp(centres, centres[have], profile[have, c] / counts[have]) for c in range(3)],
        axis=1,
    )
    iris_fill = profile[bins].astype(np.float32)
    mirrored_seen = seen_iris[::-1]
    iris_fill[mirrored_seen] = patch[::-1][mirrored_seen]
    # Soft edges: the iris disc anti-aliased, the seen opening feathered by a pixel.
    in_iris = np.clip((1.0 - r) * PATCH_RES + 0.5, 0.0, 1.0).astype(np.float32)
    shown = cv2.GaussianBlur(opening.astype(np.float32), (0, 0), 1.0) * opening
    pixels = shown[..., None] * patch + (1.0 - shown[..., None]) * iris_fill
    alpha = np.maximum(shown, in_iris)
    return EyePatch(
        pixels.astype(np.float32), alpha.astype(np.float32), white, size, gaze, balanced
    )


def white_gain(
    source_white: NDArray[np.floating], target_white: NDArray[np.floating]
) -> NDArray[np.float32]:
    """(3,) per-channel gain taking one white to the other, its overall level within
    WHITE_GAIN_RANGE and its tint (each channel against the mean gain) within
    WHITE_TINT_RANGE."""
    gain = np.asarray(target_white, np.float64) / np.maximum(source_white, 1.0)
    lo, hi = WHITE_GAIN_RANGE
    level = min(max(float(gain.mean()), lo), hi)
    tint = np.minimum(
        np.maximum(gain / max(float(gain.mean()), 1e-6), 1.0 / WHITE_TINT_RANGE),
        WHITE_TINT_RANGE,
    )
    return (level * tint).astype(np.float32)


def _opening_box(
    ring: NDArray[np.float32], shape: tuple[int, int]
) -> tuple[int, int, int, int] | None:
    """(x0, y0, x1, y1) the pixels an eye opening's ring covers, with a pixel's margin
    for antialiasing, within a canvas of ``shape`` (height, width); None under two
    pixels either way."""
    h, w = shape
    (x0f, y0f), (x1f, y1f) = ring.min(0), ring.max(0)
    x0, y0 = max(int(x0f) - 1, 0), max(int(y0f) - 1, 0)
    x1, y1 = min(int(x1f) + 3, w), min(int(y1f) + 3, h)
    if x1 - x0 < 2 or y1 - y0 < 2:
        return None
    return x0, y0, x1, y1


def eye_placement(
    patch: EyePatch,
    lids: NDArray[np.floating],
    iris_5: NDArray[np.floating],
    corners: NDArray[np.floating],
    *,
    gaze: str = "target",
) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
    """Where :func:`paint_eye` draws ``patch``: ((2, 3) the target's own iris fit,
    (2, 3) the iris drawn), both iris coordinates -> canvas points; None where
    ``iris_5`` fits no plausible iris. Arguments as for :func:`paint_eye`."""
    affine = iris_affine(iris_5)
    (cx0, cy0), (cx1, cy1) = np.asarray(corners, np.float64)[:, :2].tolist()
    width = math.hypot(cx1 - cx0, cy1 - cy0)
    if not plausible_iris(affine, width):
        return None
    own_iris = affine.copy()
    radius = math.sqrt(abs(affine[0, 0] * affine[1, 1] - affine[0, 1] * affine[1, 0]))
    affine[:, :2] *= min(max(patch.size * width / radius, 1.0 / IRIS_MAX_SCALE), IRIS_MAX_SCALE)
    if gaze == "source":
        centre, across, _ = _eye_frame(np.asarray(lids, np.float32)[:, :2], corners)
        affine[:, 2] = centre + across @ patch.gaze * width
    return own_iris, affine


@functools.lru_cache(maxsize=8)
def _patch_band(patch: EyePatch, blur: float) -> NDArray[np.float32]:
    """A patch's luma finer than a Gaussian of ``blur`` patch pixels, where it holds
    the photographed eye but not the photo's own lid edge (where its opening ends
    the band holds the step from its white to its lids: the opening is shrunk by the
    blur's reach). Cached: a video's frames ask for the same few blurs."""
    luma = cv2.cvtColor(patch.pixels, cv2.COLOR_BGR2GRAY)
    band = cv2.subtract(luma, cv2.GaussianBlur(luma, (0, 0), blur))
    reach = 2 * int(math.ceil(2.0 * blur)) + 1
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (reach, reach))
    return np.asarray(cv2.multiply(band, cv2.erode(patch.alpha, kernel)), np.float32)


def eye_detail(
    patch: EyePatch,
    lids: NDArray[np.floating],
    iris_5: NDArray[np.floating],
    corners: NDArray[np.floating],
    shape: tuple[int, int],
    sigma: float,
    *,
    gaze: str = "target",
) -> tuple[tuple[slice, slice], NDArray[np.float32]] | None:
    """The photo's eyeball detail finer than ``sigma`` canvas pixels, where
    :func:`paint_eye` draws it on a canvas of ``shape`` (height, width): the luma's
    difference from its Gaussian blur, inside the opening and where the patch holds
    the photographed eye (not the filled-in white, nor the photo's own lid edge).
    Returns the region (rows, columns) and its (h, w) float32 detail; None where
    nothing is drawn."""
    ring = np.asarray(lids, np.float32)[:, :2]
    openness = open_share(ring, corners)
    box = None if openness <= 0.0 else _opening_box(ring, shape)
    placed = None if box is None else eye_placement(patch, ring, iris_5, corners, gaze=gaze)
    if box is None or placed is None:
        return None
    x0, y0, x1, y1 = box
    affine = placed[1]
    affine[:, 2] -= (x0, y0)
    to_region = patch_to_image(affine)
    # The blur in patch pixels: a canvas pixel spans scale patch pixels.
    scale = PATCH_RES / max(math.sqrt(abs(np.linalg.det(affine[:, :2]))), 1e-6)
    band = _patch_band(patch, round(max(sigma * scale, 0.3), 1))
    size = (x1 - x0, y1 - y0)
    detail = cv2.warpAffine(band, to_region, size, borderMode=cv2.BORDER_CONSTANT)
    inside = np.zeros((size[1], size[0]), np.uint8)
    cv2.fillPoly(inside, [((ring - (x0, y0)) * 16).astype(np.int32)], 255, cv2.LINE_AA, shift=4)
    detail = cv2.multiply(detail, inside, scale=openness / 255.0, dtype=cv2.CV_32F)
    return (slice(y0, y1), slice(x0, x1)), np.asarray(detail, np.float32)


def paint_eye(
    canvas: NDArray[np.float32],
    patch: EyePatch,
    lids: NDArray[np.floating],
    iris_5: NDArray[np.floating],
    corners: NDArray[np.floating],
    backdrop: NDArray[np.float32],
    visible: NDArray[np.uint8] | None = None,
    *,
    gaze: str = "target",
    space: str = "target",
    colour: float = 1.0,
) -> bool:
    """Paint an eye patch into ``canvas`` inside the opening ``lids``, in place.

    In ``space="target"`` the eye is drawn in the target's colours: the photo's
    eyeball times a gain per channel that takes the photo's white to the target's (a
    white balance and exposure; the white of an eye is about the same for everyone,
    so the gain is the light's). A brown iris stays brown on any target; matched with
    the skin's colour transfer it was shifted towards blue on a lighter-skinned
    target. In ``space="source"`` it is drawn in the photo's colours, the target's
    white brought to the photo's (for an eye that is not ``balanced``, before the
    skin's colour map; or with no colour match at all).

    Args:
        canvas: (H, W, 3) float32 image to paint into, in the target's colours.
        patch: from :func:`eye_patch`.
        lids: (K, 2) the opening's boundary ring in canvas points.
        iris_5: (5, 2) the iris points in canvas points: where the iris goes.
        corners: (2, 2) the eye's corners in canvas points, image-left first: the
            iris is drawn at the photo's size against the eye's width
            (``patch.size``), within IRIS_MAX_SCALE of the fitted one.
        backdrop: (H, W, 3) float32 the target's own eye at the same place: its
            white sets the gain, and where the source's lids hid the white, the
            backdrop's white shows (with the shadow its lids cast).
        visible: optional uint8 mask, 255 where the opening is not hidden behind
            nearer geometry (a turned head's nose), on a grid of any size over the
            whole canvas (aligned as ``cv2.resize`` aligns the two).
        gaze: ``target``: the iris goes where ``iris_5`` has it; ``source``: where
            the photo's iris sat in its opening (``patch.gaze``), the gaze of the
            photo.
        space: ``target`` or ``source``: the colours the canvas holds (above).
        colour: the share of the eye's chroma kept, around the target's white's tint
            (0 on a black-and-white target, as its skin's colour map does; in the
            source space the colour map sees to that).

    Returns:
        False, and nothing painted, where ``iris_5`` fits no plausible iris (see
        :func:`plausible_iris`), the opening is under two pixels or shows no white
        to measure, or the lids are nearly closed (:func:`open_share`; a narrow
        opening takes the eye faded by it, over the canvas as it was).
    """
    h, w = canvas.shape[:2]
    ring = np.asarray(lids, np.float32)[:, :2]
    openness = open_share(ring, corners)
    box = None if openness <= 0.0 else _opening_box(ring, (h, w))
    placed = None if box is None else eye_placement(patch, ring, iris_5, corners, gaze=gaze)
    if box is None or placed is None:
        return False
    x0, y0, x1, y1 = box
    own_iris, affine = placed
    # From here on, in the region's pixels.
    own_iris[:, 2] -= (x0, y0)  # where the target's own iris is (its backdrop's iris)
    affine[:, 2] -= (x0, y0)
    size = (x1 - x0, y1 - y0)
    to_region = patch_to_image(affine)
    pixels = cv2.warpAffine(patch.pixels, to_region, size, borderMode=cv2.BORDER_REPLICATE)
    alpha = cv2.warpAffine(patch.alpha, to_region, size, borderMode=cv2.BORDER_REPLICATE)
    inside = np.zeros((size[1], size[0]), np.uint8)
    cv2.fillPoly(inside, [((ring - (x0, y0)) * 16).astype(np.int32)], 255, cv2.LINE_AA, shift=4)
    if visible is not None:
        kx, ky = visible.shape[1] / w, visible.shape[0] / h
        to_grid = np.array([[kx, 0.0, (x0 + 0.5) * kx - 0.5], [0.0, ky, (y0 + 0.5) * ky - 0.5]])
        shown = cv2.warpAffine(
            visible, to_grid, size, flags=cv2.WARP_INVERSE_MAP, borderMode=cv2.BORDER_REPLICATE
        )
        inside = cv2.multiply(inside, shown, scale=1.0 / 255.0)
    weight = inside.astype(np.float32) * np.float32(openness / 255.0)
    # The target's white: inside the opening, clear of its own iris, its lighter part.
    # Where the photo's lids hid the white, the target's eye shows: the shadow its
    # lids cast stays (under the upper lid the iris's rim reads as that shadow).
    # Where the iris has moved away from the target's own (gaze "source"), the
    # target's iris would show twice: there its white, in the shade of the lids.
    back = backdrop[y0:y1, x0:x1]
    clear = cv2.warpAffine(
        patch.clear_of_iris,
        patch_to_image(own_iris),
        size,
        flags=cv2.INTER_NEAREST,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=255,
    )
    opening = cv2.compare(inside, 127, cv2.CMP_GT)
    target_white = _lighter_mean(back, clear & opening)
    if target_white is None:
        return False
    target_white = _white_against_lids(target_white, back, opening)
    # The fill and the white over the target's own iris, in the canvas's colours.
    white = target_white
    fill = back
    if space == "source":
        white = patch.white
        fill = back * (white / np.maximum(target_white, 1.0)).astype(np.float32)
    if gaze == "source":
        fill = fill.copy()
        cv2.copyTo(np.full_like(back, 1.0) * (SHADED_WHITE * white), 255 - clear, fill)
    if space == "target":
        pixels *= white_gain(patch.white, target_white)
        if colour < 1.0:
            # x' = (Q + c P) x + (1 - c) P white: Q onto the grey axis, P = I - Q.
            grey = np.full((3, 3), 1.0 / 3.0)
            chroma = np.eye(3) - grey
            keep = grey + colour * chroma
            offset = (1.0 - colour) * chroma @ target_white
            pixels = cv2.transform(pixels, np.hstack([keep, offset[:, None]]))
    eye = cv2.blendLinear(pixels, fill, alpha, 1.0 - alpha)
    # canvas += weight * (eye - canvas): exactly unchanged where the weight is 0.
    roi = canvas[y0:y1, x0:x1]
    eye -= roi
    eye *= weight[..., None]
    roi += eye
    return True
