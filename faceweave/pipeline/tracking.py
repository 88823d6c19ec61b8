"""Faces followed from frame to frame: track ids, cheap tracking, smoothing, frame sampling.

Per frame, :meth:`FaceTracker.update` does the least work that keeps the faces right:

0. **Scene cut**: if a 32x18 thumbnail of the frame changed by more than
   ``cut_threshold`` grey levels since the previous frame, every track is
   dropped (:meth:`FaceTracker.reset`): the faces after a cut are new tracks, so
   an identity check (``--face-selector reference``) runs on them again instead
   of the mesh fit carrying the last person's track onto whoever now sits where
   they sat (counted as ``cuts``).
1. **Static frame**: if the face region (the whole frame when there is no face)
   barely changed since the last computed frame, the previous faces are
   returned as they are (counted as ``reused``), for up to ``redetect_every``
   frames in a row; then the frame is analysed and the detector run (a face that
   came in beside still ones had never been looked for).
2. **Skipped frame** (``frame_skip=N``): between every N-th frame the previous
   faces are carried along by the median optical flow of a few mesh points
   (motion compensation, counted as ``skipped``).
3. **Tracking mode**: each live track's mesh is fitted in a crop around the
   box predicted from its previous mesh; the detector does not run (``fits``).
4. **Detection**: on the first frame, every ``redetect_every`` analysed frames,
   when a track was lost or when there is no track, the detector runs
   (``detections``) and its faces are matched to the tracks by box IoU
   (Hungarian assignment); unmatched faces start new tracks.
5. **Another person**: a track's face is looked at in every fresh fit (a 32-px
   crop aligned on its five points); where it changed at once in both its shading
   and its colour, as between two people and not as one face moves, turns or is
   lit, the track goes on as a new track (a new id, its smoothing and rest
   started afresh), so an identity check (``reference``, ``map``, ``one``) runs on
   it: in a jump cut that leaves the background (two people trading places) and
   where one person passes in front of another, the fit had carried the first
   person's track onto the second, swapped as the first until a re-detection two
   or three later (counted as ``relabelled``). Two tracks fitted onto one face
   become one (counted as ``merged``): where one person hides the other, the one
   that changed its look goes, else the younger (a detection that had started a
   second track on a face, whose swap had been laid twice); the detector then runs
   on every analysed frame for HIDDEN_WATCH_S seconds, to find a hidden face as
   soon as it shows again.

Each track's landmarks pass through One-Euro filters (the head's pose hard, the
face's expression lightly: :class:`~faceweave.pipeline.smoothing.MeshSmoother`), and
the Face is rebuilt from the smoothed mesh so its pose and box follow. It also
carries the track's face at rest (``Face.rest``, the median of its pose-space shape
over the last ten seconds), against which a swap measures the source's identity
shape, so that a raised brow or a frown is kept whole, and its skin's detail at rest
(``Face.rest_detail``, a running median of its samples), against which a swap
reads the creases of its expression (frown lines, crow's feet: see
:mod:`faceweave.core.creases`).
"""

from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import cv2
import numpy as np
from numpy.typing import NDArray
from scipy.optimize import linear_sum_assignment

from faceweave.analysis.analyser import mesh_roll
from faceweave.core import creases
from faceweave.core.align import ffhq_alignment
from faceweave.core.facemodel import FaceModel, load_face_model
from faceweave.core.geometry import bbox_iou, to_pose_space
from faceweave.core.resize import shrink_to_side
from faceweave.errors import InputError, UsageError
from faceweave.pipeline.smoothing import MeshSmoother
from faceweave.types import BBox, Face, Frame, check_frame, is_real_number, is_whole_number

_FLOW_POINTS = np.arange(0, 468, 8)  # ~60 mesh vertices spread over the face, irises excluded
_WORK_SIDE = 640  # longest side of the grey image used for change detection and optical flow
_CUT_THUMB = (32, 18)  # the whole frame, shrunk, for scene-cut detection


class TrackingAnalyser(Protocol):
    """What the tracker needs from :class:`~faceweave.analysis.analyser.FaceAnalyser`."""

    def get_faces(self, frame: Frame) -> list[Face]: ...

    def face_from_box(
        self, frame: Frame, bbox: BBox, score: float = 1.0, roll: float = 0.0
    ) -> Face | None: ...

    def face_from_landmarks(
        self, frame: Frame, points: NDArray[np.floating], score: float = 1.0
    ) -> Face: ...


