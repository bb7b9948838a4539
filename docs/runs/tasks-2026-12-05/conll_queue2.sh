#!/usr/bin/env bash
# CoNLL again with a longer budget and a higher rate (the 900-step runs stayed under the majority-tag baseline).
cd /work/wt/runs
while pgrep -f "runs/queue2.sh" > /dev/null; do sleep 5; done
S=../shared/data
CO="--task conll --train $S/conll2003/eng.train --dev $S/conll2003/eng.testa --dropout 0.1 --max-length 128 --batch-size 32 --lr 1e-3 --epochs 5"
SCR="--config weights/pretrained-small/config.json --tokenizer weights/pretrained-small/spiece.model"
run() { name=$1; shift; echo "== $name $(date +%T)"; python3 train.py "$@" --output runs/$name > runs/$name.log 2>&1; echo "rc=$? $(date +%T)"; }
ev() { echo "== eval $1 on $2 $(date +%T)"; python3 evaluate.py --model runs/$1 --data $2 --json > runs/eval-$1-$3.json 2> runs/eval-$1-$3.log; echo "rc=$? $(date +%T)"; }
run conll5-pretrained-small $CO --init weights/pretrained-small
run conll5-scratch $CO $SCR
ev conll5-pretrained-small $S/conll2003/eng.testb testb
ev conll5-scratch $S/conll2003/eng.testb testb
echo "== done $(date +%T)"
