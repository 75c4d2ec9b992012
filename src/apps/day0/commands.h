// The day0 subcommands. Each returns the process exit code; errors are printed as one line on stderr.
#pragma once

#include <string>
#include <vector>

namespace day0::app {

struct InspectOptions {
  std::string dir;
  std::string backend = "cpu";
};
int inspect(const InspectOptions& o);

struct RunOptions {
  std::string dir;
  std::string backend = "cpu";
  std::string prompt_ids;  // comma- or space-separated token ids
  int max_tokens = 32;
};
int run(const RunOptions& o);

struct CompareOptions {
  std::string dir;
  std::string backend = "cpu";
  std::vector<std::string> references;  // dump files
  double tolerance = 1e-4;
};
int compare(const CompareOptions& o);

// Prints "error: <message>" on stderr and returns 1.
int fail(const std::string& message);

}  // namespace day0::app
