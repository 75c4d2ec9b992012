// Executor: runs a ModelSpec's block graph on an Ops backend, one step at a time, for a batch of sequences of
// different lengths at once (their new tokens concatenated into one [tokens, hidden] activation; no loop over
// sequences around the model). K/V live in a paged pool the executor owns (per layer [n_slots, width]); which
// blocks a sequence uses is the caller's bookkeeping (cache/SequenceCache), passed in as block tables.
// It knows blocks (GQA attention, MoE), not families, and not devices: every tensor is allocated by the backend,
// per step from scratch memory that is rewound when the step ends.
//
// Solo use (CLI, reference comparison, evaluation): forward() runs one sequence over the first max_tokens slots
// of the pool with an identity block table. Do not mix solo forward() with batched step() on one executor.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "arch/model_spec.h"
#include "cache/block_pool.h"
#include "model/weights.h"
#include "ops/ops.h"

namespace day0 {

// Called with each intermediate (a host tensor): "embed", "layers.{i}.attn", "layers.{i}.router_indices"
// (i32 [S, k]), "layers.{i}.router_weights", "layers.{i}.moe", "layers.{i}.out", "final_norm", "logits".
// Rows are the step's tokens; a prompt longer than one step reports each step's taps in turn.
using TapFn = std::function<void(std::string_view name, const Tensor& value)>;

// The KV rows one token of `spec` takes in the executor's pools (per layer n_kv_heads x head_dim).
KvLayout kv_layout(const ModelSpec& spec, std::int64_t block_size, DType dtype);

struct ExecutorOptions {
  std::int64_t max_tokens = 0;          // longest sequence (solo forward: prompt + generated)
  std::int64_t max_step_tokens = 8192;  // tokens per step (longer solo prompts prefill in chunks; the CLI's default)
  std::int64_t kv_pool_tokens = 0;      // slots of the paged KV pool; 0: max_tokens (solo use)
  // Against the backend's free memory where it knows it (CUDA), less kv_pool_reserve_bytes kept for step scratch
  // (cache/block_pool.h): the pool as asked or an error, shrunk to what fits, or all that fits; and max_tokens
  // lowered where one sequence of it does not fit (fit_max_tokens; max_tokens() says what it came to).
  KvPoolFit kv_pool_fit = KvPoolFit::as_asked;
  std::int64_t kv_pool_reserve_bytes = 0;
  bool fit_max_tokens = false;
  std::int64_t block_size = 16;         // tokens per KV block
  // Decode steps (one token per sequence) of up to this many sequences replay step graphs captured at create
  // (backends that have them: CUDA); 0: every step runs op by op.
  std::int64_t graph_max_batch = 0;
};

// One sequence's part of a step: its new tokens at positions [start, start + tokens.size()), attending to
// positions [0, start + tokens.size()) through block_table (which must cover them).
struct SequenceStep {
  enum class Logits { none, last, all };
  std::span<const std::int32_t> tokens;
  std::int64_t start = 0;
  std::span<const BlockId> block_table;
  Logits logits = Logits::last;  // none: a prefill chunk that is not the prompt's last
};

// What a step returns for the rows that want logits: the logits, or greedy decoding's pick of each made on the
// device (Ops::greedy_tokens: i32 [rows, 2], the token and -1, or the row's unusable logit), which moves two ids a
// row to the host instead of the vocabulary's logits.
enum class StepOutput { logits, greedy };

// Executor::step_picked's result: the picks of every row that wants logits, and the logits of the rows a host
// sampler reads.
struct PickedStep {
  Tensor picks;                // i32 [rows, 2] as StepOutput::greedy's; undefined where every row is sampled
  std::vector<Tensor> logits;  // f32 [1, V] on the host, one a sampled row, in their order
  std::vector<LogprobRecord> logprobs;  // one a logprob request, in their order (a usable row's; else as poisoned)
};

// A decode step queued by Executor::queue_decode: its picks (i32 [rows, 2], as StepOutput::greedy's) land on the
// host by wait_decode.
struct QueuedDecode {
  Tensor picks;       // host
  Tensor records;     // host, i32 [logprob requests, kLogprobRecordWords]: their records (logprob_record.h)
  QueuedFence fence;  // behind the picks' and records' copies
  bool queued = false;  // false: no graph served the step, which ran at once (picks hold its result)
};

class Executor {
 public:
  // `weights` must already be placed by `ops` (Ops::place_weights). Reserves the KV pool and the backend's
  // workspaces now.
  static Result<std::unique_ptr<Executor>> create(const ModelSpec& spec, ModelWeights weights, Ops& ops,
                                                  const ExecutorOptions& options);