# A face's look (_look) changed into another person's: the correlation of its aligned
# grey crop (zero mean, unit variance) with the last one's under LOOK_MAX_CORRELATION
# and its colour (Lab a, b) moved by more than LOOK_MIN_COLOUR on average. On the
# development clips one person's fresh fits, frame to frame, correlate by 0.27 or
# more (the Hamilton clip's small turning faces; 0.87 for the talking heads) with
# colour moves of 5.9 at most (2.1); two people trading places, or one fitted onto
# the other in front of it, correlate by 0.06-0.17 with colour moves of 17-21.
LOOK_MAX_CORRELATION = 0.35
LOOK_MIN_COLOUR = 8.0
_LOOK_SIDE = 32
# Two tracks' boxes overlapping by this much (IoU) hold one face.
MERGE_IOU = 0.5
# After a face was hidden by another, the detector runs on every analysed frame for
# this long, to find it as it shows again (else up to redetect_every frames late).
HIDDEN_WATCH_S = 2.0
SNAP_FRACTION = 0.15  # mean landmark jump, as a fraction of the face size, that resets smoothing
# The face's shape (its expression: lids, lips, brows) is smoothed apart from its head
# pose (see MeshSmoother), by a One-Euro filter set as live video smooths the whole mesh.
EXPRESSION_MIN_CUTOFF = 1.0
EXPRESSION_BETA = 0.05
# The lids (see _lid_vertices) are kept within LID_MAX_LAG canonical units (an eye is
# 0.56 wide, open 0.19) of the mesh's own reading of the face's shape (MeshSmoother's
# ``max_lag``). The expression filter reads a fast blink's first frames as noise: on
# vid_p04 the tracked lids were still 0.16 of the eye's width apart on the first
# closed frame (0.03 as read), and the output showed one eye open, a slit with its
# iris; bounded, 0.05. On the development clips 84-95% of the filtered lid vertices
# lie within the bound (their median lag 0.005-0.010), and those do not change.
# On the video benchmark (the astronaut as the source) the flicker rose by 0.1-0.9%
# and the eyes followed the target's better on four clips of five (0.84 -> 0.90 on
# vid_p03); at 0.01, flicker +0.6-3%; at 0.03, the eyes' gain halved. The lips,
# bounded alike, followed no better and flickered more.
LID_MAX_LAG = 0.02
# A track's face at rest (Face.rest): the median of its pose-space shape sampled every
# REST_EVERY seconds over the last REST_SAMPLES samples (10 s): an expression held
# for less than half of that does not move it.
REST_EVERY = 0.5
REST_SAMPLES = 20
# Its skin's detail at rest (Face.rest_detail) is sampled at the same times and
# followed by a running median (creases.follow_rest: a step per sample, under 0.1 ms;
# a median of ten samples cost 2 ms, once every REST_EVERY, on the analysis thread).


@dataclass(frozen=True)
class TrackedFace:
    """A face with an identity that lasts across frames.

    Attributes:
        track_id: stable id, from 0, never reused within a tracker.
        face: the (smoothed) face in this frame.
        age: frames since the track started.
        lost: consecutive frames its mesh was not found; 0 when found in this frame
            (a lost face's geometry is carried by optical flow for ``hold_lost`` frames).
    """

    track_id: int
    face: Face
    age: int
    lost: int


@dataclass
class TrackerCounters:
    """How much work the tracker did, for benchmarks."""

    frames: int = 0
    detections: int = 0  # detector runs
    fits: int = 0  # mesh fits in tracking mode (crop around the predicted box)
    reused: int = 0  # static frames answered with the previous faces
    skipped: int = 0  # frames between analyses, carried by motion compensation
    cuts: int = 0  # scene cuts: every track dropped
    relabelled: int = 0  # tracks whose face became another person's: a new id
    merged: int = 0  # tracks dropped, fitted onto the face another track holds


