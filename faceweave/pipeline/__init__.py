"""Frames in, frames out: threaded stages with bounded queues, face tracking, smoothing,
and the two jobs built on them: a video file (:func:`swap_video`) and a live session
(:func:`run_live`)."""

from faceweave.pipeline.live import LiveControls, LiveStats, run_live
from faceweave.pipeline.smoothing import OneEuroFilter
from faceweave.pipeline.stages import (
    Packet,
    Pipeline,
    PipelineStats,
    Stage,
    Timing,
    packets_from_frames,
)
from faceweave.pipeline.tracking import FaceTracker, TrackedFace, TrackerCounters, TrackingAnalyser
from faceweave.pipeline.video_job import FaceRouter, SwapTarget, VideoJobStats, swap_video

__all__ = [
    "FaceRouter",
    "FaceTracker",
    "LiveControls",
    "LiveStats",
    "OneEuroFilter",
    "Packet",
    "Pipeline",
    "PipelineStats",
    "Stage",
    "SwapTarget",
    "Timing",
    "TrackedFace",
    "TrackerCounters",
    "TrackingAnalyser",
    "VideoJobStats",
    "packets_from_frames",
    "run_live",
    "swap_video",
]
