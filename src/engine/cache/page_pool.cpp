// PagePool: free list, reference counts and the LRU set of evictable pages.
#include "engine/cache/page_pool.h"

#include "core/error.h"

namespace vela {

PagePool::PagePool(int32_t n_pages, int32_t page_size) : n_pages_(n_pages), page_size_(page_size) {
  VELA_CHECK(n_pages > 0 && page_size > 0, "PagePool: n_pages and page_size must be positive (got ",
             n_pages, ", ", page_size, ")");
  ref_.assign(static_cast<size_t>(n_pages), 0);
  last_use_.assign(static_cast<size_t>(n_pages), 0);
  marked_.assign(static_cast<size_t>(n_pages), 0);
  free_.reserve(static_cast<size_t>(n_pages));
  for (int32_t p = n_pages - 1; p >= 0; --p) free_.push_back(p);  // page 0 handed out first
}

void PagePool::check_page(int32_t page, const char* what) const {
  VELA_ASSERT(page >= 0 && page < n_pages_, "PagePool::", what, ": page ", page,
              " out of range [0, ", n_pages_, ")");
}

std::optional<std::vector<int32_t>> PagePool::alloc(int32_t n) {
  VELA_ASSERT(n >= 0, "PagePool::alloc: negative count ", n);
  if (n > n_free()) return std::nullopt;
  std::vector<int32_t> pages(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    int32_t p = free_.back();
    free_.pop_back();
    ref_[static_cast<size_t>(p)] = 1;
    last_use_[static_cast<size_t>(p)] = ++clock_;
    pages[static_cast<size_t>(i)] = p;
  }
  return pages;
}

void PagePool::retain(int32_t page) {
  check_page(page, "retain");
  size_t i = static_cast<size_t>(page);
  VELA_ASSERT(ref_[i] > 0, "PagePool::retain: page ", page, " is free");
  if (lru_member(i)) lru_.erase({last_use_[i], page});
  ++ref_[i];
}

bool PagePool::release(int32_t page) {
  check_page(page, "release");
  size_t i = static_cast<size_t>(page);
  VELA_ASSERT(ref_[i] > 0, "PagePool::release: page ", page, " is already free");
  VELA_ASSERT(ref_[i] > 1 || !marked_[i], "PagePool::release: page ", page,
              " freed while marked evictable");
  --ref_[i];
  if (lru_member(i)) lru_.insert({last_use_[i], page});
  if (ref_[i] > 0) return false;
  free_.push_back(page);
  return true;
}

int32_t PagePool::ref_count(int32_t page) const {
  check_page(page, "ref_count");
  return ref_[static_cast<size_t>(page)];
}

void PagePool::touch(int32_t page) {
  check_page(page, "touch");
  size_t i = static_cast<size_t>(page);
  bool member = lru_member(i);
  if (member) lru_.erase({last_use_[i], page});
  last_use_[i] = ++clock_;
  if (member) lru_.insert({last_use_[i], page});
}

uint64_t PagePool::last_use(int32_t page) const {
  check_page(page, "last_use");
  return last_use_[static_cast<size_t>(page)];
}

void PagePool::set_evictable(int32_t page, bool evictable) {
  check_page(page, "set_evictable");
  size_t i = static_cast<size_t>(page);
  VELA_ASSERT(ref_[i] > 0 || !evictable, "PagePool::set_evictable: page ", page, " is free");
  if (static_cast<bool>(marked_[i]) == evictable) return;
  if (lru_member(i)) lru_.erase({last_use_[i], page});
  marked_[i] = evictable ? 1 : 0;
  if (lru_member(i)) lru_.insert({last_use_[i], page});
}

bool PagePool::is_marked_evictable(int32_t page) const {
  check_page(page, "is_marked_evictable");
  return marked_[static_cast<size_t>(page)] != 0;
}

bool PagePool::is_evictable(int32_t page) const {
  check_page(page, "is_evictable");
  return lru_member(static_cast<size_t>(page));
}

std::optional<int32_t> PagePool::lru_evictable() const {
  if (lru_.empty()) return std::nullopt;
  return lru_.begin()->second;
}

void PagePool::check_integrity() const {
  std::vector<uint8_t> on_free_list(static_cast<size_t>(n_pages_), 0);
  for (int32_t p : free_) {
    check_page(p, "check_integrity");
    VELA_ASSERT(!on_free_list[static_cast<size_t>(p)], "page ", p, " is twice on the free list");
    on_free_list[static_cast<size_t>(p)] = 1;
    VELA_ASSERT(ref_[static_cast<size_t>(p)] == 0, "free page ", p, " has ref count ",
                ref_[static_cast<size_t>(p)]);
  }
  size_t n_members = 0;
  for (int32_t p = 0; p < n_pages_; ++p) {
    size_t i = static_cast<size_t>(p);
    VELA_ASSERT(ref_[i] >= 0, "page ", p, " has negative ref count");
    VELA_ASSERT(ref_[i] > 0 || on_free_list[i], "page ", p, " has no reference but is not free");
    VELA_ASSERT(ref_[i] > 0 || !marked_[i], "free page ", p, " is marked evictable");
    bool in_lru = lru_.count({last_use_[i], p}) == 1;
    VELA_ASSERT(in_lru == lru_member(i), "page ", p, (in_lru ? " is" : " is not"),
                " in the LRU set against its mark and ref count");
    n_members += in_lru ? 1 : 0;
  }
  VELA_ASSERT(n_members == lru_.size(), "LRU set holds ", lru_.size(), " entries, ", n_members,
              " pages are evictable");
}

}  // namespace vela
