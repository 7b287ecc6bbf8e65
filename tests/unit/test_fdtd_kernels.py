"""FDTD kernels (wave/fdtd.py): the temporally blocked, multi-threaded sweep against a plain NumPy implementation
of the same scheme (a moving body with one-sided faces and a thin plate of wall faces), schedule independence
(threads, steps per pass, z-layer padding), and the absorbing layer the PAN plan uses by default."""
import numpy as np
import pytest

from impactsound.errors import SolverError
from impactsound.sources.pan.pulse import psi as pulse
from impactsound.wave import fdtd
from impactsound.wave.fdtd import COURANT_LIMIT, FDTDSolver, Grid, centred_grid
from impactsound.wave.voxel import thin_walls, voxelize

C, RHO = 343.2, 1.2041


def _ellipsoid(P):
    return np.linalg.norm((P - [0.0015, -0.001, 0.0005]) / [0.005, 0.0035, 0.004], axis=1) < 1.0


def _reference(grid, dt, body, G, scale, src_cell, src_inc, recv, n_steps):
    """Plain NumPy version of the scheme (full-size CPML memory arrays): per step v^{n+1/2} from p^n with the
    layer terms, p^{n+1} from v^{n+1/2} with the layer terms, body faces reset to G * scale[n] with the air cell
    corrected, solid layer cleared, point source added; receivers trilinear."""
    n = grid.shape
    dx = grid.dx
    cv, cp, vc, pc = dt / (RHO * dx), RHO * C * C * dt / dx, dt / RHO, RHO * C * C * dt
    p = np.zeros(tuple(m + 2 for m in n))
    v = [np.zeros_like(p) for _ in range(3)]
    af, bf, ac, bc = [], [], [], []
    for ax in range(3):
        (fi, fa, fb), (ci, ca, cb) = fdtd._cpml_profile(grid, ax, C, dt)
        shape = [1, 1, 1]
        shape[ax] = n[ax]
        for idx, a, b, A, Bl in ((fi, fa, fb, af, bf), (ci, ca, cb, ac, bc)):
            a_full, b_full = np.zeros(n[ax] + 2), np.ones(n[ax] + 2)
            a_full[idx], b_full[idx] = a / dx, b
            A.append(a_full[1:-1].reshape(shape))       # interior cells/faces 1..n along ax
            Bl.append(b_full[1:-1].reshape(shape))
    psf = [np.zeros_like(p) for _ in range(3)]
    psc = [np.zeros_like(p) for _ in range(3)]
    I = (slice(1, -1),) * 3
    out = np.zeros((len(recv), n_steps))
    x = (recv - grid.origin) / dx + 0.5
    i0 = np.floor(x).astype(int)
    w = x - i0
    for step in range(n_steps):
        for ax in range(3):
            up = [slice(1, -1)] * 3
            up[ax] = slice(2, None)
            d = p[tuple(up)] - p[I]
            psf[ax][I] = bf[ax] * psf[ax][I] + af[ax] * d
            v[ax][I] = (v[ax][I] - cv * d) - vc * psf[ax][I]
        if body is not None:                      # wall faces (air on both sides): the wall's velocity
            for m, (ax, i, j, k, sg) in enumerate(body.faces):
                if sg == 0:
                    v[ax][i, j, k] = G[m] * scale[step]
        div = []
        for ax in range(3):
            dn = [slice(1, -1)] * 3
            dn[ax] = slice(0, -2)
            div.append(v[ax][I] - v[ax][tuple(dn)])
        p[I] -= cp * (div[0] + div[1] + div[2])
        for ax in range(3):
            psc[ax][I] = bc[ax] * psc[ax][I] + ac[ax] * div[ax]
            p[I] -= pc * psc[ax][I]
        if body is not None:
            for m, (ax, i, j, k, sg) in enumerate(body.faces):
                if sg == 0:
                    continue
                vb = G[m] * scale[step]
                d = vb - v[ax][i, j, k]
                v[ax][i, j, k] = vb
                if sg > 0:
                    p[i, j, k] -= cp * d
                else:
                    a = [i, j, k]
                    a[ax] += 1
                    p[tuple(a)] += cp * d
            p[tuple(body.solid.T)] = 0.0
        if src_cell is not None:
            p[tuple(src_cell)] += src_inc[step]
        for r in range(len(recv)):
            acc = 0.0
            for di in range(2):
                for dj in range(2):
                    for dk in range(2):
                        acc += ((w[r, 0] if di else 1 - w[r, 0]) * (w[r, 1] if dj else 1 - w[r, 1])
                                * (w[r, 2] if dk else 1 - w[r, 2]) * p[i0[r, 0] + di, i0[r, 1] + dj, i0[r, 2] + dk])
            out[r, step] = acc
    return p, out


def _plate_walls(g):
    """Wall faces of a slanted zero-thickness plate beside the ellipsoid (crossing x, y and z faces)."""
    V = np.array([[0.0072, -0.004, -0.004], [0.0088, -0.004, 0.003], [0.0080, 0.004, 0.004], [0.0070, 0.003, -0.003]])
    F = np.array([[0, 1, 2], [0, 2, 3]])
    return thin_walls(V, F, *(g.cell_centres(a)[1:-1] for a in range(3)), open_surface=True)


def _setup(threads=2, block=4, dtype=np.float64, npml=5):
    g = centred_grid(0.012, 1e-3, npml=npml)
    s = FDTDSolver(g, C, RHO, dtype=dtype, threads=threads, block_steps=block)
    body = voxelize(g, _ellipsoid, _plate_walls(g))
    assert {0, 1, 2} <= set(body.faces[body.faces[:, 4] == 0, 0])       # walls along every axis
    s.set_body(body)
    rng = np.random.default_rng(1)
    recv = rng.uniform(-0.0105, 0.0105, (12, 3))
    s.set_receivers(recv)
    G = body.centres[:, 1] * 40 + (body.faces[:, 0] == 2)
    return g, s, body, G, recv


