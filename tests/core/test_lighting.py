"""Tests of faceweave.core.lighting."""

from __future__ import annotations

import numpy as np
import pytest

from faceweave.core.lighting import fit_sh, relight, sh_basis, shade
from faceweave.errors import InputError


def _sphere(count: int, seed: int) -> np.ndarray:
    normals = np.random.default_rng(seed).normal(size=(count, 3))
    return normals / np.linalg.norm(normals, axis=1, keepdims=True)


def _front_hemisphere(count: int, seed: int) -> np.ndarray:
    normals = _sphere(count, seed)
    normals[:, 2] = -np.abs(normals[:, 2])  # facing the camera: z < 0
    return normals


def _coefficients(seed: int) -> np.ndarray:
    """Plausible face lighting: a strong ambient term and weaker directional terms."""
    rng = np.random.default_rng(seed)
    scale = np.array([0.0, 30, 30, 30, 10, 10, 10, 10, 10])[:, None]
    coeffs = rng.normal(size=(9, 3)) * scale
    coeffs[0] = [400.0, 420.0, 450.0]
    return coeffs


def test_basis_values_and_constants() -> None:
    basis = sh_basis(np.array([[0.0, 0.0, -1.0], [2.0, 0.0, 0.0]]))  # second row unnormalised
    assert basis.shape == (2, 9) and basis.dtype == np.float64
    np.testing.assert_allclose(
        basis[0], [0.282095, 0, -0.488603, 0, 0, 0, 0.630784, 0, 0], atol=1e-6
    )
    np.testing.assert_allclose(
        basis[1], [0.282095, 0, 0, 0.488603, 0, 0, -0.315392, 0, 0.546274], atol=1e-6
    )


def test_basis_is_orthonormal_over_the_sphere() -> None:
    basis = sh_basis(_sphere(200_000, seed=0))
    gram = 4.0 * np.pi * basis.T @ basis / basis.shape[0]  # Monte-Carlo ∫ Y_i Y_j dω
    np.testing.assert_allclose(gram, np.eye(9), atol=0.02)


def test_noiseless_fit_recovers_coefficients_exactly() -> None:
    normals = _front_hemisphere(2000, seed=1)
    coeffs = _coefficients(seed=2)
    fitted = fit_sh(normals, shade(normals, coeffs), ridge=0.0)
    assert fitted.shape == (9, 3) and fitted.dtype == np.float64
    np.testing.assert_allclose(fitted, coeffs, atol=1e-8)


def test_robust_fit_ignores_outliers() -> None:
    rng = np.random.default_rng(3)
    normals = _front_hemisphere(4000, seed=4)
    coeffs = _coefficients(seed=5)
    clean = shade(normals, coeffs)
    colors = clean + rng.normal(0.0, 1.0, clean.shape)
    outliers = rng.random(len(colors)) < 0.05  # highlights and hair shadows: every channel
    signs = rng.choice([-1.0, 1.0], size=(outliers.sum(), 1))
    colors[outliers] += signs * rng.uniform(60, 150, size=(outliers.sum(), 1))

    robust = fit_sh(normals, colors)
    plain = fit_sh(normals, colors, robust_iterations=0)
    robust_error = np.sqrt(np.mean((shade(normals, robust) - clean) ** 2))
    plain_error = np.sqrt(np.mean((shade(normals, plain) - clean) ** 2))
    assert robust_error < 0.5  # below the noise level
    assert plain_error > 2 * robust_error
    np.testing.assert_allclose(robust, coeffs, atol=1.5)  # coefficients up to 450


def test_weights_select_samples() -> None:
    normals = _front_hemisphere(1000, seed=6)
    coeffs = _coefficients(seed=7)
    colors = shade(normals, coeffs)
    weights = np.ones(len(colors))
    colors[:300] = 0.0  # garbage under zero weight
    weights[:300] = 0.0
    fitted = fit_sh(normals, colors, weights=weights, ridge=0.0, robust_iterations=0)
    np.testing.assert_allclose(fitted, coeffs, atol=1e-8)


def test_one_channel_colors_give_nine_coefficients() -> None:
    normals = _front_hemisphere(500, seed=8)
    coeffs = _coefficients(seed=9)[:, 0]
    fitted = fit_sh(normals, shade(normals, coeffs), ridge=0.0)
    assert fitted.shape == (9,)
    np.testing.assert_allclose(fitted, coeffs, atol=1e-8)


def test_fit_rejects_bad_inputs() -> None:
    normals = _front_hemisphere(50, seed=10)
    with pytest.raises(InputError, match="colors"):
        fit_sh(normals, np.zeros((49, 3)))
    with pytest.raises(InputError, match="9 samples"):
        fit_sh(normals, np.zeros((50, 3)), weights=np.r_[np.ones(5), np.zeros(45)])
    with pytest.raises(InputError, match="normals"):
        sh_basis(np.zeros((4, 2)))
    with pytest.raises(ValueError, match="coeffs"):
        shade(normals, np.zeros((4, 3)))


def test_relight_with_equal_shadings_is_identity() -> None:
    rng = np.random.default_rng(11)
    texture = rng.uniform(0, 255, (16, 12, 3)).astype(np.float32)
    shading = rng.uniform(-5, 300, (16, 12, 3))  # including shading below eps
    np.testing.assert_array_equal(relight(texture, shading, shading), texture)


def test_relight_applies_and_clamps_the_ratio() -> None:
    texture = np.full((4, 3), 100.0, np.float32)
    source = np.array([100.0, 100.0, 100.0, 0.0])  # grey shading, one value per sample
    target = np.array([150.0, 20.0, 1000.0, 50.0])
    out = relight(texture, source, target)
    assert out.shape == (4, 3) and out.dtype == np.float32
    np.testing.assert_allclose(out[:, 0], [150.0, 40.0, 250.0, 250.0], rtol=1e-6)
    with pytest.raises(InputError):
        relight(texture, source[:3], target)
    with pytest.raises(InputError):
        relight(texture, source, target, max_gain=0.5)
