"""Render the contacts of another physics engine: PyBullet-style per-step contact points -> events -> sound.

Shows: how a simulation from another engine is rendered instead of impactsound's own MuJoCo dynamics
(docs/event-log.md, "From another engine's raw contacts"). Engines report contacts per step and per contact
point; :class:`impactsound.RawContacts` takes them as plain arrays, :func:`impactsound.clean_contacts` merges them
into collisions (one event per collision and contact region, resting contact dropped, each body's resting support
kept), and ``render_scene(scene, events=log)`` renders them.

PyBullet itself is not needed: :func:`fake_pybullet` plays a tiny engine that drops an aluminium bar flat onto the
floor and records, for every ``stepSimulation()``, what ``p.getContactPoints()`` would return (a tuple per
contact point: ids, ``positionOnA/B``, ``contactNormalOnB``, ``normalForce``, ...; one point per corner of the bar)
and the body states ``p.getBasePositionAndOrientation`` / ``p.getBaseVelocity`` before the step. The bar bounces a
few times (restitution 0.5, each impact spread over 3 steps of 0.5 ms), then rests on its four corners.
The conversion follows PyBullet's conventions: ``contactNormalOnB`` points from B towards A (ours: from a to b),
the impulse of a step is ``normalForce * dt``, quaternions come as (x, y, z, w) (ours: w, x, y, z).

Units: SI throughout (m, kg, s, N, N s, m/s, Pa). z is up; the floor is z = 0.
Run: ``.venv/bin/python examples/import_contacts.py`` -> ``out/examples/import_contacts.wav`` (+ ``.wav.json``),
``out/examples/import_contacts.png`` and the event log ``out/examples/import_contacts_events.csv``.
"""
from pathlib import Path

import numpy as np

import impactsound as isd
from impactsound.dynamics import GROUND, check_event_log

BAR = (0.15, 0.02, 0.01)             # bar size [m]
DT = 1 / 2000                        # engine step [s] (impacts last a few ms: use a small step)
G = 9.81                             # [m/s^2]
PLANE, BAR_UID = 0, 1                # PyBullet body unique ids


def scene(small=False):
    return {"scene": {"duration": 0.7 if small else 1.2, "sources": ["modal"]},
            "ground": {"material": "wood_hard"},
            "listener": [{"name": "mic", "position": [0.0, -0.5, 0.3]}],
            "source": {"modal": {"transfer": "low_order" if small else "auto"}},
            "object": [{"name": "bar", "shape": "box", "size": {"size": list(BAR)}, "material": "aluminium",
                        "position": [0.0, 0.0, 0.12]}]}


def fake_pybullet(mass, z0, duration, restitution=0.5):
    """Records of a bar (COM height z0 [m], level) dropped onto the plane: one (contact points, states) per step."""
    hx, hy, hz = (0.5 * s for s in BAR)
    corners = np.array([[sx * hx, sy * hy] for sx in (-1, 1) for sy in (-1, 1)])
    orn = (0.0, 0.0, 0.0, 1.0)                                # PyBullet order x, y, z, w: no rotation
    z, v, pending, resting = z0, 0.0, [], False
    records = []
    for k in range(int(round(duration / DT))):
        states = {BAR_UID: (((0.0, 0.0, z), orn), ((0.0, 0.0, v), (0.0, 0.0, 0.0)))}
        if not pending and not resting and z - hz <= 0.0 and v < 0:
            j_total = (1 + restitution) * mass * -v          # N s, upwards, shared by 3 steps (1/4, 1/2, 1/4)
            pending = [0.25 * j_total, 0.5 * j_total, 0.25 * j_total]
            resting = -restitution * v < 0.03                 # too slow to take off again: it comes to rest
        if pending:
            j_step = pending.pop(0)
            force = j_step / DT / 4                           # normalForce [N] per corner
            v += j_step / mass - G * DT
        elif resting:
            force, v, z = mass * G / 4, 0.0, hz              # lying on its corners: they carry its weight
        else:
            force = None
            v -= G * DT
        if pending or resting:
            z = hz
        else:
            z += v * DT
        contacts = [] if force is None else [
            (0, PLANE, BAR_UID, -1, -1, (x, y, 0.0), (x, y, -1e-5), (0.0, 0.0, -1.0), -1e-5, force,
             0.0, (1.0, 0.0, 0.0), 0.0, (0.0, 1.0, 0.0)) for x, y in corners]
        records.append((contacts, states))
    return records


