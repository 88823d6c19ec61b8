"""swap_video and FaceRouter on synthetic clips built from the package faces.

Clips: the scene (skimage's astronaut, or the astronaut and matplotlib's Grace
Hopper side by side) scaled to the frame height and slid 2 pixels per frame,
x264 at 30 fps, with a 440 Hz AAC tone; 30 frames.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np
import pytest
from clips import FPS, make_clip  # tests/clips.py: tests/ is on sys.path
from synthetic_hands import FakeHands, fake_hands_class, hand_on_cheek  # tests/synthetic_hands.py

import faceweave.pipeline.video_job as video_job
from faceweave.analysis.analyser import FaceAnalyser
from faceweave.analysis.dlib_backend import DlibIdentity
from faceweave.analysis.hands import Hand
from faceweave.analysis.identity_worker import IdentityWorker
from faceweave.analysis.selection import face_distance
from faceweave.core.hands import hand_silhouette
from faceweave.errors import InputError, UsageError
from faceweave.io.video import VideoReader
from faceweave.pipeline.tracking import TrackedFace
from faceweave.pipeline.video_job import ONE_WAIT_FRAMES, FaceRouter, swap_video
from faceweave.processors.swap import SwapOptions
from faceweave.types import Face


def pair_scene(astronaut: np.ndarray, grace_hopper: np.ndarray) -> np.ndarray:
    """Astronaut left, Grace Hopper right, same height."""
    h = grace_hopper.shape[0]
    return np.hstack([cv2.resize(astronaut, (h, h)), grace_hopper])


def decode(path: Path) -> tuple[list[np.ndarray], list[int]]:
    with av.open(str(path)) as container:
        frames = list(container.decode(video=0))
    return [f.to_ndarray(format="bgr24") for f in frames], [int(f.pts) for f in frames]


def audio_packets(path: Path) -> list[bytes]:
    with av.open(str(path)) as container:
        return [bytes(p) for p in container.demux(audio=0) if p.size]


def tinted(frame: np.ndarray, bgr: tuple[float, float, float]) -> np.ndarray:
    return np.clip(frame.astype(np.float32) * np.array(bgr, np.float32), 0, 255).astype(np.uint8)


def box_of(faces: list[Face], shape: tuple[int, ...]) -> tuple[slice, slice]:
    x0, y0, x1, y1 = faces[0].bbox
    h, w = shape[:2]
    return slice(max(0, int(y0)), min(h, int(y1))), slice(max(0, int(x0)), min(w, int(x1)))


def mean_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.float32) - b.astype(np.float32)).mean())


@pytest.fixture(scope="module")
def astronaut_clip(tmp_path_factory: pytest.TempPathFactory, astronaut: np.ndarray) -> Path:
    return make_clip(tmp_path_factory.mktemp("clips") / "astronaut.mp4", astronaut)


@pytest.fixture(scope="module")
def pair_clip(
    tmp_path_factory: pytest.TempPathFactory, astronaut: np.ndarray, grace_hopper: np.ndarray
) -> Path:
    scene = pair_scene(astronaut, grace_hopper)
    return make_clip(tmp_path_factory.mktemp("clips") / "pair.mp4", scene, size=(640, 360))


# --- FaceRouter ------------------------------------------------------------------------------


def _tracked(faces: list[Face]) -> list[TrackedFace]:
    return [TrackedFace(i, face, 0, 0) for i, face in enumerate(faces)]


def test_router_map_gives_each_identity_its_source(
    pair_faces: list[Face], astronaut_face: Face, grace_hopper_face: Face
) -> None:
    assert len(pair_faces) == 2
    router = FaceRouter("map", references=[grace_hopper_face, astronaut_face])
    targets = router.route(_tracked(pair_faces), recheck=True)
    by_source = {t.source_index: t.face for t in targets}
    assert set(by_source) == {0, 1}
    assert by_source[0].bbox[0] > by_source[1].bbox[0]  # Grace Hopper is on the right
    checks = router.identity_checks
    router.route(_tracked(pair_faces), recheck=False)  # cached per track
    assert router.identity_checks == checks
    router.route(_tracked(pair_faces), recheck=True)  # re-detected: checked again
    assert router.identity_checks == checks + 2


def test_a_live_router_spaces_its_identity_checks(
    pair_faces: list[Face], astronaut_face: Face
) -> None:
    """``recheck_every``: a re-detection checks one known face again, the one checked
    longest ago, at most once in that many frames (a live session checking both every
    10 frames, 115 ms a face with Python's lock held, had run at 10 fps); new faces
    are checked at once, and the choice stays right."""
    tracked = _tracked(pair_faces)
    router = FaceRouter("reference", references=[astronaut_face], recheck_every=5)
    (first,) = router.route(tracked, recheck=True)
    assert router.identity_checks == 2  # both new
    rechecked = []
    for _ in range(20):
        before = router.identity_checks
        (target,) = router.route(tracked, recheck=True)  # re-detected on every frame
        assert target.track_id == first.track_id
        rechecked.append(router.identity_checks - before)
    assert rechecked == [0, 0, 0, 0, 1] * 4
    # One at a time, taking turns.
    assert router._checked_at[0] != router._checked_at[1]
    newcomer = [*tracked, TrackedFace(7, pair_faces[0], 0, 0)]
    before = router.identity_checks
    router.route(newcomer, recheck=False)
    assert router.identity_checks == before + 1


class _Worker:
    """An identity worker's face to the router (see IdentityWorker): it takes one face
    at a time and answers when the test says."""

    def __init__(self) -> None:
        self.alive = True
        self.busy = False
        self.sent: list[tuple[int, Face]] = []
        self.answers: list[tuple[int, np.ndarray]] = []

    def submit(self, key: int, face: Face) -> bool:
        if self.busy:
            return False
        self.sent.append((key, face))
        return True

    def results(self) -> list[tuple[int, np.ndarray]]:
        answers, self.answers = self.answers, []
        return answers


def _live_router(reference: Face, recheck_every: int) -> tuple[FaceRouter, _Worker]:
    """A live session's ``reference`` router with a stand-in identity worker."""
    worker = _Worker()
    router = FaceRouter(
        "reference",
        references=[reference],
        recheck_every=recheck_every,
        identity_worker=worker,  # type: ignore[arg-type]
    )
    return router, worker


def test_a_live_router_hands_known_faces_rechecks_to_its_identity_worker(
    pair_faces: list[Face], astronaut_face: Face
) -> None:
    """A recheck held a live session for about 100 ms (dlib holds Python's lock): a
    known face's goes to the worker, and its answer joins the face's history on a
    later frame. The first faces (nobody found yet) are checked at once, here: the
    person must not show unswapped."""
    router, worker = _live_router(astronaut_face, recheck_every=1)
    tracked = _tracked(pair_faces)
    (first,) = router.route(tracked, recheck=True)
    assert router.identity_checks == 2 and worker.sent == []  # both new: here
    router.route(tracked, recheck=True)
    assert len(worker.sent) == 1 and router.identity_checks == 3
    key, face = worker.sent[0]
    assert face is pair_faces[key]
    history = router._distances[key]
    assert len(history) == 1  # nothing computed here
    worker.answers.append((key, face.embedding))
    worker.busy = True
    (target,) = router.route(tracked, recheck=False)
    assert len(history) == 2 and target.track_id == first.track_id
    np.testing.assert_allclose(history[1], history[0])
    # Busy (or still loading): the due recheck waits for a later detection.
    router.route(tracked, recheck=True)
    assert len(worker.sent) == 1 and router.identity_checks == 3 and len(history) == 2
    worker.busy = False
    router.route(tracked, recheck=True)
    assert len(worker.sent) == 2 and router.identity_checks == 4
    # An answer for a track that has ended is dropped.
    worker.answers.append((worker.sent[1][0], astronaut_face.embedding))
    gone = [t for t in tracked if t.track_id != worker.sent[1][0]]
    router.route(gone, recheck=False)
    assert worker.sent[1][0] not in router._distances
    # A worker that has ended: rechecks are computed here again.
    worker.alive = False
    (left,) = gone
    before = len(router._distances[left.track_id])
    router.route(gone, recheck=True)
    assert len(router._distances[left.track_id]) == before + 1 and len(worker.sent) == 2


def test_a_files_router_waits_for_its_identity_worker(
    analyser: FaceAnalyser,
    pair_faces: list[Face],
    astronaut_face: Face,
    grace_hopper_face: Face,
) -> None:
    """A file's job (no recheck spacing) waits for each answer: the same distances to
    the bit, every check made by the child."""
    identity = analyser.identity
    assert isinstance(identity, DlibIdentity)
    worker = IdentityWorker.start(identity)
    assert worker is not None
    with worker:
        routers = [
            FaceRouter("map", references=[grace_hopper_face, astronaut_face], identity_worker=w)
            for w in (worker, None)
        ]
        for recheck in (True, False, True):
            chosen = [r.route(_tracked(pair_faces), recheck=recheck) for r in routers]
            assert chosen[0] == chosen[1]
        assert routers[0].identity_checks == routers[1].identity_checks == 4
        assert worker.results() == [] and worker._next_id == 4  # all four asked of it


def test_a_newcomer_beside_the_person_waits_for_the_worker(
    pair_faces: list[Face], astronaut_face: Face
) -> None:
    """A guest walking in beside the person already found is checked by the worker,
    with no stall, and shows unswapped meanwhile; a newcomer while the person is out
    of view may be the person, back: checked at once, here."""
    person = min(pair_faces, key=lambda f: f.bbox[0])  # the astronaut, on the left
    guest = max(pair_faces, key=lambda f: f.bbox[0])
    router, worker = _live_router(astronaut_face, recheck_every=30)
    (target,) = router.route([TrackedFace(0, person, 0, 0)], recheck=True)
    assert target.track_id == 0 and router.identity_checks == 1  # here, at once
    both = [TrackedFace(0, person, 0, 0), TrackedFace(1, guest, 0, 0)]
    worker.busy = True  # a recheck in hand: the guest waits, unswapped
    (target,) = router.route(both, recheck=False)
    assert target.track_id == 0 and worker.sent == [] and 1 not in router._distances
    worker.busy = False
    (target,) = router.route(both, recheck=False)
    assert target.track_id == 0 and [key for key, _ in worker.sent] == [1]
    assert router.identity_checks == 2 and 1 not in router._distances  # not computed here
    router.route(both, recheck=False)
    assert len(worker.sent) == 1  # sent once
    worker.answers.append((1, guest.embedding))
    (target,) = router.route(both, recheck=False)
    assert target.track_id == 0 and len(router._distances[1]) == 1
    assert router._distances[1][0][0] > 0.6  # the answer: not the person
    # The person leaves; someone comes in: it may be the person, back (checked here).
    checks = router.identity_checks
    (target,) = router.route([TrackedFace(1, guest, 0, 0), TrackedFace(2, person, 0, 0)])
    assert target.track_id == 2 and router.identity_checks == checks + 1
    assert len(worker.sent) == 1


def test_router_reference_one_and_many(
    pair_faces: list[Face], grace_hopper_face: Face, astronaut_face: Face
) -> None:
    tracked = _tracked(pair_faces)
    chosen = FaceRouter("reference", references=[astronaut_face]).route(tracked)
    assert len(chosen) == 1 and chosen[0].face.bbox[0] == min(f.bbox[0] for f in pair_faces)
    assert chosen[0].distance is not None and chosen[0].distance < 0.6
    # A person is in a frame once: of two faces within the distance, only the nearer.
    loose = FaceRouter("reference", references=[astronaut_face], max_distance=10.0)
    only = loose.route(tracked)
    assert [t.track_id for t in only] == [chosen[0].track_id]
    assert len(FaceRouter("many").route(tracked)) == 2
    one = FaceRouter("one")
    first = one.route(tracked)
    assert len(first) == 1
    # The chosen track is kept while it lives, even when another face becomes larger.
    assert one.route(list(reversed(tracked)))[0].track_id == first[0].track_id
    with pytest.raises(UsageError):
        FaceRouter("reference")
    with pytest.raises(UsageError):
        FaceRouter("nearest")
    for distance in (float("nan"), -1.0, "0.6"):  # (NaN had matched no one, silently)
        with pytest.raises(UsageError, match="reference distance"):
            FaceRouter("reference", references=[astronaut_face], max_distance=distance)  # type: ignore[arg-type]


def test_a_face_checked_as_it_walked_in_is_judged_by_its_first_whole_look(
    pair_faces: list[Face], astronaut_face: Face
) -> None:
    """Checks of a face cut by the frame's edge (a person walking in) are replaced by
    the first check of it whole, not averaged with it: a person who walked in and stood
    still had stayed someone else for good."""
    from dataclasses import replace

    astronaut, other = sorted(pair_faces, key=lambda f: f.bbox[0])
    walking_in = replace(other, bbox=(-30.0, *other.bbox[1:]))  # read poorly, half out
    router = FaceRouter("reference", references=[astronaut_face])
    assert router.route([TrackedFace(5, walking_in, 0, 0)]) == []
    assert router.route([TrackedFace(5, walking_in, 1, 0)], recheck=True) == []
    (swapped,) = router.route([TrackedFace(5, astronaut, 2, 0)], recheck=True)
    assert swapped.track_id == 5 and swapped.distance == pytest.approx(
        face_distance(astronaut, astronaut_face)
    )
    # Whole looks are averaged as before: one bad angle does not flip who it is.
    assert router.route([TrackedFace(5, other, 3, 0)], recheck=True) != []


def test_router_one_finds_its_person_again_under_a_new_track(
    pair_faces: list[Face],
) -> None:
    """``one`` follows a person, not just a track: when the followed face's track ends
    within a shot and comes back under a new id, the same person is swapped again (it
    had jumped to the other, larger face at once); while it is away, nobody for up to
    ONE_WAIT_FRAMES frames; then, or after a cut, the first face in the order."""
    left, right = sorted(pair_faces, key=lambda f: f.bbox[0])
    router = FaceRouter("one", order="left-right")
    assert router.route([TrackedFace(0, left, 0, 0), TrackedFace(1, right, 0, 0)])[0].face is left
    # Its track ends; the other face stays, and the person is not seen for a while.
    for _ in range(ONE_WAIT_FRAMES):
        assert router.route([TrackedFace(1, right, 5, 0)]) == []
    checks = router.identity_checks
    assert checks == 1  # the other face was checked once, not in every frame
    # Back under a new id (to the right of the other one now: found by who it is).
    (again,) = router.route([TrackedFace(1, right, 6, 0), TrackedFace(7, left, 0, 0)])
    assert again.track_id == 7 and again.face is left
    # Gone for good: after the wait, the first face in the order.
    for _ in range(ONE_WAIT_FRAMES):
        assert router.route([TrackedFace(1, right, 7, 0)]) == []
    (other,) = router.route([TrackedFace(1, right, 8, 0)])
    assert other.track_id == 1
    # A scene cut chooses afresh at once.
    router = FaceRouter("one", order="left-right")
    router.route([TrackedFace(0, left, 0, 0)])
    (after_cut,) = router.route([TrackedFace(3, right, 0, 0)], cut=True)
    assert after_cut.track_id == 3


# --- swap_video -------------------------------------------------------------------------------


def test_swap_video_keeps_frames_order_audio_and_background(
    astronaut_clip: Path,
    tmp_path: Path,
    analyser: FaceAnalyser,
    grace_hopper_face: Face,
    astronaut_faces: list[Face],
) -> None:
    output = tmp_path / "out.mp4"
    calls: list[tuple[int, int]] = []
    stats = swap_video(
        [grace_hopper_face],
        astronaut_clip,
        output,
        analyser=analyser,
        progress=lambda done, total: calls.append((done, total)),
    )
    before, pts_in = decode(astronaut_clip)
    after, pts_out = decode(output)
    assert len(after) == len(before) == stats.frames_written == 30
    assert pts_out == pts_in  # timestamps kept, frames in order
    assert calls[-1] == (30, 30)
    assert stats.audio == "copy"
    assert audio_packets(output) == audio_packets(astronaut_clip)
    with av.open(str(output)) as out, av.open(str(astronaut_clip)) as src:
        d_out = float(out.streams.video[0].duration * out.streams.video[0].time_base)
        d_in = float(src.streams.video[0].duration * src.streams.video[0].time_base)
    assert abs(d_out - d_in) <= 1 / FPS + 1e-6
    assert stats.frames_swapped == 30 and stats.tracks == 1
    assert stats.tracker.detections >= 1 and stats.tracker.fits > 0
    assert {"source", "analyse", "select", "swap", "sink"} <= set(stats.stage_ms)
    for index in (0, 15, 29):
        faces = analyser.get_faces(before[index])
        rows, cols = box_of(faces, before[index].shape)
        assert mean_diff(after[index][rows, cols], before[index][rows, cols]) > 8.0
        # The background (the bottom band, far from the face) is only re-encoded; PyAV's
        # BGR->YUV conversion alone shifts a generation by about 2 levels.
        assert mean_diff(after[index][-60:], before[index][-60:]) < 4.0
        # Ordering: each output frame matches its own input frame best.
        others = [mean_diff(after[index][-60:], b[-60:]) for b in before]
        assert int(np.argmin(others)) == index
    assert list(tmp_path.glob("*.tmp")) == [] and list(tmp_path.glob(".*.tmp")) == []


def test_a_video_keeps_the_hands_its_tracker_finds(
    astronaut_clip: Path,
    tmp_path: Path,
    analyser: FaceAnalyser,
    grace_hopper_face: Face,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With mask_hands a video job tracks hands over its frames in order (one finder
    in MediaPipe's tracking mode, in a stage of its own) and every frame keeps them."""
    before, _ = decode(astronaut_clip)
    first = analyser.get_faces(before[0])[0]
    template = hand_on_cheek(first)
    made: list[FakeHands] = []
    given: list[Hand] = []

    def moving_hand(frame: np.ndarray, boxes: list[Any]) -> list[Hand]:
        # The hand moves with the face (the clip slides sideways).
        (box,) = boxes
        shift = np.array([box[0] - first.bbox[0], box[1] - first.bbox[1]], np.float32)
        given.append(Hand(template.landmarks + shift, 0.9, "left"))
        return [given[-1]]

    monkeypatch.setattr(video_job, "MediaPipeHands", fake_hands_class(made, moving_hand))
    plain_out, kept_out = tmp_path / "plain.mp4", tmp_path / "kept.mp4"
    swap_video([grace_hopper_face], astronaut_clip, plain_out, analyser=analyser)
    assert made == []  # no finder without the option
    stats = swap_video(
        [grace_hopper_face],
        astronaut_clip,
        kept_out,
        options={"mask_hands": True},
        analyser=analyser,
    )
    assert [finder.record() for finder in made] == [
        {"kwargs": {"tracking": True}, "calls": 30, "closed": True}
    ]
    assert "hands" in stats.stage_ms
    plain, kept = decode(plain_out)[0], decode(kept_out)[0]
    for index in (0, 29):
        silhouette = hand_silhouette(given[index].landmarks, before[index].shape[:2])
        inside = cv2.erode((silhouette == 1.0).astype(np.uint8), np.ones((9, 9), np.uint8)) > 0
        # Where the plain swap changed the face under the hand, the kept one did not.
        swapped = inside & (np.abs(plain[index].astype(int) - before[index]).max(axis=2) > 16)
        assert swapped.sum() > 100, swapped.sum()
        assert mean_diff(plain[index][swapped], before[index][swapped]) > 12.0
        assert mean_diff(kept[index][swapped], before[index][swapped]) < 3.0


@pytest.mark.parametrize("rotation", [90, 180])
def test_a_video_stored_turned_is_analysed_the_right_way_up(
    tmp_path: Path, astronaut: np.ndarray, grace_hopper_face: Face, rotation: int
) -> None:
    """A phone video stored in portrait or upside down, with a display rotation: its
    faces are looked for turned the way the rotation says, so the swap matches the one
    of the same clip stored upright. Upright only, an upside-down face's mesh is fitted
    the wrong way up."""
    upright = make_clip(tmp_path / "upright.mp4", astronaut, frames=6, audio=False)
    turned = make_clip(
        tmp_path / "turned.mp4", astronaut, frames=6, audio=False, display_rotation=rotation
    )
    with VideoReader(turned) as reader:
        next(iter(reader))
        if reader.rotation != rotation:
            pytest.skip("this PyAV/FFmpeg build does not round-trip the display matrix")
    back = {90: cv2.ROTATE_90_CLOCKWISE, 180: cv2.ROTATE_180}[rotation]
    outputs = {}
    analyser = FaceAnalyser(mode="video", with_embedding=False)
    jobs = [("upright", upright, None), ("turned", turned, analyser)]
    if rotation == 180:
        jobs.append(("upright only", turned, FaceAnalyser(mode="video", detector_angles=(0,))))
    for name, clip, job_analyser in jobs:
        out = tmp_path / f"{name} out.mp4"
        stats = swap_video([grace_hopper_face], clip, out, analyser=job_analyser)
        assert stats.frames_swapped == 6 or name == "upright only"
        outputs[name] = [f if name == "upright" else cv2.rotate(f, back) for f in decode(out)[0]]
    assert analyser.detector_angles is None  # the job's choice did not stick
    before = decode(upright)[0]
    for index in (0, 5):
        rows, cols = box_of(analyser.get_faces(before[index]), before[index].shape)
        reference = outputs["upright"][index][rows, cols]
        assert mean_diff(reference, before[index][rows, cols]) > 8.0  # swapped
        # Two encodes of turned frames, each tracked on its own, differ by about 5.
        assert mean_diff(outputs["turned"][index][rows, cols], reference) < 8.0
        if rotation == 180:
            assert mean_diff(outputs["upright only"][index][rows, cols], reference) > 12.0


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_interrupted_job_leaves_nothing(
    error: type[BaseException],
    astronaut_clip: Path,
    tmp_path: Path,
    analyser: FaceAnalyser,
    grace_hopper_face: Face,
) -> None:
    def progress(done: int, total: int) -> None:
        if done == 5:
            raise error("stop")

    with pytest.raises(error):
        swap_video(
            [grace_hopper_face],
            astronaut_clip,
            tmp_path / "out.mp4",
            analyser=analyser,
            progress=progress,
        )
    assert list(tmp_path.iterdir()) == []


def test_map_sends_each_identity_its_own_source(
    pair_clip: Path,
    tmp_path: Path,
    analyser: FaceAnalyser,
    grace_hopper: np.ndarray,
    astronaut_face: Face,
    grace_hopper_face: Face,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Two sources told apart by colour (no colour transfer): red goes to the astronaut,
    # blue to Grace Hopper.
    red = analyser.get_faces(tinted(grace_hopper, (0.5, 0.6, 1.6)))[0]
    blue = analyser.get_faces(tinted(grace_hopper, (1.6, 0.6, 0.5)))[0]
    output = tmp_path / "map.mp4"
    # The identities are computed by a child process (dlib holds Python's lock), each
    # answer waited for: the same choices, and every check made there.
    embedded: list[IdentityWorker] = []
    start, embed = IdentityWorker.start, IdentityWorker.embed

    def recorded(identity: DlibIdentity) -> IdentityWorker | None:
        worker = start(identity)
        assert worker is not None
        embedded.append(worker)
        return worker

    def counted(self: IdentityWorker, face: Face) -> np.ndarray | None:
        found = embed(self, face)
        assert found is not None
        self.answered = getattr(self, "answered", 0) + 1  # type: ignore[attr-defined]
        return found

    monkeypatch.setattr(IdentityWorker, "start", staticmethod(recorded))
    monkeypatch.setattr(IdentityWorker, "embed", counted)
    stats = swap_video(
        [red, blue],
        pair_clip,
        output,
        analyser=analyser,
        options=SwapOptions(color="none"),
        selector="map",
        references=[astronaut_face, grace_hopper_face],
    )
    assert stats.frames_swapped == 30 and stats.faces_swapped == 60
    before, _ = decode(pair_clip)
    after, _ = decode(output)
    for index in (3, 20):
        faces = sorted(analyser.get_faces(before[index]), key=lambda f: f.bbox[0])
        assert len(faces) == 2
        redness = []
        for face in faces:
            rows, cols = box_of([face], before[index].shape)
            change = after[index][rows, cols].astype(float) - before[index][rows, cols]
            redness.append(float(change[..., 2].mean() - change[..., 0].mean()))
        assert redness[0] > 10 and redness[1] < -10, redness
    (worker,) = embedded
    assert worker.answered == stats.identity_checks > 0  # type: ignore[attr-defined]
    assert not worker.alive and worker._process.returncode == 0  # ended with the job


def test_reference_swaps_only_the_chosen_person(
    pair_clip: Path,
    tmp_path: Path,
    analyser: FaceAnalyser,
    astronaut_face: Face,
    grace_hopper_face: Face,
) -> None:
    output = tmp_path / "ref.mp4"
    stats = swap_video(
        [astronaut_face],
        pair_clip,
        output,
        analyser=analyser,
        selector="reference",
        references=[grace_hopper_face],
    )
    assert stats.faces_swapped == stats.frames_swapped == 30
    before, _ = decode(pair_clip)
    after, _ = decode(output)
    faces = sorted(analyser.get_faces(before[10]), key=lambda f: f.bbox[0])
    left = box_of(faces[:1], before[10].shape)
    right = box_of(faces[1:], before[10].shape)
    assert mean_diff(after[10][left], before[10][left]) < 4.0
    assert mean_diff(after[10][right], before[10][right]) > 8.0


def _head(photo: np.ndarray, face: Face) -> np.ndarray:
    """A photo's head and shoulders, 180x220 px, round its face."""
    x0, y0, x1, y1 = face.bbox
    side = max(x1 - x0, y1 - y0)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    rows = slice(max(0, int(cy - 1.1 * side)), int(cy + 1.1 * side))
    cols = slice(max(0, int(cx - 0.9 * side)), int(cx + 0.9 * side))
    return np.ascontiguousarray(cv2.resize(photo[rows, cols], (180, 220)))


def _two_people(heads: list[tuple[np.ndarray, float]]) -> np.ndarray:
    """An 854x480 frame, plain green-grey, with each head at x (top at 130), the later
    ones in front."""
    frame = np.full((480, 854, 3), (90, 110, 100), np.uint8)
    for head, x in heads:
        x0, x1 = max(0, round(x)), min(854, round(x) + 180)
        frame[130:350, x0:x1] = head[:, x0 - round(x) : x1 - round(x)]
    return frame


def _write(path: Path, frames: list[np.ndarray]) -> Path:
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=25, options={"preset": "ultrafast", "crf": "16"})
        stream.width, stream.height, stream.pix_fmt = 854, 480, "yuv420p"
        for frame in frames:
            out.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="bgr24")))
        out.mux(stream.encode(None))
    return path


