#!/bin/bash
# device call 51 (2 x H200): run51.commit (ld_act a plain ld.global through a laundered pointer) against prev = 7a04a2f (ld_act = __ldca, asm volatile).
# GPU 1: the Mimir-size fixture, frigg-parity (default, --force-causal), the tiny fixtures --vs-cpu, frigg-eval.
# GPU 0: the CUDA tests, then frigg-bench prev against new, batch 1 and 8 at ctx 512 and prefill 4096,
# alternated twice.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r51; mkdir -p $R /tmp/new /tmp/prev; snap() { tar czf $OUT/r51-logs.tgz -C /tmp r51; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps
tar xJf .devrun/prev-src.tar.xz -C /tmp/prev && ln -s $PWD/.deps /tmp/prev/.deps
( cd /tmp/prev && make -j8 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > $R/build-prev.log 2>&1; echo "prev rc $?" >> $R/build-prev.log ) &
PB=$!
( cd /tmp/new && make -j24 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin all > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log )
tail -n1 $R/build-new.log; N=/tmp/new/b; P=/tmp/prev/b
[ -x $N/bin/frigg-bench ] || { tail -30 $R/build-new.log; snap; exit 1; }
el built-new
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
( cd /tmp/new; export CUDA_VISIBLE_DEVICES=1; C="taskset -c 16-31"
  $C timeout 150 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --fp32-ref --out /tmp/mimir --device cuda > $R/fixture.log 2>&1; echo "fixture rc $?" >> $R/fixture.log
  $C timeout 60 $N/bin/frigg-parity /tmp/mimir > $R/parity-mimir.jsonl 2> $R/parity-mimir.txt; echo "parity mimir rc $? (0 = pass)" >> $R/parity-mimir.txt
  $C timeout 60 $N/bin/frigg-parity --force-causal /tmp/mimir > $R/parity-mimir-causal.jsonl 2> $R/parity-mimir-causal.txt; echo "parity mimir --force-causal rc $? (must be 1)" >> $R/parity-mimir-causal.txt
  $C timeout 40 $N/bin/frigg-parity --vs-cpu golden/fixtures/tiny-packed golden/fixtures/tiny-split golden/fixtures/tiny-sharded > $R/parity-tiny.jsonl 2> $R/parity-tiny.txt; echo "parity tiny rc $? (0 = pass)" >> $R/parity-tiny.txt
  command -v compute-sanitizer >/dev/null && { $C timeout 150 compute-sanitizer --tool memcheck $N/tests/test_cuda_engine > $R/sanitizer-engine.log 2>&1; echo "sanitizer rc $?" >> $R/sanitizer-engine.log; }
  { echo '$ bin/frigg-eval nll --backend cuda --model golden/default < golden/default/heldout.jsonl | tail -1'; $C timeout 30 $N/bin/frigg-eval nll --backend cuda --model golden/default < golden/default/heldout.jsonl 2>&1 | tail -1; } > $R/smoke.txt
) &
G1=$!
cd /tmp/new; export CUDA_VISIBLE_DEVICES=0; C="taskset -c 0-15"
t() { local name=$1; shift; $C timeout 120 "$@" > $R/$name.log 2>&1; local rc=$?; echo "$name rc $rc: $(grep -E 'passed|FAIL' $R/$name.log | tail -2 | tr '\n' ' ')"; }
t test_cuda_gemv $N/tests/test_cuda_gemv
t test_cuda_engine $N/tests/test_cuda_engine
FRIGG_GEMV_IMPL=tc t test_cuda_engine-tc $N/tests/test_cuda_engine
FRIGG_ATTN_DECODE=split t test_cuda_engine-split $N/tests/test_cuda_engine
FRIGG_QUICK=1 t test_cuda_attn_decode-quick $N/tests/test_cuda_attn_decode
t test_cuda_prefill $N/tests/test_cuda_prefill
t test_cuda_ops $N/tests/test_cuda_ops
snap; el tests
wait $PB; tail -n1 $R/build-prev.log
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 --prefill 4096 decode prefill"
for rep in 1 2; do
  $C timeout 60 $P/bin/frigg-bench $A >> $R/ab-base.jsonl 2>> $R/ab.txt
  $C timeout 60 $N/bin/frigg-bench $A >> $R/ab-new.jsonl 2>> $R/ab.txt
  el "rep $rep"; snap
done
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in ["base", "new"]:
    for l in open("$R/ab-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:5} b{r['batch']} {r['tok_s']:8.1f} tok/s  roofline {r.get('roofline_frac')}  read {r.get('read_gb_s')}")
        if r.get("bench") == "prefill": print(f"{f:5} prefill {r.get('tokens')} {r['tok_s']:8.1f} tok/s")
PY
for v in new prev; do cuobjdump -sass /tmp/$v/b/kernels/gemv_tc.o 2>/dev/null | grep -o 'LDG[A-Z0-9._]*' | sort | uniq -c > $R/sass-ldg-gemv_tc-$v.txt; cuobjdump -sass /tmp/$v/b/kernels/gemv.o 2>/dev/null | grep -o 'LDG[A-Z0-9._]*' | sort | uniq -c > $R/sass-ldg-gemv-$v.txt; done; ls /tmp/new/b/kernels/ | head > $R/objs.txt
wait $G1
tail -2 $R/fixture.log; for f in parity-mimir parity-mimir-causal parity-tiny; do tail -2 $R/$f.txt; done; cat $R/smoke.txt; tail -3 $R/sanitizer-engine.log
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