def point_velocity(state, x):
    """World velocity [m/s] of a body's material point x from its PyBullet (pose, velocity); 0 for the plane."""
    if state is None:
        return np.zeros(3)
    (com, _), (v, w) = state
    return np.asarray(v) + np.cross(w, np.asarray(x) - np.asarray(com))


def raw_contacts(records, body_of):
    """PyBullet records -> RawContacts (one row per step and contact point), our conventions."""
    rows = []
    for k, (contacts, states) in enumerate(records):
        for c in contacts:
            uid_a, uid_b, on_a, on_b, normal_on_b, force = c[1], c[2], c[5], c[6], c[7], c[9]
            n = -np.asarray(normal_on_b, float)                   # from a to b
            x = 0.5 * (np.asarray(on_a, float) + np.asarray(on_b, float))
            vn = (point_velocity(states.get(uid_a), x) - point_velocity(states.get(uid_b), x)) @ n
            rows.append((k * DT, k, body_of[uid_a], body_of[uid_b], *x, *n, *(force * DT * n), vn))
    r = np.array(rows, float).reshape(-1, 14)
    return isd.RawContacts(t=r[:, 0], step=r[:, 1], a=r[:, 2], b=r[:, 3], point=r[:, 4:7], normal=r[:, 7:10],
                           impulse=r[:, 10:13], vn=r[:, 13])


def main(out_dir="out/examples", small=False):
    out_dir = Path(out_dir)
    sc = isd.load_scene(scene(small))
    bar = sc.bodies[0]
    records = fake_pybullet(bar.mass, bar.position[2], sc.duration)
    raw = raw_contacts(records, {PLANE: GROUND, BAR_UID: 0})
    print(f"{len(records)} engine steps, {len(raw)} raw contact rows")

    body_size = [float(np.linalg.norm(b.mesh.extents)) for b in sc.bodies]     # bounding-box diagonals [m]
    merged = isd.clean_contacts(raw, body_size, max_gap=max(1e-3, 3 * DT), settle_time=max(2e-3, 2 * DT))
    log = merged.to_event_log(sc.body_names)
    for row, k in enumerate(merged.step):                 # body b's pose at each event (a is the ground)
        (pos, (qx, qy, qz, qw)), _ = records[k][1][BAR_UID]
        log.pos_b[row], log.quat_b[row] = pos, (qw, qx, qy, qz)
    problems = check_event_log(log, sc.bodies, sc.duration)
    print(f"{len(log)} events; plausibility problems: {problems or 'none'}")
    for t in np.unique(log.t):                            # the corners of one bounce are separate events
        at = log.t == t
        print(f"  bounce at t = {t:.4f} s: {at.sum()} corners, vn = {log.vn[at].max():.3f} m/s, "
              f"impulse {log.impulse[at, 2].sum() * 1000:.2f} mN s")
    out_dir.mkdir(parents=True, exist_ok=True)
    log.save(out_dir / "import_contacts_events.csv")

    result = isd.render_scene(sc, events=log)
    wav, png = out_dir / "import_contacts.wav", out_dir / "import_contacts.png"
    result.save(wav, png=png, title="bar dropped (contacts from another engine)")
    print(f"wrote {wav}, {png} and {out_dir / 'import_contacts_events.csv'}")
    return {"wav": wav, "png": png, "csv": out_dir / "import_contacts_events.csv", "log": log, "result": result}


if __name__ == "__main__":
    main()
