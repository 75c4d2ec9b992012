// Tiled MXFP4 grouped expert GEMM for prefill-sized token counts: see moe_mxfp4_gemm_cuda.h.
#include "ops/cuda/moe_mxfp4_gemm_cuda.h"

#include <cuda_bf16.h>

#include <string>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/mma_sync.cuh"
#include "ops/cuda/moe_mxfp4_kernels.cuh"

namespace day0 {
namespace {

using namespace mxfp4_kernels;

constexpr int kBM = 64;        // weight rows per CTA
constexpr int kBN = 128;       // tokens per CTA
constexpr int kBK = 32;        // inputs per k-step: one MXFP4 group
constexpr int kPad = kBK + 8;  // smem row in bf16: 20 words, so fragment reads hit 32 distinct banks
constexpr int kThreads = 256;  // 8 warps: 2 along the rows x 4 along the tokens, 32 x 32 each
static_assert(kThreads == 4 * kBM && kThreads == 2 * kBN, "loaders: a quarter group of a row, half a token each");

struct Stage {
  __nv_bfloat16 a[kBM][kPad];  // decoded weights, row-major in k
  __nv_bfloat16 b[kBN][kPad];  // token inputs, row-major in k
};

// What one thread fetches from global memory for a k-step: a quarter group of one weight row (8 values) and 32
// bytes of token inputs. Every thread decodes, so no warp idles at the barrier while others decode.
struct Fetch {
  std::uint32_t w;
  std::uint32_t scale;
  uint4 x0, x1;
};

__device__ __forceinline__ Fetch fetch(const KernelArgs& a, std::int64_t w_row_base, const Mxfp4RowUnits& w_units,
                                       int quarter, const __nv_bfloat16* xrow, int x_part, int grp) {
  Fetch f;
  f.w = __ldg(reinterpret_cast<const std::uint32_t*>(a.blocks + w_units.at(grp)) + quarter);
  f.scale = __ldg(a.scales + w_row_base + grp);
  f.x0 = f.x1 = make_uint4(0, 0, 0, 0);
  if (xrow != nullptr) {
    const uint4* src = reinterpret_cast<const uint4*>(xrow + grp * kBK) + 2 * x_part;
    f.x0 = __ldg(src);
    f.x1 = __ldg(src + 1);
  }
  return f;
}

// Decodes the fetched quarter group (8 values) into the stage and stores the inputs.
__device__ __forceinline__ void stage_store(Stage& st, const Fetch& f, int w_row, int quarter, int x_token,
                                            int x_part) {
  const GroupScale sc = group_scale(f.scale);
  *reinterpret_cast<uint4*>(&st.a[w_row][8 * quarter]) =
      decode_word(f.w, [&](std::uint32_t v) { return scaled(v, sc); });
  uint4* xd = reinterpret_cast<uint4*>(&st.b[x_token][16 * x_part]);
  xd[0] = f.x0;
  xd[1] = f.x1;
}

template <bool kSwiglu>
__global__ void __launch_bounds__(kThreads) mxfp4_grouped_gemm_kernel(KernelArgs a, int n_experts) {
  __shared__ __align__(16) Stage stages[2];
  const TokenTile tile = pick_token_tile<kThreads, kBN>(a, n_experts);
  const int e = tile.e, p_begin = tile.begin, p_end = tile.end;
  if (e < 0) return;  // past the routed work (the grid is sized for the most there can be)
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int wm = warp / 4, wn = warp % 4;  // this warp's 32 rows and 32 tokens
  const int row0 = blockIdx.x * kBM;
  const int in = a.groups * kBK;

  // Loader roles: thread tid decodes a quarter group of row tid / 4 and stores 32 bytes of token tid / 2.
  const int w_row = tid / 4, quarter = tid % 4;
  const std::int64_t weight_row = static_cast<std::int64_t>(e) * a.out_rows + row0 + w_row;
  const std::int64_t w_row_base = weight_row * a.groups;  // the row's scales
  const Mxfp4RowUnits w_units = mxfp4_row_units(weight_row, a.groups, a.tiled);
  const int x_token = tid / 2, x_part = tid % 2;
  const __nv_bfloat16* xrow = nullptr;
  if (p_begin + x_token < p_end) {
    const int p = p_begin + x_token;
    xrow = a.x + static_cast<std::int64_t>(a.inputs_are_tokens ? a.rows[p] : p) * in;
  }

  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;

  Fetch f = fetch(a, w_row_base, w_units, quarter, xrow, x_part, 0);
  stage_store(stages[0], f, w_row, quarter, x_token, x_part);
  __syncthreads();
  for (int grp = 0; grp < a.groups; ++grp) {
    const int cur = grp & 1;
    // The next group's loads are in flight during the MMAs.
    if (grp + 1 < a.groups) f = fetch(a, w_row_base, w_units, quarter, xrow, x_part, grp + 1);
    const Stage& st = stages[cur];
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      // Fragments by ldmatrix (the same values as 32-bit loads of rows g / g + 8, columns 2t and 2t + 8).
      // A, rows r0..r0+15: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15).
      // B, tokens n0..n0+15: (tokens 0-7, k 0-7), (0-7, k 8-15), (8-15, k 0-7), (8-15, k 8-15) = two j tiles.
      std::uint32_t af[2][4], bfr[4][2];
#pragma unroll
      for (int i = 0; i < 2; ++i)
        ldmatrix_x4(af[i], &st.a[wm * 32 + i * 16 + lane % 8 + (lane / 8) % 2 * 8][kk * 16 + lane / 16 * 8]);
#pragma unroll
      for (int j = 0; j < 4; j += 2) {
        std::uint32_t r[4];
        ldmatrix_x4(r, &st.b[wn * 32 + j * 8 + lane % 8 + lane / 16 * 8][kk * 16 + (lane / 8) % 2 * 8]);
        bfr[j][0] = r[0], bfr[j][1] = r[1], bfr[j + 1][0] = r[2], bfr[j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          mma_bf16_16816(acc[i][j], af[i][0], af[i][1], af[i][2], af[i][3], bfr[j][0], bfr[j][1]);
    }
    if (grp + 1 < a.groups) stage_store(stages[cur ^ 1], f, w_row, quarter, x_token, x_part);
    __syncthreads();
  }

  // acc[i][j]: rows row0 + 32 wm + 16 i + g (+ 8), tokens p_begin + 32 wn + 8 j + 2t (+ 1).
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int r_lo = row0 + wm * 32 + i * 16 + g;
      const int p0 = p_begin + wn * 32 + j * 8 + 2 * t;
      store_outputs<kSwiglu>(a, e, r_lo, r_lo + 8, p0, p0 + 1, p_end, acc[i][j]);
    }
}

}  // namespace

bool mxfp4_grouped_gemm_fits(const ExpertWeights& w) {
  return is_mxfp4(w.storage) && w.out % kBM == 0 && w.in % kBK == 0;
}

std::int64_t mxfp4_gemm_launch_slots(std::int64_t routed_experts_bound, std::int64_t assignments) {
  return routed_experts_bound + (assignments + kBN - 1) / kBN;
}

Status mxfp4_grouped_gemm_cuda(const Tensor& x, bool inputs_are_tokens, const ExpertWeights& w,
                               const DeviceExpertGroups& groups, std::int64_t launch_slots, const SwigluParams* swiglu,
                               Tensor& out, cudaStream_t stream) {
  const char* op = "mxfp4_grouped_gemm_cuda";
  D0_ASSIGN_OR_RETURN(KernelArgs args, grouped_kernel_args(op, x, inputs_are_tokens, w, groups, swiglu, out));
  if (w.out % kBM != 0)
    return make_error(std::string(op) + ": out must be a multiple of " + std::to_string(kBM) + ", got " +
                      std::to_string(w.out));
  if (launch_slots < 0 || launch_slots > 65535)
    return make_error(std::string(op) + ": launch_slots must be in [0, 65535], got " + std::to_string(launch_slots));
  if (launch_slots == 0 || groups.rows.numel() == 0) return Status::success();
  const dim3 grid(static_cast<unsigned>(w.out / kBM), static_cast<unsigned>(launch_slots));
  if (swiglu)
    mxfp4_grouped_gemm_kernel<true><<<grid, kThreads, 0, stream>>>(args, w.n_experts);
  else
    mxfp4_grouped_gemm_kernel<false><<<grid, kThreads, 0, stream>>>(args, w.n_experts);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("mxfp4_grouped_gemm_kernel");
  return Status::success();
}

}  // namespace day0
