// group_by_expert on the device (see ops/expert_grouping.h): the router's choices grouped by expert without a
// copy to the host. A cluster of blocks (one below 2,048 assignments): each warp owns a contiguous segment of the
// assignments and counts it per expert, the counts are scanned (per expert over the warps and the blocks, then over
// the experts), and each warp places its segment in order (stable, so the result equals the CPU reference exactly).
// The fused MoE path's grouping.
#pragma once

#include <cuda_runtime.h>

#include "core/status.h"
#include "core/tensor.h"
#include "quant/fp8_row_order.h"

namespace day0 {

inline constexpr int kGroupingMaxExperts = 1024;

// indices i32 [S, k] on the device. Outputs, all i32 on the device: counts [E], offsets [E + 1], rows [S k],
// assignments [S k], experts [E] (routed experts ascending, then -1), n_routed [1]; with `entries` (i32 [S, k]),
// the inverse of assignments: the grouped entry of each assignment, -1 for one not grouped. An id outside [0, E) is
// not grouped and sets error_flag (i32 [1]) to 1. E <= kGroupingMaxExperts.
Status group_by_expert_cuda(const Tensor& indices, int n_experts, Tensor& counts, Tensor& offsets, Tensor& rows,
                            Tensor& assignments, Tensor& experts, Tensor& n_routed, Tensor& error_flag,
                            cudaStream_t stream, Tensor* entries = nullptr);

// The fused MoE path's FP8 input quantisation in the same launch (decode steps): the grouping as above, and each
// token row of x (f32 [S, H]) quantised into q (f8_e4m3 [S, H], in `order`) and scales (f32 [S]) as
// gather_quantize_fp8_cuda does, the same bits. One launch where group_quantize_fp8_fused says (the one-warp
// grouping, S k <= 256, and rows fp8_held_rows_fit takes), else the two launches.
bool group_quantize_fp8_fused(const Tensor& indices, const Tensor& x, const Tensor& q, Fp8RowOrder order);
Status group_by_expert_quantize_fp8_cuda(const Tensor& indices, int n_experts, Tensor& counts, Tensor& offsets,
                                         Tensor& rows, Tensor& assignments, Tensor& experts, Tensor& n_routed,
                                         Tensor& error_flag, const Tensor& x, Tensor& q, Tensor& scales,
                                         Fp8RowOrder order, cudaStream_t stream, Tensor* entries = nullptr);

}  // namespace day0
