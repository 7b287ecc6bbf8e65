"""Contact-event hygiene on synthetic raw contacts (specs/modal-sound.md sec. 8); no engine involved.

Expected values are built from the synthetic input itself (sums of the impulses we put in, the times we chose),
never from the code's output.
"""
import numpy as np
import pytest

from impactsound.dynamics.events import GROUND
from impactsound.dynamics.hygiene import RawContacts, canonicalize, clean_contacts, merge_collisions

DT = 2e-4


def rows(t, a, b, point, normal, impulse, vn, step=None):
    """RawContacts from per-row lists/arrays (broadcasting scalars and single vectors)."""
    t = np.atleast_1d(np.asarray(t, float))
    n = len(t)
    bc = lambda v, k: np.broadcast_to(np.asarray(v, float), (n, k)).copy()  # noqa: E731
    return RawContacts(t=t, step=np.rint(t / DT) if step is None else step,
                       a=np.broadcast_to(a, n).copy(), b=np.broadcast_to(b, n).copy(), point=bc(point, 3),
                       normal=bc(normal, 3), impulse=bc(impulse, 3),
                       vn=np.broadcast_to(np.asarray(vn, float), n).copy())


def cat(*rs):
    return RawContacts(**{k: np.concatenate([getattr(r, k) for r in rs]) for k in
                          ("t", "step", "a", "b", "point", "normal", "impulse", "vn")})


def impact(t0, a=GROUND, b=0, point=(0, 0, 0), n_steps=8, v=1.0, j=(0, 0, 1e-3)):
    """One ball-like impact: half-sine impulses over n_steps, approach speed going from v to -0.6 v."""
    k = np.arange(n_steps)
    t = t0 + k * DT
    shape = np.sin(np.pi * (k + 0.5) / n_steps)
    imp = np.outer(shape / shape.sum(), j)
    vn = v * (1 - 1.6 * k / (n_steps - 1))
    return rows(t, a, b, point, (0, 0, 1), imp, vn)


SIZE = np.array([0.1, 0.1, 0.1])        # body sizes [m]: clusters > 1 cm apart stay separate


def test_merging_preserves_summed_impulse_and_uses_first_contact():
    raw = impact(0.1, j=(2e-4, -1e-4, 3e-3), v=1.3)
    ev = clean_contacts(raw, SIZE)
    assert len(ev) == 1
    np.testing.assert_allclose(ev.impulse[0], raw.impulse.sum(axis=0), rtol=1e-12)
    assert ev.t[0] == pytest.approx(0.1)
    assert ev.vn[0] == pytest.approx(1.3)
    assert (ev.a[0], ev.b[0]) == (GROUND, 0)
    np.testing.assert_allclose(ev.normal[0], [0, 0, 1])


def test_point_is_impulse_weighted_mean_within_a_cluster():
    # Two manifold points 4 mm apart (< 10 % of 0.1 m): one event at the impulse-weighted mean point.
    p1, p2 = np.array([0.0, 0, 0]), np.array([0.004, 0, 0])
    r1 = rows([0.1, 0.1 + DT], GROUND, 0, p1, (0, 0, 1), [(0, 0, 3e-4), (0, 0, 1e-4)], [1.0, 0.5])
    r2 = rows([0.1, 0.1 + DT], GROUND, 0, p2, (0, 0, 1), [(0, 0, 1e-4), (0, 0, 1e-4)], [1.0, 0.5])
    ev = clean_contacts(cat(r1, r2), SIZE)
    assert len(ev) == 1
    expected = (4e-4 * p1 + 2e-4 * p2) / 6e-4
    np.testing.assert_allclose(ev.point[0], expected, atol=1e-12)
    np.testing.assert_allclose(ev.impulse[0], [0, 0, 6e-4], rtol=1e-12)


def test_box_corners_stay_separate_with_same_t0():
    corners = [(-0.05, -0.03, 0), (-0.05, 0.03, 0), (0.05, -0.03, 0), (0.05, 0.03, 0)]
    raw = cat(*[impact(0.2, point=c, j=(0, 0, 1e-3 * (i + 1))) for i, c in enumerate(corners)])
    ev = clean_contacts(raw, SIZE)
    assert len(ev) == 4
    np.testing.assert_allclose(ev.t, 0.2)
    np.testing.assert_allclose(np.sort(ev.impulse[:, 2]), [1e-3, 2e-3, 3e-3, 4e-3], rtol=1e-12)
    found = {tuple(np.round(p, 6)) for p in ev.point}
    assert found == {tuple(np.round(c, 6)) for c in corners}


def test_v_min_filter_drops_slow_collisions_only():
    slow = impact(0.1, v=0.04)
    fast = impact(0.3, v=0.06)
    ev = clean_contacts(cat(slow, fast), SIZE, v_min=0.05)
    assert len(ev) == 1
    assert ev.t[0] == pytest.approx(0.3)
    assert ev.vn[0] == pytest.approx(0.06)


