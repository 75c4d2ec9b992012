// Step graphs: decode steps (one token per sequence, its logits wanted) of up to graph_max_batch sequences replay
// a graph captured at create for the smallest bucket (1, 2, 4, ..., the largest) that holds them, so a step costs
// a few copies and one launch on the host instead of ~20 launches per layer.
//
// A bucket's inputs live in one fixed device buffer (token ids, positions, KV slots, sequence rows, block tables as
// wide as max_tokens needs) that the host fills in one transfer before each replay; rows past the batch are
// padding: token 0 at position 0 of a KV block kept for them (one block past the pool the caller manages).
// Everything else a step touches is step scratch, carved at the same addresses on every replay (the same
// allocations in the same order from an empty scratch), so the graph stays valid while persistent memory is
// unchanged (the backend checks).
// Capture fails where an op waits for the host (a MoE call that groups tokens on the host): steps then run op by
// op and graph_status() says why.
#include <algorithm>
#include <string>

#include "model/executor.h"
#include "model/executor_util.h"

namespace day0 {
namespace {

// The graph inputs' buffer (device, and its host copy): region r starts at r * graph_region_ i32, the block tables
// last, so a step's used part is one prefix of it.
enum GraphInputRegion : std::int64_t { kIds, kPositions, kSlots, kSeqRows, kTables };

}  // namespace

// The tables are W = max_tokens / block_size columns wide (what the graphs were captured with), but a step's rows
// use only their sequences' blocks: the first `used` columns are filled and sent, the rest left as they were (no
// kernel reads a block past its query's position). A server at gpt-oss' 131,072 tokens has 8,192 columns: 2 MB a
// batch-64 step sent whole, 17 KB at 1,024 tokens of context.
Status Executor::fill_graph_inputs(std::span<const SequenceStep> batch, std::int64_t rows, bool ids_on_device) {
  const std::int64_t W = graph_table_width_, P = graph_region_;
  std::int32_t* host = graph_inputs_host_.data<std::int32_t>();
  std::int32_t *ids = host + kIds * P, *positions = host + kPositions * P, *slots = host + kSlots * P;
  std::int32_t *q_seq = host + kSeqRows * P, *tables = host + kTables * P;
  std::int64_t used = 1;  // padding rows' block
  for (const SequenceStep& s : batch)
    used = std::max<std::int64_t>(used, static_cast<std::int64_t>(s.block_table.size()));
  if (2 * used >= W) used = W;  // most of the width: whole rows, one transfer
  for (std::int64_t r = 0; r < rows; ++r) std::fill(tables + r * W, tables + r * W + used, -1);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int32_t* table = tables + r * W;
    q_seq[r] = static_cast<std::int32_t>(r);
    if (r < static_cast<std::int64_t>(batch.size())) {
      const SequenceStep& s = batch[r];
      const std::int64_t n = std::min<std::int64_t>(W, static_cast<std::int64_t>(s.block_table.size()));
      std::copy_n(s.block_table.begin(), n, table);
      if (!ids_on_device) ids[r] = s.tokens[0];
      positions[r] = static_cast<std::int32_t>(s.start);
      slots[r] = kv_slot(s.block_table, s.start);
    } else {  // padding
      ids[r] = 0;
      positions[r] = 0;
      table[0] = pad_block_;
      slots[r] = static_cast<std::int32_t>(pad_block_ * block_size_);
    }
  }
  // The rows' tables end the inputs: one transfer of them all (past the ids where they are on the device already)
  // where the rows fill at least half their width, else the other regions and the tables' used columns apart.
  const std::int64_t first = ids_on_device ? kPositions * P : 0, end = kTables * P + rows * W;
  if (used == W) {
    Tensor dst = graph_inputs_.slice_rows(first, end);
    return ops_.copy_from_host(graph_inputs_host_.slice_rows(first, end), dst);
  }
  Tensor dst = graph_inputs_.slice_rows(first, kTables * P);
  D0_RETURN_IF_ERROR(ops_.copy_from_host(graph_inputs_host_.slice_rows(first, kTables * P), dst));
  Tensor dst_tables = graph_inputs_.slice_rows(kTables * P, end).view({rows, W});
  return ops_.copy_columns_from_host(graph_inputs_host_.slice_rows(kTables * P, end).view({rows, W}), dst_tables, used);
}

const Executor::StepGraph* Executor::graph_for(std::int64_t n) const {
  for (const StepGraph& g : graphs_)
    if (g.batch >= n) return &g;
  return nullptr;
}