def test_people_trading_places_are_each_swapped_as_themselves(
    tmp_path: Path,
    analyser: FaceAnalyser,
    astronaut: np.ndarray,
    grace_hopper: np.ndarray,
    astronaut_face: Face,
    grace_hopper_face: Face,
) -> None:
    """A jump cut on one background where two people trade places: the mesh fits had
    carried each one's track onto the other (the astronaut swapped as Grace Hopper for
    the 18 frames until identities were checked again); each track that turns into
    another person's is a new one, checked at once."""
    a, b = _head(astronaut, astronaut_face), _head(grace_hopper, grace_hopper_face)
    spots = [(150, 520) if i < 10 else (520, 150) for i in range(24)]
    clip = _write(tmp_path / "jump.mp4", [_two_people([(a, x), (b, y)]) for x, y in spots])
    output = tmp_path / "out.mp4"
    stats = swap_video(
        [astronaut_face],
        clip,
        output,
        analyser=video_job.video_analyser(all_faces=True),
        selector="reference",
        references=[grace_hopper_face],
    )
    assert stats.tracker.relabelled == 2 and stats.frames_swapped == 24
    before, _ = decode(clip)
    after, _ = decode(output)
    for index, (ax, bx) in enumerate(spots):
        rows = slice(165, 300)
        changed = [
            mean_diff(after[index][rows, x + 40 : x + 140], before[index][rows, x + 40 : x + 140])
            for x in (ax, bx)
        ]
        assert changed[0] < 3.0 and changed[1] > 8.0, (index, changed)


