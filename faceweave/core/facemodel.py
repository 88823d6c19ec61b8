"""The face model: mesh topology, canonical face, UV layout, regions.

Derived by ``tools/derive_face_model.py`` from MediaPipe's tessellation and the
meshes of package-shipped photos; loaded once and shared (read-only).

Vertex layout used for rendering: the 478 MediaPipe landmarks followed by
three virtual vertices, the centres of the image-left eye, the image-right eye
and the mouth openings, which close the mesh's holes with triangle fans.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources

import numpy as np
from numpy.typing import NDArray

from faceweave.core.raster import Raster, rasterize

N_LANDMARKS = 478
N_MESH = 468
HOLE_NONE, HOLE_EYE_LEFT, HOLE_EYE_RIGHT, HOLE_MOUTH = 0, 1, 2, 3

# Rigid vertices (forehead, nose bridge, eye corners, cheekbones, temples):
# they barely move with expression, so poses are fitted on them.
RIGID_VERTICES = (
    10,
    151,
    9,
    8,
    168,
    6,
    197,
    195,
    5,
    4,
    1,
    19,
    94,
    2,
    98,
    327,
    33,
    133,
    263,
    362,
    130,
    359,
    243,
    463,
    226,
    446,
    31,
    261,
    117,
    346,
    123,
    352,
    116,
    345,
    34,
    264,
    127,
    356,
    162,
    389,
    21,
    251,
    54,
    284,
    103,
    332,
    67,
    297,
    109,
    338,
    108,
    337,
    69,
    299,
    104,
    333,
    105,
    334,
)


@dataclass(frozen=True, eq=False)
class FaceModel:
    """Read-only topology and canonical geometry.

    Attributes:
        canonical: (478, 3) mean face, unit RMS radius, frontal.
        triangles: (852, 3) mesh faces, counter-clockwise on screen when facing the camera.
        render_triangles: (T, 3) mesh faces plus hole fans over 481 vertices.
        hole_of_triangle: (T,) HOLE_* code of each render triangle.
        mirror: (478,) left-right partner of each vertex.
        loops: eye-left, eye-right, mouth boundary rings.
        uv: (481, 2) texture coordinates in [0, 1] (cylindrical unwrap of the canonical face).
        regions: named vertex index sets.
    """

    canonical: NDArray[np.float32]
    triangles: NDArray[np.int32]
    render_triangles: NDArray[np.int32]
    hole_of_triangle: NDArray[np.int8]
    mirror: NDArray[np.int32]
    loops: tuple[NDArray[np.int32], NDArray[np.int32], NDArray[np.int32]]
    uv: NDArray[np.float32]
    regions: dict[str, NDArray[np.int32]]
    rigid_weights: NDArray[np.float64]

    def around(self, vertices: NDArray[np.integer]) -> NDArray[np.intp]:
        """The ``vertices`` and every vertex sharing a mesh triangle with one of
        them (sorted, unique): a region grown by one ring."""
        region = np.asarray(vertices, np.intp)
        touching = np.isin(self.triangles, region).any(1)
        return np.unique(np.concatenate([region, self.triangles[touching].reshape(-1)]))

    def extend(self, points: NDArray[np.floating]) -> NDArray[np.float32]:
        """Append the three hole centres to a (478, D) vertex array -> (481, D)."""
        p = np.asarray(points, np.float32)
        return np.concatenate([p, self._loop_means @ p], axis=0)

    @functools.cached_property
    def _loop_means(self) -> NDArray[np.float32]:
        """(3, 478) weights: each row averages one hole's boundary ring (one product
        instead of three fancy-indexed means, 4x faster per frame)."""
        means = np.zeros((len(self.loops), len(self.canonical)), np.float32)
        for row, loop in enumerate(self.loops):
            means[row, loop] = 1.0 / len(loop)
        return means

    @functools.cached_property
    def canonical_extended(self) -> NDArray[np.float32]:
        return self.extend(self.canonical)

    def uv_raster(self, size: int) -> Raster:
        """Raster of the render mesh in UV space at ``size`` x ``size`` texels (cached)."""
        return _uv_raster(self, size)

    def face_oval_polygon(self, points: NDArray[np.floating]) -> NDArray[np.float32]:
        """Ordered face-oval ring (K, 2) of a (478, >=2) vertex array."""
        return np.asarray(points, np.float32)[self.regions["face_oval_ring"], :2]


def _ring_from_edges(edges: NDArray[np.int32]) -> NDArray[np.int32]:
    adj: dict[int, list[int]] = {}
    for a, b in edges.tolist():
        adj.setdefault(a, []).append(b)
        adj.setdefault(b, []).append(a)
    start = min(adj)
    ring, prev, cur = [start], -1, start
    while True:
        nxt = [n for n in adj[cur] if n != prev][0]
        if nxt == start:
            break
        ring.append(nxt)
        prev, cur = cur, nxt
    return np.array(ring, np.int32)


def _cylindrical_uv(points: NDArray[np.float32]) -> NDArray[np.float32]:
    """Unwrap around a vertical axis behind the face (z = +radius, z points away
    from the camera): the cheeks and temples get texels instead of being squeezed
    as a frontal projection would, and the layout stays left-right symmetric."""
    radius = 2.5
    x, y, z = points[:, 0], points[:, 1], points[:, 2]
    # The nose is flattened onto the cheek plane (z >= 0): projecting its protrusion
    # would fold the UV layout over the nose wings.
    theta = np.arctan2(x, radius - np.maximum(z, 0.0))
    uv = np.stack([theta * radius, y], axis=1)
    lo = np.array([-2.15, -1.65], np.float32)
    span = np.array([4.3, 3.3], np.float32)
    return ((uv - lo) / span).astype(np.float32)


@functools.lru_cache(maxsize=8)
def _uv_raster(model: FaceModel, size: int) -> Raster:
    return rasterize(model.uv * (size - 1), model.render_triangles, (size, size))


@functools.lru_cache(maxsize=1)
def load_face_model() -> FaceModel:
    """Load the packaged face model (cached)."""
    with resources.files("faceweave.data").joinpath("face_model.npz").open("rb") as fh:
        data = dict(np.load(fh))
    canonical = data["canonical"].astype(np.float32)
    tris = data["triangles"].astype(np.int32)
    loops = (data["loop_eye_image_left"], data["loop_eye_image_right"], data["loop_mouth"])
    fans = []
    codes = [np.full(len(tris), HOLE_NONE, np.int8)]
    for k, loop in enumerate(loops):
        centre = N_LANDMARKS + k
        ring = np.asarray(loop, np.int32)
        fan = np.stack([ring, np.roll(ring, -1), np.full(len(ring), centre, np.int32)], axis=1)
        fans.append(fan)
        codes.append(np.full(len(fan), k + 1, np.int8))
    render = np.concatenate([tris, *fans], axis=0)
    hole = np.concatenate(codes)
    extended = np.concatenate(
        [canonical, np.stack([canonical[lp].mean(0) for lp in loops])], axis=0
    )
    # Orient every render triangle counter-clockwise on screen for a frontal face.
    p = extended[:, :2]
    a, b, c = p[render[:, 0]], p[render[:, 1]], p[render[:, 2]]
    cross = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0])
    render[cross < 0] = render[cross < 0][:, [0, 2, 1]]
    regions = {
        k[len("regions_") :]: v.astype(np.int32)
        for k, v in data.items()
        if k.startswith("regions_")
    }
    regions["face_oval_ring"] = _ring_from_edges(data["face_oval_edges"])
    weights = np.full(N_LANDMARKS, 0.05)
    weights[list(RIGID_VERTICES)] = 1.0
    return FaceModel(
        canonical=canonical,
        triangles=tris,
        render_triangles=render.astype(np.int32),
        hole_of_triangle=hole,
        mirror=data["mirror"].astype(np.int32),
        loops=(loops[0].astype(np.int32), loops[1].astype(np.int32), loops[2].astype(np.int32)),
        uv=_cylindrical_uv(extended),
        regions=regions,
        rigid_weights=weights,
    )
