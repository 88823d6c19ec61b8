"""The FastAPI application: lifespan, routes, JSON errors and the web page.

Thin by design: models load once in the lifespan (one engine per worker thread
plus one for previews); handlers check inputs, write rows and hand work to the
worker pool. Nothing heavy runs on the event loop: database calls run in
FastAPI's thread pool (plain ``def`` handlers and dependencies), uploads are
written to disk from a worker thread, image checks and previews run in
``run_in_threadpool``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import secrets
import shutil
import sqlite3
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import MalformedRangeHeader, RangeNotSatisfiable
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import faceweave
from faceweave.analysis.selection import ORDERS, SELECTORS
from faceweave.errors import FaceweaveError, UsageError
from faceweave.processors.engines import SwapEngine
from faceweave.processors.frame_enhancer import FrameEnhancer
from faceweave.processors.swap import BLEND_MODES, COLOR_MODES, GAZE_MODES, SwapOptions
from faceweave.runtime import release_heap
from faceweave.service import audit
from faceweave.service.auth import ApiKey, RateLimiter, authenticate, load_pepper
from faceweave.service.checks import (
    IMAGE_TYPES,
    VIDEO_TYPES,
    MediaType,
    ReceivedFile,
    Upload,
    check_image,
    check_media,
    check_video,
    check_video_range,
    receive_upload,
)
from faceweave.service.config import ServiceConfig
from faceweave.service.db import Database
from faceweave.service.errors import (
    ENGINE_ERROR_MESSAGE,
    ErrorBody,
    ServiceError,
    disk_full,
    error_responses,
    http_status_of,
    storage_full,
)
from faceweave.service.instances import InstanceLock
from faceweave.service.jobs import (
    EXTRA_SOURCES,
    OUTPUT_FORMATS,
    ROLES,
    VISIBLE_STATES,
    InputFile,
    Job,
    JobOptions,
    JobStore,
    source_roles,
)
from faceweave.service.live import LiveSessions, create_live_router
from faceweave.service.worker import (
    Engine,
    Previewer,
    Sweeper,
    WorkerPool,
    provenance_available,
    video_supported,
)

__all__ = ["ServiceState", "create_app"]

logger = logging.getLogger("faceweave.service")

STATIC_DIR = Path(__file__).parent / "static"
FILE_FIELDS = ROLES
# Uploads checked at once (see ServiceState.door): decoding is CPU work, so more than
# the cores gain nothing, and each 64-megapixel image takes about half a gigabyte.
DOOR_CHECKS = max(1, min(4, os.cpu_count() or 1))
_MEDIA_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".webp": "image/webp",
    ".mp4": "video/mp4",
    ".mov": "video/quicktime",
    ".mkv": "video/x-matroska",
    ".webm": "video/webm",
    ".gif": "image/gif",
    ".apng": "image/apng",
}
# The types an input may have (its stored extension -> MIME type).
_INPUT_TYPES = {media.ext: media.mime for media in (*IMAGE_TYPES.values(), *VIDEO_TYPES.values())}


# --- state built by the lifespan -----------------------------------------------------------------


@dataclass
class ServiceState:
    """Everything the handlers use, built once at start-up."""

    config: ServiceConfig
    db: Database
    pepper: bytes
    store: JobStore
    pool: WorkerPool
    sweeper: Sweeper
    previewer: Previewer | None
    swap_engine: SwapEngine
    frame_enhancer: FrameEnhancer | None
    instance: InstanceLock
    limiter: RateLimiter
    video: bool
    started_at: float
    # Files checked at the door at once (each decoded whole: a 64-megapixel image
    # takes about half a gigabyte to check): the rest wait their turn.
    door: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(DOOR_CHECKS))

    @classmethod
    def start(
        cls,
        config: ServiceConfig,
        swap_engine: SwapEngine | None = None,
        frame_enhancer: FrameEnhancer | None = None,
    ) -> ServiceState:
        """Open the database, recover interrupted jobs, load models (``swap_engine``
        and ``frame_enhancer``: the config's loaded already), start workers."""
        config = config.validated()
        if config.require_provenance and not provenance_available():
            raise UsageError(
                "faceweave.provenance is not installed, so outputs cannot be marked; "
                "install it (or, for development only, allow unmarked outputs)"
            )
        # The engine's ONNX models (if any) load once, shared by workers and previews
        # (first: a model that fails leaves no lock or database open behind).
        if swap_engine is None:
            swap_engine = SwapEngine(config.engine)
        elif swap_engine.settings != config.engine:
            raise UsageError("the loaded swap engine is not the one the config names")
        if frame_enhancer is None:
            frame_enhancer = config.load_frame_enhancer()
        elif config.frame_enhancer_model is None:
            raise UsageError("a frame enhancer was loaded for a config that names none")
        config.data_dir.mkdir(parents=True, exist_ok=True)
        db = Database(config.db_path)
        try:  # (refused while its keys' pepper is missing: see load_pepper)
            pepper = load_pepper(config.pepper_path, db)
        except BaseException:
            db.close()
            raise
        # This server's mark on the data directory: another server on it leaves the
        # jobs this one runs alone, and takes them back only once it has stopped.
        instance = InstanceLock(config.data_dir / "instances")
        store = JobStore(db, config.jobs_dir, owner=instance.id, alive=instance.alive)
        requeued = store.requeue_interrupted()
        if requeued:
            logger.warning("requeued %d jobs interrupted by a crash", len(requeued))
        store.remove_orphan_dirs()
        previews = config.data_dir / "previews"
        _clear_previews(previews, instance)
        (previews / instance.id).mkdir(parents=True, exist_ok=True)
        instance.forget_dead()
        engines = [
            Engine(swap_engine, frame_enhancer=frame_enhancer) for _ in range(config.workers)
        ]
        previewer = (
            Previewer(
                Engine(swap_engine),
                max_side=config.preview_max_side,
                max_pixels=config.max_pixels,
            )
            if config.preview_enabled
            else None
        )
        pool = WorkerPool(
            store, engines, max_pixels=config.max_pixels, poll_interval_s=config.poll_interval_s
        )
        sweeper = Sweeper(
            store,
            retention_hours=config.retention_hours,
            interval_s=config.sweep_interval_s,
            on_requeued=lambda _: pool.notify(),
        )
        sweeper.sweep()
        pool.start()
        sweeper.start()
        return cls(
            config=config,
            db=db,
            pepper=pepper,
            store=store,
            pool=pool,
            sweeper=sweeper,
            previewer=previewer,
            swap_engine=swap_engine,
            frame_enhancer=frame_enhancer,
            instance=instance,
            limiter=RateLimiter(config.rate_per_s, config.rate_burst),
            video=config.video_enabled and video_supported(),
            started_at=time.time(),
        )

    def stop(self) -> None:
        self.sweeper.stop()
        self.pool.stop()
        self.db.close()
        shutil.rmtree(self.previews_dir, ignore_errors=True)
        self.instance.release()

    @property
    def previews_dir(self) -> Path:
        """Where this server's previews are worked out (one folder each, removed after)."""
        return self.config.data_dir / "previews" / self.instance.id


def _clear_previews(previews: Path, instance: InstanceLock) -> None:
    """Remove what previews left behind: the folders of servers that have stopped (each
    server works in its own: a running one's previews are its own), and loose entries
    from before there were such folders."""
    if not previews.is_dir():
        return
    for entry in previews.iterdir():
        if entry.is_dir() and instance.alive(entry.name):
            continue
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                entry.unlink()


def _state(request: Request) -> ServiceState:
    state: ServiceState = request.app.state.service
    return state


# --- response models -------------------------------------------------------------------------


class InputOut(BaseModel):
    name: str = Field(description="the uploaded file's name, for display only")
    type: str = Field(description="media type sniffed from the content")
    size: int
    sha256: str


class ResultOut(BaseModel):
    url: str
    media_type: str
    sha256: str


class JobOut(BaseModel):
    id: str
    state: str = Field(description="queued, running, done or failed")
    kind: str = Field(description="image or video")
    progress: float = Field(ge=0.0, le=1.0)
    error: ErrorBody | None = None
    options: dict[str, Any]
    inputs: dict[str, InputOut]
    result: ResultOut | None = None
    notes: list[str] = Field(
        default_factory=list,
        description="what the source photo shows in the result (turned, small, glasses, "
        "eyes closed), one line each; set when the job is done",
    )
    attempts: int
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None


class JobList(BaseModel):
    jobs: list[JobOut]


class Health(BaseModel):
    status: str
    version: str
    workers: int
    queued: int
    running: int
    video: bool
    provenance: bool
    engine: str = Field(
        description="the swap engine: mesh (embedded) or inswapper (ONNX models); the "
        "mesh engine's own options are refused by another"
    )
    enhancer: bool = Field(description="swapped faces are restored by a face enhancer")
    occluder: bool = Field(
        description="a face occluder keeps what covers a face (a hand, a microphone) the target's"
    )
    parser: bool = Field(
        default=False,
        description="a face parser swaps only mask_regions of a face; the rest (hair over it, "
        "a hat, the regions left out) stays the target's",
    )
    mask_regions: list[str] | None = Field(
        default=None, description="the regions a face parser swaps (null: no parser)"
    )
    mask_areas: list[str] = Field(
        default_factory=list,
        description="the parts of each face swapped, from its mesh (empty: the whole face)",
    )
    frame_enhancer_scale: int | None = Field(
        default=None,
        description="a job's result is upscaled this many times each way by the server's "
        "frame enhancer, unless it asks upscale=false (previews are not); null: none runs",
    )


def _iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).isoformat(timespec="milliseconds")


