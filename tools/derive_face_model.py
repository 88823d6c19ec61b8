"""Derive faceweave's face model from MediaPipe's mesh and package-shipped photos.

Writes ``faceweave/data/face_model.npz`` holding:

* ``triangles``: (T, 3) faces of the 468-vertex mesh, recovered from MediaPipe's
  tessellation edge list (every 3-clique of the edge graph, minus the cliques
  that are not faces: those whose three edges all border three cliques),
  oriented counter-clockwise as seen on a frontal face in image coordinates.
* ``loops``: inner-lip and eye-opening boundary loops (ordered vertex rings),
  used to close the mouth and eye holes with fans around a virtual centre.
* ``canonical``: (478, 3) mean face, the Procrustes average of the meshes of
  the package-shipped photos and their mirror images, centred, unit RMS radius,
  frontal, x right, y down, z away from the camera.
* ``mirror``: (478,) index of each vertex's left-right mirror partner.
* ``regions_*``: vertex index sets for the face oval, lips, eyes, brows, irises.

Run: ``python tools/derive_face_model.py`` (needs mediapipe, scikit-image, matplotlib).
"""

from __future__ import annotations

import collections
import itertools
from pathlib import Path

import cv2
import matplotlib.cbook
import mediapipe as mp
import numpy as np
import skimage.data
from scipy.optimize import linear_sum_assignment

OUT = Path(__file__).resolve().parents[1] / "faceweave" / "data" / "face_model.npz"


def _images() -> list[np.ndarray]:
    astronaut = cv2.cvtColor(skimage.data.astronaut(), cv2.COLOR_RGB2BGR)
    with matplotlib.cbook.get_sample_data("grace_hopper.jpg") as fh:
        data = np.frombuffer(fh.read(), np.uint8)
    hopper = cv2.imdecode(data, cv2.IMREAD_COLOR)
    return [astronaut, hopper]


def _mesh(image: np.ndarray) -> np.ndarray:
    h, w = image.shape[:2]
    with mp.solutions.face_mesh.FaceMesh(
        static_image_mode=True, max_num_faces=1, refine_landmarks=True
    ) as fm:
        res = fm.process(cv2.cvtColor(image, cv2.COLOR_BGR2RGB))
    lm = res.multi_face_landmarks[0].landmark
    return np.array([[p.x * w, p.y * h, p.z * w] for p in lm], np.float64)


