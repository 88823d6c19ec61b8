"""Live swap in the browser: the camera goes to the server over WebRTC and comes back swapped.

::

    browser camera --RTP--> aiortc decoder --> reader task: keeps the LATEST frame only
        --> SwappedTrack.recv(): analyse + swap in the session's one worker thread
        --> aiortc encoder --RTP--> browser <video>

* **Latest wins.** A reader task pulls decoded frames as fast as they come and keeps
  only the newest; :meth:`SwappedTrack.recv` takes it when the previous one is done,
  so a slow frame makes the next ones drop (counted), never queue up: latency cannot
  creep (STYLE.md rule 5).
* **Nothing heavy on the event loop.** Colour conversion, tracking and swapping run
  in a single-thread executor per session (models are not shared between threads);
  a new source image is analysed and a new fusion degree prepared in the thread pool
  and swapped in with one reference assignment, so frames keep flowing meanwhile.
* **Timestamps kept.** Output frames carry the input's ``pts`` and ``time_base``.
* **Latency visible.** A data channel named ``stats`` answers ``ping`` messages at once
  (round trip) and reports, per output frame, its RTP timestamp and server timings,
  which lets the page measure the frame round trip (see ``static/live.js``).
* **Cleaned up.** A session ends on ``DELETE``, when the peer connection fails or
  closes, when it never connects, and on shutdown (the router's lifespan).

Wiring into the service::

    from faceweave.service.live import create_live_router
    app.include_router(create_live_router(auth=require_key, max_pixels=config.max_pixels))

Example:
    >>> app = FastAPI()  # doctest: +SKIP
    >>> app.include_router(create_live_router())  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from aiortc import (
    MediaStreamTrack,
    RTCConfiguration,
    RTCDataChannel,
    RTCPeerConnection,
    RTCSessionDescription,
    VideoStreamTrack,
)
from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from aiortc.mediastreams import MediaStreamError
from aiortc.rtcrtpreceiver import RTCRtpReceiver
from aiortc.rtp import RtpPacket
from av import VideoFrame
from fastapi import APIRouter, Depends, FastAPI, Request, Response
from fastapi.responses import FileResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from faceweave.analysis.analyser import FaceAnalyser, photo_analyser
from faceweave.analysis.hands import MediaPipeHands
from faceweave.errors import BackendError, FaceweaveError, InputError, NoFaceError
from faceweave.io.image import DEFAULT_MAX_PIXELS, read_image
from faceweave.pipeline.tracking import FaceTracker
from faceweave.processors.engines import SwapEngine, swapper_advice
from faceweave.processors.neural import AnySwapper
from faceweave.processors.swap import GAZE_MODES, SwapOptions
from faceweave.service.checks import check_media, receive_upload
from faceweave.service.errors import ENGINE_ERROR_MESSAGE, ServiceError, error_responses
from faceweave.service.jobs import EXTRA_SOURCES
from faceweave.types import Frame

__all__ = [
    "LiveSession",
    "MarkerJitterBuffer",
    "LiveSessions",
    "SwappedTrack",
    "create_live_router",
    "default_analyser",
    "use_marker_jitter_buffer",
]

logger = logging.getLogger("faceweave.service.live")

STATIC_DIR = Path(__file__).parent / "static"
STATS_CHANNEL = "stats"
MIB = 1024 * 1024
# Retry-After of a 503 when every live session is taken: a session that never
# connects is closed after its connect timeout (30 s by default), most end sooner.
BUSY_RETRY_S = 5
_BLANK: Frame = np.zeros((64, 64, 3), np.uint8)  # runs the detector once: loads it


def default_analyser() -> FaceAnalyser:
    """The analyser of one live session: one face, no identity model (not needed live)."""
    return FaceAnalyser(max_faces=1, with_embedding=False, mode="video")


def default_source_analyser() -> FaceAnalyser:
    """The analyser of source photos: still images, found as ``faceweave swap`` and the
    REST jobs find them (both detectors, tiles and the frame's sides: a small face in
    a large photo too), with the identity model (several photos of one person are
    checked to be one person). Two faces at most: the largest is used, a second is
    only named in the session's notes."""
    return photo_analyser(max_faces=2)


# --- per-session processing (runs in the session's worker thread) ---------------------------


