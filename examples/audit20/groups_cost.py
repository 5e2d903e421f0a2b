"""Audit 19's GROUP BY run-time probe (examples/audit19/groups_cost.py), run unchanged on the tree on PYTHONPATH."""
import pathlib
import runpy

runpy.run_path(str(pathlib.Path(__file__).resolve().parent.parent / "audit19" / "groups_cost.py"), run_name="__main__")
