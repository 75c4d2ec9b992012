#!/usr/bin/env bash
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/.gpu-carry/lib:${LD_LIBRARY_PATH:-}
O=${OUT:-/tmp/o}; mkdir -p $O; L=$(mktemp -d)/logs; mkdir -p $L; A=.gpu-carry/ab
trap 'tar czf $O/logs.tgz -C $(dirname $L) logs' EXIT
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for n in main base; do d=$A/$n; gunzip -c $d/day0.gz > $d/day0; chmod +x $d/day0; done
gunzip -c $A/main/day0_tests.gz > $A/main/day0_tests; chmod +x $A/main/day0_tests
python3 scripts/cut-layers tests/data/configs/gpt-oss-120b 6 /tmp/c120s
el "tests"
timeout 120 stdbuf -oL $A/main/day0_tests --gtest_filter='CudaFp8*:CudaExpertGrouping.*:CudaMoeFp8.prefill*:CudaMoeFp8.routed_experts_match*:CudaMoeWgmmaFp8.*:CudaAttentionTc.*:CudaAttention*' --gtest_brief=1 > $L/t_main.log 2>&1; echo "main rc $?"; grep -E "^\[  (PASSED|FAILED)|Failure" -A3 $L/t_main.log | head -30
el "attention"
for r in 1 2; do for n in main base; do timeout 40 $A/$n/day0 bench-moe --tokens 1024,4096 --parts prefill-attention >> $L/attn_$n.log 2>&1; done; done
grep -E "^ +[0-9]+ +[0-9]+ " $L/attn_main.log $L/attn_base.log
el "6-layer prefill"
for n in main base; do timeout 100 $A/$n/day0 bench /tmp/c120s --synthetic --backend cuda --expert-compute fp8 --prefill 4096 --batches 1 --contexts 128 --decode-steps 1 --kernels > $L/p_$n.log 2>&1; echo "$n rc $?"; grep -E "^ +4096 |mxfp4_ws|attention_tc|quantize|swiglu|  all" $L/p_$n.log | head -8; done
el "done"