class FrameProcessor:
    """Analyse + swap for one session. Only its worker thread calls :meth:`process`.

    Args:
        analyser_factory: builds the session's analyser (in the worker thread).
    """

    def __init__(self, analyser_factory: Callable[[], FaceAnalyser]) -> None:
        self._analyser_factory = analyser_factory
        self._tracker: FaceTracker | None = None
        # Replaced whole by the control handlers (one reference assignment, atomic);
        # the worker reads it once per frame. None: frames pass through unchanged.
        self.swapper: AnySwapper | None = None
        # Why the last frame's swap failed (it went out unswapped); None: it did not.
        self.error: str | None = None
        # With a swapper that keeps hands (mask_hands): MediaPipe's hand tracking over
        # the session's frames, built on the first such frame.
        self._hands: MediaPipeHands | None = None
        self._hand_pool: ThreadPoolExecutor | None = None

    def warm_up(self) -> None:
        """Load the models now (called once in the worker thread at session start)."""
        if self._tracker is None:
            analyser = self._analyser_factory()
            analyser.get_faces(_BLANK)
            _ = analyser.landmarker
            self._tracker = FaceTracker(analyser, redetect_every=10, max_faces=1)

    def process(self, frame: VideoFrame) -> tuple[VideoFrame, int]:
        """The swapped frame with ``frame``'s pts and time_base, and the faces found."""
        self.warm_up()
        assert self._tracker is not None
        image: Frame = np.asarray(frame.to_ndarray(format="bgr24"), np.uint8)
        swapper = self.swapper
        # With mask_hands the hands are tracked on the whole frame beside its face
        # analysis (MediaPipe leaves Python's lock), not after it.
        pending = None
        if swapper is not None and swapper.options.mask_hands and swapper.options.fusion > 0.0:
            if self._hands is None:
                self._hands = MediaPipeHands(tracking=True)
                self._hand_pool = ThreadPoolExecutor(1, thread_name_prefix="faceweave-live-hands")
            assert self._hand_pool is not None
            pending = self._hand_pool.submit(self._hands.track, image)
        faces = [tracked.face for tracked in self._tracker.update(image, time.monotonic())]
        if swapper is not None and faces:
            try:
                hands = pending.result() if pending is not None else None
                image = swapper.swap(image, faces, hands=hands)
                self.error = None
            except Exception as exc:  # noqa: BLE001 - a failing model must not stop the stream
                # The frame goes out as it came; the page is told (FrameTiming.error) and
                # the log says why, once per new failure.
                engine = not isinstance(exc, FaceweaveError) or isinstance(exc, BackendError)
                message = ENGINE_ERROR_MESSAGE if engine else " ".join(str(exc).split())
                if message != self.error:  # a bug's traceback too; a model's fault in a line
                    logger.error(
                        "live swap failed: %s",
                        " ".join(str(exc).split()) or type(exc).__name__,
                        exc_info=not isinstance(exc, FaceweaveError),
                    )
                self.error = message
        else:
            if pending is not None:
                # Waited for, so the tracker is done with this frame before the next; a
                # failure shows in the next frame with a face, where it is reported.
                with contextlib.suppress(Exception):
                    pending.result()
            self.error = None  # no swap tried: none failed
        out = VideoFrame.from_ndarray(image, format="bgr24")
        out.pts = frame.pts
        out.time_base = frame.time_base
        return out, len(faces)

    def close(self) -> None:
        """Free the session's models: its analyser's graphs and the hand tracker, if one
        was built (called once the worker is done)."""
        if self._hand_pool is not None:
            self._hand_pool.shutdown(wait=True)
            self._hand_pool = None
        if self._hands is not None:
            self._hands.close()
            self._hands = None
        if self._tracker is not None:
            close = getattr(self._tracker.analyser, "close", None)
            if callable(close):
                close()
            self._tracker = None


# --- receiving: a frame as soon as it is complete --------------------------------------------


