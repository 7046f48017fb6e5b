// Seeded few-shot selection shared by `vela eval choice` and `vela eval generate`: document i takes
// k distinct examples from the pool with Rng(seed, stream = i), so a document's prompt does not
// depend on --limit, the batch or the other documents. An example equal to the document itself
// (same file and line) is never chosen.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vela::eval {

// Indices into a pool of n_pool examples; `exclude` (< 0: none) is never chosen. Throws
// InvalidArgument when fewer than k examples are available.
std::vector<size_t> select_few_shot(size_t n_pool, int64_t k, uint64_t seed, uint64_t doc_idx,
                                    int64_t exclude);

}  // namespace vela::eval
