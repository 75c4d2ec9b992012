// The logprob requests' checks: see the header.
#include "ops/logprob_record.h"

namespace day0 {

Status check_logprob_requests(const std::vector<LogprobRequest>& requests, std::int64_t rows, const std::string& what) {
  std::vector<bool> seen(static_cast<std::size_t>(rows > 0 ? rows : 0), false);
  for (const LogprobRequest& q : requests) {
    if (q.row < 0 || q.row >= rows || seen[static_cast<std::size_t>(q.row)])
      return make_error(what + ": logprob row " + std::to_string(q.row) + " is outside the step's " +
                        std::to_string(rows) + " rows or asked twice");
    seen[static_cast<std::size_t>(q.row)] = true;
    if (q.top_n < 0 || q.top_n > kMaxLogprobTop)
      return make_error(what + ": row " + std::to_string(q.row) + " asks for " + std::to_string(q.top_n) +
                        " top logprobs, outside [0, " + std::to_string(kMaxLogprobTop) + "]");
  }
  return Status::success();
}

}  // namespace day0
