// The benchmarks' --json output: the report, indented, to a file (nothing when no path was given).
#pragma once

#include <fstream>
#include <string>

#include "core/status.h"

namespace day0::app {

template <class Json>
Status write_json_report(const std::string& path, const Json& report) {
  if (path.empty()) return Status::success();
  std::ofstream f(path);
  f << report.dump(2) << "\n";
  if (!f) return make_error("cannot write " + path);
  return Status::success();
}

}  // namespace day0::app
