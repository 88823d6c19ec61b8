"""Rigid geometry: similarity fits, Euler angles, mesh normals."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from faceweave.types import BBox, Pose


def umeyama(
    source: NDArray[np.floating], target: NDArray[np.floating], *, weights: NDArray | None = None
) -> tuple[NDArray[np.float64], float, NDArray[np.float64]]:
    """Least-squares similarity ``target ≈ scale * source @ R.T + t`` (Umeyama 1991).

    Args:
        source: (N, D) points.
        target: (N, D) corresponding points.
        weights: optional (N,) non-negative weights.

    Returns:
        ``(R, scale, t)`` with R a proper (D, D) rotation (det +1).
    """
    src = np.asarray(source, np.float64)
    dst = np.asarray(target, np.float64)
    w = np.ones(len(src)) if weights is None else np.asarray(weights, np.float64)
    w = w / w.sum()
    mu_s = w @ src
    mu_d = w @ dst
    a = src - mu_s
    b = dst - mu_d
    cov = (b * w[:, None]).T @ a
    u, s, vt = np.linalg.svd(cov)
    d = np.ones(src.shape[1])
    d[-1] = np.sign(np.linalg.det(u @ vt)) or 1.0
    rotation = u @ np.diag(d) @ vt
    var_s = float(w @ (a**2).sum(1))
    scale = float((s * d).sum() / max(var_s, 1e-12))
    translation = mu_d - scale * rotation @ mu_s
    return rotation, scale, translation


def euler_from_rotation(rotation: NDArray[np.floating]) -> tuple[float, float, float]:
    """Yaw, pitch, roll in degrees of ``R = Rz(roll) @ Ry(yaw) @ Rx(pitch)``.

    Axes are the image's: x right, y down, z away from the camera.
    """
    r = np.asarray(rotation, np.float64)
    yaw = np.degrees(np.arcsin(np.clip(-r[2, 0], -1.0, 1.0)))
    pitch = np.degrees(np.arctan2(r[2, 1], r[2, 2]))
    roll = np.degrees(np.arctan2(r[1, 0], r[0, 0]))
    return float(yaw), float(pitch), float(roll)


def rotation_from_euler(yaw: float, pitch: float, roll: float) -> NDArray[np.float64]:
    """Inverse of :func:`euler_from_rotation` (degrees)."""
    y, p, r = np.radians([yaw, pitch, roll])
    rx = np.array([[1, 0, 0], [0, np.cos(p), -np.sin(p)], [0, np.sin(p), np.cos(p)]])
    ry = np.array([[np.cos(y), 0, np.sin(y)], [0, 1, 0], [-np.sin(y), 0, np.cos(y)]])
    rz = np.array([[np.cos(r), -np.sin(r), 0], [np.sin(r), np.cos(r), 0], [0, 0, 1]])
    return rz @ ry @ rx


def estimate_pose(
    points: NDArray[np.floating], canonical: NDArray[np.floating], *, weights: NDArray | None = None
) -> Pose:
    """Similarity pose of a 3D landmark set against the canonical face.

    Args:
        points: (N, 3) landmarks in pixels (x right, y down, z away).
        canonical: (N, 3) canonical face, same vertex order.
        weights: optional (N,) weights (rigid vertices weigh more).

    Returns:
        The :class:`~faceweave.types.Pose` with ``points ≈ s * canonical @ R.T + t``.
    """
    rotation, scale, translation = umeyama(canonical, points, weights=weights)
    yaw, pitch, roll = euler_from_rotation(rotation)
    return Pose(rotation, scale, translation, yaw, pitch, roll)


def to_pose_space(points: NDArray[np.floating], pose: Pose) -> NDArray[np.float64]:
    """Undo a pose: landmarks in canonical units, frontal. Shape (N, 3) -> (N, 3)."""
    p = np.asarray(points, np.float64) - pose.translation
    return np.asarray((p @ pose.rotation) / pose.scale)


def from_pose_space(points: NDArray[np.floating], pose: Pose) -> NDArray[np.float64]:
    """Apply a pose to canonical-space points. Shape (N, 3) -> (N, 3)."""
    return np.asarray(
        pose.scale * np.asarray(points, np.float64) @ pose.rotation.T + pose.translation
    )


def vertex_normals(
    vertices: NDArray[np.floating], triangles: NDArray[np.integer]
) -> NDArray[np.float64]:
    """Area-weighted unit vertex normals, oriented towards the camera (z < 0) for a frontal face.

    Triangles are counter-clockwise on screen (x right, y down) when they face the camera.
    Vertices in no triangle get a zero normal.
    """
    v = np.asarray(vertices, np.float64)
    a, b, c = v[triangles[:, 0]], v[triangles[:, 1]], v[triangles[:, 2]]
    e1, e2 = c - a, b - a  # (c - a) x (b - a): towards the camera for on-screen CCW (y down)
    face_n = np.stack(
        [
            e1[:, 1] * e2[:, 2] - e1[:, 2] * e2[:, 1],
            e1[:, 2] * e2[:, 0] - e1[:, 0] * e2[:, 2],
            e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0],
        ],
        axis=1,
    )
    normals = _incidence(triangles, len(v)) @ face_n
    norm = np.linalg.norm(normals, axis=1, keepdims=True)
    return np.asarray(normals / np.maximum(norm, 1e-12))


# Per topology (a few per process): the sparse vertex-triangle incidence.
_INCIDENCE_CACHE: dict[tuple[int, int, int], sparse.csr_matrix] = {}


def _incidence(triangles: NDArray[np.integer], n_vertices: int) -> sparse.csr_matrix:
    """(V, T) 0/1 matrix: which triangles touch each vertex (cached per topology)."""
    tri = np.ascontiguousarray(triangles)
    key = (hash(tri.tobytes()), len(tri), n_vertices)
    matrix = _INCIDENCE_CACHE.get(key)
    if matrix is None:
        rows = np.asarray(triangles, np.int64).reshape(-1)
        cols = np.repeat(np.arange(len(triangles)), 3)
        matrix = sparse.csr_matrix(
            (np.ones(len(rows)), (rows, cols)), shape=(n_vertices, len(triangles))
        )
        if len(_INCIDENCE_CACHE) > 16:
            _INCIDENCE_CACHE.clear()
        _INCIDENCE_CACHE[key] = matrix
    return matrix


def bbox_iou(a: BBox, b: BBox) -> float:
    """Intersection over union of two (x0, y0, x1, y1) boxes; 0 for empty boxes."""
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0
