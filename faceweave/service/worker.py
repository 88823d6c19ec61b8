"""Worker threads that run queued jobs, the models they use, and the retention sweep.

Each worker thread owns one :class:`Engine` (face analysers with their models,
loaded once), so no model is ever shared between threads. Workers
take jobs from the :class:`~faceweave.service.jobs.JobStore` until stopped;
a job queued in this process wakes an idle worker at once, one queued by another
process is found within ``poll_interval_s``.

Every output is marked (:mod:`faceweave.provenance`): a faint watermark that
carries the job id, plus metadata labels. See :func:`mark_frame` and
:func:`write_result`, the one place this happens.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.analysis.analyser import FaceAnalyser, photo_analyser
from faceweave.analysis.selection import select_faces
from faceweave.errors import BackendError, FaceweaveError, NoFaceError, OutputError
from faceweave.io.image import keep_alpha, read_image, read_image_and_alpha, write_image
from faceweave.processors.engines import SwapEngine, swapper_advice, target_advice
from faceweave.processors.frame_enhancer import FrameEnhancer
from faceweave.processors.neural import AnySwapper
from faceweave.processors.swap import SwapOptions
from faceweave.service.errors import (
    DISK_FULL_RETRY_S,
    ENGINE_ERROR_MESSAGE,
    ServiceError,
    disk_full,
    http_status_of,
)
from faceweave.service.jobs import DELETED_KEPT_S, Job, JobOptions, JobStore, source_roles
from faceweave.types import Face, Frame

__all__ = [
    "Engine",
    "JobCancelled",
    "image_analyser",
    "Sweeper",
    "WorkerPool",
    "mark_frame",
    "provenance_available",
    "result_extension",
    "video_supported",
    "write_result",
]

logger = logging.getLogger("faceweave.service")

ANALYSER_MAX_FACES = 32


def image_analyser() -> FaceAnalyser:
    """The analyser of a job's photos: the command line's (see
    :func:`~faceweave.analysis.analyser.photo_analyser`)."""
    return photo_analyser(max_faces=ANALYSER_MAX_FACES)


_PROGRESS_EVERY_S = 0.25  # at most this often a running job's progress is written


class JobCancelled(Exception):
    """The job was cancelled (deleted) while it ran."""


# --- provenance: the one call site ----------------------------------------------------------


def provenance_available() -> bool:
    """Whether :mod:`faceweave.provenance` can be imported (the service checks at start-up)."""
    try:
        import faceweave.provenance  # noqa: F401
    except ImportError:
        return False
    return True


def mark_frame(frame: Frame, job_id: str) -> Frame:
    """Embed the provenance watermark carrying ``job_id``.

    Without :mod:`faceweave.provenance` the frame is returned unmarked; the service
    only starts that way when ``require_provenance`` was turned off.
    """
    try:
        from faceweave.provenance import embed_watermark
    except ImportError:
        return frame
    return embed_watermark(frame, job_id)


def write_result(
    path: Path,
    frame: Frame,
    *,
    job_id: str,
    quality: int,
    alpha: NDArray[np.uint8] | None = None,
) -> bool:
    """Write a result image, watermarked and labelled, atomically. ``alpha``: the
    target's transparency, kept in a PNG or WebP result (marked before it is put back,
    so the picture over white carries the whole mark). False when the mark is not
    found in the file as saved (a low quality; see mark_for_saving)."""
    try:
        from faceweave.provenance import image_labels, write_labeled_image
        from faceweave.provenance.labels import mark_for_saving
    except ImportError:  # only when require_provenance is off
        write_image(path, keep_alpha(frame, alpha, path), quality=quality)
        return True
    # (at a low quality, made as strong as the saved file needs to keep it)
    marked, kept = mark_for_saving(frame, job_id, path, quality)
    write_labeled_image(
        path, keep_alpha(marked, alpha, path), image_labels(job_id), quality=quality
    )
    return kept


def video_supported() -> bool:
    """Whether the video pipeline (:mod:`faceweave.pipeline.video_job`) is installed."""
    try:
        from faceweave.pipeline.video_job import swap_video  # noqa: F401
    except ImportError:
        return False
    return True


# --- the engine: models of one worker -----------------------------------------------------------


class Engine:
    """The models one thread uses: the photos' face analyser (detector, mesh, identity;
    :func:`image_analyser`), the video frames' (:meth:`video_analyser`, built on the
    first video job), and the swap engine (shared by every thread: its ONNX models, if
    any, load once).

    Args:
        swap_engine: the swap engine (default: the embedded one).
        preload_identity: also load the identity model (used by the ``reference``
            selector) now rather than on first use.
        frame_enhancer: the server's upscaler (shared by every thread), or None: jobs
            asking ``upscale`` get their results upscaled by it.

    Example:
        >>> engine = Engine()  # doctest: +SKIP
        >>> out = engine.swap_image(source, target, JobOptions())  # doctest: +SKIP
    """

    def __init__(
        self,
        swap_engine: SwapEngine | None = None,
        *,
        preload_identity: bool = True,
        frame_enhancer: FrameEnhancer | None = None,
    ) -> None:
        self.swap_engine = swap_engine or SwapEngine()
        self.frame_enhancer = frame_enhancer
        self.analyser = image_analyser()
        # Load the detector and mesh models now: a blank frame has no face but runs both.
        self.analyser.get_faces(np.zeros((64, 64, 3), np.uint8))
        _ = self.analyser.landmarker
        if preload_identity:
            _ = self.analyser.identity
        self._video_analysers: dict[bool, FaceAnalyser] = {}

    def video_analyser(self, all_faces: bool = False) -> FaceAnalyser:
        """This thread's analyser of video frames (built on the first video job that
        wants it; ``all_faces``: see :func:`~faceweave.pipeline.video_job.video_analyser`),
        ready for a new clip: nothing of the last one's frames steers it. It shares the
        identity model with :attr:`analyser`."""
        analyser = self._video_analysers.get(all_faces)
        if analyser is None:
            from faceweave.pipeline.video_job import video_analyser

            analyser = video_analyser(max_faces=ANALYSER_MAX_FACES, all_faces=all_faces)
            analyser.identity = self.analyser.identity
            self._video_analysers[all_faces] = analyser
        analyser.reset()
        return analyser

    def first_face(self, frame: Frame, role: str, notes: list[str] | None = None) -> Face:
        """The largest face; with ``notes``, a line added there when there are others."""
        faces = self.analyser.get_faces(frame)
        if not faces:
            raise NoFaceError(f"no face found in the {role} image")
        if len(faces) > 1 and notes is not None:
            notes.append(f"the {role} image shows {len(faces)} faces; the largest is used")
        return faces[0]

    def upscaler(self, options: JobOptions) -> FrameEnhancer | None:
        """The frame enhancer a job's result goes through: the server's, unless the job
        asks ``upscale=false``."""
        return self.frame_enhancer if options.upscale else None

    def swapper(self, source_face: Face | list[Face], options: JobOptions) -> AnySwapper:
        """A swapper for one source face, or several photos of the same person."""
        return self.swap_engine.swapper(source_face, SwapOptions.from_settings(options))

    def swap_image(
        self,
        swapper: AnySwapper,
        target: Frame,
        options: JobOptions,
        reference_face: Face | None = None,
        notes: list[str] | None = None,
    ) -> Frame:
        """Swap the selected faces of one target frame; with ``notes``, a line added
        there for each face that keeps most of its own (a profile).

        Raises:
            NoFaceError: no (matching) face and ``skip_no_face`` is off.
        """
        faces = self.analyser.get_faces(target)[: options.max_faces]
        selected = select_faces(
            faces,
            selector=options.face_selector,
            reference=reference_face,
            max_distance=options.reference_distance,
            order=options.face_order,
        )
        if not selected:
            if options.skip_no_face:
                return target.copy()
            what = "no face matching the reference" if faces else "no face"
            raise NoFaceError(f"{what} found in the target")
        if notes is not None:
            notes += [
                f"target: {advice}"
                for face in selected
                if (advice := target_advice(swapper, face)) is not None
            ]
        return swapper.swap(target, selected)


def result_extension(job: Job) -> str:
    """The result's extension: the options' format, else follow the target."""
    target_ext = job.inputs["target"].ext
    if job.kind == "video":
        return target_ext
    if job.options.output_format != "auto":
        return "." + job.options.output_format
    # (A HEIC photo, which is read but not written, gives a JPEG as a JPEG does.)
    return ".jpg" if target_ext in (".jpg", ".heic") else ".png"


# --- running one job -----------------------------------------------------------------------------


@dataclass
class _Progress:
    store: JobStore
    job_id: str
    last: float = 0.0

    def __call__(self, fraction: float, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < _PROGRESS_EVERY_S:
            return
        self.last = now
        if not self.store.set_progress(self.job_id, fraction):
            raise JobCancelled(self.job_id)


def run_job(
    engine: Engine, store: JobStore, job: Job, *, max_pixels: int
) -> tuple[str, str, tuple[str, ...]]:
    """Run one claimed job; returns (result extension, result SHA-256, notes on the
    source: what it will show in the result, see source_advice).

    Raises:
        JobCancelled: the job was deleted while it ran.
        FaceweaveError: the inputs cannot be swapped (no face, unreadable...).
    """
    progress = _Progress(store, job.id)
    options = job.options
    # Checked at the door too; a job queued before a restart on another engine is
    # checked here against this one, in the same words.
    settings = engine.swap_engine.settings
    settings.check_options(
        SwapOptions.from_settings(options), engine=f"this server's engine ({settings.engine})"
    )
    notes: list[str] = []
    source_faces = [
        engine.first_face(
            read_image(store.input_path(job, role), max_pixels=max_pixels), role, notes
        )
        for role in source_roles(job.inputs)
    ]
    reference_face = None
    if options.face_selector == "reference":
        reference = read_image(store.input_path(job, "reference"), max_pixels=max_pixels)
        reference_face = engine.first_face(reference, "reference", notes)
    swapper = engine.swapper(source_faces, options)
    progress(0.1, force=True)
    ext = result_extension(job)
    result_path = store.result_path(job.id, ext)
    if job.kind == "video":
        notes += _run_video(engine, store, job, swapper, reference_face, result_path, progress)
    else:
        target, alpha = read_image_and_alpha(store.input_path(job, "target"), max_pixels=max_pixels)
        upscaler = engine.upscaler(options)
        if upscaler is not None:  # (a job queued before the server had it: before the swap)
            upscaler.check_size(target.shape[1], target.shape[0])
        progress(0.3, force=True)
        output = engine.swap_image(swapper, target, options, reference_face, notes)
        if upscaler is not None:
            progress(0.6, force=True)
            output, alpha = upscaler.enhance_with_alpha(output, alpha)
        progress(0.8, force=True)
        if not write_result(
            result_path, output, job_id=job.id, quality=options.quality, alpha=alpha
        ):
            notes.append(
                f"the watermark does not survive quality {options.quality}; a higher one keeps it"
            )
    return ext, _sha256(result_path), (*notes, *swapper_advice(swapper))


def _run_video(
    engine: Engine,
    store: JobStore,
    job: Job,
    swapper: AnySwapper,
    reference_face: Face | None,
    result_path: Path,
    progress: Callable[..., None],
) -> list[str]:
    """Swap a video job's target into ``result_path``; returns what its reader and
    writer had to say (a file cut short: the frames that decode are kept), for the
    job's notes, without the server's paths."""
    from faceweave.pipeline.video_job import swap_video

    options = job.options

    def on_progress(start: float, span: float, done: int, expected: int) -> None:
        fraction = min(1.0, done / expected) if expected > 0 else 0.5
        progress(start + span * fraction)

    # Every frame is watermarked before it is encoded and the container is labelled:
    # one encode, written atomically. (The engine is this thread's own.)
    stats = swap_video(
        [swapper],
        store.input_path(job, "target"),
        result_path,
        analyser=engine.video_analyser(all_faces=options.face_selector != "one"),
        selector=options.face_selector,
        references=[reference_face] if reference_face is not None else [],
        reference_distance=options.reference_distance,
        face_order=options.face_order,
        max_faces=options.max_faces,
        progress=lambda done, total: on_progress(0.1, 0.89, done, total),
        watermark=job.id if provenance_available() else None,
        keep_faceless=options.skip_no_face,
        keep_audio=options.keep_audio,
        trim_start=options.trim_start or None,
        trim_end=options.trim_end or None,
        frame_enhancer=engine.upscaler(options),
    )
    if stats.frames_swapped == 0 and not options.skip_no_face:
        raise NoFaceError("no (matching) face found in any frame of the target")
    job_dir = store.job_dir(job.id)
    return [" ".join(line.replace(str(job_dir) + "/", "").split()) for line in stats.warnings]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _client_message(error: BaseException, job_dir: Path) -> str:
    """One line for the client, without the server's paths."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text.replace(str(job_dir) + "/", "").replace(str(job_dir), "")


