"""The material table: elastic constants, density and damping, in SI units.

The data lives in ``data/materials.toml`` (shipped with the package); values and sources are those of
specs/modal-sound.md section 9. Look a material up by name with :func:`get_material`, or build one from
explicit constants with :func:`make_material` (both validate).
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
    """An isotropic linear-elastic material.

    rho [kg/m^3], E [Pa], nu [-]; Rayleigh damping alpha [1/s] and beta [s], inverse-stiffness damping gamma
    [1/s^3] (per mode: xi = (alpha/w + beta w + gamma/w^3)/2, modal-sound.md sec. 3); friction and restitution
    are used only by the rigid-body engine.
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
        """(lambda, mu) [Pa]."""
        lam = self.E * self.nu / ((1 + self.nu) * (1 - 2 * self.nu))
        mu = self.E / (2 * (1 + self.nu))
        return lam, mu

    @property
    def c_p(self) -> float:
        lam, mu = self.lame
        return math.sqrt((lam + 2 * mu) / self.rho)

    @property
    def c_s(self) -> float:
        return math.sqrt(self.lame[1] / self.rho)

    def damping_ratio(self, omega):
        """Per-mode damping ratio xi(omega) for angular frequency omega [rad/s] (modal-sound.md sec. 3)."""
        return 0.5 * (self.alpha / omega + self.beta * omega + self.gamma / omega**3)

    def as_dict(self) -> dict:
        return asdict(self)


@lru_cache(maxsize=1)
def _table() -> dict[str, dict]:
    text = resources.files("impactsound").joinpath("data/materials.toml").read_text()
    return tomllib.loads(text)


def material_names() -> list[str]:
    return sorted(_table())


def make_material(name: str = "custom", *, rho: float, E: float, nu: float, alpha: float = 0.0,
                  beta: float = 0.0, gamma: float = 0.0, friction: float = 0.5, restitution: float = 0.5,
                  where: str = "material") -> Material:
    """Build and validate a material from explicit constants. ``where`` names the field in error messages."""
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


def get_material(name: str, where: str = "material") -> Material:
    """Look up a shipped material by name (case-insensitive); unknown names list the closest ones."""
    table = _table()
    key = str(name).strip().lower().replace(" ", "_").replace("-", "_")
    aliases = {"aluminum": "aluminium", "wood": "wood_hard", "plastic": "abs_plastic", "abs": "abs_plastic",
               "stainless": "stainless_steel", "porcelain": "ceramic"}
    key = aliases.get(key, key)
    if key not in table:
        close = difflib.get_close_matches(key, list(table), n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise MaterialError(f"{where}: unknown material {name!r}.{hint} Known materials: "
                            f"{', '.join(sorted(table))} (or give E, nu and rho explicitly).")
    row = {k: v for k, v in table[key].items() if k != "source"}
    return make_material(key, where=where, **row)


def material_table() -> list[dict]:
    """The shipped table as a list of dicts (with each row's source)."""
    out = []
    for name in material_names():
        row = dict(_table()[name])
        out.append({"name": name, **row})
    return out
