"""The material table: elastic constants, density and damping, in SI units.

The data lives in ``data/materials.toml`` (shipped with the package), each row with its source: Chadwick, An &
James 2009, "Harmonic Shells", Table 1 (steel, bronze, polycarbonate: E, nu, alpha, beta), Chadwick, Zheng &
James 2012, "Precomputed Acceleration Noise", Table 1 (copper, glass, ceramic: E, nu, rho), handbook values
otherwise; the damping of materials without a paper source is a typical starting value, tuned by ear (the
package's choice). Look a material up by name with :func:`get_material`, or build one from explicit constants
with :func:`make_material` (both validate).

Damping per mode: Rayleigh damping D = alpha M + beta K (as in Harmonic Shells, sec. 2.1, after Bathe 1996) gives
xi = (alpha/w + beta w)/2. The PAN paper (sec. 5) added a term proportional to the inverse stiffness matrix
without giving its form; the package's form is gamma M K^+ M (K^+ the inverse on the elastic subspace), which
stays diagonal in the mass-normalised modes (U^T M K^+ M U = diag(1/w^2)) and adds gamma/w^3 to 2 xi: it damps
low modes harder.
"""
from __future__ import annotations

import difflib
import math
import tomllib
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources

from .errors import MaterialError


@dataclass(frozen=True)
class Material:
    """An isotropic linear-elastic material (build it with :func:`make_material`, which validates).

    Attributes
    ----------
    name : str
        Table key or a user's name.
    rho : float
        Density [kg/m^3].
    E : float
        Young's modulus [Pa].
    nu : float
        Poisson's ratio [-].
    alpha : float
        Rayleigh mass-proportional damping [1/s].
    beta : float
        Rayleigh stiffness-proportional damping [s].
    gamma : float
        Inverse-stiffness damping [1/s^3] (module docstring); per mode xi = (alpha/w + beta w + gamma/w^3)/2.
    friction : float
        Coulomb friction coefficient [-], used only by the rigid-body engine.
    restitution : float
        Coefficient of restitution [-] in [0, 1], used only by the rigid-body engine.
    """

    name: str
    rho: float
    E: float
    nu: float
    alpha: float = 0.0
    beta: float = 0.0
    gamma: float = 0.0
    friction: float = 0.5
    restitution: float = 0.5

    @property
    def lame(self) -> tuple[float, float]:
        """Lame constants (lambda, mu) [Pa]: lambda = E nu / ((1 + nu)(1 - 2 nu)), mu = E / (2 (1 + nu))."""
        lam = self.E * self.nu / ((1 + self.nu) * (1 - 2 * self.nu))
        mu = self.E / (2 * (1 + self.nu))
        return lam, mu

    @property
    def c_p(self) -> float:
        """Pressure (longitudinal) wave speed sqrt((lambda + 2 mu)/rho) [m/s]."""
        lam, mu = self.lame
        return math.sqrt((lam + 2 * mu) / self.rho)

    @property
    def c_s(self) -> float:
        """Shear wave speed sqrt(mu/rho) [m/s]."""
        return math.sqrt(self.lame[1] / self.rho)

    def damping_ratio(self, omega):
        """Per-mode damping ratio xi = (alpha/omega + beta omega + gamma/omega^3)/2 (module docstring).

        Parameters
        ----------
        omega : float or ndarray
            Undamped angular frequency [rad/s], > 0.

        Returns
        -------
        float or ndarray
            xi [-] (>= 1: overdamped).
        """
        return 0.5 * (self.alpha / omega + self.beta * omega + self.gamma / omega**3)

    def as_dict(self) -> dict:
        """The fields as a dict (name, rho, E, nu, alpha, beta, gamma, friction, restitution; SI units).

        Returns
        -------
        dict
        """
        return asdict(self)


@lru_cache(maxsize=1)
def _table() -> dict[str, dict]:
    text = resources.files("impactsound").joinpath("data/materials.toml").read_text()
    return tomllib.loads(text)


def material_names() -> list[str]:
    """Names of the shipped materials.

    Returns
    -------
    list of str
        Sorted table keys.
    """
    return sorted(_table())


