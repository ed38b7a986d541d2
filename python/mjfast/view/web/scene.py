"""What the browser draws (SPEC §22): the model's geoms and the plugins' `render_callback` geoms
as viser scene nodes, and the first view.

Pure geometry on a model the caller holds still: the shapes (primitives as viser's own, the rest
as triangle meshes built here), their colours as MuJoCo's renderer picks them, the poses as
quaternions, and the free camera's framing. Creating and updating nodes on a server is the
viewer's business (`mjfast.view.web.viewer`); nothing here talks to the env.
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

import mujoco
import numpy as np

__all__ = [
    "FreeCamera",
    "GeomShape",
    "free_camera",
    "geom_shape",
    "matrices_to_quaternions",
    "model_geom_shapes",
    "user_geom_pose",
    "user_geom_shape",
]

# MuJoCo's free camera shows geom groups 0-2 by default (mjvOption.geomgroup).
VISIBLE_GROUPS = 3
# A geom's rgba left at MuJoCo's default takes its material's colour (as the renderer does).
_DEFAULT_RGBA = np.array([0.5, 0.5, 0.5, 1.0], dtype=np.float32)
_SPHERE_SEGMENTS = 24
_SPHERE_RINGS = 12  # latitude rings from pole to pole
_G = mujoco.mjtGeom


class GeomShape(NamedTuple):
    """One drawable shape: `kind` is "box", "sphere", "cylinder" (viser's primitives, sized by
    `size`: box half-sizes, sphere radius, cylinder radius and half-height) or "mesh"
    (`vertices`, `faces`); `rgb` 0-255 and `opacity` (None: opaque). `offset` is a translation
    along the shape's local z added to its pose (the plugins' line-like geoms start at `pos`)."""

    kind: str
    size: tuple[float, ...]
    rgb: tuple[int, int, int]
    opacity: float | None
    vertices: np.ndarray | None = None
    faces: np.ndarray | None = None
    double_sided: bool = False
    offset: float = 0.0
    # A textured mesh: per-vertex texture coordinates (n x 2, glTF's: v down the image) and the
    # image (H x W x 3 or 4, uint8, first row first), which multiplies the colour as in MuJoCo.
    uv: np.ndarray | None = None
    texture: np.ndarray | None = None

    def signature(self) -> tuple[Any, ...]:
        """What identifies the node's content (not its pose): equal signatures, same node."""
        return (self.kind, tuple(round(s, 6) for s in self.size), self.rgb, self.opacity,
                self.offset, self.texture is not None)


class FreeCamera(NamedTuple):
    position: np.ndarray
    look_at: np.ndarray
    fov: float  # vertical, radians


def free_camera(model: mujoco.MjModel) -> FreeCamera:
    """MuJoCo's default free camera (mjv_defaultFreeCamera): looking at `model.stat.center` from
    1.5 x `model.stat.extent` away, at the model's global azimuth and elevation."""
    look_at = np.array(model.stat.center, dtype=np.float64)
    distance = 1.5 * float(model.stat.extent)
    azimuth = math.radians(float(model.vis.global_.azimuth))
    elevation = math.radians(float(model.vis.global_.elevation))
    forward = np.array([math.cos(elevation) * math.cos(azimuth),
                        math.cos(elevation) * math.sin(azimuth), math.sin(elevation)])
    return FreeCamera(look_at - distance * forward, look_at,
                      math.radians(float(model.vis.global_.fovy)))


def node_name(model: mujoco.MjModel, geom_id: int) -> str:
    """The scene node's name: the geom's id and name (a node path, so no slashes)."""
    name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, geom_id) or ""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    return f"/mjfast/geoms/{geom_id}" + (f"_{name}" if name else "")


def _colour(rgba: np.ndarray) -> tuple[tuple[int, int, int], float | None]:
    rgb = tuple(round(float(np.clip(c, 0.0, 1.0)) * 255) for c in rgba[:3])
    alpha = float(np.clip(rgba[3], 0.0, 1.0))
    return (rgb[0], rgb[1], rgb[2]), (None if alpha >= 1.0 else alpha)


def geom_rgba(model: mujoco.MjModel, geom_id: int) -> np.ndarray:
    """The colour MuJoCo's renderer gives the geom: its rgba, or its material's when the geom's
    is left at the default."""
    rgba = np.asarray(model.geom_rgba[geom_id], dtype=np.float32)
    material = int(model.geom_matid[geom_id])
    if material >= 0 and np.array_equal(rgba, _DEFAULT_RGBA):
        return np.asarray(model.mat_rgba[material], dtype=np.float32)
    return rgba


