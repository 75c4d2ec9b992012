// upload_tensors: parallel readers with double-buffered pinned staging.
#include "ops/cuda/weight_upload.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "ops/cuda/cuda_status.h"

namespace day0 {
namespace {

// Host-side f32/f16 -> bf16, round to nearest even (as the f32 -> bf16 kernel).
void to_bf16(const Tensor& src, std::int64_t begin, std::int64_t n, std::uint16_t* dst) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float f = src.dtype() == DType::f32 ? src.data<float>()[begin + i]
                                              : f16_to_f32(src.data<std::uint16_t>()[begin + i]);
    dst[i] = f32_to_bf16(f);
  }
}

class Reader {
 public:
  Reader(int device, std::size_t staging_bytes, std::atomic<std::uint64_t>& done)
      : device_(device), staging_bytes_(staging_bytes), done_(done) {}
  ~Reader() {
    if (stream_) cudaStreamSynchronize(stream_);
    for (int b = 0; b < 2; ++b) {
      if (event_[b]) cudaEventDestroy(event_[b]);
      if (buffer_[b]) cudaFreeHost(buffer_[b]);
    }
    if (stream_) cudaStreamDestroy(stream_);
  }

  Status run(std::vector<UploadItem*> items) {
    D0_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    D0_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    for (int b = 0; b < 2; ++b) {
      D0_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&buffer_[b], staging_bytes_, cudaHostAllocDefault));
      D0_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event_[b], cudaEventDisableTiming));
    }
    for (UploadItem* item : items) D0_RETURN_IF_ERROR(copy(*item));
    D0_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return Status::success();
  }

 private:
  // The next staging buffer, once its previous transfer has finished.
  Result<void*> next_buffer() {
    current_ ^= 1;
    D0_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(event_[current_]));
    return buffer_[current_];
  }

  Status send(void* dst, std::size_t bytes) {
    D0_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, buffer_[current_], bytes, cudaMemcpyHostToDevice, stream_));
    D0_CUDA_RETURN_IF_ERROR(cudaEventRecord(event_[current_], stream_));
    return Status::success();
  }

  Status copy(UploadItem& item) {
    const Tensor& h = item.host;
    auto* dst = static_cast<std::byte*>(item.device.raw());
    if (h.dtype() == item.device.dtype()) {
      const auto* src = static_cast<const std::byte*>(h.raw());
      for (std::size_t off = 0; off < h.nbytes(); off += staging_bytes_) {
        const std::size_t n = std::min(staging_bytes_, h.nbytes() - off);
        D0_ASSIGN_OR_RETURN(void* buf, next_buffer());
        std::memcpy(buf, src + off, n);  // page faults here are the disk reads
        D0_RETURN_IF_ERROR(send(dst + off, n));
        done_ += n;
      }
      return Status::success();
    }
    const std::int64_t per_chunk = static_cast<std::int64_t>(staging_bytes_ / 2);
    const std::size_t src_elem = h.nbytes() / std::max<std::int64_t>(1, h.numel());
    for (std::int64_t i = 0; i < h.numel(); i += per_chunk) {
      const std::int64_t n = std::min(per_chunk, h.numel() - i);
      D0_ASSIGN_OR_RETURN(void* buf, next_buffer());
      to_bf16(h, i, n, static_cast<std::uint16_t*>(buf));
      D0_RETURN_IF_ERROR(send(dst + i * 2, static_cast<std::size_t>(n) * 2));
      done_ += static_cast<std::uint64_t>(n) * src_elem;
    }
    return Status::success();
  }

  int device_;
  std::size_t staging_bytes_;
  std::atomic<std::uint64_t>& done_;
  cudaStream_t stream_ = nullptr;
  void* buffer_[2] = {nullptr, nullptr};
  cudaEvent_t event_[2] = {nullptr, nullptr};
  int current_ = 0;
};

}  // namespace

Result<UploadResult> upload_tensors(std::vector<UploadItem>& items, int device, const UploadOptions& options,
                                    const ProgressFn& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  UploadResult result;
  std::vector<UploadItem*> order;
  for (UploadItem& it : items) {
    const bool same = it.host.dtype() == it.device.dtype();
    const bool widen = it.device.dtype() == DType::bf16 && (it.host.dtype() == DType::f32 || it.host.dtype() == DType::f16);
    if (it.host.device() != Device::cpu || it.device.device() != Device::cuda || !it.host.is_contiguous() ||
        it.host.shape() != it.device.shape() || !(same || widen))
      return make_error("upload: cannot copy a " + std::string(dtype_name(it.host.dtype())) + " " +
                        shape_to_string(it.host.shape()) + " host tensor into a " +
                        std::string(dtype_name(it.device.dtype())) + " " + shape_to_string(it.device.shape()) +
                        " device tensor");
    result.bytes_read += it.host.nbytes();
    result.bytes_written += it.device.nbytes();
    order.push_back(&it);
  }
  // By address: tensors of one shard are neighbours, so contiguous runs are (parts of) shards read in order.
  std::sort(order.begin(), order.end(), [](const UploadItem* a, const UploadItem* b) {
    return std::less<const void*>()(a->host.raw(), b->host.raw());
  });
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const int readers = static_cast<int>(std::max<std::size_t>(
      1, std::min<std::size_t>({order.size(), static_cast<std::size_t>(std::max(1, options.max_readers)), hw})));
  std::vector<std::vector<UploadItem*>> runs(readers);
  std::uint64_t acc = 0;
  for (UploadItem* it : order) {
    const int r = static_cast<int>(std::min<std::uint64_t>(readers - 1, acc * readers / std::max<std::uint64_t>(1, result.bytes_read)));
    runs[r].push_back(it);
    acc += it->host.nbytes();
  }
  std::atomic<std::uint64_t> done{0};
  std::vector<Status> status(readers);
  std::vector<std::thread> threads;
  for (int r = 0; r < readers; ++r)
    threads.emplace_back([&, r] {
      Reader reader(device, options.staging_bytes, done);
      status[r] = reader.run(runs[r]);
    });
  std::atomic<bool> finished{false};
  std::thread reporter;
  if (progress)
    reporter = std::thread([&] {
      while (!finished) {
        progress(done.load(), result.bytes_read);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  for (auto& t : threads) t.join();
  finished = true;
  if (reporter.joinable()) reporter.join();
  for (const Status& s : status)
    if (!s.ok()) return s.error();
  if (progress) progress(result.bytes_read, result.bytes_read);
  result.readers = readers;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace day0
