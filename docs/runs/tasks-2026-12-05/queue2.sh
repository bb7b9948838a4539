#!/usr/bin/env bash
# Issue 26 result runs, one at a time (2 cores); same budget from scratch and from weights/pretrained-small.
cd /work/wt/runs
while pgrep -f "train.py --task squad" > /dev/null; do sleep 10; done
S=../shared/data
SQ="--task squad --train $S/squad/dev-v1.1.json:1-24 --dev $S/squad/dev-v1.1.json:25-48 --dropout 0.1 --max-length 128 --doc-stride 32 --max-query-length 32 --batch-size 32 --epochs 3 --max-steps 1000 --eval-every 500"
CO="--task conll --train $S/conll2003/eng.train --dev $S/conll2003/eng.testa --dropout 0.1 --max-length 128 --batch-size 32 --epochs 3 --max-steps 900 --eval-every 450"
RA="--task race --train $S/race/RACE/train --dev $S/race/RACE/dev --dropout 0.1 --max-length 128 --batch-size 8 --epochs 1 --max-steps 1000 --eval-every 500"
SCR="--config weights/pretrained-small/config.json --tokenizer weights/pretrained-small/spiece.model"
PRE="--init weights/pretrained-small"
run() { name=$1; shift; echo "== $name $(date +%T)"; python3 train.py "$@" --output runs/$name > runs/$name.log 2>&1; echo "rc=$? $(date +%T)"; }
ev() { echo "== eval $1 on $2 $(date +%T)"; python3 evaluate.py --model runs/$1 --data $2 --json > runs/eval-$1-$3.json 2> runs/eval-$1-$3.log; echo "rc=$? $(date +%T)"; }
run squad-scratch $SQ $SCR
run conll-pretrained-small $CO $PRE
run conll-scratch $CO $SCR
ev conll-pretrained-small $S/conll2003/eng.testb testb
ev conll-scratch $S/conll2003/eng.testb testb
run race-pretrained-small $RA $PRE
run race-scratch $RA $SCR
ev race-pretrained-small $S/race/RACE/test test
ev race-scratch $S/race/RACE/test test
echo "== queue done $(date +%T)"
