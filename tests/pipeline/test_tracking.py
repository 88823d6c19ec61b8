"""Tests for faceweave.pipeline.tracking: ids, detection schedule, smoothing, frame sampling.

The logic is tested with a fake analyser whose faces sit where the test puts
them; one test runs the real analyser on a moving package photo.
"""

from __future__ import annotations

from collections import Counter

import cv2
import numpy as np
import pytest
from numpy.typing import NDArray

from faceweave.analysis.analyser import FaceAnalyser
from faceweave.core import creases
from faceweave.errors import UsageError
from faceweave.pipeline import tracking
from faceweave.pipeline.tracking import FaceTracker, TrackedFace
from faceweave.pipeline.video_job import FILE_SMOOTHING_BETA, FILE_SMOOTHING_MIN_CUTOFF
from faceweave.types import BBox, Face, Frame

_BLANK = np.zeros((480, 640, 3), np.uint8)


class FakeAnalyser:
    """Faces where ``self.faces`` says ((cx, cy, size) pixels); real Face objects.

    ``face_from_box`` finds a face when its centre lies inside the box, like a
    mesh fit that sees the face in its crop.
    """

    def __init__(self, noise: float = 0.0, seed: int = 0) -> None:
        self.real = FaceAnalyser(with_embedding=False)  # only face_from_landmarks: no model loads
        self.canonical = self.real.model.canonical
        self.faces: list[tuple[float, float, float]] = []
        self.noise = noise
        self.rng = np.random.default_rng(seed)
        self.calls: Counter[str] = Counter()

    def mesh(self, cx: float, cy: float, size: float) -> NDArray[np.float32]:
        span = float(np.ptp(self.canonical[:, 0]))
        points = self.canonical * (size / span) + np.array([cx, cy, 0], np.float32)
        points[:, :2] += self.rng.normal(0, self.noise, points[:, :2].shape) if self.noise else 0
        return points.astype(np.float32)

    def get_faces(self, frame: Frame) -> list[Face]:
        self.calls["get_faces"] += 1
        return [self.face_from_landmarks(frame, self.mesh(*f), 0.9) for f in self.faces]

    def face_from_box(
        self, frame: Frame, bbox: BBox, score: float = 1.0, roll: float = 0.0
    ) -> Face | None:
        self.calls["face_from_box"] += 1
        x0, y0, x1, y1 = bbox
        for cx, cy, size in self.faces:
            if x0 <= cx <= x1 and y0 <= cy <= y1:
                return self.face_from_landmarks(frame, self.mesh(cx, cy, size), score)
        return None

    def face_from_landmarks(
        self, frame: Frame, points: NDArray[np.floating], score: float = 1.0
    ) -> Face:
        return self.real.face_from_landmarks(frame, points, score)

    def reset(self) -> None:
        self.calls["reset"] += 1


def _lid_gap(points: NDArray[np.floating]) -> float:
    """The image-left eye's opening: upper lid (159) to lower lid (145), pixels."""
    return float(np.linalg.norm(points[159, :2] - points[145, :2]))


def _centre(tracked: TrackedFace) -> NDArray[np.float64]:
    return np.asarray(tracked.face.landmarks_478[:, :2].mean(0), np.float64)


def _texture(shape: tuple[int, int], seed: int = 0) -> Frame:
    """Smooth random texture: optical flow has something to lock on to."""
    noise = np.random.default_rng(seed).integers(0, 256, (*shape, 3), dtype=np.uint8)
    return np.ascontiguousarray(cv2.GaussianBlur(noise, (0, 0), 2.0))


def test_a_tracker_needs_an_analyser() -> None:
    """FaceTracker(None) had failed at the first frame with an AttributeError."""
    for bad in (None, "mesh", object()):
        with pytest.raises(UsageError, match="FaceAnalyser"):
            FaceTracker(bad)  # type: ignore[arg-type]
    # Its counts and rates are checked too (NaN, 2.5 and True had been taken, "3" had
    # been a TypeError).
    settings: list[dict[str, object]] = [
        {"max_faces": float("nan")},
        {"max_faces": 2.5},
        {"max_faces": True},
        {"redetect_every": float("inf")},
        {"redetect_every": "3"},
        {"iou_match": float("nan")},
        {"static_threshold": -1.0},
        {"hold_lost": 9, "max_lost": 3},
    ]
    for setting in settings:
        with pytest.raises(UsageError):
            FaceTracker(FakeAnalyser(), **setting)  # type: ignore[arg-type]


