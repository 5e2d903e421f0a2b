#!/bin/bash
. /work/venv/bin/activate
cd /work/main/examples/audit20
while kill -0 $(cat runner5.pid) 2>/dev/null; do sleep 2; done
echo "[$(date -u +%T)] start tiny_pm.out" >> run_all.log
PYTHONPATH=/tmp/a20 timeout 240 nice -n 10 python tiny_pm.py 1000 > tiny_pm.out 2>&1
echo "[$(date -u +%T)] end tiny_pm.out rc=$?" >> run_all.log
