"""Frames in, frames out: threaded stages with bounded queues, face tracking, smoothing."""

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

__all__ = [
    "FaceTracker",
    "OneEuroFilter",
    "Packet",
    "Pipeline",
    "PipelineStats",
    "Stage",
    "Timing",
    "TrackedFace",
    "TrackerCounters",
    "TrackingAnalyser",
    "packets_from_frames",
]
