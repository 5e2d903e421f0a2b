"""Audit 19's end-to-end EVALUATE harness (examples/audit19/sqlcheck.py, which makes y, z and w private like x),
re-exported for this audit's scripts (`from sqlcheck import evaluate`)."""
import importlib.util
import pathlib

_spec = importlib.util.spec_from_file_location("audit19_sqlcheck",
                                               pathlib.Path(__file__).resolve().parent.parent / "audit19" / "sqlcheck.py")
_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_check)
evaluate = _check.evaluate
