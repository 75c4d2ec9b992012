// Backends by name: an executable Ops instance, and the coverage table (which works even for a
// backend that cannot run on this machine, so `inspect --backend cuda` answers anywhere).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "ops/ops.h"

namespace day0 {

std::vector<std::string_view> backend_names();
Result<std::unique_ptr<Ops>> make_ops(std::string_view backend);
Result<OpEntry> op_coverage(std::string_view backend, OpKind kind);

}  // namespace day0
