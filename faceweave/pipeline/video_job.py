"""Swap faces through a whole video file: decode -> track -> select -> swap -> encode.

::

    VideoReader --> analyse (FaceTracker) --> select (FaceRouter) --> swap --> VideoWriter
                    -------------------- Pipeline(mode="ordered") -------------------

Every decoded frame is written, in order, at its own timestamp; the audio of the
source is copied packet by packet (:class:`~faceweave.io.video.VideoWriter`), the
display rotation and the container's tags are written back, and the output appears
only when complete: on any error or Ctrl-C the writer is aborted and neither the
output nor its temporary file is left behind.

Which face gets which source is decided per *track* (:class:`FaceRouter`): for
``reference`` selection and ``map`` (N sources onto N identities) the identity
distance is computed when a track starts and re-checked each time the detector
sees it again, so the identity check costs one embedding per track and detection,
not one per frame. Frames where no (selected) face is found are written unchanged.

Example:
    >>> stats = swap_video([source_face], "clip.mp4", "out.mp4")  # doctest: +SKIP
    >>> print(stats.fps, stats.frames_written)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from faceweave.analysis.analyser import FaceAnalyser
from faceweave.analysis.dlib_backend import DlibIdentity
from faceweave.analysis.hands import Hand, MediaPipeHands
from faceweave.analysis.identity_worker import IdentityWorker
from faceweave.analysis.mediapipe_backend import TILE_MOST_PX
from faceweave.analysis.occluder import Occlusion
from faceweave.analysis.selection import SELECTORS, face_distance, order_faces
from faceweave.errors import InputError, UsageError
from faceweave.io.animation import (
    ANIMATION_EXTENSIONS,
    ANIMATION_MAX_BYTES,
    AnimationReader,
    AnimationWriter,
    animation_bytes,
    end_as_the_source,
    open_clip,
)
from faceweave.io.image import DEFAULT_QUALITY, PathLike, same_file
from faceweave.io.video import (
    DEFAULT_CRF,
    DEFAULT_PRESET,
    VideoReader,
    VideoWriter,
    _copyable_metadata,
    upright,
    video_extension,
)
from faceweave.pipeline.stages import Packet, Pipeline, Stage, Timing
from faceweave.pipeline.tracking import FaceTracker, TrackedFace, TrackerCounters
from faceweave.processors.engines import swap_options
from faceweave.processors.frame_enhancer import FrameEnhancer
from faceweave.processors.neural import AnySwapper, EnhancedSwapper, NeuralSwapper, uses_creases
from faceweave.processors.swap import SourceModel, SourcePhotos, SwapOptions, Swapper
from faceweave.provenance import embed_watermark, image_labels, labels_xmp, video_metadata
from faceweave.types import Face, Frame, is_real_number

__all__ = [
    "ROUTER_MODES",
    "FaceRouter",
    "SwapTarget",
    "VideoJobStats",
    "build_swappers",
    "hand_tracker",
    "swap_targets",
    "swap_video",
    "video_analyser",
]

ROUTER_MODES = (*SELECTORS, "map")
# Identity distances of a track are averaged over its last few checks: one bad angle
# at a re-detection must not flip who the track is.
_IDENTITY_HISTORY = 3
_FAR = 1e6  # cost of an impossible pairing in the assignment
# Selector ``one``: when the followed face's track ends within a shot (a crowd's small
# faces are lost and found again under new ids), the new tracks nearest to where it
# was are checked for its identity, at most this many a frame; none found, nothing is
# swapped for up to ONE_WAIT_FRAMES frames (it may be hidden for a moment) before the
# first face in the order is taken. A scene cut takes the first face at once. (It had
# jumped to whoever was largest: in the Hamilton clip's audience shot four people in
# 50 frames.)
ONE_CHECKS_PER_FRAME = 3
ONE_WAIT_FRAMES = 15


@dataclass(frozen=True)
class SwapTarget:
    """One target face of one frame and the source it gets.

    Attributes:
        face: the face in this frame.
        source_index: index into the job's sources.
        track_id: the tracker's id of the face (its position for a still image).
        distance: identity distance to its reference, None when not compared.
    """

    face: Face
    source_index: int
    track_id: int
    distance: float | None = None


class FaceRouter:
    """Decides, per track, which target faces get which source.

    Args:
        mode: ``one`` (one face, kept while its track lives), ``many`` (every face
            gets source 0), ``reference`` (faces within ``max_distance`` of
            ``references[0]`` get source 0), ``map`` (``references[i]`` names the
            person who gets source ``i``; each reference goes to at most one face
            per frame, the nearest, by an optimal assignment).
        references: reference faces (one for ``reference``, one per source for ``map``).
        max_distance: identity distance threshold (dlib descriptors, same person < 0.6).
        order: face order for ``one`` (see :func:`~faceweave.order_faces`).
        recheck_every: 0 (a file's job): a re-detection checks every track again. Over
            0 (a live session): it checks one track already checked, the one checked
            longest ago, and only once this many frames have passed since the last
            check; a new track is checked at once all the same. dlib's descriptor
            takes about 115 ms a face on this project's CPU and holds Python's lock
            meanwhile: checking two people every 10 frames had stalled a live
            session to 10 fps.
        identity_worker: computes identities in a child process (see
            :mod:`~faceweave.analysis.identity_worker`). A file's job (``recheck_every``
            0) waits for each answer, with Python's lock free for its other stages
            meanwhile: the same choices as without it. A live session does not wait:
            a known track's recheck is answered a few frames later, the frames
            meanwhile going on with the track's earlier checks, and so, in
            ``reference``, is the first check of a new track beside the person already
            found (it is nobody until answered); any other new track may be the person
            and is checked at once, in this process. None (or a worker that ended):
            every check in this process.

    Attributes:
        identity_checks: embeddings compared so far (one per track and re-detection).
        tracks_seen: distinct track ids routed so far.

    Example:
        >>> router = FaceRouter("map", references=[ref_a, ref_b])  # doctest: +SKIP
        >>> targets = router.route(tracker.update(frame, t), recheck=True)  # doctest: +SKIP
    """

    def __init__(
        self,
        mode: str = "one",
        *,
        references: Sequence[Face] = (),
        max_distance: float = 0.6,
        order: str = "large-small",
        recheck_every: int = 0,
        identity_worker: IdentityWorker | None = None,
    ) -> None:
        if mode not in ROUTER_MODES:
            raise UsageError(
                f"unknown face selector {mode!r}; choose from {', '.join(ROUTER_MODES)}"
            )
        if mode == "reference" and len(references) != 1:
            raise UsageError("face selector 'reference' needs exactly one reference face")
        if mode == "map" and not references:
            raise UsageError("mapping sources to identities needs one reference face per source")
        order_faces([], order)  # validates the order name
        if not is_real_number(max_distance) or not 0.0 <= max_distance < float("inf"):
            # (NaN had matched no face: nothing swapped, nothing said)
            raise UsageError(
                f"reference distance must be a number of 0 or more, got {max_distance!r}"
            )
        self.mode = mode
        self.references = list(references)
        self.max_distance = max_distance
        self.order = order
        self.identity_checks = 0
        self.recheck_every = recheck_every
        self.identity_worker = identity_worker
        self._frame = 0  # route() calls so far
        self._last_recheck = -recheck_every  # the frame of the last identity check
        self._checked_at: dict[int, int] = {}  # each track's last check, by frame
        self._distances: dict[int, deque[np.ndarray]] = {}
        self._awaiting: set[int] = set()  # new tracks whose first check is with the worker
        self._cut_checks: set[int] = set()  # tracks checked while cut by the frame's edge
        # A file's job waits for each of the worker's answers (the same choices as
        # computed here, frame for frame); a live session does not wait.
        self._waits = recheck_every == 0
        self._chosen: int | None = None  # the track followed in mode "one"
        self._person: Face | None = None  # its face as last seen (mode "one")
        self._not_person: set[int] = set()  # tracks checked and found someone else
        self._waited = 0  # frames without the person since its track ended
        self._seen: set[int] = set()

    @property
    def tracks_seen(self) -> int:
        return len(self._seen)

    def route(
        self, tracked: Sequence[TrackedFace], *, recheck: bool = False, cut: bool = False
    ) -> list[SwapTarget]:
        """The faces to swap in this frame and their sources.

        Args:
            tracked: this frame's faces with their track ids.
            recheck: the detector ran on this frame: check identities again.
            cut: the tracker saw a scene cut at this frame (``one`` then takes the
                first face in the order at once).
        """
        self._frame += 1
        self._seen.update(t.track_id for t in tracked)
        if self.mode == "many":
            return [SwapTarget(t.face, 0, t.track_id) for t in tracked]
        if self.mode == "one":
            return self._route_one(tracked, cut)
        distances = self._identity_distances(tracked, recheck)
        if self.mode == "reference":
            # One person is in a frame once: the nearest face within the distance. In a
            # crowd of small faces, others came within 0.6 of the reference too (0.53
            # to 0.56 in the Hamilton clip's audience) and were swapped beside them.
            chosen = [(t, float(distances[t.track_id][0])) for t in tracked]
            chosen = [(t, d) for t, d in chosen if d <= self.max_distance]
            chosen.sort(key=lambda pair: pair[1])
            return [SwapTarget(t.face, 0, t.track_id, d) for t, d in chosen[:1]]
        return self._route_map(tracked, distances)

    def _route_one(self, tracked: Sequence[TrackedFace], cut: bool) -> list[SwapTarget]:
        by_id = {t.track_id: t for t in tracked}
        if cut:
            self._person = None
        if self._person is not None and not self._person.has_embedding:
            self._person = None  # an analyser without identities: by the order alone
        if self._chosen not in by_id and self._person is not None:
            self._chosen = self._found_again(tracked)
            if self._chosen is None:
                self._waited += 1
                if self._waited <= ONE_WAIT_FRAMES:
                    return []
                self._person = None  # gone: the first face in the order from now
        if self._chosen not in by_id:
            ordered = order_faces([t.face for t in tracked], self.order)
            self._chosen = next(
                (t.track_id for t in tracked if ordered and t.face is ordered[0]), None
            )
        if self._chosen is None:
            return []
        chosen = by_id[self._chosen]
        self._waited = 0
        self._not_person.clear()
        if chosen.lost == 0 or self._person is None:  # a fresh look (not optical flow)
            self._person = chosen.face
        return [SwapTarget(chosen.face, 0, self._chosen)]

    def _found_again(self, tracked: Sequence[TrackedFace]) -> int | None:
        """The track, among this frame's not yet ruled out, whose face is the followed
        person's (the nearest to where it was first; ONE_CHECKS_PER_FRAME identity
        checks a frame at most), or None."""
        person = self._person
        assert person is not None
        x0, y0, x1, y1 = person.bbox
        centre = np.array([(x0 + x1) / 2, (y0 + y1) / 2])

        def away(t: TrackedFace) -> float:
            a0, b0, a1, b1 = t.face.bbox
            return float(np.hypot(*(np.array([(a0 + a1) / 2, (b0 + b1) / 2]) - centre)))

        fresh = [
            t
            for t in tracked
            if t.lost == 0 and t.track_id not in self._not_person and t.face.has_embedding
        ]
        for t in sorted(fresh, key=away)[:ONE_CHECKS_PER_FRAME]:
            self.identity_checks += 1
            if face_distance(t.face, person) <= self.max_distance:
                return t.track_id
            self._not_person.add(t.track_id)
        return None

    def _route_map(
        self, tracked: Sequence[TrackedFace], distances: dict[int, np.ndarray]
    ) -> list[SwapTarget]:
        if not tracked:
            return []
        matrix = np.array([distances[t.track_id] for t in tracked], np.float64)
        cost = np.where(matrix <= self.max_distance, matrix, _FAR)
        rows, cols = linear_sum_assignment(cost)
        targets = [
            SwapTarget(tracked[r].face, int(c), tracked[r].track_id, float(matrix[r, c]))
            for r, c in zip(rows, cols, strict=True)
            if cost[r, c] < _FAR
        ]
        return sorted(targets, key=lambda target: target.source_index)

    def _identity_distances(
        self, tracked: Sequence[TrackedFace], recheck: bool
    ) -> dict[int, np.ndarray]:
        """Mean distance of each track to every reference over its last checks."""
        alive = {t.track_id for t in tracked}
        for track_id in [k for k in self._distances if k not in alive]:
            del self._distances[track_id]  # ids are never reused: forget dead tracks
            self._checked_at.pop(track_id, None)
            self._cut_checks.discard(track_id)
        # A face held by optical flow (lost > 0) is not a fresh look at the person.
        again = [t for t in tracked if recheck and t.lost == 0 and t.track_id in self._distances]
        if self.recheck_every > 0:
            due = self._frame - self._last_recheck >= self.recheck_every
            again = sorted(again, key=lambda t: self._checked_at.get(t.track_id, 0))[: int(due)]
        check = {t.track_id for t in again}
        if self.identity_worker is not None:
            # What the worker answered since: rechecks, and newcomers' first checks (a
            # track that ended meanwhile is forgotten).
            for track_id, embedding in self.identity_worker.results():
                row = self._to_references(embedding)
                history = self._distances.get(track_id)
                if history is None and track_id in self._awaiting:
                    history = self._distances[track_id] = deque(maxlen=_IDENTITY_HISTORY)
                if history is not None:
                    history.append(row)
                self._awaiting.discard(track_id)
            if not self.identity_worker.alive:
                self._awaiting.clear()  # their answers are not coming: checked here
        self._awaiting &= alive
        result: dict[int, np.ndarray] = {}
        newcomers: list[TrackedFace] = []
        for t in tracked:
            history = self._distances.get(t.track_id)
            if history is None:
                newcomers.append(t)
                continue
            if t.track_id in check and not self._recheck_elsewhere(t):
                self._remember(history, t, self._checked_here(t))
            result[t.track_id] = np.mean(np.stack(history), axis=0)
        # A newcomer beside the person already found (a guest walking in) is not the
        # person until the worker says so: no stall for it, and it shows unswapped
        # meanwhile, as it would after. Any other newcomer may be the person, back in
        # view: it is checked here and now (it must not show unswapped).
        present = self.mode == "reference" and any(
            float(row[0]) <= self.max_distance for row in result.values()
        )
        for t in newcomers:
            if present and self._newcomer_elsewhere(t):
                result[t.track_id] = np.full(len(self.references), np.inf)
                continue
            history = self._distances[t.track_id] = deque(maxlen=_IDENTITY_HISTORY)
            self._remember(history, t, self._checked_here(t))
            result[t.track_id] = history[0]
        return result

    def _remember(self, history: deque[np.ndarray], t: TrackedFace, row: np.ndarray) -> None:
        """Add a check to a track's history. A face cut by the frame's edge (walking in)
        is read poorly: the first whole look replaces such checks rather than being
        averaged with them (a person who walked in and stood still had stayed "someone
        else" for good)."""
        whole = not _cut_by_frame(t.face)
        if whole and t.track_id in self._cut_checks:
            history.clear()
        if whole:
            self._cut_checks.discard(t.track_id)
        else:
            self._cut_checks.add(t.track_id)
        history.append(row)

    def _checked_here(self, t: TrackedFace) -> np.ndarray:
        """The track's distance to each reference, computed now: a file's job (no
        ``recheck_every``) waits for the identity worker's answer, Python's lock free
        meanwhile for its other stages; a live session computes it in this process."""
        self._counted(t)
        worker = self.identity_worker
        if self._waits and worker is not None and worker.alive:
            embedding = worker.embed(t.face)
            if embedding is not None:
                return self._to_references(embedding)
        return np.array([face_distance(t.face, ref) for ref in self.references])

    def _counted(self, t: TrackedFace) -> None:
        """Book an identity check of ``t`` at this frame (here or in the worker)."""
        self.identity_checks += 1
        self._checked_at[t.track_id] = self._last_recheck = self._frame

    def _to_references(self, embedding: np.ndarray) -> np.ndarray:
        """An identity descriptor's distance to each reference's."""
        return np.array([np.linalg.norm(embedding - r.embedding) for r in self.references])

    def _worker_for(self, t: TrackedFace) -> IdentityWorker | None:
        """The identity worker, where a live session hands it ``t`` without waiting
        (running, and the face has its frame); None: check it here."""
        worker = self.identity_worker
        if worker is None or self._waits or not worker.alive or t.face.frame is None:
            return None
        return worker

    def _newcomer_elsewhere(self, t: TrackedFace) -> bool:
        """Hand a new track's first check to the identity worker: True when it took it,
        has it already, or is busy (sent when it is free); False when there is no
        worker running (check it here)."""
        worker = self._worker_for(t)
        if worker is None:
            return False
        if t.track_id not in self._awaiting:
            if not worker.submit(t.track_id, t.face):
                return True  # busy: sent on a later frame
            self._counted(t)
            self._awaiting.add(t.track_id)
        return True

    def _recheck_elsewhere(self, t: TrackedFace) -> bool:
        """Hand a known track's recheck to the identity worker: True when it took it,
        or is busy (the track is then rechecked at a later detection); False when
        there is no worker running (check it here)."""
        worker = self._worker_for(t)
        if worker is None:
            return False
        if worker.submit(t.track_id, t.face):
            self._counted(t)
        return True


def _cut_by_frame(face: Face) -> bool:
    """Whether a face's box runs past the frame's edge (more than 2 px)."""
    x0, y0, x1, y1 = face.bbox
    height, width = face.frame_shape
    return x0 < -2 or y0 < -2 or x1 > width + 2 or y1 > height + 2


def source_list(
    sources: SourcePhotos | AnySwapper | Sequence[SourcePhotos | AnySwapper],
) -> list[SourcePhotos | AnySwapper]:
    """Sources as a list: one source given on its own (a Face, a prepared source or a
    swapper) is a list of one."""
    if isinstance(sources, (Face, SourceModel, Swapper, NeuralSwapper, EnhancedSwapper)):
        return [sources]
    if isinstance(sources, (str, bytes)) or not isinstance(sources, Sequence):
        raise InputError(
            f"sources must be source faces (or prepared sources, or swappers), "
            f"got {type(sources).__name__}"
        )
    return list(sources)


def build_swappers(
    sources: Sequence[SourcePhotos | AnySwapper],
    options: SwapOptions | Mapping[str, object] | None = None,
) -> list[AnySwapper]:
    """One :class:`Swapper` per source (sources already given as swappers, of either
    engine, are kept); ``options`` as SwapOptions or a mapping of them."""
    if not sources:
        raise UsageError("give at least one source face")
    opts = swap_options(options)  # (SwapOptions are checked as they are made)
    return [
        s
        if isinstance(s, (Swapper, NeuralSwapper, EnhancedSwapper))
        else Swapper(s, **asdict(opts))
        for s in sources
    ]


def swap_targets(
    image: Frame,
    targets: Sequence[SwapTarget],
    swappers: Sequence[AnySwapper],
    hands: Sequence[Hand] | None = None,
    occlusions: Sequence[Occlusion | None] | None = None,
) -> Frame:
    """Swap every target with its source; the image itself when there is nothing to swap.
    ``hands``: the image's hands, for the swappers with ``mask_hands`` (None: each such
    swapper looks for them round its faces). ``occlusions``: what covers each target's
    face, in ``targets``' order (None: each swapper with an occluder finds them)."""
    if occlusions is not None and len(occlusions) != len(targets):
        raise InputError(f"{len(occlusions)} occlusions given for {len(targets)} faces")
    out = image
    for index in sorted({t.source_index for t in targets}):
        mine = [i for i, t in enumerate(targets) if t.source_index == index]
        out = swappers[index].swap(
            out,
            [targets[i].face for i in mine],
            hands=hands,
            occlusions=None if occlusions is None else [occlusions[i] for i in mine],
        )
    return out


def hand_tracker(swappers: Sequence[AnySwapper]) -> MediaPipeHands | None:
    """A video's hand finder (MediaPipe's tracking mode over its frames in order) when
    some swapper keeps hands (``mask_hands``), else None."""
    if not any(swapper.options.mask_hands for swapper in swappers):
        return None
    return MediaPipeHands(tracking=True)


# A file's frames where no face is found are also looked at in tiles, one in ten of
# them (BlazeFaceDetector's adaptive mode), n x n or more, each within VIDEO_TILE_MOST_PX
# of the frame on its short side (a still's size: a 1080p frame 4 x 4 tiles): in a
# 1080p wide shot the faces of 50 and 70 px are found and then tracked. Within 768 px (2
# x 2, the adaptive mode's default), none of three 50 px faces was found, and one of
# three 70 px ones. It costs such a frame about 100 ms more, once in ten faceless frames
# (a live stream, which must not stall, looks at no tiles).
VIDEO_DETECT_TILES = 2
VIDEO_TILE_MOST_PX = TILE_MOST_PX


def video_analyser(*, all_faces: bool = False, **options: Any) -> FaceAnalyser:
    """An analyser of a video file's frames, as ``faceweave swap`` has: the video mode
    (MediaPipe's tracking mesh), tiles on frames where no face is found (a wide shot;
    VIDEO_DETECT_TILES), no search for faces cut by the sides (a face coming in from
    the side would get a swap on a sliver of it for a few frames). With ``all_faces``
    (a selector that swaps more than one face), frames with a face have a few tiles
    looked at too, in turn (FaceAnalyser's ``sweep_tiles``): the small faces beside a
    close one. ``options``: any other :class:`FaceAnalyser` arguments."""
    options = {"tile_most_px": VIDEO_TILE_MOST_PX, **options}
    sweep = all_faces and options.get("detector", "mediapipe") == "mediapipe"
    return FaceAnalyser(mode="video", detect_tiles=VIDEO_DETECT_TILES, sweep_tiles=sweep, **options)


# The head's pose in files (the face's expression has its own, lighter filter: see
# smoothing.MeshSmoother). Files are not interactive: the head is smoothed harder than
# live (less jitter, a little lag on fast head turns). At 0.1 Hz and 0.005 a talking
# head's face lagged behind its nods: on vid_p04 the output's mouth opening followed
# the target's with a correlation of 0.63 (dlib's landmarks), against 0.78 at these
# settings, for a mean flicker ratio over the five clips 0.03 higher (0.82 -> 0.85).
# A file's frame whose faces' region differs from the frame before by less than this
# mean grey level (0-255, on the tracker's work image) repeats it, and keeps its faces:
# a 25 fps video converted to 30 fps repeats every fifth frame, and the smoothing
# filter, still catching up with earlier motion, slid the face on the repeats (0.6 px
# median, up to 3 px, while the picture stood still). vid_p04's 52 repeats differ by
# 0.00-0.23 (all but one under 0.2) and its moving frames by 1.1 or more; of the
# other development clips' frames, 6 of vid_p05's (a man barely moving while he
# talks) differ by less, and none of the rest.
REPEATED_FRAME_GREY = 0.2

FILE_SMOOTHING_MIN_CUTOFF = 0.3  # Hz: One-Euro cut-off at rest (live uses 1.0)
FILE_SMOOTHING_BETA = 0.01  # speed coefficient (live uses 0.05)


@dataclass(frozen=True)
class VideoJobStats:
    """What :func:`swap_video` did.

    Attributes:
        frames_read: frames decoded (after trimming and ``fps`` resampling).
        frames_written: frames encoded (duplicates inserted by ``fps`` included).
        frames_expected: the container's frame count for the range, 0 when unknown.
        frames_swapped: frames where at least one face was swapped.
        faces_swapped: faces swapped over all frames.
        tracks: distinct face tracks seen.
        identity_checks: identity embeddings compared (reference and map selection).
        seconds: wall time of the whole job.
        fps: frames_written / seconds.
        stage_ms: milliseconds per frame in ``source`` (decode), ``analyse``,
            ``select``, ``swap`` and ``sink`` (encode and audio).
        tracker: the tracker's work counters.
        audio: ``"copy"``, ``"encode"`` or ``"none"``.
        warnings: decoder and writer warnings, one line each.
        decode_errors: packets that failed to decode.
    """

    frames_read: int
    frames_written: int
    frames_expected: int
    frames_swapped: int
    faces_swapped: int
    tracks: int
    identity_checks: int
    seconds: float
    fps: float
    stage_ms: dict[str, Timing]
    tracker: TrackerCounters
    audio: str
    warnings: tuple[str, ...] = ()
    decode_errors: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        data = asdict(self)
        data["warnings"] = list(self.warnings)
        return data


@dataclass
class _Resampler:
    """Constant output rate: the frame nearest each slot's time is kept, empty slots
    repeat a frame.

    Frames arrive in time order and are not held back, so a slot takes the first frame
    at or after its time less half an input frame: the one nearest it (a slot that
    took the first frame rounding into it showed a frame up to half an output frame
    early, before its sound). Where the output is the faster, each frame takes the
    slot nearest it.
    """

    fps: Fraction
    input_fps: float = 0.0
    last_read: int = -1
    last_written: int = -1
    previous: Frame | None = field(default=None, repr=False)
    shown_until: float = 0.0  # seconds: the end of the last frame read (used or not)

    def slot(self, seconds: float) -> int | None:
        """The output slot of a frame at ``seconds``, None when that slot is taken."""
        if self.input_fps > float(self.fps):
            index = math.floor((seconds + 0.5 / self.input_fps) * self.fps + 1e-9)
        else:
            index = round(seconds * self.fps)
        if index <= self.last_read:
            return None
        self.last_read = index
        return index

    def read(self, seconds: float, limit: float | None, duration: float | None = None) -> None:
        """Note a frame read at ``seconds``: it shows until the next, or at the end for
        its ``duration`` where the file says (an animated image's), else one input
        frame's time (no later than ``limit``, a trim's end)."""
        step = 1.0 / self.input_fps if self.input_fps > 0 else 0.0
        until = seconds + (duration if duration is not None else step)
        self.shown_until = min(until, limit) if limit is not None else until

    def tail(self) -> range:
        """The slots after the last one written that the last frame still covers: a
        60 fps copy of a 2 s clip at 30 ends with two slots of its last frame, not one."""
        end = math.ceil(self.shown_until * self.fps - 1e-6)
        return range(self.last_written + 1, end)


def swap_video(
    sources: SourcePhotos | AnySwapper | Sequence[SourcePhotos | AnySwapper],
    target_path: PathLike,
    output_path: PathLike,
    *,
    analyser: FaceAnalyser | None = None,
    options: SwapOptions | Mapping[str, object] | None = None,
    selector: str = "one",
    references: Sequence[Face] = (),
    reference_distance: float = 0.6,
    face_order: str = "large-small",
    codec: str | None = None,
    preset: str = DEFAULT_PRESET,
    crf: int | None = DEFAULT_CRF,
    fps: float | None = None,
    trim_start: float | None = None,
    trim_end: float | None = None,
    keep_audio: bool = True,
    frame_skip: int = 1,
    static_threshold: float = REPEATED_FRAME_GREY,
    redetect_every: int = 10,
    max_faces: int = 8,
    queue_size: int = 4,
    progress: Callable[[int, int], None] | None = None,
    on_frame: Callable[[Packet], None] | None = None,
    watermark: str | None = None,
    keep_faceless: bool = True,
    frame_enhancer: FrameEnhancer | None = None,
    quality: int = DEFAULT_QUALITY,
) -> VideoJobStats:
    """Swap faces through a video file, keeping its audio, timing and rotation.

    Args:
        sources: source faces (or prepared sources, or swappers), or one of them; with
            ``map`` one per reference, else only the first is used.
        target_path: the video to process.
        output_path: where to write it; its extension picks the container (atomic).
        analyser: the face analyser (a new one when None).
        options: swap options for sources that are not swappers already (SwapOptions
            or a mapping of them).
        selector: ``one``, ``many``, ``reference`` or ``map`` (see :class:`FaceRouter`).
        references: reference faces for ``reference`` (one) and ``map`` (one per source).
        reference_distance: identity distance threshold.
        face_order: order used by ``one``.
        codec: video encoder (``libx264`` by default, VP9 for ``.webm``).
        preset: x264 speed preset.
        crf: quality on the x264 CRF scale, None for the encoder's default.
        fps: output frame rate; None keeps every frame at its own timestamp. Otherwise
            frames are dropped or repeated to a constant rate.
        trim_start: first second of the target to process.
        trim_end: second of the target where to stop.
        keep_audio: copy the target's audio over the same range.
        frame_skip: analyse every N-th frame; faces are carried by optical flow between.
        static_threshold: a frame whose face region changed by less than this mean grey
            level keeps the previous frame's faces (no analysis); 0 turns it off. The
            default holds only repeated frames (see :data:`REPEATED_FRAME_GREY`).
        redetect_every: run the face detector at least every N analysed frames.
        max_faces: at most this many tracked faces.
        queue_size: frames buffered between stages.
        progress: called as ``progress(frames_written, frames_expected)`` after each
            frame; ``frames_expected`` is 0 when unknown.
        on_frame: called with every packet after it is written (``data["targets"]``
            holds its :class:`SwapTarget` list); for benchmarks and previews.
        watermark: a job id: every frame carries the provenance watermark
            with it and the container gets the synthetic-media labels. None: no mark.
        keep_faceless: write the output even where no face was swapped in any frame
            (the target unchanged); False leaves no file (and an older one in place).
        frame_enhancer: a :class:`~faceweave.FrameEnhancer` (a model you bring): every
            frame, swapped or not, upscaled by its scale (the output is that much larger).
        quality: an animated WebP output's quality, 1-100 (GIF and APNG are lossless
            but for a GIF's 256 colours; a video's is ``crf``).

    Returns:
        The :class:`VideoJobStats`.

    Raises:
        InputError: the target cannot be read, has no video stream or no frame decodes.
        UnsupportedFormatError: unknown output extension or encoder.
        OutputError: the output cannot be written (nothing is left behind).
        UsageError: options that do not fit together.
        KeyboardInterrupt: interrupted; nothing is left behind.
    """
    began = time.perf_counter()
    animated_output = Path(output_path).suffix.lower() in ANIMATION_EXTENSIONS
    if not animated_output:
        video_extension(output_path)
    elif codec is not None:
        raise UsageError(f"{output_path}: an animated image takes no video encoder ({codec})")
    if fps is not None and not (is_real_number(fps) and 0 < fps < float("inf")):
        raise UsageError(f"fps must be a positive number, got {fps!r}")
    for name, second in (("trim_start", trim_start), ("trim_end", trim_end)):
        if second is not None and not (is_real_number(second) and 0 <= second < float("inf")):
            raise UsageError(f"{name} must be a number of 0 seconds or more, got {second!r}")
    if same_file(output_path, target_path):
        raise UsageError(f"{output_path}: the output must not be the target video")
    if isinstance(quality, bool) or not isinstance(quality, int) or not 1 <= quality <= 100:
        raise UsageError(f"quality must be a whole number from 1 to 100, got {quality!r}")
    if watermark is not None and (not isinstance(watermark, str) or not watermark):
        raise UsageError(f"watermark must be a job id (a non-empty str), got {watermark!r}")
    if frame_enhancer is not None and not isinstance(frame_enhancer, FrameEnhancer):
        raise InputError(f"frame_enhancer is a FrameEnhancer, got {type(frame_enhancer).__name__}")
    sources = source_list(sources)
    mode = selector
    if mode == "map" and len(sources) != len(references):
        raise UsageError(f"map: {len(sources)} sources but {len(references)} reference faces")
    router = FaceRouter(
        mode, references=references, max_distance=reference_distance, order=face_order
    )
    swappers = build_swappers(sources if mode == "map" else list(sources)[:1], options)
    # Tiles on frames with no face found (see BlazeFaceDetector): a wide shot's small face.
    analyser = analyser or video_analyser(max_faces=max_faces, all_faces=mode != "one")
    tracker = FaceTracker(
        analyser,
        redetect_every=redetect_every,
        frame_skip=frame_skip,
        static_threshold=static_threshold,
        max_faces=max_faces,
        # Files are not interactive: the head is smoothed harder than live (less
        # jitter, a little lag on fast head turns); the speed term still follows quick
        # motion, and the face's expression has its own, lighter filter.
        min_cutoff=FILE_SMOOTHING_MIN_CUTOFF,
        beta=FILE_SMOOTHING_BETA,
        rest_detail=uses_creases(swappers),
    )
    reader = open_clip(target_path, start=trim_start, end=trim_end)
    writer: VideoWriter | AnimationWriter | None = None
    turned: list[int] = []  # the faces' turn in the stored frames, once known
    cleanup = contextlib.ExitStack()
    try:
        if mode in ("reference", "map") and isinstance(
            getattr(analyser, "identity", None), DlibIdentity
        ):
            # dlib's descriptor holds Python's lock for about 100 ms a face: computed in a
            # child process, the job's other stages go on meanwhile (the same choices).
            worker = IdentityWorker.start(analyser.identity)
            if worker is not None:
                cleanup.callback(worker.close)
                router.identity_worker = worker
        hands = hand_tracker(swappers)
        if hands is not None:
            cleanup.callback(hands.close)
        info = reader.info
        expected = _expected_frames(info.frame_count, info.duration, info.fps, trim_start, trim_end)
        resampler = (
            _Resampler(Fraction(fps).limit_denominator(1001), input_fps=info.fps or 0.0)
            if fps
            else None
        )
        if resampler is not None and info.fps:
            expected = round((expected / info.fps) * float(resampler.fps)) if expected else 0
        if animated_output and expected:
            scale = frame_enhancer.scale if frame_enhancer is not None else 1
            held = animation_bytes(output_path, info.width * scale, info.height * scale)
            if expected * held > ANIMATION_MAX_BYTES:
                raise UsageError(
                    f"{output_path}: {expected} frames of {info.width * scale}x"
                    f"{info.height * scale} are too many for an animated image (over "
                    f"{ANIMATION_MAX_BYTES >> 20} MiB held until it is written); write a "
                    "video (.mp4) or fewer frames (--trim-end, --fps)"
                )
        counts = {"read": 0, "swapped_frames": 0, "swapped_faces": 0}
        last: list[Any] = []  # the last frame written, and its pts

        trimmed_s = trim_end - (trim_start or 0.0) if trim_end is not None else None

        def packets() -> Any:
            for frame in reader:
                pts: int | None = frame.pts - reader.start_pts
                seconds = frame.time - (trim_start or 0.0)
                if resampler is not None:
                    resampler.read(seconds, trimmed_s, frame.duration)
                    pts = resampler.slot(seconds)
                    if pts is None:
                        continue
                counts["read"] += 1
                yield Packet(index=frame.index, pts=pts, time=frame.time, image=frame.image)

        def analyse(packet: Packet) -> Packet:
            if not turned:
                # A phone video stored sideways or upside down (a display rotation):
                # its faces are turned the other way in the stored frames, so the
                # detector looks there (unless the caller chose its angles).
                turned.append((-reader.rotation) % 360)
                if turned[0] and getattr(analyser, "detector_angles", ()) is None:
                    analyser.detector_angles = (turned[0],)
                    cleanup.callback(setattr, analyser, "detector_angles", None)
            detections = tracker.counters.detections
            cuts = tracker.counters.cuts
            packet.data["tracked"] = tracker.update(packet.image, packet.time)
            packet.data["redetected"] = tracker.counters.detections > detections
            packet.data["cut"] = tracker.counters.cuts > cuts
            return packet

        def select(packet: Packet) -> Packet:
            packet.data["targets"] = router.route(
                packet.data["tracked"],
                recheck=packet.data["redetected"],
                cut=packet.data["cut"],
            )
            return packet

        def find_hands(packet: Packet) -> Packet:
            assert hands is not None
            targets: list[SwapTarget] = packet.data["targets"]
            packet.data["hands"] = hands.find(packet.image, [t.face.bbox for t in targets])
            return packet

        def swap(packet: Packet) -> Packet:
            targets: list[SwapTarget] = packet.data["targets"]
            packet.image = swap_targets(packet.image, targets, swappers, packet.data.get("hands"))
            return packet

        def enhance(packet: Packet) -> Packet:
            assert frame_enhancer is not None
            packet.image = frame_enhancer.enhance(packet.image)
            return packet

        # An animation's labels (a video's are its container's metadata, below).
        labels = image_labels(watermark) if watermark is not None else {}

        def mark(packet: Packet) -> Packet:
            assert watermark is not None
            packet.image = embed_watermark(packet.image, watermark)
            return packet

        def sink(packet: Packet) -> None:
            nonlocal writer
            image = packet.image
            if animated_output:
                # (An animated image stores no display rotation: turned as shown.)
                image = upright(image, reader.rotation)
            if writer is None and animated_output:
                height, width = image.shape[:2]
                writer = AnimationWriter(
                    output_path,
                    width=width,
                    height=height,
                    fps=resampler.fps if resampler else reader.average_rate,
                    time_base=1 / resampler.fps if resampler else reader.time_base,
                    # An animation plays as often as the target did; a video's, forever.
                    plays=reader.plays if isinstance(reader, AnimationReader) else 0,
                    quality=quality,
                    labels=labels,
                    xmp=labels_xmp(labels) if labels else None,
                )
            elif writer is None:
                height, width = packet.image.shape[:2]
                writer = VideoWriter(
                    output_path,
                    width=width,
                    height=height,
                    fps=resampler.fps if resampler else reader.average_rate,
                    time_base=1 / resampler.fps if resampler else reader.time_base,
                    codec=codec,
                    preset=preset,
                    crf=crf,
                    audio_from=target_path if keep_audio and info.has_audio else None,
                    trim_start=trim_start or 0.0,
                    trim_end=trim_end,
                    rotation=reader.rotation,
                    metadata={
                        **(_copyable_metadata(reader) if isinstance(reader, VideoReader) else {}),
                        **(video_metadata(watermark) if watermark is not None else {}),
                    },
                )
            assert packet.pts is not None
            if resampler is not None and resampler.previous is not None:
                for slot in range(resampler.last_written + 1, packet.pts):
                    writer.write(resampler.previous, pts=slot)  # a gap: repeat the last frame
            writer.write(image, pts=packet.pts)
            last[:] = [image, packet.pts]
            if resampler is not None:
                resampler.last_written, resampler.previous = packet.pts, image
            targets = packet.data.get("targets", [])
            counts["swapped_frames"] += bool(targets)
            counts["swapped_faces"] += len(targets)
            if on_frame is not None:
                on_frame(packet)
            if progress is not None:
                progress(writer.frames_written, int(expected))

        pipeline = Pipeline(
            packets(),
            [
                Stage("analyse", analyse),
                Stage("select", select),
                # (Its own thread: 11-25 ms a frame, about 18 with a hand in view.)
                *([Stage("hands", find_hands)] if hands is not None else []),
                Stage("swap", swap),
                # (A model on the whole frame: its own thread.)
                *([Stage("enhance", enhance)] if frame_enhancer is not None else []),
                # Its own thread: marking a 1080p frame costs 3 ms the swap stage,
                # the slowest, need not carry.
                *([Stage("mark", mark)] if watermark is not None else []),
            ],
            sink,
            queue_size=queue_size,
            mode="ordered",
        )
        run = pipeline.run()
        if writer is None:
            if trim_start or trim_end is not None:  # the file may be fine: the range is empty
                span = f"{trim_start or 0.0:g} s to " + (
                    f"{trim_end:g} s" if trim_end is not None else "the end"
                )
                raise InputError(f"{target_path}: no frame from {span} (--trim-start/--trim-end)")
            # (why, in short: the reader's own warning, said already, has the details)
            if getattr(reader, "decode_errors", 0):
                detail = " (its data is damaged)"
            elif reader.warnings:
                detail = f" ({reader.warnings[0].removeprefix(f'{target_path}: ')})"
            else:
                detail = ""
            raise InputError(f"{target_path}: no video frame could be decoded{detail}")
        if resampler is not None and resampler.previous is not None:
            for slot in resampler.tail():  # the last frame's own time, to the video's end
                writer.write(resampler.previous, pts=slot)
            if progress is not None:
                progress(writer.frames_written, int(expected))
        if resampler is None and last:
            # (An animated target's last frame lasts as long as it did; at a new rate
            # the resampler's slots hold it.)
            end_as_the_source(reader, writer, (last[0], last[1]))
        if counts["swapped_frames"] or keep_faceless:
            writer.close()
        else:
            writer.abort()
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    finally:
        reader.close()
        cleanup.close()
    seconds = time.perf_counter() - began
    return VideoJobStats(
        frames_read=counts["read"],
        frames_written=writer.frames_written,
        frames_expected=int(expected),
        frames_swapped=counts["swapped_frames"],
        faces_swapped=counts["swapped_faces"],
        tracks=router.tracks_seen,
        identity_checks=router.identity_checks,
        seconds=seconds,
        fps=writer.frames_written / seconds if seconds > 0 else 0.0,
        stage_ms=dict(run.stage_ms),
        tracker=replace(tracker.counters),
        audio=writer.audio_mode,
        warnings=tuple([*reader.warnings, *writer.warnings]),
        decode_errors=reader.decode_errors,
    )


def _expected_frames(
    frame_count: int, duration: float, fps: float, start: float | None, end: float | None
) -> int:
    expected = frame_count
    if fps and (start or end is not None):
        span = (end if end is not None else duration) - (start or 0.0)
        trimmed = max(0, round(span * fps))
        expected = min(expected, trimmed) if expected else trimmed
    return int(expected)
