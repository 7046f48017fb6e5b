// Seeded few-shot selection: a partial Fisher-Yates shuffle over the pool.
#include "eval/few_shot.h"

#include <numeric>

#include "core/error.h"
#include "core/rng.h"

namespace vela::eval {

std::vector<size_t> select_few_shot(size_t n_pool, int64_t k, uint64_t seed, uint64_t doc_idx,
                                    int64_t exclude) {
  std::vector<size_t> pool;
  pool.reserve(n_pool);
  for (size_t i = 0; i < n_pool; ++i)
    if (static_cast<int64_t>(i) != exclude) pool.push_back(i);
  VELA_CHECK(k >= 0 && static_cast<size_t>(k) <= pool.size(), "--num-fewshot ", k,
             " needs that many examples, the few-shot file has ", pool.size(),
             exclude >= 0 ? " (besides the document itself)" : "");
  Rng rng(seed, doc_idx);
  for (size_t i = 0; i < static_cast<size_t>(k); ++i) {
    size_t j = i + static_cast<size_t>(rng.next_u64() % (pool.size() - i));
    std::swap(pool[i], pool[j]);
  }
  pool.resize(static_cast<size_t>(k));
  return pool;
}

}  // namespace vela::eval
