"""``xform.scipy.spatial.transform``: ``Rotation`` and ``Slerp`` as
``jax.scipy.spatial.transform``: NamedTuples (so pytrees) over scalar-last unit
quaternions ``(..., 4)``.

NB: every helper works on the last axis with ``[..., k]`` indexing, so it batches over
leading axes directly where JAX wraps each helper in ``jnp.vectorize``; the Euler-angle
sequence is static Python, so its case analysis is Python ``if``s, not ``where``s."""
import re
import typing

import numpy as np

import xform.numpy as jnp

_BASIS = {"x": 0, "y": 1, "z": 2}


def _norm(v):
    return jnp.sqrt(jnp.sum(v * v, axis=-1))


def _normalize(quat):
    return quat / _norm(quat)[..., None]


def _compose(p, q):
    """The quaternion product ``p q`` (rotation ``q`` first, then ``p``)."""
    cross = jnp.cross(p[..., :3], q[..., :3])
    pw, qw = p[..., 3:], q[..., 3:]
    w = p[..., 3] * q[..., 3] - p[..., 0] * q[..., 0] - p[..., 1] * q[..., 1] \
        - p[..., 2] * q[..., 2]
    return jnp.concatenate([pw * q[..., :3] + qw * p[..., :3] + cross, w[..., None]], -1)


def _as_matrix(q):
    x, y, z, w = (q[..., i] for i in range(4))
    x2, y2, z2, w2 = x * x, y * y, z * z, w * w
    xy, zw, xz, yw, yz, xw = x * y, z * w, x * z, y * w, y * z, x * w
    rows = [[x2 - y2 - z2 + w2, 2 * (xy - zw), 2 * (xz + yw)],
            [2 * (xy + zw), -x2 + y2 - z2 + w2, 2 * (yz - xw)],
            [2 * (xz - yw), 2 * (yz + xw), -x2 - y2 + z2 + w2]]
    return jnp.stack([jnp.stack(r, -1) for r in rows], -2)


def _from_matrix(m):
    """Shepperd's method: build the quaternion from its largest component (the largest of
    the diagonal entries and the trace decides which), then normalize."""
    diag = [m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]]
    trace = diag[0] + diag[1] + diag[2]
    choice = jnp.argmax(jnp.stack(diag + [trace], -1), axis=-1)
    candidates = []
    for i in range(3):
        j, k = (i + 1) % 3, (i + 2) % 3
        parts = [None] * 4
        parts[i] = 1 - trace + 2 * m[..., i, i]
        parts[j] = m[..., j, i] + m[..., i, j]
        parts[k] = m[..., k, i] + m[..., i, k]
        parts[3] = m[..., k, j] - m[..., j, k]
        candidates.append(jnp.stack(parts, -1))
    candidates.append(jnp.stack([m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0],
                                 m[..., 1, 0] - m[..., 0, 1], 1 + trace], -1))
    quat = jnp.take_along_axis(jnp.stack(candidates, -2), choice[..., None, None], axis=-2)
    return _normalize(quat[..., 0, :])


def _from_rotvec(rotvec, degrees):
    rotvec = jnp.deg2rad(rotvec) if degrees else rotvec
    angle = _norm(rotvec)
    a2 = angle * angle
    # sin(angle/2)/angle, by its Taylor series near 0
    scale = jnp.where(angle <= 1e-3, 0.5 - a2 / 48 + a2 * a2 / 3840, jnp.sin(angle / 2) / angle)
    return jnp.concatenate([scale[..., None] * rotvec, jnp.cos(angle / 2)[..., None]], -1)


def _as_rotvec(quat, degrees):
    quat = jnp.where(quat[..., 3:] < 0, -quat, quat)   # w >= 0: the angle is in [0, pi]
    angle = 2. * jnp.arctan2(_norm(quat[..., :3]), quat[..., 3])
    a2 = angle * angle
    scale = jnp.where(angle <= 1e-3, 2 + a2 / 12 + 7 * a2 * a2 / 2880,
                      angle / jnp.sin(angle / 2))
    scale = jnp.rad2deg(scale) if degrees else scale
    return scale[..., None] * quat[..., :3]


