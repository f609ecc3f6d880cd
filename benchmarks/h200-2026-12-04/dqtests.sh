set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH CUDA_VISIBLE_DEVICES=0
mkdir -p $OUT
make -j14 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/tests/test_cuda_engine build-gpu/tests/test_cuda_gemv_q > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
git log -1 --format=%H > $OUT/tests.txt
for t in test_cuda_engine test_cuda_gemv_q; do FRIGG_ROOT=$PWD timeout 200 build-gpu/tests/$t > /tmp/$t.log 2>&1; echo "$t rc $?: $(tail -1 /tmp/$t.log)" >> $OUT/tests.txt; grep ^FAIL /tmp/$t.log | head >> $OUT/tests.txt; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $OUT/tests.txt
cat $OUT/tests.txt
