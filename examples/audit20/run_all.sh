#!/bin/bash
# One process at a time, nice 10, each under a 600 s timeout; new tree /tmp/a20 (f6591db), previous /tmp/a20_prev (0439834),
# /tmp/a20_mid (90e12d0). Usage: bash run_all.sh [first step]
. /work/venv/bin/activate
cd /work/main/examples/audit20
NEW=/tmp/a20; PREV=/tmp/a20_prev; MID=/tmp/a20_mid
run() { local tree=$1 out=$2; shift 2; echo "[$(date -u +%T)] start $out" >> run_all.log
  PYTHONPATH=$tree timeout 600 nice -n 10 python "$@" > $out 2>&1; echo "[$(date -u +%T)] end $out rc=$?" >> run_all.log; }
run $NEW laws_cache.out laws_cache.py
run $NEW bisect_vs_sort.out bisect_vs_sort.py
run $NEW exact_tiny.out exact_tiny.py
run $NEW duchi_exact.out duchi_exact.py
run $NEW split_outliers.out split_outliers.py 2000
run $NEW sql_split_outliers.out sql_split.py 1000 outliers
run $NEW hybrid_fewpm.out hybrid_fewpm.py 2000
run $NEW exec_cache.out exec_cache.py
run $PREV exec_cache_prev.out exec_cache.py
run $NEW exec_mem.out exec_mem.py 1000000 20
run $PREV exec_mem_prev.out exec_mem.py 1000000 20
run $NEW tiny_pm.out tiny_pm.py 1500
run $PREV tiny_pm_prev.out tiny_pm.py 1500
run $NEW sql_tiny_groups.out sql_tiny_groups.py 1000 planner 0.5,2,4,16
run $NEW sql_tiny_groups_hybrid.out sql_tiny_groups.py 1000 hybrid 0.5,1,2
run $NEW planner_explain.out planner_explain.py
run $PREV planner_explain_prev.out planner_explain.py
run $NEW groups_cost.out groups_cost.py
run $NEW tiny_groups_cost.out tiny_groups_cost.py
run $NEW qfree_cost.out qfree_cost.py
run $NEW split_width.out split_width.py 400
run $PREV split_width_prev.out split_width.py 400
run $NEW pred_vs_rmse.out pred_vs_rmse.py 300
run $NEW sql_split_small.out sql_split.py 1000 small
run $MID hw_dump_mid.out hw_dump.py
run $PREV hw_dump_prev.out hw_dump.py
echo "[$(date -u +%T)] all done" >> run_all.log