def test_a_face_hidden_by_another_is_not_carried_onto_it(
    analyser: FaceAnalyser,
    astronaut: np.ndarray,
    grace_hopper: np.ndarray,
    astronaut_face: Face,
    grace_hopper_face: Face,
) -> None:
    """Grace Hopper walks across in front of the astronaut: the astronaut's track, fitted
    onto her face as it was hidden, had gone on as hers (and hers as the astronaut's
    once they parted). The face each track ends on is the one it started on."""
    from faceweave.pipeline.tracking import FaceTracker

    a, b = _head(astronaut, astronaut_face), _head(grace_hopper, grace_hopper_face)
    tracker = FaceTracker(video_job.video_analyser(all_faces=True))
    first: dict[int, str] = {}
    for index in range(40):
        ax, bx = 100 + 11.5 * index, 560 - 11.5 * index  # they cross at frame 20
        tracked = tracker.update(_two_people([(a, ax), (b, bx)]), index / 25)
        for t in tracked:
            if t.lost:
                continue
            centre = (t.face.bbox[0] + t.face.bbox[2]) / 2
            who = "a" if abs(centre - (ax + 90)) < abs(centre - (bx + 90)) else "b"
            assert first.setdefault(t.track_id, who) == who, (index, t.track_id)
    assert tracker.counters.merged >= 1
    assert len({t.track_id for t in tracked}) == 2 and {first[t.track_id] for t in tracked} == {
        "a",
        "b",
    }