def _job_out(job: Job) -> JobOut:
    result = None
    if job.state == "done" and job.result_ext and job.result_sha256:
        result = ResultOut(
            url=f"/v1/jobs/{job.id}/result",
            media_type=_MEDIA_TYPES.get(job.result_ext, "application/octet-stream"),
            sha256=job.result_sha256,
        )
    error = (
        ErrorBody(code=job.error_code or "failed", message=job.error_message or "")
        if job.state == "failed"
        else None
    )
    return JobOut(
        id=job.id,
        state=job.state,
        kind=job.kind,
        progress=job.progress,
        error=error,
        options=job.options.__dict__,
        inputs={
            role: InputOut(
                name=item.name,
                type=_INPUT_TYPES.get(item.ext, "application/octet-stream"),
                size=item.size,
                sha256=item.sha256,
            )
            for role, item in job.inputs.items()
        },
        result=result,
        notes=list(job.notes),
        attempts=job.attempts,
        created_at=_iso(job.created_at) or "",
        started_at=_iso(job.started_at),
        finished_at=_iso(job.finished_at),
    )


# --- auth ------------------------------------------------------------------------------------

_bearer = HTTPBearer(auto_error=False, description="an API key from `faceweave keys create`")


def require_key(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> ApiKey:
    """The caller's API key; 401 without a valid one, 429 when over its rate limit.

    A plain ``def``: FastAPI runs it in the thread pool, off the event loop.
    """
    state = _state(request)
    challenge = {"WWW-Authenticate": "Bearer"}
    if credentials is None:
        raise ServiceError(
            401, "unauthorized", "send an API key: Authorization: Bearer <key>", headers=challenge
        )
    key = authenticate(state.db, state.pepper, credentials.credentials)
    if key is None:
        raise ServiceError(401, "unauthorized", "invalid or revoked API key", headers=challenge)
    wait = state.limiter.take(key.id)
    if wait > 0:
        raise ServiceError(
            429,
            "rate_limited",
            f"too many requests for this key; retry in {RateLimiter.retry_after(wait)} s",
            headers={"Retry-After": RateLimiter.retry_after(wait)},
        )
    return key


Key = Annotated[ApiKey, Depends(require_key)]


# --- the multipart body, described for OpenAPI (parsed by checks.receive_upload) -------------

_OPTION_SCHEMA: dict[str, Any] = {
    "fusion": {"type": "number", "minimum": 0, "maximum": 1},
    "color": {"type": "string", "enum": list(COLOR_MODES)},
    "blend": {"type": "string", "enum": list(BLEND_MODES)},
    "gaze": {"type": "string", "enum": list(GAZE_MODES)},
    "detail": {"type": "number", "minimum": 0, "maximum": 1},
    "light": {"type": "number", "minimum": 0, "maximum": 1},
    "creases": {"type": "number", "minimum": 0, "maximum": 1},
    "shape": {"type": "number", "minimum": 0, "maximum": 1},
    "face_selector": {"type": "string", "enum": list(SELECTORS)},
    "face_order": {"type": "string", "enum": list(ORDERS)},
    "max_faces": {"type": "integer", "minimum": 1, "maximum": 32},
    "reference_distance": {"type": "number", "minimum": 0, "maximum": 10},
    "mask_mouth": {"type": "boolean"},
    "mask_lips": {"type": "boolean"},
    "mask_eyes": {"type": "boolean"},
    "mask_glasses": {"type": "boolean"},
    "mask_hands": {"type": "boolean"},
    "mask_padding": {
        "type": "string",
        "description": "top right bottom left: 1, 2 or 4 fractions of the face given back "
        "to the target, as in CSS (e.g. '0 0 0.2 0' keeps a bearded chin)",
    },
    "feather": {"type": "number", "minimum": 0, "maximum": 0.5},
    "skip_no_face": {"type": "boolean"},
    "output_format": {"type": "string", "enum": list(OUTPUT_FORMATS)},
    "quality": {
        "type": "integer",
        "minimum": 1,
        "maximum": 100,
        "description": "JPEG and WebP quality (image targets)",
    },
    "keep_audio": {"type": "boolean", "description": "keep a video's sound (video targets)"},
    "trim_start": {
        "type": "number",
        "minimum": 0,
        "description": "swap a video from this second (video targets)",
    },
    "trim_end": {
        "type": "number",
        "minimum": 0,
        "description": "swap a video up to this second; 0: its end (video targets)",
    },
    "upscale": {
        "type": "boolean",
        "description": "upscale the result with the server's frame enhancer, where it runs "
        "one (/healthz: frame_enhancer_scale); false keeps the target's size",
    },
}
# Defaults as the jobs take them (JobOptions, whose look defaults are the engine's).
_JOB_DEFAULTS = JobOptions()
for _name, _spec in _OPTION_SCHEMA.items():
    _default = getattr(_JOB_DEFAULTS, _name)
    _spec["default"] = " ".join(f"{v:g}" for v in _default) if _name == "mask_padding" else _default

_FILE_SCHEMA = {"type": "string", "format": "binary"}
_UPLOAD_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["source", "target"],
                    "properties": {
                        "source": {**_FILE_SCHEMA, "description": "image with the source face"},
                        **{
                            role: {
                                **_FILE_SCHEMA,
                                "description": "another photo of the same person (optional): "
                                "each part of the face comes from the photo that shows it best",
                            }
                            for role in EXTRA_SOURCES
                        },
                        "target": {
                            **_FILE_SCHEMA,
                            "description": "image or video whose faces are replaced",
                        },
                        "reference": {
                            **_FILE_SCHEMA,
                            "description": "image of the person to replace "
                            "(face_selector=reference)",
                        },
                        **_OPTION_SCHEMA,
                    },
                }
            }
        },
    }
}
# Every route may answer 401 (its key), 429 (the rate limit) and 422 (its parameters).
_READ_ERRORS = error_responses(401, 404, 422, 429)
# (507: the server's disk is full.)
_UPLOAD_ERRORS = error_responses(400, 401, 413, 415, 422, 429, 507)


