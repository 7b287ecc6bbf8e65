"""Probing an optional CUDA path safely: a script run in a subprocess (a missing driver or a native crash is
reported as a reason, never inherited by the caller). Used by the GPU shell cubature and the GPU FDTD."""
from __future__ import annotations


def probe(script: str, modules: tuple[str, ...], what: str, timeout: float = 300.0) -> str | None:
    """None when ``script`` (run with this Python) ends printing "... ok", else a one-line reason naming ``what``.
    ``modules`` must be importable first (else the reason says how to install them)."""
    import importlib.util
    import subprocess
    import sys
    try:
        missing = [m for m in modules if importlib.util.find_spec(m) is None]
    except ModuleNotFoundError:                       # a parent package missing (numba.cuda without numba)
        missing = list(modules)
    if missing:
        return (f"{', '.join(missing)} not installed (pip install 'impactsound[cuda12]' or '[cuda13]' on a machine "
                "with an NVIDIA GPU)")
    try:
        r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"the {what} probe did not finish in {timeout:g} s"
    if r.returncode == 0 and r.stdout.strip().endswith("ok"):
        return None
    lines = [ln.strip() for ln in (r.stderr + r.stdout).splitlines() if ln.strip()]
    why = lines[-1][:300] if lines else f"exit status {r.returncode}"
    reason = f"the {what} probe failed ({why})"
    if "row_stack" in why:                           # numba-cuda 0.30 against NumPy >= 2.5
        reason += "; numba-cuda needs numpy<2.5 here: pip install 'numpy<2.5'"
    return reason