class TestIdentity:
    def test_one_moving_face_keeps_its_id_and_detects_every_n(self) -> None:
        fake = FakeAnalyser()
        tracker = FaceTracker(fake, redetect_every=5, smoothing=False)
        for i in range(20):
            fake.faces = [(200 + 4 * i, 200 + 2 * i, 120)]
            tracked = tracker.update(_BLANK, i / 30)
            assert [t.track_id for t in tracked] == [0]
            assert tracked[0].lost == 0 and tracked[0].age == i + 1
            np.testing.assert_allclose(
                _centre(tracked[0]), fake.mesh(*fake.faces[0])[:, :2].mean(0)
            )
        assert fake.calls["get_faces"] == tracker.counters.detections == 4  # frames 0, 5, 10, 15
        assert fake.calls["face_from_box"] == tracker.counters.fits == 16

    def test_two_faces_keep_their_ids(self) -> None:
        fake = FakeAnalyser()
        tracker = FaceTracker(fake, redetect_every=3, smoothing=False)
        for i in range(15):
            fake.faces = [(150 + 5 * i, 240, 100), (500 - 5 * i, 240, 80)]  # approach each other
            tracked = tracker.update(_BLANK, i / 30)
            assert [t.track_id for t in tracked] == [0, 1]
            assert _centre(tracked[0])[0] == pytest.approx(150 + 5 * i, abs=2)
            assert _centre(tracked[1])[0] == pytest.approx(500 - 5 * i, abs=2)

    def test_new_face_found_at_next_detection(self) -> None:
        fake = FakeAnalyser()
        tracker = FaceTracker(fake, redetect_every=4, smoothing=False)
        fake.faces = [(150, 200, 100)]
        counts = []
        for i in range(9):
            if i == 2:
                fake.faces.append((450, 200, 100))
            counts.append(len(tracker.update(_BLANK, i / 30)))
        assert counts == [1, 1, 1, 1, 2, 2, 2, 2, 2]
        assert [t.track_id for t in tracker.update(_BLANK, 0.3)] == [0, 1]

    def test_lost_face_triggers_detection_then_is_dropped(self) -> None:
        fake = FakeAnalyser()
        tracker = FaceTracker(fake, redetect_every=100, smoothing=False, max_lost=3, hold_lost=1)
        fake.faces = [(200, 200, 100)]
        tracker.update(_BLANK, 0.0)
        tracker.update(_BLANK, 0.1)
        assert tracker.counters.detections == 1
        fake.faces = []
        lost = [[t.lost for t in tracker.update(_BLANK, 0.2 + i / 10)] for i in range(5)]
        assert lost == [[1], [], [], [], []]  # held one frame, then hidden, dropped after 3
        assert tracker.counters.detections == 1 + 4  # every frame while a track was lost or none
        fake.faces = [(200, 200, 100)]
        assert [t.track_id for t in tracker.update(_BLANK, 1.0)] == [1]  # a new id

    def test_short_loss_keeps_the_id(self) -> None:
        fake = FakeAnalyser()
        tracker = FaceTracker(fake, redetect_every=100, smoothing=False, max_lost=5)
        fake.faces = [(200, 200, 100)]
        tracker.update(_BLANK, 0.0)
        fake.faces = []
        tracker.update(_BLANK, 0.1)
        tracker.update(_BLANK, 0.2)
        fake.faces = [(210, 205, 100)]
        tracked = tracker.update(_BLANK, 0.3)
        assert [(t.track_id, t.lost) for t in tracked] == [(0, 0)]

    def test_max_faces(self) -> None:
        fake = FakeAnalyser()
        fake.faces = [(100 + 150 * k, 200, 100) for k in range(4)]
        tracked = FaceTracker(fake, max_faces=2).update(_BLANK, 0.0)
        assert [t.track_id for t in tracked] == [0, 1]

    def test_reset_forgets_tracks_but_not_ids(self) -> None:
        fake = FakeAnalyser()
        fake.faces = [(200, 200, 100)]
        tracker = FaceTracker(fake)
        tracker.update(_BLANK, 0.0)
        tracker.reset()
        assert [t.track_id for t in tracker.update(_BLANK, 0.1)] == [1]
        assert tracker.counters.detections == 2

    def test_a_new_frame_size_starts_new_tracks(self) -> None:
        """A WebRTC stream lowers its resolution: no face of the old size is handed on
        (Swapper.swap refuses a face found in another frame), even one held while lost."""
        fake = FakeAnalyser()
        tracker = FaceTracker(fake, redetect_every=100, smoothing=False, hold_lost=5)
        fake.faces = [(200, 200, 100)]
        tracker.update(_BLANK, 0.0)
        fake.faces = []
        held = tracker.update(_BLANK, 0.1)
        assert [t.lost for t in held] == [1]  # the last frame's face, held
        smaller = np.zeros((240, 320, 3), np.uint8)
        assert tracker.update(smaller, 0.2) == []
        fake.faces = [(100, 100, 50)]
        faces = tracker.update(smaller, 0.3)
        assert [t.face.frame_shape for t in faces] == [(240, 320)]

    def test_a_scene_cut_starts_new_tracks(self) -> None:
        # Two scenes with the same face position (the fake analyser's face stays put):
        # after the cut the mesh fit would carry the track onto whoever sits there.
        ramp = np.tile(np.linspace(0, 255, 640, dtype=np.float32), (480, 1))
        scene_a = np.repeat(ramp[..., None], 3, axis=2).astype(np.uint8)
        scene_b = 255 - scene_a  # the ramp the other way
        frames = [scene_a] * 6 + [scene_b] * 6

        def ids(cut_threshold: float) -> tuple[list[int], int]:
            fake = FakeAnalyser()
            fake.faces = [(300, 240, 120)]
            tracker = FaceTracker(
                fake, redetect_every=100, smoothing=False, cut_threshold=cut_threshold
            )
            seen = [tracker.update(f, i / 30)[0].track_id for i, f in enumerate(frames)]
            return seen, tracker.counters.cuts

        assert ids(20.0) == ([0] * 6 + [1] * 6, 1)
        assert ids(0.0) == ([0] * 12, 0)  # without the check the track runs on

    def test_camera_motion_is_no_cut(self) -> None:
        fake = FakeAnalyser()
        fake.faces = [(300, 240, 120)]
        tracker = FaceTracker(fake, smoothing=False)
        scene = cv2.resize(_texture((60, 80), seed=3), (640, 480), interpolation=cv2.INTER_CUBIC)
        for i in range(20):  # a pan of 6 px a frame over a coarse texture
            tracked = tracker.update(np.roll(scene, 6 * i, axis=1), i / 30)
            assert [t.track_id for t in tracked] == [0]
        assert tracker.counters.cuts == 0

    def test_bad_arguments(self) -> None:
        with pytest.raises(UsageError):
            FaceTracker(FakeAnalyser(), redetect_every=0)
        with pytest.raises(UsageError):
            FaceTracker(FakeAnalyser(), max_lost=1, hold_lost=2)


