// Runs the built day0 binary as a subprocess with optional standard input; captures exit code or
// signal, stdout and stderr separately (through temp files, so no pipe can deadlock).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "test_util/temp_dir.h"

extern char** environ;

namespace day0::testing_util {

struct Proc {
  int exit_code = -1;  // valid when signal == 0
  int signal = 0;      // the signal that killed it, 0 if it exited
  std::string out, err;
  std::string what;  // the command line, exit status and stderr, for failure messages
};

inline std::string slurp_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline Proc run_day0(const std::vector<std::string>& args, const std::string& stdin_text = "") {
  TempDir io;
  const std::string in_path = io.file("stdin"), out_path = io.file("stdout"), err_path = io.file("stderr");
  {
    std::ofstream in(in_path, std::ios::binary);
    in << stdin_text;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, in_path.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<std::string> all = {D0_BINARY};
  all.insert(all.end(), args.begin(), args.end());
  Proc p;
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data()), p.what += a + " ";
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, D0_BINARY, &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn " << D0_BINARY << ": " << std::strerror(rc);
    return p;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) continue;
  if (WIFEXITED(status)) p.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) p.signal = WTERMSIG(status);
  p.out = slurp_file(out_path);
  p.err = slurp_file(err_path);
  p.what += "\n  exit " + std::to_string(p.exit_code) + ", signal " + std::to_string(p.signal) + "\n  stderr: " + p.err;
  return p;
}

}  // namespace day0::testing_util