  // One forward step over a batch. Returns host logits: for each sequence in order, the rows it asked for
  // ([0, 1 or n, V] concatenated), or with StepOutput::greedy each such row's pick ([rows, 2] i32). K/V of all the
  // tokens are written into their slots. On error nothing the caller tracks has changed, but the slots of this step
  // may hold partial K/V (they are rewritten on retry).
  Result<Tensor> step(std::span<const SequenceStep> batch, const TapFn& tap = {},
                      StepOutput output = StepOutput::logits);
  // A step whose rows want either their greedy pick or their logits: the picks of every row (numbered as step's),
  // and the logits of `sampled_rows` (ascending) alone. A batch of greedy and sampled sequences then moves the
  // sampled rows of the vocabulary to the host, not every row (64 rows of 201,088 f32 are 51 MB, ~0.9 ms over
  // PCIe at batch 64, v53).
  // `draws` (rows numbered as the picks', none of them sampled): rows whose pick is a draw made on the device
  // (Ops::draw_tokens, the host sampler's draw bit for bit) in place of the argmax. `edits` (rows numbered the
  // same, none of them sampled): rows whose logits take their bias and penalties (Ops::edit_logits) before the pick.
  // `logprobs` (rows numbered the same, none of them sampled or edited): rows whose raw logprobs come back as records
  // (Ops::row_logprobs), so a row reporting logprobs moves a record, not its V logits.
  Result<PickedStep> step_picked(std::span<const SequenceStep> batch, std::span<const std::int32_t> sampled_rows,
                                 const std::vector<TokenDraw>& draws = {}, const LogitEdits& edits = {},
                                 const std::vector<LogprobRequest>& logprobs = {});
  // Greedy decode with the next step launched ahead. queue_decode queues a decode step (one token a sequence, its
  // pick wanted) and returns without waiting where a step graph serves the batch; otherwise it runs the step at
  // once. With fed_tokens the sequences' tokens must be empty: row r's token is row r's pick of the decode step
  // queued just before (of at least as many rows), taken on the device, so step n + 1 is queued before step n's
  // picks reach the host and the GPU does not idle while the host reads them. Any other step in between (step,
  // step_picked, forward) ends the chain. `draws`: rows whose pick (and fed token) is drawn, and `edits`, as
  // step_picked's; with fed tokens a row's edits may have its fed token pending (logit_edits.h), edited as if the
  // host had seen it. `logprobs` as step_picked's: their records land in the result's `records` with the picks.
  Result<QueuedDecode> queue_decode(std::span<const SequenceStep> batch, bool fed_tokens,
                                    const std::vector<TokenDraw>& draws = {}, const LogitEdits& edits = {},
                                    const std::vector<LogprobRequest>& logprobs = {});
  // The picks of a queued decode step (i32 [rows, 2] on the host), once its work is done; its faults surface here.
  // Wait for a step before the fourth one after it is queued.
  Result<Tensor> wait_decode(const QueuedDecode& step);
  // Solo queue_decode at length(), which it advances: of `token`, or fed (nullopt) from the last queued pick.
  Result<QueuedDecode> queue_solo_decode(std::optional<std::int32_t> token);
  // Applies copy-on-write block copies (SequenceCache::take_ops) in every layer, in order.
  Status copy_blocks(std::span<const BlockCopy> copies);
  // Copies n_blocks whole consecutive blocks src.. to dst.. (non-overlapping) in every layer: one copy per layer
  // and K / V (bench: every batch row gets its own copy of a prefilled context).
  Status copy_block_range(BlockId src, BlockId dst, std::int32_t n_blocks);