def test_frames_without_a_face_pass_through(
    tmp_path: Path, analyser: FaceAnalyser, grace_hopper_face: Face
) -> None:
    clip = make_clip(tmp_path / "grey.mkv", None, frames=10, audio=False)
    stats = swap_video([grace_hopper_face], clip, tmp_path / "out.mkv", analyser=analyser)
    assert stats.frames_written == 10 and stats.frames_swapped == 0 and stats.audio == "none"
    after, _ = decode(tmp_path / "out.mkv")
    assert all(abs(float(frame.mean()) - 90) < 6 for frame in after)  # no black frames


def test_truncated_input_keeps_what_decodes(
    astronaut: np.ndarray, tmp_path: Path, analyser: FaceAnalyser, grace_hopper_face: Face
) -> None:
    clip = make_clip(tmp_path / "full.mkv", astronaut, frames=30, size=(320, 240))
    cut = tmp_path / "cut.mkv"
    cut.write_bytes(clip.read_bytes()[: clip.stat().st_size * 6 // 10])
    stats = swap_video([grace_hopper_face], cut, tmp_path / "out.mp4", analyser=analyser)
    assert 5 <= stats.frames_written < 30
    assert stats.warnings and "cut.mkv" in stats.warnings[0]
    after, _ = decode(tmp_path / "out.mp4")
    assert len(after) == stats.frames_written


def test_fps_and_trim(
    astronaut_clip: Path, tmp_path: Path, analyser: FaceAnalyser, grace_hopper_face: Face
) -> None:
    output = tmp_path / "out.mp4"
    stats = swap_video(
        [grace_hopper_face],
        astronaut_clip,
        output,
        analyser=analyser,
        fps=15,
        trim_start=0.2,
        trim_end=0.8,
    )
    after, pts = decode(output)
    assert len(after) == stats.frames_written
    assert 8 <= len(after) <= 10  # 0.6 s at 15 fps
    assert pts == sorted(pts)


@pytest.mark.parametrize(("fps", "trim", "frames"), [(60, None, 60), (60, (0.2, 0.8), 36)])
def test_a_faster_rate_repeats_the_last_frame_to_the_end(
    fps: int,
    trim: tuple[float, float] | None,
    frames: int,
    astronaut_clip: Path,
    tmp_path: Path,
    analyser: FaceAnalyser,
    grace_hopper_face: Face,
) -> None:
    """A 1 s clip at 30 fps made 60 fps is 60 frames, as long as its sound: the last
    frame's own time was not filled (59 frames, a frame shorter than the audio)."""
    start, end = trim if trim is not None else (None, None)
    output = tmp_path / "out.mp4"
    stats = swap_video(
        [grace_hopper_face],
        astronaut_clip,
        output,
        analyser=analyser,
        fps=fps,
        trim_start=start,
        trim_end=end,
        static_threshold=0,
    )
    after, pts = decode(output)
    assert len(after) == stats.frames_written == frames
    assert len(set(np.diff(pts))) == 1  # one frame per slot, no gap
    assert np.abs(after[-1].astype(int) - after[-2]).mean() < 0.5  # the last frame, twice


def test_bad_arguments(tmp_path: Path, analyser: FaceAnalyser, grace_hopper_face: Face) -> None:
    with pytest.raises(InputError):
        swap_video([grace_hopper_face], tmp_path / "nope.mp4", tmp_path / "o.mp4")
    with pytest.raises(UsageError):
        swap_video(
            [grace_hopper_face],
            tmp_path / "nope.mp4",
            tmp_path / "o.mp4",
            selector="map",
            references=[],
        )
    clip = make_clip(tmp_path / "clip.mp4", np.zeros((64, 64, 3), np.uint8), frames=3)
    before = clip.read_bytes()
    # The output would overwrite the target it reads: refused before anything is written.
    for same in (clip, tmp_path / "." / "clip.mp4"):
        with pytest.raises(UsageError, match="the output must not be the target video"):
            swap_video([grace_hopper_face], clip, same)
    assert clip.read_bytes() == before
    nan, inf = float("nan"), float("inf")
    for options, message in (
        ({"fps": nan}, "fps must be a positive number, got nan"),
        ({"fps": inf}, "fps must be a positive number, got inf"),
        ({"fps": 0}, "fps must be a positive number, got 0"),
        ({"trim_start": nan}, "trim_start must be a number of 0 seconds or more, got nan"),
        ({"trim_end": inf}, "trim_end must be a number of 0 seconds or more, got inf"),
        ({"trim_start": -1.0}, "trim_start must be a number of 0 seconds or more, got -1.0"),
    ):
        with pytest.raises(UsageError) as caught:
            swap_video([grace_hopper_face], clip, tmp_path / "o.mp4", **options)  # type: ignore[arg-type]
        assert str(caught.value) == message
    assert not (tmp_path / "o.mp4").exists()
    with pytest.raises(InputError, match="start must be a number of 0 seconds or more, got nan"):
        VideoReader(clip, start=nan)
    with pytest.raises(InputError, match="end must be a number of seconds over 0, got inf"):
        VideoReader(clip, end=inf)


def test_frame_skip_and_static_reuse_reach_the_tracker(
    tmp_path: Path, astronaut: np.ndarray, analyser: FaceAnalyser, grace_hopper_face: Face
) -> None:
    still = tmp_path / "still.mkv"
    with av.open(str(still), "w") as out:
        stream = out.add_stream("libx264", rate=30, options={"preset": "ultrafast", "crf": "0"})
        stream.width, stream.height, stream.pix_fmt = 320, 240, "yuv420p"
        picture = cv2.resize(astronaut, (320, 240))
        for _ in range(12):
            out.mux(stream.encode(av.VideoFrame.from_ndarray(picture, format="bgr24")))
        out.mux(stream.encode())
    reused = swap_video(
        [grace_hopper_face], still, tmp_path / "a.mkv", analyser=analyser, static_threshold=1.0
    )
    assert reused.tracker.reused >= 10 and reused.frames_swapped == 12
    skipped = swap_video(
        [grace_hopper_face],
        still,
        tmp_path / "b.mkv",
        analyser=analyser,
        frame_skip=3,
        static_threshold=0,  # (a still clip's frames all repeat the first)
    )
    assert skipped.tracker.skipped >= 6 and skipped.frames_swapped == 12
    # The default holds only repeated frames: here every frame after the first.
    repeats = swap_video([grace_hopper_face], still, tmp_path / "c.mkv", analyser=analyser)
    assert repeats.tracker.reused >= 10 and repeats.tracker.skipped == 0
    every = swap_video(
        [grace_hopper_face], still, tmp_path / "d.mkv", analyser=analyser, static_threshold=0
    )
    assert every.tracker.reused == 0 and every.tracker.skipped == 0


def test_a_repeated_frame_keeps_its_faces_where_they_were(
    tmp_path: Path, astronaut: np.ndarray, analyser: FaceAnalyser, grace_hopper_face: Face
) -> None:
    """A 25 fps video converted to 30 repeats every fifth frame: the face stays put on
    the repeat. It had slid on (the smoothing filter catching up with earlier motion)."""
    clip = tmp_path / "repeats.mkv"
    picture = cv2.resize(astronaut, (320, 320))
    shown = [3 * i for i in range(8)] + [21, 21, 21] + [24, 27]  # moving, then held
    with av.open(str(clip), "w") as out:
        stream = out.add_stream("libx264", rate=30, options={"preset": "ultrafast", "crf": "0"})
        stream.width, stream.height, stream.pix_fmt = 320, 320, "yuv420p"
        for dx in shown:
            moved = np.roll(picture, dx, axis=1)
            out.mux(stream.encode(av.VideoFrame.from_ndarray(moved, format="bgr24")))
        out.mux(stream.encode())

    def centres(**options: Any) -> list[np.ndarray]:
        found: list[np.ndarray] = []

        def keep(packet: Any) -> None:
            found.append(packet.data["targets"][0].face.landmarks_478[:, :2].mean(0))

        out = tmp_path / f"out{len(options)}.mkv"
        swap_video([grace_hopper_face], clip, out, analyser=analyser, on_frame=keep, **options)
        return found

    held, slid = centres(), centres(static_threshold=0)
    assert len(held) == len(slid) == len(shown)
    for repeat in (8, 9, 10):  # frames 8-10 show frame 7's picture
        assert float(np.abs(held[repeat] - held[7]).max()) < 0.01
    assert max(float(np.abs(slid[r] - slid[7]).max()) for r in (8, 9, 10)) > 0.3


def test_the_skin_at_rest_is_followed_only_for_creases(
    tmp_path: Path, analyser: FaceAnalyser, grace_hopper_face: Face, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[bool] = []
    tracker_class = video_job.FaceTracker

    def recording(*args: Any, **kwargs: Any) -> Any:
        made.append(kwargs["rest_detail"])
        return tracker_class(*args, **kwargs)

    monkeypatch.setattr(video_job, "FaceTracker", recording)
    clip = make_clip(tmp_path / "grey.mkv", None, frames=2, audio=False)
    for creases in (0.0, 0.5):
        options = SwapOptions(creases=creases)
        swap_video(
            [grace_hopper_face], clip, tmp_path / "o.mkv", analyser=analyser, options=options
        )
    assert made == [False, True]


def test_a_small_face_in_a_wide_shot_is_swapped(
    tmp_path: Path, astronaut: np.ndarray, grace_hopper_face: Face
) -> None:
    """A 720p clip with a face about 45 px wide: the whole frame's detector misses it,
    the tiles looked at on frames without a face find it, the tracker keeps it."""
    small = cv2.resize(astronaut, None, fx=0.45, fy=0.45, interpolation=cv2.INTER_AREA)
    scene = np.full((720, 1280, 3), 120, np.uint8)
    scene[300 : 300 + small.shape[0], 600 : 600 + small.shape[1]] = small
    clip = make_clip(tmp_path / "wide.mp4", scene, frames=12, size=(1280, 720), audio=False)
    stats = swap_video([grace_hopper_face], clip, tmp_path / "out.mp4")
    assert stats.frames_swapped >= 10, stats


def test_a_files_wide_shot_is_looked_at_in_a_stills_tiles(
    astronaut: np.ndarray, grace_hopper: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six portraits in a 1080p frame with no face the whole frame's detector sees (the
    astronaut's face about 50 px wide, Grace Hopper's about 90): a video file's analyser
    looks at tiles within a still's 480 px and finds all six on the first frame; within
    768 px (the adaptive mode's own default, 2 x 2 tiles) at most three."""
    from portraits import SMALL_AT_1080P, portrait_frame, portraits_found  # tests/portraits.py

    at = SMALL_AT_1080P
    frame = portrait_frame([astronaut, grace_hopper], (1080, 1920), at, 260)

    def found() -> set[int]:
        analyser = video_job.video_analyser(with_embedding=False)
        assert analyser.mode == "video"
        return portraits_found([f.bbox for f in analyser.get_faces(frame)], at, 260)

    assert found() == set(range(len(at)))
    monkeypatch.setattr(video_job, "VIDEO_TILE_MOST_PX", 768)
    assert len(found()) <= 3


def test_small_faces_beside_a_close_one_are_found_where_every_face_is_swapped(
    astronaut: np.ndarray, grace_hopper: np.ndarray
) -> None:
    """A 1080p shot of a close face (about 160 px wide) with five small portraits beside it
    (faces of about 50 and 85 px), held still: the tracker's detections find the close
    face on the whole frame and, with ``all_faces``, the small ones in the tiles they
    sweep in turn (all within 60 frames; a detection every 10th). Without it, as for
    a one-face swap, none of them."""
    from portraits import portrait_frame, portraits_found  # tests/portraits.py

    at = [(100, 120), (100, 700), (1500, 120), (1550, 650), (1650, 390)]
    frame = portrait_frame([astronaut, grace_hopper], (1080, 1920), at, 250)
    frame[100:1000, 560:1460] = cv2.resize(astronaut, (900, 900), interpolation=cv2.INTER_AREA)
    for all_faces, wanted in ((True, set(range(len(at)))), (False, set())):
        analyser = video_job.video_analyser(with_embedding=False, all_faces=all_faces)
        assert analyser.sweep_tiles is all_faces
        tracker = video_job.FaceTracker(analyser, max_faces=8)
        for i in range(60):
            tracked = tracker.update(frame, i / 30)
        boxes = [t.face.bbox for t in tracked]
        assert any(b[2] - b[0] > 150 for b in boxes)  # the close face, either way
        assert portraits_found(boxes, at, 250) == wanted


@pytest.mark.parametrize(
    ("input_fps", "output_fps", "kept"),
    [
        (30, 10, [0, 3, 6, 9, 12]),  # each slot's own frame, not the one before it
        (30, 25, [0, 1, 2, 4, 5, 6]),  # 0, 0.04, 0.08, 0.12...: the nearest frames
        (10, 30, [0, 1, 2, 3, 4, 5]),  # faster out: every frame, in the slot nearest it
    ],
)
def test_a_new_frame_rate_keeps_the_frame_nearest_each_slot(
    input_fps: int, output_fps: int, kept: list[int]
) -> None:
    resampler = video_job._Resampler(Fraction(output_fps), input_fps=float(input_fps))
    chosen = [i for i in range(40) if resampler.slot(i / input_fps) is not None]
    assert chosen[: len(kept)] == kept
    if output_fps > input_fps:
        resampler = video_job._Resampler(Fraction(output_fps), input_fps=float(input_fps))
        assert [resampler.slot(i / input_fps) for i in range(4)] == [0, 3, 6, 9]
