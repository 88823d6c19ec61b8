"""MediaPipe backends: BlazeFace detection (short + full range) and the 478-point mesh.

Only :meth:`_forward` style calls touch MediaPipe; preparation (cropping,
colour order) and post-processing (back to frame pixels) are plain numpy.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.analysis.base import Detection, mesh_bbox, nms, quarter_turns, register_detector
from faceweave.core.resize import shrink_to_side
from faceweave.errors import BackendError
from faceweave.runtime import signals_deferred
from faceweave.types import BBox, Frame

os.environ.setdefault("GLOG_minloglevel", "2")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _import_mediapipe():  # type: ignore[no-untyped-def]
    try:
        with signals_deferred():  # Ctrl-C inside its import reads as a broken install
            import mediapipe as mp
    except ImportError as exc:  # pragma: no cover - install problem
        raise BackendError(f"mediapipe is not installed: {exc}") from exc
    _forget_import_frames()
    return mp


def _forget_import_frames() -> None:
    """Drop the traceback of the error MediaPipe's audio module keeps from its import
    of sounddevice (which fails without PortAudio): it holds the frames of whatever
    first imported mediapipe, and with them that caller's locals (an analyser, a
    frame), for as long as the process lives."""
    import sys

    record = sys.modules.get("mediapipe.tasks.python.audio.core.audio_record")
    error = getattr(record, "sd_error", None)
    seen: set[int] = set()
    while isinstance(error, BaseException) and id(error) not in seen:
        seen.add(id(error))
        error.__traceback__ = None
        error = error.__cause__ or error.__context__


def _close_graphs(graphs: list[Any], pid: int) -> None:
    if os.getpid() != pid:
        # A forked child: the graphs' threads are the parent's, and a close would wait
        # for them for ever. The child leaves them be.
        graphs.clear()
        return
    while graphs:
        graph = graphs.pop()
        with contextlib.suppress(Exception):  # closed already, or its process is ending
            graph.close()


def graph_closer(owner: object, graphs: list[Any]) -> Callable[[], Any]:
    """Closes the MediaPipe graphs in ``graphs`` (a list the owner may add to) when
    called, or once ``owner`` is collected, whichever comes first; a second call does
    nothing. A graph not closed is never freed: its output callbacks hold its Python
    solution, a cycle through C++ that the collector cannot see, so it keeps its
    threads and memory (about 35 MiB a graph) until the process ends."""
    closer = weakref.finalize(owner, _close_graphs, graphs, os.getpid())
    closer.atexit = False  # a process ending frees them anyway
    return closer


def _process(solution, rgb: NDArray[np.uint8]):  # type: ignore[no-untyped-def]
    """``solution.process(rgb)`` for a one-image graph, without the namedtuple class
    MediaPipe's ``SolutionBase.process`` builds on every call (0.14 ms, three times a
    frame). It does the same steps on the same members of the pinned mediapipe
    (0.10.21), and falls back to ``process`` wherever they differ. The outputs come
    back as attributes, as from ``process``."""
    try:
        from mediapipe.python.solution_base import PacketDataType

        graph = solution._graph
        inputs = solution._input_stream_type_info
        outputs = solution._output_stream_type_info
        received = solution._graph_outputs
    except (ImportError, AttributeError):  # pragma: no cover - another mediapipe
        return solution.process(rgb)
    if graph is None or not inputs or outputs is None or len(inputs) != 1:
        return solution.process(rgb)  # pragma: no cover - another mediapipe
    ((stream, kind),) = inputs.items()
    if kind not in (PacketDataType.IMAGE_FRAME, PacketDataType.IMAGE) or rgb.shape[2] != 3:
        return solution.process(rgb)  # pragma: no cover - not an RGB image graph
    received.clear()
    solution._simulated_timestamp += 33333  # as process(): a 30 fps stream
    graph.add_packet_to_input_stream(
        stream=stream, packet=solution._make_packet(kind, rgb).at(solution._simulated_timestamp)
    )
    graph.wait_until_idle()
    return SimpleNamespace(
        **{
            name: solution._get_packet_content(outputs[name], received[name])
            if name in received
            else None
            for name in outputs
        }
    )


def _centred(landmarks, reach: float = 0.2) -> bool:  # type: ignore[no-untyped-def]
    """The fitted face sits where the crop centred it: its nose tip within ``reach``
    across and ``reach`` + 0.05 down or up of the centre (normalised crop coordinates)."""
    nose = landmarks[1]
    return abs(nose.x - 0.5) < reach and abs(nose.y - 0.5) < reach + 0.05


def _fitted_here(res, reach: float = 0.2) -> bool:  # type: ignore[no-untyped-def]
    """A mesh result with a face where the crop centred it (:func:`_centred`)."""
    return bool(res.multi_face_landmarks) and _centred(res.multi_face_landmarks[0].landmark, reach)


# A NormalizedLandmark with only x, y and z set, as protobuf writes it inside a
# NormalizedLandmarkList: field 1 (length 15), then x, y, z as fixed32 fields 1, 2, 3.
_LANDMARK_WIRE = np.dtype(
    [
        ("tag", "u1"),
        ("length", "u1"),
        ("x_tag", "u1"),
        ("x", "<f4"),
        ("y_tag", "u1"),
        ("y", "<f4"),
        ("z_tag", "u1"),
        ("z", "<f4"),
    ]
)
_LANDMARK_TAGS = {"tag": 0x0A, "length": 15, "x_tag": 0x0D, "y_tag": 0x15, "z_tag": 0x1D}


def _landmark_array(landmark_list) -> NDArray[np.float64]:  # type: ignore[no-untyped-def]
    """(N, 3) x, y, z of a NormalizedLandmarkList.

    Reading 478 protobuf messages attribute by attribute costs 0.25 ms; their wire
    bytes, when every landmark carries exactly x, y and z (the face mesh's case), are
    a fixed-size record array read in 0.04 ms. Anything else takes the slow path.
    """
    landmarks = landmark_list.landmark
    raw = landmark_list.SerializeToString()
    if len(raw) == len(landmarks) * _LANDMARK_WIRE.itemsize:
        records = np.frombuffer(raw, dtype=_LANDMARK_WIRE)
        if all(np.all(records[name] == value) for name, value in _LANDMARK_TAGS.items()):
            return np.stack([records["x"], records["y"], records["z"]], axis=1).astype(np.float64)
    return np.array([[p.x, p.y, p.z] for p in landmarks], np.float64)


# BlazeFace looks at 128-192 px: the whole frame is handed to it at most DETECT_SIDE px
# wide, a tile (see BlazeFaceDetector) at most TILE_SIDE (MediaPipe's own copy and
# resize of a large image cost more than the model, and its bilinear resize from a
# phone photo's tile skips most pixels).
DETECT_SIDE = 640
TILE_SIDE = 960
# Tiles overlap: each is this share of the frame's side over the grid's n.
TILE_OVERLAP = 1.35
# BlazeFace sees a square: a long frame or tile is letterboxed into it, and its faces
# shrink with its long side. A frame longer than WHOLE_MAX_ASPECT times its width (a
# panorama, a strip of portraits) is looked at in overlapping parts along its long side
# as well as whole, and a grid of tiles (n along the short side) has as many along the
# long side as keep each tile within TILE_MAX_ASPECT, at most MAX_TILES_ALONG (or n,
# if more). (Parts of a frame under 3:1 found false faces at a cut photo's edge.)
WHOLE_MAX_ASPECT = 3.0
TILE_MAX_ASPECT = 2.0
MAX_TILES_ALONG = 8
# BlazeFace's full-range model finds a face about 6% as wide as what it looks at (4%
# half the time). A still's tiles are kept to at most TILE_MOST_PX of its pixels on
# their short side (more tiles: n grows from the detector's ``tiles`` with the photo,
# to at most MAX_TILES_ALONG; a 16:9 frame's tiles are then within about 960 px on their
# long side): a 1080p photo's faces of 60 px and most of 40 px are found (4 x 4 tiles;
# within 768 px, 2 x 2, found 2 of 6 at 60 px and none at 40, at 62 ms less of
# detection), a 12-megapixel photo's of 80 px and most of 60 px. With ``adaptive``
# (video: a frame with no face, one in TILE_EVERY_EMPTY) tiles stay within
# COARSE_TILE_MOST_PX unless told otherwise: four times the tiles would stall a stream
# by about 100 ms each time (a video file's analyser asks for TILE_MOST_PX: see
# faceweave.pipeline.video_job). So do a still's turned passes (see FaceAnalyser),
# which every faceless photo gets.
TILE_MOST_PX = 480
COARSE_TILE_MOST_PX = 768
# In a video (adaptive), tiles are looked at on one in this many frames where the whole
# frame shows no face (the first of them, then every 10th: a third of a second at 30 fps).
TILE_EVERY_EMPTY = 10
# Where the whole frame does show a face, the small faces beside it (guests in a wide
# shot next to a close speaker) were never looked for. With ``sweep``, each call that
# found a face looks at this many of the tiles in turn, with the full-range model alone
# (a small face's; about 4.4 ms a tile on this machine): a video file's tracker detects
# on every 10th frame, so a 1080p frame's 16 tiles are all seen within 80 frames (2.7 s
# at 30 fps), at about 0.9 ms a frame.
SWEEP_TILES = 2


# How far past a cut face's box the frame is mirrored, as a share of the box.
MIRROR_MARGIN = 0.1
# A box counts as cut by the frame's side when it reaches out by over this share of its
# width (a loose box just over the edge is not a half face: a mesh fitted on its
# mirror image found faces in the background).
CUT_REACH = 0.1
# The last try at a cut face's mesh is on a crop this much tighter than the usual one.
MIRRORED_CROP = 0.7
# A face cut by the frame's edge is fitted where MediaPipe's face search in the crop
# puts it, and that search sees only the part in the frame: its box, too small and off
# the face's centre, sets the mesh too small (the selfie group's corner face had its
# mouth drawn over its upper lip). A mesh whose box reaches past the frame's edge by
# over CUT_MESH_REACH of its size is fitted again, in a still up to CUT_REFITS times,
# on the region MediaPipe's tracking draws round a mesh (its box grown by REFIT_REGION,
# turned with its eyes), until its points move less than REFIT_SETTLED of its size. A
# video's tracked face is fitted again CUT_REFITS_TRACKED times a frame: its fits
# come from the tracking graph or, where that loses the face, the static one, and one
# refit brings them as close (vid_p05 cut 45% by the left side: 0.21 inter-ocular
# distances off on average -> 0.046; three gave 0.050) at one fit's cost, about 8 ms.
CUT_MESH_REACH = 0.05
CUT_REFITS = 3
CUT_REFITS_TRACKED = 1
REFIT_REGION = 1.5
REFIT_SETTLED = 0.01
# The mesh's outer eye corners: the subject's right eye's, then the left's.
_EYE_OUTER = (33, 263)
# MediaPipe's mesh subgraph alone, on a region given to it (no face search).
_REGION_GRAPH = """
input_stream: "image"
input_stream: "region"
output_stream: "face_landmarks"
node {
  calculator: "FaceLandmarkCpu"
  input_stream: "IMAGE:image"
  input_stream: "ROI:region"
  input_side_packet: "WITH_ATTENTION:with_attention"
  output_stream: "LANDMARKS:face_landmarks"
}
"""


def cut_by_side(frame: Frame, bbox: BBox, roll: float = 0.0) -> bool:
    """Whether the face in ``bbox`` is cut by the frame's side: the box reaches out of
    the left or right edge by over ``CUT_REACH`` of its width, and the face is upright
    or upside down (``roll``), so that the mirror across the side is the mirror across
    its midline."""
    x0, _, x1, _ = bbox
    reach = max(-x0, x1 - frame.shape[1])
    return reach > CUT_REACH * (x1 - x0) and quarter_turns(roll) % 2 == 0


def _mirrored_out(
    frame: Frame, bbox: BBox, matrix: NDArray[np.float64]
) -> tuple[Frame, NDArray[np.float64]]:
    """The image to crop a face cut by the frame's left or right edge from, and the
    crop matrix on it.

    The frame is mirrored out on the side ``bbox`` reaches past, as ``detect_cut``
    found the face: the half face and its mirror image make a whole one. Only as
    far as the box reaches (and a margin): further out the mirror would show the
    frame's other faces, and the mesh fits the clearest face in its crop. (Never
    the top or bottom edge: a face mirrored there is an upside-down one.)
    """
    x0, _, x1, _ = bbox
    w = frame.shape[1]
    margin = MIRROR_MARGIN * (x1 - x0)
    left, right = (int(np.ceil(reach + margin)) if reach > 0 else 0 for reach in (-x0, x1 - w))
    padded = cv2.copyMakeBorder(frame, 0, 0, left, right, cv2.BORDER_REFLECT_101)
    shifted = matrix.copy()
    shifted[:, 2] -= matrix[:, 0] * left
    return padded, shifted


def mesh_cut(frame: Frame, points: NDArray[np.floating]) -> bool:
    """Whether a mesh's box reaches past any edge of the frame by over CUT_MESH_REACH of
    its size."""
    x0, y0, x1, y1 = mesh_bbox(points)
    h, w = frame.shape[:2]
    reach = max(-x0, -y0, x1 - w, y1 - h)
    return bool(reach > CUT_MESH_REACH * max(x1 - x0, y1 - y0))


def _region_around(points: NDArray[np.floating], size: int):  # type: ignore[no-untyped-def]
    """The region MediaPipe's tracking fits a mesh in from the previous one: ``points``'
    (crop pixels, the crop ``size`` wide) box, squared and grown by REFIT_REGION, turned
    as the line between the outer eye corners."""
    from mediapipe.framework.formats import rect_pb2

    low, high = points[:, :2].min(axis=0), points[:, :2].max(axis=0)
    centre = (low + high) / 2 / size
    side = REFIT_REGION * float(np.max(high - low)) / size
    dx, dy = points[_EYE_OUTER[1], :2] - points[_EYE_OUTER[0], :2]
    return rect_pb2.NormalizedRect(
        x_center=float(centre[0]),
        y_center=float(centre[1]),
        width=side,
        height=side,
        rotation=float(np.arctan2(dy, dx)),
    )


def _part_share(count: int) -> float:
    """A part's side as a share of the frame's, the side split into ``count`` parts."""
    return 1.0 if count == 1 else TILE_OVERLAP / count


def tiles_across(height: int, width: int, tiles: int, most_px: int | None = None) -> int:
    """How many tiles a detector of ``tiles`` (n > 1; 1: none) looks at a ``height``
    x ``width`` frame in along its short side: ``tiles``, or more on a large frame
    (each within ``most_px`` on its short side, :data:`TILE_MOST_PX` by default), at
    most :data:`MAX_TILES_ALONG`."""
    if tiles <= 1:
        return tiles
    most = TILE_MOST_PX if most_px is None else most_px
    needed = math.ceil(min(height, width) * TILE_OVERLAP / most - 1e-9)
    return max(tiles, min(needed, MAX_TILES_ALONG))


def tile_counts(height: int, width: int, n: int) -> tuple[int, int]:
    """How many parts (across, down) BlazeFace looks at a ``height`` x ``width`` frame
    in: ``n`` along the short side (1: the whole side), and along the long side ``n`` or
    more, as many as keep each part's long side within :data:`TILE_MAX_ASPECT` times its
    short one (:data:`WHOLE_MAX_ASPECT` for ``n`` = 1), at most :data:`MAX_TILES_ALONG`
    (or ``n``). A square-ish frame is split n x n, as its parts are near square."""
    ratio = max(height, width) / max(1, min(height, width))
    limit = WHOLE_MAX_ASPECT if n == 1 else TILE_MAX_ASPECT
    along = n
    while (
        along < max(n, MAX_TILES_ALONG)
        and ratio * _part_share(along) > limit * _part_share(n) + 1e-9
    ):
        along += 1
    return (along, n) if width >= height else (n, along)


def tile_grid(height: int, width: int, across: int, down: int) -> list[tuple[int, int, int, int]]:
    """Overlapping parts (x, y, width, height) of a ``height`` x ``width`` image,
    ``across`` by ``down``, rows first: each side split into ``count`` parts of
    :data:`TILE_OVERLAP` / ``count`` of it (the whole side for one), spread evenly from
    one end to the other."""

    def spans(size: int, count: int) -> list[tuple[int, int]]:
        if count == 1:
            return [(0, size)]
        part = min(size, int(size / count * TILE_OVERLAP))
        return [(int(at), part) for at in np.linspace(0, size - part, count)]

    return [(x, y, tw, th) for y, th in spans(height, down) for x, tw in spans(width, across)]


@register_detector("mediapipe")
class BlazeFaceDetector:
    """BlazeFace short range (faces within ~2 m) and full range (small, far faces), merged by NMS.

    The full-range model finds near and far faces alike; the short-range one adds
    very close faces it can miss. With ``adaptive`` the short-range pass runs when
    the full-range one found nothing, and on every ``every``-th call regardless (a
    video's periodic re-detection); without it both run on every call.

    Args:
        min_score: detection confidence threshold.
        adaptive: run the short-range pass only when needed (see above).
        every: with ``adaptive``, run the short-range pass at least every N calls.
        tiles: also detect on a grid of overlapping tiles, n (> 1) along the frame's
            short side, for small faces in group photos: n x n, more on a large frame
            (:func:`tiles_across`) and more along a long one (:func:`tile_counts`);
            each costs a detector run more (both models). With ``adaptive`` (video),
            only on frames where the whole frame shows no face, one in
            TILE_EVERY_EMPTY of them.
        sweep: with ``adaptive`` and ``tiles``, calls that find a face also look at
            SWEEP_TILES of the tiles, in turn (full-range model): a small face beside
            a large one is found within a few calls.
        tile_most_px: the most pixels of the frame a tile spans on its short side
            (:func:`tiles_across`); None: :data:`TILE_MOST_PX`, and with ``adaptive``
            :data:`COARSE_TILE_MOST_PX`.
    """

    def __init__(
        self,
        *,
        min_score: float = 0.5,
        adaptive: bool = True,
        every: int = 3,
        tiles: int = 1,
        tile_most_px: int | None = None,
        sweep: bool = False,
    ) -> None:
        mp = _import_mediapipe()
        self.tiles = tiles
        self.adaptive = adaptive
        self.sweep = sweep
        self._swept = 0  # the next tile a sweep looks at
        self.tile_most_px = tile_most_px or (COARSE_TILE_MOST_PX if adaptive else TILE_MOST_PX)
        self.every = max(1, every)
        self._calls = 0
        self._empty = 0  # calls in a row that found no face
        self._short, self._full = (
            mp.solutions.face_detection.FaceDetection(
                model_selection=selection, min_detection_confidence=min_score
            )
            for selection in (0, 1)
        )
        # One lock per graph: the two models may run at once (in two threads), each
        # graph by one thread at a time.
        self._locks = {id(self._short): threading.Lock(), id(self._full): threading.Lock()}
        self._pool: ThreadPoolExecutor | None = None
        self._close_graphs = graph_closer(self, [self._short, self._full])
        # Detections under way (close() waits for them), whether it was closed, and
        # the process they count in (a forked child starts with none).
        self._busy = 0
        self._closed = False
        self._idle = threading.Condition()
        self._pid = os.getpid()

    def _forked(self) -> None:
        if self._pid != os.getpid():
            self._idle, self._busy, self._pid = threading.Condition(), 0, os.getpid()
            self._pool = None  # (its thread is the parent's)

    def _second_thread(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="blazeface-short-range")
        return self._pool

    # detect() takes ``early`` (see there).
    takes_early = True

    def detect(
        self, frame: Frame, *, early: Callable[[list[Detection]], None] | None = None
    ) -> list[Detection]:
        """The faces in ``frame``. Without ``adaptive``, ``early`` (if given) is called
        with the short-range model's faces (frame pixels) as soon as that pass is done,
        in the second thread, while this one runs the full-range model: what it does
        (fitting their meshes) overlaps the rest of that pass, on a second core. The
        tiles (if any) are looked at after ``early`` has returned.

        Raises:
            BackendError: the detector was closed.
        """
        self._forked()
        with self._idle:
            if self._closed:
                raise BackendError("this face detector was closed")
            self._busy += 1
        try:
            return self._detect(frame, early)
        finally:
            with self._idle:
                self._busy -= 1
                self._idle.notify_all()

    def _detect(
        self, frame: Frame, early: Callable[[list[Detection]], None] | None
    ) -> list[Detection]:
        h, w = frame.shape[:2]
        # The whole frame, and a long one in parts along it too (see WHOLE_MAX_ASPECT;
        # a face too large for a part is found whole).
        whole, (fx, fy) = self._parts(frame, 1, DETECT_SIDE, split=False)
        views = [(whole, fx, fy)]
        if tile_counts(h, w, 1) != (1, 1):
            parts, (px, py) = self._parts(frame, 1, DETECT_SIDE)
            views.append((parts, px, py))

        def one_model(*, short: bool) -> list[Detection]:  # (adaptive: one at a time)
            return [
                d.scaled(sx, sy)
                for images, sx, sy in views
                for rgb, at in images
                for d in self._detect_rgb(rgb, at, short=short, full=not short)
            ]

        if self.adaptive:
            found = one_model(short=False)
        else:
            hand_over = (
                None if early is None else lambda dets: early([d.scaled(fx, fy) for d in dets])
            )
            found = [d.scaled(fx, fy) for d in self._both_models(whole, on_short=hand_over)]
            for images, sx, sy in views[1:]:
                found += [d.scaled(sx, sy) for d in self._both_models(images)]
        self._calls += 1
        if self.adaptive and (not found or self._calls % self.every == 1 % self.every):
            found += one_model(short=True)
        # A video's frames (adaptive) look at tiles only while the whole frame shows no
        # face: on the first such frame and every TILE_EVERY_EMPTY-th after it, so a
        # small face in a wide shot is found within a third of a second, and frames
        # with a face cost nothing more.
        self._empty = self._empty + 1 if not found else 0
        tiled = not self.adaptive or self._empty % TILE_EVERY_EMPTY == 1 % TILE_EVERY_EMPTY
        if self.tiles > 1 and max(h, w) >= 480:
            # Group photos: BlazeFace sees the frame at 128-192 px, where distant faces
            # are a few pixels wide. Overlapping tiles give each face more pixels.
            n = tiles_across(h, w, self.tiles, self.tile_most_px)
            if tiled:
                tiles, (fx, fy) = self._parts(frame, n, TILE_SIDE)
                found += [d.scaled(fx, fy).found_searching() for d in self._both_models(tiles)]
            elif self.sweep and found:  # (only a video's frames are not all tiled)
                found += self._sweep(frame, n)
        return nms(found, 0.4)

    def _sweep(self, frame: Frame, n: int) -> list[Detection]:
        """The faces the full-range model finds in the next SWEEP_TILES tiles of
        ``frame``'s grid, ``n`` along its short side (see ``sweep``), in frame pixels."""
        h, w = frame.shape[:2]
        count = math.prod(tile_counts(h, w, n))
        picks = [(self._swept + i) % count for i in range(min(SWEEP_TILES, count))]
        self._swept = (picks[-1] + 1) % count
        tiles, (fx, fy) = self._parts(frame, n, TILE_SIDE, pick=picks)
        return [
            d.scaled(fx, fy).found_searching()
            for rgb, at in tiles
            for d in self._detect_rgb(rgb, at, short=False)
        ]

    @staticmethod
    def _parts(
        frame: Frame,
        n: int,
        side: int,
        *,
        split: bool = True,
        pick: Sequence[int] | None = None,
    ) -> tuple[list[tuple[NDArray[np.uint8], tuple[int, int]]], tuple[float, float]]:
        """The parts (RGB image, offset) of ``frame`` for BlazeFace, ``n`` along its
        short side (:func:`tile_counts`; without ``split``, the frame whole), cut from
        one copy of it shrunk so that no part is over ``side`` px; and the factors
        (x, y) from that copy's pixels back to the frame's. ``pick``: only the parts
        at these places in :func:`tile_grid`'s order (only they are converted)."""
        h, w = frame.shape[:2]
        across, down = tile_counts(h, w, n) if split else (1, 1)
        ratio = max(h, w) / max(1, min(h, w))
        # The frame's long side when its parts' longest side is ``side``.
        long_side = int(side / max(_part_share(max(across, down)), _part_share(n) / ratio))
        small = shrink_to_side(frame, long_side)
        sh, sw = small.shape[:2]
        grid = tile_grid(sh, sw, across, down)
        if pick is None:  # the whole copy converted once
            rgb = cv2.cvtColor(small, cv2.COLOR_BGR2RGB)
            parts = [
                (np.ascontiguousarray(rgb[y : y + th, x : x + tw]), (x, y)) for x, y, tw, th in grid
            ]
        else:
            parts = [
                (cv2.cvtColor(small[y : y + th, x : x + tw], cv2.COLOR_BGR2RGB), (x, y))
                for x, y, tw, th in (grid[i] for i in pick)
            ]
        return parts, (w / sw, h / sh)

    def _both_models(
        self,
        images: list[tuple[NDArray[np.uint8], tuple[int, int]]],
        *,
        on_short: Callable[[list[Detection]], None] | None = None,
    ) -> list[Detection]:
        """Both models on each (RGB image, offset): the short-range passes in a second
        thread while this one runs the full-range ones (MediaPipe releases the GIL; about
        1 ms less per image than one after the other on 2 cores). In image order.
        ``on_short`` (if given) is called in the second thread with each short-range
        pass's faces as soon as it is done; this returns after it has."""

        def short_range(rgb: NDArray[np.uint8], at: tuple[int, int]) -> list[Detection]:
            dets = self._detect_rgb(rgb, at, full=False)
            if on_short is not None:
                on_short(dets)
            return dets

        shorts = [self._second_thread().submit(short_range, rgb, at) for rgb, at in images]
        fulls = [self._detect_rgb(rgb, at, short=False) for rgb, at in images]
        found: list[Detection] = []
        for short, full_range in zip(shorts, fulls, strict=True):
            found += short.result() + full_range
        return found

    def reset(self) -> None:
        """Start a new sequence: the short-range pass and tile schedules restart."""
        self._calls = 0
        self._empty = 0
        self._swept = 0

    def _detect_rgb(
        self,
        rgb: NDArray[np.uint8],
        offset: tuple[int, int],
        *,
        short: bool = True,
        full: bool = True,
    ) -> list[Detection]:
        h, w = rgb.shape[:2]
        ox, oy = offset
        models = [m for m, on in ((self._short, short), (self._full, full)) if on]
        results = []
        for model in models:
            with self._locks[id(model)]:
                results.append(_process(model, rgb))
        found: list[Detection] = []
        for res in results:
            for det in res.detections or []:
                box = det.location_data.relative_bounding_box
                x0, y0 = box.xmin * w + ox, box.ymin * h + oy
                bbox = (x0, y0, x0 + box.width * w, y0 + box.height * h)
                kps = np.array(
                    [[k.x * w + ox, k.y * h + oy] for k in det.location_data.relative_keypoints],
                    np.float32,
                )
                found.append(Detection(bbox, float(det.score[0]), kps))
        return found

    def close(self) -> None:
        """Free both models' graphs (done too once the detector is dropped), once the
        detections under way in other threads are done; a later detect() raises."""
        self._forked()
        with self._idle:
            self._closed = True
            self._idle.wait_for(lambda: self._busy == 0)
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self._close_graphs()


# A strict fit (see MeshLandmarker.fit) is a face when the mesh model's own face
# presence score reaches this (MediaPipe's face-mesh graph thresholds it with its
# ``min_tracking_confidence``, in the static mode too). The development photos' faces
# score 0.9995 or more in every quarter turn but a profile's (0.95-0.995) and those
# cut by a side (0.7-0.8); what the wider searches took for faces scores less: a
# spoon 0.9-0.98, a dark audience 0.5-0.95, a painting 0.5, a banner 0.9.
STRICT_PRESENCE = 0.99
# The strict graphs (by detection threshold), one a process: each holds about 33 MiB,
# and a service's threads each have three analysers. Strict fits are rare (weak faces
# of the wider searches); a lock keeps one at a time in each graph.
_STRICT_GRAPHS: dict[float, Any] = {}
_STRICT_LOCK = threading.Lock()


def _face_mesh(*, static: bool, min_score: float, presence: float):  # type: ignore[no-untyped-def]
    """MediaPipe's one-face mesh graph with irises: its face search (static mode) at
    ``min_score``, and a mesh kept when its face presence reaches ``presence``."""
    return _import_mediapipe().solutions.face_mesh.FaceMesh(
        static_image_mode=static,
        max_num_faces=1,
        refine_landmarks=True,
        min_detection_confidence=min_score,
        min_tracking_confidence=presence,
    )


def _region_mesh(presence: float):  # type: ignore[no-untyped-def]
    """MediaPipe's mesh model with irises on a region given with the image (no face
    search), a mesh kept when its face presence reaches ``presence``."""
    _import_mediapipe()
    from google.protobuf import text_format
    from mediapipe.framework import calculator_pb2
    from mediapipe.python.solution_base import SolutionBase

    config = text_format.Parse(_REGION_GRAPH, calculator_pb2.CalculatorGraphConfig())
    return SolutionBase(
        graph_config=config,
        side_inputs={"with_attention": True},
        calculator_params={"facelandmarkcpu__ThresholdingCalculator.threshold": presence},
        outputs=["face_landmarks"],
    )


def _strict_graph(min_score: float):  # type: ignore[no-untyped-def]
    """The static mesh graph that keeps a mesh only when its face presence reaches
    STRICT_PRESENCE, shared by the process (built on first use: most photos never need
    it). Called with _STRICT_LOCK held."""
    graph = _STRICT_GRAPHS.get(min_score)
    if graph is None:
        presence = max(min_score, STRICT_PRESENCE)
        graph = _face_mesh(static=True, min_score=min_score, presence=presence)
        _STRICT_GRAPHS[min_score] = graph
    return graph


class MeshLandmarker:
    """The 478-point face mesh (with irises), fitted per face on a square crop around its box.

    Fitting per crop gives a mesh for every detected face, small ones included
    (MediaPipe's own face finder inside FaceMesh only sees large faces).

    Every crop is centred on a face at the same scale, so with ``tracking`` MediaPipe's
    tracking mode (landmarks from the previous crop's region, no face search) fits
    it directly, about 1.5 ms cheaper than the static mode's search; a fit whose
    face is not where the crop put it is redone in static mode. Tracking suits
    video; for still images the static mode keeps results independent of earlier
    calls.

    Args:
        crop_scale: crop side as a multiple of the box's larger side.
        crop_size: the crop is resized to at most this many pixels.
        min_score: detection and tracking confidence threshold.
        tracking: use the tracking mode (video) instead of the static one (stills).
    """

    def __init__(
        self,
        *,
        crop_scale: float = 2.2,
        crop_size: int = 256,
        min_score: float = 0.5,
        tracking: bool = False,
    ) -> None:
        self.tracking = tracking
        self._static, self._tracking = (
            _face_mesh(static=static, min_score=min_score, presence=min_score)
            for static in (True, False)
        )
        self.crop_scale = crop_scale
        self.crop_size = crop_size
        self._min_score = min_score
        self._region: Any = None  # the region graph (see CUT_REFITS), built on first use
        self._lock = threading.Lock()
        self._graphs = [self._static, self._tracking]
        self._close_graphs = graph_closer(self, self._graphs)
        self._closed = False

    def fit(
        self,
        frame: Frame,
        bbox: BBox,
        roll: float = 0.0,
        *,
        mirror: bool = True,
        strict: bool = False,
    ) -> NDArray[np.float32] | None:
        """The mesh of the face in ``bbox``, in frame pixels, or None. With ``mirror``, a
        face cut by the frame's side (:func:`cut_by_side`) for which the usual crop gives
        no mesh, or another face's, is fitted with the frame mirrored out. With
        ``strict``, in the static mode only, and None unless the mesh model's face
        presence reaches STRICT_PRESENCE. A mesh that reaches past the frame's edge is
        fitted again round itself (see CUT_REFITS)."""
        crop, matrix = self._prepare(frame, bbox, roll)
        with self._lock, _STRICT_LOCK if strict else contextlib.nullcontext():
            if self._closed:
                raise BackendError("this face mesh model was closed")
            static = _strict_graph(self._min_score) if strict else self._static
            res = _process(self._tracking, crop) if self.tracking and not strict else None
            if res is None or not _fitted_here(res):
                res = _process(static, crop)
            if mirror and cut_by_side(frame, bbox, roll):
                # A face cut by the frame's side, which the mesh does not take for one
                # with the rest of its crop black (it finds none, or another face in
                # the crop): fit it with the frame mirrored out, then on a tighter crop
                # (a cut face, half of it the mirror's, can lose to a whole neighbour).
                # Mirrored first, or tighter first, more fits came out wrong: the
                # mirror's axis is the frame's edge, not the face's midline. A fit
                # counts when its nose lies in the box grown by a quarter (a cut box's
                # centre is not the face's).
                in_box = 0.75 / self.crop_scale
                for tighter in (1.0, MIRRORED_CROP):
                    if _fitted_here(res, in_box):
                        break
                    mirrored, mirrored_matrix = self._prepare(frame, bbox, roll, mirrored=tighter)
                    again = _process(static, mirrored)
                    if again.multi_face_landmarks:
                        res, crop, matrix = again, mirrored, mirrored_matrix
            if not res.multi_face_landmarks:
                return None
            points = self._postprocess(res.multi_face_landmarks[0], matrix, crop.shape[1])
            if mesh_cut(frame, points):
                refits = CUT_REFITS_TRACKED if self.tracking else CUT_REFITS
                points = self._refit(frame, points, roll, refits)
        return points

    def _refit(
        self, frame: Frame, points: NDArray[np.float32], roll: float, refits: int
    ) -> NDArray[np.float32]:
        """A mesh cut by the frame's edge, fitted again on the region drawn round it at
        most ``refits`` times, until it settles (see CUT_REFITS); ``points`` where the
        model loses the face. Called with the lock held."""
        if self._region is None:
            self._region = _region_mesh(self._min_score)
            self._graphs.append(self._region)
        for _ in range(refits):
            crop, matrix = self._prepare(frame, mesh_bbox(points), roll)
            inside = points[:, :2] @ matrix[:, :2].T + matrix[:, 2]
            res = self._region.process(
                {"image": crop, "region": _region_around(inside, crop.shape[1])}
            )
            if res.face_landmarks is None:
                break
            again = self._postprocess(res.face_landmarks, matrix, crop.shape[1])
            moved = float(np.linalg.norm(again[:, :2] - points[:, :2], axis=1).mean())
            points = again
            if moved < REFIT_SETTLED * float(np.ptp(points[:, :2], axis=0).max()):
                break
        return points

    def reset(self) -> None:
        """Forget the previous frames (a new video): the tracking graph starts afresh."""
        with self._lock:
            self._tracking.reset()

    def _prepare(
        self, frame: Frame, bbox: BBox, roll: float = 0.0, *, mirrored: float = 0.0
    ) -> tuple[NDArray[np.uint8], NDArray[np.float64]]:
        """The square RGB crop around ``bbox`` and its frame -> crop affine matrix;
        outside the frame black, or with ``mirrored`` (a share of the usual crop's
        side) a crop that much tighter from the frame mirrored out (:func:`_mirrored_out`).

        A face rolled by more than 45 degrees (``roll``: its eye line's angle in the
        image, clockwise) is cropped turned by the nearest quarter turn, so the mesh
        always sees it within 45 degrees of upright: MediaPipe's own face search in
        the crop finds no face past about 100 degrees.
        """
        x0, y0, x1, y1 = bbox
        quarter = quarter_turns(roll)
        c, s_ = ((1.0, 0.0), (0.0, 1.0), (-1.0, 0.0), (0.0, -1.0))[quarter]
        up = np.array([s_, -c])  # the face's "up" in frame pixels
        centre = np.array([(x0 + x1) / 2, (y0 + y1) / 2]) + 0.05 * (y1 - y0) * up
        side = (mirrored or 1.0) * self.crop_scale * max(x1 - x0, y1 - y0)
        out = int(min(self.crop_size, max(64, round(side))))
        s = out / side
        # crop = s * R(-quarter turns) @ (p - centre) + out / 2
        linear = s * np.array([[c, s_], [-s_, c]])
        matrix = np.concatenate([linear, (out / 2 - linear @ centre)[:, None]], axis=1)
        image, at = _mirrored_out(frame, bbox, matrix) if mirrored else (frame, matrix)
        crop = cv2.warpAffine(
            image,
            at,
            (out, out),
            flags=cv2.INTER_AREA if s < 1 else cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_CONSTANT,
        )
        return cv2.cvtColor(crop, cv2.COLOR_BGR2RGB), matrix

    @staticmethod
    def _postprocess(landmark_list, matrix: NDArray[np.float64], size: int) -> NDArray[np.float32]:  # type: ignore[no-untyped-def]
        pts = _landmark_array(landmark_list) * size
        s = float(np.sqrt(abs(np.linalg.det(matrix[:, :2]))))
        back = cv2.invertAffineTransform(matrix)
        xy = pts[:, :2] @ back[:, :2].T + back[:, 2]
        z = pts[:, 2] / s
        return np.concatenate([xy, z[:, None]], axis=1).astype(np.float32)

    def close(self) -> None:
        """Free the mesh graphs (done too once the landmarker is dropped), once a fit
        under way in another thread is done; a later fit raises."""
        with self._lock:
            self._closed = True
            self._close_graphs()
