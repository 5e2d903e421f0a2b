#!/bin/bash
# third queue, reprioritized to the time budget (run_next.sh stopped after duchi_sim_prev)
. /work/venv/bin/activate
cd /work/main/examples/audit20
NEW=/tmp/a20; PREV=/tmp/a20_prev
while kill -0 5626 2>/dev/null; do sleep 2; done
echo "[$(date -u +%T)] end duchi_sim_prev.out (waited)" >> run_all.log
run() { local tree=$1 out=$2; shift 2; echo "[$(date -u +%T)] start $out" >> run_all.log
  PYTHONPATH=$tree timeout 300 nice -n 10 python "$@" > $out 2>&1; echo "[$(date -u +%T)] end $out rc=$?" >> run_all.log; }
run $NEW exec_cache.out exec_cache.py
run $PREV exec_cache_prev.out exec_cache.py
run $NEW split_width.out split_width.py 300
run $PREV split_width_prev.out split_width.py 300
run $NEW planner_explain.out planner_explain.py
run $PREV planner_explain_prev.out planner_explain.py
run $NEW qfree_cost.out qfree_cost.py
run $NEW bisect_vs_sort.out bisect_vs_sort.py
run $NEW groups_cost.out groups_cost.py
run $NEW exec_mem.out exec_mem.py 1000000 20
run $PREV exec_mem_prev.out exec_mem.py 1000000 20
echo "[$(date -u +%T)] final done" >> run_all.log