@dataclass(eq=False)
class _Track:
    track_id: int
    face: Face
    raw: NDArray[np.float32]  # last unsmoothed (478, 3) mesh: boxes are predicted from it
    score: float
    smoother: MeshSmoother | None
    velocity: NDArray[np.float32] = field(default_factory=lambda: np.zeros(2, np.float32))
    age: int = 0
    lost: int = 0
    # The face's shape in pose space, one sample every REST_EVERY seconds (the last
    # REST_SAMPLES), their median (its shape at rest) and the last sample's time.
    shapes: list[NDArray[np.float32]] = field(default_factory=list)
    rest: NDArray[np.float32] | None = None
    rest_time: float = 0.0
    # Its skin's detail in face space at rest (creases.follow_rest).
    rest_detail: NDArray[np.float32] | None = None
    # What processors follow over time for this face (Face.track_state): a new dict
    # when the face jumps (faces in flight keep the one they were given).
    state: dict[str, Any] = field(default_factory=dict)
    # Its look in the last fresh fit (see _look), and the frame it was relabelled at.
    look: tuple[NDArray[np.float32], NDArray[np.float32]] | None = None
    relabelled_at: int = -1


def _box(points: NDArray[np.floating]) -> BBox:
    p = np.asarray(points)[:, :2]
    return (float(p[:, 0].min()), float(p[:, 1].min()), float(p[:, 0].max()), float(p[:, 1].max()))


