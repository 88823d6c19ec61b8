"""Colour statistics transfer between a source face and a target face.

Dtype policy: images come in as ``uint8`` or ``float32`` BGR with values in
``0..255``; everything returned is ``float32`` BGR clipped to ``[0, 255]``.
Statistics are accumulated in ``float64``.

Two modes are implemented here:

* ``"rct"``: Reinhard et al. 2001, per-channel mean/std matching in CIE L*a*b*
  (OpenCV's float conversion: ``L`` in ``0..100``).
* ``"lct"``: linear covariance transfer in BGR, ``x' = T (x - mu_s) + mu_t`` with
  ``T = Cs^{-1/2} (Cs^{1/2} Ct Cs^{1/2})^{1/2} Cs^{-1/2}``, which maps the source
  covariance exactly onto the target covariance (``T Cs T^T = Ct``) and, of all
  the maps that do, moves the colours least (the linear Monge-Kantorovich map,
  Pitie and Kokaram 2007; it is symmetric). ``Ct^{1/2} Cs^{-1/2}`` matches the
  same covariance with a rotation in it: it turned an old source's wrinkles,
  redder than its skin, into red lines on a cooler-skinned target.

Both can be told to limit how far they change the face's contrast
(``gain_range``): a target whose skin varies more than the source's (hard or low-key
light, stubble) would otherwise scale the source's dark features (brows, lashes,
make-up) by that ratio too, and they clip to black.

Both can also keep black near black (``anchor_black``): an affine map's offset moves
black to a grey or a colour cast (a dark-skinned source's pupils turned a dull
blue-green on a pale target), or pushes dark features below black. The offset is faded out below
the source skin's mean lightness, smoothly, to half at black. With ``lct`` the map
gives way below that mean to one whose colour is a change of exposure (a gain per
channel), so that dark features darken or lighten like the skin and take no cast
from the offset's colour.

``"sh"`` (spherical-harmonics relighting) needs 3D normals and is done by the
caller with :mod:`faceweave.core.lighting`; here it, like ``"none"``, returns the
source unchanged.
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.errors import InputError
from faceweave.types import FloatImage, Mask

COLOR_MODES = ("none", "rct", "lct", "sh")

# Fewer pixels than this give statistics too noisy to transfer.
_MIN_PIXELS = 16
# Statistics of a face are stable long before 20k samples; more only costs time.
_MAX_SAMPLES = 20_000
# The colour match takes the skin's median colour to the target's, not its mean: a dark
# target's highlights (p24's sweaty brow) pulled the mean up, and the face came out 7
# L levels lighter than his skin (the source's shadows pull its mean down alike). On the
# development pairs retrieval 281 -> 283, landmark error 0.0950 -> 0.0937, d(out, src)
# 0.5650 -> 0.5669. Taken from at most this many of the samples: 0.06 ms a match,
# against 0.65 from all 20k (numpy's partition slows past a few thousand); from 4096
# the dev clips' flicker rose by 0.005-0.03 over the mean's, from 8192 by 0.003-0.02.
_MEDIAN_SAMPLES = 8192
# Floor of a LAB channel's std (L in 0..100): a flat source channel is shifted, not blown up.
_LAB_STD_FLOOR = 0.5
# Ridge on BGR covariances, gray levels squared: an absolute part (about one gray
# level of std) plus a relative part, so grey (rank-1) images stay well-conditioned.
_COV_RIDGE_ABS = 1.0
_COV_RIDGE_REL = 1e-3
# Luma weights of BGR (ITU-R BT.601): a covariance's contrast, an eye's white against its iris.
LUMA_BGR = np.array([0.114, 0.587, 0.299])
# Projection onto the grey axis (B = G = R).
_GREY = np.full((3, 3), 1.0 / 3.0)
# anchor_black: the share of the colour map's offset that is faded out at black. At a
# half, the map's slope at black is the skin's own gain (mean over mean, as a change
# of exposure gives), so the source's darks are not stretched. Fading all of it made a
# low-key source's shadows (p18) and the background a profile source (p15) shows
# between its brows stand out black on a light target.
_BLACK_ANCHOR = 0.5
# anchor_black, lct: towards black the map gives way to one coloured as a change of
# exposure, whose per-channel gain is at most this factor either way (see _anchored).
_EXPOSURE_GAIN_MAX = 4.0
# Below this share of variance off the grey axis a target counts as black and white
# (fading to colour at twice it).
_MONO_CHROMA = 0.002


def _masked_pixels(
    pixels_or_image: NDArray[np.generic],
    mask: NDArray[np.generic],
    *,
    min_weight: float,
    max_samples: int = _MAX_SAMPLES,
) -> NDArray[np.float32]:
    """Pixels whose mask weight is at least ``min_weight``, strided down to ``max_samples``.

    Shape:
        - pixels_or_image: (H, W, C) with mask (H, W), or (N, C) with mask (N,).
        - output: (M, C) float32, M <= max_samples.
    """
    data = np.asarray(pixels_or_image)
    weights: NDArray[Any] = np.asarray(mask)
    if data.ndim not in (2, 3) or weights.shape != data.shape[:-1]:
        raise InputError(
            f"mask of shape {weights.shape} does not match pixels of shape {data.shape}; "
            "expected (H, W, C) with (H, W) or (N, C) with (N,)"
        )
    index = np.flatnonzero(weights.reshape(-1) >= min_weight)
    if index.size < _MIN_PIXELS:
        raise InputError(
            f"only {index.size} pixels have mask >= {min_weight}; at least {_MIN_PIXELS} needed"
        )
    if index.size > max_samples:
        # A regular stride keeps the sample spread over the whole face.
        index = index[:: -(-index.size // max_samples)]
    # np.take is ~3x faster than fancy indexing for gathering (N, 3) rows.
    selected = np.take(data.reshape(-1, data.shape[-1]), index, axis=0)
    return selected.astype(np.float32, copy=False)


def _median(samples: NDArray[np.floating]) -> NDArray[np.float64]:
    """Each channel's median of (N, C) samples, from at most _MEDIAN_SAMPLES of them
    (a regular stride; see _MEDIAN_SAMPLES)."""
    step = max(1, -(-samples.shape[0] // _MEDIAN_SAMPLES))
    columns = np.ascontiguousarray(samples[::step].T)
    middle = columns.shape[1] // 2
    return np.partition(columns, middle, axis=1)[:, middle].astype(np.float64)


def _mean_cov(samples: NDArray[np.floating]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Mean and (population) covariance of (N, C) samples, in float64."""
    values = samples.astype(np.float64, copy=False)
    count = values.shape[0]
    # Raw moments: numpy's axis-0 reductions over (N, 3) are strided and several times
    # slower. In float64 the cancellation error is ~1e-11 for 0..255 data. The mean by
    # OpenCV, not a BLAS matrix-vector product: OpenBLAS splits one over these sizes
    # across its threads, and waking them (or, with the cores busy, waiting for them)
    # cost more than the sum (the (C, C) product, of at most _MAX_SAMPLES, stays under
    # its threading threshold).
    channels = values.shape[1]
    mean = (
        np.array(cv2.mean(values.reshape(count, 1, channels))[:channels])
        if channels <= 4  # (cv2.mean's limit)
        else values.mean(0)
    )
    cov = values.T @ values / count - np.outer(mean, mean)
    return mean, (cov + cov.T) / 2


