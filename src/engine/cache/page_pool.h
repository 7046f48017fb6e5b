// PagePool: the physical layer of the paged KV cache. Page p owns slots [p * page_size,
// (p + 1) * page_size). Keeps the free list, one reference count per page (every holder — a task's
// page list, a radix node — holds one reference; a page returns to the free list when the last is
// released) and the LRU order of evictable pages: a page is evictable when its owner (the radix)
// has marked it and holds its only reference, so a page some task still uses is never offered for
// eviction. It knows nothing about tasks or token ids. Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace vela {

class PagePool {
 public:
  PagePool(int32_t n_pages, int32_t page_size);

  int32_t n_pages() const { return n_pages_; }
  int32_t page_size() const { return page_size_; }
  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t n_used() const { return n_pages_ - n_free(); }
  int32_t first_slot(int32_t page) const { return page * page_size_; }

  // n pages with one reference each, or nullopt (and nothing taken) when fewer than n are free.
  // Most recently freed pages are reused first.
  std::optional<std::vector<int32_t>> alloc(int32_t n);
  // Adds a reference to an allocated page.
  void retain(int32_t page);
  // Drops a reference; returns true when that was the last one and the page is free again.
  // A marked page must be unmarked (set_evictable(page, false)) before its last release.
  bool release(int32_t page);
  int32_t ref_count(int32_t page) const;
  bool is_free(int32_t page) const { return ref_count(page) == 0; }

  // ---- LRU of evictable pages ----
  // Marks `page` as used now (the most recent end of the LRU order).
  void touch(int32_t page);
  uint64_t last_use(int32_t page) const;
  // The owner's mark: it would give this page back. The page is evictable while marked and
  // holding exactly one reference (the owner's).
  void set_evictable(int32_t page, bool evictable);
  bool is_marked_evictable(int32_t page) const;
  bool is_evictable(int32_t page) const;
  int32_t n_evictable() const { return static_cast<int32_t>(lru_.size()); }
  // The least recently used evictable page, or nullopt when none is evictable.
  std::optional<int32_t> lru_evictable() const;

  // Free list and reference counts agree; evictable pages are allocated. Throws InternalError.
  void check_integrity() const;

 private:
  int32_t n_pages_, page_size_;
  std::vector<int32_t> ref_;                    // [n_pages]
  std::vector<int32_t> free_;                   // stack of free pages
  std::vector<uint64_t> last_use_;              // [n_pages] tick of the last touch
  std::vector<uint8_t> marked_;                 // [n_pages] owner's evictable mark
  std::set<std::pair<uint64_t, int32_t>> lru_;  // (last_use, page): marked, one reference
  uint64_t clock_ = 0;

  void check_page(int32_t page, const char* what) const;
  bool lru_member(size_t i) const { return marked_[i] && ref_[i] == 1; }
};

}  // namespace vela
