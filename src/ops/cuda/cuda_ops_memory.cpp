// CudaOps' device memory: the MoE workspace's plan, the weights' placement, step scratch, copies between host and
// device, the fences and fault flags a step's work reports through, and the memory report.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/weight_upload.h"
#include "quant/mxfp4_tiles.h"

namespace day0 {

Status CudaOps::plan(const OpsPlan& plan) {
  if (plan.n_experts == 0) return Status::success();
  MoeWorkspaceShape shape{plan.n_experts,         plan.top_k,    plan.hidden,
                          plan.intermediate,       plan.max_step_tokens, options_.expert_compute,
                          plan.expert_storage,    options_.fused_moe_tokens()};
  if (options_.batch_invariant) {  // one MoE kernel for every step size: the fused MXFP4 one
    if (plan.expert_storage != ExpertStorage::mxfp4 || options_.expert_compute != ExpertCompute::bf16)
      return make_error("cuda: batch-invariant mode needs MXFP4 experts computed in bf16, got " +
                        std::string(expert_storage_name(plan.expert_storage)) + " experts and " +
                        std::string(expert_compute_name(options_.expert_compute)) + " compute");
    shape.fused_max_tokens = plan.max_step_tokens;
    shape.batch_invariant = true;
  }
  if (ctx_->arena().used_bytes() != persistent_end_) return make_error("cuda: plan() while step scratch is live");
  D0_ASSIGN_OR_RETURN(MoeWorkspace ws, MoeWorkspace::plan(ctx_->arena(), shape, fault_flags_.slice_rows(1, 2)));
  persistent_by_use_["moe workspace"] += ws.device_bytes;
  moe_ = std::move(ws);
  persistent_end_ = ctx_->arena().used_bytes();
  return Status::success();
}

// Dense float matrices become bf16 (what the GEMMs take); the dense layers' bias vectors become f32, the dtype of
// the GEMMs' outputs, so cuBLASLt adds them in its epilogue instead of a kernel of ours after each GEMM (exact:
// bf16 and f16 widen to f32 without rounding). Expert storage (MXFP4 bytes, stored bf16 / fp8 values and their f32
// row scales), the experts' biases, other vectors (norms, sinks) and everything else keep their stored dtype.
static DType placed_dtype(const std::string& name, const Tensor& t, bool expert) {
  const bool float_dtype = t.dtype() == DType::f32 || t.dtype() == DType::f16 || t.dtype() == DType::bf16;
  if (float_dtype && t.dim() == 1 && name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0)
    return DType::f32;
  const bool float_matrix = t.dim() == 2 && t.size(0) > 1 && t.size(1) > 1 &&
                            (t.dtype() == DType::f32 || t.dtype() == DType::f16);
  return float_matrix && !expert ? DType::bf16 : t.dtype();
}

// The names in the order place_weights allocates them (the arena hands out consecutive ranges): the host map's,
// except that a group of `adjacent` whose tensors are all there comes whole, in its own order, where its first
// member would.
static std::vector<std::string> placement_order(const NamedTensors& host,
                                                const std::vector<std::vector<std::string>>& adjacent) {
  std::map<std::string, const std::vector<std::string>*> group_of;
  for (const auto& group : adjacent)
    if (std::all_of(group.begin(), group.end(), [&](const std::string& n) { return host.count(n) != 0; }))
      for (const std::string& n : group) group_of.emplace(n, &group);
  std::vector<std::string> order;
  std::set<std::string> queued;
  for (const auto& [name, t] : host) {
    const auto g = group_of.find(name);
    for (const std::string& n : g == group_of.end() ? std::vector<std::string>{name} : *g->second)
      if (queued.insert(n).second) order.push_back(n);
  }
  return order;
}

Result<NamedTensors> CudaOps::place_weights(const NamedTensors& host, const WeightRoles& roles,
                                            const ProgressFn& progress) {
  const std::set<std::string>& expert_tensors = roles.experts;
  NamedTensors placed;
  std::vector<UploadItem> items;
  // MXFP4 blocks to tile: each lands row-major at the start of its (larger) tiled tensor, then goes through one
  // scratch copy of the largest into the tiled order.
  std::vector<std::pair<Tensor, Tensor>> to_tile;  // (the row-major bytes as landed, the tiled tensor)
  std::uint64_t need = 0, tile_scratch = 0;
  // One order for every expert tensor (the executor reads them all alike): BackendOptions::mxfp4_order's.
  auto mxfp4_blocks = [&](const std::string& name, const Tensor& t) {
    return expert_tensors.count(name) != 0 && is_mxfp4_blocks(t.dtype(), t.shape());
  };
  std::vector<Mxfp4BlocksTensor> blocks;
  for (const auto& [name, t] : host)
    if (mxfp4_blocks(name, t)) blocks.push_back({name, t.size(1)});
  auto tiled_order = mxfp4_places_tiled(options_.mxfp4_order, blocks);
  if (!tiled_order.ok()) return make_error("cuda place weights: " + tiled_order.error().message);
  experts_tiled_ = *tiled_order;
  auto tiles = [&](const std::string& name, const Tensor& t) { return experts_tiled_ && mxfp4_blocks(name, t); };
  for (const auto& [name, t] : host) {
    const bool tiled = tiles(name, t);
    const std::int64_t numel = tiled ? mxfp4_tiled_bytes(t.size(0) * t.size(1), t.size(2)) : t.numel();
    need += numel * dtype_bits(placed_dtype(name, t, expert_tensors.count(name))) / 8;
    if (tiled) tile_scratch = std::max<std::uint64_t>(tile_scratch, t.nbytes());
  }
  if (need + tile_scratch > ctx_->arena().free_bytes())
    return make_error("cuda: the weights need " + format_bytes(need) +
                      (tile_scratch ? " (+ " + format_bytes(tile_scratch) + " to reorder MXFP4 blocks)" : "") +
                      " but the arena has " + format_bytes(ctx_->arena().free_bytes()) + " free (" +
                      ctx_->device_summary() + ")");
  for (const std::string& name : placement_order(host, roles.adjacent)) {
    const Tensor& t = host.at(name);
    if (t.device() != Device::cpu || !t.is_contiguous())
      return make_error("cuda place weights: " + name + " must be a contiguous cpu tensor");
    const bool expert = expert_tensors.count(name) != 0, tiled = tiles(name, t);
    const DType dtype = placed_dtype(name, t, expert);
    D0_ASSIGN_OR_RETURN(Tensor d,
                        allocate(tiled ? mxfp4_tiled_blocks_shape(t.shape()) : t.shape(), dtype, "weights: " + name));
    (expert ? expert_weight_bytes_ : dense_weight_bytes_) += d.nbytes();
    Tensor landing = tiled ? d.view({d.numel()}).slice_rows(0, t.numel()).view(t.shape()) : d;
    if (tiled) to_tile.emplace_back(landing, d);
    // The uploader narrows f32 / f16 to bf16 on its own; a vector widened to f32 is converted here (a few KB).
    items.push_back({dtype == DType::f32 && t.dtype() != DType::f32 ? t.to_f32() : t, landing});
    placed.emplace(name, d);
  }
  // The report lists weights by kind; the arena bytes of the "weights" use (alignment included) stay out of it.
  persistent_by_use_.erase("weights");
  D0_ASSIGN_OR_RETURN(UploadResult r, upload_tensors(items, ctx_->device(), UploadOptions{}, progress));
  upload_stats_ = {r.bytes_read, r.bytes_written, r.seconds, r.readers};
  const std::size_t activations_peak = scratch_peak_;  // the reorder's scratch is not an activation
  for (auto& [landing, tiled] : to_tile) {
    const ScratchMark mark = scratch_mark();
    D0_ASSIGN_OR_RETURN(Tensor rows, scratch(landing.shape(), DType::u8, "MXFP4 blocks to reorder"));
    D0_RETURN_IF_ERROR(copy(landing, rows));
    D0_RETURN_IF_ERROR(mxfp4_to_tiles_cuda(rows, tiled, ctx_->stream()));
    D0_RETURN_IF_ERROR(synchronize());  // before the next tensor's copy reuses the scratch
    D0_RETURN_IF_ERROR(scratch_release(mark));
  }
  scratch_peak_ = activations_peak;
  return placed;
}

Result<Tensor> CudaOps::allocate(const Shape& shape, DType dtype, const std::string& what) {
  DeviceArena& arena = ctx_->arena();
  if (arena.used_bytes() != persistent_end_)
    return make_error("cuda: persistent allocation of " + what + " while step scratch is live");
  D0_ASSIGN_OR_RETURN(Tensor t, arena.allocate(shape, dtype, what));
  const std::string use = what.substr(0, what.find(':'));
  persistent_by_use_[use] += arena.used_bytes() - persistent_end_;
  persistent_end_ = arena.used_bytes();
  return t;
}

Result<Tensor> CudaOps::scratch(const Shape& shape, DType dtype, const std::string& what) {
  DeviceArena& arena = ctx_->arena();
  D0_ASSIGN_OR_RETURN(Tensor t, arena.allocate(shape, dtype, what + " (step scratch)"));
  scratch_peak_ = std::max(scratch_peak_, arena.used_bytes() - persistent_end_);
  return t;
}

Status CudaOps::scratch_release(ScratchMark mark) {
  if (mark.offset < persistent_end_) return make_error("cuda: scratch release below persistent memory");
  return ctx_->arena().release(DeviceArena::Mark{mark.offset});
}

Result<Tensor> CudaOps::upload(const Tensor& host, const std::string& what) {
  D0_ASSIGN_OR_RETURN(Tensor t, scratch(host.shape(), host.dtype(), what));
  D0_RETURN_IF_ERROR(copy_from_host(host, t));
  return t;
}

Status CudaOps::copy_from_host(const Tensor& host, Tensor& dst) {
  if (host.device() != Device::cpu || !host.is_contiguous() || dst.device() != Device::cuda ||
      host.shape() != dst.shape() || host.dtype() != dst.dtype() || !dst.is_contiguous())
    return make_error("cuda copy_from_host: a contiguous cpu tensor " + shape_to_string(host.shape()) +
                      " into a cuda tensor of the same shape and dtype, got " + shape_to_string(dst.shape()));
  if (host.nbytes() == 0) return Status::success();
  // Pageable source: the driver stages it before returning, so `host` may go away after the call.
  D0_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst.raw(), host.raw(), host.nbytes(), cudaMemcpyHostToDevice, ctx_->stream()));
  return Status::success();
}

