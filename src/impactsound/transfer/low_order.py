"""Low-order (compact, ka << 1) radiation of vibration modes: monopole + dipole.

Fallback transfer model, to be replaced by BEM / FFAT transfer where accuracy matters. The monopole term alone is
the far-field monopole model of James, Barbic & Pai 2006, "Precomputed Acoustic Transfer", eq. 15 (the
"Linear/Monopole" baseline of Chadwick, An & James 2009, "Harmonic Shells", sec. 5); it is zero for
volume-preserving modes. The dipole term is the package's addition (the next term of the compact-source multipole
expansion); it omits the pressure scattered by the surface, so for a rigidly oscillating sphere it gives 2/3 of
the true dipole. Per mode j, with the
surface S of the body (outward normal n, body frame, centre of mass x0 at the origin):

    V_j = int_S n . u_j dA                      [m^3 / sqrt(kg)]   volume velocity per unit q_j'  (monopole)
    D_j = int_S (y - x0) (n . u_j) dA           [m^4 / sqrt(kg)]   first moment                   (dipole)
    p_j(x, t) = rho / (4 pi r) [ V_j q_j''(t_r) + (r_hat . D_j) (q_j'''(t_r) / c + q_j''(t_r) / r) ]
    t_r = t - r/c,  r = |x - x0|,  r_hat = (x - x0)/r

The pressure is a fixed linear combination of q'' and q''' of each mode, so it is expressed as
``basis`` (F = 4 features [V; D_x; D_y; D_z] per mode) and per-listener ``geometry`` coefficients for the time
derivatives k = 0..3 of q (sources/modal_kernel.py consumes exactly this form):

    weight of q_j^{(2)} = a (V_j + (r_hat . D_j) / r),   weight of q_j^{(3)} = a (r_hat . D_j) / c,   a = rho/(4 pi r)

A replacement transfer supplies the same (basis, geometry, delay) triple.

Surface integrals. P1: shapes interpolated linearly over flat triangles; n . u is linear and (y - x0)(n . u) is
quadratic on each triangle, integrated exactly (int lambda_a dA = A/3, int lambda_a lambda_b dA = A (1 +
delta_ab)/12). P2 (``faces6``): 6-node quadratic shape functions on the straight triangle spanned by the three
vertices; the integrands are quadratic and cubic, integrated exactly with the 6-point degree-4 Dunavant rule.

Time convention (frequency-domain helper :func:`compact_harmonic`): e^{-i w t}, the package's convention
throughout (see transfer/bem.py), so a time derivative is -i w and the outgoing wave is e^{+i k r}.
"""
from __future__ import annotations

import numpy as np

# Dunavant (1985) degree-4 rule on the reference triangle: barycentric points and weights (sum 1)
_D4_A1, _D4_B1, _D4_W1 = 0.445948490915965, 0.108103018168070, 0.223381589678011
_D4_A2, _D4_B2, _D4_W2 = 0.091576213509771, 0.816847572980459, 0.109951743655322
_D4_POINTS = np.array([[_D4_B1, _D4_A1, _D4_A1], [_D4_A1, _D4_B1, _D4_A1], [_D4_A1, _D4_A1, _D4_B1],
                       [_D4_B2, _D4_A2, _D4_A2], [_D4_A2, _D4_B2, _D4_A2], [_D4_A2, _D4_A2, _D4_B2]])
_D4_WEIGHTS = np.array([_D4_W1] * 3 + [_D4_W2] * 3)


def _face_geometry(nodes, faces):
    tri = nodes[faces[:, :3]]                                          # (nf, 3 vertices, 3)
    cr = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    area2 = np.linalg.norm(cr, axis=1)                                 # 2 A
    nrm = cr / np.where(area2 > 0, area2, 1.0)[:, None]
    return tri, 0.5 * area2, nrm