  // Solo: appends `tokens` at positions length()..length()+S-1 and returns host logits: [S, V] if all_logits,
  // else [1, V] for the last token; with StepOutput::greedy those rows' picks instead ([S or 1, 2] i32, as step).
  // On error the sequence is left as it was before the failing step.
  Result<Tensor> forward(std::span<const std::int32_t> tokens, bool all_logits = false, const TapFn& tap = {},
                         StepOutput output = StepOutput::logits);
  std::int64_t length() const { return solo_length_; }
  void reset() { solo_length_ = 0; }

  const ModelSpec& spec() const { return spec_; }
  std::int64_t max_tokens() const { return max_tokens_; }
  std::int64_t max_step_tokens() const { return max_step_tokens_; }
  std::int64_t block_size() const { return block_size_; }
  std::int32_t n_blocks() const { return n_blocks_; }
  std::size_t kv_cache_bytes() const;
  Ops& ops() { return ops_; }
  // "captured for batches 1, 2, 4, ..." or "off: <why>" (for the load report).
  const std::string& graph_status() const { return graph_status_; }

 private:
  Executor(const ModelSpec& spec, ModelWeights weights, Ops& ops)
      : spec_(spec), weights_(std::move(weights)), ops_(ops) {}
  // A step's device inputs and the rows whose logits it returns.
  struct StepInputs {
    Tensor ids, positions, slots;
    PagedKv kv;
    Tensor logit_rows;  // undefined: every row, in order
    std::int64_t tokens = 0, logit_count = 0;
  };
  // Logits rows a step downloads beside its result (step_picked's sampled rows, ascending), and them once it ran.
  struct RowLogits {
    std::span<const std::int32_t> rows;
    std::vector<Tensor> logits;    // host [1, V] each
    std::vector<TokenDraw> draws;  // picks drawn, not taken as the argmax (StepOutput::greedy)
    const LogitEdits* edits = nullptr;  // applied before the picks (StepOutput::greedy)
    std::vector<LogprobRequest> logprobs;  // rows whose records are made after the picks (StepOutput::greedy)
    Tensor device_records;                 // i32 [logprobs, kLogprobRecordWords] in backend memory, the step's caller's
    Tensor records;                        // them on the host, once the step ran
  };
  // step, and with `extra` the logits of extra.rows.
  Result<Tensor> run_batch(std::span<const SequenceStep> batch, const TapFn& tap, StepOutput output,
                           RowLogits& extra);
  // The device part of a step: embedding, every layer, the head. Returns the logits [logit_count, V] in step
  // scratch (undefined when logit_count is 0).
  Result<Tensor> run_step(const StepInputs& in, const TapFn& tap);
  // Step graphs (executor_graphs.cpp): capture at create; a served decode batch replays one (an undefined
  // result: no graph serves this batch).
  Status capture_graphs(std::int64_t max_batch);
  Result<Tensor> step_with_graph(std::span<const SequenceStep> batch, StepOutput output, RowLogits& extra);
  // The step's result on the host from its logits on the device (rows x V): them, or their greedy picks; and the
  // logits of extra.rows.
  Result<Tensor> step_result(const Tensor& logits, StepOutput output, Tensor& picks, RowLogits& extra);
  // Host [1, V] rows of device logits [R, V] (`rows` ascending): one download a run of consecutive rows, or past a
  // few runs one from the first row to the last. Queued (Ops::start_download): read them after a synchronize().
  Result<std::vector<Tensor>> download_rows(const Tensor& logits, std::span<const std::int32_t> rows);
  // The graphs' inputs for `batch` padded to `rows`, in one transfer. ids_on_device: the token ids already sit in
  // graph_ids_ (queue_decode's fed tokens), so the batch's tokens are not read and that region is not copied.
  Status fill_graph_inputs(std::span<const SequenceStep> batch, std::int64_t rows, bool ids_on_device = false);
  // Checks sequence b of a step: n new tokens (its own, or fed where its tokens are empty) at positions inside the
  // sequence limit, covered by its block table inside the pool, its tokens inside the vocabulary.
  Status check_sequence(std::size_t b, const SequenceStep& s, std::int64_t n) const;
  // The pool row of position `pos` through a sequence's block table.
  std::int32_t kv_slot(std::span<const BlockId> table, std::int64_t pos) const {
    return static_cast<std::int32_t>(table[pos / block_size_] * block_size_ + pos % block_size_);
  }
  Status emit(const TapFn& tap, std::string_view name, const Tensor& value);
  // Whether the first attention layer's q/k/v take a GEMM on bf16 rows at this row count (Ops::linear_reads_bf16 of
  // its q weight; layers share shapes): then the norms before them hand over a bf16 copy of h.
  bool q_reads_bf16(std::int64_t rows) const;
  // h_bf16 (or null): h rounded to bf16, made with it (Ops::linear_inputs_bf16, q_reads_bf16).
  Status token_mixer(int layer, const Tensor& h, const Tensor* h_bf16, const Tensor& positions, const Tensor& slots,
                     const PagedKv& kv, Tensor& out);
  Status attention_block(int layer, const Tensor& h, const Tensor* h_bf16, const Tensor& positions,
                         const Tensor& slots, const PagedKv& kv, Tensor& out);
  // A norm's weight, epsilon and whether it scales by 1 + weight.
  std::tuple<const Tensor&, float, bool> norm_args(const NormSpec& n) const;
  // A MoE block's router outputs, computed with the norm before it (channel_norm).
  struct Routing {
    Tensor logits, indices, weights;
  };
  // x += y, h = the channel block's norm of x; for a MoE block its router too (one kernel where the backend can).
  Status channel_norm(int layer, Tensor& x, const Tensor& y, Tensor& h, Routing& routing);
  Status channel_mixer(int layer, const Tensor& h, const Routing& routing, Tensor& out, const TapFn& tap);
  // The residual add and next norm after a block (x += block out, normed = norm(x)), for a block that takes them in.
  struct NormAfter {
    Tensor* x;
    const Tensor* w;
    float eps;
    bool plus_one;
    Tensor* normed;       // or an empty Tensor with normed_bf16: the next block reads the bf16 rows alone
    Tensor* normed_bf16;  // or null: normed rounded to bf16 as well
  };
  // With `after`, out is not written: the experts' sum goes into after's residual add and norm.
  Status moe_block(int layer, const Tensor& h, const Routing& routing, Tensor& out, const TapFn& tap,
                   const NormAfter* after = nullptr);