def test_a_new_tracker_and_reset_restart_the_analyser_sequence() -> None:
    fake = FakeAnalyser()
    fake.faces = [(320, 240, 160)]
    tracker = FaceTracker(fake)
    assert fake.calls["reset"] == 1  # a shared analyser forgets the previous clip
    tracker.update(_BLANK, 0.0)
    tracker.reset()
    assert fake.calls["reset"] == 2
    assert tracker.update(_BLANK, 1.0)[0].track_id == 1  # ids keep counting up


class TestSmoothing:
    def test_smoothing_reduces_jitter_on_a_still_face(self) -> None:
        spread = {}
        for smoothing in (False, True):
            fake = FakeAnalyser(noise=1.0, seed=3)
            fake.faces = [(300, 240, 150)]
            tracker = FaceTracker(fake, smoothing=smoothing)
            meshes = [tracker.update(_BLANK, i / 30)[0].face.landmarks_478 for i in range(60)]
            spread[smoothing] = np.stack(meshes)[20:, :, :2].std(axis=0).mean()
        assert spread[True] < spread[False] / 2

    def test_a_blink_survives_the_file_jobs_smoothing(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # The file job's hard smoothing of the head must not smooth a blink away: the
        # face's shape has its own, lighter filter, and its lids are kept within
        # LID_MAX_LAG of the mesh (either alone follows this blink).
        blink = {20: 0.5, 21: 1.0, 22: 1.0, 23: 0.5}
        fake = FakeAnalyser()
        fake.faces = [(300, 240, 200)]
        lids = np.array(
            [
                i
                for loop in fake.real.model.loops[:2]
                for i in loop
                if fake.canonical[i, 1] < fake.canonical[loop, 1].mean()
            ]
        )
        drop = 0.9 * float(np.ptp(fake.canonical[fake.real.model.loops[0], 1]))
        plain_mesh = fake.mesh
        closing = [0.0]  # how far the lids are closed in the frame being analysed

        def mesh(cx: float, cy: float, size: float) -> NDArray[np.float32]:
            points = plain_mesh(cx, cy, size)
            span = float(np.ptp(fake.canonical[:, 0]))
            points[lids, 1] += drop * closing[0] * size / span
            return points

        fake.mesh = mesh  # type: ignore[method-assign]
        depths = {}
        bound = tracking.LID_MAX_LAG
        assert bound > 0.0
        for expression in ("own", "head's", "head's, lids bounded"):
            settings = {"min_cutoff": FILE_SMOOTHING_MIN_CUTOFF, "beta": FILE_SMOOTHING_BETA}
            monkeypatch.setattr(tracking, "LID_MAX_LAG", 0.0 if expression == "head's" else bound)
            if expression != "own":
                settings |= {
                    "expression_cutoff": FILE_SMOOTHING_MIN_CUTOFF,
                    "expression_beta": FILE_SMOOTHING_BETA,
                }
            tracker = FaceTracker(fake, **settings)  # type: ignore[arg-type]
            gaps, raw = [], []
            for frame in range(30):
                closing[0] = blink.get(frame, 0.0)
                points = tracker.update(_BLANK, frame / 30)[0].face.landmarks_478
                gaps.append(_lid_gap(points))
                raw.append(_lid_gap(mesh(300, 240, 200)))
            # How far the eye closed, against how far it did (1).
            depths[expression] = (gaps[19] - min(gaps[20:25])) / (raw[19] - min(raw[20:25]))
        assert depths["own"] > 0.85
        assert depths["head's"] < 0.65
        assert depths["head's, lids bounded"] > 0.85

    def test_faces_carry_their_shape_at_rest(self) -> None:
        # Brows raised for 2 s of a 14 s clip: the shape at rest (the median of the
        # track's shapes over the last 10 s) stays the neutral one; held for 8 s, the
        # raised brows become the face at rest.
        fake = FakeAnalyser()
        fake.faces = [(300, 240, 200)]
        model = fake.real.model
        brows = np.concatenate([model.regions["left_eyebrow"], model.regions["right_eyebrow"]])
        raise_by = 0.03 * float(np.ptp(fake.canonical[:, 1]))
        plain_mesh = fake.mesh
        raised: list[bool] = [False]

        def mesh(cx: float, cy: float, size: float) -> NDArray[np.float32]:
            points = plain_mesh(cx, cy, size)
            span = float(np.ptp(fake.canonical[:, 0]))
            points[brows, 1] -= raise_by * size / span if raised[0] else 0.0
            return points

        fake.mesh = mesh  # type: ignore[method-assign]
        tracker = FaceTracker(fake)

        def brow_lift(at: float) -> float:  # the rest shape's brows over the canonical's
            face = tracker.update(_BLANK, at)[0].face
            assert face.rest is not None
            return float(fake.canonical[brows, 1].mean() - face.rest[brows, 1].mean())

        for frame in range(14 * 10):  # 10 fps
            raised[0] = 60 <= frame < 80
            lift = brow_lift(frame / 10)
        assert abs(lift) < 0.1 * raise_by
        for frame in range(140, 220):
            raised[0] = True
            lift = brow_lift(frame / 10)
        assert lift == pytest.approx(raise_by, rel=0.1)

    def test_faces_carry_their_skin_at_rest(self) -> None:
        # A fold between the brows for 1 s moves the skin's detail at rest (a running
        # median of a sample every half second) by two steps; held for 25 s, it is
        # part of it; and a cut starts it afresh.
        fake = FakeAnalyser()
        fake.faces = [(300, 240, 200)]
        tracker = FaceTracker(fake)
        plain = _texture((480, 640))
        glabella = fake.mesh(300, 240, 200)[9, :2]
        line = np.zeros(plain.shape[:2], np.uint8)
        x, y = (int(v) for v in glabella)
        cv2.line(line, (x, y - 10), (x, y + 10), 1, 2)
        # A fold as skin shows one: the skin there a third darker.
        folded = np.where(line[..., None] > 0, (plain * 0.67).astype(np.uint8), plain)
        model = fake.real.model
        size = creases.CREASE_SIZE
        u, v = np.round(model.uv[9] * (size - 1)).astype(int)
        fold = creases.face_detail(folded, fake.mesh(300, 240, 200), model)
        none = creases.face_detail(plain, fake.mesh(300, 240, 200), model)
        texel = np.unravel_index(np.argmin((fold - none)[v - 3 : v + 4, u - 3 : u + 4]), (7, 7))
        at = (v - 3 + int(texel[0]), u - 3 + int(texel[1]))
        depth = float(none[at] - fold[at])
        assert depth > 0.1  # the test needs a fold well over a few steps deep

        def rest_at(frame: int, image: np.ndarray) -> float:
            face = tracker.update(image, frame / 10)[0].face
            assert face.rest_detail is not None and face.rest_detail.shape == (size, size)
            return float(face.rest_detail[at])

        for frame in range(50):  # 10 fps
            rest_at(frame, plain)
        start = rest_at(50, folded)  # its first sample in the rest
        for frame in range(51, 60):
            rest_at(frame, folded)
        after_1s = rest_at(60, plain)
        assert start - after_1s <= 2 * creases.REST_STEPS[0] + 1e-6
        for frame in range(61, 300):
            held = rest_at(frame, folded)
        assert float(none[at]) - held > 0.8 * depth
        # A cut (the face jumps) starts the rest afresh: the held fold is gone from it,
        # and it is the face's detail in its new place.
        fake.faces = [(150, 240, 200)]
        for frame in range(300, 306):  # the old track is held for a frame or two
            tracked = tracker.update(plain, frame / 10)
        face = min(tracked, key=lambda t: abs(_centre(t)[0] - 150)).face
        assert abs(float(face.landmarks_478[:, 0].mean()) - 150) < 20
        assert face.rest_detail is not None
        moved = creases.face_detail(plain, fake.mesh(150, 240, 200), model)
        assert abs(float(face.rest_detail[at]) - float(moved[at])) < 0.02

    def test_no_skin_at_rest_without_creases(self, monkeypatch: pytest.MonkeyPatch) -> None:
        # A tracker for swaps that lay no creases does not read the skin's detail.
        fake = FakeAnalyser()
        fake.faces = [(300, 240, 200)]
        reads: list[int] = []
        face_detail = creases.face_detail

        def counted(*args: object, **kwargs: object) -> np.ndarray:
            reads.append(1)
            return face_detail(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(creases, "face_detail", counted)
        image = _texture((480, 640))
        for rest_detail, expected in ((False, 0), (True, 3)):
            reads.clear()
            tracker = FaceTracker(fake, rest_detail=rest_detail)  # type: ignore[arg-type]
            for frame in range(12):  # 1.2 s at 10 fps: samples at 0, 0.5 and 1 s
                face = tracker.update(image, frame / 10)[0].face
            assert len(reads) == expected
            assert (face.rest_detail is not None) == rest_detail
            assert face.rest is not None  # the shape at rest is followed either way

    def test_faces_carry_their_tracks_state(self) -> None:
        # What a swap follows over time (its edge colour) lives in Face.track_state: the
        # same dict in every frame of a track, another for another face, a new one when
        # the face jumps (a re-detection elsewhere, not motion). The faces before the
        # jump keep theirs: a file's swap stage, a thread behind the tracker, may still
        # be drawing them (emptied under it, the output changed from run to run).
        fake = FakeAnalyser()
        fake.faces = [(200, 240, 150), (450, 240, 150)]
        tracker = FaceTracker(fake)
        first = tracker.update(_BLANK, 0.0)
        states = [t.face.track_state for t in first]
        assert states[0] is not None and states[1] is not None and states[0] is not states[1]
        states[0]["kept"] = 1
        for frame in range(1, 5):
            tracked = tracker.update(_BLANK, frame / 10)
            assert [t.face.track_state for t in tracked] == states
            assert all(t.face.track_state is s for t, s in zip(tracked, states, strict=True))
        fake.faces = [(250, 240, 150), (450, 240, 150)]  # the first face jumps 50 px
        tracked = tracker.update(_BLANK, 0.5)
        assert tracked[0].track_id == first[0].track_id
        assert tracked[0].face.track_state == {} and states[0] == {"kept": 1}
        assert tracked[1].face.track_state is states[1]  # the other face did not jump
        again = tracker.update(_BLANK, 0.6)
        assert again[0].face.track_state is tracked[0].face.track_state

    def test_smoothed_face_is_rebuilt(self) -> None:
        fake = FakeAnalyser(noise=1.0)
        fake.faces = [(300, 240, 150)]
        tracker = FaceTracker(fake)
        for i in range(5):
            face = tracker.update(_BLANK, i / 30)[0].face
        x0, y0, x1, y1 = face.bbox
        points = face.landmarks_478
        assert (x0, y0) == pytest.approx(tuple(points[:, :2].min(0)))
        assert face.pose.translation[:2] == pytest.approx(points[:, :2].mean(0), abs=3)


class TestFrameSampling:
    def test_static_frames_reuse_previous_faces(self) -> None:
        fake = FakeAnalyser()
        fake.faces = [(300, 240, 150)]
        frame = _texture((480, 640))
        tracker = FaceTracker(fake, static_threshold=2.0)
        first = tracker.update(frame, 0.0)
        noisy = np.clip(frame.astype(np.int16) + 1, 0, 255).astype(np.uint8)  # under threshold
        assert tracker.update(noisy, 0.1) is first
        assert tracker.update(frame, 0.2) is first
        assert tracker.counters.reused == 2 and tracker.counters.fits == 0
        moved = np.roll(frame, 6, axis=1)
        assert tracker.update(moved, 0.3) is not first
        assert tracker.counters.fits == 1

    def test_background_change_outside_faces_is_static(self) -> None:
        fake = FakeAnalyser()
        fake.faces = [(150, 150, 100)]
        frame = _texture((480, 640))
        tracker = FaceTracker(fake, static_threshold=1.0)
        first = tracker.update(frame, 0.0)
        changed = frame.copy()
        changed[300:, 400:] = 255  # far from the face
        assert tracker.update(changed, 0.1) is first

    def test_static_disabled_by_default(self) -> None:
        fake = FakeAnalyser()
        fake.faces = [(300, 240, 150)]
        tracker = FaceTracker(fake)
        for i in range(3):
            tracker.update(_BLANK, i / 30)
        assert tracker.counters.reused == 0 and tracker.counters.fits == 2

    def test_frame_skip_carries_faces_with_motion_compensation(self) -> None:
        fake = FakeAnalyser()
        base = _texture((480, 640), seed=1)
        tracker = FaceTracker(fake, frame_skip=3, smoothing=False)
        errors = []
        for i in range(12):
            dx, dy = 3 * i, 2 * i
            fake.faces = [(250 + dx, 200 + dy, 140)]
            frame = np.ascontiguousarray(np.roll(base, (dy, dx), axis=(0, 1)))
            tracked = tracker.update(frame, i / 30)
            assert [t.track_id for t in tracked] == [0]
            errors.append(np.abs(_centre(tracked[0]) - (250 + dx, 200 + dy)).max())
        assert tracker.counters.skipped == 8  # frames 1, 2, 4, 5, 7, 8, 10, 11
        assert tracker.counters.detections + tracker.counters.fits == 4
        assert max(errors) < 0.5

    def test_frame_skip_analyses_at_once_without_tracks(self) -> None:
        fake = FakeAnalyser()
        tracker = FaceTracker(fake, frame_skip=4)
        tracker.update(_BLANK, 0.0)
        fake.faces = [(300, 240, 150)]
        assert len(tracker.update(_BLANK, 0.1)) == 1
        assert tracker.counters.skipped == 0


def _patch(photo: Frame, tint: tuple[float, float, float]) -> Frame:
    """A 260-px patch that stands for one person's face: a package photo's, tinted."""
    side = min(photo.shape[:2])
    square = cv2.resize(photo[:side, :side], (260, 260), interpolation=cv2.INTER_AREA)
    return np.clip(square.astype(np.float32) * np.array(tint, np.float32), 0, 255).astype(np.uint8)


def _scene(people: list[tuple[Frame, float, float]]) -> Frame:
    """A grey frame with each patch centred at (cx, cy), later ones in front."""
    frame = np.full((480, 800, 3), 60, np.uint8)
    for patch, cx, cy in people:
        x, y = round(cx) - 130, round(cy) - 130
        x0, y0 = max(0, x), max(0, y)
        x1, y1 = min(800, x + 260), min(480, y + 260)
        frame[y0:y1, x0:x1] = patch[y0 - y : y1 - y, x0 - x : x1 - x]
    return frame


class TestAnotherPerson:
    """A track's face turning into another person's (a jump cut that keeps the
    background, one person passing in front of another) goes on as a new track, so the
    router checks who it is; its own moves and light do not. The fake analyser's meshes
    sit on patches of two package photos (one tinted blue, one red)."""

    @pytest.fixture()
    def people(self, astronaut: np.ndarray, grace_hopper: np.ndarray) -> tuple[Frame, Frame]:
        return _patch(astronaut, (1.3, 1.0, 0.8)), _patch(grace_hopper, (0.8, 1.0, 1.3))

    def test_two_people_trading_places_become_new_tracks(self, people: tuple[Frame, Frame]) -> None:
        a, b = people
        fake = FakeAnalyser()
        # (No scene cut: the patches fill most of the frame.)
        tracker = FaceTracker(fake, redetect_every=100, smoothing=False, cut_threshold=0)
        ids = []
        for i in range(10):
            left, right = (a, b) if i < 5 else (b, a)
            fake.faces = [(200, 240, 120), (560, 240, 120)]
            tracked = tracker.update(_scene([(left, 200, 240), (right, 560, 240)]), i / 30)
            ids.append([t.track_id for t in tracked])
        assert ids == [[0, 1]] * 5 + [[2, 3]] * 5
        assert tracker.counters.relabelled == 2 and tracker.counters.detections == 1

    def test_one_persons_light_and_motion_keep_the_id(self, people: tuple[Frame, Frame]) -> None:
        """Brighter and darker (a light switched on), tinted (stage light), moving and
        noisy: one id."""
        a, _ = people
        fake = FakeAnalyser()
        tracker = FaceTracker(fake, redetect_every=4, smoothing=False)
        rng = np.random.default_rng(3)
        for i in range(16):
            gain = (1.0, 1.4, 0.7, 1.2)[i % 4]
            tint = np.array((1.0, 1.0, 1.0) if i < 8 else (0.8, 1.0, 1.25), np.float32)
            patch = np.clip(a.astype(np.float32) * gain * tint, 0, 255).astype(np.uint8)
            frame = _scene([(patch, 200 + 6 * i, 240)])
            noisy = frame.astype(np.int16) + rng.normal(0, 8, frame.shape).round().astype(np.int16)
            fake.faces = [(200 + 6 * i, 240, 120)]
            tracked = tracker.update(np.clip(noisy, 0, 255).astype(np.uint8), i / 30)
            assert [t.track_id for t in tracked] == [0]
        assert tracker.counters.relabelled == 0

    def test_a_face_hidden_by_another_is_found_again_at_once(
        self, people: tuple[Frame, Frame]
    ) -> None:
        """B walks in front of A: A's track, fitted onto B as B covers it, goes on
        as a new track (it is not A's any more) and is then dropped as B's double (B
        keeps its own), and the detector looks every frame until A shows again."""
        a, b = people
        fake = FakeAnalyser()
        tracker = FaceTracker(fake, redetect_every=10, smoothing=False, cut_threshold=0)
        for i, bx in enumerate((560, 500, 440)):  # B comes nearer, A still seen
            fake.faces = [(200, 240, 120), (bx, 240, 120)]
            tracked = tracker.update(_scene([(a, 200, 240), (b, bx, 240)]), i / 30)
            assert [t.track_id for t in tracked] == [0, 1]
        for i, bx in enumerate((380, 320, 260), 3):  # covering A: A's track sees B
            fake.faces = [(bx, 240, 120)]
            tracked = tracker.update(_scene([(a, 200, 240), (b, bx, 240)]), i / 30)
        assert [t.track_id for t in tracked] == [1]
        assert tracker.counters.relabelled == 1 and tracker.counters.merged == 1
        fake.faces = [(210, 240, 120)]
        tracker.update(_scene([(a, 200, 240), (b, 210, 240)]), 6 / 30)
        detections = tracker.counters.detections
        for i in range(6, 9):  # still hidden: the detector runs on every frame
            tracker.update(_scene([(a, 200, 240), (b, 210, 240)]), i / 30)
        assert tracker.counters.detections == detections + 3
        fake.faces = [(560, 240, 120), (210, 240, 120)]  # A shows again, elsewhere
        tracked = tracker.update(_scene([(a, 560, 240), (b, 210, 240)]), 9 / 30)
        assert [t.track_id for t in tracked] == [1, 3]
        # Two seconds on, the detector is back to every tenth frame.
        for i in range(10, 80):
            tracker.update(_scene([(a, 560, 240), (b, 210, 240)]), i / 30)
        late = tracker.counters.detections
        for i in range(80, 100):
            tracker.update(_scene([(a, 560, 240), (b, 210, 240)]), i / 30)
        assert tracker.counters.detections - late == 2

    def test_a_face_that_comes_in_beside_a_still_one_is_found(
        self, people: tuple[Frame, Frame]
    ) -> None:
        """Static frames (the known face still) are answered as they were for at most
        redetect_every frames in a row: a face coming in elsewhere had never been
        looked for while the known one stood still."""
        a, b = people
        fake = FakeAnalyser()
        tracker = FaceTracker(fake, redetect_every=5, smoothing=False, static_threshold=1.0)
        fake.faces = [(200, 240, 120)]
        still = _scene([(a, 200, 240)])
        tracker.update(still, 0.0)
        fake.faces = [(200, 240, 120), (560, 240, 120)]
        counts = []
        for i in range(1, 11):
            counts.append(len(tracker.update(_scene([(a, 200, 240), (b, 560, 240)]), i / 30)))
        assert counts == [1, 1, 1, 1, 2, 2, 2, 2, 2, 2]
        assert tracker.counters.reused == 4 + 4

    def test_a_second_track_on_one_face_is_dropped(self, people: tuple[Frame, Frame]) -> None:
        """A detection that starts a second track on a face another track holds (its
        box drifted, IoU under iou_match, the face still in its crop): the younger
        goes."""
        a, _ = people
        fake = FakeAnalyser()
        tracker = FaceTracker(fake, redetect_every=1, smoothing=False)
        fake.faces = [(300, 240, 120)]
        tracker.update(_scene([(a, 300, 240)]), 0.0)
        old = tracker._tracks[0]
        old.raw = old.raw + np.array([68, 0, 0], np.float32)
        tracked = tracker.update(_scene([(a, 300, 240)]), 1 / 30)
        assert [t.track_id for t in tracked] == [0]
        assert tracker.counters.merged == 1


def test_real_analyser_on_moving_photo(analyser: FaceAnalyser, astronaut: np.ndarray) -> None:
    """The astronaut drifting 1.5 px per frame, with sensor noise: one id, few detections."""
    rng = np.random.default_rng(0)
    frames = []
    for i in range(20):
        shift = np.array([[1, 0, 1.5 * i], [0, 1, 0.75 * i]], np.float64)
        moved = cv2.warpAffine(astronaut, shift, (512, 512), borderMode=cv2.BORDER_REFLECT)
        noisy = moved.astype(np.int16) + rng.normal(0, 6, moved.shape).round().astype(np.int16)
        frames.append(np.clip(noisy, 0, 255).astype(np.uint8))
    tracks = {}
    for smoothing in (False, True):
        tracker = FaceTracker(analyser, redetect_every=5, smoothing=smoothing)
        tracks[smoothing] = [tracker.update(frame, i / 30) for i, frame in enumerate(frames)]
        assert all([t.track_id for t in tracked] == [0] for tracked in tracks[smoothing])
        assert tracker.counters.detections == 4 and tracker.counters.fits == 16
    raw = np.stack([t[0].face.landmarks_478[:, :2] for t in tracks[False]])
    smooth = np.stack([t[0].face.landmarks_478[:, :2] for t in tracks[True]])
    # The face moves at constant speed: frame-to-frame acceleration is jitter.
    jitter_raw = np.abs(np.diff(raw, 2, axis=0))[5:].mean()
    jitter_smooth = np.abs(np.diff(smooth, 2, axis=0))[5:].mean()
    assert jitter_smooth < jitter_raw / 2
    assert np.abs(smooth[-5:] - raw[-5:]).mean() < 3  # and follows the motion with little lag
    motion = raw[-1].mean(0) - raw[0].mean(0)
    assert motion == pytest.approx((1.5 * 19, 0.75 * 19), abs=2)