def surface_moments(nodes, faces, shapes, faces6=None, x0=(0.0, 0.0, 0.0), mode_block: int = 64):
    """Monopole V_j and dipole D_j moments of mode shapes over a closed surface (module docstring).

    Parameters
    ----------
    nodes : array_like, shape (ns, 3)
        Surface nodes [m], body frame.
    faces : array_like, shape (nf, 3)
        Outward counter-clockwise vertex indices.
    shapes : array_like, shape (m, ns, 3) or (ns, 3)
        Mode shapes at the nodes [1/sqrt(kg)] (any per-node vector field).
    faces6 : array_like, shape (nf, 6), optional
        (v0, v1, v2, m01, m12, m20) per face for P2; None for P1.
    x0 : array_like, shape (3,), optional
        Expansion centre [m].
    mode_block : int, optional
        Modes per vectorised block (memory bound only).

    Returns
    -------
    V : ndarray, shape (m,)
        Monopole moments [m^3/sqrt(kg)].
    D : ndarray, shape (m, 3)
        Dipole moments [m^4/sqrt(kg)].
    """
    nodes = np.asarray(nodes, np.float64)
    faces = np.asarray(faces, np.int64)
    shapes = np.asarray(shapes, np.float64)
    if shapes.ndim == 2:
        shapes = shapes[None]
    m = shapes.shape[0]
    y = nodes - np.asarray(x0, np.float64)
    tri, area, nrm = _face_geometry(nodes, faces)
    V = np.zeros(m)
    D = np.zeros((m, 3))
    if faces6 is None:
        yv = y[faces]                                                  # (nf, 3, 3)
        for a in range(0, m, mode_block):                              # blocks of modes bound the memory
            sh = shapes[a:a + mode_block]
            # n . u at the three vertices of each face: (mb, nf, 3)
            un = np.stack([np.einsum("mfc,fc->mf", sh[:, faces[:, k], :], nrm) for k in range(3)], axis=2)
            # int n.u dA = A/3 sum_k (n.u)_k
            V[a:a + mode_block] = (un.sum(axis=2) * area).sum(axis=1) / 3.0
            # int y (n.u) dA = A/12 [ (sum_a y_a)(sum_b (n.u)_b) + sum_a y_a (n.u)_a ]
            tot = np.einsum("mf,fc->mfc", un.sum(axis=2), yv.sum(axis=1))
            diag = np.einsum("mfk,fkc->mfc", un, yv)
            D[a:a + mode_block] = np.einsum("mfc,f->mc", tot + diag, area) / 12.0
        return V, D
    f6 = np.asarray(faces6, np.int64)
    l = _D4_POINTS
    N6 = np.stack([l[:, 0] * (2 * l[:, 0] - 1), l[:, 1] * (2 * l[:, 1] - 1), l[:, 2] * (2 * l[:, 2] - 1),
                   4 * l[:, 0] * l[:, 1], 4 * l[:, 1] * l[:, 2], 4 * l[:, 2] * l[:, 0]], axis=1)   # (6 qp, 6)
    yq = np.einsum("qk,fkc->fqc", l, y[faces[:, :3]])                  # straight-triangle geometry (nf, 6, 3)
    wA = area[:, None] * _D4_WEIGHTS[None, :]                          # (nf, 6)
    for a in range(0, m, mode_block):
        sh = shapes[a:a + mode_block]
        un_nodes = np.stack([np.einsum("mfc,fc->mf", sh[:, f6[:, k], :], nrm) for k in range(6)], axis=2)
        unq = np.einsum("mfk,qk->mfq", un_nodes, N6)                    # n.u at the quadrature points
        V[a:a + mode_block] = np.einsum("mfq,fq->m", unq, wA)
        D[a:a + mode_block] = np.einsum("mfq,fq,fqc->mc", unq, wA, yq)
    return V, D


def model_moments(model):
    """Moments of a modal model's modes about its centre of mass (the body origin).

    Parameters
    ----------
    model : ModalModel
        A :class:`~impactsound.fem.model.ModalModel` (surface nodes, faces, optional P2 faces6, shapes).

    Returns
    -------
    V, D : ndarray
        As :func:`surface_moments`.
    """
    nv = model.n_surface_vertices
    return surface_moments(model.surface_nodes if model.surface_faces6 is not None
                           else model.surface_nodes[:nv], model.surface_faces, model.shapes
                           if model.surface_faces6 is not None else model.shapes[:, :nv],
                           model.surface_faces6)


def compact_basis(V, D) -> np.ndarray:
    """Per-mode features for :func:`compact_geometry`.

    Parameters
    ----------
    V : array_like, shape (m,)
        Monopole moments [m^3/sqrt(kg)].
    D : array_like, shape (m, 3)
        Dipole moments [m^4/sqrt(kg)].

    Returns
    -------
    ndarray, shape (4, m)
        [V; D_x; D_y; D_z].
    """
    return np.vstack([np.asarray(V, np.float64)[None, :], np.asarray(D, np.float64).T])


