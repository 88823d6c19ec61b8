"""Spherical-harmonics lighting: the light term of a 3D morphable face model.

Under distant light, the irradiance of a Lambertian surface is very nearly a
quadratic function of its unit normal (Ramamoorthi & Hanrahan 2001), so a face's
shading is captured by 9 coefficients per colour channel. Fitting them on the
source and target faces and multiplying the source texture by the ratio of the
two shadings moves the target's lighting onto the swapped face.

Normal convention (the one of :mod:`faceweave.types`): camera coordinates with
``x`` to the right, ``y`` down and ``z`` away from the camera, so surfaces that
face the camera have ``n_z < 0``. The basis itself is coordinate-free; the
convention only says what each coefficient means (for example a light from
above the face brightens normals with ``n_y < 0`` and gives a negative
coefficient on ``Y_1,-1 ∝ y``).

Dtype policy: maths in float64, images out as float32.
"""

from __future__ import annotations

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.errors import InputError
from faceweave.types import FloatImage

# Normalisation constants of the real spherical harmonics, bands 0 to 2.
_C0 = 0.5 * np.sqrt(1.0 / np.pi)  # 0.282095
_C1 = np.sqrt(3.0 / (4.0 * np.pi))  # 0.488603
_C2 = 0.5 * np.sqrt(15.0 / np.pi)  # 1.092548
_C20 = 0.25 * np.sqrt(5.0 / np.pi)  # 0.315392
_C22 = 0.25 * np.sqrt(15.0 / np.pi)  # 0.546274

# Ridge weight per coefficient: only band 2 is shrunk. On a half sphere of normals the
# constant, z and z^2 terms are strongly correlated, and shrinking band 1 would bias the
# mean brightness; band 2 is where a one-sided face leaves the fit under-determined.
_RIDGE_PENALTY = np.array([0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0])
# Tukey biweight tuning constant: 95% efficiency on Gaussian noise.
_TUKEY_C = 4.685


def _unit_normals(normals: NDArray[np.floating]) -> NDArray[np.float64]:
    """Check (N, 3) and normalise rows; zero rows stay zero."""
    array = np.asarray(normals, dtype=np.float64)
    if array.ndim != 2 or array.shape[1] != 3:
        raise InputError(f"normals must have shape (N, 3), got {array.shape}")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return array / np.where(norms > 0.0, norms, 1.0)


def sh_basis(normals: NDArray[np.floating]) -> NDArray[np.float64]:
    """Real spherical-harmonics basis of order 2 evaluated at unit normals.

    The columns, in this order, are (Ramamoorthi & Hanrahan 2001, eq. 3)::

        Y00  = 0.282095
        Y1-1 = 0.488603 y        Y10 = 0.488603 z        Y11 = 0.488603 x
        Y2-2 = 1.092548 x y      Y2-1 = 1.092548 y z     Y21 = 1.092548 x z
        Y20  = 0.315392 (3 z^2 - 1)
        Y22  = 0.546274 (x^2 - y^2)

    They are orthonormal over the unit sphere: the integral of ``Y_i Y_j`` over
    all directions is 1 when ``i == j`` and 0 otherwise.

    Args:
        normals: surface normals in camera coordinates (x right, y down, z away
            from the camera; camera-facing surfaces have z < 0). Rows are
            normalised here; zero rows have no direction, so give them zero
            weight when fitting.

    Returns:
        The basis, float64.

    Raises:
        InputError: normals are not (N, 3).

    Shape:
        - normals: (N, 3).
        - output: (N, 9).

    Example:
        >>> sh_basis(np.array([[0.0, 0.0, -1.0]])).round(3)
        array([[ 0.282,  0.   , -0.489,  0.   ,  0.   , -0.   ,  0.631, -0.   ,  0.   ]])
    """
    unit = _unit_normals(normals)
    x, y, z = unit[:, 0], unit[:, 1], unit[:, 2]
    basis = np.empty((unit.shape[0], 9), dtype=np.float64)
    basis[:, 0] = _C0
    basis[:, 1] = _C1 * y
    basis[:, 2] = _C1 * z
    basis[:, 3] = _C1 * x
    basis[:, 4] = _C2 * x * y
    basis[:, 5] = _C2 * y * z
    basis[:, 6] = _C20 * (3.0 * z * z - 1.0)
    basis[:, 7] = _C2 * x * z
    basis[:, 8] = _C22 * (x * x - y * y)
    return basis


