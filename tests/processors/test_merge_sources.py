"""Several photos of one person merged into one source (merge_sources, Swapper([...]))."""

from __future__ import annotations

import dataclasses
import logging

import cv2
import numpy as np
import pytest

from faceweave.errors import UsageError
from faceweave.processors.swap import (
    SourceModel,
    SwapOptions,
    Swapper,
    merge_sources,
    prepare_source,
)
from faceweave.types import Face

S = 64


def _model(face: Face, exposure: float, confidence: np.ndarray, shape_shift: float) -> SourceModel:
    albedo = np.full((S, S, 3), (0.4, 0.5, 0.7), np.float32)
    albedo[..., 0] += np.linspace(0, 0.2, S, dtype=np.float32)[None, :]  # some texture
    albedo *= exposure
    return SourceModel(
        albedo=albedo,
        texture=albedo * 0.8,
        valid=np.ones((S, S), np.float32),
        occluder=np.zeros((S, S), np.float32),
        shape=np.full((478, 3), shape_shift),
        light=np.zeros((9, 3)),
        face=face,
        confidence=confidence.astype(np.float32),
    )


def _turned(face: Face, yaw: float) -> Face:
    return dataclasses.replace(face, pose=dataclasses.replace(face.pose, yaw=yaw))


class TestMergeSources:
    def test_each_texel_comes_from_the_photo_that_saw_it_best(self, astronaut_face: Face) -> None:
        u = np.linspace(0.0, 1.0, S)[None, :].repeat(S, 0)
        # The lead saw the left of the texture well, the other photo the right; both the
        # middle third. The other photo is exposed 30% brighter.
        lead = _model(astronaut_face, 1.0, np.clip((0.7 - u) / 0.1, 0.05, 1.0), 0.0)
        other = _model(_turned(astronaut_face, 60.0), 1.3, np.clip((u - 0.3) / 0.1, 0.05, 1), 1.0)
        merged = merge_sources([lead, other])
        # Left: the lead's; right: the other photo's, brought to the lead's colours.
        np.testing.assert_allclose(merged.albedo, lead.albedo, atol=1e-3)
        # The lead's light: texture over albedo is the lead's shading (0.8).
        np.testing.assert_allclose(merged.texture, merged.albedo * 0.8, rtol=1e-4, atol=1e-3)
        # Shapes are averaged, the frontal photo weighing more (cos 0 vs cos 60).
        front = np.cos(np.radians(astronaut_face.pose.yaw))
        assert merged.shape[0, 0] == pytest.approx(0.5 / (front + 0.5), abs=1e-6)
        assert merged.face is lead.face
        np.testing.assert_allclose(merged.confidence, np.maximum(lead.confidence, other.confidence))

    def test_without_colour_matching_the_right_side_would_be_brighter(
        self, astronaut_face: Face
    ) -> None:
        """The gains are what keep the right side at the lead's colours: with no skin
        both photos saw well they cannot be fitted, and the photo's own colours stay."""
        u = np.linspace(0.0, 1.0, S)[None, :].repeat(S, 0)
        lead = _model(astronaut_face, 1.0, np.where(u < 0.5, 1.0, 0.05), 0.0)
        other = _model(astronaut_face, 1.3, np.where(u < 0.5, 0.05, 1.0), 0.0)
        merged = merge_sources([lead, other])
        np.testing.assert_allclose(merged.albedo[:, -10:], other.albedo[:, -10:], atol=1e-3)

    def test_the_lead_photos_fine_detail_stays_only_where_its_texture_does(
        self, astronaut_face: Face
    ) -> None:
        u = np.linspace(0.0, 1.0, S)[None, :].repeat(S, 0)
        lead = _model(astronaut_face, 1.0, np.where(u < 0.5, 1.0, 0.05), 0.0)
        detail = np.random.default_rng(2).normal(0, 3, (2 * S, 2 * S)).astype(np.float32)
        lead = dataclasses.replace(lead, fine=detail)
        other = _model(astronaut_face, 1.0, np.where(u < 0.5, 0.05, 1.0), 0.0)
        merged = merge_sources([lead, other])
        assert merged.fine is not None and merged.fine.shape == (2 * S, 2 * S)
        # The left: the lead's own detail; the right, the other photo's texels: none
        # (the other photo's detail would belong to its own features).
        np.testing.assert_allclose(merged.fine[:, : S - 8], detail[:, : S - 8], atol=1e-3)
        assert np.abs(merged.fine[:, S + 8 :]).max() < 1e-3
        # Without the lead's, none at all.
        assert merge_sources([dataclasses.replace(lead, fine=None), other]).fine is None

    def test_one_model_is_returned_as_it_is(self, astronaut_face: Face) -> None:
        lead = _model(astronaut_face, 1.0, np.ones((S, S)), 0.0)
        assert merge_sources([lead]) is lead

    def test_bad_input(self, astronaut_face: Face) -> None:
        with pytest.raises(UsageError):
            merge_sources([])
        small = dataclasses.replace(
            _model(astronaut_face, 1.0, np.ones((S, S)), 0.0),
            albedo=np.zeros((32, 32, 3), np.float32),
        )
        with pytest.raises(UsageError, match="uv_size"):
            merge_sources([_model(astronaut_face, 1.0, np.ones((S, S)), 0.0), small])