# --- upload handling shared by jobs and previews --------------------------------------------


@dataclass
class _Checked:
    options: JobOptions
    kind: str
    inputs: dict[str, InputFile]


async def _receive_and_check(
    state: ServiceState, request: Request, directory: Path, *, preview: bool = False
) -> _Checked:
    """Stream the upload into ``directory``, then check every file and option (a
    ``preview``'s result is not upscaled: its size is not held to the limit upscaled)."""
    config = state.config
    upload = await receive_upload(
        request, directory, file_fields=FILE_FIELDS, max_file_bytes=config.max_upload_bytes
    )
    options = JobOptions.from_form(upload.fields)
    engine = config.engine
    engine.check_options(
        SwapOptions.from_settings(options), engine=f"this server's engine ({engine.engine})"
    )
    for role in ("source", "target"):
        if role not in upload.files:
            raise ServiceError(422, "missing_file", f"the {role} file is missing")
    if options.face_selector == "reference" and "reference" not in upload.files:
        raise ServiceError(422, "missing_file", "face_selector=reference needs a reference image")
    if options.face_selector != "reference" and "reference" in upload.files:
        raise ServiceError(
            422, "bad_option", "a reference image is only used with face_selector=reference"
        )
    media: dict[str, MediaType] = {}
    for role, received in upload.files.items():
        allowed = ("image", "video") if role == "target" else ("image",)
        media[role] = check_media(received, allowed)
    kind = media["target"].kind
    if kind == "video" and not state.video:
        raise ServiceError(
            415, "video_not_supported", "video targets are not supported by this server yet"
        )
    wrong_kind = options.image_only if kind == "video" else options.video_only
    if wrong_kind:
        verb = "applies" if len(wrong_kind) == 1 else "apply"
        other = "image" if kind == "video" else "video"
        raise ServiceError(
            422, "bad_option", f"{' and '.join(wrong_kind)} {verb} to {other} targets only"
        )
    upscaler = None if preview or not options.upscale else state.frame_enhancer
    upscale = 1 if upscaler is None else upscaler.scale
    async with state.door:  # (as many checks at once as the cores can decode)
        inputs = await run_in_threadpool(_check_files, config, upload, media, options, upscale)
    return _Checked(options=options, kind=kind, inputs=inputs)


