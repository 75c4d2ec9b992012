// The warp-specialised MXFP4 grouped FP8 GEMM: see moe_mxfp4_ws_fp8_cuda.cuh.
#include "ops/cuda/moe_mxfp4_ws_fp8_cuda.cuh"

#include <algorithm>
#include <string>
#include <type_traits>

#include "ops/cuda/bulk_copy.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/tensor_map.h"
#include "ops/cuda/wgmma.cuh"
#include "ops/cuda/wgmma_k_loop.cuh"
#include "quant/fp8_experts.h"
#include "quant/mxfp4_to_fp8_table.h"

namespace day0 {
namespace {

using namespace mxfp4_kernels;

constexpr int kBM = 128;  // weight rows per CTA: a consumer warpgroup's 64 each
constexpr int kBK = 128;  // values per k-tile: four MXFP4 groups, one 128-byte swizzled row of e4m3
constexpr int kBN = kWsFp8TileTokens;
constexpr int kTokenBox = 64;  // token rows per tensor copy: a tile takes as many boxes as its live width needs
// Warp 0 only issues the tensor copies (so they run ahead across items whatever the others wait on); warps 1-7
// convert, group idx % 4 of row idx / 4 for idx = t, t + 224, .. < 512 (converter thread t): seven warps, as the
// conversion is ALU work with shared-memory latency between its steps (one warp a scheduler left it latency-bound,
// v21). setmaxnreg moves registers from these two warpgroups to the consumers (96 accumulators at 192 tokens):
// ptxas compiles every warp within 65,536 / 512 = 128 (the MMAs at 192 tokens need 122), so no more threads.
constexpr int kProducers = 256, kConverters = kProducers - 32, kConsumers = 256;
static_assert(kConverters % 4 == 0);
constexpr int kThreads = kProducers + kConsumers;
constexpr int kProducerRegisters = 88, kConsumerRegisters = 168;  // 256 x (88 + 168) = the 65,536 registers
constexpr int kStages = 4;  // operand stages (raw weight bytes, converted A, tokens)
// Experts whose offsets every warp reads from shared memory, copied once a CTA (an item's tile is found at its start,
// each warp alone: from global memory that was a chain of L2 round trips an item); past it, from global memory.
constexpr int kSharedOffsets = 256;

// Shared memory from a 1,024-byte aligned base: kStages x (converted A tile, token tile, raw weight bytes: row t's
// four groups at 64 t), then two scale blocks (items of even and odd count: the issuer copies the next item's while
// the converters read the last one's). ~220 KB at K = 2,880: one CTA an SM.
struct Layout {
  static constexpr int kATile = kBM * kBK, kBTile = kBN * kBK, kRaw = kBM * kBK / 2;
  static constexpr int kA = 0, kB = kA + kStages * kATile, kRawAt = kB + kStages * kBTile;
  static constexpr int kScales = kRawAt + kStages * kRaw;
  __host__ __device__ static constexpr int scale_block(int groups) { return (kBM * groups + 15) / 16 * 16; }
  __host__ __device__ static constexpr int bytes(int groups) { return 1024 + kScales + 2 * scale_block(groups); }
};
static_assert(Layout::bytes(kWsFp8MaxGroups) + 5 * 1024 <= 227 * 1024, "shared memory of an H100 / H200 SM");

// The threads of one named barrier (1: the converters, 2: the consumers) wait for each other.
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Slot y among the tiles of the experts with a full tile (`whole_only`) or of every expert, in expert order, found by
// one warp alone (no barrier: the issuer for each item, every warp for the count), and how many such slots there are
// (`total`). Every lane of the warp calls it.
__device__ TokenTile warp_token_tile(const int* offsets, int n_experts, int y, bool whole_only, int& total) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  TokenTile tile{-1, 0, 0};
  int before = 0;
  for (int c0 = 0; c0 < n_experts; c0 += 32) {
    const int i = c0 + lane;
    int b = 0, n = 0;
    if (i < n_experts) {
      b = offsets[i];
      n = offsets[i + 1] - b;
    }
    const int tiles = whole_only && n < kBN ? 0 : (n + kBN - 1) / kBN;
    const int inclusive = warp_inclusive_sum(tiles);
    const int start = before + inclusive - tiles;
    const unsigned hit = __ballot_sync(0xffffffffu, tiles > 0 && y >= start && y < start + tiles);
    if (hit != 0 && tile.e < 0) {  // uniform
      const int src = __ffs(hit) - 1;
      const int begin = b + (y - start) * kBN;
      tile.e = __shfl_sync(0xffffffffu, i, src);
      tile.begin = __shfl_sync(0xffffffffu, begin, src);
      tile.end = __shfl_sync(0xffffffffu, min(b + n, begin + kBN), src);
    }
    before += __shfl_sync(0xffffffffu, inclusive, 31);
  }
  total = before;
  return tile;
}

// The order in which the items' token tiles go (the issuer's; the CTAs claim items in slot order, and an item's cost
// grows with its width, so a launch ends wherever the order put its last wide items). With the offsets in shared
// memory: every tile of the experts with a full tile first, in expert order (an expert's tiles side by side, so its
// raw weights come from L2 for all but the first: apart, the GEMM lost 3-10%, v40); then the experts of one partial
// tile by width in 16-token steps (the MMAs' widths), widest first, expert order within a step. Otherwise expert
// order. The same sums whichever order: each item's outputs do not depend on when or where it runs.
class SlotOrder {
 public:
  // Every lane of the issuer warp calls each member; `table` is kSharedOffsets bytes of shared memory.
  __device__ SlotOrder(const int* offsets, int n_experts, bool small_last, std::uint8_t* table)
      : offsets_(offsets), n_experts_(n_experts), small_last_(small_last), table_(table) {
    if (small_last_) warp_token_tile(offsets, n_experts, 0, true, whole_slots_);
  }

