"""transfer precompute / info / plot on a tiny modal model (issue 4), resume and bad input."""
import json

import numpy as np
import pytest
import trimesh
from click.testing import CliRunner

from impactsound.cli import cli, main
from impactsound.errors import AssetError
from impactsound.fem.model import ModalModel
from impactsound.materials import get_material
from impactsound.transfer.precompute import TransferModel


@pytest.fixture(scope="module")
def modal_asset(tmp_path_factory):
    """A rigid sphere 'mode' set: breathing (u = n) and translation (u = z) at low frequency (ka << 1)."""
    d = tmp_path_factory.mktemp("transfer")
    s = trimesh.creation.icosphere(subdivisions=2, radius=0.05)
    y = np.asarray(s.vertices)
    shapes = np.stack([y / 0.05, np.tile([0.0, 0.0, 1.0], (len(y), 1))])
    mat = get_material("steel")
    m = ModalModel(material=mat, order=1, frequencies_hz=np.array([500.0, 900.0]), surface_nodes=y,
                   surface_faces=np.asarray(s.faces), shapes=shapes, xi=np.array([1e-3, 1e-3]), mass=1.0,
                   com=np.zeros(3), inertia=np.eye(3) * 1e-3, volume=float(s.volume), inputs_hash="tiny-sphere")
    p = d / "sphere.h5"
    m.save(p)
    return p


def test_precompute_info_plot_and_resume(modal_asset, tmp_path):
    out = tmp_path / "t.h5"
    r = CliRunner().invoke(cli, ["-q", "transfer", "precompute", str(modal_asset), "--terms", "2", "--out", str(out)])
    assert r.exit_code == 0, r.output
    tm = TransferModel.load(out)
    assert tm.n_modes == 2 and tm.bank.terms == 2
    # breathing mode at ka << 1 is omnidirectional: |p| equal in all directions, decaying as 1/r
    x = np.array([[1.0, 0, 0], [0, 0, 1.0], [0, 0, 2.0]])
    p = np.abs(tm.bank.evaluate(x)[:, 0])
    assert p[0] == pytest.approx(p[1], rel=1e-3) and p[1] == pytest.approx(2 * p[2], rel=1e-3)
    # translation mode: a dipole along z (zero in the equatorial plane)
    pz = np.abs(tm.bank.evaluate(x)[:, 1])
    assert pz[0] < 0.01 * pz[1]
    r = CliRunner().invoke(cli, ["transfer", "info", str(out), "--json"])
    info = json.loads(r.output)
    assert info["modes"] == 2 and len(info["T"]) == 2 and max(info["holdout_median_rel_error"]) < 0.01
    # resume: with every mode checkpointed, a rerun solves nothing and gives the same arrays
    before = out.read_bytes()
    out.unlink()
    r = CliRunner().invoke(cli, ["-q", "transfer", "precompute", str(modal_asset), "--terms", "2", "--out", str(out)])
    assert r.exit_code == 0
    assert np.array_equal(TransferModel.load(out).bank.psi, tm.bank.psi)
    png = tmp_path / "m0.png"
    r = CliRunner().invoke(cli, ["-q", "transfer", "plot", str(out), "--mode", "1", "--modal", str(modal_asset),
                                 "--out", str(png)])
    assert r.exit_code == 0, r.output
    assert png.stat().st_size > 10000
    assert len(before) > 0


def test_refuses_transfer_of_other_model(modal_asset, tmp_path, capsys):
    out = tmp_path / "t.h5"
    CliRunner().invoke(cli, ["-q", "transfer", "precompute", str(modal_asset), "--terms", "1", "--max-modes", "1",
                             "--out", str(out)])
    other = ModalModel.load(modal_asset)
    other.inputs_hash = "another-model"
    with pytest.raises(AssetError, match="different modal model"):
        TransferModel.load(out, other)
    assert main(["transfer", "info", str(tmp_path / "missing.h5")]) == 2
    assert "no such transfer asset" in capsys.readouterr().err
