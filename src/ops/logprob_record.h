// What Ops::row_logprobs reports for a row picked on the device: the raw logprobs (logprobs.h) of its pick and its
// most likely ids, as plain words the host reads back. C++17: CUDA sources include it.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/status.h"

namespace day0 {

// The most top logprobs a row reports (OpenAI's limit).
inline constexpr int kMaxLogprobTop = 20;

// A row whose logprobs Ops::row_logprobs reports: its picked token's, and its top_n (0..kMaxLogprobTop) most likely.
struct LogprobRequest {
  std::int32_t row = 0;
  std::int32_t top_n = 0;
};

// What Ops::row_logprobs reports for one request: float(logit - lse) of the picked token and of the n = min(top_n,
// vocab) most likely ids in rank order (top_logprobs), lse in double. Plain words, one i32 tensor row a request.
struct LogprobRecord {
  float picked = 0.f;
  std::int32_t n = 0;
  std::int32_t ids[kMaxLogprobTop] = {};
  float logprobs[kMaxLogprobTop] = {};
};
inline constexpr int kLogprobRecordWords = static_cast<int>(sizeof(LogprobRecord) / 4);
static_assert(sizeof(LogprobRecord) % 4 == 0);

// Record i of `records` (kLogprobRecordWords i32 words a record, as Ops::row_logprobs writes them).
inline LogprobRecord logprob_record_at(const std::int32_t* records, std::int64_t i) {
  LogprobRecord r;
  std::memcpy(static_cast<void*>(&r), records + i * kLogprobRecordWords, sizeof r);  // plain words: trivially copyable
  return r;
}

// Requests for a step of `rows` logits rows: each row in range and asked once, top_n in [0, kMaxLogprobTop]. Errors
// start with `what`.
Status check_logprob_requests(const std::vector<LogprobRequest>& requests, std::int64_t rows, const std::string& what);

}  // namespace day0
