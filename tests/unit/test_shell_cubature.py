"""Cubature training for reduced internal forces (Chadwick, An & James 2009, sec. 2.3; An, Kim & James 2008).

References are independent of the code under test: (1) a synthetic element set built so that an exact sparse
non-negative cubature is known in closed form; (2) a nonlinear spring network whose reduced forces are checked
against central finite differences of its total energy; resumption against an uninterrupted run.
"""
import math

import numpy as np
import pytest

from impactsound.errors import AssetError, InputError
from impactsound.sources.shell.cubature import (Cubature, cached_cubature, cubature_force, full_force,
                                                load_cubature, mode_scales, save_cubature, train_cubature)


# ------------------------------------------------------------------------------ synthetic exact cubature
class Families:
    """N elements, each a positive multiple c_i of one of K nonlinear base forces h_k(q).

    The full sum is sum_k T_k h_k(q), T_k = sum_{i in family k} c_i, so any one element e per family with weight
    T_k / c_e is an exact cubature of K elements."""

    def __init__(self, n=120, k=5, r=4, seed=3):
        rng = np.random.default_rng(seed)
        self.r, self.k, self.n = r, k, n
        self.M = rng.standard_normal((k, r, r))
        self.v = rng.standard_normal((k, r))
        self.c2 = rng.standard_normal((k, r))
        self.u = rng.standard_normal((k, r))
        self.c3 = rng.standard_normal((k, r))
        self.fam = rng.permutation(np.arange(n) % k)
        self.c = rng.uniform(0.5, 2.0, n)
        self.T = np.array([self.c[self.fam == j].sum() for j in range(k)])

    def h(self, Q):                                     # (P, K, r)
        lin = np.einsum("krs,ps->pkr", self.M, Q)
        quad = (Q @ self.v.T)[:, :, None] ** 2 * self.c2[None]
        cub = (Q @ self.u.T)[:, :, None] ** 3 * self.c3[None]
        return lin + quad + cub

    def __call__(self, Q, elements):
        H = self.h(Q)
        return H[:, self.fam[elements], :] * self.c[elements][None, :, None]


def test_exact_sparse_cubature_is_recovered():
    fam = Families()
    omegas = 2 * np.pi * np.array([100.0, 150.0, 220.0, 300.0])
    cub = train_cubature(fam, fam.n, omegas, amplitude=1.0, exponent=1.0, n_train=40, n_holdout=10,
                         target=1e-9, n_candidates=64, seed=1)
    assert cub.train_error < 1e-9 and cub.holdout_error < 1e-9
    assert cub.elements.size == fam.k                        # one per family, no more
    fams = fam.fam[cub.elements]
    assert sorted(fams.tolist()) == list(range(fam.k))
    np.testing.assert_allclose(cub.weights * fam.c[cub.elements], fam.T[fams], rtol=1e-8)
    q = np.array([0.3, -0.2, 0.1, 0.05])
    ref = fam.T @ fam.h(q[None])[0]
    np.testing.assert_allclose(cubature_force(cub, fam, q), ref, rtol=1e-8, atol=1e-12)


# ------------------------------------------------------------------------------------- spring network
class Springs:
    """W_i = k_i (|x_a - x_b| - L_i)^2 on random points, reduced with a random orthonormal basis U."""

    def __init__(self, n_pts=30, n_springs=150, r=6, seed=7):
        rng = np.random.default_rng(seed)
        self.X0 = rng.uniform(0, 1, (n_pts, 3))
        a = rng.integers(0, n_pts, n_springs)
        b = (a + rng.integers(1, n_pts, n_springs)) % n_pts
        self.a, self.b = a, b
        self.L = np.linalg.norm(self.X0[a] - self.X0[b], axis=1)
        self.k = rng.uniform(0.5, 2.0, n_springs) * 1e3
        U, _ = np.linalg.qr(rng.standard_normal((3 * n_pts, r)))
        self.U = U
        self.Ur = U.reshape(n_pts, 3, r)
        self.n, self.r = n_springs, r
        self.calls = 0

    def energy(self, q):
        x = self.X0 + (self.U @ q).reshape(-1, 3)
        l = np.linalg.norm(x[self.a] - x[self.b], axis=1)
        return float(np.sum(self.k * (l - self.L) ** 2))

    def __call__(self, Q, elements):
        self.calls += 1
        el = np.asarray(elements)
        x = self.X0[None] + (Q @ self.U.T).reshape(Q.shape[0], -1, 3)
        a, b = self.a[el], self.b[el]
        d = x[:, a] - x[:, b]                                            # (P, k, 3)
        l = np.linalg.norm(d, axis=2)
        gA = (2 * self.k[el] * (l - self.L[el]) / l)[:, :, None] * d     # dW/dx_a
        return np.einsum("pkc,kcr->pkr", gA, self.Ur[a]) - np.einsum("pkc,kcr->pkr", gA, self.Ur[b])


OMEGAS = 2 * np.pi * np.array([80.0, 95.0, 120.0, 140.0, 170.0, 200.0])
KW = dict(amplitude=0.6, exponent=1.0, n_train=60, n_holdout=60, n_candidates=48, seed=11)


def test_full_force_matches_energy_gradient():
    s = Springs()
    rng = np.random.default_rng(0)
    h = 1e-6
    for _ in range(3):
        q = rng.standard_normal(s.r) * 0.5
        fd = np.array([(s.energy(q + h * e) - s.energy(q - h * e)) / (2 * h) for e in np.eye(s.r)])
        got = full_force(s, s.n, q, chunk=7)
        np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-6 * np.abs(fd).max())


