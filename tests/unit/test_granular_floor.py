"""Grains striking the floor sound as the floor: the ground source's elastic half-space (Qu & James 2019) driven
by each grain's Hertz impact, rendered by the container source (sources/granular/source.py: floor_pressure)."""
import math

import numpy as np
import pytest

from impactsound.materials import get_material
from impactsound.scene.model import Air
from impactsound.sources.granular.events import CONTAINER, GranularEvents
from impactsound.sources.granular.source import floor_pressure
from impactsound.sources.ground.bank import response_bank
from impactsound.sources.ground.source import half_space


def test_one_grain_on_the_floor_is_a_hertz_impact_of_the_half_space(tmp_path, monkeypatch):
    """Independent numbers: the impulse from momentum, J = (1 + e) m v0 (a heavy floor), and the contact time from
    Johnson's Hertz formula t_c = 2.868 (m^2 / (a E*^2 v0))^(1/5) (Contact Mechanics, 1985, sec. 11.4); the
    floor's force is the ground source's kernel of width t_c / 4 centred at t0 + t_c / 2. The floor stem of the
    grain hit must be that response to 1 % of its peak, and scale with (1 + e)."""
    monkeypatch.setenv("IMPACTSOUND_CACHE", str(tmp_path))
    glass, floor = get_material("glass"), get_material("concrete")
    a, v0, e, t0 = 0.001, 1.4, 0.5, 0.01

    def table(e):
        return GranularEvents.from_arrays(t=[t0], point=[[0.05, 0.02, 0.0]], normal=[[0.0, 0.0, 1.0]], v0=[v0],
                                          kind=[CONTAINER], id_a=[0], id_b=[0], radius_a=[a], e=[e],
                                          materials=("glass",), containers=("floor",), duration=0.05)
    ev = table(e)
    air = Air()
    lis = np.array([[0.0, 0.0, 0.3]])
    hs = half_space(floor)
    n, fs = 2400, 48000
    p = floor_pressure(ev, [0], [glass], floor, hs, lis, 0.0, fs, n, restitution=0.3, c=air.c, rho=air.rho)
    m = 4 / 3 * math.pi * a**3 * glass.rho
    E_star = 1 / ((1 - glass.nu**2) / glass.E + (1 - floor.nu**2) / floor.E)
    tc = 2.868 * (m**2 / (a * E_star**2 * v0)) ** 0.2
    J = (1 + e) * m * v0
    for l in range(len(lis)):
        r = np.hypot(0.05 - lis[l, 0], 0.02 - lis[l, 1])
        bank = response_bank(hs, float(lis[l, 2]), c_a=air.c, rho_a=air.rho, sample_rate=fs, max_offset=r)
        bank.ensure(np.array([r]))
        ref = bank.render(np.array([t0 + tc / 2]), np.array([J]), np.array([tc / 4]), np.array([r]), n)
        assert np.abs(ref).max() > 0
        assert np.abs(p[l] - ref).max() < 0.01 * np.abs(ref).max()
    # the table's restitution is used; where it is unknown, the scene's
    q = floor_pressure(table(np.nan), [0], [glass], floor, hs, lis, 0.0, fs, n, restitution=0.0, c=air.c, rho=air.rho)
    np.testing.assert_allclose(q * 1.5, p, atol=1e-12 * np.abs(p).max())


def test_a_listener_below_the_floor_is_named():
    from impactsound.errors import InputError
    ev = GranularEvents.from_arrays(t=[0.0], point=[[0.0, 0.0, 0.0]], normal=[[0.0, 0.0, 1.0]], v0=[1.0],
                                    kind=[CONTAINER], id_a=[0], id_b=[0], radius_a=[0.001],
                                    materials=("glass",), containers=("floor",), duration=0.01)
    with pytest.raises(InputError, match="below the floor"):
        floor_pressure(ev, [0], [get_material("glass")], get_material("concrete"), half_space(get_material("concrete")),
                       np.array([[0.0, 0.0, -0.1]]), 0.0, 48000, 100, restitution=0.5, c=343.0, rho=1.2)