def _revolve(profile: list[tuple[float, float]],
             segments: int = _SPHERE_SEGMENTS) -> tuple[np.ndarray, np.ndarray]:
    """A surface of revolution about z: `profile` is (radius, z) from bottom to top; faces wind
    counter-clockwise seen from outside."""
    angles = np.linspace(0.0, 2.0 * math.pi, segments, endpoint=False)
    rings = np.array(profile, dtype=np.float64)
    vertices = np.empty((len(rings), segments, 3), dtype=np.float32)
    vertices[:, :, 0] = rings[:, :1] * np.cos(angles)
    vertices[:, :, 1] = rings[:, :1] * np.sin(angles)
    vertices[:, :, 2] = rings[:, 1:2]
    ring = np.arange(len(rings) - 1)[:, None] * segments
    j = np.arange(segments)[None, :]
    a, b = ring + j, ring + (j + 1) % segments
    c, d = b + segments, a + segments
    faces = np.concatenate([np.stack([a, b, c], -1).reshape(-1, 3),
                            np.stack([a, c, d], -1).reshape(-1, 3)])
    return vertices.reshape(-1, 3), faces.astype(np.uint32)


def _sphere_profile(radius: float, z_low: float = 0.0, z_high: float = 0.0
                    ) -> list[tuple[float, float]]:
    """Pole to pole; with z_low != z_high the lower half sits at z_low, the upper at z_high
    (a capsule), each half with its own equator ring."""
    half = _SPHERE_RINGS // 2
    lower = [(radius * math.cos(phi), radius * math.sin(phi) + z_low)
             for phi in np.linspace(-math.pi / 2, 0.0, half + 1)]
    upper = [(radius * math.cos(phi), radius * math.sin(phi) + z_high)
             for phi in np.linspace(0.0, math.pi / 2, half + 1)]
    return lower + upper