def _check_files(
    config: ServiceConfig,
    upload: Upload,
    media: dict[str, MediaType],
    options: JobOptions,
    upscale: int = 1,
) -> dict[str, InputFile]:
    """Each file checked; the target's result, ``upscale`` times larger each way (the
    server's frame enhancer), held to ``max_pixels`` too."""
    inputs: dict[str, InputFile] = {}
    for role, received in upload.files.items():
        path = _rename(received, media[role].ext)
        scale = upscale if role == "target" else 1
        if media[role].kind == "image":
            check_image(path, max_pixels=config.max_pixels, role=role, upscale=scale)
        else:
            duration = check_video(
                path,
                max_seconds=config.max_video_seconds,
                max_pixels=config.max_pixels,
                role=role,
                upscale=scale,
                trim_start=options.trim_start,
                trim_end=options.trim_end,
            )
            if options.trim_start >= duration:
                raise UsageError(
                    f"trim_start {options.trim_start:g} s is past the end of the {role} "
                    f"({duration:.2f} s long)"
                )
            if options.trim_start or options.trim_end:
                check_video_range(
                    path,
                    start=options.trim_start,
                    end=options.trim_end,
                    duration=duration,
                    role=role,
                )
        inputs[role] = InputFile(
            role=role,
            ext=media[role].ext,
            size=received.size,
            sha256=received.sha256,
            name=received.filename,
        )
    # (The decoders' buffers go back to the system: after a few large checks an idle
    # server had held gigabytes.)
    release_heap()
    return inputs


