"""Live face swap: camera (or a paced file) -> analyse -> swap -> window, stream or file.

::

    capture --q--> analyse (FaceTracker + FaceRouter) --q--> swap --q--> output (caller's thread)
    ------------------------ Pipeline(mode="latest", queue_size=1) ------------------------

Queues hold one frame and drop the oldest when full, so a frame that waited
behind a slow stage is replaced by a newer one and latency cannot creep up; every
drop is counted. The output runs in the caller's thread (GUI windows need that).

A run ends at the end of the input, after ``duration`` seconds, when the window's
``q``/Esc is pressed or on Ctrl-C: all of them stop the pipeline cleanly, finish the
output (a file is finalised) and return the :class:`LiveStats`. A second Ctrl-C
interrupts at once.

Example:
    >>> with Camera(0) as camera:  # doctest: +SKIP
    ...     output = open_output("window", camera.width, camera.height, camera.fps)
    ...     stats = run_live(camera, output, [source_face], duration=60)
    >>> print(stats.summary())  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from faceweave.analysis.analyser import FaceAnalyser
from faceweave.analysis.dlib_backend import DlibIdentity
from faceweave.analysis.identity_worker import IdentityWorker
from faceweave.errors import BackendError, UsageError
from faceweave.pipeline.stages import Packet, Pipeline, Stage, Timing
from faceweave.pipeline.tracking import FaceTracker, TrackerCounters
from faceweave.pipeline.video_job import (
    FaceRouter,
    build_swappers,
    hand_tracker,
    source_list,
    swap_targets,
)
from faceweave.processors.engines import swap_options
from faceweave.processors.neural import AnySwapper, uses_creases
from faceweave.processors.swap import SourcePhotos, SwapOptions
from faceweave.runtime import STOP_SIGNALS, StopSignal, handling_signals
from faceweave.types import Face

if (
    TYPE_CHECKING
):  # pragma: no cover - io.camera imports pipeline.stages: no import cycle at run time
    from faceweave.io.camera import LiveSource
    from faceweave.io.outputs import FrameOutput

__all__ = ["LiveControls", "LiveStats", "run_live"]

logger = logging.getLogger(__name__)

FUSION_STEP = 0.1
# A live session checks a known face's identity again at most once in this many frames
# (about a second at 30 fps; see FaceRouter's recheck_every), in a child process where
# it can (see IdentityWorker); checked here, each check stalls the session.
LIVE_RECHECK_EVERY = 30
LIVE_SELECTORS = ("one", "many", "reference")


@dataclass
class LiveControls:
    """What the keyboard changes while a session runs (read by the swap stage).

    Attributes:
        source_index: which source is swapped in (taken modulo the number of sources).
        fusion: 0 keeps the target, 1 is a full swap.
        enabled: swap at all (``e`` toggles it: there is no other effect yet).
        quit_requested: ``q`` was pressed (in the terminal: a window takes its own
            ``q``); the session ends as after Ctrl-C.
    """

    source_index: int = 0
    fusion: float = 1.0
    enabled: bool = True
    quit_requested: bool = False

    def on_key(self, key: str) -> None:
        """``n`` next source, ``+``/``-`` fusion, ``e`` toggle, ``q`` quit (letters in
        either case: Caps Lock on had left ``Q`` doing nothing); other keys are
        ignored."""
        key = key.lower()
        if key == "q":
            self.quit_requested = True
        elif key == "n":
            self.source_index += 1
        elif key in ("+", "="):
            self.fusion = round(min(1.0, self.fusion + FUSION_STEP), 3)
        elif key in ("-", "_"):
            self.fusion = round(max(0.0, self.fusion - FUSION_STEP), 3)
        elif key == "e":
            self.enabled = not self.enabled


@dataclass(frozen=True)
class LiveStats:
    """What a live session did.

    Attributes:
        frames_captured: frames the input delivered.
        frames_processed: frames written to the output.
        frames_dropped: frames lost on the way: late at capture plus dropped by queues.
        dropped_by: drops per place (``capture`` and the stage whose queue was full).
        latency_ms: capture to output written, per frame.
        fps: frames_processed / wall_s.
        wall_s: session length in seconds.
        stage_ms: milliseconds per frame in ``source``, ``analyse``, ``swap``, ``sink``.
        tracker: the tracker's work counters.
        samples: once a second: ``t`` (s), ``rss_mib`` and ``queues`` (sizes).
        stopped_by: ``end``, ``duration``, ``quit``, ``interrupt`` or
            ``camera_lost`` (a camera that stopped giving frames: unplugged, its
            stream closed, or no frame for CAMERA_STALL_S).
        frames_unswapped: frames shown as they came because a model you bring (the
            neural engine's, an enhancer's, an occluder's) failed on them; the
            session goes on.
        frames_swapped: frames in which a face was swapped (none: the summary says
            so, as when no face matched the reference face).
    """

    frames_captured: int
    frames_processed: int
    frames_dropped: int
    dropped_by: dict[str, int]
    latency_ms: Timing
    fps: float
    wall_s: float
    stage_ms: dict[str, Timing]
    tracker: TrackerCounters
    samples: list[dict[str, Any]] = field(default_factory=list)
    stopped_by: str = "end"
    frames_unswapped: int = 0
    frames_swapped: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (NaN where a timing has no sample)."""
        return asdict(self)

    def summary(self) -> str:
        """One line for the terminal."""
        lat = self.latency_ms
        latency = (
            f"latency p50 {lat.p50:.0f} ms p95 {lat.p95:.0f} ms p99 {lat.p99:.0f} ms"
            if self.frames_processed
            else "no frame shown"
        )
        unswapped = (
            f", {self.frames_unswapped} shown unswapped (a model failed)"
            if self.frames_unswapped
            else ", no face swapped"
            if self.frames_processed and not self.frames_swapped
            else ""
        )
        return (
            f"{self.frames_processed} frames in {self.wall_s:.1f} s ({self.fps:.1f} fps), "
            f"{latency}, {self.frames_captured} captured, {self.frames_dropped} dropped"
            f"{unswapped}"
        )


def run_live(
    capture: LiveSource,
    output: FrameOutput,
    sources: SourcePhotos | AnySwapper | Sequence[SourcePhotos | AnySwapper],
    *,
    analyser: FaceAnalyser | None = None,
    options: SwapOptions | Mapping[str, object] | None = None,
    selector: str = "one",
    references: Sequence[Face] = (),
    reference_distance: float = 0.6,
    controls: LiveControls | None = None,
    redetect_every: int = 10,
    frame_skip: int = 1,
    static_threshold: float = 0.0,
    max_faces: int = 4,
    queue_size: int = 1,
    duration: float | None = None,
    sample_every: float = 1.0,
    handle_sigint: bool = True,
    identity_process: bool = True,
) -> LiveStats:
    """Run a live session until the input ends, ``duration`` passes, quit or Ctrl-C.

    The session owns ``capture`` and ``output``: both are closed when it ends (a
    file output is finalised; after an error it is removed instead).

    Args:
        capture: a :class:`~faceweave.io.camera.Camera` or
            :class:`~faceweave.io.camera.FilePacer`.
        output: from :func:`~faceweave.io.outputs.open_output`; a window's keys go to
            ``controls`` when it was opened with ``on_key=controls.on_key``.
        sources: source faces (or prepared sources, or swappers), or one of them;
            ``n`` cycles through them.
        analyser: the face analyser (a new one when None).
        options: swap options (SwapOptions or a mapping of them); the fusion starts
            at ``controls.fusion``.
        selector: ``one`` (the largest face, followed while its track lives), ``many``,
            or ``reference`` (only faces within ``reference_distance`` of
            ``references[0]``: swap the streamer, not the guest). Identity is checked
            when a track starts and at each re-detection, not on every frame; the
            analyser must then compute embeddings (``with_embedding=True``).
        references: the reference face for ``reference``.
        reference_distance: identity distance threshold (dlib descriptors).
        controls: live settings shared with the window (new ones when None).
        redetect_every: run the detector at least every N analysed frames.
        frame_skip: analyse every N-th frame, carry faces by optical flow between.
        static_threshold: a frame whose face region changed by less than this mean grey
            level keeps the previous frame's faces (no analysis); 0 turns it off.
        max_faces: at most this many tracked faces.
        queue_size: frames each queue holds (1: always the newest).
        duration: stop after this many seconds.
        sample_every: seconds between memory/queue samples.
        handle_sigint: turn the first Ctrl-C into a clean stop (main thread only).
        identity_process: with ``reference``, recheck known faces' identity, and
            check a face that comes in beside the person, in a child process
            (:class:`~faceweave.analysis.identity_worker.IdentityWorker`), not in the
            session's own, where each check stalls every frame for about 100 ms; a
            new face while the person is not in view is checked at once all the same.

    Returns:
        The :class:`LiveStats`.
    """
    if selector not in LIVE_SELECTORS:
        raise UsageError(f"live face selector must be one of {', '.join(LIVE_SELECTORS)}")
    if duration is not None and not 0 < duration <= threading.TIMEOUT_MAX:
        raise UsageError(
            f"duration must be positive and at most {threading.TIMEOUT_MAX:.0f} s, got {duration}"
        )
    options = swap_options(options)
    controls = controls or LiveControls(fusion=options.fusion)
    base = build_swappers(source_list(sources), replace(options, fusion=1.0))
    variants: dict[tuple[int, float], AnySwapper] = {}
    if selector == "reference":
        if len(references) != 1:
            raise UsageError("live face selector 'reference' needs exactly one reference face")
        if analyser is not None and not analyser.with_embedding:
            raise UsageError("reference selection needs an analyser with embeddings")
    own_analyser = analyser is None  # built here: freed here when the run ends
    analyser = analyser or FaceAnalyser(
        max_faces=max_faces, with_embedding=selector == "reference", mode="video"
    )
    if selector == "reference":
        # dlib's identity network loads now, with the reference's embedding, not when
        # the first face shows: there, about a second on two cores dropped the first
        # 48 frames of 50.
        _ = getattr(analyser, "identity", None), references[0].embedding
    tracker = FaceTracker(
        analyser,
        redetect_every=redetect_every,
        frame_skip=frame_skip,
        static_threshold=static_threshold,
        max_faces=max_faces,
        rest_detail=uses_creases(base),
    )
    # dlib's descriptor holds Python's lock for about 100 ms: a known face's rechecks and
    # a guest's first check go to a child process (a new face while the person is not in
    # view is still checked at once: it may be the person, and must not show unswapped).
    worker = (
        IdentityWorker.start(analyser.identity)
        if identity_process
        and selector == "reference"
        and isinstance(getattr(analyser, "identity", None), DlibIdentity)
        else None
    )
    # With mask_hands: MediaPipe's hand tracking over the frames (see hand_tracker), run
    # in a thread of its own beside each frame's face analysis. On the live benchmark
    # (a simulated 720p30 camera, no hand in view) latency p50 / p95 40 / 57 ms against
    # 27 / 33 without it; in a stage of its own after the analysis, 48 / 61; in the
    # swap stage it had held each frame past the camera's next one.
    hands = hand_tracker(base)
    hand_pool = (
        ThreadPoolExecutor(1, thread_name_prefix="faceweave-hands") if hands is not None else None
    )
    router = FaceRouter(
        selector,
        references=references if selector == "reference" else (),
        max_distance=reference_distance,
        recheck_every=LIVE_RECHECK_EVERY,
        identity_worker=worker,
    )

    def analyse(packet: Packet) -> Packet:
        # The hands are looked for on the whole frame while its faces are (MediaPipe
        # leaves Python's lock: the two run on both cores), not after them.
        pending = (
            hand_pool.submit(hands.track, packet.image)
            if hand_pool is not None
            and hands is not None
            and controls.enabled
            and controls.fusion > 0
            else None
        )
        detections, cuts = tracker.counters.detections, tracker.counters.cuts
        tracked = tracker.update(packet.image, packet.time)
        packet.data["targets"] = router.route(
            tracked,
            recheck=tracker.counters.detections > detections,
            cut=tracker.counters.cuts > cuts,
        )
        if pending is not None:
            packet.data["hands"] = pending.result()
        return packet

    def swap(packet: Packet) -> Packet:
        fusion = controls.fusion
        if not controls.enabled or fusion <= 0 or not packet.data["targets"]:
            return packet
        index = controls.source_index % len(base)
        key = (index, fusion)
        if key not in variants:  # prepared once per (source, fusion) the user visits
            variants[key] = (
                base[index] if fusion == 1.0 else base[index].with_options(fusion=fusion)
            )
        targets = [replace(t, source_index=0) for t in packet.data["targets"]]
        try:
            packet.image = swap_targets(
                packet.image, targets, [variants[key]], packet.data.get("hands")
            )
            failed[0] = ""
            swapped[0] += 1
        except BackendError as exc:
            # A model you bring failed on this frame (NaN, its runtime): the frame is
            # shown as it came and the session goes on; said once per new failure.
            failed[1] += 1
            message = " ".join(str(exc).split())
            if message != failed[0]:
                logger.warning("live swap failed, frame shown unswapped: %s", message)
            failed[0] = message
        return packet

    latencies: list[float] = []
    stopped_by = ["end"]
    failed: list[Any] = ["", 0]  # the last swap failure's message, and how many frames
    swapped = [0]  # frames a face was swapped in
    pipeline: Pipeline

    def sink(packet: Packet) -> None:
        output.write(packet)
        latencies.append((time.perf_counter() - packet.captured_at) * 1e3)
        if getattr(output, "quit_requested", False) or controls.quit_requested:
            stop("quit")

    def stop(reason: str) -> None:
        if stopped_by[0] == "end":
            stopped_by[0] = reason
        pipeline.stop()

    frames = iter(capture)
    warmed = [0]
    pipeline = Pipeline(
        frames,
        [Stage("analyse", analyse), Stage("swap", swap)],
        sink,
        queue_size=queue_size,
        mode="latest",
        # A session ends at once: a camera's read blocked on a stalled stream is left
        # behind (its thread is a daemon) rather than waited for.
        join_timeout=1.0,
    )
    sampler = _Sampler(pipeline, sample_every)
    watchdog = _Watchdog(capture, lambda: stop("camera_lost"))
    timer = threading.Timer(duration, stop, args=("duration",)) if duration else None
    began = time.perf_counter()
    ok = False
    try:
        with _sigint_stops(lambda: stop("interrupt"), enabled=handle_sigint):
            sampler.start()
            watchdog.start()
            if timer is not None:
                timer.daemon = True
                timer.start()
            # The first frame warms the models up (their first run, a first face's
            # identity check: 0.1-0.3 s) and is not shown: a recording had held it
            # that long before its second frame.
            first = next(frames, None)
            warm = swap(analyse(first)) if first is not None else None
            kept = (swapped[0], failed[1])
            if warm is not None:
                # (Its swap, or a model's failure on it, is not the session's.)
                warmed[0], swapped[0], failed[1] = 1, 0, 0
            run = pipeline.run()
            if warm is not None and not latencies:
                # Stopped while it warmed up (Ctrl-C, q, --duration): that frame is the
                # session's (a recording of none had been an error, "no frames").
                warmed[0] = 0
                swapped[0], failed[1] = swapped[0] + kept[0], failed[1] + kept[1]
                sink(warm)
        ok = True
    finally:
        if timer is not None:
            timer.cancel()
        sampler.stop()
        watchdog.stop()
        # The recording first: a camera's device may not come free (a stalled stream).
        _finish(output, ok)
        capture.close()
        if worker is not None:
            worker.close()
        if hand_pool is not None:
            hand_pool.shutdown(wait=True)
        if hands is not None:
            hands.close()
        if own_analyser and not pipeline.stages_running():  # (else dropped, freed once done)
            analyser.close()
    wall = time.perf_counter() - began
    if stopped_by[0] == "end" and capture.lost:
        stopped_by[0] = "camera_lost"
    dropped_by = {"capture": capture.dropped, **run.dropped}
    if warmed[0]:
        dropped_by["warm_up"] = warmed[0]
    # Frames in the stages' hands when the session stopped (Ctrl-C, q, --duration):
    # read, never shown (they had been counted nowhere).
    captured = capture.captured + capture.dropped
    unshown = captured - len(latencies) - sum(dropped_by.values())
    if unshown > 0:
        dropped_by["at_stop"] = unshown
    return LiveStats(
        frames_captured=capture.captured + capture.dropped,
        frames_processed=len(latencies),
        frames_dropped=sum(dropped_by.values()),
        dropped_by=dropped_by,
        latency_ms=Timing.of(latencies),
        fps=len(latencies) / wall if wall > 0 else 0.0,
        wall_s=wall,
        stage_ms=dict(run.stage_ms),
        tracker=replace(tracker.counters),
        samples=sampler.samples,
        stopped_by=stopped_by[0],
        frames_unswapped=int(failed[1]),
        frames_swapped=swapped[0],
    )


def _finish(output: FrameOutput, ok: bool) -> None:
    abort = getattr(output, "abort", None)
    if not ok and abort is not None:
        abort()
    else:
        output.close()


@contextlib.contextmanager
def _sigint_stops(stop: Any, *, enabled: bool) -> Iterator[None]:
    """The first Ctrl-C calls ``stop``; the second raises KeyboardInterrupt as usual.

    SIGTERM and SIGHUP (``timeout``, ``docker stop``, a closed terminal) count as a
    Ctrl-C: the session ends as after ``q``, a recording closed and kept; a second one
    raises :class:`~faceweave.runtime.StopSignal` (the command line's exit code names
    the signal, 143 or 129, not Ctrl-C's 130).
    """
    if not enabled:
        yield
        return
    pressed = [False]

    def handler(signum: int, frame: object) -> None:
        if pressed[0]:
            raise KeyboardInterrupt if signum == signal.SIGINT else StopSignal(signum)
        pressed[0] = True
        stop()

    with handling_signals((signal.SIGINT, *STOP_SIGNALS), handler):
        yield


# A camera whose read has waited this long for a frame is lost (a stalled network
# stream blocks in its read, without an error, until OpenCV's own 30 s timeout); before
# its first frame it may take CAMERA_FIRST_FRAME_S (a camera waking up, a stream's
# first key frame).
CAMERA_STALL_S = 5.0
CAMERA_FIRST_FRAME_S = 10.0


class _Ticker:
    """A daemon thread that calls :meth:`tick` every ``every`` seconds until stopped, or
    until ``tick`` returns False."""

    def __init__(self, name: str, every: float) -> None:
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(1.0)

    def tick(self) -> bool:  # pragma: no cover - overridden
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            if not self.tick():
                return


class _Watchdog(_Ticker):
    """Calls ``lost`` once when the live source's read waits too long (see CAMERA_STALL_S)."""

    def __init__(self, capture: LiveSource, lost: Callable[[], None]) -> None:
        super().__init__("faceweave-watchdog", 0.25)
        self.capture = capture
        self.lost = lost

    def tick(self) -> bool:
        limit = CAMERA_STALL_S if self.capture.captured else CAMERA_FIRST_FRAME_S
        if self.capture.waiting_s() > limit:
            self.lost()
            return False
        return True


class _Sampler(_Ticker):
    """Records resident memory and queue sizes on a timer thread."""

    def __init__(self, pipeline: Pipeline, every: float) -> None:
        super().__init__("faceweave-sampler", every)
        self.pipeline = pipeline
        self.samples: list[dict[str, Any]] = []
        self._start = time.perf_counter()

    def start(self) -> None:
        self._start = time.perf_counter()
        super().start()

    def tick(self) -> bool:
        # Queue sizes are internal to Pipeline; read-only peeking, for monitoring only.
        queues = getattr(self.pipeline, "_queues", [])
        self.samples.append(
            {
                "t": round(time.perf_counter() - self._start, 3),
                "rss_mib": round(rss_mib(), 1),
                "queues": [q.qsize() for q in queues],
            }
        )
        return True


def rss_mib() -> float:
    """Resident memory of this process now, in MiB (peak RSS where /proc is missing)."""
    try:
        with open("/proc/self/statm") as handle:
            pages = int(handle.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**20 if sys.platform == "darwin" else peak / 1024
