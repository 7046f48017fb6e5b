// RadixCache: match / insert / lock / LRU eviction over the page-aligned prefix tree.
#include "engine/cache/radix_cache.h"

#include <algorithm>

#include "core/error.h"

namespace vela {

namespace {
uint64_t mix(uint64_t h, uint64_t x) {
  // splitmix64 finalizer over h ^ x: cheap, and good enough to key children (ids are compared).
  uint64_t z = h ^ (x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

uint64_t RadixCache::hash_page(uint64_t parent_hash, const int32_t* tokens, int32_t n) {
  uint64_t h = parent_hash;
  for (int32_t i = 0; i < n; ++i) h = mix(h, static_cast<uint32_t>(tokens[i]));
  return h;
}

RadixCache::RadixCache(PagePool& pool)
    : pool_(pool),
      page_size_(pool.page_size()),
      node_of_page_(static_cast<size_t>(pool.n_pages()), -1) {
  nodes_.emplace_back();
  nodes_[kRoot].live = true;
  nodes_[kRoot].hash = kRootHash;
}

const RadixCache::Node& RadixCache::node_at(int32_t node) const {
  VELA_ASSERT(is_live(node), "RadixCache: node ", node, " is not live (stale handle?)");
  return nodes_[static_cast<size_t>(node)];
}

bool RadixCache::is_live(int32_t node) const {
  return node >= 0 && static_cast<size_t>(node) < nodes_.size() &&
         nodes_[static_cast<size_t>(node)].live;
}

uint64_t RadixCache::node_hash(int32_t node) const { return node_at(node).hash; }

int32_t RadixCache::lock_count(int32_t node) const { return node_at(node).lock; }

int32_t RadixCache::parent(int32_t node) const { return node_at(node).parent; }

int32_t RadixCache::page_of(int32_t node) const { return node_at(node).page; }

std::vector<int32_t> RadixCache::live_nodes() const {
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(n_nodes_));
  for (size_t i = 1; i < nodes_.size(); ++i)
    if (nodes_[i].live) out.push_back(static_cast<int32_t>(i));
  return out;
}

int32_t RadixCache::find_child(int32_t node, uint64_t hash, const int32_t* tokens) const {
  auto [lo, hi] = nodes_[static_cast<size_t>(node)].children.equal_range(hash);
  for (auto it = lo; it != hi; ++it) {
    const Node& c = nodes_[static_cast<size_t>(it->second)];
    if (std::equal(c.tokens.begin(), c.tokens.end(), tokens)) return it->second;
  }
  return -1;
}

RadixMatch RadixCache::match_prefix(const int32_t* tokens, int64_t n) {
  RadixMatch m;
  m.last_node = kRoot;
  int64_t n_pages = n / page_size_;
  for (int64_t i = 0; i < n_pages; ++i) {
    const int32_t* page_tokens = tokens + i * page_size_;
    uint64_t h = hash_page(nodes_[static_cast<size_t>(m.last_node)].hash, page_tokens, page_size_);
    int32_t c = find_child(m.last_node, h, page_tokens);
    if (c < 0) break;
    m.last_node = c;
    m.pages.push_back(nodes_[static_cast<size_t>(c)].page);
    pool_.touch(nodes_[static_cast<size_t>(c)].page);
  }
  m.n_tokens = static_cast<int32_t>(m.pages.size()) * page_size_;
  return m;
}

int32_t RadixCache::peek_prefix(const int32_t* tokens, int64_t n) const {
  int32_t node = kRoot, n_matched = 0;
  int64_t n_pages = n / page_size_;
  for (int64_t i = 0; i < n_pages; ++i) {
    const int32_t* page_tokens = tokens + i * page_size_;
    uint64_t h = hash_page(nodes_[static_cast<size_t>(node)].hash, page_tokens, page_size_);
    node = find_child(node, h, page_tokens);
    if (node < 0) break;
    n_matched += page_size_;
  }
  return n_matched;
}

int32_t RadixCache::new_node(int32_t parent, uint64_t hash, const int32_t* tokens, int32_t page) {
  int32_t id;
  if (!free_nodes_.empty()) {
    id = free_nodes_.back();
    free_nodes_.pop_back();
  } else {
    id = static_cast<int32_t>(nodes_.size());
    nodes_.emplace_back();
  }
  Node& n = nodes_[static_cast<size_t>(id)];
  n.parent = parent;
  n.page = page;
  n.lock = 0;
  n.n_children = 0;
  n.hash = hash;
  n.live = true;
  n.tokens.assign(tokens, tokens + page_size_);
  n.children.clear();
  Node& p = nodes_[static_cast<size_t>(parent)];
  p.children.emplace(hash, id);
  ++p.n_children;
  node_of_page_[static_cast<size_t>(page)] = id;
  ++n_nodes_;
  ++n_unlocked_;
  return id;
}

void RadixCache::update_mark(int32_t node) {
  if (node == kRoot) return;
  const Node& n = nodes_[static_cast<size_t>(node)];
  pool_.set_evictable(n.page, n.lock == 0 && n.n_children == 0);
}

int32_t RadixCache::insert(const int32_t* tokens, int64_t n, const std::vector<int32_t>& pages) {
  int64_t n_pages = std::min<int64_t>(n / page_size_, static_cast<int64_t>(pages.size()));
  int32_t node = kRoot, n_adopted = 0;
  for (int64_t i = 0; i < n_pages; ++i) {
    const int32_t* page_tokens = tokens + i * page_size_;
    uint64_t h = hash_page(nodes_[static_cast<size_t>(node)].hash, page_tokens, page_size_);
    int32_t c = find_child(node, h, page_tokens);
    if (c < 0) {
      int32_t page = pages[static_cast<size_t>(i)];
      VELA_ASSERT(node_of_page_[static_cast<size_t>(page)] < 0, "RadixCache::insert: page ", page,
                  " is already cached under another prefix");
      pool_.retain(page);
      c = new_node(node, h, page_tokens, page);
      update_mark(node);  // the parent is no longer a leaf
      update_mark(c);
      ++n_adopted;
    }
    pool_.touch(nodes_[static_cast<size_t>(c)].page);
    node = c;
  }
  return n_adopted;
}

void RadixCache::lock(int32_t node) {
  node_at(node);
  for (int32_t x = node; x != kRoot; x = nodes_[static_cast<size_t>(x)].parent) {
    Node& n = nodes_[static_cast<size_t>(x)];
    if (n.lock++ == 0) {
      --n_unlocked_;
      update_mark(x);
    }
  }
}

void RadixCache::unlock(int32_t node) {
  node_at(node);
  for (int32_t x = node; x != kRoot; x = nodes_[static_cast<size_t>(x)].parent) {
    Node& n = nodes_[static_cast<size_t>(x)];
    VELA_ASSERT(n.lock > 0, "RadixCache::unlock: node ", x, " is not locked");
    if (--n.lock == 0) {
      ++n_unlocked_;
      update_mark(x);
    }
  }
}

void RadixCache::remove_leaf(int32_t node) {
  Node& n = nodes_[static_cast<size_t>(node)];
  VELA_ASSERT(node != kRoot && n.live && n.n_children == 0 && n.lock == 0, "RadixCache: node ",
              node, " is not an unlocked leaf");
  Node& p = nodes_[static_cast<size_t>(n.parent)];
  auto [lo, hi] = p.children.equal_range(n.hash);
  for (auto it = lo; it != hi; ++it) {
    if (it->second == node) {
      p.children.erase(it);
      break;
    }
  }
  --p.n_children;
  pool_.set_evictable(n.page, false);
  node_of_page_[static_cast<size_t>(n.page)] = -1;
  n.live = false;
  n.tokens.clear();
  free_nodes_.push_back(node);
  --n_nodes_;
  --n_unlocked_;
}

int32_t RadixCache::evict(int32_t n_pages) {
  int32_t n_freed = 0;
  while (n_freed < n_pages) {
    std::optional<int32_t> page = pool_.lru_evictable();
    if (!page) break;
    int32_t node = node_of_page_[static_cast<size_t>(*page)];
    VELA_ASSERT(node > 0, "RadixCache::evict: evictable page ", *page, " has no node");
    int32_t parent = nodes_[static_cast<size_t>(node)].parent;
    remove_leaf(node);
    bool freed = pool_.release(*page);
    VELA_ASSERT(freed, "RadixCache::evict: page ", *page, " still referenced after eviction");
    ++n_freed;
    update_mark(parent);  // may have become an unlocked leaf
  }
  return n_freed;
}

void RadixCache::reset() {
  for (size_t i = 1; i < nodes_.size(); ++i) {
    Node& n = nodes_[i];
    if (!n.live) continue;
    pool_.set_evictable(n.page, false);
    pool_.release(n.page);  // tasks still using the page keep it alive
    node_of_page_[static_cast<size_t>(n.page)] = -1;
  }
  nodes_.resize(1);
  nodes_[kRoot].children.clear();
  nodes_[kRoot].n_children = 0;
  nodes_[kRoot].lock = 0;
  free_nodes_.clear();
  n_nodes_ = n_unlocked_ = 0;
  ++epoch_;
}

std::vector<int32_t> RadixCache::path_pages(int32_t node) const {
  std::vector<int32_t> pages;
  for (int32_t x = node; x != kRoot; x = node_at(x).parent) pages.push_back(node_at(x).page);
  std::reverse(pages.begin(), pages.end());
  return pages;
}

void RadixCache::check_integrity() const {
  VELA_ASSERT(nodes_[kRoot].live && nodes_[kRoot].parent == -1, "radix root damaged");
  int32_t n_live = 0, n_unlocked = 0;
  std::vector<int32_t> child_lock_sum(nodes_.size(), 0);
  std::vector<int32_t> n_children(nodes_.size(), 0);
  for (size_t i = 1; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (!n.live) continue;
    int32_t id = static_cast<int32_t>(i);
    ++n_live;
    n_unlocked += n.lock == 0 ? 1 : 0;
    VELA_ASSERT(is_live(n.parent), "node ", id, " has a dead parent ", n.parent);
    const Node& p = nodes_[static_cast<size_t>(n.parent)];
    VELA_ASSERT(static_cast<int32_t>(n.tokens.size()) == page_size_, "node ", id, " holds ",
                n.tokens.size(), " tokens, not a whole page");
    VELA_ASSERT(n.hash == hash_page(p.hash, n.tokens.data(), page_size_), "node ", id,
                " key does not match its tokens");
    VELA_ASSERT(find_child(n.parent, n.hash, n.tokens.data()) == id, "node ", id,
                " unreachable from its parent");
    VELA_ASSERT(n.page >= 0 && n.page < pool_.n_pages(), "node ", id, " has bad page ", n.page);
    VELA_ASSERT(node_of_page_[static_cast<size_t>(n.page)] == id, "page ", n.page, " maps to node ",
                node_of_page_[static_cast<size_t>(n.page)], " not ", id);
    VELA_ASSERT(pool_.ref_count(n.page) >= 1, "cached page ", n.page, " has no reference");
    VELA_ASSERT(n.lock >= 0, "node ", id, " has a negative lock count");
    child_lock_sum[static_cast<size_t>(n.parent)] += n.lock;
    ++n_children[static_cast<size_t>(n.parent)];
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (!n.live) continue;
    VELA_ASSERT(
        n.n_children == n_children[i] && static_cast<size_t>(n.n_children) == n.children.size(),
        "node ", i, " child count is off");
    if (i == kRoot) continue;
    VELA_ASSERT(n.lock >= child_lock_sum[i], "node ", i, " lock ", n.lock,
                " is below its children's ", child_lock_sum[i]);
    bool leaf_unlocked = n.lock == 0 && n.n_children == 0;
    VELA_ASSERT(pool_.is_marked_evictable(n.page) == leaf_unlocked, "page ", n.page, " of node ", i,
                " has the wrong evictable mark");
  }
  for (size_t p = 0; p < node_of_page_.size(); ++p) {
    int32_t node = node_of_page_[p];
    VELA_ASSERT(node < 0 || (is_live(node) &&
                             nodes_[static_cast<size_t>(node)].page == static_cast<int32_t>(p)),
                "page ", p, " maps to a stale node");
  }
  VELA_ASSERT(n_live == n_nodes_ && n_unlocked == n_unlocked_, "radix node counters are off");
}

}  // namespace vela