  // Slot y < the launch's slots.
  __device__ TokenTile tile(int y) {
    int total;
    if (!small_last_ || y < whole_slots_) return warp_token_tile(offsets_, n_experts_, y, small_last_, total);
    if (!table_written_) write_table();
    const int e = table_[y - whole_slots_];
    return TokenTile{e, offsets_[e], offsets_[e + 1]};
  }

 private:
  // The experts of one partial tile in their order, written once a CTA when the issuer first reaches them (late in
  // the launch, under the stages it has in flight). Lane l holds the widths of experts l, l + 32, .. (4 bits each:
  // 1..12 steps, 0 for none or a full tile); each (step, chunk of 32 experts) places its experts by a ballot.
  __device__ void write_table() {
    const int lane = static_cast<int>(threadIdx.x) % 32, chunks = (n_experts_ + 31) / 32;
    static_assert(kSharedOffsets <= 8 * 32 && kBN / 16 <= 15, "8 experts' steps of 4 bits a lane");
    unsigned steps = 0;
    for (int i = 0; i < chunks; ++i) {
      const int e = lane + 32 * i;
      const int n = e < n_experts_ ? offsets_[e + 1] - offsets_[e] : 0;
      if (n > 0 && n < kBN) steps |= static_cast<unsigned>((n + 15) / 16) << (4 * i);
    }
    int at = 0;
    for (int step = kBN / 16; step >= 1; --step)
      for (int i = 0; i < chunks; ++i) {
        const bool mine = ((steps >> (4 * i)) & 15u) == static_cast<unsigned>(step);
        const unsigned ballot = __ballot_sync(0xffffffffu, mine);
        if (mine) table_[at + __popc(ballot & ((1u << lane) - 1))] = static_cast<std::uint8_t>(lane + 32 * i);
        at += __popc(ballot);
      }
    __syncwarp();  // every lane reads what the others wrote
    table_written_ = true;
  }

