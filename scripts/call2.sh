#!/usr/bin/env bash
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/.gpu-carry/lib:${LD_LIBRARY_PATH:-}
O=${OUT:-/tmp/o}; mkdir -p $O; L=$(mktemp -d)/logs; mkdir -p $L; A=.gpu-carry/ab
trap 'tar czf $O/logs.tgz -C $(dirname $L) logs' EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for n in main prev a3 a4; do d=$A/$n; gunzip -c $d/day0.gz > $d/day0; gunzip -c $d/day0_tests.gz > $d/day0_tests; chmod +x $d/day0 $d/day0_tests; done
python3 scripts/cut-layers tests/data/configs/gpt-oss-120b 6 /tmp/c120s
el "tests"
timeout 100 stdbuf -oL $A/main/day0_tests --gtest_filter='CudaFp8Quantize.*:CudaExpertGrouping.*:CudaMoeFp8.prefill*:CudaMoeFp8.routed_experts_match*:CudaMoeWgmmaFp8.*' --gtest_brief=1 > $L/t_main.log 2>&1; echo "main rc $?"; grep -E "^\[  (PASSED|FAILED)|Failure|moe fp8 grouped" -A3 $L/t_main.log | head -24
for n in a3 a4; do timeout 40 stdbuf -oL $A/$n/day0_tests --gtest_filter='CudaAttentionTc.*' --gtest_brief=1 > $L/t_$n.log 2>&1; echo "$n rc $?"; grep -E "^\[  (PASSED|FAILED)|Failure" -A3 $L/t_$n.log | head -12; done
el "attention"
for r in 1 2; do for n in main a3 a4; do timeout 40 $A/$n/day0 bench-moe --tokens 1024,4096 --parts prefill-attention >> $L/attn_$n.log 2>&1; done; done
grep -E "^ +[0-9]+ +[0-9]+ " $L/attn_main.log $L/attn_a3.log $L/attn_a4.log
el "6-layer prefill"
for n in main prev a3; do timeout 100 $A/$n/day0 bench /tmp/c120s --synthetic --backend cuda --expert-compute fp8 --prefill 4096 --batches 1 --contexts 128 --decode-steps 1 --kernels > $L/p_$n.log 2>&1; echo "$n rc $?"; grep -E "^ +4096 |mxfp4_ws|attention_tc|quantize|swiglu|group_kernel|  all" $L/p_$n.log | head -12; done
el "profile"
timeout 150 scripts/gpu-profile 'attention_tc_kernel' -- $A/main/day0 bench-moe --tokens 4096 --parts prefill-attention 2>&1 | tail -12
el "done"
