// Progress of a checkpoint writer (synth, convert) on stderr: redrawn in place at most 4 times a second on a
// terminal, one line every 5 s otherwise, always at the end.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace day0::app {

// "1.23 GB" from 100 MB up, else "45.6 MB".
inline std::string gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, bytes >= 1e8 ? "%.2f GB" : "%.1f MB", bytes >= 1e8 ? bytes / 1e9 : bytes / 1e6);
  return buf;
}

class WriteProgress {
 public:
  explicit WriteProgress(const char* label) : label_(label), tty_(::isatty(2) != 0) {}
  // `extra` follows the rate, e.g. "  shard 2/3".
  void update(std::uint64_t done, std::uint64_t total, double seconds, const std::string& extra = "") {
    if (done != total && seconds - last_ < (tty_ ? 0.25 : 5.0)) return;
    last_ = seconds;
    std::fprintf(stderr, "%s%s  %s / %s (%.1f%%)  %.0f MB/s%s%s", tty_ ? "\r" : "", label_, gb(double(done)).c_str(),
                 gb(double(total)).c_str(), total ? 100.0 * double(done) / double(total) : 100.0,
                 seconds > 0 ? double(done) / seconds / 1e6 : 0.0, extra.c_str(), tty_ ? "   " : "\n");
    open_line_ = tty_;
  }
  // Ends an in-place line before the summary is printed.
  void finish() {
    if (open_line_) std::fputc('\n', stderr);
    open_line_ = false;
  }

 private:
  const char* label_;
  bool tty_;
  double last_ = -1e9;
  bool open_line_ = false;
};

}  // namespace day0::app