def masked_mean_cov(
    pixels_or_image: NDArray[np.generic],
    mask: NDArray[np.generic],
    *,
    min_weight: float = 0.5,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Mean and covariance of the pixels a mask selects.

    Only pixels with ``mask >= min_weight`` count, each with equal weight, so the
    statistics are not diluted by the zeros outside the mask. Large selections
    are subsampled with a regular stride (at most 20 000 pixels).

    Args:
        pixels_or_image: an image or a list of pixels, any real dtype.
        mask: per-pixel weights, compared against ``min_weight``.
        min_weight: smallest mask value that selects a pixel.

    Returns:
        ``(mean, cov)``: the channel means and the population covariance, float64.

    Raises:
        InputError: the shapes do not match, or fewer than 16 pixels are selected.

    Shape:
        - pixels_or_image: (H, W, C) or (N, C).
        - mask: (H, W) or (N,).
        - mean: (C,); cov: (C, C).

    Example:
        >>> image = np.zeros((8, 8, 3), np.uint8); image[:, 4:] = 200
        >>> mean, cov = masked_mean_cov(image, (np.arange(8) >= 4) * np.ones((8, 1)))
        >>> mean.tolist()
        [200.0, 200.0, 200.0]
    """
    return _mean_cov(_masked_pixels(pixels_or_image, mask, min_weight=min_weight))


def _check_image_mask(name: str, image: NDArray[np.generic], mask: NDArray[np.generic]) -> None:
    """Raise :class:`InputError` unless ``image`` is (H, W, 3) and ``mask`` is (H, W)."""
    if image.ndim != 3 or image.shape[2] != 3:
        raise InputError(f"{name} must be a (H, W, 3) BGR image, got shape {image.shape}")
    if mask.shape != image.shape[:2]:
        raise InputError(
            f"{name}_mask has shape {mask.shape}, expected {image.shape[:2]} to match {name}"
        )


def _to_float(image: NDArray[np.generic]) -> NDArray[np.float32]:
    # OpenCV needs C-contiguous buffers; views (crops, channel flips) are copied once here.
    return np.ascontiguousarray(image, dtype=np.float32)


def _sqrt_and_inv_sqrt(
    cov: NDArray[np.float64], *, squared: bool = False
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Symmetric square root and inverse square root of a ridge-regularised covariance.

    ``squared``: ``cov`` is in squared covariance units (``S^1/2 C S^1/2``), and so is
    the ridge (both of its parts squared): the same regularisation once its root is
    taken. The covariance's ridge on that product had swamped its minor directions
    (a skin's chroma), so that matching a face to itself scaled its colours by 5-12%
    (by 2-7x without the caller's own ridge)."""
    if squared:
        ridge = _COV_RIDGE_ABS**2 + _COV_RIDGE_REL**2 * float(np.trace(cov)) / cov.shape[0]
    else:
        ridge = _COV_RIDGE_ABS + _COV_RIDGE_REL * float(np.trace(cov)) / cov.shape[0]
    eigenvalues, eigenvectors = np.linalg.eigh(cov + ridge * np.eye(cov.shape[0]))
    root = np.sqrt(np.maximum(eigenvalues, ridge))
    return (eigenvectors * root) @ eigenvectors.T, (eigenvectors / root) @ eigenvectors.T


def _lab(image_bgr: NDArray[np.float32]) -> NDArray[np.float32]:
    """BGR 0..255 -> L*a*b* (L 0..100); any leading shape with 3 channels last."""
    # A list of pixels goes in as one row: OpenCV's per-row overhead makes (N, 1) slow.
    shaped = image_bgr.reshape(1, -1, 3) if image_bgr.ndim != 3 else image_bgr
    lab: NDArray[np.float32] = cv2.cvtColor(shaped * np.float32(1 / 255), cv2.COLOR_BGR2Lab)
    return lab.reshape(image_bgr.shape)


def _rct(
    source: NDArray[np.generic],
    target: NDArray[np.generic],
    source_mask: NDArray[np.generic],
    target_mask: NDArray[np.generic],
    gain_range: tuple[float, float] | None = None,
    anchor_black: bool = False,
) -> NDArray[np.float32]:
    # One buffer converted in place all the way: fresh full-size temporaries cost more
    # here (allocation and page faults) than the colour maths itself.
    work = np.multiply(source, np.float32(1 / 255), dtype=np.float32)
    cv2.cvtColor(work, cv2.COLOR_BGR2Lab, dst=work)
    # Only the sampled target pixels need converting.
    target_lab = _lab(_masked_pixels(target, target_mask, min_weight=0.5))
    source_lab = _masked_pixels(work, source_mask, min_weight=0.5)
    _, cov_s = _mean_cov(source_lab)
    _, cov_t = _mean_cov(target_lab)
    mean_s, mean_t = _median(source_lab), _median(target_lab)  # see _MEDIAN_SAMPLES
    std_s = np.sqrt(np.maximum(np.diag(cov_s), 0.0))
    std_t = np.sqrt(np.maximum(np.diag(cov_t), 0.0))
    scale = std_t / np.maximum(std_s, _LAB_STD_FLOOR)
    if gain_range is not None:
        scale[0] = np.clip(scale[0], *gain_range)
        # The tint's spread may shrink freely (to none on a black-and-white target) but
        # grow no more than the lightness's: a target's tint spread (its light, a
        # fringe's strands) scaled a source's chroma by up to 3x, and its brows and
        # stubble, far from the skin's median tint, came out blue (Obama on p23).
        scale[1:] = np.minimum(scale[1:], gain_range[1])
    offset = mean_t - scale * mean_s
    if anchor_black:
        # Lab's black is (0, 0, 0); the ramps run on L. The tint's offset (a, b) fades
        # with the lightness all the way to black, as a tint of the light does: faded
        # by half at most, it turned a source's dark, near-grey brows and stubble blue
        # on a target whose skin is less yellow than the source's (Obama on p23).
        ratio = np.multiply(work[..., 0], np.float32(1.0 / max(mean_s[0], 1e-3)))
        cv2.min(ratio, 1.0, dst=ratio)
        tint = cv2.max(ratio, 0.0)
        ramp = _black_ramp(ratio)
        work = cv2.transform(work, np.diag(scale).astype(np.float32))
        work += cv2.merge(
            [
                ramp * np.float32(offset[0]),
                tint * np.float32(offset[1]),
                tint * np.float32(offset[2]),
            ]
        )
    else:
        # cv2.transform, not numpy broadcasting: numpy's inner loop over 3 channels is slow.
        matrix = np.concatenate([np.diag(scale), offset[:, None]], axis=1).astype(np.float32)
        work = cv2.transform(work, matrix)
    cv2.cvtColor(work, cv2.COLOR_Lab2BGR, dst=work)
    work *= np.float32(255)
    return work


def _lct_affine(
    source: NDArray[np.generic],
    target: NDArray[np.generic],
    source_mask: NDArray[np.generic],
    target_mask: NDArray[np.generic],
    gain_range: tuple[float, float] | None = None,
    ridge: float = 0.0,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """``(T, b, median, E)`` with ``x' = T x + b`` mapping source BGR statistics onto
    the target's, the source's median (BGR), and ``x' = E x``, a change of exposure
    (per channel; as little chroma kept as by T) that takes the median about as far.

    Onto a target darker than the source (their medians' luma), the map starts by
    scaling the source down to the target's luma (a change of exposure: each colour's
    chromaticity is kept) and matches the statistics from there.

    With ``gain_range`` the target covariance is first scaled as a whole so that the
    luma contrast ratio (target std over the scaled source's std) lies within it.
    ``ridge`` adds that share of each covariance's mean variance to its diagonal.
    """
    samples_s = _masked_pixels(source, source_mask, min_weight=0.5)
    samples_t = _masked_pixels(target, target_mask, min_weight=0.5)
    _, cov_s = _mean_cov(samples_s)
    _, cov_t = _mean_cov(samples_t)
    # The colours' location is their median (see _MEDIAN_SAMPLES).
    mean_s, mean_t = _median(samples_s), _median(samples_t)
    colour = colourfulness(cov_t)
    # A darker target: the source is first scaled down to its luma (a change of
    # exposure keeps each colour's chromaticity), and the map goes on from there. Taken
    # down by the offset alone, a skin's differences kept their size on a darker base:
    # Biden's rosy cheeks on the dim p19 came out purple (their chromaticity's spread
    # 2.3-3x the source's and the target's).
    dim = float(LUMA_BGR @ mean_t) / max(float(LUMA_BGR @ mean_s), 1e-3)
    dim = min(max(dim, 1.0 / _EXPOSURE_GAIN_MAX), 1.0)
    mean_scaled = mean_s * dim
    cov_s = cov_s * dim**2
    if gain_range is not None:
        var_s = max(float(LUMA_BGR @ cov_s @ LUMA_BGR), 1e-6)
        var_t = max(float(LUMA_BGR @ cov_t @ LUMA_BGR), 1e-6)
        gain = np.sqrt(var_t / var_s)
        cov_t = cov_t * (min(max(float(gain), gain_range[0]), gain_range[1]) / gain) ** 2
    if ridge > 0.0:
        cov_s = cov_s + ridge * float(np.trace(cov_s)) / 3.0 * np.eye(3)
        cov_t = cov_t + ridge * float(np.trace(cov_t)) / 3.0 * np.eye(3)
    # The Monge-Kantorovich map (the one that moves colours least).
    sqrt_s, inv_sqrt_s = _sqrt_and_inv_sqrt(cov_s)
    middle, _ = _sqrt_and_inv_sqrt(sqrt_s @ cov_t @ sqrt_s, squared=True)
    transform = inv_sqrt_s @ middle @ inv_sqrt_s
    offset = mean_t - transform @ mean_scaled
    transform = transform * dim
    # A change of exposure that takes the source's mean to the target's, per channel.
    lower, upper = 1.0 / _EXPOSURE_GAIN_MAX, _EXPOSURE_GAIN_MAX
    exposure = np.diag(np.clip(mean_t / np.maximum(mean_s, 1.0), lower, upper))
    if colour < 1.0:
        # A black-and-white (or toned) target: the ridge would leave the source's lips
        # and eyes some of their colour. Keep only ``colour`` of the result's chroma
        # around the target's mean tint (x' = (Q + c P) x + (1 - c) P mean_t).
        keep = _GREY + colour * (np.eye(3) - _GREY)
        transform = keep @ transform
        offset = keep @ offset + (1.0 - colour) * (np.eye(3) - _GREY) @ mean_t
        exposure = keep @ exposure
    return transform, offset, mean_s, exposure


def colourfulness(cov: NDArray[np.float64]) -> float:
    """1 for a colour photo's pixels, 0 for grey ones (any tint), from their covariance:
    the share of their variance off the grey axis. Skin in colour photos has at least
    1% of its variance there (1.2-12% in the development photos); black-and-white
    photos stored as colour have none."""
    total = float(np.trace(cov))
    if total <= 1e-9:
        return 1.0
    chroma = float(np.trace(cov - _GREY @ cov @ _GREY)) / total
    return min(max((chroma - _MONO_CHROMA) / _MONO_CHROMA, 0.0), 1.0)


def color_transfer(
    source: NDArray[np.generic],
    target: NDArray[np.generic],
    *,
    source_mask: Mask,
    target_mask: Mask,
    mode: str = "rct",
    strength: float = 1.0,
    gain_range: tuple[float, float] | None = None,
    ridge: float = 0.0,
    anchor_black: bool = False,
) -> FloatImage:
    """Recolour ``source`` so its statistics inside ``source_mask`` match ``target``'s.

    The statistics are taken over pixels with mask >= 0.5 (see
    :func:`masked_mean_cov`): the spread as a covariance, the location as each
    channel's median (a skin's typical colour: highlights and shadows pull a mean
    away from it). The mapping is then applied to the whole source image, so the
    caller decides where it is used.

    Args:
        source: the face to recolour, uint8 or float32 BGR in 0..255.
        target: the face whose colours to copy; may have a different size.
        source_mask: where ``source`` statistics are measured.
        target_mask: where ``target`` statistics are measured.
        mode: one of :data:`COLOR_MODES`; ``"none"`` and ``"sh"`` return the
            source unchanged (``"sh"`` relighting is done by the caller).
        strength: 0 keeps the source, 1 applies the full transfer; linear between.
        gain_range: ``(lowest, highest)`` factor by which the face's contrast may
            change (``rct``: L's scale, and a's and b's up to ``highest``; ``lct``:
            the whole covariance, scaled by its luma ratio, after a darker
            target's change of exposure); None matches the target's contrast
            whatever it is.
        ridge: ``lct`` only: a share of the mean variance added to both covariances
            before matching them. A source's skin varies little across its colour
            line, and ``T`` would amplify those minor directions by the inverse
            (blue and orange blotches on a strongly tanned target); 0 maps the
            covariance exactly.
        anchor_black: keep black near black: the map's offset is faded out below
            the source's median lightness (luma for ``lct``, L for ``rct``) over
            the mask, as ``1 - (1 - v / median)^2 / 2``, to half at black (``rct``'s
            tint, its a and b offset, as ``v / median``: to none at black). The
            median and what is lighter map as without it; darker pixels (pupils, irises,
            lashes, brows, nostrils) keep more of their depth and hue where a
            positive offset would lift them towards its own colour. With ``lct``
            the map gives way below the median, as ``(v / median)^2``, to one whose
            colour is the per-channel gain that takes the skin's median to the
            target's (a change of exposure): with a darkening offset that gain
            alone (dark features are not pushed below black unevenly, a navy
            cast), with a lightening one plus half the offset's lightness along
            the target skin's colour (no blue-grey rings round the eyes of an
            orange-lit source). The statistics then match only approximately.

    Returns:
        The recoloured source, float32 BGR clipped to [0, 255].

    Raises:
        InputError: unknown mode, strength outside [0, 1], a gain_range that does
            not hold 1 (or starts at 0), a negative ridge, shapes that do not
            match, or masks selecting fewer than 16 pixels.

    Shape:
        - source: (H, W, 3); source_mask: (H, W).
        - target: (H', W', 3); target_mask: (H', W').
        - output: (H, W, 3) float32.

    Example:
        >>> out = color_transfer(src, dst, source_mask=m_src, target_mask=m_dst, mode="lct")
    """
    if mode not in COLOR_MODES:
        raise InputError(f"unknown colour mode {mode!r}; expected one of {COLOR_MODES}")
    if not 0.0 <= strength <= 1.0:
        raise InputError(f"strength must be in [0, 1], got {strength}")
    if gain_range is not None and not 0.0 < gain_range[0] <= 1.0 <= gain_range[1]:
        raise InputError(
            f"gain_range must be (low, high) with 0 < low <= 1 <= high, got {gain_range}"
        )
    if not ridge >= 0.0:
        raise InputError(f"ridge must be 0 or more, got {ridge}")
    source_array, target_array = np.asarray(source), np.asarray(target)
    source_weights, target_weights = np.asarray(source_mask), np.asarray(target_mask)
    _check_image_mask("source", source_array, source_weights)
    _check_image_mask("target", target_array, target_weights)
    if mode in ("none", "sh") or strength == 0.0:
        return _to_float(source_array).copy()

    # The target is only sampled (<= 20k pixels), so it is never converted as a whole.
    if mode == "lct":
        transform, offset, mean_s, exposure = _lct_affine(
            source_array, target_array, source_weights, target_weights, gain_range, ridge
        )
        pixels = _to_float(source_array)
        if anchor_black:
            # Luma over the skin's median's luma, in one pass.
            luma_s = max(float(LUMA_BGR @ mean_s), 1e-3)
            ratio = cv2.transform(pixels, (LUMA_BGR / luma_s)[None, :].astype(np.float32))
            result = _anchored(pixels, transform, offset, ratio, exposure, mean_s)
            if strength < 1.0:
                result = cv2.addWeighted(result, strength, pixels, 1.0 - strength, 0.0)
        else:
            # Blending x and T x + b linearly is itself affine: strength costs nothing.
            transform = (1.0 - strength) * np.eye(3) + strength * transform
            matrix = np.concatenate([transform, strength * offset[:, None]], axis=1)
            result = cv2.transform(pixels, matrix.astype(np.float32))
    else:
        result = _rct(
            source_array, target_array, source_weights, target_weights, gain_range, anchor_black
        )
        if strength < 1.0:
            result = cv2.addWeighted(result, strength, _to_float(source_array), 1.0 - strength, 0.0)
    return _clip_0_255(result)


def _anchored(
    pixels: NDArray[np.float32],
    transform: NDArray[np.float64],
    offset: NDArray[np.float64],
    ratio: NDArray[np.float32],
    exposure: NDArray[np.float64],
    mean_s: NDArray[np.float64],
) -> NDArray[np.float32]:
    """The map ``T x + b`` with black anchored (see color_transfer's ``anchor_black``),
    given each pixel's lightness ratio ``r`` to the skin's median (overwritten).

    From the mean up it is the map. Below, it gives way, as ``r^2``, to a map for the
    darks whose colour is a change of exposure (``exposure``: per channel, the gain
    that takes the skin's median to the target's), not the offset's:
    - an offset that darkens: the exposure map alone. Fading the offset pushed dark
      features under black unevenly: p06's brows on p27 went from (30, 36, 52) BGR
      to (8, 3, 6), navy;
    - one that lightens: the exposure map's colour at the lightness of ``T x``, plus
      a share (1 - _BLACK_ANCHOR) of the offset's lightness added along the target
      skin's colour. The offset's own colour lifted the darks towards it: an
      orange-lit source (p17) on a grey-beige target got blue-grey rings round the
      eyes.
    """
    mapped_mean = transform @ mean_s + offset
    if float(LUMA_BGR @ offset) >= 0.0:
        luma_t = max(float(LUMA_BGR @ mapped_mean), 1.0)
        hue = exposure + np.outer(mapped_mean, LUMA_BGR @ (transform - exposure)) / luma_t
        lift = float(LUMA_BGR @ offset) / luma_t * mapped_mean
    else:
        hue, lift = exposure, np.zeros(3)
    cv2.min(ratio, 1.0, dst=ratio)
    cv2.max(ratio, 0.0, dst=ratio)
    dark_map = np.concatenate([hue, (1.0 - _BLACK_ANCHOR) * lift[:, None]], axis=1)
    dark = cv2.transform(pixels, dark_map.astype(np.float32))
    cv2.multiply(ratio, ratio, dst=ratio)
    matrix = np.concatenate([transform, offset[:, None]], axis=1).astype(np.float32)
    # blendLinear: (w1 a + w2 b) / (w1 + w2) per pixel, in one pass.
    blended = cv2.blendLinear(cv2.transform(pixels, matrix), dark, ratio, 1.0 - ratio)
    return np.asarray(blended, np.float32)


def _black_ramp(ratio: NDArray[np.float32]) -> NDArray[np.float32]:
    """``1 - a (1 - r)^2`` (``a`` = _BLACK_ANCHOR) of a lightness ratio ``r`` to the
    skin's mean, ``r`` clipped to [0, 1]: ``1 - a`` at black, 1 from the mean up, with
    no kink there (slope 0). In place."""
    cv2.min(ratio, 1.0, dst=ratio)
    cv2.max(ratio, 0.0, dst=ratio)
    # 1 - a (1 - r)^2 = (1 - a) + a r (2 - r)
    ratio *= np.float32(2.0) - ratio
    ratio *= np.float32(_BLACK_ANCHOR)
    ratio += np.float32(1.0 - _BLACK_ANCHOR)
    return ratio


def _ramped_offset(ramp: NDArray[np.float32], offset: NDArray[np.float64]) -> NDArray[np.float32]:
    """``ramp[..., None] * offset`` as 3 channels (OpenCV's 3-to-3 transform is
    vectorised; its 1-to-3 form and numpy broadcasting are 10x slower)."""
    spread = cv2.cvtColor(ramp, cv2.COLOR_GRAY2BGR)
    out: NDArray[np.float32] = cv2.transform(spread, np.diag(offset).astype(np.float32))
    return out


def _clip_0_255(image: NDArray[np.float32]) -> NDArray[np.float32]:
    """Clip a float32 image to [0, 255] in place (OpenCV thresholds: ~4x numpy's clip)."""
    cv2.threshold(image, 255.0, 255.0, cv2.THRESH_TRUNC, dst=image)
    cv2.threshold(image, 0.0, 0.0, cv2.THRESH_TOZERO, dst=image)
    return image