class TestSwapperWithSeveralPhotos:
    def test_the_same_photo_twice_swaps_like_once(
        self, astronaut_face: Face, grace_hopper: np.ndarray, grace_hopper_face: Face
    ) -> None:
        once = Swapper(astronaut_face).swap(grace_hopper, grace_hopper_face)
        twice = Swapper([astronaut_face, astronaut_face]).swap(grace_hopper, grace_hopper_face)
        assert np.abs(once.astype(int) - twice).max() <= 1

    def test_a_sharper_second_photo_gives_its_detail(
        self, analyser, astronaut: np.ndarray, astronaut_face: Face
    ) -> None:
        """A small, soft lead photo and a sharp one of the same person: the merged
        texture is the sharp photo's (texels are weighed by face size too)."""
        small = cv2.resize(astronaut, None, fx=0.3, fy=0.3, interpolation=cv2.INTER_AREA)
        small = cv2.resize(small, (astronaut.shape[1], astronaut.shape[0]))
        small = cv2.resize(small, None, fx=0.5, fy=0.5, interpolation=cv2.INTER_AREA)
        (small_face,) = analyser.get_faces(small)
        size = SwapOptions().uv_size
        sharp = prepare_source(astronaut_face, uv_size=size)
        soft = prepare_source(small_face, uv_size=size)
        merged = Swapper([small_face, astronaut_face]).source

        # Texels a swap uses: seen in both, and not hair (her fringe is left to the
        # target, and there no photo's texel counts more than the other's).
        inner = (sharp.valid > 0.99) & (soft.valid > 0.99)
        inner &= (sharp.occluder < 0.5) & (soft.occluder < 0.5)

        def off_sharp(model: SourceModel) -> float:
            return float(np.abs(model.albedo - sharp.albedo)[inner].mean())

        assert off_sharp(merged) < 0.3 * off_sharp(soft)

    def test_different_people_are_merged_with_a_warning(
        self, astronaut_face: Face, grace_hopper_face: Face, caplog: pytest.LogCaptureFixture
    ) -> None:
        with caplog.at_level(logging.WARNING, logger="faceweave"):
            mixed = Swapper([astronaut_face, grace_hopper_face])
        messages = [r.getMessage() for r in caplog.records]
        assert any("another person" in m for m in messages)
        # The second photo's own advice (Grace Hopper's glasses) is not what swaps show.
        assert not any("glasses" in m for m in messages)
        assert [line for line in mixed.source.advice if "another person" in line]
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="faceweave"):
            Swapper([astronaut_face, astronaut_face])
        assert not any("another person" in r.getMessage() for r in caplog.records)

    def test_no_photos(self) -> None:
        from faceweave.errors import NoFaceError

        with pytest.raises(NoFaceError):
            Swapper([])