def _drive(s, n_steps):
    scale = np.cumsum(s.dt * np.sin(np.arange(n_steps) * 0.4) * (np.arange(n_steps) < 12))
    src = np.array([5, 20, 9])
    rates = 1e-7 * np.exp(-0.5 * ((np.arange(n_steps) - 6) / 2.0) ** 2)[:, None]
    return scale, src, rates


def test_blocked_threaded_sweep_matches_numpy_reference():
    n_steps = 23                                   # not a multiple of the block: a short last block
    g, s, body, G, recv = _setup(threads=2, block=4)
    scale, src, rates = _drive(s, n_steps)
    rec = s.run(n_steps, body_pattern=G, body_scale=scale, source_cells=src[None], source_rates=rates)
    p_ref, rec_ref = _reference(g, s.dt, body, G, scale, src, s._source_increment(rates[:, 0]), recv, n_steps)
    assert np.abs(s.p).max() > 0 and np.abs(rec_ref).max() > 0
    assert np.abs(s.p - p_ref).max() < 1e-12 * np.abs(p_ref).max()
    assert np.abs(rec - rec_ref).max() < 1e-12 * np.abs(rec_ref).max()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_result_independent_of_schedule(dtype, monkeypatch):
    """Threads, steps per pass and the z-layer padding change the schedule, never the bits."""
    n_steps = 17
    results = []
    for threads, block, pad in ((1, 1, 1), (1, 4, 16), (2, 4, 16), (3, 3, 16), (2, 5, 1), (2, 1, 16)):
        monkeypatch.setattr(fdtd, "Z_LAYER_PAD", pad)
        g, s, body, G, recv = _setup(threads, block, dtype)
        scale, src, rates = _drive(s, n_steps)
        rec = s.run(n_steps, body_pattern=G, body_scale=scale, source_cells=src[None], source_rates=rates)
        results.append((s.p.copy(), rec))
    for p, rec in results[1:]:
        assert np.array_equal(p, results[0][0]) and np.array_equal(rec, results[0][1])


def test_step_and_run_agree():
    """step() (one step per call, receive() after it) and run() are the same scheme."""
    g, s1, body, G, recv = _setup(threads=2, block=4)
    _, s2, _, _, _ = _setup(threads=2, block=4)
    n_steps = 9
    scale, src, rates = _drive(s1, n_steps)
    rec2 = s2.run(n_steps, body_pattern=G, body_scale=scale, source_cells=src[None], source_rates=rates)
    rec1 = np.zeros_like(rec2)
    prev = 0.0
    for n in range(n_steps):
        s1.step(body_velocity_increment=G * (scale[n] - prev), source=(src, rates[n, 0]))
        prev = scale[n]
        rec1[:, n] = s1.receive()
    assert np.abs(rec1 - rec2).max() < 1e-12 * np.abs(rec2).max()
    assert s2.n == s1.n == n_steps


def test_run_rejects_bad_body_drive_and_blow_up():
    g, s, body, G, recv = _setup()
    with pytest.raises(SolverError, match="body_pattern"):
        s.run(5, body_pattern=G[:-1], body_scale=np.ones(5))
    s.p[tuple(s._recv_idx[0])] = np.inf
    with pytest.raises(SolverError, match="blew up"):
        s.run(8)


def test_unstable_dt_rejected_in_both_precisions():
    g = Grid((12, 12, 12), 1e-3)
    dt_max = COURANT_LIMIT * 1e-3 / C
    for dtype in (np.float32, np.float64):
        FDTDSolver(g, C, RHO, dt=dt_max, dtype=dtype)
        with pytest.raises(SolverError, match=f"{dt_max:.6g}"):
            FDTDSolver(g, C, RHO, dt=1.001 * dt_max, dtype=dtype)
    with pytest.raises(SolverError, match="float32 or float64"):
        FDTDSolver(g, C, RHO, dtype=np.float16)


def _monopole_pan_pulse(grid, offs, n_travel, dx=1e-3):
    """A point monopole driven by the PAN pulse at the PAN plan's resolution (10 cells per wavelength at 1/(2h)),
    which has more energy near the grid's cut-off than a Gaussian: the harder case for the absorbing layer."""
    s = FDTDSolver(grid, C, RHO, dtype=np.float64)
    h = 5 * dx / C
    src = np.array([grid.shape[0] // 2 + 1] * 3)
    xs = grid.origin + (src - 0.5) * dx
    s.set_receivers(xs + np.asarray(offs, float) * dx)
    n = int((4 * h + n_travel * dx / C) / s.dt)
    q = 1e-6 * pulse((np.arange(n) + 0.5) * s.dt - 2 * h, h)
    return s.run(n, source_cells=src[None], source_rates=q[:, None])


def test_default_layer_reflects_below_minus_40_db_for_the_pan_pulse():
    offs = [[12, 0, 0], np.array([1, 1, 0]) / np.sqrt(2) * 12, np.array([1, 1, 1]) / np.sqrt(3) * 12]
    small = _monopole_pan_pulse(centred_grid(0.016, 1e-3), offs, 60)              # default npml
    big = _monopole_pan_pulse(centred_grid(0.070, 1e-3), offs, 60)                # nothing returns in time
    db = 20 * np.log10(np.abs(small - big).max(axis=1) / np.abs(big).max(axis=1))
    assert np.all(db < -40), db
