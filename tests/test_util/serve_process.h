// `day0 serve` as a child process: started with extra environment variables, its stdout and stderr in temp files,
// waited on until it prints its ready line (whose port is parsed), signalled, and reaped with a deadline.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "test_util/run_day0.h"
#include "test_util/temp_dir.h"

namespace day0::testing_util {

class ServeProcess {
 public:
  ServeProcess(const std::vector<std::string>& args, const std::vector<std::string>& extra_env = {}) {
    out_path_ = dir_.file("stdout");
    err_path_ = dir_.file("stderr");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    std::vector<std::string> all = {D0_BINARY, "serve"};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
    env_strings.insert(env_strings.end(), extra_env.begin(), extra_env.end());
    std::vector<char*> envp;
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    const int rc = posix_spawn(&pid_, D0_BINARY, &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
      ADD_FAILURE() << "posix_spawn " << D0_BINARY << " failed";
      pid_ = -1;
    }
  }
  ~ServeProcess() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }

  // The port of "ready on http://127.0.0.1:PORT", or -1 if the process exits or times out first.
  int wait_ready(std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    const std::regex ready(R"(ready on http://[^:]+:(\d+))");
    while (std::chrono::steady_clock::now() < deadline) {
      std::smatch m;
      const std::string out = stdout_text();
      if (std::regex_search(out, m, ready)) return std::stoi(m[1]);
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        ADD_FAILURE() << "day0 serve exited before it was ready\n" << out << stderr_text();
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "day0 serve not ready within " << timeout.count() << " s\n" << stdout_text() << stderr_text();
    return -1;
  }

  void signal(int sig) { ::kill(pid_, sig); }

  // The exit code, or -1 if it did not exit in time (or died of a signal).
  int wait_exit(std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

  std::string stdout_text() const { return slurp_file(out_path_); }
  std::string stderr_text() const { return slurp_file(err_path_); }

 private:
  TempDir dir_;
  std::string out_path_, err_path_;
  pid_t pid_ = -1;
  bool reaped_ = false;
};

}  // namespace day0::testing_util
