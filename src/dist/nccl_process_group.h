// The nccl backend of process_group.h: one CUDA device per rank, NCCL communicators bootstrapped
// through the TCP store (rank 0 draws the unique id and hands it out). Collectives run on a
// stream of the group's own, ordered after the caller's current stream by an event, so a bucket's
// all-reduce overlaps the rest of the backward; wait() makes the current stream wait (the host
// does not block). Rank-order sums as on the CPU: grouped ncclSend / ncclRecv move chunk c of
// every rank to rank c, which adds them in rank order (ops::add, so bf16 rounds after each add)
// and sends the sum back to everyone. A watchdog thread aborts the communicator and exits the
// process (status 76, after logging why) when the store reports a dead rank, NCCL reports an
// asynchronous error, or a collective has not finished within DistOptions::timeout.
// Compiled when CMake finds CUDA and nccl.h / libnccl (VELA_HAS_NCCL); otherwise
// make_nccl_process_group throws Unsupported.
#pragma once

#include <memory>

#include "dist/process_group.h"

namespace vela::dist {

inline constexpr int kExitNcclFailure = 76;

std::shared_ptr<ProcessGroup> make_nccl_process_group(const DistOptions& options, Device device);

}  // namespace vela::dist