def _umeyama(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Similarity-align src onto dst; returns the aligned src."""
    mu_s, mu_d = src.mean(0), dst.mean(0)
    a, b = src - mu_s, dst - mu_d
    u, s, vt = np.linalg.svd(b.T @ a)
    d = np.ones(3)
    d[2] = np.sign(np.linalg.det(u @ vt))
    r = u @ np.diag(d) @ vt
    scale = (s * d).sum() / (a**2).sum()
    return scale * a @ r.T + mu_d


def _normalise(points: np.ndarray) -> np.ndarray:
    p = points - points.mean(0)
    return p / np.sqrt((p**2).sum(1).mean())


def _frontalise(points: np.ndarray) -> np.ndarray:
    """Rotate a mesh into a frontal frame: x from the image-left eye corner (33)
    to the image-right one (263), y from forehead (10) towards chin (152)."""
    p = _normalise(points)
    x = p[263] - p[33]
    x /= np.linalg.norm(x)
    y = p[152] - p[10]
    y -= x * (y @ x)
    y /= np.linalg.norm(y)
    z = np.cross(x, y)
    return p @ np.stack([x, y, z], axis=1)


def _triangles() -> np.ndarray:
    edges = {tuple(sorted(e)) for e in mp.solutions.face_mesh.FACEMESH_TESSELATION}
    adj: dict[int, set[int]] = collections.defaultdict(set)
    for a, b in edges:
        adj[a].add(b)
        adj[b].add(a)
    cliques = {tuple(sorted((a, b, c))) for a, b in edges for c in adj[a] & adj[b]}
    count: collections.Counter[tuple[int, int]] = collections.Counter()
    for t in cliques:
        for e in itertools.combinations(t, 2):
            count[e] += 1
    faces = [t for t in cliques if not all(count[e] == 3 for e in itertools.combinations(t, 2))]
    return np.array(sorted(faces), np.int32)


def _boundary_loops(tris: np.ndarray) -> list[list[int]]:
    count: collections.Counter[tuple[int, int]] = collections.Counter()
    for t in tris:
        for e in itertools.combinations(sorted(t), 2):
            count[e] += 1
    adj: dict[int, list[int]] = collections.defaultdict(list)
    for (a, b), c in count.items():
        if c == 1:
            adj[a].append(b)
            adj[b].append(a)
    seen: set[int] = set()
    loops = []
    for start in sorted(adj):
        if start in seen:
            continue
        loop, prev, cur = [start], -1, start
        seen.add(start)
        while True:
            nxt = [n for n in adj[cur] if n != prev]
            nxt_v = nxt[0]
            if nxt_v == start:
                break
            loop.append(nxt_v)
            seen.add(nxt_v)
            prev, cur = cur, nxt_v
        loops.append(loop)
    return loops


def _region(connections: frozenset[tuple[int, int]]) -> np.ndarray:
    return np.array(sorted({i for e in connections for i in e}), np.int32)


def main() -> None:
    fm = mp.solutions.face_mesh
    meshes = []
    for image in _images():
        meshes.append(_mesh(image))
        flipped = _mesh(cv2.flip(image, 1))
        flipped[:, 0] = image.shape[1] - 1 - flipped[:, 0]
        meshes.append(flipped)  # indices still those of the flipped face: fixed below
    # Mirror partner of each vertex: reflect a frontalised mesh and match neighbours.
    base = _frontalise(meshes[0])
    reflected = base * np.array([-1.0, 1.0, 1.0])
    aligned = reflected  # base is frontal: the symmetry plane is x = 0
    d = np.linalg.norm(base[:, None, :] - aligned[None, :, :], axis=2)
    # One-to-one matching on a symmetric cost, so the map is a permutation.
    rows, cols = linear_sum_assignment(d + d.T)
    mirror = cols[np.argsort(rows)].astype(np.int32)
    # Flipped images give vertex i at the mirror position of vertex mirror[i].
    fixed = []
    for k, m in enumerate(meshes):
        fixed.append(m[mirror] if k % 2 == 1 else m)
    ref = _frontalise(fixed[0])
    for _ in range(3):
        aligned_all = [_normalise(_umeyama(_normalise(m), ref)) for m in fixed]
        mean = np.mean(aligned_all, axis=0)
        sym = mean.copy()
        sym_ref = mean[mirror] * np.array([-1.0, 1.0, 1.0])
        sym = 0.5 * (mean + sym_ref)
        ref = _frontalise(sym)
    # Frontal: fit the symmetry plane to x = 0 (already symmetric), face looking at -z.
    canonical = ref.astype(np.float32)
    tris = _triangles()
    # Orient counter-clockwise in image coordinates (y down) as seen from the camera.
    p = canonical[:, :2]
    a, b, c = p[tris[:, 0]], p[tris[:, 1]], p[tris[:, 2]]
    cross = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0])
    tris[cross < 0] = tris[cross < 0][:, [0, 2, 1]]
    loops = _boundary_loops(tris)
    oval = _region(fm.FACEMESH_FACE_OVAL)
    holes = [lp for lp in loops if not set(lp) <= set(oval.tolist())]
    holes.sort(key=lambda lp: float(canonical[lp, 1].mean()))  # eyes first, mouth last
    eyes = sorted(holes[:2], key=lambda lp: float(canonical[lp, 0].mean()))
    mouth = holes[2]
    np.savez_compressed(
        OUT,
        canonical=canonical,
        triangles=tris,
        mirror=mirror,
        loop_eye_image_left=np.array(eyes[0], np.int32),
        loop_eye_image_right=np.array(eyes[1], np.int32),
        loop_mouth=np.array(mouth, np.int32),
        regions_face_oval=oval,
        regions_lips=_region(fm.FACEMESH_LIPS),
        regions_left_eye=_region(fm.FACEMESH_LEFT_EYE),
        regions_right_eye=_region(fm.FACEMESH_RIGHT_EYE),
        regions_left_eyebrow=_region(fm.FACEMESH_LEFT_EYEBROW),
        regions_right_eyebrow=_region(fm.FACEMESH_RIGHT_EYEBROW),
        regions_irises=_region(fm.FACEMESH_IRISES),
        regions_nose=_region(fm.FACEMESH_NOSE),
        face_oval_edges=np.array(sorted(fm.FACEMESH_FACE_OVAL), np.int32),
    )
    print(f"wrote {OUT}: {len(tris)} triangles, hole loops {[len(h) for h in holes]}")
    print("mirror is an involution:", bool((mirror[mirror] == np.arange(478)).all()))


if __name__ == "__main__":
    main()
