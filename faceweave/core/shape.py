"""Identity shape without expression: which part of a source's geometry the output takes.

A face mesh mixes identity (eye spacing, nose, brow line, face proportions)
with expression (open mouth, blink, smile). Without a learned 3DMM basis we
separate them by *where* they live: the offset between source and target is
kept on rigid, identity-bearing vertices (nose, eye corners, brows), pinned to
zero on the face oval (the contour, and so the blend seam, stays the target's)
and on the lips (the mouth, the most expressive part, stays exactly where the
target's is: on the 132-pair subset of the quality benchmark this lowered the
landmark error vs the target and did not cost identity), and filled
harmonically (a Laplace solve over the mesh graph, precomputed once as a
matrix) everywhere else, which carries the eyelids along as whole parts
without copying their shapes.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from faceweave.core.facemodel import N_LANDMARKS, FaceModel

_EYE_CORNERS = (33, 133, 263, 362, 130, 359, 243, 463)


def mesh_laplacian(model: FaceModel) -> NDArray[np.float64]:
    """(478, 478) graph Laplacian of the mesh's edges, each iris tied to its eye's
    boundary ring (irises are not in the tessellation)."""
    n = N_LANDMARKS
    adj = np.zeros((n, n), np.float64)
    tris = model.triangles
    for a, b in ((0, 1), (1, 2), (2, 0)):
        adj[tris[:, a], tris[:, b]] = 1.0
        adj[tris[:, b], tris[:, a]] = 1.0
    for iris_first in (468, 473):
        iris = list(range(iris_first, iris_first + 5))
        centre = model.canonical[iris_first]
        ring = min(
            model.loops[:2],
            key=lambda lp: float(np.linalg.norm(model.canonical[lp].mean(0) - centre)),
        )
        for i in iris:
            adj[i, ring] = 1.0
            adj[ring, i] = 1.0
    return np.diag(adj.sum(1)) - adj


class HarmonicFill:
    """An offset given on ``anchors``, zero on ``fixed``, filled harmonically over the
    other vertices (a Laplace solve over the mesh graph, precomputed as a matrix)."""

    def __init__(self, model: FaceModel, anchors: set[int], fixed: set[int]) -> None:
        lap = mesh_laplacian(model)
        anchors = anchors - fixed
        self.anchors = np.array(sorted(anchors), np.int64)
        self.fixed = np.array(sorted(fixed), np.int64)
        known = set(self.anchors.tolist()) | set(self.fixed.tolist())
        self.free = np.array([i for i in range(N_LANDMARKS) if i not in known], np.int64)
        l_ff = lap[np.ix_(self.free, self.free)]
        l_fa = lap[np.ix_(self.free, self.anchors)]
        self.fill = -np.linalg.solve(l_ff, l_fa)  # (free, anchors)

    def spread(self, at_anchors: NDArray[np.floating]) -> NDArray[np.float64]:
        """(478, D) offsets from (len(anchors), D) ones on the anchors."""
        values = np.asarray(at_anchors, np.float64)
        delta = np.zeros((N_LANDMARKS, values.shape[1]), np.float64)
        delta[self.anchors] = values
        delta[self.free] = self.fill @ values
        return delta


class IdentityShape(HarmonicFill):
    """Precomputed harmonic fill from identity anchors to the whole mesh."""

    def __init__(self, model: FaceModel) -> None:
        self.model = model
        anchors = set(model.regions["nose"].tolist()) | set(_EYE_CORNERS)
        brows = set(model.regions["left_eyebrow"].tolist()) | set(
            model.regions["right_eyebrow"].tolist()
        )
        anchors |= brows
        fixed = set(model.regions["face_oval"].tolist()) | set(model.regions["lips"].tolist())
        super().__init__(model, anchors, fixed)
        # Which anchors are the brows' (see identity_delta's ``brows``).
        self.on_brows = np.isin(self.anchors, sorted(brows))

    def identity_delta(
        self,
        source_shape: NDArray[np.floating],
        target_shape: NDArray[np.floating],
        brows: float = 1.0,
    ) -> NDArray[np.float64]:
        """(478, 3) offset that moves the target's shape towards the source's identity.

        Both shapes are pose-normalised (canonical units). ``brows`` scales the
        offset on the brows' anchors (the rest of it is spread from them as from the
        others).
        """
        diff = np.asarray(source_shape, np.float64) - np.asarray(target_shape, np.float64)
        at_anchors = diff[self.anchors]
        if brows != 1.0:
            at_anchors = at_anchors * np.where(self.on_brows, brows, 1.0)[:, None]
        return self.spread(at_anchors)