def _make_canonical(q):
    """``q`` or ``-q`` (the same rotation): the one whose first nonzero of (w, x, y, z) is
    positive."""
    neg, zero = q < 0, q == 0
    flip = neg[..., 3] | (zero[..., 3] & neg[..., 0]) | (
        zero[..., 3] & zero[..., 0] & neg[..., 1]) | (
        zero[..., 3] & zero[..., 0] & zero[..., 1] & neg[..., 2])
    return jnp.where(flip[..., None], -q, q)


def _check_seq(seq, max_len):
    if not 1 <= len(seq) <= max_len:
        raise ValueError(f"Expected axis specification to be a non-empty string of upto "
                         f"{max_len} characters, got {seq}")
    intrinsic = re.match(r"^[XYZ]{1,3}$", seq) is not None
    if not (intrinsic or re.match(r"^[xyz]{1,3}$", seq)):
        raise ValueError(f"Expected axes from `seq` to be from ['x', 'y', 'z'] or "
                         f"['X', 'Y', 'Z'], got {seq}")
    if any(seq[i] == seq[i + 1] for i in range(len(seq) - 1)):
        raise ValueError(f"Expected consecutive axes to be different, got {seq}")
    return intrinsic, [_BASIS[c] for c in seq.lower()]


def _euler_from_quat(quat, axes, extrinsic, degrees):
    """Euler angles by the method of Bernardes & Viollet (2022), as SciPy and JAX."""
    i, j, k = axes if extrinsic else axes[::-1]
    symmetric = i == k
    if symmetric:
        k = 3 - i - j
    sign = (i - j) * (j - k) * (k - i) // 2
    q = [quat[..., n] for n in range(4)]
    if symmetric:
        a, b, c, d = q[3], q[i], q[j], q[k] * sign
    else:
        a, b, c, d = q[3] - q[j], q[i] + q[k] * sign, q[j] + q[3], q[k] * sign - q[i]
    eps = 1e-7
    middle = 2 * jnp.arctan2(jnp.hypot(c, d), jnp.hypot(a, b))
    case = jnp.where(jnp.abs(middle) <= eps, 1, jnp.where(jnp.abs(middle - np.pi) <= eps, 2, 0))
    half_sum, half_diff = jnp.arctan2(b, a), jnp.arctan2(d, c)
    # degenerate (gimbal lock): the first angle takes it all, the third is 0
    degenerate = jnp.where(case == 1, 2 * half_sum, 2 * half_diff * (-1 if extrinsic else 1))
    zero = jnp.zeros_like(middle)
    regular = case == 0
    first = jnp.where(regular, half_sum - half_diff, degenerate if extrinsic else zero)
    third = jnp.where(regular, half_sum + half_diff, zero if extrinsic else degenerate)
    if not symmetric:
        third, middle = third * sign, middle - np.pi / 2
    angles = jnp.stack([first, middle, third] if extrinsic else [third, middle, first], -1)
    angles = (angles + np.pi) % (2 * np.pi) - np.pi
    return jnp.rad2deg(angles) if degrees else angles