// One strided transfer: rows x cols elements at the tensors' row pitch.
Status CudaOps::copy_columns_from_host(const Tensor& host, Tensor& dst, std::int64_t cols) {
  if (host.dim() != 2 || host.device() != Device::cpu || !host.is_contiguous() || dst.device() != Device::cuda ||
      host.shape() != dst.shape() || host.dtype() != dst.dtype() || !dst.is_contiguous() || cols < 0 ||
      cols > host.size(1) || dtype_bits(host.dtype()) % 8 != 0)
    return make_error(
        "cuda copy_columns_from_host: contiguous 2-D cpu and cuda tensors of one shape and dtype and at "
        "most their columns, got " +
        shape_to_string(host.shape()) + ", " + shape_to_string(dst.shape()) + " and " + std::to_string(cols) +
        " columns");
  if (cols == 0 || host.size(0) == 0) return Status::success();
  const std::size_t element = static_cast<std::size_t>(dtype_bits(host.dtype()) / 8);
  const std::size_t pitch = static_cast<std::size_t>(host.size(1)) * element;
  // Pageable source, as copy_from_host: staged by the driver before the call returns.
  D0_CUDA_RETURN_IF_ERROR(
      cudaMemcpy2DAsync(dst.raw(), pitch, host.raw(), pitch, static_cast<std::size_t>(cols) * element,
                        static_cast<std::size_t>(host.size(0)), cudaMemcpyHostToDevice, ctx_->stream()));
  return Status::success();
}

