#!/usr/bin/env bash
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/.gpu-carry/lib:${LD_LIBRARY_PATH:-}
O=${OUT:-/tmp/o}; mkdir -p $O; A=.gpu-carry/ab
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for n in main r2cta rws attn; do d=$A/$n; gunzip -c $d/day0.gz > $d/day0; gunzip -c $d/day0_tests.gz > $d/day0_tests; chmod +x $d/day0 $d/day0_tests; done
python3 scripts/cut-layers tests/data/configs/gpt-oss-120b 6 /tmp/c120s
el "tests"
timeout 90 stdbuf -oL $A/main/day0_tests --gtest_filter='CudaFp8Quantize.*:CudaMoeFp8.*:CudaAttentionTc.*' --gtest_brief=1 > $O/t_main.log 2>&1; echo "main rc $?"; grep -E "^\[  (PASSED|FAILED)|Failure" -A3 $O/t_main.log | head -20
timeout 40 stdbuf -oL $A/attn/day0_tests --gtest_filter='CudaAttentionTc.*' --gtest_brief=1 > $O/t_attn.log 2>&1; echo "attn rc $?"; grep -E "^\[  (PASSED|FAILED)|Failure" -A3 $O/t_attn.log | head -20
for n in r2cta rws; do timeout 60 stdbuf -oL $A/$n/day0_tests --gtest_filter='CudaMoeFp8.*:CudaMoeWgmmaFp8.*' --gtest_brief=1 > $O/t_$n.log 2>&1; echo "$n rc $?"; grep -E "^\[  (PASSED|FAILED)|Failure" -A3 $O/t_$n.log | head -12; done
el "attention"
for n in main attn; do timeout 40 $A/$n/day0 bench-moe --tokens 1024,4096 --parts prefill-attention >> $O/attn_$n.log 2>&1; done
grep -E "^ +[0-9]+ +[0-9]+ " $O/attn_main.log $O/attn_attn.log
el "moe"
timeout 150 $A/main/day0 bench-moe --tokens 4096 --parts moe > $O/moe_main.log 2>&1; echo "moe rc $?"; grep -E "gate_up|swiglu|wgmma fp8|moe fused \(graph\)|shape|^gpt" $O/moe_main.log
el "6-layer prefill"
for n in main r2cta rws; do timeout 100 $A/$n/day0 bench /tmp/c120s --synthetic --backend cuda --expert-compute fp8 --prefill 4096 --batches 1 --contexts 128 --decode-steps 1 --kernels > $O/p_$n.log 2>&1; echo "$n rc $?"; grep -E "prefill|tok/s" $O/p_$n.log | head -4; done
el "fixture"
for c in bf16 fp8; do timeout 30 $A/main/day0 compare tests/data/gpt_oss_tiny --reference tests/data/gpt_oss_tiny/reference/prompt0.safetensors --backend cuda --expert-compute $c --tolerance 2e-2 --memory-fraction 0.3 > $O/cmp_$c.log 2>&1; echo "$c: $(grep -E 'greedy|result' $O/cmp_$c.log | tr -s ' ' | paste -sd ';')"; done
el "done"
