#!/usr/bin/env bash
# The quiet-machine speed phase (issue 29): waits for the runs to end and the load to fall under 0.5.
cd /work/wt/bench
PY=/work/refenv/bin/python
while pgrep -f "train.py|evaluate.py|pytest|queue2.sh" > /dev/null; do sleep 15; done
while awk '{exit !($1 >= 0.5)}' /proc/loadavg; do sleep 15; done
echo "start $(date +%T) $(uptime)"
$PY benchmarks/speed.py > /work/quiet/speed.txt 2>&1; echo "speed rc=$? $(date +%T) $(uptime)"
$PY benchmarks/profile_ops.py --base > /work/quiet/profile_on.txt 2>&1; echo "profile on rc=$? $(date +%T)"
ALBERT_MIN_KERNELS=off $PY benchmarks/profile_ops.py --base > /work/quiet/profile_off.txt 2>&1; echo "profile off rc=$? $(date +%T)"
$PY benchmarks/squad_speed.py > /work/quiet/squad_speed.txt 2>&1; echo "squad rc=$? $(date +%T)"
$PY benchmarks/backward_kernels.py --repeats 9 --only step > /work/quiet/backward.txt 2>&1; echo "backward rc=$? $(date +%T)"
$PY benchmarks/gemm_peak.py > /work/quiet/gemm.txt 2>&1; echo "gemm rc=$? $(date +%T) $(uptime)"
echo done