class MarkerJitterBuffer(JitterBuffer):
    """A video jitter buffer that hands a frame on as soon as its last packet is in.

    aiortc's own (1.16) knows a frame is complete only when the first packet of the
    *next* frame arrives, which adds one frame interval (67 ms at 15 fps) to every
    frame received. VP8 and H.264 senders set the RTP marker bit on a frame's last
    packet: once that packet and every one before it are in, the frame is complete.
    Frames without a marker fall back to aiortc's rule.
    """

    def _remove_frame(self, sequence_number: int) -> JitterFrame | None:
        origin = self._origin
        if origin is not None:
            packets: list[RtpPacket] = []
            for count in range(self.capacity):
                packet = self._packets[(origin + count) % self.capacity]
                if packet is None or (packets and packet.timestamp != packets[0].timestamp):
                    break
                packets.append(packet)
                if packet.marker:
                    self.remove(count + 1)
                    data = b"".join(p._data for p in packets)  # type: ignore[attr-defined]
                    return JitterFrame(data=data, timestamp=packet.timestamp)
        return super()._remove_frame(sequence_number)


def use_marker_jitter_buffer(receiver: RTCRtpReceiver) -> bool:
    """Give an aiortc video receiver a :class:`MarkerJitterBuffer`, before packets arrive.

    Reaches into aiortc's private state (pinned aiortc 1.16); returns False and
    leaves the receiver alone when that state is not what this expects.
    """
    name = "_RTCRtpReceiver__jitter_buffer"
    current = getattr(receiver, name, None)
    if type(current) is not JitterBuffer or not getattr(current, "_is_video", False):
        return False
    setattr(receiver, name, MarkerJitterBuffer(capacity=current.capacity, is_video=True))
    return True


# --- the track -------------------------------------------------------------------------------


@dataclass
class FrameTiming:
    """Server timings of one output frame, reported on the ``stats`` channel (ms)."""

    ts: int  # the input frame's pts at 1/90000: its RTP timestamp minus the first frame's
    wait_ms: float  # decoded -> taken by recv (time spent waiting behind the previous frame)
    process_ms: float  # worker thread: convert, analyse, swap, convert back
    faces: int
    dropped: int  # input frames replaced by a newer one so far
    # The RTP timestamp this frame leaves with (the sender's random origin + pts), when
    # known: the page matches each frame it shows to its report exactly with it.
    out_ts: int | None = None
    # Why this frame went out unswapped (the swap failed: a model the server runs); None.
    error: str | None = None


class SwappedTrack(VideoStreamTrack):
    """The video sent back: the latest incoming frame, swapped in the worker thread.

    Args:
        source: the browser's camera track (aiortc's remote track).
        processor: the session's :class:`FrameProcessor`.
        executor: the session's single-thread executor.
        on_frame: called on the event loop with each output frame's timings.
    """

    def __init__(
        self,
        source: MediaStreamTrack,
        processor: FrameProcessor,
        executor: ThreadPoolExecutor,
        on_frame: Callable[[FrameTiming], None] | None = None,
    ) -> None:
        super().__init__()
        self.source = source
        self.processor = processor
        self.executor = executor
        self.on_frame = on_frame
        self.frames_in = 0
        self.frames_out = 0
        self.dropped = 0
        self._latest: tuple[VideoFrame, float] | None = None
        self._ready = asyncio.Event()
        self._source_ended = False
        self._reader = asyncio.ensure_future(self._read())
        self.sender: Any = None  # set by the session once the track is added
        self._sent_pts: int | None = None  # pts of the frame handed to the sender last
        self._rtp_origin: int | None = None

    def _output_timestamp(self, pts: int) -> int | None:
        """The RTP timestamp ``pts`` will leave with, once the sender's origin is known.

        aiortc stamps frame ``n`` with a random origin + its pts (both at 1/90000) and
        only asks for frame ``n + 1`` after frame ``n`` is sent, so on entry to
        :meth:`recv` its last RTP timestamp belongs to the previous frame. Reads aiortc's
        private state (pinned 1.16); None when that is not there.
        """
        if self._rtp_origin is None and self._sent_pts is not None:
            last = getattr(self.sender, "_RTCRtpSender__rtp_timestamp", None)
            if isinstance(last, int) and last:
                self._rtp_origin = (last - self._sent_pts) % 2**32
        if self._rtp_origin is None:
            return None
        return (self._rtp_origin + pts) % 2**32

    async def _read(self) -> None:
        """Pull decoded frames as they come; keep only the newest (latest wins)."""
        try:
            while True:
                frame = await self.source.recv()
                if not isinstance(frame, VideoFrame):
                    continue
                self.frames_in += 1
                if self._latest is not None:
                    self.dropped += 1  # never taken: a newer frame replaces it
                self._latest = (frame, time.perf_counter())
                self._ready.set()
        except MediaStreamError:
            pass
        finally:
            self._source_ended = True
            self._ready.set()

    async def recv(self) -> VideoFrame:
        while self._latest is None:
            if self._source_ended or self.readyState != "live":
                raise MediaStreamError
            self._ready.clear()
            await self._ready.wait()
        frame, arrived = self._latest
        self._latest = None
        out_ts = self._output_timestamp(int(frame.pts or 0))
        taken = time.perf_counter()
        loop = asyncio.get_running_loop()
        out, faces = await loop.run_in_executor(self.executor, self.processor.process, frame)
        done = time.perf_counter()
        self.frames_out += 1
        if self.on_frame is not None:
            self.on_frame(
                FrameTiming(
                    ts=int(frame.pts or 0),
                    wait_ms=(taken - arrived) * 1000.0,
                    process_ms=(done - taken) * 1000.0,
                    faces=faces,
                    dropped=self.dropped,
                    out_ts=out_ts,
                    error=self.processor.error,
                )
            )
        self._sent_pts = int(out.pts or 0)
        return out

    def stop(self) -> None:
        super().stop()
        self._reader.cancel()
        self._ready.set()