def make_material(name: str = "custom", *, rho: float, E: float, nu: float, alpha: float = 0.0,
                  beta: float = 0.0, gamma: float = 0.0, friction: float = 0.5, restitution: float = 0.5,
                  where: str = "material") -> Material:
    """Build and validate a material from explicit constants.

    Parameters
    ----------
    name : str, optional
        The material's name.
    rho : float
        Density [kg/m^3], > 0.
    E : float
        Young's modulus [Pa], > 0.
    nu : float
        Poisson's ratio, in (-1, 0.5).
    alpha, beta, gamma : float, optional
        Damping [1/s], [s], [1/s^3], >= 0 (see :class:`Material`).
    friction : float, optional
        Friction coefficient, >= 0.
    restitution : float, optional
        Coefficient of restitution, in [0, 1].
    where : str, optional
        Names the field in error messages.

    Returns
    -------
    Material

    Raises
    ------
    MaterialError
        On a non-numeric, non-finite or out-of-range value.
    """
    vals = dict(rho=rho, E=E, nu=nu, alpha=alpha, beta=beta, gamma=gamma, friction=friction,
                restitution=restitution)
    for key, v in vals.items():
        try:
            fv = float(v)
        except (TypeError, ValueError):
            raise MaterialError(f"{where}.{key} = {v!r} is not a number") from None
        if not math.isfinite(fv):
            raise MaterialError(f"{where}.{key} = {v!r} must be finite")
        vals[key] = fv
    if vals["rho"] <= 0:
        raise MaterialError(f"{where}.rho = {vals['rho']} kg/m^3 must be positive")
    if vals["E"] <= 0:
        raise MaterialError(f"{where}.E = {vals['E']} Pa must be positive (Young's modulus in pascals)")
    if not (-1.0 < vals["nu"] < 0.5):
        raise MaterialError(f"{where}.nu = {vals['nu']} must lie in (-1, 0.5) (Poisson's ratio)")
    for key in ("alpha", "beta", "gamma", "friction"):
        if vals[key] < 0:
            raise MaterialError(f"{where}.{key} = {vals[key]} must not be negative")
    if not (0.0 <= vals["restitution"] <= 1.0):
        raise MaterialError(f"{where}.restitution = {vals['restitution']} must lie in [0, 1]")
    return Material(name=name, **vals)


def _key(name: str) -> str:
    key = str(name).strip().lower().replace(" ", "_").replace("-", "_")
    return _ALIASES.get(key, key)


_ALIASES = {"aluminum": "aluminium", "wood": "wood_hard", "hardwood_on_slab": "wood_hard", "plastic": "abs_plastic",
            "abs": "abs_plastic",
            "stainless": "stainless_steel", "porcelain": "ceramic", "soil": "packed_soil", "board": "particle_board"}


def ground_fit(material) -> str:
    """How well an elastic half-space models a floor of this material (Qu & James 2019 treat the ground as one).

    Parameters
    ----------
    material : Material or str
        A shipped material or its name.

    Returns
    -------
    str
        The table's ``ground`` entry: "good...", "fair: why" or "poor: why"; "" for a material that is not a
        floor material (or a user's own constants).
    """
    name = material.name if isinstance(material, Material) else material
    return str(_table().get(_key(name), {}).get("ground", ""))


def get_material(name: str, where: str = "material") -> Material:
    """Look up a shipped material by name.

    Parameters
    ----------
    name : str
        Table key, case-insensitive; spaces and hyphens read as underscores; a few aliases (aluminum, wood,
        plastic, abs, stainless, porcelain).
    where : str, optional
        The scene field this comes from, for messages.

    Returns
    -------
    Material
        The table row, validated by :func:`make_material`.

    Raises
    ------
    MaterialError
        On an unknown name (the message lists the closest ones and all known materials).
    """
    table = _table()
    key = _key(name)
    if key not in table:
        close = difflib.get_close_matches(key, list(table), n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise MaterialError(f"{where}: unknown material {name!r}.{hint} Known materials: "
                            f"{', '.join(sorted(table))} (or give E, nu and rho explicitly).")
    row = {k: v for k, v in table[key].items() if k not in ("source", "ground")}
    return make_material(key, where=where, **row)


def material_table() -> list[dict]:
    """The shipped table.

    Returns
    -------
    list of dict
        One dict per material, sorted by name: ``name``, the constants (SI units), ``source`` and, for floor
        materials, ``ground`` (how well the elastic half-space of the ground-sound model fits it).
    """
    out = []
    for name in material_names():
        row = dict(_table()[name])
        out.append({"name": name, **row})
    return out