def _as_columns(colors: NDArray[np.floating], count: int) -> NDArray[np.float64]:
    values = np.asarray(colors, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    if values.ndim != 2 or values.shape[0] != count:
        raise InputError(f"colors must have shape ({count},) or ({count}, C), got {values.shape}")
    return values


def _weighted_ridge_solve(
    basis: NDArray[np.float64],
    values: NDArray[np.float64],
    weights: NDArray[np.float64],
    ridge: float,
) -> NDArray[np.float64]:
    weighted = basis * weights[:, None]
    normal = weighted.T @ basis
    # Relative to the mean diagonal, so the ridge does not depend on N or on the weights' scale.
    penalty = ridge * float(np.trace(normal)) / 9.0 * _RIDGE_PENALTY
    system, rhs = normal + np.diag(penalty), weighted.T @ values
    # By OpenCV's Cholesky (the system is symmetric, positive definite with any skin),
    # not numpy's LAPACK: OpenBLAS runs even a 9 x 9 solve on its threads, 3 ms with a
    # busy machine's other core (11 ms with it fully busy) against 0.02 ms.
    ok, solved = cv2.solve(system, rhs, flags=cv2.DECOMP_CHOLESKY)
    if not ok:  # (no weight at all: numpy says why)
        solved = np.linalg.solve(system, rhs)
    return np.asarray(solved, np.float64)


def fit_sh(
    normals: NDArray[np.floating],
    colors: NDArray[np.floating],
    *,
    weights: NDArray[np.floating] | None = None,
    ridge: float = 1e-3,
    robust_iterations: int = 2,
) -> NDArray[np.float64]:
    """Fit order-2 spherical-harmonics lighting coefficients to observed colours.

    Solves ``colors ≈ sh_basis(normals) @ coeffs`` by weighted least squares with
    a ridge on band 2 (the face only shows one hemisphere, so the quadratic
    terms are poorly constrained), then re-solves ``robust_iterations``
    times with Tukey biweights on the residuals. One weight per sample is shared
    by all channels, since highlights, hair or glasses shadows and beard pixels
    are outliers in every channel at once. The residual scale is the median
    absolute deviation.

    Args:
        normals: unit (or unnormalised) normals, see :func:`sh_basis`.
        colors: observed intensities, one column per channel.
        weights: optional non-negative per-sample weights (for example a soft
            face mask or a visibility term).
        ridge: strength of the penalty on band 2, relative to the mean
            diagonal of the normal matrix.
        robust_iterations: number of reweighting passes; 0 gives plain least squares.

    Returns:
        The coefficients, float64; (9,) when ``colors`` is 1-D.

    Raises:
        InputError: shapes do not match, fewer than 9 samples have positive
            weight, or an argument is negative.

    Shape:
        - normals: (N, 3).
        - colors: (N, C) or (N,).
        - weights: (N,).
        - output: (9, C) or (9,).

    Example:
        >>> coeffs = fit_sh(normals, face_pixels_bgr, weights=skin_mask)
        >>> shading = shade(normals, coeffs)
    """
    basis = sh_basis(normals)
    count = basis.shape[0]
    values = _as_columns(colors, count)
    if ridge < 0.0 or robust_iterations < 0:
        raise InputError("ridge and robust_iterations must be non-negative")
    if weights is None:
        base = np.ones(count, dtype=np.float64)
    else:
        base = np.asarray(weights, dtype=np.float64)
        if base.shape != (count,):
            raise InputError(f"weights must have shape ({count},), got {base.shape}")
        if np.any(base < 0.0) or not np.all(np.isfinite(base)):
            raise InputError("weights must be finite and non-negative")
    if np.count_nonzero(base) < 9:
        raise InputError("at least 9 samples with positive weight are needed to fit 9 coefficients")

    coeffs = _weighted_ridge_solve(basis, values, base, ridge)
    active = base > 0.0
    # Floor of the residual scale: a noiseless fit must not turn every sample into an outlier.
    scale_floor = 1e-6 * (float(np.abs(values[active]).mean()) + 1e-12)
    for _ in range(robust_iterations):
        residual = np.sqrt(np.mean((values - basis @ coeffs) ** 2, axis=1))
        scale = max(1.4826 * float(np.median(residual[active])), scale_floor)
        ratio = residual / (_TUKEY_C * scale)
        robust = np.where(ratio < 1.0, (1.0 - ratio * ratio) ** 2, 0.0)
        combined = base * robust
        if np.count_nonzero(combined) < 9:
            break  # degenerate reweighting; keep the last good fit
        coeffs = _weighted_ridge_solve(basis, values, combined, ridge)
    return coeffs[:, 0] if np.asarray(colors).ndim == 1 else coeffs


def shade(normals: NDArray[np.floating], coeffs: NDArray[np.floating]) -> NDArray[np.float64]:
    """Shading predicted by spherical-harmonics coefficients.

    Args:
        normals: normals, see :func:`sh_basis`.
        coeffs: coefficients from :func:`fit_sh`.

    Returns:
        ``sh_basis(normals) @ coeffs``, float64.

    Raises:
        InputError: coeffs do not have 9 rows.

    Shape:
        - normals: (N, 3).
        - coeffs: (9, C) or (9,).
        - output: (N, C) or (N,).
    """
    coefficients = np.asarray(coeffs, dtype=np.float64)
    if coefficients.ndim not in (1, 2) or coefficients.shape[0] != 9:
        raise InputError(f"coeffs must have shape (9,) or (9, C), got {coefficients.shape}")
    shading: NDArray[np.float64] = sh_basis(normals) @ coefficients
    return shading


def relight(
    texture: NDArray[np.generic],
    source_shading: NDArray[np.floating],
    target_shading: NDArray[np.floating],
    *,
    eps: float = 1e-3,
    max_gain: float = 2.5,
) -> FloatImage:
    """Move a texture from the source lighting to the target lighting.

    ``texture * max(target, eps) / max(source, eps)`` with the gain clamped to
    ``[1 / max_gain, max_gain]``: shading near zero (grazing normals, a poor
    fit) must not blow pixels up or wipe them out. Equal shadings give exactly
    the texture back.

    Args:
        texture: the colours to relight (uint8 or float, 0..255).
        source_shading: the shading baked into ``texture``.
        target_shading: the shading wanted.
        eps: smallest shading value used in the ratio (same units as the shading).
        max_gain: largest brightening factor; the largest darkening is its inverse.

    Returns:
        The relit texture, float32, not clipped.

    Raises:
        InputError: shadings do not broadcast to the texture, or eps <= 0 or max_gain < 1.

    Shape:
        - texture: (H, W, C) or (N, C).
        - source_shading, target_shading: the texture's shape, or without the
          channel axis / with one channel for grey shading.
        - output: the texture's shape.
    """
    if eps <= 0.0 or max_gain < 1.0:
        raise InputError(f"need eps > 0 and max_gain >= 1, got eps={eps}, max_gain={max_gain}")
    image = np.asarray(texture, dtype=np.float32)
    if image.ndim not in (2, 3):
        raise InputError(f"texture must be (H, W, C) or (N, C), got {image.shape}")
    shadings = []
    for name, shading in (("source_shading", source_shading), ("target_shading", target_shading)):
        array = np.asarray(shading, dtype=np.float32)
        if array.ndim == image.ndim - 1:
            array = array[..., None]
        if array.ndim != image.ndim or array.shape[:-1] != image.shape[:-1]:
            raise InputError(f"{name} of shape {np.shape(shading)} does not fit {image.shape}")
        if array.shape[-1] not in (1, image.shape[-1]):
            raise InputError(f"{name} needs 1 or {image.shape[-1]} channels")
        shadings.append(np.maximum(array, np.float32(eps)))
    gain = np.clip(shadings[1] / shadings[0], np.float32(1.0 / max_gain), np.float32(max_gain))
    relit: FloatImage = image * gain
    return relit