def test_spring_network_error_decreases_and_generalises():
    s = Springs()
    cub = train_cubature(s, s.n, OMEGAS, target=0.05, **KW)
    h = cub.history
    assert cub.meta["stop_reason"] == "target"
    assert cub.train_error <= 0.05 and h[-1] == cub.train_error
    assert np.all(np.diff(h) <= 1e-12)                       # refit over a superset never gets worse
    assert h[0] > 0.3                                         # one element is far from enough
    assert cub.elements.size < s.n // 2                       # sparse
    assert np.all(cub.weights > 0)
    assert cub.holdout_error <= 2 * cub.train_error
    # the cubature estimate at a held-out pose against the exact sum
    q = np.random.default_rng(5).standard_normal(s.r) * mode_scales(OMEGAS, 0.6, 1.0)
    ref = full_force(s, s.n, q)
    est = cubature_force(cub, s, q)
    assert np.linalg.norm(est - ref) / np.linalg.norm(ref) < 0.3


def _same(c1: Cubature, c2: Cubature):
    np.testing.assert_array_equal(c1.elements, c2.elements)
    np.testing.assert_array_equal(c1.weights, c2.weights)
    np.testing.assert_array_equal(c1.history, c2.history)
    assert c1.train_error == c2.train_error
    assert c1.holdout_error == c2.holdout_error or (math.isnan(c1.holdout_error) and math.isnan(c2.holdout_error))


def test_resume_is_bitwise_identical(tmp_path):
    ref = train_cubature(Springs(), 150, OMEGAS, target=0.05, **KW)
    ck = tmp_path / "c.ckpt"
    part = train_cubature(Springs(), 150, OMEGAS, target=0.05, checkpoint=ck, max_iterations=4, **KW)
    assert part.meta["stop_reason"] == "max_iterations" and part.history.size == 4
    done = train_cubature(Springs(), 150, OMEGAS, target=0.05, checkpoint=ck, checkpoint_every=3, **KW)
    assert done.meta["resumed_from_iteration"] == 4
    _same(ref, done)


def test_resume_after_a_crash(tmp_path):
    class Crashing(Springs):
        limit = None

        def __call__(self, Q, elements):
            if self.limit is not None and self.calls >= self.limit:
                raise KeyboardInterrupt
            return super().__call__(Q, elements)

    ref = train_cubature(Springs(), 150, OMEGAS, target=0.05, **KW)
    ck = tmp_path / "c.ckpt"
    s = Crashing()
    s.limit = 1 + 2 * 7                     # one call for the full sum, then 2 per iteration: dies in the 8th
    with pytest.raises(KeyboardInterrupt):
        train_cubature(s, 150, OMEGAS, target=0.05, checkpoint=ck, checkpoint_every=3, **KW)
    assert ck.is_file()
    done = train_cubature(Springs(), 150, OMEGAS, target=0.05, checkpoint=ck, checkpoint_every=3, **KW)
    assert done.meta["resumed_from_iteration"] == 6   # last multiple of checkpoint_every
    _same(ref, done)


def test_checkpoint_with_other_inputs_is_not_used(tmp_path):
    ck = tmp_path / "c.ckpt"
    train_cubature(Springs(), 150, OMEGAS, target=0.05, checkpoint=ck, max_iterations=3, inputs_hash="A", **KW)
    other = train_cubature(Springs(), 150, OMEGAS, target=0.05, checkpoint=ck, inputs_hash="B", **KW)
    assert other.meta["resumed_from_iteration"] == 0
    _same(other, train_cubature(Springs(), 150, OMEGAS, target=0.05, **KW))
    # other settings (seed) with the same inputs hash: not used either
    kw = dict(KW, seed=12)
    again = train_cubature(Springs(), 150, OMEGAS, target=0.05, checkpoint=ck, inputs_hash="B", **kw)
    assert again.meta["resumed_from_iteration"] == 0


def test_asset_round_trip_and_stale_asset_refused(tmp_path):
    s = Springs()
    cub = train_cubature(s, s.n, OMEGAS, target=0.1, **KW)
    p = tmp_path / "cub.h5"
    save_cubature(p, cub, inputs_hash="A")
    back = load_cubature(p, "A")
    _same(cub, back)
    with pytest.raises(AssetError):
        load_cubature(p, "B")
    # cached: a stale asset is rebuilt (element forces evaluated), a matching one is used as is
    s2 = Springs()
    c2 = cached_cubature(p, "B", s2, s2.n, OMEGAS, target=0.1, **KW)
    assert s2.calls > 0
    _same(cub, c2)
    s3 = Springs()
    cached_cubature(p, "B", s3, s3.n, OMEGAS, target=0.1, **KW)
    assert s3.calls == 0
    assert load_cubature(p, "B").elements.size == cub.elements.size


@pytest.mark.parametrize("target", [0.0, -0.1, float("nan"), float("inf")])
def test_bad_target(target):
    s = Springs()
    with pytest.raises(InputError):
        train_cubature(s, s.n, OMEGAS, target=target, **KW)


def test_bad_inputs():
    s = Springs()
    with pytest.raises(InputError):
        train_cubature(s, 0, OMEGAS, **KW)                       # empty element set
    with pytest.raises(InputError):
        train_cubature(s, s.n, [], **KW)                         # no modes
    with pytest.raises(InputError):
        train_cubature(s, s.n, OMEGAS, **dict(KW, amplitude=-1.0))

    def nan_forces(Q, el):
        G = s(Q, el)
        G[:, np.asarray(el) == 17] = np.nan
        return G

    with pytest.raises(InputError, match="17"):
        train_cubature(nan_forces, s.n, OMEGAS, **KW)

    def wrong_shape(Q, el):
        return s(Q, el)[:, :, :2]

    with pytest.raises(InputError):
        train_cubature(wrong_shape, s.n, OMEGAS, **KW)
