// The local launcher behind `vela train --nproc-per-node N` (torchrun's role): forks N copies of
// this binary with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT
// set (ranks node_rank * N .. node_rank * N + N - 1 of nnodes * N), forwards each child's stdout
// and stderr line by line with a "[rank R] " prefix, and watches them: when one exits non-zero or
// is killed, it says which and how on stderr, sends SIGTERM to the others (SIGKILL after
// `grace`), and returns 1. SIGINT / SIGTERM to the launcher are passed on to the ranks. Children
// die with the launcher (PR_SET_PDEATHSIG). Returns 0 when every rank exits 0.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace vela::dist {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;            // 0: a free port of this host (one host only)
  std::vector<std::string> args;  // the child's arguments after argv[0] (e.g. "train", ...)
  std::chrono::milliseconds grace{5000};
};

int launch_local_ranks(const LaunchOptions& options);

// A TCP port that was free a moment ago (bound to port 0 and released).
int pick_free_port();

}  // namespace vela::dist