  ModelSpec spec_;
  ModelWeights weights_;
  Ops& ops_;
  std::vector<Tensor> k_pool_, v_pool_;  // per layer [n_blocks * block_size, width]
  std::vector<Tensor> inv_freq_;         // per layer, f32 [rotary_dim / 2] in backend memory
  std::int64_t max_tokens_ = 0, max_step_tokens_ = 0, block_size_ = 0;
  std::int32_t n_blocks_ = 0;
  std::vector<BlockId> solo_table_;      // identity over the first max_tokens slots
  std::int64_t solo_length_ = 0;

  struct StepGraph {
    std::int64_t batch = 0;  // rows it runs (a batch of fewer sequences is padded)
    int handle = -1;
    Tensor logits;           // [batch, V] where the replay leaves them (step scratch)
    Tensor picks;            // i32 [batch, 2]: greedy picks, made after a replay (step scratch past the graph's)
    Tensor records;          // i32 [batch, kLogprobRecordWords]: logprob records, likewise
  };
  std::vector<StepGraph> graphs_;  // ascending batch
  // The graph serving a decode batch of n sequences, or null.
  const StepGraph* graph_for(std::int64_t n) const;
  std::string graph_status_ = "off";
  // Fixed device inputs of the graphs (rows for the largest bucket) and the KV block padding rows write to. They
  // are views of one i32 buffer (ids, positions, slots, sequence rows, then the tables), filled from one host copy
  // of the same layout in one transfer a step.
  Tensor graph_inputs_, graph_inputs_host_;
  Tensor graph_ids_, graph_positions_, graph_slots_, graph_q_seq_, graph_tables_;
  std::int64_t graph_table_width_ = 0, graph_region_ = 0;  // table columns; i32 per input region
  BlockId pad_block_ = -1;
  // The last queue_decode, for the fed tokens of the next: its rows and its picks (a queued one, replayed through a
  // graph, also wrote them into graph_ids_ on the device).
  struct LastDecode {
    std::int64_t rows = 0;
    QueuedDecode step;
  };
  std::optional<LastDecode> last_decode_;
};

}  // namespace day0
