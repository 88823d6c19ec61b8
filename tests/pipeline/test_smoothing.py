"""Tests for faceweave.pipeline.smoothing (One-Euro filter, mesh smoother)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from faceweave.core.facemodel import load_face_model
from faceweave.core.geometry import rotation_from_euler
from faceweave.pipeline.smoothing import MeshSmoother, OneEuroFilter


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


# The file job's head settings (video_job.FILE_SMOOTHING_*), written out: the tests
# hold whatever those are tuned to.
HEAD = {"min_cutoff": 0.3, "beta": 0.01}
FPS = 30.0
# A blink as the mesh sees one: the lids half closed, closed for two frames, half open.
BLINK = {30: 0.5, 31: 1.0, 32: 1.0, 33: 0.5}


def _upper_lids(model) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The vertices of both eyes' rings above each eye's middle (the upper lids)."""
    upper = []
    for loop in model.loops[:2]:
        ring = model.canonical[loop]
        upper.extend(loop[ring[:, 1] < ring[:, 1].mean()].tolist())
    return np.array(upper)


def _blinking_head(frames: int, blink: dict[int, float], seed: int = 0) -> np.ndarray:
    """(frames, 478, 3) meshes of a 200 px face at 30 fps whose head jitters (half a
    degree of turn and 2 px of shift, frame to frame) and whose upper lids close by
    ``blink[frame]`` (1: all but a tenth of the eye's height) on the frames it names."""
    model = load_face_model()
    rng = np.random.default_rng(seed)
    canonical = model.canonical.astype(np.float64)
    scale = 200.0 / float(np.ptp(canonical[:, 0]))
    lids = _upper_lids(model)
    drop = 0.9 * float(np.ptp(canonical[model.loops[0], 1]))
    meshes = []
    for i in range(frames):
        shape = canonical.copy()
        shape[lids, 1] += drop * blink.get(i, 0.0)
        turn = rotation_from_euler(*rng.normal(0.0, 0.5, 3))
        shift = np.array([320.0, 240.0, 0.0]) + np.append(rng.normal(0.0, 2.0, 2), 0.0)
        meshes.append(scale * shape @ turn.T + shift)
    return np.stack(meshes)


def _gap(mesh: np.ndarray) -> float:
    """The left eye's opening: upper lid (159) to lower lid (145), pixels."""
    return float(np.linalg.norm(mesh[159, :2] - mesh[145, :2]))


class TestMeshSmoother:
    def _smoother(self, **expression: Any) -> MeshSmoother:
        model = load_face_model()
        return MeshSmoother(model.canonical, model.rigid_weights, **HEAD, **expression)

    def test_equal_settings_give_the_whole_mesh_filter(self) -> None:
        meshes = _blinking_head(40, BLINK)
        ts = np.arange(40) / FPS
        plain = _run(OneEuroFilter(**HEAD), meshes, ts)
        same = self._smoother(expression_cutoff=HEAD["min_cutoff"], expression_beta=HEAD["beta"])
        np.testing.assert_allclose(_run(same, meshes, ts), plain, atol=1e-6)

    def test_a_blink_is_followed_while_the_head_stays_steady(self) -> None:
        meshes = _blinking_head(60, BLINK)
        ts = np.arange(60) / FPS
        plain = _run(OneEuroFilter(**HEAD), meshes, ts)
        split = _run(self._smoother(), meshes, ts)
        frames = range(min(BLINK), max(BLINK) + 2)
        open_gap = _gap(meshes[min(BLINK) - 1])
        shut_gap = min(_gap(meshes[i]) for i in frames)

        def depth(out: np.ndarray) -> float:  # how far the eye closed, 1: as far as it did
            return (open_gap - min(_gap(out[i]) for i in frames)) / (open_gap - shut_gap)

        # The whole-mesh filter closes the eye about halfway; the split one nearly fully.
        assert depth(plain) < 0.65
        assert depth(split) > 0.85
        # The head (the mean of its vertices) is steadied as much either way.
        raw_steps = np.diff(meshes[10:, :, :2].mean(1), axis=0)
        for out in (plain, split):
            steps = np.diff(out[10:, :, :2].mean(1), axis=0)
            assert steps.std() < 0.5 * raw_steps.std()
        np.testing.assert_allclose(split[10:, :, :2].mean(1), plain[10:, :, :2].mean(1), atol=1.0)

    def test_a_blinks_lids_lag_no_more_than_the_bound(self) -> None:
        model = load_face_model()
        meshes = _blinking_head(60, BLINK)
        ts = np.arange(60) / FPS
        lids = _upper_lids(model)
        free = _run(self._smoother(), meshes, ts)
        bound = 0.02
        bounded = _run(self._smoother(bounded=lids, max_lag=bound), meshes, ts)
        # Before the blink the shape does not change (the head only moves): the bound
        # leaves the filtered mesh as it was.
        np.testing.assert_allclose(bounded[: min(BLINK)], free[: min(BLINK)], atol=1e-6)
        # 200 px across the canonical face: the bound is this many pixels (per lid
        # vertex; the lower lid does not move, so the gap is off by as much).
        px = bound * 200.0 / float(np.ptp(model.canonical[:, 0]))
        first = min(BLINK) + 1  # the first closed frame
        assert abs(_gap(bounded[first]) - _gap(meshes[first])) < px + 0.5
        # Unbounded, the filter lags by several times that on the first closed frame.
        assert abs(_gap(free[first]) - _gap(meshes[first])) > 3 * px
        # The rest of the mesh is filtered as before.
        rest = np.setdiff1d(np.arange(len(model.canonical)), lids)
        np.testing.assert_allclose(bounded[:, rest], free[:, rest], atol=1e-6)

    def test_reset_restarts_both_filters(self) -> None:
        meshes = _blinking_head(3, {})
        smoother = self._smoother()
        smoother(meshes[0], 0.0)
        smoother(meshes[1], 1 / FPS)
        smoother.reset()
        np.testing.assert_allclose(smoother(meshes[2], 2 / FPS), meshes[2], atol=1e-6)
