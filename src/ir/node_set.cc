#include "ir/node_set.h"

namespace tessera {

NodeSet::NodeSet(int capacity) : capacity_(capacity) {
  TESSERA_CHECK(capacity >= 0, "NodeSet capacity must not be negative");
  words_.assign(static_cast<size_t>((capacity + 63) / 64), 0);
}

NodeSet NodeSet::of(int capacity, std::initializer_list<int> indices) {
  NodeSet s(capacity);
  for (int i : indices) s.add(i);
  return s;
}

NodeSet NodeSet::of(int capacity, const std::vector<int>& indices) {
  NodeSet s(capacity);
  for (int i : indices) s.add(i);
  return s;
}

NodeSet NodeSet::all(int capacity) {
  NodeSet s(capacity);
  for (uint64_t& w : s.words_) w = ~uint64_t{0};
  if (capacity % 64 != 0) s.words_.back() = (uint64_t{1} << (capacity % 64)) - 1;
  return s;
}

int NodeSet::count() const {
  int n = 0;
  for (uint64_t w : words_) n += std::popcount(w);
  return n;
}

bool NodeSet::empty() const {
  for (uint64_t w : words_)
    if (w) return false;
  return true;
}

void NodeSet::clear() {
  for (uint64_t& w : words_) w = 0;
}

int NodeSet::next(int index) const {
  TESSERA_CHECK(index >= -1, "NodeSet::next index below -1");
  int start = index + 1;
  if (start >= capacity_) return -1;
  int w = start >> 6;
  uint64_t bits = words_[w] & (~uint64_t{0} << (start & 63));
  while (bits == 0) {
    if (++w == num_words()) return -1;
    bits = words_[w];
  }
  return w * 64 + std::countr_zero(bits);
}

int NodeSet::last() const {
  for (int w = num_words() - 1; w >= 0; --w) {
    if (words_[w]) return w * 64 + 63 - std::countl_zero(words_[w]);
  }
  return -1;
}

std::vector<int> NodeSet::to_vector() const {
  std::vector<int> v;
  v.reserve(static_cast<size_t>(count()));
  for (int i : *this) v.push_back(i);
  return v;
}

NodeSet& NodeSet::operator|=(const NodeSet& o) {
  check_same_capacity(o);
  for (size_t w = 0; w < words_.size(); ++w) words_[w] |= o.words_[w];
  return *this;
}

NodeSet& NodeSet::operator&=(const NodeSet& o) {
  check_same_capacity(o);
  for (size_t w = 0; w < words_.size(); ++w) words_[w] &= o.words_[w];
  return *this;
}

NodeSet& NodeSet::operator-=(const NodeSet& o) {
  check_same_capacity(o);
  for (size_t w = 0; w < words_.size(); ++w) words_[w] &= ~o.words_[w];
  return *this;
}

bool NodeSet::subset_of(const NodeSet& o) const {
  check_same_capacity(o);
  for (size_t w = 0; w < words_.size(); ++w)
    if (words_[w] & ~o.words_[w]) return false;
  return true;
}

bool NodeSet::intersects(const NodeSet& o) const {
  check_same_capacity(o);
  for (size_t w = 0; w < words_.size(); ++w)
    if (words_[w] & o.words_[w]) return true;
  return false;
}

size_t NodeSet::hash() const {
  // splitmix64's finalizer over the words, chained; the capacity seeds it.
  auto mix = [](uint64_t x) {
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  uint64_t h = mix(static_cast<uint64_t>(capacity_) + 0x9e3779b97f4a7c15ull);
  for (uint64_t w : words_) h = mix(h ^ w) + 0x9e3779b97f4a7c15ull;
  return static_cast<size_t>(h);
}

std::string NodeSet::to_string() const {
  std::string s = "{";
  bool first_member = true;
  for (int i : *this) {
    if (!first_member) s += ',';
    s += std::to_string(i);
    first_member = false;
  }
  return s + "}";
}

}  // namespace tessera