Result<Tensor> CudaOps::download(const Tensor& t) {
  D0_ASSIGN_OR_RETURN(Tensor host, start_download(t));
  if (t.nbytes() > 0) D0_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(ctx_->stream()));
  return host;
}

Result<Tensor> CudaOps::start_download(const Tensor& t) {
  if (t.device() != Device::cuda || !t.is_contiguous())
    return make_error("cuda download: expected a contiguous cuda tensor");
  // A pinned destination is borrowed by the returned tensor, so the pool does not hand it out again while the
  // copy may still be landing in it.
  D0_ASSIGN_OR_RETURN(std::shared_ptr<void> pinned, downloads_.take(t.nbytes()));
  Tensor host =
      pinned ? Tensor::borrow(pinned.get(), t.shape(), t.dtype(), pinned) : Tensor::zeros(t.shape(), t.dtype());
  if (t.nbytes() > 0)
    D0_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host.raw(), t.raw(), t.nbytes(), cudaMemcpyDeviceToHost, ctx_->stream()));
  return host;
}

Status CudaOps::copy(const Tensor& src, Tensor& dst) {
  if (src.device() != Device::cuda || dst.device() != Device::cuda || src.shape() != dst.shape() ||
      src.dtype() != dst.dtype() || !src.is_contiguous() || !dst.is_contiguous())
    return make_error("cuda copy: source " + shape_to_string(src.shape()) + " and destination " +
                      shape_to_string(dst.shape()) + " must be contiguous cuda tensors of one shape and dtype");
  if (src.nbytes() == 0) return Status::success();
  D0_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToDevice, ctx_->stream()));
  return Status::success();
}

