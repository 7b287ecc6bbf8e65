"""The reduced nonlinear shell: modal coordinates q with u = U q, and the reduced internal force
f~(q) = U^T f_int(U q) (Chadwick, An & James 2009, sec. 2.2), exactly or by cubature (sec. 2.3).

:class:`ReducedShell` ties a :class:`~impactsound.fem.shell.ShellModel` to its linear modes
(:func:`~impactsound.fem.shell.shell_modes`, U^T M U = I, so q has units m sqrt(kg)):

- :meth:`ReducedShell.force` is the exact reduced force (one full internal-force evaluation, O(Nf) per pose);
- :meth:`ReducedShell.element_forces` gives each triangle's reduced force g_i(q) = U_V^T f_V(U q), the callable
  that :func:`~impactsound.sources.shell.cubature.train_cubature` fits; the sum over all triangles is the exact
  force, a cubature evaluates only its chosen triangles (O(r) each, O(r^2) in all).

SI units: q [m sqrt(kg)], forces [N/sqrt(kg)], omega [rad/s].
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import InputError


@dataclass
class ReducedShell:
    """A shell model reduced to its kept linear modes.

    Attributes
    ----------
    model : ShellModel
    U : ndarray (3 Nv, r)
        Mass-normalised mode shapes [1/sqrt(kg)].
    omega : ndarray (r,)
        Angular frequencies [rad/s].
    """

    model: object
    U: np.ndarray
    omega: np.ndarray

    @classmethod
    def from_modes(cls, model, modes) -> "ReducedShell":
        """From :func:`~impactsound.fem.shell.shell_modes`' result."""
        return cls(model, np.asarray(modes.U, np.float64), np.sqrt(np.asarray(modes.omega2, np.float64)))

    @property
    def r(self) -> int:
        return int(self.U.shape[1])

    def _poses(self, q):
        Q = np.asarray(q, np.float64)
        one = Q.ndim == 1
        Q = np.atleast_2d(Q)
        if Q.shape[1] != self.r or not np.isfinite(Q).all():
            raise InputError(f"reduced shell: q must be finite with {self.r} modal coordinates, got shape "
                             f"{np.shape(q)}")
        return Q, one

    def force(self, q) -> np.ndarray:
        """Exact reduced internal force U^T f_int(U q): (r,) for q (r,), (P, r) for poses (P, r)."""
        Q, one = self._poses(q)
        out = np.stack([self.U.T @ self.model.internal_force(self.U @ qq) for qq in Q])
        return out[0] if one else out

    def element_forces(self, Q, elements) -> np.ndarray:
        """Reduced force of each listed triangle at each pose, g_i(q) = U_V^T f_V(U q): (P, k, r)
        (the callable of :func:`~impactsound.sources.shell.cubature.train_cubature`; its areas are included)."""
        Q, _ = self._poses(Q)
        el = np.asarray(elements, np.int64).reshape(-1)
        m = self.model
        if el.size and (el.min() < 0 or el.max() >= len(m.faces)):
            raise InputError(f"reduced shell: element indices must lie in [0, {len(m.faces)})")
        U3 = self.U.reshape(-1, 3, self.r)                       # (Nv, 3, r)
        Um = U3[m.faces[el]]                                     # (k, 3, 3, r)
        Ub = U3[m.stencil[el]]                                   # (k, 6, 3, r)
        out = np.empty((len(Q), len(el), self.r))
        for p, qq in enumerate(Q):                               # poses: training sets hold about a hundred
            fm, fb = m.element_forces(self.U @ qq)
            out[p] = (np.einsum("kvc,kvcr->kr", fm[el], Um) + np.einsum("kvc,kvcr->kr", fb[el], Ub))
        return out
