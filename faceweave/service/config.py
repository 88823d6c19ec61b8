"""Every setting of a running service, in one frozen dataclass.

The command line (:mod:`faceweave.apps.service_cli`) and tests build a
:class:`ServiceConfig`; nothing else in the service reads settings from the
environment or from module globals.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from faceweave.errors import UsageError
from faceweave.io.image import DEFAULT_MAX_PIXELS
from faceweave.processors.engines import EngineSettings
from faceweave.processors.frame_enhancer import FRAME_ENHANCER_BLEND, FrameEnhancer
from faceweave.processors.neural import checked_enhancer_number

__all__ = ["ServiceConfig", "default_workers", "max_workers"]

MIB = 1024 * 1024


def default_workers() -> int:
    """Half the CPU cores, at least 1 and at most 4: the rest serve requests and decode."""
    return max(1, min(4, (os.cpu_count() or 2) // 2))


def max_workers() -> int:
    """The most worker threads taken: twice the CPU cores, at least 4. A job keeps a
    core busy, so more only queue inside the process, each with its own analyser's
    memory (99 workers on 2 cores took 10.8 GB)."""
    return max(4, 2 * (os.cpu_count() or 2))


@dataclass(frozen=True)
class ServiceConfig:
    """Settings of one service instance.

    Attributes:
        data_dir: SQLite database (``faceweave.db``), the pepper for key hashes
            (``pepper.key``) and job files (``jobs/<id>/``) live here.
        workers: worker threads; each loads its own models at start-up.
        max_upload_bytes: largest single uploaded file; the upload is aborted
            with 413 as soon as it is exceeded.
        max_pixels: largest image (width * height), checked on the header.
        max_video_seconds: longest video target.
        retention_hours: results and inputs of finished jobs are deleted this long
            after the job finished (0: kept until deleted).
        sweep_interval_s: how often the retention sweep runs.
        rate_per_s: per-key token-bucket refill rate (requests per second).
        rate_burst: per-key bucket size (requests allowed at once).
        max_active_jobs_per_key: queued plus running jobs one key may have.
        preview_max_side: previews are computed on a frame scaled to this side.
        poll_interval_s: how often an idle worker looks for jobs queued by
            another process (jobs queued here wake it at once).
        video_enabled: accept video targets when the video pipeline is installed.
        preview_enabled: load a preview engine and serve ``POST /v1/preview``.
        require_provenance: refuse to start when :mod:`faceweave.provenance` is
            missing (outputs must be marked); off only for development.
        engine: the swap engine every job, preview and live session uses: the
            embedded one by default, or ONNX models the operator brings (the neural
            engine, a face enhancer); they load once, shared by the workers.
        frame_enhancer_model: an ONNX super-resolution model the operator brings
            (Real-ESRGAN's signature): every job's result is upscaled by it, unless
            the job asks ``upscale=false``; previews and live sessions are not. None:
            results keep their target's size.
        frame_enhancer_blend: how much of that model's frame is used, 0..1 (the rest:
            the frame resized by Lanczos).
    """

    data_dir: Path
    workers: int = field(default_factory=default_workers)
    max_upload_bytes: int = 200 * MIB
    max_pixels: int = DEFAULT_MAX_PIXELS
    max_video_seconds: float = 120.0
    retention_hours: float = 24.0
    sweep_interval_s: float = 60.0
    rate_per_s: float = 10.0
    rate_burst: int = 100
    max_active_jobs_per_key: int = 100
    preview_max_side: int = 1024
    poll_interval_s: float = 1.0
    video_enabled: bool = True
    preview_enabled: bool = True
    require_provenance: bool = True
    engine: EngineSettings = field(default_factory=EngineSettings)
    frame_enhancer_model: Path | None = None
    frame_enhancer_blend: float = FRAME_ENHANCER_BLEND

    def load_frame_enhancer(self) -> FrameEnhancer | None:
        """The frame enhancer (loaded: its file and signature checked; the results it
        makes are held to ``max_pixels``), or None without one."""
        if self.frame_enhancer_model is None:
            return None
        return FrameEnhancer(
            self.frame_enhancer_model,
            blend=self.frame_enhancer_blend,
            execution_provider=self.engine.execution_provider,
            max_megapixels=self.max_pixels / 1e6,
        )

    def validated(self) -> ServiceConfig:
        """Return ``self`` if every setting is usable; raise :class:`UsageError` otherwise."""
        if not 0 <= self.workers <= max_workers():
            raise UsageError(
                f"workers must be from 0 to {max_workers()} (twice this machine's cores, at "
                f"least 4), got {self.workers}"
            )
        if self.max_upload_bytes < 1:
            raise UsageError(f"max upload size must be positive, got {self.max_upload_bytes}")
        if self.max_pixels < 64:
            raise UsageError(f"max pixels must be at least 64, got {self.max_pixels}")
        if not self.max_video_seconds > 0:
            raise UsageError(f"max video seconds must be positive, got {self.max_video_seconds}")
        if not self.retention_hours >= 0:
            raise UsageError(f"retention hours must be 0 or more, got {self.retention_hours}")
        if not self.sweep_interval_s > 0:
            raise UsageError(f"sweep interval must be positive, got {self.sweep_interval_s}")
        if not self.rate_per_s > 0 or self.rate_burst < 1:
            raise UsageError("rate limit needs a positive rate and a burst of at least 1")
        if self.max_active_jobs_per_key < 1:
            raise UsageError("max active jobs per key must be at least 1")
        if self.preview_max_side < 64:
            raise UsageError("preview max side must be at least 64")
        self.engine.validated()
        checked_enhancer_number("blend", self.frame_enhancer_blend, 1.0, kind="frame enhancer")
        return self

    @property
    def db_path(self) -> Path:
        return self.data_dir / "faceweave.db"

    @property
    def jobs_dir(self) -> Path:
        return self.data_dir / "jobs"

    @property
    def pepper_path(self) -> Path:
        return self.data_dir / "pepper.key"
