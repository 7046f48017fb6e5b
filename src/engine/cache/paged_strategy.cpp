// PagedStrategy: page allocation with radix prefix reuse and LRU eviction.
#include "engine/cache/paged_strategy.h"

#include <algorithm>
#include <unordered_map>

#include "core/error.h"

namespace vela {

PagedStrategy::PagedStrategy(int32_t page_size) : page_size_(page_size) {
  VELA_CHECK(page_size > 0, "PagedStrategy: page_size must be positive, got ", page_size);
}

std::string PagedStrategy::name() const { return "paged(" + std::to_string(page_size_) + ")"; }

void PagedStrategy::attach(int64_t n_slots, int32_t max_reqs, int32_t max_ctx) {
  VELA_ASSERT(!pool_, "PagedStrategy attached twice");
  int64_t n_pages = n_slots / page_size_;
  VELA_CHECK(n_pages >= 1 && n_pages <= INT32_MAX, "PagedStrategy: ", n_slots,
             " KV slots make no usable number of pages of ", page_size_);
  pool_ = std::make_unique<PagePool>(static_cast<int32_t>(n_pages), page_size_);
  radix_ = std::make_unique<RadixCache>(*pool_);
}

void PagedStrategy::acquire_prefix(TaskCacheState& st, const std::vector<int32_t>& tokens,
                                   int32_t n_max) {
  VELA_ASSERT(st.pages.empty() && st.prefix_node < 0, "acquire_prefix on a task holding pages");
  st.page_hashes.clear();
  uint64_t h = RadixCache::kRootHash;
  for (size_t i = 0; i + static_cast<size_t>(page_size_) <= tokens.size(); i += page_size_) {
    h = RadixCache::hash_page(h, tokens.data() + i, page_size_);
    st.page_hashes.push_back(h);
  }
  RadixMatch m = radix_->match_prefix(tokens.data(), n_max);
  for (int32_t p : m.pages) pool_->retain(p);
  st.pages = std::move(m.pages);
  st.cached_len = m.n_tokens;
  if (m.last_node != RadixCache::kRoot) {
    radix_->lock(m.last_node);
    st.prefix_node = m.last_node;
    st.prefix_epoch = radix_->epoch();
  }
}

int32_t PagedStrategy::peek_prefix(const std::vector<int32_t>& tokens, int32_t n_max) const {
  return radix_->peek_prefix(tokens.data(), n_max);
}

bool PagedStrategy::make_room(int32_t n) {
  int32_t n_free = pool_->n_free();
  if (n_free >= n) return true;
  if (n_free + radix_->n_unlocked_pages() < n) return false;
  radix_->evict(n - n_free);
  return pool_->n_free() >= n;
}

bool PagedStrategy::reserve(TaskCacheState& st, int32_t n_tokens) {
  int32_t n_need = (n_tokens + page_size_ - 1) / page_size_ - static_cast<int32_t>(st.pages.size());
  if (n_need <= 0) return true;
  if (!make_room(n_need)) return false;
  std::optional<std::vector<int32_t>> pages = pool_->alloc(n_need);
  VELA_ASSERT(pages.has_value(), "PagedStrategy::reserve: pool short after make_room");
  st.pages.insert(st.pages.end(), pages->begin(), pages->end());
  return true;
}

bool PagedStrategy::fork(const TaskCacheState& src, TaskCacheState& dst,
                         const std::function<void(int32_t, int32_t, int32_t)>& copy_slots) {
  VELA_ASSERT(dst.pages.empty() && dst.prefix_node < 0, "fork into a task holding pages");
  const int32_t n_full = src.kv_len / page_size_, n_tail = src.kv_len % page_size_;
  std::vector<int32_t> tail;
  if (n_tail > 0) {
    if (!make_room(1)) return false;
    tail = *pool_->alloc(1);
    copy_slots(tail[0] * page_size_, src.pages[static_cast<size_t>(n_full)] * page_size_, n_tail);
  }
  dst.pages.assign(src.pages.begin(), src.pages.begin() + n_full);
  for (int32_t p : dst.pages) pool_->retain(p);
  dst.pages.insert(dst.pages.end(), tail.begin(), tail.end());
  dst.cached_len = src.cached_len;
  dst.page_hashes = src.page_hashes;
  if (prefix_valid(src)) {
    radix_->lock(src.prefix_node);
    dst.prefix_node = src.prefix_node;
    dst.prefix_epoch = src.prefix_epoch;
  }
  return true;
}

void PagedStrategy::check_record(const TaskCacheState& st, const int32_t* tokens,
                                 int32_t n_record) const {
  size_t n_check = std::min(static_cast<size_t>(n_record / page_size_), st.page_hashes.size());
  uint64_t h = RadixCache::kRootHash;
  for (size_t i = 0; i < n_check; ++i) {
    h = RadixCache::hash_page(h, tokens + i * page_size_, page_size_);
    VELA_CHECK(h == st.page_hashes[i], "TaskCacheManager::free: the tokens of task ", st.task_id,
               " do not start with its prompt (page ", i, " differs)");
  }
}

void PagedStrategy::release(TaskCacheState& st, const int32_t* tokens, int32_t n_record) {
  if (tokens != nullptr) {
    int32_t n = std::min(n_record, capacity(st));
    radix_->insert(tokens, n, st.pages);
  }
  if (prefix_valid(st)) radix_->unlock(st.prefix_node);
  for (int32_t p : st.pages) pool_->release(p);
  st.pages.clear();
  st.prefix_node = -1;
}

void PagedStrategy::reset_prefix_cache() { radix_->reset(); }

StrategyUsage PagedStrategy::usage() const {
  StrategyUsage u;
  u.page_size = page_size_;
  u.pages_total = pool_->n_pages();
  u.pages_free = pool_->n_free();
  u.pages_cached = radix_->n_cached_pages();
  u.pages_evictable = radix_->n_unlocked_pages();
  return u;
}

void PagedStrategy::check_integrity(const std::vector<const TaskCacheState*>& tasks) const {
  pool_->check_integrity();
  radix_->check_integrity();
  // Every reference the pool counts has exactly one holder: a task's page list or a radix node.
  std::vector<int32_t> refs(static_cast<size_t>(pool_->n_pages()), 0);
  for (const TaskCacheState* t : tasks) {
    std::vector<int32_t> own = t->pages;
    std::sort(own.begin(), own.end());
    VELA_ASSERT(std::adjacent_find(own.begin(), own.end()) == own.end(), "task ", t->task_id,
                " holds a page twice");
    for (int32_t p : t->pages) {
      VELA_ASSERT(p >= 0 && p < pool_->n_pages(), "task ", t->task_id, " holds bad page ", p);
      ++refs[static_cast<size_t>(p)];
    }
    int32_t n_pages_needed = (t->reserved_len + page_size_ - 1) / page_size_;
    VELA_ASSERT(static_cast<int32_t>(t->pages.size()) == n_pages_needed, "task ", t->task_id,
                " holds ", t->pages.size(), " pages for ", t->reserved_len, " reserved tokens");
    VELA_ASSERT(t->cached_len % page_size_ == 0, "task ", t->task_id, " cached_len ", t->cached_len,
                " is not page-aligned");
  }
  std::vector<int32_t> nodes = radix_->live_nodes();
  std::unordered_map<int32_t, int32_t> lock_expected;
  for (int32_t node : nodes) {
    ++refs[static_cast<size_t>(radix_->page_of(node))];
    lock_expected[node] = 0;
  }
  for (const TaskCacheState* t : tasks) {
    if (!prefix_valid(*t)) continue;
    VELA_ASSERT(radix_->is_live(t->prefix_node), "task ", t->task_id, " locks a dead node");
    std::vector<int32_t> path = radix_->path_pages(t->prefix_node);
    VELA_ASSERT(
        path.size() <= t->pages.size() && std::equal(path.begin(), path.end(), t->pages.begin()),
        "task ", t->task_id, " prefix pages differ from its radix path");
    for (int32_t x = t->prefix_node; x != RadixCache::kRoot; x = radix_->parent(x))
      ++lock_expected[x];
  }
  for (int32_t node : nodes)
    VELA_ASSERT(radix_->lock_count(node) == lock_expected[node], "radix node ", node, " lock ",
                radix_->lock_count(node), " but ", lock_expected[node], " tasks hold it");
  for (int32_t p = 0; p < pool_->n_pages(); ++p)
    VELA_ASSERT(pool_->ref_count(p) == refs[static_cast<size_t>(p)], "page ", p, " ref count ",
                pool_->ref_count(p), " but ", refs[static_cast<size_t>(p)], " holders");
}

}  // namespace vela