class FaceTracker:
    """Keeps faces and their ids from frame to frame at a fraction of the detector's cost.

    Args:
        analyser: a :class:`~faceweave.analysis.analyser.FaceAnalyser` (or anything
            with ``get_faces``, ``face_from_box`` and ``face_from_landmarks``).
        redetect_every: run the detector at least every this many analysed frames.
        max_faces: at most this many tracks.
        iou_match: least box IoU for a detection to continue a track.
        max_lost: a track lost for more frames than this is dropped (its id retired).
        hold_lost: a lost track is still returned, moved by optical flow, for this
            many frames (avoids flicker when one fit fails); 0 returns found faces only.
        box_margin: the tracking crop's box grows by this fraction of its size per side.
        smoothing: filter landmarks with One-Euro filters (see
            :class:`~faceweave.pipeline.smoothing.MeshSmoother`): the head's pose by
            ``min_cutoff`` and ``beta``, the face's expression by
            ``expression_cutoff`` and ``expression_beta``.
        min_cutoff: One-Euro cutoff in Hz for a still head (lower: less jitter, more lag).
        beta: One-Euro speed coefficient in Hz per px/s (higher: less lag when moving).
        expression_cutoff, expression_beta: the same for the face's own motion
            (blinks, speech) in the head's frame.
        static_threshold: mean absolute grey-level difference (0-255) of the face
            region below which a frame counts as unchanged; 0 disables reuse.
        frame_skip: analyse every N-th frame, carry faces by optical flow between.
        cut_threshold: mean absolute grey-level change (0-255) of a 32x18 thumbnail
            of the whole frame from one frame to the next above which the frame
            starts a new scene and every track is dropped; 0 disables it. On the
            development clips, the Hamilton clip's three cuts change it by 26-30,
            camera moves by at most 13, and talking heads by under 4.
        rest_detail: follow each face's skin detail at rest (``Face.rest_detail``,
            what a swap's creases are measured against; about 1 ms a face every
            REST_EVERY seconds). False when no swap lays creases (``creases=0``).

    Example:
        >>> tracker = FaceTracker(FaceAnalyser(), redetect_every=10)
        >>> for packet in packets:  # doctest: +SKIP
        ...     tracked = tracker.update(packet.image, packet.time)
    """

    def __init__(
        self,
        analyser: TrackingAnalyser,
        *,
        redetect_every: int = 10,
        max_faces: int = 8,
        iou_match: float = 0.3,
        max_lost: int = 5,
        hold_lost: int = 2,
        box_margin: float = 0.1,
        smoothing: bool = True,
        min_cutoff: float = 1.0,
        beta: float = 0.05,
        expression_cutoff: float = EXPRESSION_MIN_CUTOFF,
        expression_beta: float = EXPRESSION_BETA,
        static_threshold: float = 0.0,
        frame_skip: int = 1,
        cut_threshold: float = 20.0,
        rest_detail: bool = True,
    ) -> None:
        if not all(
            callable(getattr(analyser, name, None))
            for name in ("get_faces", "face_from_box", "face_from_landmarks")
        ):
            raise UsageError(
                f"a FaceTracker follows faces with a FaceAnalyser, got {type(analyser).__name__}"
            )
        counts = {
            "redetect_every": redetect_every,
            "frame_skip": frame_skip,
            "max_faces": max_faces,
            "max_lost": max_lost,
        }
        for name, count in counts.items():  # (NaN, 2.5 and True had been taken)
            low = 0 if name == "max_lost" else 1
            if not is_whole_number(count) or count < low:
                raise UsageError(f"{name} must be a whole number of {low} or more, got {count!r}")
        if not is_whole_number(hold_lost) or not 0 <= hold_lost <= max_lost:
            raise UsageError("hold_lost must be between 0 and max_lost")
        fractions = {"iou_match": iou_match, "box_margin": box_margin}
        for name, value in fractions.items():
            if not is_real_number(value) or not 0.0 <= value <= 1.0:
                raise UsageError(f"{name} must be a number from 0 to 1, got {value!r}")
        rates = {
            "min_cutoff": min_cutoff,
            "beta": beta,
            "expression_cutoff": expression_cutoff,
            "expression_beta": expression_beta,
            "static_threshold": static_threshold,
            "cut_threshold": cut_threshold,
        }
        for name, value in rates.items():
            if not is_real_number(value) or not 0.0 <= value < math.inf:
                raise UsageError(f"{name} must be a finite number of 0 or more, got {value!r}")
        self.analyser = analyser
        self.redetect_every = redetect_every
        self.max_faces = max_faces
        self.iou_match = iou_match
        self.max_lost = max_lost
        self.hold_lost = hold_lost
        self.box_margin = box_margin
        self.smoothing = smoothing
        self.min_cutoff = min_cutoff
        self.beta = beta
        self.expression_cutoff = expression_cutoff
        self.expression_beta = expression_beta
        self.static_threshold = static_threshold
        self.frame_skip = frame_skip
        self.cut_threshold = cut_threshold
        self.rest_detail = rest_detail
        self.counters = TrackerCounters()
        self.reset()

    def reset(self) -> None:
        """Forget every track (after a seek or a scene cut); ids keep counting up.

        The analyser's own memory of earlier frames (MediaPipe's tracking graph) is
        reset too, so a new tracker on a shared analyser starts like a fresh one.
        """
        analyser_reset = getattr(self.analyser, "reset", None)
        if callable(analyser_reset):
            analyser_reset()
        self._tracks: list[_Track] = []
        self._output: list[TrackedFace] = []
        self._grey: NDArray[np.uint8] | None = None  # grey of the last computed frame
        self._thumb: NDArray[np.float32] | None = None  # thumbnail of the last frame
        self._since_detect = 0
        self._since_analysis = 0
        self._next_id = getattr(self, "_next_id", 0)
        self._watch_until: float | None = None  # (HIDDEN_WATCH_S) media time
        self._static_run = 0  # static frames answered in a row

    def update(self, frame: Frame, time: float) -> list[TrackedFace]:
        """The faces in this frame, ordered by track id.

        Args:
            frame: (H, W, 3) uint8 BGR.
            time: media time in seconds (drives the smoothing; may be irregular).

        Raises:
            InputError: ``frame`` is no uint8 (H, W, 3) image, or ``time`` no finite
                number.
        """
        check_frame(frame)
        if isinstance(time, bool) or not isinstance(time, numbers.Real):
            raise InputError(f"time must be a number of seconds, got {time!r}")
        if not math.isfinite(float(time)):
            raise InputError(f"time must be a finite number of seconds, got {time!r}")
        self.counters.frames += 1
        if self._output and self._output[0].face.frame_shape != frame.shape[:2]:
            # A new frame size (a WebRTC stream adapting its resolution): the tracks'
            # faces are another frame's, and swapping them would paint at its places.
            self.reset()
        grey = self._work_grey(frame)
        if self._is_cut(grey):
            self.counters.cuts += 1
            thumb = self._thumb
            self.reset()
            self._thumb = thumb
        if self._is_static(grey):
            if self._static_run + 1 < self.redetect_every:
                self._static_run += 1
                self.counters.reused += 1
                return self._output
            # A still stretch is looked at anew (detection too) every redetect_every
            # frames: a face that came in beside still faces had never been found, and
            # one found as it came in, half in the frame, never checked again.
            self._since_detect = self.redetect_every
            self._since_analysis = self.frame_skip
        self._static_run = 0
        carry = (
            self.frame_skip > 1
            and self._tracks
            and self._since_analysis < self.frame_skip - 1
            and not any(t.lost for t in self._tracks)
        )
        if carry:
            self.counters.skipped += 1
            self._since_analysis += 1
            for track in self._tracks:
                self._carry(track, frame, grey, time)
        else:
            self._since_analysis = 0
            self._analyse(frame, grey, time)
        self._grey = grey
        for track in self._tracks:
            track.age += 1
        self._output = [
            TrackedFace(t.track_id, t.face, t.age, t.lost)
            for t in sorted(self._tracks, key=lambda t: t.track_id)
            if t.lost <= self.hold_lost
        ]
        return self._output

    # -- analysis ----------------------------------------------------------------------------

    def _analyse(self, frame: Frame, grey: NDArray[np.uint8], time: float) -> None:
        tracks = self._tracks
        watching = (
            self._watch_until is not None
            and 0.0 <= self._watch_until - time <= HIDDEN_WATCH_S  # (a looped file's
            # time starts again: not a watch for a whole pass)
        )
        if not watching:
            self._watch_until = None
        detect = (
            not tracks
            or watching
            or self._since_detect + 1 >= self.redetect_every
            or any(t.lost for t in tracks)
        )
        unmatched = list(tracks)
        if detect:
            self.counters.detections += 1
            self._since_detect = 0
            faces = self.analyser.get_faces(frame)
            pairs = self._match(tracks, faces)
            for ti, fi in pairs:
                self._found(tracks[ti], faces[fi], frame, time)
            matched = {ti for ti, _ in pairs}
            unmatched = [t for i, t in enumerate(tracks) if i not in matched]
            new_faces = [f for i, f in enumerate(faces) if i not in {fi for _, fi in pairs}]
        else:
            self._since_detect += 1
            new_faces = []
        for track in unmatched:  # tracking mode: fit the mesh around the predicted box
            self.counters.fits += 1
            face = self.analyser.face_from_box(
                frame, self._predicted_box(track), track.score, mesh_roll(track.raw)
            )
            if face is not None:
                self._found(track, face, frame, time)
            else:
                track.lost += 1
                if track.lost <= self.hold_lost:
                    self._carry(track, frame, grey, time)
        self._tracks = [t for t in tracks if t.lost <= self.max_lost]
        for face in new_faces:
            if len(self._tracks) >= self.max_faces:
                break
            smoother = self._smoother() if self.smoothing else None
            track = _Track(self._next_id, face, face.landmarks_478, face.score, smoother)
            self._next_id += 1
            self._found(track, face, frame, time)
            self._tracks.append(track)
        self._tracks = self._one_per_face(self._tracks, time)

    def _one_per_face(self, tracks: list[_Track], time: float) -> list[_Track]:
        """The tracks less those fitted onto a face another one holds: of two, the one
        relabelled in this frame goes (it had been following a face now hidden by
        this one), else the younger (a relabelled one is young too; or a detection
        that started a second track on a face). The detector then watches for a
        hidden face to show again (HIDDEN_WATCH_S)."""
        fresh = [t for t in tracks if t.lost == 0]
        gone: set[int] = set()
        for i, a in enumerate(fresh):
            for b in fresh[i + 1 :]:
                if a.track_id in gone or b.track_id in gone:
                    continue
                if bbox_iou(_box(a.raw), _box(b.raw)) < MERGE_IOU:
                    continue
                frame_now = self.counters.frames
                relabelled = [t for t in (a, b) if t.relabelled_at == frame_now]
                loser = relabelled[0] if len(relabelled) == 1 else max(a, b, key=_younger)
                gone.add(loser.track_id)
        if not gone:
            return tracks
        self.counters.merged += len(gone)
        self._watch_until = time + HIDDEN_WATCH_S
        return [t for t in tracks if t.track_id not in gone]

    def _match(self, tracks: list[_Track], faces: list[Face]) -> list[tuple[int, int]]:
        """(track index, face index) pairs with IoU >= iou_match, best total IoU."""
        if not tracks or not faces:
            return []
        iou = np.array(
            [[bbox_iou(self._predicted_box(t, 0.0), f.bbox) for f in faces] for t in tracks]
        )
        rows, cols = linear_sum_assignment(-iou)
        return [
            (int(r), int(c)) for r, c in zip(rows, cols, strict=True) if iou[r, c] >= self.iou_match
        ]

    def _found(self, track: _Track, face: Face, frame: Frame, time: float) -> None:
        look = _look(frame, face)
        if track.look is not None and _another_person(track.look, look):
            self._relabel(track)
        track.look = look
        raw = np.asarray(face.landmarks_478, np.float32)
        # Per-frame motion, for the next box prediction; unknown after frames without a mesh.
        moved = raw[:, :2].mean(0) - track.raw[:, :2].mean(0)
        track.velocity = (moved if track.lost == 0 else np.zeros(2)).astype(np.float32)
        track.raw, track.score, track.lost = raw, face.score, 0
        track.face = self._smoothed(track, face, frame, time)

    def _relabel(self, track: _Track) -> None:
        """The track's face is another person's now: it goes on under a new id, its
        smoothing, rest and state started afresh (the old id is retired)."""
        self.counters.relabelled += 1
        track.track_id = self._next_id
        self._next_id += 1
        track.age = 0
        track.relabelled_at = self.counters.frames
        if track.smoother is not None:
            track.smoother.reset()
        track.velocity = np.zeros(2, np.float32)
        track.shapes.clear()
        track.rest = None
        track.rest_detail = None
        track.state = {}

    def _smoother(self) -> MeshSmoother:
        model = load_face_model()
        return MeshSmoother(
            model.canonical,
            model.rigid_weights,
            min_cutoff=self.min_cutoff,
            beta=self.beta,
            expression_cutoff=self.expression_cutoff,
            expression_beta=self.expression_beta,
            bounded=_lid_vertices(model) if LID_MAX_LAG > 0.0 else None,
            max_lag=LID_MAX_LAG,
        )

    def _smoothed(self, track: _Track, face: Face, frame: Frame, time: float) -> Face:
        previous = track.face
        if previous is not None:
            # A jump of a large part of the face in one frame is a cut or a re-detection
            # elsewhere, not motion: start the filter afresh instead of gliding over.
            jump = float(np.abs(face.landmarks_478[:, :2] - previous.landmarks_478[:, :2]).mean())
            if jump > SNAP_FRACTION * max(face.size, 1.0):
                if track.smoother is not None:
                    track.smoother.reset()
                track.shapes.clear()
                track.rest_detail = None
                # A new dict, not this one emptied: the frames before the jump, still
                # in the swap stage's hands (another thread), keep theirs. Emptied, it
                # went from under them when the tracker ran ahead, and a file's output
                # changed from run to run.
                track.state = {}
        if track.smoother is not None:
            points = track.smoother(face.landmarks_478, time, face.pose).astype(np.float32)
            face = self.analyser.face_from_landmarks(frame, points, track.score)
        return self._at_rest(track, face, frame, time)

    def _at_rest(self, track: _Track, face: Face, frame: Frame, time: float) -> Face:
        """The face with its shape at rest (Face.rest): the median of the track's
        pose-space shapes sampled every REST_EVERY seconds, the last REST_SAMPLES; and
        its skin's detail at rest (Face.rest_detail), a running median of its
        face-space detail sampled at the same times."""
        if not track.shapes or not 0.0 <= time - track.rest_time < REST_EVERY:
            track.shapes.append(to_pose_space(face.landmarks_478, face.pose).astype(np.float32))
            del track.shapes[:-REST_SAMPLES]
            track.rest = np.median(np.stack(track.shapes), axis=0).astype(np.float32)
            if self.rest_detail:
                detail = creases.face_detail(frame, face.landmarks_478, load_face_model())
                track.rest_detail = creases.follow_rest(track.rest_detail, detail)
            track.rest_time = time
        return replace(
            face, rest=track.rest, rest_detail=track.rest_detail, track_state=track.state
        )

    def _predicted_box(self, track: _Track, margin: float | None = None) -> BBox:
        """The box of the last raw mesh, moved by the track's velocity and grown by a margin."""
        m = self.box_margin if margin is None else margin
        x0, y0, x1, y1 = _box(track.raw)
        dx, dy = (float(v) for v in track.velocity)
        mx, my = m * (x1 - x0), m * (y1 - y0)
        return (x0 + dx - mx, y0 + dy - my, x1 + dx + mx, y1 + dy + my)

    # -- cheap frames ------------------------------------------------------------------------

    def _work_grey(self, frame: Frame) -> NDArray[np.uint8]:
        grey = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)
        # (An area filter at a ratio other than 2 took 0.85 ms a frame at 480p and
        # 1080p, 0.15-0.25 this way.)
        return np.asarray(shrink_to_side(grey, _WORK_SIDE), np.uint8)

    def _is_cut(self, grey: NDArray[np.uint8]) -> bool:
        """Whether the whole frame changed like a cut, not like motion (and remember it)."""
        if self.cut_threshold <= 0:
            return False
        thumb = cv2.resize(grey, _CUT_THUMB, interpolation=cv2.INTER_AREA).astype(np.float32)
        previous, self._thumb = self._thumb, thumb
        if previous is None:
            return False
        return float(cv2.absdiff(previous, thumb).mean()) > self.cut_threshold

    def _is_static(self, grey: NDArray[np.uint8]) -> bool:
        previous = self._grey
        if self.static_threshold <= 0 or previous is None or previous.shape != grey.shape:
            return False
        region = (slice(None), slice(None))
        if self._output:  # only the faces matter: background motion must not hide a blink
            s = grey.shape[1] / self._output[0].face.frame_shape[1]
            boxes = np.array([t.face.bbox for t in self._output]) * s
            x0, y0 = np.floor(boxes[:, :2].min(0)).astype(int)
            x1, y1 = np.ceil(boxes[:, 2:].max(0)).astype(int) + 1
            region = (slice(max(y0, 0), max(y1, 1)), slice(max(x0, 0), max(x1, 1)))
        diff = cv2.absdiff(previous[region], grey[region])
        return diff.size > 0 and float(diff.mean()) < self.static_threshold

    def _carry(self, track: _Track, frame: Frame, grey: NDArray[np.uint8], time: float) -> None:
        """Move a track's mesh by the median optical flow of a few of its vertices."""
        shift = np.zeros(2, np.float32)
        if self._grey is not None and self._grey.shape == grey.shape:
            s = grey.shape[1] / frame.shape[1]
            old = (track.raw[_FLOW_POINTS, :2] * s).reshape(-1, 1, 2).astype(np.float32)
            new, status, _ = cv2.calcOpticalFlowPyrLK(
                self._grey, grey, old, None, winSize=(21, 21), maxLevel=3
            )
            good = status.ravel() == 1
            if good.sum() >= 3:
                shift = (np.median((new - old).reshape(-1, 2)[good], axis=0) / s).astype(np.float32)
        raw = track.raw.copy()
        raw[:, :2] += shift
        track.raw, track.velocity = raw, shift
        face = self.analyser.face_from_landmarks(frame, raw, track.score)
        track.face = self._smoothed(track, face, frame, time)