class Rotation(typing.NamedTuple):
    """A rotation (or a batch of them) in 3 dimensions, as ``scipy.spatial.transform.
    Rotation``; ``quat`` holds scalar-last unit quaternions.

    >>> r = Rotation.from_euler("z", 90, degrees=True)
    >>> r.apply(jnp.array([1., 0., 0.])).round(5)
    Array([0., 1., 0.], dtype=float32)
    """
    quat: typing.Any

    @classmethod
    def concatenate(cls, rotations):
        """One batch from a sequence of rotations."""
        return cls(jnp.concatenate([r.quat for r in rotations]))

    @classmethod
    def from_euler(cls, seq, angles, degrees=False):
        """From Euler angles about ``seq``'s axes ("xyz": extrinsic, "XYZ": intrinsic)."""
        intrinsic, axes = _check_seq(seq, 3)
        angles = jnp.atleast_1d(angles)
        angles = jnp.deg2rad(angles) if degrees else angles
        if angles.shape[-1] != len(axes):
            raise ValueError(f"Expected angles with a last axis of length {len(axes)} for "
                             f"seq {seq!r}, got shape {angles.shape}")
        result = None
        for n, axis in enumerate(axes):
            half = angles[..., n] / 2.
            parts = [jnp.zeros_like(half)] * 3 + [jnp.cos(half)]
            parts[axis] = jnp.sin(half)
            q = jnp.stack(parts, -1)
            result = q if result is None else (
                _compose(result, q) if intrinsic else _compose(q, result))
        return cls(result)

    @classmethod
    def from_matrix(cls, matrix):
        """From rotation matrices ``(..., 3, 3)``."""
        return cls(_from_matrix(jnp.asarray(matrix)))

    @classmethod
    def from_mrp(cls, mrp):
        """From modified Rodrigues parameters ``(..., 3)``."""
        mrp = jnp.asarray(mrp)
        s = jnp.sum(mrp * mrp, axis=-1, keepdims=True) + 1
        return cls(jnp.concatenate([2 * mrp[..., :3], 2 - s], -1) / s)

    @classmethod
    def from_quat(cls, quat):
        """From scalar-last quaternions ``(..., 4)`` (normalized here)."""
        return cls(_normalize(jnp.asarray(quat)))

    @classmethod
    def from_rotvec(cls, rotvec, degrees=False):
        """From rotation vectors (axis times angle) ``(..., 3)``."""
        return cls(_from_rotvec(jnp.asarray(rotvec), degrees))

    @classmethod
    def identity(cls, num=None, dtype=float):
        """The identity rotation (``num`` must be None, as in JAX)."""
        assert num is None
        return cls(jnp.array([0., 0., 0., 1.], dtype=dtype))

    @classmethod
    def random(cls, random_key, num=None):
        """Not implemented (as in JAX)."""
        raise NotImplementedError()

    def __getitem__(self, indexer):
        if self.single:
            raise TypeError("Single rotation is not subscriptable.")
        return Rotation(self.quat[indexer])

    def __len__(self):
        if self.single:
            raise TypeError("Single rotation has no len().")
        return self.quat.shape[0]

    def __mul__(self, other):
        """The composition: ``other`` first, then ``self``."""
        return Rotation.from_quat(_compose(self.quat, other.quat))

    def apply(self, vectors, inverse=False):
        """Rotate ``vectors`` ``(..., 3)`` (by the inverse when ``inverse``)."""
        m = self.as_matrix()
        m = jnp.swapaxes(m, -1, -2) if inverse else m
        return jnp.matmul(m, jnp.asarray(vectors)[..., None])[..., 0]

    def as_euler(self, seq, degrees=False):
        """Euler angles ``(..., 3)`` about the 3 axes of ``seq``."""
        if len(seq) != 3:
            raise ValueError(f"Expected 3 axes, got {seq}.")
        intrinsic, axes = _check_seq(seq, 3)
        return _euler_from_quat(self.quat, axes, not intrinsic, degrees)

    def as_matrix(self):
        """Rotation matrices ``(..., 3, 3)``."""
        return _as_matrix(self.quat)

    def as_mrp(self):
        """Modified Rodrigues parameters ``(..., 3)``."""
        w = self.quat[..., 3:]
        sign = jnp.where(w < 0, -1., 1.)
        return sign * self.quat[..., :3] / (1. + sign * w)

    def as_rotvec(self, degrees=False):
        """Rotation vectors ``(..., 3)``."""
        return _as_rotvec(self.quat, degrees)

    def as_quat(self, canonical=False, scalar_first=False):
        """Quaternions ``(..., 4)``; ``canonical``: w >= 0 (ties by x, y, z)."""
        quat = _make_canonical(self.quat) if canonical else self.quat
        return jnp.roll(quat, 1, axis=-1) if scalar_first else quat

    def inv(self):
        """The inverse rotation."""
        return Rotation(self.quat * jnp.array([-1, -1, -1, 1], dtype=self.quat.dtype))

    def magnitude(self):
        """The rotation angle, in [0, pi]."""
        return 2. * jnp.arctan2(_norm(self.quat[..., :3]), jnp.abs(self.quat[..., 3]))

    def mean(self, weights=None):
        """The (weighted) mean rotation: the top eigenvector of ``sum w q q^T``."""
        n = self.quat.shape[0]
        w = jnp.ones(n, self.quat.dtype) if weights is None else jnp.asarray(
            weights, dtype=self.quat.dtype)
        if w.ndim != 1:
            raise ValueError(f"Expected `weights` to be 1 dimensional, got shape {w.shape}.")
        if w.shape[0] != len(self):
            raise ValueError(f"Expected `weights` to have number of values equal to number "
                             f"of rotations, got {w.shape[0]} values and {len(self)} "
                             "rotations.")
        _, v = jnp.linalg.eigh(jnp.dot(w[None, :] * self.quat.T, self.quat))
        return Rotation(v[:, -1])

    @property
    def single(self):
        """Whether this is one rotation (not a batch)."""
        return self.quat.ndim == 1