def _ellipsoid(size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    vertices, faces = _revolve(_sphere_profile(1.0))
    return (vertices * np.asarray(size[:3], dtype=np.float32)).astype(np.float32), faces


def _capsule(radius: float, half_length: float) -> tuple[np.ndarray, np.ndarray]:
    return _revolve(_sphere_profile(radius, -half_length, half_length))


def _box(half: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A box as 6 faces of 4 vertices each (flat normals), counter-clockwise from outside."""
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    quads = [[0, 2, 3, 1], [4, 5, 7, 6],  # -x, +x
             [0, 1, 5, 4], [2, 6, 7, 3],  # -y, +y
             [0, 4, 6, 2], [1, 3, 7, 5]]  # -z, +z
    vertices = (corners[np.array(quads).ravel()] * np.asarray(half[:3], float)).astype(np.float32)
    first = np.arange(0, 24, 4)[:, None]
    faces = np.concatenate([first + np.array([0, 1, 2]), first + np.array([0, 2, 3])])
    faces = faces.astype(np.uint32)
    return vertices, faces


def _quad(half_x: float, half_y: float) -> tuple[np.ndarray, np.ndarray]:
    vertices = np.array([[-half_x, -half_y, 0], [half_x, -half_y, 0], [half_x, half_y, 0],
                         [-half_x, half_y, 0]], dtype=np.float32)
    return vertices, np.array([[0, 1, 2], [0, 2, 3]], dtype=np.uint32)


def _hfield(model: mujoco.MjModel, hfield_id: int) -> tuple[np.ndarray, np.ndarray]:
    rows, cols = int(model.hfield_nrow[hfield_id]), int(model.hfield_ncol[hfield_id])
    start = int(model.hfield_adr[hfield_id])
    heights = np.asarray(model.hfield_data[start:start + rows * cols]).reshape(rows, cols)
    radius_x, radius_y, elevation, _ = (float(v) for v in model.hfield_size[hfield_id])
    y, x = np.meshgrid(np.linspace(-radius_y, radius_y, rows),
                       np.linspace(-radius_x, radius_x, cols), indexing="ij")
    vertices = np.stack([x, y, heights * elevation], -1).reshape(-1, 3).astype(np.float32)
    r, c = np.meshgrid(np.arange(rows - 1), np.arange(cols - 1), indexing="ij")
    a = (r * cols + c).ravel()
    b, d = a + 1, a + cols
    faces = np.concatenate([np.stack([a, b, d + 1], -1), np.stack([a, d + 1, d], -1)])
    return vertices, faces.astype(np.uint32)


def _mesh(model: mujoco.MjModel, mesh_id: int) -> tuple[np.ndarray, np.ndarray]:
    vert_start, vert_count = int(model.mesh_vertadr[mesh_id]), int(model.mesh_vertnum[mesh_id])
    face_start, face_count = int(model.mesh_faceadr[mesh_id]), int(model.mesh_facenum[mesh_id])
    vertices = np.asarray(model.mesh_vert[vert_start:vert_start + vert_count], dtype=np.float32)
    faces = np.asarray(model.mesh_face[face_start:face_start + face_count], dtype=np.uint32)
    return vertices.copy(), faces.copy()


class _Texture(NamedTuple):
    image: np.ndarray
    repeat: tuple[float, float]
    uniform: bool


def _texture_2d(model: mujoco.MjModel, geom_id: int) -> _Texture | None:
    """The 2D texture of the geom's material (its RGB role), or None: no material, no texture, or
    a cube map (not drawn here)."""
    material = int(model.geom_matid[geom_id])
    if material < 0:
        return None
    texture = int(model.mat_texid[material, int(mujoco.mjtTextureRole.mjTEXROLE_RGB)])
    if texture < 0 or int(model.tex_type[texture]) != int(mujoco.mjtTexture.mjTEXTURE_2D):
        return None
    height, width = int(model.tex_height[texture]), int(model.tex_width[texture])
    channels, start = int(model.tex_nchannel[texture]), int(model.tex_adr[texture])
    if channels not in (3, 4):
        return None  # a one-channel (height or occlusion) image is no colour
    image = np.asarray(model.tex_data[start:start + height * width * channels], dtype=np.uint8)
    repeat = model.mat_texrepeat[material]
    return _Texture(image.reshape(height, width, channels).copy(),
                    (float(repeat[0]), float(repeat[1])), bool(model.mat_texuniform[material]))


def _texture_coordinates(vertices: np.ndarray, half: tuple[float, float],
                         texture: _Texture) -> np.ndarray:
    """MuJoCo's mapping of a 2D texture onto a plane or box (render_gl3.c, settexture): linear
    in the geom's local x and y, `repeat` times across the object (per unit of length when
    `uniform`, or along an infinite plane: `half` 0), centred; GL's t runs up the image as
    glTF's v runs down it, so t is v."""
    scale = np.array(texture.repeat, dtype=np.float64)
    if not texture.uniform:
        half_sizes = np.asarray(half, dtype=np.float64)
        scale = np.where(half_sizes > 0, scale / np.maximum(half_sizes, mujoco.mjMINVAL), scale)
    s = 0.5 * scale[0] * vertices[:, 0] - 0.5
    t = -0.5 * scale[1] * vertices[:, 1] - 0.5
    return np.stack([s, t], axis=1).astype(np.float32)


def _textured(shape: GeomShape, texture: _Texture | None, size: np.ndarray) -> GeomShape:
    """The plane or box `shape` (of the geom's `size`) as a mesh carrying `texture` (unchanged
    without one)."""
    if texture is None:
        return shape
    if shape.kind == "box":
        vertices, faces = _box(np.asarray(shape.size))
    else:
        assert shape.vertices is not None and shape.faces is not None
        vertices, faces = shape.vertices, shape.faces
    uv = _texture_coordinates(vertices, (float(size[0]), float(size[1])), texture)
    return shape._replace(kind="mesh", vertices=vertices, faces=faces, uv=uv,
                          texture=texture.image)


def _primitive(geom_type: int, size: np.ndarray, rgba: np.ndarray,
               infinite_plane: float) -> GeomShape | None:
    rgb, opacity = _colour(rgba)
    if geom_type == _G.mjGEOM_BOX:
        return GeomShape("box", tuple(float(s) for s in size[:3]), rgb, opacity)
    if geom_type == _G.mjGEOM_SPHERE:
        return GeomShape("sphere", (float(size[0]),), rgb, opacity)
    if geom_type == _G.mjGEOM_CYLINDER:
        return GeomShape("cylinder", (float(size[0]), float(size[1])), rgb, opacity)
    if geom_type == _G.mjGEOM_CAPSULE:
        vertices, faces = _capsule(float(size[0]), float(size[1]))
        return GeomShape("mesh", (float(size[0]), float(size[1])), rgb, opacity, vertices, faces)
    if geom_type == _G.mjGEOM_ELLIPSOID:
        vertices, faces = _ellipsoid(size)
        return GeomShape("mesh", tuple(float(s) for s in size[:3]), rgb, opacity, vertices,
                         faces)
    if geom_type == _G.mjGEOM_PLANE:
        # A zero size is an infinite plane: drawn large around the model.
        half_x = float(size[0]) if size[0] > 0 else infinite_plane
        half_y = float(size[1]) if size[1] > 0 else infinite_plane
        vertices, faces = _quad(half_x, half_y)
        return GeomShape("mesh", (half_x, half_y), rgb, opacity, vertices, faces,
                         double_sided=True)
    return None


def geom_shape(model: mujoco.MjModel, geom_id: int) -> GeomShape | None:
    """The shape of model geom `geom_id`, or None for one the free camera does not show (a
    hidden group, fully transparent) or that is not drawn here (SDF geoms)."""
    if int(model.geom_group[geom_id]) >= VISIBLE_GROUPS:
        return None
    rgba = geom_rgba(model, geom_id)
    if rgba[3] <= 0.0:
        return None
    geom_type = int(model.geom_type[geom_id])
    data_id = int(model.geom_dataid[geom_id])
    if geom_type == _G.mjGEOM_MESH and data_id >= 0:
        vertices, faces = _mesh(model, data_id)
        rgb, opacity = _colour(rgba)
        return GeomShape("mesh", (float(data_id),), rgb, opacity, vertices, faces,
                         double_sided=True)
    if geom_type == _G.mjGEOM_HFIELD and data_id >= 0:
        vertices, faces = _hfield(model, data_id)
        rgb, opacity = _colour(rgba)
        return GeomShape("mesh", (float(data_id),), rgb, opacity, vertices, faces,
                         double_sided=True)
    size = np.asarray(model.geom_size[geom_id])
    shape = _primitive(geom_type, size, rgba, 5.0 * max(float(model.stat.extent), 1.0))
    if shape is not None and geom_type in (_G.mjGEOM_PLANE, _G.mjGEOM_BOX):
        return _textured(shape, _texture_2d(model, geom_id), size)
    return shape


def model_geom_shapes(model: mujoco.MjModel) -> list[GeomShape | None]:
    return [geom_shape(model, geom_id) for geom_id in range(model.ngeom)]


# The plugins' geoms (mjvGeom in a user scene): primitives as above, and the line-like ones
# (lines, arrows) as thin cylinders from `pos` along their z axis, `size[2]` long.
_LINE_LIKE = {int(_G.mjGEOM_LINE), int(_G.mjGEOM_ARROW), int(_G.mjGEOM_ARROW1),
              int(_G.mjGEOM_ARROW2)}


def user_geom_shape(geom_type: int, size: np.ndarray, rgba: np.ndarray,
                    line_radius: float) -> GeomShape | None:
    if rgba[3] <= 0.0:
        return None
    if geom_type in _LINE_LIKE:
        # A line's width is in pixels, an arrow's in length units.
        radius = line_radius if geom_type == _G.mjGEOM_LINE else max(float(size[0]), 1e-6)
        length = float(size[2])
        rgb, opacity = _colour(rgba)
        return GeomShape("cylinder", (radius, length / 2), rgb, opacity, offset=length / 2)
    if geom_type in (_G.mjGEOM_BOX, _G.mjGEOM_SPHERE, _G.mjGEOM_CYLINDER, _G.mjGEOM_CAPSULE,
                     _G.mjGEOM_ELLIPSOID):
        return _primitive(geom_type, size, rgba, 0.0)
    return None


def user_geom_pose(shape: GeomShape, pos: np.ndarray, mat: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The node's position and wxyz for a plugin geom of `shape` at `pos`, `mat` (row-major)."""
    rotation = np.asarray(mat, dtype=np.float64).reshape(3, 3)
    position = np.asarray(pos, dtype=np.float64) + rotation[:, 2] * shape.offset
    return position, matrices_to_quaternions(rotation.reshape(1, 9))[0]


def matrices_to_quaternions(matrices: np.ndarray) -> np.ndarray:
    """Row-major 3x3 rotation matrices (n x 9) to unit quaternions w, x, y, z (n x 4), each
    from its largest component (Shepperd's method: exact at half turns too)."""
    m = np.asarray(matrices, dtype=np.float64).reshape(-1, 3, 3)
    m00, m01, m02 = m[:, 0, 0], m[:, 0, 1], m[:, 0, 2]
    m10, m11, m12 = m[:, 1, 0], m[:, 1, 1], m[:, 1, 2]
    m20, m21, m22 = m[:, 2, 0], m[:, 2, 1], m[:, 2, 2]
    diagonal = np.stack([m00 + m11 + m22, m00, m11, m22], axis=1)
    case = np.argmax(diagonal, axis=1)
    candidates = np.stack([
        np.stack([1.0 + m00 + m11 + m22, m21 - m12, m02 - m20, m10 - m01], axis=1),
        np.stack([m21 - m12, 1.0 + m00 - m11 - m22, m01 + m10, m02 + m20], axis=1),
        np.stack([m02 - m20, m01 + m10, 1.0 - m00 + m11 - m22, m12 + m21], axis=1),
        np.stack([m10 - m01, m02 + m20, m12 + m21, 1.0 - m00 - m11 + m22], axis=1),
    ])  # 4 x n x 4: each case's quaternion times 4 x its largest component
    quats = candidates[case, np.arange(len(m))]
    quats /= np.linalg.norm(quats, axis=1, keepdims=True)
    return quats
