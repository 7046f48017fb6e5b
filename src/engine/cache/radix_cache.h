// RadixCache: the prefix cache of the paged strategy — a page-aligned exact-prefix tree over token
// ids. Each node below the root holds one complete page (page_size token ids and the page whose KV
// slots hold them) and links to its parent; children are keyed by the chained hash of the page's
// tokens and confirmed by comparing the ids, so a match is always exact. The tree holds one pool
// reference per node. Lock counts (a task locks the path of the prefix it reuses) keep nodes in
// use; unlocked leaves are offered to the PagePool's LRU and evicted oldest first. Node handles
// are invalidated by reset(), which bumps epoch(). Not thread-safe.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "engine/cache/page_pool.h"

namespace vela {

struct RadixMatch {
  std::vector<int32_t> pages;  // pages of the matched prefix, root first
  int32_t n_tokens = 0;        // pages.size() * page_size
  int32_t last_node = 0;       // deepest matched node (kRoot when nothing matched)
};

class RadixCache {
 public:
  static constexpr int32_t kRoot = 0;
  static constexpr uint64_t kRootHash = 0x9e3779b97f4a7c15ull;

  explicit RadixCache(PagePool& pool);

  int32_t page_size() const { return page_size_; }
  uint64_t epoch() const { return epoch_; }

  // The longest cached prefix of tokens[0, n) in whole pages. Marks the matched path as used now
  // (LRU); takes no lock and no reference.
  RadixMatch match_prefix(const int32_t* tokens, int64_t n);
  RadixMatch match_prefix(const std::vector<int32_t>& tokens) {
    return match_prefix(tokens.data(), static_cast<int64_t>(tokens.size()));
  }
  // How many tokens match_prefix would match, without touching the LRU.
  int32_t peek_prefix(const int32_t* tokens, int64_t n) const;

  // Records the complete pages of tokens[0, n): pages[i] holds tokens [i * page_size,
  // (i + 1) * page_size). A partial last page is ignored. Where the tree already holds a page for
  // the same prefix it is kept and the given one is not adopted; every adopted page gains one
  // reference. Returns the number of pages adopted.
  int32_t insert(const int32_t* tokens, int64_t n, const std::vector<int32_t>& pages);
  int32_t insert(const std::vector<int32_t>& tokens, const std::vector<int32_t>& pages) {
    return insert(tokens.data(), static_cast<int64_t>(tokens.size()), pages);
  }

  // Lock / unlock the path from `node` up to the root (a locked node is never evicted).
  void lock(int32_t node);
  void unlock(int32_t node);
  int32_t lock_count(int32_t node) const;

  // Evicts up to n_pages unlocked leaves, least recently used first (a parent becomes a candidate
  // once its last child is gone). Returns the number of pages returned to the pool.
  int32_t evict(int32_t n_pages);
  // Drops every node (their references go back to the pool) and invalidates node handles.
  void reset();

  int32_t n_cached_pages() const { return n_nodes_; }
  // Nodes with no lock: an upper bound of what evict() can free.
  int32_t n_unlocked_pages() const { return n_unlocked_; }
  // Chained hash of the prefix ending at `node` / of page `tokens` after `parent_hash`.
  uint64_t node_hash(int32_t node) const;
  static uint64_t hash_page(uint64_t parent_hash, const int32_t* tokens, int32_t n);
  // Pages on the path root -> node.
  std::vector<int32_t> path_pages(int32_t node) const;
  bool is_live(int32_t node) const;
  int32_t parent(int32_t node) const;
  int32_t page_of(int32_t node) const;
  std::vector<int32_t> live_nodes() const;  // every node but the root

  // Parent/child links, keys, page ownership, lock counts (a node's count is at least the sum of
  // its children's) and the evictable marks agree. Throws InternalError.
  void check_integrity() const;

 private:
  struct Node {
    int32_t parent = -1;
    int32_t page = -1;
    int32_t lock = 0;
    int32_t n_children = 0;
    uint64_t hash = 0;
    bool live = false;
    std::vector<int32_t> tokens;                          // [page_size] token ids of the page
    std::unordered_multimap<uint64_t, int32_t> children;  // hash -> child node
  };

  PagePool& pool_;
  int32_t page_size_;
  std::vector<Node> nodes_;  // slab; nodes_[kRoot] is the root
  std::vector<int32_t> free_nodes_;
  std::vector<int32_t> node_of_page_;  // [n_pages] node holding the page, -1 if none
  int32_t n_nodes_ = 0, n_unlocked_ = 0;
  uint64_t epoch_ = 0;

  int32_t find_child(int32_t node, uint64_t hash, const int32_t* tokens) const;
  int32_t new_node(int32_t parent, uint64_t hash, const int32_t* tokens, int32_t page);
  void remove_leaf(int32_t node);
  void update_mark(int32_t node);
  const Node& node_at(int32_t node) const;
};

}  // namespace vela