def _rename(received: ReceivedFile, ext: str) -> Path:
    final = received.path.with_name(f"{received.field}{ext}")
    received.path.rename(final)
    received.path = final
    return final


def _reject(state: ServiceState, key: ApiKey, error: FaceweaveError) -> None:
    status, code = http_status_of(error)
    with state.db.transaction() as conn:
        audit.record(conn, "job.rejected", key_id=key.id, detail={"status": status, "code": code})


# --- the application ---------------------------------------------------------------------------


def _allowed_methods(app: FastAPI, request: Request) -> list[str]:
    """The methods ``request``'s path is answered to (HEAD wherever GET is, see
    HeadAsGet)."""
    # (from the app's own root: inside a mount the request's scope is the mount's)
    root = request.scope.get("app_root_path", "")
    scope = {**request.scope, "method": "GET", "root_path": root, "path": request.url.path}
    methods: set[str] = set()
    for route in app.router.routes:
        match, _ = route.matches(scope)
        if match != Match.NONE:
            # (a mount of static files names no methods: it answers GET and HEAD)
            methods |= set(getattr(route, "methods", None) or {"GET", "HEAD"})
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


class HeadAsGet:
    """ASGI middleware: a HEAD request is answered as its GET is, without the body
    (FastAPI's routes answer GET only, so health checkers and link checkers that ask
    HEAD got 405). The request's scope carries ``SCOPE_KEY``: a HEAD of a result is
    not recorded as a download."""

    SCOPE_KEY = "faceweave.head"

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}  # more_body kept: streams still end
            await send(message)

        await self.app({**scope, "method": "GET", self.SCOPE_KEY: True}, receive, headers_only)