Status Executor::capture_graphs(std::int64_t max_batch) {
  if (max_batch <= 0) return Status::success();
  if (ops_.device() == Device::cpu) {
    graph_status_ = "off: the " + std::string(ops_.backend()) + " backend has no step graphs";
    return Status::success();
  }
  if (ops_.profiling()) {  // a replay would skip the spans
    graph_status_ = "off: profiling";
    return Status::success();
  }
  const std::int64_t largest = std::min(max_batch, max_step_tokens_);
  graph_table_width_ = (max_tokens_ + block_size_ - 1) / block_size_;
  const std::int64_t W = graph_table_width_, P = graph_region_ = (largest + 3) / 4 * 4;  // 16-byte regions
  D0_ASSIGN_OR_RETURN(graph_inputs_, ops_.allocate({kTables * P + largest * W}, DType::i32,
                                                   "step graph inputs: ids, positions, slots, rows, block tables"));
  graph_inputs_host_ = Tensor::zeros(graph_inputs_.shape(), DType::i32);
  auto region = [&](GraphInputRegion r, std::int64_t n) { return graph_inputs_.slice_rows(r * P, r * P + n); };
  graph_ids_ = region(kIds, largest);
  graph_positions_ = region(kPositions, largest);
  graph_slots_ = region(kSlots, largest);
  graph_q_seq_ = region(kSeqRows, largest);
  graph_tables_ = region(kTables, largest * W).view({largest, W});
  std::vector<std::int64_t> buckets;
  for (std::int64_t b = 1; b < largest; b *= 2) buckets.push_back(b);
  buckets.push_back(largest);
  std::string sizes;
  for (std::int64_t rows : buckets) {
    StepInputs in;
    in.tokens = in.logit_count = rows;
    in.ids = graph_ids_.slice_rows(0, rows);
    in.positions = graph_positions_.slice_rows(0, rows);
    in.slots = graph_slots_.slice_rows(0, rows);
    in.kv.q_seq = graph_q_seq_.slice_rows(0, rows);
    in.kv.block_tables = graph_tables_.slice_rows(0, rows);
    in.kv.block_size = block_size_;
    D0_RETURN_IF_ERROR(fill_graph_inputs({}, rows));
    {  // One run first: lazily made plans (GEMM heuristics, workspace flags) exist before the capture.
      ScratchScope warm(ops_);
      auto warmed = run_step(in, {});
      if (!warmed.ok()) return warmed.error();
      D0_RETURN_IF_ERROR(ops_.synchronize());
    }
    ScratchScope scope(ops_);
    Tensor logits, picks, records;
    auto handle = ops_.capture_graph([&]() -> Status {
      D0_ASSIGN_OR_RETURN(logits, run_step(in, {}));
      // Allocated only: a greedy step fills it after the replay, from the logits where the replay leaves them.
      D0_ASSIGN_OR_RETURN(picks, ops_.scratch({rows, 2}, DType::i32, "greedy picks"));
      D0_ASSIGN_OR_RETURN(records, ops_.scratch({rows, kLogprobRecordWords}, DType::i32, "logprob records"));
      return Status::success();
    });
    if (!handle.ok()) {
      graphs_.clear();
      graph_status_ = "off: " + handle.error().message;
      return Status::success();
    }
    graphs_.push_back({rows, *handle, logits, picks, records});
    sizes += (sizes.empty() ? "" : ", ") + std::to_string(rows);
  }
  graph_status_ = "captured for decode batches of " + sizes + " (padded up)";
  return Status::success();
}

Result<Tensor> Executor::step_with_graph(std::span<const SequenceStep> batch, StepOutput output, RowLogits& extra) {
  const std::int64_t n = static_cast<std::int64_t>(batch.size());
  const StepGraph* served = graph_for(n);
  if (!served) return Tensor();
  for (const SequenceStep& s : batch)
    if (s.tokens.size() != 1 || s.logits != SequenceStep::Logits::last) return Tensor();
  const StepGraph& g = *served;
  D0_RETURN_IF_ERROR(fill_graph_inputs(batch, g.batch));
  if (Status st = ops_.replay_graph(g.handle); !st.ok()) {
    graphs_.clear();  // persistent memory moved: op by op from now on
    graph_status_ = "off: " + st.error().message;
    return Tensor();
  }
  Tensor picks = g.picks.slice_rows(0, n);
  if (!extra.logprobs.empty()) extra.device_records = g.records.slice_rows(0, std::ssize(extra.logprobs));
  return step_result(g.logits.slice_rows(0, n), output, picks, extra);
}

}  // namespace day0