  const int* offsets_;
  int n_experts_;
  bool small_last_;
  std::uint8_t* table_;
  int whole_slots_ = 0;  // tiles of the experts with a full tile
  bool table_written_ = false;
};

// Item `count` of this CTA (lane 0 of the issuer): blockIdx.x first, then a claim on the counter (whose claims
// number exactly `items` a launch, each CTA's last one past the end, so the one that draws claim items - 1 knows
// every CTA has drawn its last and sets the counter back to zero for the next launch on it); without a counter,
// every gridDim.x-th item.
__device__ __forceinline__ int next_item(int* counter, int count, int items) {
  if (count == 0) return blockIdx.x;
  if (counter == nullptr) return blockIdx.x + count * gridDim.x;
  const int claim = atomicAdd(counter, 1);
  if (claim == items - 1) atomicExch(counter, 0);
  return gridDim.x + claim;
}

// Persistent: CTA i takes item i first, then the next unclaimed one from f.item_counter (item = slot * row_blocks +
// row block, slots in SlotOrder's order: the row blocks of one token tile run side by side and share its token rows
// in L2), or without a counter items i + gridDim.x, i + 2 gridDim.x, .. Items differ in cost (an expert's last tile is
// narrow), so a fixed share left SMs idle while the slowest finished. The issuer claims each item and posts it in
// item_of for the other roles. Tensor copies (TMA) bring each k-tile's raw weight bytes and token rows; the converters
// turn the bytes into E4M3 A tiles; the consumers' MMAs read both. Every hand-over is an mbarrier: full (the copies'
// bytes landed), converted (the converter warps' arrivals), empty (the consumer warps', once the MMAs that read the
// stage are done); no CTA-wide barrier after the set-up.
template <bool kSwiglu>
__global__ void __launch_bounds__(kThreads, 1)
    mxfp4_ws_fp8_gemm_kernel(Fp8KernelArgs f, int n_experts, const __grid_constant__ CUtensorMap weight_map,
                             const __grid_constant__ CUtensorMap token_map) {
  using L = Layout;
  const KernelArgs& a = f.k;
  extern __shared__ unsigned char smem_unaligned[];
  unsigned char* smem = smem_unaligned + ((1024 - wgmma::shared_address(smem_unaligned) % 1024) % 1024);
  // Each row's largest scale code (its scale is 2^(code - 127 - 6)), for items of even and odd count: the converters
  // write the next item's while the consumers store the last one.
  __shared__ int row_code[2][kBM];
  __shared__ std::uint64_t shift_codes[kMxfp4Fp8MaxShift - kMxfp4Fp8MinShift + 1];
  __shared__ EpilogueStage<kBN, kBM> stage;
  __shared__ float entry_scale[kBN];
  __shared__ int shared_offsets[kSharedOffsets + 1];
  __shared__ std::uint8_t small_experts[kSharedOffsets];  // the issuer's SlotOrder
  // The item of count c and its token tile at [c % 2] (item -1 past the last), posted with scales_full[c % 2]: the
  // consumers read the tile the issuer found rather than each warp scanning the offsets again between two items.
  __shared__ int item_of[2];
  __shared__ TokenTile tile_of[2];
  // codes_free[i]: row_code[i] stored (consumer warps); scales_full / scales_empty[i]: scale block i copied / read.
  __shared__ std::uint64_t full[kStages], converted[kStages], empty[kStages], codes_free[2], scales_full[2],
      scales_empty[2];
  const int tid = threadIdx.x;
  const int row_blocks = (a.out_rows + kBM - 1) / kBM;
  const int k_tiles = (a.groups + 3) / 4;  // the last k-tile may end in zeros (the copies' bytes past the matrix)
  const int scale_block = L::scale_block(a.groups);
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      bulk_copy::barrier_init(&full[s], 1);
      bulk_copy::barrier_init(&converted[s], kConverters / 32);
      bulk_copy::barrier_init(&empty[s], kConsumers / 32);
    }
    for (int i = 0; i < 2; ++i) {
      bulk_copy::barrier_init(&codes_free[i], kConsumers / 32);
      bulk_copy::barrier_init(&scales_full[i], 1);
      bulk_copy::barrier_init(&scales_empty[i], kConverters / 32);
    }
    bulk_copy::fence_barrier_init();
  }
  if (tid <= kMxfp4Fp8MaxShift - kMxfp4Fp8MinShift) shift_codes[tid] = mxfp4_fp8_table(kMxfp4Fp8MinShift + tid).codes;
  const bool offsets_shared = n_experts <= kSharedOffsets;
  if (offsets_shared)
    for (int i = tid; i <= n_experts; i += kThreads) shared_offsets[i] = a.offsets[i];
  const int* offsets = offsets_shared ? shared_offsets : a.offsets;
  __syncthreads();
  const int lane = tid % 32;
  int total;  // slots with work, the same for every item
  warp_token_tile(offsets, n_experts, 0, false, total);
  const int items = total * row_blocks;

  if (tid < kProducers) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kProducerRegisters));
    if (tid < 32) {
      // ---- Issuer: one lane copies each item's scale block, then its k-tiles' weight box and token boxes into
      // each stage once the MMAs that read it last are done.
      int kg = 0;  // k-tiles issued before this item: stage and phase count on across items
      SlotOrder order(offsets, n_experts, offsets_shared, small_experts);
      for (int count = 0;; ++count) {
        const int item = __shfl_sync(0xffffffffu, lane == 0 ? next_item(f.item_counter, count, items) : 0, 0);
        const int b = count % 2;
        // Past the last item: no tile, and item -1 is posted so that the other roles stop.
        const TokenTile tile = item < items ? order.tile(item / row_blocks) : TokenTile{-1, 0, 0};
        if (lane == 0) {
          // item_of[b] is read by the converters and the consumers of item count - 2 until they are done with it.
          if (count >= 2) {
            bulk_copy::wait(&scales_empty[b], ((count / 2) & 1) ^ 1);
            bulk_copy::wait(&codes_free[b], ((count / 2) & 1) ^ 1);
          }
          if (item >= items) {
            item_of[b] = -1;
            bulk_copy::arrive(&scales_full[b]);
          } else {
            const int row0 = item % row_blocks * kBM, rows = min(kBM, a.out_rows - row0);
            const int block_row0 = tile.e * a.out_rows + row0;
            const int boxes = (tile.end - tile.begin + kTokenBox - 1) / kTokenBox;
            item_of[b] = item;
            tile_of[b] = tile;
            bulk_copy::arrive_expecting(&scales_full[b], rows * a.groups);
            bulk_copy::copy_to_shared(smem + L::kScales + b * scale_block,
                                      a.scales + static_cast<std::int64_t>(block_row0) * a.groups, rows * a.groups,
                                      &scales_full[b]);
            for (int kt = 0; kt < k_tiles; ++kt) {
              const int at = kg + kt, s = at % kStages;
              if (at >= kStages) bulk_copy::wait(&empty[s], ((at / kStages) & 1) ^ 1);
              bulk_copy::arrive_expecting(&full[s], L::kRaw + boxes * kTokenBox * kBK);
              if (a.tiled)  // the same bytes in the same place: 8 tiles of 16 rows x 64 bytes
                bulk_copy::tensor_copy_4d(smem + L::kRawAt + s * L::kRaw, &weight_map, 0, 0, kt,
                                          block_row0 / kMxfp4TileRows, &full[s]);
              else
                bulk_copy::tensor_copy_2d(smem + L::kRawAt + s * L::kRaw, &weight_map, kt * kBK / 2, block_row0,
                                          &full[s]);
              for (int x = 0; x < boxes; ++x)
                bulk_copy::tensor_copy_2d(smem + L::kB + s * L::kBTile + x * kTokenBox * kBK, &token_map, kt * kBK,
                                          tile.begin + x * kTokenBox, &full[s]);
            }
          }
        }
        __syncwarp();
        if (item >= items) break;
        kg += k_tiles;
      }
      return;
    }
    // ---- Converters: an item's live rows only (128, or 64 where out = 64 mod 128: the A tile's other half is not
    // read then), groups past the row as zeros.
    const int ct = tid - 32;
    const int j = ct % 4;  // kConverters % 4 == 0: every whole slot of this thread has the same group
    int kg = 0;
    for (int count = 0;; ++count) {
      const int b = count % 2;
      bulk_copy::wait(&scales_full[b], (count / 2) & 1);
      const int item = item_of[b];
      if (item < 0) break;
      const int row0 = item % row_blocks * kBM, rows = min(kBM, a.out_rows - row0);
      const std::uint8_t* codes = smem + L::kScales + b * scale_block;
      // Read by the consumers' stores after a full barrier this precedes; free once they stored item count - 2.
      if (count >= 2) bulk_copy::wait(&codes_free[b], ((count / 2) & 1) ^ 1);
      if (ct < kBM) {  // row ct's largest code
        int max_code = 0;
        if (ct < rows)
          for (int g = 0; g < a.groups; ++g) max_code = max(max_code, static_cast<int>(codes[ct * a.groups + g]));
        row_code[b][ct] = max_code;
      }
      named_barrier(1, kConverters);
      // The item's (row, group) slots stay with a thread for the item: their rows' codes read once, and each k-tile's
      // loads (raw bytes, block codes) issued together before any conversion. kWhole whole slots a thread (slot
      // ct + kConverters i), the rest as 16-value halves on the first threads, one each: at 128 rows the busiest
      // warps take 2.5 groups of 32 values where whole slots gave 3 (each k-tile waits for its slowest converter
      // warp, v34), at 64 rows 1.5. One loop for each row count, so the 128-row loop tests no row.
      auto convert_k_tiles = [&](auto live_rows) {
        constexpr int kSlots = decltype(live_rows)::value * 4;  // (row, group) slots of a k-tile
        constexpr int kWhole = kSlots / kConverters;
        constexpr int kHalves = 2 * (kSlots - kWhole * kConverters);
        static_assert(kHalves <= kConverters, "one half slot a converter thread at most");
        int row_shift[kWhole];
#pragma unroll
        for (int i = 0; i < kWhole; ++i) row_shift[i] = row_code[b][(ct + kConverters * i) / 4] - kFp8RowExponentShift;
        // The half slot: slot kWhole kConverters + ct / 2 (row half_r, group half_j), its values 16 half_h on.
        const bool has_half = ct < kHalves;
        const int half_slot = kWhole * kConverters + ct / 2, half_r = half_slot / 4, half_j = half_slot % 4,
                  half_h = ct % 2;
        const int half_row_shift = has_half ? row_code[b][half_r] - kFp8RowExponentShift : 0;
        for (int kt = 0; kt < k_tiles; ++kt) {
          const int at = kg + kt, s = at % kStages, g = 4 * kt + j, half_g = 4 * kt + half_j;
          bulk_copy::wait(&full[s], (at / kStages) & 1);
          const unsigned char* raw = smem + L::kRawAt + s * L::kRaw;
          unsigned char* a_tile = smem + L::kA + s * L::kATile;
          uint4 w[kWhole];
          int code[kWhole];
#pragma unroll
          for (int i = 0; i < kWhole; ++i) {
            const int r = (ct + kConverters * i) / 4;
            w[i] = *reinterpret_cast<const uint4*>(raw + r * 64 + 16 * j);
            code[i] = g < a.groups ? static_cast<int>(codes[r * a.groups + g]) : -1;
          }
          uint2 half_w = make_uint2(0u, 0u);
          int half_code = -1;
          if (has_half) {
            half_w = *reinterpret_cast<const uint2*>(raw + half_r * 64 + 16 * half_j + 8 * half_h);
            if (half_g < a.groups) half_code = codes[half_r * a.groups + half_g];
          }
#pragma unroll
          for (int i = 0; i < kWhole; ++i) {
            const int r = (ct + kConverters * i) / 4;
            // Groups past the row: shift 0 (their bytes are zeros).
            const int shift = code[i] >= 0 ? code[i] - row_shift[i] : 0;
            store_group_fp8(w[i], shift_codes[mxfp4_fp8_clamped_shift(shift) - kMxfp4Fp8MinShift], a_tile + r * kBK, r,
                            j);
          }
          if (has_half) {
            const int shift = half_code >= 0 ? half_code - half_row_shift : 0;
            store_half_group_fp8(half_w, shift_codes[mxfp4_fp8_clamped_shift(shift) - kMxfp4Fp8MinShift],
                                 a_tile + half_r * kBK, half_r, 2 * half_j + half_h);
          }
          wgmma::fence_shared_for_mma();  // the conversion's stores, for the MMAs
          __syncwarp();
          if (lane == 0) bulk_copy::arrive(&converted[s]);
        }
      };
      if (rows == kBM)
        convert_k_tiles(std::integral_constant<int, kBM>{});
      else
        convert_k_tiles(std::integral_constant<int, kBM / 2>{});
      __syncwarp();
      if (lane == 0) bulk_copy::arrive(&scales_empty[b]);
      kg += k_tiles;
    }
    return;
  }

  // ---- Consumers: warpgroup c on rows 64 c .. 64 c + 63 and every token of the tile.
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kConsumerRegisters));
  const int ct = tid - kProducers, c = ct / 128, warp = ct / 32;
  int kg = 0;
  for (int count = 0;; ++count) {
    bulk_copy::wait(&scales_full[count % 2], (count / 2) & 1);
    const int item = item_of[count % 2];
    if (item < 0) break;
    const TokenTile tile = tile_of[count % 2];
    const int row0 = item % row_blocks * kBM, rows = min(kBM, a.out_rows - row0);
    const int live = tile.end - tile.begin, cols = (live + 15) / 16 * 16;
    const std::int64_t block_row0 = static_cast<std::int64_t>(tile.e) * a.out_rows + row0;
    // What the epilogue reads besides the accumulators: loaded now, stored to shared memory after the k-loop (the
    // stores would wait an L2 round trip before the first MMA).
    using Stage = EpilogueStage<kBN, kBM>;
    const Stage::Values staged = Stage::fetch<kSwiglu>(a, tile.begin, live, block_row0, rows, ct);
    const float token_scale = ct < live ? f.sx[tile.begin + ct] : 0.f;  // rows of x8 by entry (the launch checks)
    // A 64-row item (out = 64 mod 128) has no rows for the second warpgroup: it runs zero k-tiles, and the first
    // warpgroup's warps arrive for it on each stage's empty barrier. A trip count ptxas knows warp-uniform, not a
    // branch around the MMAs (under which it serialises them, v42). Skipping the stages' barriers stays within
    // their parity: the named barrier after the k-loop holds it until the first warpgroup has waited every k-tile.
    const bool has_rows = c * 64 < rows;
    const int my_k_tiles = __shfl_sync(0xffffffffu, has_rows ? k_tiles : 0, 0);
    const unsigned empty_arrivals = rows > 64 ? 1 : 2;
    named_barrier(2, kConsumers);  // the last item's stores read the staged values
    wgmma::at_width<kBN>(cols, [&](auto width) {
      constexpr int N = decltype(width)::value;
      float acc[N / 2];
#pragma unroll
      for (int i = 0; i < N / 2; ++i) acc[i] = 0.f;
      for (int kt = 0; kt < my_k_tiles; ++kt) {
        const int at = kg + kt, s = at % kStages;
        bulk_copy::wait(&full[s], (at / kStages) & 1);       // the tokens' bytes
        bulk_copy::wait(&converted[s], (at / kStages) & 1);  // the A tile
        const std::uint64_t da = wgmma::sw128_descriptor(smem + L::kA + s * L::kATile + c * 64 * kBK);
        const std::uint64_t db = wgmma::sw128_descriptor(smem + L::kB + s * L::kBTile);
        wgmma::fence();
#pragma unroll
        for (int k = 0; k < kBK / 32; ++k) wgmma::mma_e4m3<N>(acc, da + 2 * k, db + 2 * k);
        wgmma::commit();
        // This k-tile's MMAs done: its stage goes straight back to the issuer (three stages ahead of the MMAs, not
        // two; the other consumer warpgroup's MMAs fill the tensor cores meanwhile).
        wgmma::wait<0>();
        if (lane == 0) bulk_copy::arrive(&empty[s], empty_arrivals);
      }
      stage.put(ct, staged);
      if (ct < live) entry_scale[ct] = token_scale;
      named_barrier(2, kConsumers);  // the staged values written
      if (has_rows)
        store_fp8_tile<kSwiglu, N>(a, acc, row0, c * 64 + (warp % 4) * 16, live, row_code[count % 2], stage,
                                   entry_scale);
    });
    if (lane == 0) bulk_copy::arrive(&codes_free[count % 2]);
    kg += k_tiles;
  }
}

