"""A vectorised triangle rasteriser (numpy only, no Python loop over triangles).

Every triangle's pixel-centre bounding box is enumerated at once with
``np.repeat`` tricks, barycentric coordinates are affine in the pixel position
(three coefficients per weight and triangle), and the nearest triangle wins
(painter's order by mean depth; numpy's fancy assignment keeps the last write
for a flat index array, which ``tests/core/test_raster.py`` checks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True)
class Raster:
    """Per-pixel triangle ids and barycentric weights.

    Attributes:
        triangle: (H, W) int32, index into the triangle array, -1 where empty.
        weights: (H, W, 3) float32 barycentric weights of the triangle's vertices.
    """

    triangle: NDArray[np.int32]
    weights: NDArray[np.float32]

    @property
    def covered(self) -> NDArray[np.bool_]:
        return self.triangle >= 0

    def interpolate(
        self, values: NDArray, triangles: NDArray[np.integer], *, fill: float = 0.0
    ) -> NDArray[np.float32]:
        """Interpolate per-vertex values over the raster.

        Args:
            values: (V, C) per-vertex attributes.
            triangles: the (T, 3) array that was rasterised.
            fill: value for uncovered pixels.

        Returns:
            (H, W, C) float32.
        """
        h, w = self.triangle.shape
        vals = np.asarray(values, np.float32)
        out = np.full((h * w, vals.shape[1]), fill, np.float32)
        flat_tri = self.triangle.reshape(-1)
        cov = np.flatnonzero(flat_tri >= 0)
        pixel_tri = flat_tri[cov]
        wts = np.take(self.weights.reshape(-1, 3), cov, axis=0)  # (P, 3)
        # One corner at a time, through contiguous corner columns (np.take on these is
        # about twice as fast as fancy indexing through a (P, 3) gather); the sum keeps
        # the corners' order.
        corners = np.ascontiguousarray(np.asarray(triangles).T)
        total = None
        for k in range(3):
            term = np.take(vals, np.take(corners[k], pixel_tri), axis=0)
            term *= wts[:, k : k + 1]
            total = term if total is None else total + term
        out[cov] = total
        return out.reshape(h, w, -1)


def rasterize(
    vertices: NDArray[np.floating],
    triangles: NDArray[np.integer],
    shape: tuple[int, int],
    *,
    depth: NDArray[np.floating] | None = None,
    cull_back_faces: bool = False,
) -> Raster:
    """Rasterise a 2D triangle mesh onto a pixel grid.

    Args:
        vertices: (V, 2) x, y in pixels (pixel centres at integers).
        triangles: (T, 3) vertex indices. Counter-clockwise on screen (y down,
            positive signed area) means front-facing.
        shape: (H, W) of the grid.
        depth: optional (V,) depth, larger is farther; nearer triangles win.
        cull_back_faces: drop triangles with non-positive signed area.

    Returns:
        A :class:`Raster`.

    Example:
        >>> r = rasterize(np.array([[0, 0], [9, 0], [0, 9]]), np.array([[0, 2, 1]]), (10, 10))
        >>> int(r.covered.sum())
        55
    """
    h, w = shape
    tri = np.asarray(triangles, np.intp)
    # Corner coordinates as contiguous (T,) arrays: arithmetic on them is several
    # times faster than on strided views of a (T, 3, 2) gather.
    vx = np.ascontiguousarray(np.asarray(vertices, np.float64)[:, 0])
    vy = np.ascontiguousarray(np.asarray(vertices, np.float64)[:, 1])
    corners = np.ascontiguousarray(tri.T)
    x0, x1, x2 = vx[corners[0]], vx[corners[1]], vx[corners[2]]
    y0, y1, y2 = vy[corners[0]], vy[corners[1]], vy[corners[2]]
    area: NDArray[np.float64] = (x1 - x0) * (y2 - y0) - (x2 - x0) * (y1 - y0)
    keep = area > 1e-9 if cull_back_faces else np.abs(area) > 1e-9
    # Element-wise over the three corners (a reduction over the strided axis of
    # length 3 costs several times more).
    vx_min, vx_max = np.minimum(np.minimum(x0, x1), x2), np.maximum(np.maximum(x0, x1), x2)
    vy_min, vy_max = np.minimum(np.minimum(y0, y1), y2), np.maximum(np.maximum(y0, y1), y2)
    xmin = np.clip(np.ceil(vx_min - 1e-6), 0, w - 1).astype(np.int32)
    xmax = np.clip(np.floor(vx_max + 1e-6), 0, w - 1).astype(np.int32)
    ymin = np.clip(np.ceil(vy_min - 1e-6), 0, h - 1).astype(np.int32)
    ymax = np.clip(np.floor(vy_max + 1e-6), 0, h - 1).astype(np.int32)
    nx = xmax - xmin + 1
    ny = ymax - ymin + 1
    on_grid = (
        (vx_max >= -1e-6) & (vx_min <= w - 1 + 1e-6) & (vy_max >= -1e-6) & (vy_min <= h - 1 + 1e-6)
    )
    keep &= on_grid & (nx > 0) & (ny > 0)
    ids = np.nonzero(keep)[0]
    if depth is not None and len(ids):
        z = np.asarray(depth, np.float64)
        zsum = (z[corners[0]] + z[corners[1]] + z[corners[2]])[ids]
        ids = ids[np.argsort(-zsum, kind="stable")]  # far first, near written last
    tri_id = np.full((h, w), -1, np.int32)
    weights = np.zeros((h, w, 3), np.float32)
    if len(ids) == 0:
        return Raster(tri_id, weights)
    counts = nx[ids] * ny[ids]
    total = int(counts.sum())
    # Barycentric weights are affine in (px, py): l = a * px + b * py + c per triangle;
    # the six coefficients as contiguous rows, for the gathers below.
    inv = 1.0 / area[ids]
    x0i, y0i, x1i, y1i, x2i, y2i = x0[ids], y0[ids], x1[ids], y1[ids], x2[ids], y2[ids]
    coef = np.empty((6, len(ids)), np.float32)
    coef[0] = (y2i - y0i) * inv
    coef[1] = -(x2i - x0i) * inv
    coef[2] = (-x0i * (y2i - y0i) + (x2i - x0i) * y0i) * inv
    coef[3] = -(y1i - y0i) * inv
    coef[4] = (x1i - x0i) * inv
    coef[5] = (-(x1i - x0i) * y0i + x0i * (y1i - y0i)) * inv
    local = np.repeat(np.arange(len(ids), dtype=np.int32), counts)
    first = (np.cumsum(counts) - counts).astype(np.int32)
    offs = np.arange(total, dtype=np.int32) - np.repeat(first, counts)
    # Per-candidate copies of the triangle's box and coefficients, each set in one
    # np.take along the rows (a third of the cost of one gather per row).
    nxc, box_x, box_y = np.take(np.stack([nx[ids], xmin[ids], ymin[ids]]), local, axis=1)
    py_off = offs // nxc
    px = box_x + (offs - py_off * nxc)
    py = box_y + py_off
    fx = px.astype(np.float32)
    fy = py.astype(np.float32)
    c = np.take(coef, local, axis=1)
    l1 = c[0] * fx + c[1] * fy + c[2]
    l2 = c[3] * fx + c[4] * fy + c[5]
    eps = np.float32(1e-5)
    inside = (l1 >= -eps) & (l2 >= -eps) & (l1 + l2 <= 1 + eps)
    sel = np.nonzero(inside)[0]
    tri_local = np.full(h * w, -1, np.int32)
    tri_local[py[sel] * w + px[sel]] = local[sel]
    covered = np.nonzero(tri_local >= 0)[0]
    lc = tri_local[covered]
    cx = (covered % w).astype(np.float32)
    cy = (covered // w).astype(np.float32)
    c = np.take(coef, lc, axis=1)
    w1 = c[0] * cx + c[1] * cy + c[2]
    w2 = c[3] * cx + c[4] * cy + c[5]
    tri_id.reshape(-1)[covered] = ids[lc]
    flat = weights.reshape(-1, 3)
    flat[covered, 0] = 1.0 - w1 - w2
    flat[covered, 1] = w1
    flat[covered, 2] = w2
    return Raster(tri_id, weights)