class Slerp(typing.NamedTuple):
    """Spherical linear interpolation of rotations at increasing ``times``; build with
    :meth:`Slerp.init`, call with the times to interpolate at.

    >>> s = Slerp.init(jnp.array([0., 1.]), Rotation.from_euler("z", jnp.array([[0.], [90.]]),
    ...                                                         degrees=True))
    >>> print(s(0.5).as_euler("zyx", degrees=True).round(1))
    [45.  0.  0.]
    """
    times: typing.Any
    timedelta: typing.Any
    rotations: Rotation
    rotvecs: typing.Any

    @classmethod
    def init(cls, times, rotations):
        """The interpolator through ``rotations`` (a batch of >= 2) at 1-D ``times``."""
        if not isinstance(rotations, Rotation):
            raise TypeError("`rotations` must be a `Rotation` instance.")
        if rotations.single or len(rotations) == 1:
            raise ValueError("`rotations` must be a sequence of at least 2 rotations.")
        times = jnp.asarray(times, dtype=rotations.quat.dtype)
        if times.ndim != 1:
            raise ValueError(f"Expected times to be specified in a 1 dimensional array, "
                             f"got {times.ndim} dimensions.")
        if times.shape[0] != len(rotations):
            raise ValueError(f"Expected number of rotations to be equal to number of "
                             f"timestamps given, got {len(rotations)} rotations and "
                             f"{times.shape[0]} timestamps.")
        starts = Rotation(rotations.quat[:-1])
        steps = (starts.inv() * Rotation(rotations.quat[1:])).as_rotvec()
        return cls(times=times, timedelta=jnp.diff(times), rotations=starts, rotvecs=steps)

    def __call__(self, times):
        """The interpolated rotation(s) at ``times`` (a scalar or 1-D)."""
        t = jnp.asarray(times, dtype=self.times.dtype)
        if t.ndim > 1:
            raise ValueError("`times` must be at most 1-dimensional.")
        single = t.ndim == 0
        t = jnp.atleast_1d(t)
        ind = jnp.maximum(jnp.searchsorted(self.times, t) - 1, 0)
        alpha = (t - self.times[ind]) / self.timedelta[ind]
        result = self.rotations[ind] * Rotation.from_rotvec(self.rotvecs[ind] * alpha[:, None])
        return result[0] if single else result
