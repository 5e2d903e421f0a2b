#!/bin/bash
# prioritized second queue (run_all.sh was stopped after sql_split_outliers to fit the time budget)
. /work/venv/bin/activate
cd /work/main/examples/audit20
NEW=/tmp/a20; PREV=/tmp/a20_prev; MID=/tmp/a20_mid
while kill -0 20737 2>/dev/null; do sleep 2; done
echo "[$(date -u +%T)] end sql_split_outliers.out (waited)" >> run_all.log
run() { local tree=$1 out=$2; shift 2; echo "[$(date -u +%T)] start $out" >> run_all.log
  PYTHONPATH=$tree timeout 420 nice -n 10 python "$@" > $out 2>&1; echo "[$(date -u +%T)] end $out rc=$?" >> run_all.log; }
run $NEW hybrid_fewpm.out hybrid_fewpm.py 1500 0.7,1,1.5
run $NEW exec_cache.out exec_cache.py
run $PREV exec_cache_prev.out exec_cache.py
run $NEW duchi_sim.out duchi_sim.py 3000
run $PREV duchi_sim_prev.out duchi_sim.py 3000
run $NEW split_width.out split_width.py 300
run $PREV split_width_prev.out split_width.py 300
run $NEW bisect_vs_sort.out bisect_vs_sort.py
run $NEW planner_explain.out planner_explain.py
run $PREV planner_explain_prev.out planner_explain.py
run $NEW qfree_cost.out qfree_cost.py
run $NEW groups_cost.out groups_cost.py
run $NEW exec_mem.out exec_mem.py 1000000 20
run $PREV exec_mem_prev.out exec_mem.py 1000000 20
run $NEW tiny_pm.out tiny_pm.py 1500
run $NEW tiny_groups_cost.out tiny_groups_cost.py 0.5
echo "[$(date -u +%T)] next done" >> run_all.log