# The multipart fields of a live source: the first photo leads.
SOURCE_FIELDS = ("source", *EXTRA_SOURCES)
_PHOTO = {"type": "string", "format": "binary"}
# The source endpoint reads its body itself; this describes it for OpenAPI.
_SOURCE_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            **{
                media: {"schema": {**_PHOTO, "description": "the source photo"}}
                for media in (
                    "image/png",
                    "image/jpeg",
                    "image/webp",
                    "image/bmp",
                    "image/tiff",
                    "image/avif",
                    "image/heic",
                )
            },
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["source"],
                    "properties": {
                        "source": {**_PHOTO, "description": "the source photo (it leads)"},
                        **{
                            field: {
                                **_PHOTO,
                                "description": "another photo of the same person (optional)",
                            }
                            for field in EXTRA_SOURCES
                        },
                    },
                }
            },
        },
    }
}


# --- sessions --------------------------------------------------------------------------------


@dataclass(eq=False)
class LiveSession:
    """One browser's live connection and everything it owns."""

    id: str
    owner: str | None
    pc: RTCPeerConnection
    processor: FrameProcessor
    executor: ThreadPoolExecutor
    fusion: float
    gaze: str = SwapOptions.gaze
    mask_hands: bool = SwapOptions.mask_hands
    created_at: float = field(default_factory=time.monotonic)
    track: SwappedTrack | None = None
    channel: RTCDataChannel | None = None
    source_model: Any = None  # the prepared source (a Swapper built at fusion 1)
    source_notes: tuple[str, ...] = ()  # what its photos show (see SessionOut.notes)
    control_lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False

    def send_stats(self, message: dict[str, Any]) -> None:
        channel = self.channel
        if channel is not None and channel.readyState == "open":
            channel.send(json.dumps(message))

    def on_frame(self, timing: FrameTiming) -> None:
        self.send_stats({"type": "frame", **timing.__dict__})

    def update(self, **changes: Any) -> None:
        """Set some of ``source_model``, ``fusion``, ``gaze`` and ``mask_hands``, and give
        the frame processor the prepared source with this look (blocking on the control
        lock: run it in the thread pool)."""
        with self.control_lock:
            for name, value in changes.items():
                setattr(self, name, value)
            prepared = self.source_model
            if prepared is None:
                return
            look = {
                name: value
                for name, value in (
                    ("fusion", self.fusion),
                    ("gaze", self.gaze),
                    ("mask_hands", self.mask_hands),
                )
                if getattr(prepared.options, name) != value
            }
            self.processor.swapper = prepared.with_options(**look) if look else prepared
            self.processor.error = None  # a new swapper: its own frames will say


def _free_processor(session: LiveSession) -> None:
    """Wait for the session's worker to finish its frame, then free its processor."""
    session.executor.shutdown(wait=True)
    session.processor.close()


