"""Synthetic hands for the tests: an upright open hand's 21 landmarks (MediaPipe's
order), and one laid over a face's cheek, as a hand finder would report it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from faceweave.analysis.hands import Hand
from faceweave.types import Face

# The mesh's points round the image-left cheek.
CHEEK = [50, 101, 118, 123, 147, 187, 205]


def open_hand(at: tuple[float, float] = (60.0, 100.0), size: float = 40.0) -> np.ndarray:
    """(21, 2) float32: an upright open hand, the wrist at ``at``, the palm ``size`` px
    long, the fingers fanned upwards, the thumb out to the image's left."""
    x, y = at
    points = [(x, y)]
    # Thumb: out to the left and up.
    points += [(x - size * (0.3 + 0.2 * k), y - size * (0.2 + 0.25 * k)) for k in range(4)]
    # The four fingers: roots across the palm's top, each joint further up.
    for finger, dx in enumerate((-0.35, -0.1, 0.15, 0.4)):
        root = (x + size * dx, y - size * (1.0 if finger == 1 else 0.95))
        points += [(root[0] + size * dx * 0.15 * k, root[1] - size * 0.32 * k) for k in range(4)]
    return np.array(points, np.float32)


def hand_on_cheek(face: Face) -> Hand:
    """An open hand whose fingers lie over the face's image-left cheek: the wrist below
    the jaw, the palm 0.7 of the eyes' distance long."""
    points = face.landmarks_478[:, :2]
    cheek = points[CHEEK].mean(0)
    size = float(np.hypot(*(points[263] - points[33]))) * 0.7
    wrist = cheek + np.array([0.0, 1.4 * size])
    return Hand(open_hand((float(wrist[0]), float(wrist[1])), size), 0.9, "left")


class FakeHands:
    """A stand-in for MediaPipeHands: reports ``report(frame, boxes)`` (no hand by
    default), recording how it was made, how often it was asked and whether it was
    closed; with ``fail`` any look is an error (where no hand must be looked for)."""

    def __init__(
        self,
        report: Callable[[np.ndarray, list[Any]], list[Hand]] | None = None,
        *,
        fail: bool = False,
        **kwargs: Any,
    ) -> None:
        self.report = report or (lambda frame, boxes: [])
        self.fail = fail
        self.kwargs = kwargs
        self.calls = 0
        self.closed = False

    def find(self, frame: np.ndarray, boxes: Sequence[Any]) -> list[Hand]:
        if self.fail:
            raise AssertionError("no hands are looked for here")
        self.calls += 1
        return list(self.report(frame, list(boxes)))

    def track(self, frame: np.ndarray) -> list[Hand]:
        return self.find(frame, [(0.0, 0.0, float(frame.shape[1]), float(frame.shape[0]))])

    def close(self) -> None:
        self.closed = True

    def record(self) -> dict[str, Any]:
        """How it was made, how often asked, whether closed."""
        return {"kwargs": self.kwargs, "calls": self.calls, "closed": self.closed}


def fake_hands_class(
    made: list[FakeHands], report: Callable[[np.ndarray, list[Any]], list[Hand]] | None = None
) -> Callable[..., FakeHands]:
    """What to put in MediaPipeHands' place: each finder it makes (a FakeHands reporting
    ``report``) is appended to ``made``."""

    def make(**kwargs: Any) -> FakeHands:
        made.append(FakeHands(report, **kwargs))
        return made[-1]

    return make
