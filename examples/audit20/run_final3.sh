#!/bin/bash
. /work/venv/bin/activate
cd /work/main/examples/audit20
while kill -0 $(cat runner4.pid) 2>/dev/null; do sleep 2; done
echo "[$(date -u +%T)] start bisect_vs_sort.out (light)" >> run_all.log
PYTHONPATH=/tmp/a20 timeout 240 nice -n 10 python bisect_vs_sort.py > bisect_vs_sort.out 2>&1
echo "[$(date -u +%T)] end bisect_vs_sort.out rc=$?" >> run_all.log