def compact_geometry(x_body, c: float, rho: float, x0=(0.0, 0.0, 0.0)):
    """Compact-model coefficients for listener positions in the body frame.

    The pressure of mode j [Pa] is sum_{k,f} geom[..., k, f] basis[f, j] q_j^{(k)}(t - r/c) (module docstring).

    Parameters
    ----------
    x_body : array_like, shape (..., 3)
        Listener positions [m], body frame.
    c : float
        Speed of sound [m/s].
    rho : float
        Air density [kg/m^3].
    x0 : array_like, shape (3,), optional
        Expansion centre [m].

    Returns
    -------
    geom : ndarray, shape (..., 4, 4)
        Coefficients by (time-derivative order k, feature f).
    delay : ndarray, shape (...)
        r/c [s].

    Raises
    ------
    InputError
        If a listener is at x0 (a ValueError too).
    """
    x = np.asarray(x_body, np.float64) - np.asarray(x0, np.float64)
    r = np.linalg.norm(x, axis=-1)
    if np.any(r <= 0):
        from ..errors import InputError
        raise InputError("a listener is at an object's centre of mass (distance 0), where its radiation is "
                         "undefined: move the listener (a [[listener]] position or trajectory, or strike()'s "
                         "listener) off the object")
    rhat = x / r[..., None]
    a = rho / (4.0 * np.pi * r)
    geom = np.zeros(x.shape[:-1] + (4, 4))
    geom[..., 2, 0] = a                                                # V q''
    geom[..., 2, 1:] = (a / r)[..., None] * rhat                       # (r_hat.D) q'' / r
    geom[..., 3, 1:] = (a / c)[..., None] * rhat                       # (r_hat.D) q''' / c
    return geom, r / c


#: the (derivative order k, feature f) entries of :func:`compact_geometry` that are not zero
COMPACT_NONZERO = ((2, 0), (2, 1), (2, 2), (2, 3), (3, 1), (3, 2), (3, 3))


def compact_weights(x_body, s, V, D, c: float, rho: float, scale=None):
    """Complex radiation weights W_j = sum_k c_kj s_j^k of the compact model (q_j^{(k)} = Im(s_j^k Z_j) after
    contact), real and imaginary parts, for listener positions (..., 3) [m] in the body frame and poles s (m,).

    ``scale`` (...,), optional: a factor per position (e.g. a moving source's convective amplification).
    Returns (W.real, W.imag), each (..., m)."""
    g, B = compact_weight_factors(x_body, s, V, D, c, rho, scale)
    g2 = g.reshape(-1, g.shape[-1])                                                    # one BLAS product each
    shape = g.shape[:-1] + (len(s),)
    return (g2 @ np.ascontiguousarray(B.real)).reshape(shape), (g2 @ np.ascontiguousarray(B.imag)).reshape(shape)


def compact_weight_factors(x_body, s, V, D, c: float, rho: float, scale=None):
    """The compact model's weights in factored form W = g B (:func:`compact_weights` forms the product): the seven
    non-zero geometric coefficients g (..., 7) of :func:`compact_geometry` (times ``scale``) and the complex
    (7, m) basis B_kf,j = basis_f,j s_j^k. A renderer that needs W at many listener positions forms it there."""
    geom, _ = compact_geometry(x_body, c, rho)
    g = np.stack([geom[..., k, f] for k, f in COMPACT_NONZERO], axis=-1)               # (..., 7)
    if scale is not None:
        g = g * np.asarray(scale)[..., None]
    basis = compact_basis(V, D)
    s = np.asarray(s)
    return g, np.stack([basis[f] * s**k for k, f in COMPACT_NONZERO])                  # (7, m) complex


def compact_harmonic(V, D, x_body, omega, c: float, rho: float, x0=(0.0, 0.0, 0.0)) -> np.ndarray:
    """Complex pressure of the compact model per unit complex modal amplitude Q_j (e^{-i w t}: q = Re(Q e^{-i w t}),
    d/dt -> -i w, outgoing e^{+i k r}).

    Parameters
    ----------
    V, D : array_like
        Moments, as :func:`compact_basis`.
    x_body : array_like, shape (..., 3)
        Listener positions [m], body frame.
    omega : float or array_like, shape (m,)
        Angular frequency [rad/s] (one, or one per mode).
    c, rho : float
        Speed of sound [m/s] and air density [kg/m^3].
    x0 : array_like, shape (3,), optional
        Expansion centre [m].

    Returns
    -------
    ndarray of complex, shape (..., m)
        p [Pa] per unit Q_j, with the delay phase e^{i w r/c}.
    """
    geom, delay = compact_geometry(x_body, c, rho, x0)
    basis = compact_basis(V, D)
    omega = np.asarray(omega, np.float64)
    coef = np.einsum("...kf,fm->...km", geom, basis)                    # (..., 4, m)
    dk = np.stack([(-1j * omega) ** k for k in range(4)], axis=0)      # (4, m) or (4,)
    if dk.ndim == 1:
        dk = dk[:, None]
    return np.einsum("...km,km->...m", coef, dk) * np.exp(1j * omega * delay[..., None])