def test_mirrored_duplicates_are_removed():
    raw = impact(0.1, a=0, b=2, j=(1e-4, 0, 2e-3))
    # The same contacts reported again from body 2's side: (2, 0), normal and impulse reversed.
    mirror = RawContacts(t=raw.t, step=raw.step, a=raw.b, b=raw.a, point=raw.point, normal=-raw.normal,
                         impulse=-raw.impulse, vn=raw.vn)
    both = cat(raw, mirror)
    canon = canonicalize(both)
    assert len(canon) == len(raw)
    ev = clean_contacts(both, SIZE)
    assert len(ev) == 1
    assert (ev.a[0], ev.b[0]) == (0, 2)
    np.testing.assert_allclose(ev.impulse[0], raw.impulse.sum(axis=0), rtol=1e-12)


def test_swapped_pair_is_oriented_min_max_with_normal_and_impulse_flipped():
    raw = impact(0.1, a=3, b=GROUND, j=(0, 0, -1e-3))     # ground is b here; impulse on the ground is -z
    ev = clean_contacts(raw, np.full(4, 0.1))
    assert (ev.a[0], ev.b[0]) == (GROUND, 3)
    np.testing.assert_allclose(ev.normal[0], [0, 0, -1])   # was (0,0,1) from 3 to ground -> from ground to 3
    np.testing.assert_allclose(ev.impulse[0], [0, 0, 1e-3], rtol=1e-12)


def test_distinct_contacts_at_one_point_are_not_deduplicated():
    # Two constraints at the same point in the same step with different impulses: both count.
    r = rows([0.1, 0.1], GROUND, 0, (0, 0, 0), (0, 0, 1), [(0, 0, 1e-3), (0, 0, 2e-3)], [1.0, 1.0])
    ev = clean_contacts(r, SIZE)
    np.testing.assert_allclose(ev.impulse[0], [0, 0, 3e-3], rtol=1e-12)


def test_bounces_separated_in_time_are_separate_events():
    raw = cat(impact(0.10), impact(0.15, v=0.6), impact(0.18, v=0.36))
    ev = clean_contacts(raw, SIZE)
    np.testing.assert_allclose(ev.t, [0.10, 0.15, 0.18])
    np.testing.assert_allclose(ev.vn, [1.0, 0.6, 0.36])


def test_short_contact_gaps_do_not_split_a_collision():
    # Chatter: the pair loses contact for one step now and then (< max_gap): still one collision, one event.
    raw = impact(0.1, n_steps=20)
    keep = np.ones(20, bool)
    keep[[5, 11, 12]] = False
    ev = clean_contacts(raw.select(keep), SIZE, max_gap=1e-3)
    assert len(ev) == 1
    np.testing.assert_allclose(ev.impulse[0], raw.impulse[keep].sum(axis=0), rtol=1e-12)


def test_resting_contact_emits_nothing():
    # 0.5 s of support with approach speeds jittering around zero and weight impulses m g dt.
    rng = np.random.default_rng(1)
    t = 0.05 + DT * np.arange(2500)
    rest = cat(*[rows(t, GROUND, 0, c, (0, 0, 1), (0, 0, 0.1 * 9.81 * DT / 4), rng.normal(0, 0.005, t.size))
                 for c in [(-0.05, -0.03, 0), (-0.05, 0.03, 0), (0.05, -0.03, 0), (0.05, 0.03, 0)]])
    assert len(clean_contacts(rest, SIZE)) == 0


def test_impact_then_rest_carries_only_the_impact_impulse():
    hit = impact(0.1, n_steps=6, j=(0, 0, 5e-3), v=2.0)
    hit.vn[:] = np.linspace(2.0, 0.2, 6)                  # compression, all approaching faster than v_min
    t_rest = 0.1 + DT * (6 + np.arange(1000))
    rest = rows(t_rest, GROUND, 0, (0, 0, 0), (0, 0, 1), (0, 0, 0.1 * 9.81 * DT), 0.0)
    ev = clean_contacts(cat(hit, rest), SIZE, settle_time=2e-3)
    assert len(ev) == 1
    np.testing.assert_allclose(ev.impulse[0], hit.impulse.sum(axis=0), rtol=1e-12)
    assert ev.vn[0] == pytest.approx(2.0)


def test_different_pairs_never_merge():
    raw = cat(impact(0.1, a=GROUND, b=0), impact(0.1, a=GROUND, b=1), impact(0.1, a=0, b=1))
    ev = clean_contacts(raw, SIZE)
    assert sorted(zip(ev.a.tolist(), ev.b.tolist())) == [(GROUND, 0), (GROUND, 1), (0, 1)]


def test_contact_without_force_emits_nothing():
    # e.g. a speculative contact predicted for a step but never engaged: fast, yet no impulse.
    ghost = impact(0.1, point=(0.05, 0, 0), j=(0, 0, 0), v=3.0)
    ev = clean_contacts(cat(ghost, impact(0.1)), SIZE)
    assert len(ev) == 1 and ev.point[0, 0] == pytest.approx(0.0)


def test_empty_input():
    assert len(clean_contacts(RawContacts.empty(), SIZE)) == 0
    assert len(merge_collisions(RawContacts.empty(), SIZE)) == 0
