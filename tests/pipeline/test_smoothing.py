"""Tests for faceweave.pipeline.smoothing (One-Euro filter)."""

from __future__ import annotations

import numpy as np
import pytest

from faceweave.pipeline.smoothing import OneEuroFilter


def _run(f: OneEuroFilter, xs: np.ndarray, ts: np.ndarray) -> np.ndarray:
    return np.stack([f(x, t) for x, t in zip(xs, ts, strict=True)])


class TestOneEuroFilter:
    def test_first_sample_passes_through(self) -> None:
        x = np.arange(12, dtype=np.float32).reshape(4, 3)
        out = OneEuroFilter()(x, 0.0)
        np.testing.assert_array_equal(out, x)
        assert out.shape == (4, 3) and out.dtype == np.float64

    def test_constant_stays_constant(self) -> None:
        f = OneEuroFilter()
        x = np.full((478, 3), 12.5)
        ts = np.arange(50) / 30
        out = _run(f, np.repeat(x[None], 50, axis=0), ts)
        np.testing.assert_allclose(out, 12.5, atol=1e-9)

    def test_noise_reduced_on_static_signal(self) -> None:
        rng = np.random.default_rng(0)
        noisy = 100.0 + rng.normal(0, 0.5, (300, 478, 2))  # half-pixel landmark jitter at 30 fps
        out = _run(OneEuroFilter(min_cutoff=1.0, beta=0.05), noisy, np.arange(300) / 30)
        settled = out[30:]  # after the first second
        assert settled.var() < noisy.var() / 5
        assert abs(settled.mean() - 100.0) < 0.05

    def test_fast_ramp_followed_with_small_lag(self) -> None:
        ts = np.arange(90) / 30
        ramp = 300.0 * ts  # 300 px/s
        lagging = _run(OneEuroFilter(min_cutoff=1.0, beta=0.0), ramp[:, None], ts)[:, 0]
        adaptive = _run(OneEuroFilter(min_cutoff=1.0, beta=0.05), ramp[:, None], ts)[:, 0]
        lag_fixed = np.abs(ramp - lagging)[30:].mean()
        lag_adaptive = np.abs(ramp - adaptive)[30:].mean()
        assert lag_adaptive < lag_fixed / 4
        assert lag_adaptive < 15  # well under two frames of motion (20 px)

    def test_irregular_timestamps(self) -> None:
        rng = np.random.default_rng(1)
        ts = np.cumsum(rng.uniform(0.005, 0.08, 300))  # 12-200 fps, jittery
        noisy = 100.0 + rng.normal(0, 0.5, (300, 50))
        out = _run(OneEuroFilter(), noisy, ts)
        assert np.all(np.isfinite(out))
        assert out[50:].var() < noisy.var() / 3
        ramp = 300.0 * ts  # a ramp is followed as closely as with regular samples
        followed = _run(OneEuroFilter(), ramp[:, None], ts)[:, 0]
        assert np.abs(ramp - followed)[50:].max() < 15

    def test_repeated_timestamp_returns_previous(self) -> None:
        f = OneEuroFilter()
        f(np.zeros(3), 0.0)
        first = f(np.ones(3), 0.1)
        np.testing.assert_array_equal(f(np.full(3, 9.0), 0.1), first)

    def test_reset_and_shape_change_restart(self) -> None:
        f = OneEuroFilter()
        f(np.zeros(3), 0.0)
        f.reset()
        np.testing.assert_array_equal(f(np.ones(3), 0.1), np.ones(3))
        np.testing.assert_array_equal(f(np.full(5, 2.0), 0.2), np.full(5, 2.0))

    def test_invalid_parameters(self) -> None:
        with pytest.raises(ValueError):
            OneEuroFilter(min_cutoff=0)
        with pytest.raises(ValueError):
            OneEuroFilter(beta=-1)
