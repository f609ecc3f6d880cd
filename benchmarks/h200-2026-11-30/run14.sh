#!/bin/bash
# device call 14 (2 x H200): session 3's first changes (run14.commit): the fused RMSNorm reducing the batch
# rows side by side, and L2 prefetch hints (FRIGG_L2_PREFETCH plans). Built from git archives of that commit
# (new) and of eff9e53 (prev: the commit of runs 12-13), not from the working tree.
# GPU 0: CUDA tests, dev/gemv, a short ablation (frigg-bench --skip). GPU 1: frigg-bench A/B, prev against new
# with several prefetch plans, alternated twice.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r14; mkdir -p $R /tmp/new /tmp/prev; snap() { tar czf $OUT/r14-logs.tgz -C /tmp r14; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && tar xJf .devrun/prev-src.tar.xz -C /tmp/prev && ln -s $PWD/.deps /tmp/new/.deps && ln -s $PWD/.deps /tmp/prev/.deps
( cd /tmp/new && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin all b/dev/gemv > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log ) &
( cd /tmp/prev && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > $R/build-prev.log 2>&1; echo "prev rc $?" >> $R/build-prev.log ) &
wait; tail -1 $R/build-new.log $R/build-prev.log
N=/tmp/new/b; P=/tmp/prev/b
[ -x $N/bin/frigg-bench ] && [ -x $P/bin/frigg-bench ] || { tail -30 $R/build-new.log $R/build-prev.log; snap; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1; cat $R/smi.txt
( export CUDA_VISIBLE_DEVICES=1; C="taskset -c 16-31"
  A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
  for rep in 1 2; do
    $C timeout 60 $P/bin/frigg-bench $A >> $R/ab-prev.jsonl 2>> $R/ab.txt
    for plan in off o:gu=all o:gu=12 o:gu=all,down:next-qkv=8 o:gu=all,gu:down=all o:gu=all,gu:down=all,down:next-qkv=all qkv:o=all,o:gu=all; do
      FRIGG_L2_PREFETCH=$plan $C timeout 60 $N/bin/frigg-bench $A >> $R/ab-new.jsonl 2>> $R/ab.txt
    done
  done
  python3 - <<PY > $R/ab-summary.txt
import json, collections
d = collections.defaultdict(list)
for f in ("ab-prev", "ab-new"):
    for l in open("$R/" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": d[(f, r.get("l2_prefetch", "-"), r["batch"])].append(r["tok_s"])
for k in sorted(d): print(f"{k[0]:8} {k[1]:45} b{k[2]}  " + "  ".join(f"{v:8.1f}" for v in d[k]) + " tok/s")
PY
  cat $R/ab-summary.txt
) &
G1=$!
export CUDA_VISIBLE_DEVICES=0; C="taskset -c 0-15"
t() { local name=$1; shift; $C timeout 120 "$@" > $R/$name.log 2>&1; local rc=$?; echo "$name rc $rc: $(grep -E 'passed|FAIL' $R/$name.log | tail -2 | tr '\n' ' ')"; }
t test_l2_plan $N/tests/test_l2_plan
t test_cuda_gemv $N/tests/test_cuda_gemv
t test_cuda_engine $N/tests/test_cuda_engine
FRIGG_GEMV_IMPL=tc t test_cuda_engine-tc $N/tests/test_cuda_engine
FRIGG_L2_PREFETCH=o:gu=all,gu:down=all,down:next-qkv=all t test_cuda_engine-l2 $N/tests/test_cuda_engine
t test_cuda_ops $N/tests/test_cuda_ops
snap; el tests
$C timeout 120 $N/dev/gemv --quick > $R/dev-gemv.txt 2>&1; echo "dev/gemv rc $?"; grep -E "^time .*(tc-d2|auto)" $R/dev-gemv.txt | head -40
snap; el dev
for sk in none attn qkv gu; do
  a=""; [ $sk != none ] && a="--skip $sk"
  $C timeout 60 $N/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 $a decode >> $R/ablate.jsonl 2>> $R/ablate.txt
done
python3 -c "
import json
for l in open('$R/ablate.jsonl'):
    r=json.loads(l)
    if r.get('bench')=='decode': print(f\"b{r['batch']} skip {r['skip'] or 'none':22} {r['ms_per_step']:.3f} ms/step {r['tok_s']:.1f} tok/s\")
"
wait $G1
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
