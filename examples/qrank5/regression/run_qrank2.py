"""Run examples/qrank2/one_round_check.py / one_round_share.py of a given checkout unchanged, writing elsewhere.

    python /tmp/qr5/run_qrank2.py ROOT OUTDIR check|share [reps]
(PYTHONPATH=ROOT for a checkout other than the installed one.)"""
import os
import sys
from pathlib import Path

root, out, which = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
import ldpql
assert Path(ldpql.__file__).resolve().is_relative_to(root.resolve()), ldpql.__file__
qdir = out / "qrank2"
qdir.mkdir(parents=True, exist_ok=True)
if not (out / "audit9").exists():
    os.symlink(root / "examples" / "audit9", out / "audit9")
sys.path.insert(0, str(root / "examples" / "qrank2"))
if which == "check":
    import one_round_check as m
    m.HERE = qdir
    m.main()
else:
    import one_round_share as m
    m.HERE = qdir
    m.main(int(sys.argv[4]) if len(sys.argv) > 4 else 100)