class LiveSessions:
    """The live sessions of one application, their limits and shared helpers.

    Args:
        analyser_factory: builds each session's analyser.
        source_analyser_factory: builds the analyser of source photos (one, shared).
        max_sessions: sessions at once; more are refused with 503.
        max_sessions_per_key: sessions of one API key at once; more are refused with
            429, so one key's offers that never connect cannot take every session.
        connect_timeout_s: a session that is not connected by then is closed.
        max_pixels: largest source image (width * height).
    """

    def __init__(
        self,
        *,
        analyser_factory: Callable[[], FaceAnalyser] = default_analyser,
        source_analyser_factory: Callable[[], FaceAnalyser] = default_source_analyser,
        max_sessions: int = 4,
        max_sessions_per_key: int = 2,
        connect_timeout_s: float = 30.0,
        max_pixels: int = DEFAULT_MAX_PIXELS,
    ) -> None:
        self.analyser_factory = analyser_factory
        self.source_analyser_factory = source_analyser_factory
        self.max_sessions = max_sessions
        self.max_sessions_per_key = max_sessions_per_key
        self.connect_timeout_s = connect_timeout_s
        self.max_pixels = max_pixels
        self.sessions: dict[str, LiveSession] = {}
        # Source images are analysed by one shared analyser, one at a time, in the thread
        # pool: a session's own analyser stays busy with frames.
        self._source_analyser: FaceAnalyser | None = None
        self._source_lock = threading.Lock()
        # The swap engine of the sources: the embedded one, unless the service sets
        # its own (shared with the jobs').
        self.swap_engine = SwapEngine()

    def check_gaze(self, gaze: str) -> None:
        """Refuse a gaze other than the default when the engine does not use it."""
        engine = self.swap_engine
        if engine.settings.neural and gaze != SwapOptions.gaze:
            raise ServiceError(
                422,
                "bad_option",
                f"gaze is the mesh engine's option, not used by this server's engine "
                f"({engine.name})",
            )

    def get(self, session_id: str, owner: str | None) -> LiveSession:
        session = self.sessions.get(session_id)
        if session is None or session.closed or session.owner != owner:
            raise ServiceError(404, "not_found", "no such live session")
        return session

    async def close(self, session: LiveSession) -> None:
        if session.closed:
            return
        session.closed = True
        self.sessions.pop(session.id, None)
        if session.track is not None:
            session.track.stop()
        await session.pc.close()
        # A frame being swapped finishes in its thread; queued work is dropped; then
        # the processor's hand tracker, if any, is freed (not under a frame's feet).
        session.executor.shutdown(wait=False, cancel_futures=True)
        threading.Thread(
            target=_free_processor, args=(session,), name="faceweave-live-free", daemon=True
        ).start()
        logger.info("live session %s closed", session.id[:8])

    async def close_all(self) -> None:
        for session in list(self.sessions.values()):
            await self.close(session)

    def prepare_source(
        self, photos: bytes | Path | Sequence[bytes | Path], notes: list[str] | None = None
    ) -> AnySwapper:
        """Decode and check the source photos, find their faces and prepare them as one
        source (several photos of one person are merged, the first leading; of several
        faces in one photo, the largest). Blocking: run it in the thread pool, not the
        loop. ``notes``, when given, gets a line for each photo with more than one
        face (as a job's notes have).

        Raises:
            NoFaceError: a photo shows no face.
            InputError, ImageTooLargeError: a photo cannot be read or is too large.
        """
        items = [photos] if isinstance(photos, bytes | Path) else list(photos)
        faces = []
        for number, item in enumerate(items, start=1):
            name = "the source image" if len(items) == 1 else f"source photo {number}"
            with tempfile.TemporaryDirectory(prefix="faceweave-live-") as tmp:
                path = item if isinstance(item, Path) else Path(tmp) / "source"
                if not isinstance(item, Path):
                    path.write_bytes(item)
                try:
                    image = read_image(path, max_pixels=self.max_pixels)
                except InputError as exc:  # named as the client knows it, not by our path
                    raise type(exc)(str(exc).replace(str(path), name)) from exc
            with self._source_lock:
                if self._source_analyser is None:
                    self._source_analyser = self.source_analyser_factory()
                found = self._source_analyser.get_faces(image)
            if not found:
                raise NoFaceError(f"no face found in {name}")
            if len(found) > 1 and notes is not None:
                notes.append(f"{name} shows more than one face; the largest is used")
            faces.append(found[0])  # the analyser lists the largest face first
        return self.swap_engine.swapper(faces, SwapOptions(fusion=1.0))