template <bool kSwiglu>
Status launch(const Fp8KernelArgs& args, std::int64_t x8_rows, int n_experts, dim3 grid, cudaStream_t stream) {
  const char* op = "mxfp4_ws_fp8_gemm";
  const KernelArgs& a = args.k;
  if (!mxfp4_ws_fp8_gemm_fits(a.inputs_are_tokens, a.groups) || a.out_rows % 64 != 0)
    return make_error(std::string(op) + ": needs x8 rows by entry, in <= " + std::to_string(32 * kWsFp8MaxGroups) +
                      " and out a multiple of 64");
  auto* kernel = mxfp4_ws_fp8_gemm_kernel<kSwiglu>;
  // Once per process (a process drives one device, CudaContext): more than 48 KB of dynamic shared memory, and the
  // register count the setmaxnreg split assumes.
  static const cudaError_t attribute =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Layout::bytes(kWsFp8MaxGroups));
  D0_CUDA_RETURN_IF_ERROR(attribute);
  static const int registers = [&] {
    cudaFuncAttributes attr{};
    return cudaFuncGetAttributes(&attr, kernel) == cudaSuccess ? attr.numRegs : -1;
  }();
  if (registers != 65536 / kThreads)  // setmaxnreg.inc would wait forever for registers the CTA does not hold
    return make_error(std::string(op) + ": built with " + std::to_string(registers) + " registers a thread, its " +
                      "register split needs " + std::to_string(65536 / kThreads));
  static const int sms = [] {
    int device = 0, count = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
    return count > 0 ? count : 1;
  }();
  const std::uint64_t in = static_cast<std::uint64_t>(a.groups) * 32;
  CUtensorMap weight_map, token_map;
  const std::uint64_t weight_rows = static_cast<std::uint64_t>(n_experts) * a.out_rows;
  if (a.tiled)
    D0_RETURN_IF_ERROR(mxfp4_tiled_tensor_map(a.blocks, weight_rows, a.groups, kBM / kMxfp4TileRows, weight_map));
  else
    D0_RETURN_IF_ERROR(byte_matrix_tensor_map(a.blocks, weight_rows, in / 2, in / 2, kBM, kBK / 2,
                                              TensorMapSwizzle::none, weight_map));
  D0_RETURN_IF_ERROR(
      byte_matrix_tensor_map(args.x8, x8_rows, in, in, kTokenBox, kBK, TensorMapSwizzle::bytes128, token_map));
  // One CTA an SM, each looping over the items (grid.x row blocks x grid.y slots).
  const unsigned items = grid.x * grid.y, ctas = std::min<unsigned>(items, static_cast<unsigned>(sms));
  kernel<<<ctas, kThreads, Layout::bytes(a.groups), stream>>>(args, n_experts, weight_map, token_map);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("mxfp4_ws_fp8_gemm_kernel");
  return Status::success();
}

}  // namespace

bool mxfp4_ws_fp8_gemm_fits(bool inputs_are_tokens, int groups) {
  return !inputs_are_tokens && groups <= kWsFp8MaxGroups;
}

Status launch_mxfp4_ws_fp8_gemm(const Fp8KernelArgs& args, std::int64_t x8_rows, int n_experts, dim3 grid, bool swiglu,
                                cudaStream_t stream) {
  return swiglu ? launch<true>(args, x8_rows, n_experts, grid, stream)
                : launch<false>(args, x8_rows, n_experts, grid, stream);
}

}  // namespace day0