class ResultFile(FileResponse):
    """A result file whose ``Range`` errors are JSON like every other error (Starlette
    answers them in plain text: a 416 with an empty body, a 400 with a sentence)."""

    @classmethod
    def _parse_range_header(cls, http_range: str, file_size: int) -> list[tuple[int, int]]:
        try:
            return super()._parse_range_header(http_range, file_size)
        except RangeNotSatisfiable:
            raise ServiceError(
                416,
                "range_not_satisfiable",
                f"the range asked for is outside the result ({file_size} bytes)",
                headers={"Content-Range": f"bytes */{file_size}"},
            ) from None
        except MalformedRangeHeader:
            raise ServiceError(
                400, "bad_range", "malformed Range header; send bytes=START-END, START- or -LENGTH"
            ) from None


def _etag_matches(if_none_match: str | None, etag: str) -> bool:
    """Whether an ``If-None-Match`` header names ``etag`` (weakly, as RFC 9110 says
    for this header) or is ``*``."""
    if not if_none_match:
        return False
    tags = [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
    return "*" in tags or etag.removeprefix("W/") in tags


def create_app(
    config: ServiceConfig,
    *,
    swap_engine: SwapEngine | None = None,
    frame_enhancer: FrameEnhancer | None = None,
) -> FastAPI:
    """Build the application; models load and workers start in its lifespan.

    ``swap_engine`` and ``frame_enhancer``: the config's engine and frame enhancer
    with their models loaded already (``faceweave serve`` loads them first, so that an
    unusable model file is one line before the server starts); None loads them in
    the lifespan.

    Example:
        >>> app = create_app(ServiceConfig(data_dir=Path("faceweave-data")))  # doctest: +SKIP
        >>> uvicorn.run(app, host="127.0.0.1", port=8000)  # doctest: +SKIP
    """
    config = config.validated()
    live = LiveSessions(max_pixels=config.max_pixels)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state = await run_in_threadpool(ServiceState.start, config, swap_engine, frame_enhancer)
        app.state.service = state
        live.swap_engine = state.swap_engine  # live sessions swap with the jobs' engine
        try:
            yield
        finally:
            await run_in_threadpool(state.stop)

    app = FastAPI(
        title="faceweave",
        version=faceweave.__version__,
        description="Face swap jobs: upload a source face and a target image or video, "
        "poll the job, download the result. Every result carries a provenance mark.",
        lifespan=lifespan,
    )
    _install_error_handlers(app)
    app.add_middleware(HeadAsGet)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    # Live in the browser: WebRTC in, swapped frames back (the router's lifespan
    # closes its sessions at shutdown).
    app.include_router(
        create_live_router(
            auth=require_key,
            sessions=live,
            max_source_bytes=config.max_upload_bytes,
        )
    )

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html")

    @app.get("/healthz", response_model=Health, tags=["service"])
    def healthz(request: Request) -> Health:
        """Liveness and queue size; no key needed."""
        state = _state(request)
        parsing = state.swap_engine.settings.parser_model is not None
        return Health(
            status="ok",
            version=faceweave.__version__,
            workers=len(state.pool.engines),
            queued=state.store.count("queued"),
            running=state.store.count("running"),
            video=state.video,
            provenance=provenance_available(),
            engine=state.swap_engine.name,
            enhancer=state.swap_engine.enhancer is not None,
            occluder=state.swap_engine.settings.occluder_model is not None,
            parser=parsing,
            mask_regions=list(state.swap_engine.settings.mask_regions) if parsing else None,
            mask_areas=list(state.swap_engine.settings.mask_areas),
            frame_enhancer_scale=(
                None if state.frame_enhancer is None else state.frame_enhancer.scale
            ),
        )

    @app.post(
        "/v1/jobs",
        status_code=202,
        response_model=JobOut,
        responses=_UPLOAD_ERRORS,
        openapi_extra=_UPLOAD_BODY,
        tags=["jobs"],
    )
    async def create_job(request: Request, response: Response, key: Key) -> JobOut:
        """Queue a swap: multipart ``source`` and ``target`` files plus options."""
        state = _state(request)
        job_id = secrets.token_hex(16)
        directory = state.store.job_dir(job_id)
        await run_in_threadpool(directory.mkdir, parents=True)
        try:
            checked = await _receive_and_check(state, request, directory)
            job = await run_in_threadpool(
                state.store.create,
                job_id,
                key.id,
                checked.kind,
                checked.options,
                checked.inputs,
                max_active=state.config.max_active_jobs_per_key,
            )
        except BaseException as exc:
            await run_in_threadpool(shutil.rmtree, directory, True)
            if isinstance(exc, FaceweaveError):
                await run_in_threadpool(_reject, state, key, exc)
            raise
        state.pool.notify()
        response.headers["Location"] = f"/v1/jobs/{job.id}"
        return _job_out(job)

    @app.get(
        "/v1/jobs", response_model=JobList, responses=error_responses(401, 422, 429), tags=["jobs"]
    )
    def list_jobs(
        request: Request,
        key: Key,
        state: Annotated[str | None, Query(description="only jobs in this state")] = None,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
    ) -> JobList:
        """This key's jobs, newest first."""
        if state is not None and state not in VISIBLE_STATES:
            raise ServiceError(
                422, "bad_option", f"state must be one of {', '.join(VISIBLE_STATES)}"
            )
        jobs = _state(request).store.list(key.id, state=state, limit=limit)
        return JobList(jobs=[_job_out(job) for job in jobs])

    @app.get("/v1/jobs/{job_id}", response_model=JobOut, responses=_READ_ERRORS, tags=["jobs"])
    def get_job(request: Request, job_id: str, key: Key) -> JobOut:
        """A job's state, progress (0..1) and error."""
        return _job_out(_own_job(request, job_id, key))

    @app.get(
        "/v1/jobs/{job_id}/result",
        responses={
            **error_responses(400, 401, 404, 409, 416, 422, 429),
            200: {
                "content": {media_type: {} for media_type in _MEDIA_TYPES.values()},
                "description": "the result (206 with a Range)",
            },
            206: {"description": "the requested part of the result"},
            304: {"description": "not modified: If-None-Match holds the result's ETag"},
        },
        response_class=FileResponse,
        tags=["jobs"],
    )
    def get_result(request: Request, job_id: str, key: Key) -> Response:
        """Download the result of a finished job."""
        state = _state(request)
        job = _own_job(request, job_id, key)
        if job.state != "done" or job.result_ext is None:
            raise ServiceError(409, "not_done", f"the job is {job.state}, not done")
        path = state.store.result_path(job.id, job.result_ext)
        try:
            stat = path.stat()
        except FileNotFoundError:
            raise ServiceError(
                404, "not_found", "the result is gone (deleted or expired)"
            ) from None
        result = ResultFile(
            path,
            stat_result=stat,
            media_type=_MEDIA_TYPES.get(job.result_ext, "application/octet-stream"),
            filename=f"faceweave-{job.id}{job.result_ext}",
        )
        etag = result.headers["etag"]
        if _etag_matches(request.headers.get("if-none-match"), etag):
            return Response(status_code=304, headers={"ETag": etag})  # the client's copy is it
        if not request.scope.get(HeadAsGet.SCOPE_KEY):  # a HEAD downloads nothing
            state.store.record_download(job, key.id)
        return result

    @app.delete(
        "/v1/jobs/{job_id}",
        status_code=204,
        responses={**_READ_ERRORS, **error_responses(507)},
        tags=["jobs"],
    )
    def delete_job(request: Request, job_id: str, key: Key) -> Response:
        """Cancel the job if it is queued or running, and delete it and its files (the
        job is 404 from then on)."""
        if not _valid_id(job_id) or _state(request).store.delete(job_id, key.id) is None:
            raise _not_found()
        return Response(status_code=204)

    @app.post(
        "/v1/preview",
        responses={
            **_UPLOAD_ERRORS,
            **error_responses(404, 503),  # previews turned off; the previewer busy
            200: {"content": {"image/jpeg": {}}, "description": "the swapped frame"},
        },
        response_class=Response,
        openapi_extra=_UPLOAD_BODY,
        tags=["jobs"],
    )
    async def preview(request: Request, key: Key) -> Response:
        """Swap one frame now (an image target, or a video's first frame from its
        trim_start on); returns a JPEG."""
        state = _state(request)
        if state.previewer is None:
            raise ServiceError(404, "preview_disabled", "previews are turned off on this server")
        directory = state.previews_dir / secrets.token_hex(16)
        await run_in_threadpool(directory.mkdir, parents=True)
        try:
            checked = await _receive_and_check(state, request, directory, preview=True)
            previewer = state.previewer
            reference = (
                directory / f"reference{checked.inputs['reference'].ext}"
                if "reference" in checked.inputs
                else None
            )
            sources = [
                directory / f"{role}{checked.inputs[role].ext}"
                for role in source_roles(checked.inputs)
            ]
            jpeg = await run_in_threadpool(
                lambda: previewer.preview(
                    sources[0],
                    directory / f"target{checked.inputs['target'].ext}",
                    checked.kind,
                    checked.options,
                    reference_path=reference,
                    mark=f"preview-{key.id}",
                    extra_sources=sources[1:],
                )
            )
            await run_in_threadpool(_audit_preview, state, key, checked)
        finally:
            await run_in_threadpool(shutil.rmtree, directory, True)
        return Response(content=jpeg, media_type="image/jpeg")

    return app


def _audit_preview(state: ServiceState, key: ApiKey, checked: _Checked) -> None:
    with state.db.transaction() as conn:
        audit.record(
            conn,
            "preview",
            key_id=key.id,
            inputs_sha256={role: item.sha256 for role, item in checked.inputs.items()},
        )


def _valid_id(job_id: str) -> bool:
    return len(job_id) == 32 and all(ch in "0123456789abcdef" for ch in job_id)


def _not_found() -> ServiceError:
    return ServiceError(404, "not_found", "no such job")


def _own_job(request: Request, job_id: str, key: ApiKey) -> Job:
    """The job if ``key`` owns it; 404 otherwise (another key's job does not exist for you)."""
    job = _state(request).store.get(job_id, key.id) if _valid_id(job_id) else None
    if job is None:
        raise _not_found()
    return job


def _error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status, headers=headers
    )


