"""Audit 19's replica of what a SELECT shows (examples/audit19/sim.py), re-exported unchanged for this audit's
scripts (`from sim import run, ...`)."""
import importlib.util
import pathlib

_spec = importlib.util.spec_from_file_location("audit19_sim", pathlib.Path(__file__).resolve().parent.parent / "audit19" / "sim.py")
_sim = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_sim)
globals().update({k: v for k, v in vars(_sim).items() if not k.startswith("__")})