# --- request and response bodies -------------------------------------------------------------

GAZE_PATTERN = "^(" + "|".join(GAZE_MODES) + ")$"
GAZE_HELP = "where the swapped eyes look: target (the camera face's) or source (the photo's)"
HANDS_HELP = (
    "keep the camera face's hands in front of the swapped face (a chin on a fist, "
    "fingers at the mouth): MediaPipe's hand landmarker follows them, 11-25 ms a frame more"
)


class Offer(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not ignored

    sdp: str = Field(max_length=100_000, description="the browser's SDP offer")
    type: str = Field(default="offer", pattern="^offer$")
    fusion: float = Field(default=1.0, ge=0.0, le=1.0, allow_inf_nan=False)
    gaze: str = Field(default=SwapOptions.gaze, pattern=GAZE_PATTERN, description=GAZE_HELP)
    mask_hands: bool = Field(default=SwapOptions.mask_hands, description=HANDS_HELP)


class Answer(BaseModel):
    session: str = Field(description="id for the session's other endpoints")
    sdp: str
    type: str = "answer"


class FusionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not ignored

    fusion: float = Field(
        ge=0.0, le=1.0, allow_inf_nan=False, description="0 keeps the camera, 1 is a full swap"
    )


class GazeIn(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not ignored

    gaze: str = Field(pattern=GAZE_PATTERN, description=GAZE_HELP)


class HandsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not ignored

    mask_hands: bool = Field(description=HANDS_HELP)


class SessionOut(BaseModel):
    session: str
    fusion: float
    gaze: str = Field(default=SwapOptions.gaze, description=GAZE_HELP)
    mask_hands: bool = Field(default=SwapOptions.mask_hands, description=HANDS_HELP)
    source: bool = Field(description="a source face is set")
    notes: list[str] = Field(
        default_factory=list,
        description="what the source photos show in the swap (several faces, turned, "
        "small, glasses, eyes closed), one line each, as a job's notes",
    )


# --- the router ------------------------------------------------------------------------------


async def _no_auth() -> None:
    return None


def _session_out(session: LiveSession) -> SessionOut:
    return SessionOut(
        session=session.id,
        fusion=session.fusion,
        gaze=session.gaze,
        mask_hands=session.mask_hands,
        source=session.source_model is not None,
        notes=list(session.source_notes),
    )


def _owner_of(key: object) -> str | None:
    if key is None:
        return None
    return str(getattr(key, "id", key))


# A session's routes: its key (401), the session (404), the body (422), the rate (429).
_SESSION_ERRORS = error_responses(401, 404, 422, 429)


def create_live_router(
    *,
    auth: Callable[..., Any] | None = None,
    sessions: LiveSessions | None = None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    max_source_bytes: int = 20 * MIB,
    max_sessions: int = 4,
) -> APIRouter:
    """The ``/live`` page and the ``/v1/live`` endpoints.

    Args:
        auth: a FastAPI dependency returning the caller's key (the service's
            ``require_key``); its ``id`` owns the session. None: no authentication.
        sessions: the session registry (built from the other arguments if None).
        max_pixels: largest source image.
        max_source_bytes: largest source upload.
        max_sessions: live sessions at once.

    Returns:
        An :class:`~fastapi.APIRouter`; its lifespan closes every session on shutdown.
    """
    live = sessions or LiveSessions(max_pixels=max_pixels, max_sessions=max_sessions)
    # A default, not an Annotated alias: this module uses postponed annotations, and
    # FastAPI resolves those in module globals, where a local alias does not exist.
    owner_dep: Any = Depends(auth or _no_auth)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await live.close_all()

    router = APIRouter(lifespan=lifespan)
    router.live_sessions = live  # type: ignore[attr-defined]  # for tests and wiring

    @router.get("/live", include_in_schema=False)
    def live_page() -> FileResponse:
        return FileResponse(STATIC_DIR / "live.html", media_type="text/html")

    @router.post(
        "/v1/live/offer",
        response_model=Answer,
        responses=error_responses(401, 422, 429, 503),
        tags=["live"],
    )
    async def offer(body: Offer, key: Any = owner_dep) -> Answer:
        """Start a live session: send an SDP offer with one video track, get the answer.

        Open a data channel named ``stats`` for latency messages. The camera comes back
        unchanged until a source image is set.
        """
        owner = _owner_of(key)
        own = sum(1 for s in live.sessions.values() if s.owner == owner and not s.closed)
        if owner is not None and own >= live.max_sessions_per_key:
            raise ServiceError(
                429,
                "too_many_sessions",
                f"this key has {own} live sessions open (at most {live.max_sessions_per_key});"
                " close one first",
                headers={"Retry-After": str(BUSY_RETRY_S)},
            )
        live.check_gaze(body.gaze)
        if len(live.sessions) >= live.max_sessions:
            raise ServiceError(
                503,
                "busy",
                "too many live sessions; try again later",
                headers={"Retry-After": str(BUSY_RETRY_S)},
            )
        session = LiveSession(
            id=secrets.token_hex(16),
            owner=owner,
            pc=RTCPeerConnection(RTCConfiguration(iceServers=[])),  # loopback/LAN: no STUN
            processor=FrameProcessor(live.analyser_factory),
            executor=ThreadPoolExecutor(max_workers=1, thread_name_prefix="faceweave-live"),
            fusion=body.fusion,
            gaze=body.gaze,
            mask_hands=body.mask_hands,
        )
        live.sessions[session.id] = session
        session.executor.submit(session.processor.warm_up)
        pc = session.pc

        @pc.on("track")
        def on_track(track: MediaStreamTrack) -> None:
            if track.kind == "video" and session.track is None:
                for transceiver in pc.getTransceivers():
                    if transceiver.receiver.track is track:
                        use_marker_jitter_buffer(transceiver.receiver)
                session.track = SwappedTrack(
                    track, session.processor, session.executor, on_frame=session.on_frame
                )
                session.track.sender = pc.addTrack(session.track)

        @pc.on("datachannel")
        def on_datachannel(channel: RTCDataChannel) -> None:
            if channel.label != STATS_CHANNEL:
                return
            session.channel = channel

            @channel.on("message")
            def on_message(message: object) -> None:
                try:
                    data = json.loads(message) if isinstance(message, str) else {}
                except ValueError:
                    return
                if isinstance(data, dict) and data.get("type") == "ping":
                    track = session.track
                    channel.send(
                        json.dumps(
                            {
                                "type": "pong",
                                "id": data.get("id"),
                                "t": data.get("t"),
                                "frames_in": track.frames_in if track else 0,
                                "frames_out": track.frames_out if track else 0,
                                "dropped": track.dropped if track else 0,
                            }
                        )
                    )

        @pc.on("connectionstatechange")
        async def on_state() -> None:
            if pc.connectionState in ("failed", "closed"):
                await live.close(session)

        def check_connected() -> None:
            if not session.closed and pc.connectionState != "connected":
                asyncio.ensure_future(live.close(session))

        asyncio.get_running_loop().call_later(live.connect_timeout_s, check_connected)
        try:
            await pc.setRemoteDescription(RTCSessionDescription(sdp=body.sdp, type="offer"))
            if session.track is None:
                raise ServiceError(422, "bad_offer", "the offer has no video track")
            await pc.setLocalDescription(await pc.createAnswer())
        except ServiceError:
            await live.close(session)
            raise
        # aiortc's SDP parser and negotiation: a malformed line can fail one of its
        # asserts (a connection line "c=6`/" did: a server error), an index or a key.
        except (ValueError, TypeError, AssertionError, IndexError, KeyError) as exc:
            await live.close(session)
            reason = str(exc) or "its SDP does not parse"
            raise ServiceError(422, "bad_offer", f"cannot use this offer: {reason}") from exc
        logger.info("live session %s started", session.id[:8])
        return Answer(session=session.id, sdp=pc.localDescription.sdp)

    @router.post(
        "/v1/live/{session_id}/source",
        response_model=SessionOut,
        responses=error_responses(400, 401, 404, 413, 415, 422, 429),
        tags=["live"],
        openapi_extra=_SOURCE_BODY,
    )
    async def set_source(session_id: str, request: Request, key: Any = owner_dep) -> SessionOut:
        """Set the source face: the request body is the image (PNG, JPEG, WebP, BMP, TIFF,
        AVIF, HEIC).

        Several photos of the same person go as ``multipart/form-data`` files named
        ``source``, ``source_2`` and ``source_3``, as for jobs: they are merged into one
        source, each part of the face taken from the photo that showed it best.
        """
        content_type = request.headers.get("content-type", "")
        declared = request.headers.get("content-length", "")
        too_large = ServiceError(
            413,
            "upload_too_large",
            f"the source image is larger than the limit of {max_source_bytes} bytes",
        )
        if not content_type.startswith("multipart/form-data") and (
            declared.isdigit() and int(declared) > max_source_bytes
        ):  # refused before a byte of it is read
            raise too_large
        session = live.get(session_id, _owner_of(key))
        notes: list[str] = []
        if content_type.startswith("multipart/form-data"):
            with tempfile.TemporaryDirectory(prefix="faceweave-live-") as tmp:
                upload = await receive_upload(
                    request, Path(tmp), file_fields=SOURCE_FIELDS, max_file_bytes=max_source_bytes
                )
                if "source" not in upload.files:
                    raise ServiceError(422, "missing_file", "send the source image as 'source'")
                if upload.fields:
                    raise ServiceError(
                        422,
                        "bad_field",
                        f"unexpected field {next(iter(upload.fields))[:40]!r}: only the source "
                        "photos go here (fusion and gaze have their own endpoints)",
                    )
                for received in upload.files.values():
                    check_media(received, ("image",))
                paths = [upload.files[f].path for f in SOURCE_FIELDS if f in upload.files]
                prepared = await run_in_threadpool(live.prepare_source, paths, notes)
        else:
            data = bytearray()
            async for chunk in request.stream():
                data += chunk
                if len(data) > max_source_bytes:
                    raise too_large
            if not data:
                raise ServiceError(
                    422, "empty_file", "the request body is empty: send the source image in it"
                )
            prepared = await run_in_threadpool(live.prepare_source, bytes(data), notes)

        source_notes = (*notes, *swapper_advice(prepared))
        await run_in_threadpool(session.update, source_model=prepared, source_notes=source_notes)
        return _session_out(session)

    @router.post(
        "/v1/live/{session_id}/fusion",
        response_model=SessionOut,
        responses=_SESSION_ERRORS,
        tags=["live"],
    )
    async def set_fusion(session_id: str, body: FusionIn, key: Any = owner_dep) -> SessionOut:
        """Change the fusion degree while the session runs."""
        session = live.get(session_id, _owner_of(key))
        await run_in_threadpool(session.update, fusion=body.fusion)
        return _session_out(session)

    @router.post(
        "/v1/live/{session_id}/gaze",
        response_model=SessionOut,
        responses=_SESSION_ERRORS,
        tags=["live"],
    )
    async def set_gaze(session_id: str, body: GazeIn, key: Any = owner_dep) -> SessionOut:
        """Choose where the swapped eyes look while the session runs: ``target`` (they
        follow the camera face's eyes) or ``source`` (as in the source photo: one that
        looks into the lens keeps eye contact)."""
        session = live.get(session_id, _owner_of(key))
        live.check_gaze(body.gaze)
        await run_in_threadpool(session.update, gaze=body.gaze)
        return _session_out(session)

    @router.post(
        "/v1/live/{session_id}/hands",
        response_model=SessionOut,
        responses=_SESSION_ERRORS,
        tags=["live"],
    )
    async def set_hands(session_id: str, body: HandsIn, key: Any = owner_dep) -> SessionOut:
        """Keep your hands in front of the swapped face (a chin on a fist, fingers at the
        mouth) or not, while the session runs: MediaPipe's hand landmarker follows them,
        at 11-25 ms a frame more."""
        session = live.get(session_id, _owner_of(key))
        await run_in_threadpool(session.update, mask_hands=body.mask_hands)
        return _session_out(session)

    @router.delete(
        "/v1/live/{session_id}", status_code=204, responses=_SESSION_ERRORS, tags=["live"]
    )
    async def close_session(session_id: str, key: Any = owner_dep) -> Response:
        """End the session and free its resources."""
        await live.close(live.get(session_id, _owner_of(key)))
        return Response(status_code=204)

    return router