def _younger(track: _Track) -> tuple[int, int]:
    return (-track.age, track.track_id)


def _look(frame: Frame, face: Face) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """A face's look: its crop aligned on its five points at _LOOK_SIDE px, as grey with
    zero mean and unit variance, and as Lab's a and b (about 0.05 ms)."""
    matrix = ffhq_alignment(face.landmarks_5, _LOOK_SIDE)
    crop = cv2.warpAffine(
        frame,
        matrix,
        (_LOOK_SIDE, _LOOK_SIDE),
        flags=cv2.INTER_AREA,
        borderMode=cv2.BORDER_REPLICATE,
    )
    lab = cv2.cvtColor(crop, cv2.COLOR_BGR2LAB).astype(np.float32)
    grey = lab[:, :, 0]
    grey = (grey - grey.mean()) / (float(grey.std()) + 1e-3)
    return grey.astype(np.float32), np.ascontiguousarray(lab[:, :, 1:])


def _another_person(
    before: tuple[NDArray[np.float32], NDArray[np.float32]],
    now: tuple[NDArray[np.float32], NDArray[np.float32]],
) -> bool:
    """Whether a face's look changed as between two people (see LOOK_MAX_CORRELATION)."""
    correlation = float((before[0] * now[0]).mean())
    if correlation >= LOOK_MAX_CORRELATION:
        return False
    return float(np.abs(before[1] - now[1]).mean()) > LOOK_MIN_COLOUR


@functools.lru_cache(maxsize=2)
def _lid_vertices(model: FaceModel) -> NDArray[np.intp]:
    """The eye openings' loops and the ring of vertices round them (sharing a triangle
    with a loop): the lids, from the lashes to the crease and the lower lid's band."""
    return model.around(np.concatenate(model.loops[:2]))