# --- the pool ------------------------------------------------------------------------------------


class WorkerPool:
    """Threads that run jobs until stopped.

    Args:
        store: the job queue.
        engines: one per worker thread.
        max_pixels: the image pixel limit (inputs were checked; this is a second guard).
        poll_interval_s: how often idle workers look for jobs queued elsewhere.
    """

    def __init__(
        self,
        store: JobStore,
        engines: list[Engine],
        *,
        max_pixels: int,
        poll_interval_s: float = 1.0,
    ) -> None:
        self.store = store
        self.engines = engines
        self.max_pixels = max_pixels
        self.poll_interval_s = poll_interval_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.jobs_run = 0

    def start(self) -> None:
        for index, engine in enumerate(self.engines):
            thread = threading.Thread(
                target=self._loop, args=(f"worker-{index}", engine), daemon=True
            )
            thread.name = f"faceweave-worker-{index}"
            thread.start()
            self._threads.append(thread)

    def notify(self) -> None:
        """A job was queued: wake an idle worker."""
        self._wake.set()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop taking jobs and wait for running ones (requeued at next start if cut short)."""
        self._stop.set()
        self._wake.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _loop(self, name: str, engine: Engine) -> None:
        while not self._stop.is_set():
            try:
                job = self.store.claim(name)
            except Exception as exc:  # noqa: BLE001 - a locked or busy database: try again later
                if disk_full(exc):
                    logger.warning(
                        "%s: the disk is full: no job taken for %d s", name, DISK_FULL_RETRY_S
                    )
                    self._stop.wait(DISK_FULL_RETRY_S)
                    continue
                logger.exception("%s: cannot claim a job", name)
                job = None
            if job is None:
                if self._wake.wait(self.poll_interval_s):
                    self._wake.clear()
                continue
            try:
                self._run(engine, job)
            except Exception as exc:  # noqa: BLE001 - recording its end failed: the database
                if disk_full(exc):  # (its result may be there: it runs again all the same)
                    self._back_in_queue(job)
                else:  # left running: requeued at the next start
                    logger.error("job %s: cannot record its end", job.id, exc_info=exc)

    def _run(self, engine: Engine, job: Job) -> None:
        job_dir = self.store.job_dir(job.id)
        left = self.store.remove_partial_outputs(job.id)  # of a run killed mid-way
        if left:
            logger.info("job %s: removed %s left by an interrupted run", job.id, ", ".join(left))
        began = time.perf_counter()
        try:
            ext, sha, notes = run_job(engine, self.store, job, max_pixels=self.max_pixels)
        except JobCancelled:
            self._let_go(job)
            return
        except Exception as exc:  # noqa: BLE001 - one bad job must not kill the worker
            if disk_full(exc):
                self._back_in_queue(job)
            else:
                self._failed(job, exc, job_dir)
            return
        if self.store.complete(job, ext, sha, notes):
            self.jobs_run += 1
            logger.info("job %s done in %.2f s", job.id, time.perf_counter() - began)
        else:
            self._let_go(job)

    def _let_go(self, job: Job) -> None:
        """The job is no longer this server's to run: deleted while it ran (its files must
        not outlive it), or put back in the queue (they stay, for its next run)."""
        if self.store.is_deleted(job.id):
            logger.info("job %s cancelled while running", job.id)
            self.store.remove_files(job.id)
        else:
            self.store.remove_partial_outputs(job.id)
            logger.warning("job %s was taken back from this server while it ran", job.id)

    def _failed(self, job: Job, exc: Exception, job_dir: Path) -> None:
        if isinstance(exc, BackendError):  # the server's models, not the job's inputs
            logger.error("job %s: engine error: %s", job.id, " ".join(str(exc).split()))
            self._finish_failed(job, "engine_error", ENGINE_ERROR_MESSAGE)
        elif isinstance(exc, FaceweaveError):
            _, code = http_status_of(exc)
            if isinstance(exc, OutputError):
                code = "output_error"
            self._finish_failed(job, code, _client_message(exc, job_dir))
        else:
            logger.error("job %s: internal error", job.id, exc_info=exc)
            self._finish_failed(job, "internal", f"internal error ({type(exc).__name__})")

    def _back_in_queue(self, job: Job) -> None:
        """The disk is full: no fault of the job's. It goes back in the queue (tried
        again until the database has room to record that, or the pool stops: then it
        is requeued at the next start), and this worker waits DISK_FULL_RETRY_S before
        it takes a job again."""
        logger.warning(
            "job %s: the disk is full: back in the queue; this worker waits %d s",
            job.id,
            DISK_FULL_RETRY_S,
        )
        self.store.remove_partial_outputs(job.id)
        while not self._stop.is_set():
            try:
                if not self.store.requeue(job, "disk full") and self.store.is_deleted(job.id):
                    self.store.remove_files(job.id)
                break
            except Exception as exc:  # noqa: BLE001 - the database itself: wait and retry
                if not disk_full(exc):
                    logger.error("job %s: cannot requeue it", job.id, exc_info=exc)
                    break
            self._stop.wait(DISK_FULL_RETRY_S)
        self._stop.wait(DISK_FULL_RETRY_S)

    def _finish_failed(self, job: Job, code: str, message: str) -> None:
        if not self.store.fail(job, code, message):
            self._let_go(job)


class Sweeper:
    """Every ``interval_s``: deletes finished jobs older than the retention period, puts
    back in the queue the jobs of another server on the same data directory that has
    died (:meth:`JobStore.requeue_interrupted`), and removes upload directories left
    by a crash (:meth:`JobStore.remove_orphan_dirs`).

    Args:
        store: the jobs.
        retention_hours: 0 keeps finished jobs.
        interval_s: how often it sweeps.
        on_requeued: called with the ids put back in the queue (to wake a worker).
    """

    def __init__(
        self,
        store: JobStore,
        *,
        retention_hours: float,
        interval_s: float,
        on_requeued: Callable[[list[str]], None] | None = None,
    ) -> None:
        self.store = store
        self.retention_s = retention_hours * 3600.0
        self.interval_s = interval_s
        self.on_requeued = on_requeued
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="faceweave-sweeper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5.0)

    def sweep(self) -> list[str]:
        """Expire old jobs now (returns their ids), and remove the rows of jobs deleted
        over DELETED_KEPT_S ago."""
        now = time.time()
        expired = self.store.expire(now - self.retention_s) if self.retention_s > 0 else []
        self.store.purge_deleted(now - DELETED_KEPT_S)
        return expired

    def recover(self) -> list[str]:
        """Requeue the jobs of servers that have died, and remove old orphaned uploads;
        returns the ids requeued."""
        requeued = self.store.requeue_interrupted()
        if requeued:
            logger.warning("requeued %d jobs of a server that stopped under them", len(requeued))
            if self.on_requeued is not None:
                self.on_requeued(requeued)
        self.store.remove_orphan_dirs()
        return requeued

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                expired = self.sweep()
                self.recover()
            except Exception:  # noqa: BLE001 - try again next time
                logger.exception("sweep failed")
                continue
            if expired:
                logger.info("retention: deleted %d finished jobs", len(expired))


# --- previews --------------------------------------------------------------------------------


class Previewer:
    """Synchronous single-frame swaps for the web page, on their own engine.

    One preview runs at a time (the engine is not shared); callers run
    :meth:`preview` in a thread, never on the event loop.
    """

    def __init__(self, engine: Engine, *, max_side: int, max_pixels: int) -> None:
        self.engine = engine
        self.max_side = max_side
        self.max_pixels = max_pixels
        self._lock = threading.Lock()

    def preview(
        self,
        source_path: Path,
        target_path: Path,
        target_kind: str,
        options: JobOptions,
        *,
        reference_path: Path | None,
        mark: str,
        timeout_s: float = 30.0,
        extra_sources: Sequence[Path] = (),
    ) -> bytes:
        """A swapped JPEG of the target (or a video's first frame, from its
        ``trim_start`` on), at most ``max_side`` wide.

        Raises:
            ServiceError: 503 when the previewer stays busy for ``timeout_s``.
            FaceweaveError: no face, unreadable input.
        """
        sources = [
            _fit(read_image(path, max_pixels=self.max_pixels), self.max_side)
            for path in (source_path, *extra_sources)
        ]
        target = _fit(
            self._target_frame(target_path, target_kind, options.trim_start), self.max_side
        )
        reference = (
            _fit(read_image(reference_path, max_pixels=self.max_pixels), self.max_side)
            if reference_path is not None
            else None
        )
        if not self._lock.acquire(timeout=timeout_s):
            raise ServiceError(
                503, "busy", "the previewer is busy; try again", headers={"Retry-After": "1"}
            )
        try:
            source_faces = [self.engine.first_face(source, "source") for source in sources]
            reference_face = (
                self.engine.first_face(reference, "reference") if reference is not None else None
            )
            swapper = self.engine.swapper(source_faces, options)
            output = self.engine.swap_image(swapper, target, options, reference_face)
        finally:
            self._lock.release()
        marked = mark_frame(output, mark)
        ok, buffer = cv2.imencode(".jpg", marked, [cv2.IMWRITE_JPEG_QUALITY, 90])
        if not ok:
            raise OutputError("cannot encode the preview")
        return bytes(buffer.tobytes())

    def _target_frame(self, path: Path, kind: str, start: float = 0.0) -> Frame:
        """The image, or the video's first frame from ``start`` (its trim_start) on."""
        if kind == "image":
            return read_image(path, max_pixels=self.max_pixels)
        from faceweave.io.animation import open_clip

        with open_clip(path, start=start or None) as reader:
            for frame in reader:
                return frame.image
        raise ServiceError(422, "bad_video", "the target video has no decodable frame")


def _fit(frame: Frame, max_side: int) -> Frame:
    height, width = frame.shape[:2]
    scale = max_side / max(height, width)
    if scale >= 1.0:
        return frame
    size = (max(8, round(width * scale)), max(8, round(height * scale)))
    return np.ascontiguousarray(cv2.resize(frame, size, interpolation=cv2.INTER_AREA))
