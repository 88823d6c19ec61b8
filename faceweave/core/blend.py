"""Compositing a rendered face onto a frame: feathered masks and three blends.

Dtype policy: foregrounds are ``uint8`` or ``float32`` BGR in ``0..255``,
backgrounds ``uint8`` BGR, masks ``float32`` in ``[0, 1]`` (other inputs are
clipped into that range). Blends work in ``float32`` and return ``uint8`` BGR,
rounded half-to-even and saturated.

Every mode leaves pixels whose mask is 0 *and* which are far from the mask's
support bit-exactly equal to the background, so a swap never touches the rest
of the frame:

* ``"alpha"``: every pixel with mask 0.
* ``"multiband"``: every pixel farther than ``3 * 2**(levels - 1)`` px
  (Chebyshev distance) from a pixel with mask > 0.
* ``"poisson"``: every pixel with mask 0.
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.errors import InputError
from faceweave.types import Frame, Mask

BLEND_MODES = ("alpha", "multiband", "poisson")

_MAX_LEVELS = 5
_MIN_COARSE_SIDE = 8
# Reflected border around the Poisson problem: seamlessClone clears the outer pixel
# of its mask and needs the region to sit strictly inside the destination.
_POISSON_PAD = 8
# seamlessClone fails inside OpenCV on regions whose bounding box is under 3 px a side.
_POISSON_MIN_SIDE = 3

# What OpenCV returns: the stubs type it as Mat | integer-or-float array.
_CvImage = NDArray[Any]


def _check_same_hw(**arrays: NDArray[np.generic]) -> tuple[int, int]:
    """Raise :class:`InputError` unless all arrays share the first array's (H, W).

    Returns:
        The common (H, W).
    """
    items = list(arrays.items())
    first_name, first = items[0]
    height_width = (int(first.shape[0]), int(first.shape[1])) if first.ndim >= 2 else (-1, -1)
    for name, array in items:
        if array.ndim < 2 or tuple(array.shape[:2]) != height_width:
            raise InputError(
                f"{name} has shape {array.shape}; expected (H, W) = {height_width} "
                f"to match {first_name}"
            )
    return height_width


def _as_mask(mask: NDArray[np.generic]) -> Mask:
    """A float32 copy of a (H, W) mask clipped to [0, 1]."""
    array = np.asarray(mask)
    if array.ndim != 2:
        raise InputError(f"mask must be (H, W), got shape {array.shape}")
    clipped: Mask = np.clip(array, 0.0, 1.0).astype(np.float32)
    if np.isnan(clipped).any():
        raise InputError("mask contains NaN")
    return clipped


def _bgr(name: str, image: NDArray[np.generic]) -> NDArray[np.generic]:
    array = np.asarray(image)
    if array.ndim != 3 or array.shape[2] != 3:
        raise InputError(f"{name} must be a (H, W, 3) BGR image, got shape {array.shape}")
    return array


def _to_uint8(image: NDArray[np.floating]) -> Frame:
    """Round half-to-even and saturate; one OpenCV pass instead of three numpy ones."""
    source = np.ascontiguousarray(image, dtype=np.float32)
    frame: Frame = cv2.add(source, 0.0, dtype=cv2.CV_8U)  # type: ignore[call-overload]
    return frame


def _three(mask: Mask) -> NDArray[np.float32]:
    # OpenCV arithmetic instead of numpy broadcasting: numpy's 3-long inner loop is slow.
    merged: _CvImage = cv2.merge([mask, mask, mask])
    return merged


def feather(mask: Mask, radius: int) -> Mask:
    """Soften a mask's edge without letting it grow.

    The mask is eroded by ``radius`` (square structuring element) and then
    blurred with a Gaussian truncated at ``radius`` (sigma ``radius / 3``), so
    the result is 0 wherever the input is 0, never exceeds the input, and
    ramps from 0 at the original edge to full strength ``2 * radius`` px
    inside it. Edges on the image border are not feathered: the face may
    continue outside the frame.

    Args:
        mask: the hard or soft mask, clipped to [0, 1].
        radius: feather half-width in pixels; 0 returns a float32 copy.

    Returns:
        The feathered mask, float32 in [0, 1].

    Raises:
        InputError: the mask is not 2-D or the radius is negative.

    Shape:
        - mask: (H, W).
        - output: (H, W).

    Example:
        >>> soft = feather(hull_mask, 12)
    """
    if radius < 0:
        raise InputError(f"feather radius must be >= 0, got {radius}")
    hard = _as_mask(mask)
    radius = int(radius)
    if radius == 0:
        return hard
    size = 2 * radius + 1
    # Square erosion of r then a blur reaching r (Chebyshev) cannot leak past the support.
    eroded: _CvImage = cv2.erode(hard, cv2.getStructuringElement(cv2.MORPH_RECT, (size, size)))
    blurred: _CvImage = cv2.GaussianBlur(
        eroded, (size, size), sigmaX=radius / 3.0, borderType=cv2.BORDER_REPLICATE
    )
    # The blur may round a hair above the input or below 0; the bounds are part of the contract.
    feathered: Mask = np.clip(np.minimum(blurred, hard), 0.0, 1.0, out=blurred)
    return feathered


def _default_levels(height: int, width: int) -> int:
    levels = 1
    while levels < _MAX_LEVELS and min(height, width) / 2**levels >= _MIN_COARSE_SIDE:
        levels += 1
    return levels


def _alpha(foreground: NDArray[np.float32], background: NDArray[np.float32], mask: Mask) -> Frame:
    # fg * m + bg * (1 - m), not bg + m * (fg - bg): exact at m == 0 and m == 1.
    weights = _three(mask)
    mixed: _CvImage = cv2.multiply(foreground, weights)
    mixed += cv2.multiply(background, np.float32(1.0) - weights)
    return _to_uint8(mixed)


def _reach_limiter(mask: Mask, reach: int) -> NDArray[np.float32]:
    """1 within ``reach`` px of the support, ramping to exactly 0 by ``3 * reach``.

    For a reach of 8 to 64 px that is a multiple of 4 (the multiband blend's are
    powers of two) it is worked out in blocks of ``reach / 4`` px (a smooth ramp
    needs no finer grid; half the time at a face's size): a block counts as
    support if any pixel in it does, the support grows by 8 blocks, and a 5-block
    box blur ramps it down, so blocks within 6 of the support read 1 and blocks 11
    or more away read 0. Bilinear upsampling reads the blocks next to a pixel's own:
    within ``reach`` (4 blocks) a pixel only reads blocks at most 6 away, and past
    ``3 * reach`` (12 blocks) only blocks at least 11 away.
    """
    h, w = mask.shape[:2]
    support = (mask > 0.0).astype(np.uint8) * np.uint8(255)
    block = reach // 4
    # Past 16 px a block's area mean of a lone support pixel rounds to 0 in bytes.
    if block < 2 or block > 16 or reach % 4:
        grown = cv2.dilate(support, cv2.getStructuringElement(cv2.MORPH_RECT, (4 * reach + 1,) * 2))
        ramp: _CvImage = cv2.blur(
            grown, (2 * reach + 1, 2 * reach + 1), borderType=cv2.BORDER_REPLICATE
        )
        return _three(ramp.astype(np.float32) * np.float32(1 / 255))
    bh, bw = -(-h // block), -(-w // block)
    padded = cv2.copyMakeBorder(support, 0, bh * block - h, 0, bw * block - w, cv2.BORDER_CONSTANT)
    # An area filter by a whole factor is fast; any support pixel leaves a block above 0.
    blocks = cv2.resize(padded, (bw, bh), interpolation=cv2.INTER_AREA)
    blocks = cv2.compare(blocks, 0, cv2.CMP_GT)
    grown = cv2.dilate(blocks, cv2.getStructuringElement(cv2.MORPH_RECT, (17, 17)))
    ramp = cv2.blur(
        grown.astype(np.float32) * np.float32(1 / 255), (5, 5), borderType=cv2.BORDER_REPLICATE
    )
    # Pixel centres map onto block centres, as the blocks were cut: (x + 0.5) / block - 0.5.
    up: _CvImage = cv2.resize(ramp, (bw * block, bh * block), interpolation=cv2.INTER_LINEAR)
    return _three(np.ascontiguousarray(up[:h, :w]))


def _multiband(
    foreground: NDArray[np.float32], background: NDArray[np.float32], mask: Mask, levels: int
) -> Frame:
    # Blending the Laplacian pyramids of fg and bg equals adding the blended pyramid of
    # (fg - bg) to bg, since pyramids are linear: one pyramid instead of two.
    difference: list[_CvImage] = [cv2.subtract(foreground, background)]
    weights: list[_CvImage] = [_three(mask)]
    for _ in range(levels - 1):
        difference.append(cv2.pyrDown(difference[-1]))
        weights.append(cv2.pyrDown(weights[-1]))
    blended: _CvImage = cv2.multiply(difference[-1], weights[-1])
    for level in range(levels - 2, -1, -1):
        size = (difference[level].shape[1], difference[level].shape[0])
        detail = cv2.subtract(difference[level], cv2.pyrUp(difference[level + 1], dstsize=size))
        blended = cv2.pyrUp(blended, dstsize=size)
        blended += cv2.multiply(detail, weights[level])
    # The coarse levels spread the mask ~4 * 2**(levels-1) px; the limiter keeps that from
    # tinting hair and background and makes far pixels bit-exact.
    blended = cv2.multiply(blended, _reach_limiter(mask, 2 ** (levels - 1)))
    return _to_uint8(cv2.add(background, blended))


def _poisson(
    foreground: NDArray[np.float32], background: Frame, mask: Mask
) -> NDArray[np.float32] | None:
    """Seamless-cloned foreground, or None when the region with mask > 0.5 is too small."""
    binary = (mask > 0.5).astype(np.uint8) * np.uint8(255)
    if not binary.any():
        return None
    pad = _POISSON_PAD
    padded_mask = cv2.copyMakeBorder(binary, pad, pad, pad, pad, cv2.BORDER_CONSTANT, value=(0,))
    padded_fg = cv2.copyMakeBorder(_to_uint8(foreground), pad, pad, pad, pad, cv2.BORDER_REFLECT)
    padded_bg = cv2.copyMakeBorder(background, pad, pad, pad, pad, cv2.BORDER_REFLECT)
    x, y, width, height = cv2.boundingRect(padded_mask)
    if min(width, height) < _POISSON_MIN_SIDE:
        return None
    # seamlessClone places the mask's bounding box at centre - size // 2; this centre
    # puts it back exactly where it came from.
    centre = (x + width // 2, y + height // 2)
    cloned = cv2.seamlessClone(padded_fg, padded_bg, padded_mask, centre, cv2.NORMAL_CLONE)
    result: NDArray[np.float32] = np.asarray(cloned[pad:-pad, pad:-pad], dtype=np.float32)
    return result


def blend(
    foreground: NDArray[np.generic],
    background: Frame,
    mask: Mask,
    *,
    mode: str = "multiband",
    levels: int | None = None,
) -> Frame:
    """Composite ``foreground`` over ``background`` where ``mask`` says so.

    Modes:

    * ``"alpha"``: ``fg * m + bg * (1 - m)``.
    * ``"multiband"``: Laplacian-pyramid blending (Burt & Adelson 1983): low
      frequencies cross the seam over a wide band, fine detail over a narrow
      one. The mask's influence is then limited to ``3 * 2**(levels - 1)`` px
      around its support, so far pixels are exactly the background.
    * ``"poisson"``: gradient-domain cloning (``cv2.seamlessClone``,
      ``NORMAL_CLONE``) of the region where ``mask > 0.5``, composited with the
      soft mask to keep its feather. Falls back to alpha when the region
      above 0.5 is empty or under 3 px across. Masks touching the image
      border are handled by reflect-padding.

    Args:
        foreground: the face image, uint8 or float32 BGR in 0..255.
        background: the frame, uint8 BGR.
        mask: where the foreground is used, float32 in [0, 1] (clipped).
        mode: one of :data:`BLEND_MODES`.
        levels: pyramid levels for ``"multiband"`` (1 is alpha blending);
            default: up to 5, keeping the coarsest side >= 8 px. Ignored by the
            other modes.

    Returns:
        The composite, uint8 BGR. Where the mask is 0 everywhere, a copy of
        ``background``.

    Raises:
        InputError: unknown mode, bad levels, or shapes that do not match.

    Shape:
        - foreground, background: (H, W, 3).
        - mask: (H, W).
        - output: (H, W, 3) uint8.

    Example:
        >>> frame = blend(warped_face, frame, feather(face_mask, 10), mode="multiband")
    """
    if mode not in BLEND_MODES:
        raise InputError(f"unknown blend mode {mode!r}; expected one of {BLEND_MODES}")
    foreground_array = _bgr("foreground", foreground)
    background_array = _bgr("background", background)
    if background_array.dtype != np.uint8:
        raise InputError(f"background must be uint8, got {background_array.dtype}")
    background_frame: Frame = np.asarray(background_array, dtype=np.uint8)
    height, width = _check_same_hw(
        background=background_frame, foreground=foreground_array, mask=np.asarray(mask)
    )
    weights = _as_mask(mask)
    if not weights.any():
        return background_frame.copy()
    if levels is None:
        levels = _default_levels(height, width)
    elif not 1 <= levels <= 16:
        raise InputError(f"levels must be in [1, 16], got {levels}")

    foreground_float = np.ascontiguousarray(foreground_array, dtype=np.float32)
    background_float = background_frame.astype(np.float32)
    if mode == "poisson":
        cloned = _poisson(foreground_float, background_frame, weights)
        if cloned is not None:
            foreground_float = cloned
    elif mode == "multiband" and levels > 1:
        return _multiband(foreground_float, background_float, weights, levels)
    return _alpha(foreground_float, background_float, weights)
