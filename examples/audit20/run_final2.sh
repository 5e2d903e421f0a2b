#!/bin/bash
. /work/venv/bin/activate
cd /work/main/examples/audit20
NEW=/tmp/a20; PREV=/tmp/a20_prev
while kill -0 $(cat runner3.pid) 2>/dev/null; do sleep 2; done
run() { local tree=$1 out=$2; shift 2; echo "[$(date -u +%T)] start $out" >> run_all.log
  PYTHONPATH=$tree timeout 300 nice -n 10 python "$@" > $out 2>&1; echo "[$(date -u +%T)] end $out rc=$?" >> run_all.log; }
run $NEW planner_explain.out planner_explain.py
run $PREV planner_explain_prev.out planner_explain.py
run $NEW exec_cache.out exec_cache.py
run $PREV exec_cache_prev.out exec_cache.py
echo "[$(date -u +%T)] final2 done" >> run_all.log
