#!/bin/bash
# device call 48 (1 x H200): is run 44/47's failure (o_proj rows at tensor-core depth 3: wrong, nondeterministic
# results inside the engine, right in isolation) the x-fragment loads (ld.global.nc: x is const __restrict__)
# scheduled above griddepcontrol.wait? Two scratch builds: d3 (as run 47) and d3fix (x fragment through __ldcg);
# test_cuda_engine under o_proj=33333333 twice each; the SASS of the RESID depth-3 kernel of each.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r48; mkdir -p $R; snap() { tar czf $OUT/r48-logs.tgz -C /tmp r48; }
for v in d3 d3fix; do
  mkdir -p /tmp/$v && tar xJf .devrun/$v-src.tar.xz -C /tmp/$v && ln -s $PWD/.deps /tmp/$v/.deps
  ( cd /tmp/$v && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/tests/test_cuda_engine > $R/build-$v.log 2>&1; echo "$v rc $?" | tee -a $R/build-$v.log )
done
el built
for v in d3 d3fix; do
  cd /tmp/$v
  for i in 1 2; do
    FRIGG_GEMV_AUTO=o_proj=33333333 timeout 100 b/tests/test_cuda_engine > $R/test_cuda_engine-$v-$i.log 2>&1; echo "rc $?" >> $R/test_cuda_engine-$v-$i.log
    echo "$v $i: $(grep -c FAIL $R/test_cuda_engine-$v-$i.log) FAIL; $(grep 'passed' $R/test_cuda_engine-$v-$i.log | tail -1)"
  done
  cuobjdump -sass b/kernels/gemv_tc.o > $R/sass-gemv_tc-$v.txt 2>&1
  python3 - $R/sass-gemv_tc-$v.txt <<'PY'
import re, sys
t = open(sys.argv[1]).read()
for fn in re.split(r'\n\s*Function : ', t)[1:]:
    name = fn.split('\n', 1)[0].strip()
    if 'Lb0ELi1ELi3E' not in name and 'Lb0ELi1ELi2E' not in name: continue
    lines = fn.split('\n')
    w = next((i for i, l in enumerate(lines) if 'ACQBULK' in l or 'griddep' in l.lower() or 'DEPBAR' in l), -1)
    ldg = [i for i, l in enumerate(lines) if 'LDG' in l]
    print(name[:44], 'wait-like line', w, ':', lines[w].strip()[:60] if w >= 0 else '-', '| LDG lines before it:', sum(1 for i in ldg if i < w), 'after:', sum(1 for i in ldg if i > w))
PY
done
cd /tmp/d3; el done; snap
