#!/bin/bash
# device call 15 (2 x H200): run15.commit = the tensor-core GEMV with per-lane x fragments (no staging pass),
# the simt norm reading x once, and round 3 of decode attention (helper attnd3). Built from git archives of
# that commit (new) and of eff9e53 (prev: the commit of runs 12-13).
# GPU 0: CUDA tests, dev/gemv, dev/attn_decode. GPU 1: frigg-bench A/B prev vs new (alternated twice), then
# the ablation of new (frigg-bench --skip).
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r15; mkdir -p $R /tmp/new /tmp/prev; snap() { tar czf $OUT/r15-logs.tgz -C /tmp r15; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && tar xJf .devrun/prev-src.tar.xz -C /tmp/prev && ln -s $PWD/.deps /tmp/new/.deps && ln -s $PWD/.deps /tmp/prev/.deps
( cd /tmp/new && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin all > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log ) &
( cd /tmp/prev && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > $R/build-prev.log 2>&1; echo "prev rc $?" >> $R/build-prev.log ) &
wait; tail -n1 $R/build-new.log; tail -n1 $R/build-prev.log
N=/tmp/new/b; P=/tmp/prev/b
[ -x $N/bin/frigg-bench ] && [ -x $P/bin/frigg-bench ] || { tail -30 $R/build-new.log $R/build-prev.log; snap; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1; cat $R/smi.txt
( export CUDA_VISIBLE_DEVICES=1; C="taskset -c 16-31"
  A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
  for rep in 1 2; do
    $C timeout 60 $P/bin/frigg-bench $A >> $R/ab-prev.jsonl 2>> $R/ab.txt
    $C timeout 60 $N/bin/frigg-bench $A >> $R/ab-new.jsonl 2>> $R/ab.txt
  done
  for sk in none attn qkv o gu down; do
    a=""; [ $sk != none ] && a="--skip $sk"
    $C timeout 60 $N/bin/frigg-bench $A $a >> $R/ablate.jsonl 2>> $R/ablate.txt
  done
  python3 - <<PY > $R/ab-summary.txt
import json, collections
d = collections.defaultdict(list)
for f in ("ab-prev", "ab-new"):
    for l in open("$R/" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": d[(f, r["batch"])].append(r["tok_s"])
for k in sorted(d): print(f"{k[0]:8} b{k[1]}  " + "  ".join(f"{v:8.1f}" for v in d[k]) + " tok/s")
for l in open("$R/ablate.jsonl"):
    r = json.loads(l)
    if r.get("bench") == "decode": print(f"b{r['batch']} skip {r['skip'] or 'none':8} {r['ms_per_step']:.3f} ms/step {r['tok_s']:.1f} tok/s")
PY
  cat $R/ab-summary.txt
) &
G1=$!
export CUDA_VISIBLE_DEVICES=0; C="taskset -c 0-15"
t() { local name=$1; shift; $C timeout 120 "$@" > $R/$name.log 2>&1; local rc=$?; echo "$name rc $rc: $(grep -E 'passed|FAIL' $R/$name.log | tail -2 | tr '\n' ' ')"; }
t test_cuda_gemv $N/tests/test_cuda_gemv
FRIGG_GEMV_IMPL=tc t test_cuda_gemv-tc $N/tests/test_cuda_gemv
t test_cuda_attn_decode $N/tests/test_cuda_attn_decode
t test_cuda_engine $N/tests/test_cuda_engine
FRIGG_GEMV_IMPL=tc t test_cuda_engine-tc $N/tests/test_cuda_engine
t test_cuda_ops $N/tests/test_cuda_ops
snap; el tests
$C timeout 120 $N/dev/gemv --quick > $R/dev-gemv.txt 2>&1; echo "dev/gemv rc $?"; grep -E "^time .*(tc-d2 |auto)" $R/dev-gemv.txt | head -40
snap; el dev-gemv
$C timeout 150 $N/dev/attn_decode --quick > $R/dev-attn_decode.txt 2>&1; echo "dev/attn_decode rc $?"; grep -c PASS $R/dev-attn_decode.txt; grep FAIL $R/dev-attn_decode.txt | head -5; tail -40 $R/dev-attn_decode.txt
snap; el dev-attn
wait $G1
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
