#!/usr/bin/env bash
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/.gpu-carry/lib:${LD_LIBRARY_PATH:-}
O=${OUT:-/tmp/o}; mkdir -p $O; L=$(mktemp -d)/logs; mkdir -p $L; A=.gpu-carry/ab/main
trap 'tar czf $O/logs.tgz -C $(dirname $L) logs' EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
gunzip -c $A/day0.gz > $A/day0; gunzip -c $A/day0_tests.gz > $A/day0_tests; chmod +x $A/day0 $A/day0_tests
$A/day0 synth tests/data/configs/gpt-oss-120b /dev/shm/m120 --force > $L/synth120.log 2>&1 &
SYNTH=$!
el "cuda tests"
timeout 280 stdbuf -oL $A/day0_tests --gtest_filter='Cuda*:*/Cuda*:Mxfp4Cuda*' --gtest_brief=1 > $L/cuda_tests.log 2>&1; echo "tests rc $?"
grep -E "^\[ *(FAILED|PASSED|SKIPPED) *\]|Failure" -A3 $L/cuda_tests.log | head -30
el "fixture"
for c in bf16 fp8; do for p in 0 1 2; do
  timeout 30 $A/day0 compare tests/data/gpt_oss_tiny --reference tests/data/gpt_oss_tiny/reference/prompt$p.safetensors --backend cuda --expert-compute $c $([ $c = fp8 ] && echo --fused-moe-tokens 0) --tolerance 2e-2 --memory-fraction 0.3 > $L/cmp_${c}_$p.log 2>&1
  echo "$c prompt $p: $(grep -E 'greedy|result' $L/cmp_${c}_$p.log | tr -s ' ' | paste -sd ';')"; done; done
el "20b"
timeout 90 $A/day0 bench tests/data/configs/gpt-oss-20b --synthetic --backend cuda --expert-compute fp8 --prefill 1024,4096 --batches 1,64 --contexts 1024 --json $L/b20.json > $L/b20.log 2>&1; echo "20b rc $?"
grep -E "ceilings|^ +[0-9]+ +[0-9.]+ +[0-9.]+ " $L/b20.log | head -8
el "wait synth"
wait $SYNTH; echo "synth rc $?"; tail -1 $L/synth120.log
el "120b"
timeout 150 $A/day0 bench /dev/shm/m120 --backend cuda --expert-compute fp8 --prefill 1024,4096 --batches 1 --contexts 1024 --kernels --json $L/b120.json > $L/b120.log 2>&1; echo "120b rc $?"
grep -E "ceilings|^ +[0-9]+ +[0-9.]+ +[0-9.]+ |  all" $L/b120.log | head -10
sed -n '/kernels (CUPTI, device time of every launch in one prefill of 4096/,/  all/p' $L/b120.log | head -30
el "done"
