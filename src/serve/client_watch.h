// ClientWatch: notices that the client of a request in progress has gone (closed or reset its connection)
// without writing anything to it, so that a queued, prefilling or non-streamed request is aborted at once
// and its KV blocks return to the pool (RELIABILITY.md C1).
//
// Why this exists: cpp-httplib 0.11 (Debian 12's) gives a handler no access to its socket and no liveness
// check; a write to a closed connection fails only on the second try. We find the connection's socket among
// the process's descriptors by its address pair (unique for TCP) and poll it for hang-up. The library keeps
// that socket open until the handler and its content provider return, so the descriptor cannot be reused
// under us.
#pragma once

#include <string>

namespace day0 {

class ClientWatch {
 public:
  ClientWatch() = default;  // watches nothing: gone() is always false
  static ClientWatch of_connection(const std::string& local_addr, int local_port, const std::string& remote_addr,
                                   int remote_port);

  // The peer closed or reset the connection. Data it sent (a pipelined request) is left unread.
  bool gone() const;
  bool watching() const { return fd_ >= 0; }

 private:
  explicit ClientWatch(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace day0