Status CudaOps::queue_flag_copies(std::int32_t* into) {
  // One copy for both (each small copy costs a step ~2 us of copy-engine latency between graphs).
  D0_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(into, fault_flags_.raw(), fault_flags_.nbytes(), cudaMemcpyDeviceToHost, ctx_->stream()));
  return Status::success();
}

Result<QueuedFence> CudaOps::queue_fence() {
  const std::uint64_t serial = ++fences_queued_;
  const int slot = static_cast<int>(serial % kFenceSlots);
  if (!fence_events_[slot])
    D0_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&fence_events_[slot], cudaEventDisableTiming));
  D0_RETURN_IF_ERROR(queue_flag_copies(static_cast<std::int32_t*>(fence_flags_host_.get()) + 2 * slot));
  D0_CUDA_RETURN_IF_ERROR(cudaEventRecord(fence_events_[slot], ctx_->stream()));
  return QueuedFence{serial};
}

Status CudaOps::wait_fence(QueuedFence fence) {
  if (fence.serial == 0 || fence.serial > fences_queued_ || fence.serial + kFenceSlots <= fences_queued_)
    return make_error("cuda: fence " + std::to_string(fence.serial) + " is not one of the last " +
                      std::to_string(kFenceSlots) + " queued (" + std::to_string(fences_queued_) + " so far)");
  const int slot = static_cast<int>(fence.serial % kFenceSlots);
  D0_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(fence_events_[slot]));
  const std::int32_t* flags = static_cast<const std::int32_t*>(fence_flags_host_.get()) + 2 * slot;
  // A fault: synchronize() reports it (the flags stay set until then) and clears the flags once nothing runs.
  if (flags[0] || flags[1]) return synchronize();
  return Status::success();
}

Status CudaOps::synchronize() {
  // Both flags into pinned memory behind the work already queued, then one wait for all of it: a wait before the
  // copies would add a second round trip to every step (a pageable cudaMemcpy would be one of its own).
  std::int32_t* flags = static_cast<std::int32_t*>(flags_host_.get());
  D0_RETURN_IF_ERROR(queue_flag_copies(flags));
  D0_RETURN_IF_ERROR(ctx_->synchronize());
  if (!closed_spans_.empty()) resolve_spans();
  if (flags[0] || flags[1]) {
    D0_CUDA_RETURN_IF_ERROR(cudaMemset(fault_flags_.raw(), 0, fault_flags_.nbytes()));
    return make_error(flags[0]
                          ? "cuda: a token id outside the vocabulary or a KV slot outside the pool reached a kernel"
                          : "cuda: an expert id outside [0, E) reached the MoE kernels");
  }
  return Status::success();
}

std::vector<MemoryUse> CudaOps::memory_report() const {
  const DeviceArena& arena = ctx_->arena();
  std::vector<MemoryUse> lines;
  const ExpertStorage storage = placed_expert_storage(moe_ ? moe_->shape.storage : ExpertStorage::mxfp4);
  lines.push_back({"weights: experts (as stored: " + std::string(expert_storage_name(storage)) + ")",
                   expert_weight_bytes_, "uploaded once"});
  lines.push_back(
      {"weights: dense (BF16 matrices, f32 biases, norms as stored)", dense_weight_bytes_, "uploaded once"});
  for (const auto& [use, bytes] : persistent_by_use_) {
    std::string note;
    if (use == "moe workspace" && moe_)
      note = "once for all layers: " + std::to_string(moe_->max_routed) + " routed experts at " +
             std::to_string(moe_->shape.max_tokens) + " tokens, " +
             std::string(expert_compute_name(options_.expert_compute)) +
             (is_mxfp4(moe_->shape.storage) ? "" : " (stored experts: no conversion buffers)");
    lines.push_back({use, bytes, note});
  }
  lines.push_back({"activations (step scratch, peak so far)", scratch_peak_, ""});
  const std::size_t unused = arena.capacity_bytes() - persistent_end_ - scratch_peak_;
  lines.push_back({"arena free (room for more KV cache)", unused,
                   "arena " + format_bytes(arena.capacity_bytes()) + " taken at start-up, " +
                       std::to_string(int(options_.memory_fraction * 100 + 0.5)) + "% of the GPU"});
  return lines;
}

}  // namespace day0
