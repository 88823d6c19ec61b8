"""Debug overlay (like FaceFusion's face_debugger): boxes, mesh, mask outlines, pose, hands,
and what a face occluder finds in front of the faces."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.core.facemodel import load_face_model
from faceweave.core.hands import HAND_BONES, hand_silhouette
from faceweave.types import Face, Frame

MESH_ALPHA = 0.4  # the wireframe over the face: the face stays visible under it
_FONT = cv2.FONT_HERSHEY_SIMPLEX
_BOX = (0, 255, 255)
_MESH = (80, 200, 80)
_OVAL = (255, 160, 0)
_HOLES = (0, 0, 255)
_HAND = (255, 0, 255)
_COVER = (0, 165, 255)
# How strongly what an occluder finds in front of a face is tinted.
COVER_ALPHA = 0.35


def draw_debug(
    frame: Frame,
    faces: list[Face],
    *,
    mesh: bool = True,
    mask: bool = True,
    hands: Sequence[NDArray[np.floating]] = (),
    covers: Sequence[tuple[tuple[slice, slice], NDArray[np.float32]]] = (),
) -> Frame:
    """Return a copy of ``frame`` with each face's box, number, score, pose, mesh and
    mask outlines (face oval; eye and mouth openings) drawn, the outline and
    bones of each of ``hands`` (their (21, 2) landmarks: what ``mask_hands`` keeps),
    and each of ``covers`` (a box and how much of it is covered, as
    :meth:`~faceweave.Occlusion.cover` gives it: what a face occluder keeps) tinted
    orange and outlined.

    The mesh is blended in at MESH_ALPHA so that a small face is not buried under its
    478 points; each label sits on a dark plate above its box (inside the frame), its
    text sized to the face.
    """
    model = load_face_model()
    out = frame.copy()
    thickness = max(1, round(max(frame.shape[:2]) / 600))
    if mesh and faces:
        layer = out.copy()
        tris = model.triangles
        edges = np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]])
        for face in faces:
            lines = np.round(face.landmarks_478[:, :2][edges] * 16).astype(np.int32)
            cv2.polylines(layer, list(lines), False, _MESH, 1, cv2.LINE_AA, shift=4)
        out = cv2.addWeighted(layer, MESH_ALPHA, out, 1.0 - MESH_ALPHA, 0.0)
    for landmarks in hands:
        _draw_hand(out, np.asarray(landmarks, np.float64)[:, :2], thickness)
    for box, covered in covers:
        _draw_cover(out, box, covered[:, :, 0], thickness)
    for index, face in enumerate(faces):
        pts = face.landmarks_478[:, :2]
        if mask:
            ring = np.round(model.face_oval_polygon(face.landmarks_478) * 16).astype(np.int32)
            cv2.polylines(out, [ring], True, _OVAL, thickness, cv2.LINE_AA, shift=4)
            holes = [np.round(pts[loop] * 16).astype(np.int32) for loop in model.loops]
            thin = max(1, min(thickness, round(face.size / 150)))  # a small eye stays a ring
            cv2.polylines(out, holes, True, _HOLES, thin, cv2.LINE_AA, shift=4)
        x0, y0, x1, y1 = (int(round(v)) for v in face.bbox)
        cv2.rectangle(out, (x0, y0), (x1, y1), _BOX, thickness)
        for p in face.landmarks_5:
            cv2.circle(out, (int(round(p[0])), int(round(p[1]))), thickness + 1, _HOLES, -1)
        pose = face.pose
        lines_text = [
            f"#{index} {face.score:.2f}",
            f"y{_degrees(pose.yaw)} p{_degrees(pose.pitch)} r{_degrees(pose.roll)}",
        ]
        scale = float(np.clip((x1 - x0) / 160.0, 0.35, 1.2))
        _label(out, lines_text, (x0, y0), scale, max(1, round(scale * 1.6)))
    return out


def _draw_hand(image: NDArray[np.uint8], points: NDArray[np.float64], thickness: int) -> None:
    """A hand's kept area (its silhouette's outline) and its bones, in place."""
    area = (hand_silhouette(points, (image.shape[0], image.shape[1])) > 0.5).astype(np.uint8)
    outline, _ = cv2.findContours(area, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    cv2.drawContours(image, outline, -1, _HAND, thickness, cv2.LINE_AA)
    at = np.round(points * 16).astype(np.int32)
    for a, b in HAND_BONES:
        cv2.line(image, tuple(at[a]), tuple(at[b]), _HAND, 1, cv2.LINE_AA, 4)


def _draw_cover(
    image: NDArray[np.uint8], box: tuple[slice, slice], covered: NDArray[np.float32], thickness: int
) -> None:
    """What an occluder finds in front of a face, tinted and outlined, in place."""
    region = image[box]
    tint = (covered * np.float32(COVER_ALPHA))[:, :, None]
    colour = np.array(_COVER, np.float32)
    region[...] = np.clip(region + tint * (colour - region), 0, 255).astype(np.uint8)
    outline, _ = cv2.findContours(
        (covered > 0.5).astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE
    )
    cv2.drawContours(region, outline, -1, _COVER, thickness, cv2.LINE_AA)


def _degrees(angle: float) -> str:
    return f"{int(round(angle)):+d}"  # "+0", never "-0"


def _label(
    image: NDArray[np.uint8], lines: list[str], corner: tuple[int, int], scale: float, weight: int
) -> None:
    """Draw ``lines`` on a dark plate whose bottom-left is at ``corner`` (a box's top
    left), moved down and left as needed to stay inside the image."""
    sizes = [cv2.getTextSize(line, _FONT, scale, weight) for line in lines]
    pad = max(2, int(round(3 * scale)))
    line_h = max(h + base for (_, h), base in sizes) + pad
    width = max(w for (w, _), _ in sizes) + 2 * pad
    height = line_h * len(lines) + pad
    h, w = image.shape[:2]
    x = int(np.clip(corner[0], 0, max(0, w - width)))
    y = int(np.clip(corner[1] - height, 0, max(0, h - height)))
    plate = image[y : y + height, x : x + width]
    plate[:] = (plate.astype(np.float32) * 0.35).astype(np.uint8)
    for k, line in enumerate(lines):
        (_, text_h), _ = sizes[k]
        baseline_y = y + pad + k * line_h + text_h
        cv2.putText(image, line, (x + pad, baseline_y), _FONT, scale, _BOX, weight, cv2.LINE_AA)