def _install_error_handlers(app: FastAPI) -> None:
    def full(request: Request, exc: BaseException) -> JSONResponse:
        # The server's disk is full (an upload, a preview, the database): a passing
        # condition of the server's, answered 507 with Retry-After, not as a bug.
        logger.warning("%s %s: the disk is full (%s)", request.method, request.url.path, exc)
        error = storage_full()
        return _error_response(error.status, error.code, error.message, error.headers)

    @app.exception_handler(FaceweaveError)
    async def faceweave_error(request: Request, exc: FaceweaveError) -> JSONResponse:
        if disk_full(exc):
            return full(request, exc)
        status, code = http_status_of(exc)
        if status >= 500 and not isinstance(exc, ServiceError):
            logger.error("%s on %s: %s", code, request.url.path, " ".join(str(exc).split()))
            message = ENGINE_ERROR_MESSAGE if code == "engine_error" else "internal error"
            return _error_response(status, code, message)
        # A ServiceError's message is written for the client, a 503 "busy" too.
        headers = exc.headers if isinstance(exc, ServiceError) else None
        message = exc.message if isinstance(exc, ServiceError) else " ".join(str(exc).split())
        return _error_response(status, code, message, headers)

    @app.exception_handler(ClientDisconnect)
    async def client_gone(request: Request, exc: ClientDisconnect) -> JSONResponse:
        # The client hung up mid-upload: an everyday event, not the server's error. The
        # answer reaches no one; what was received is removed with the request's folder.
        logger.info("client hung up during %s %s", request.method, request.url.path)
        return _error_response(400, "client_disconnected", "the request ended early")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {404: "not_found", 405: "method_not_allowed"}
        code = codes.get(exc.status_code, "http_error")
        headers = dict(exc.headers) if exc.headers else None
        if exc.status_code == 405:
            # Every method the path takes (Starlette names the first route's alone:
            # PUT /v1/jobs had been told "Allow: POST", not GET).
            headers = {**(headers or {}), "Allow": ", ".join(_allowed_methods(app, request))}
        return _error_response(exc.status_code, code, str(exc.detail), headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(part) for part in first.get("loc", ()))
        message = f"{where}: {first.get('msg', 'invalid request')}"
        return _error_response(422, "bad_request", message)

    # Registered by class (not only as the catch-all below): Starlette passes the
    # catch-all's exceptions on after its answer, and the server's log showed each twice.
    @app.exception_handler(OSError)
    @app.exception_handler(sqlite3.Error)
    async def system_error(request: Request, exc: Exception) -> JSONResponse:
        if disk_full(exc):
            return full(request, exc)
        logger.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return _error_response(500, "internal", "internal error")

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        if disk_full(exc):
            return full(request, exc)
        logger.exception("unhandled error on %s %s", request.method, request.url.path)
        return _error_response(500, "internal", "internal error")
