// NodeSet: a set of node indices of one graph, stored as a bit vector over [0, capacity).
//
// Graph::finalize numbers nodes in post-DFS order (i < j means node j cannot feed node i), so
// iterating a NodeSet visits its nodes in a valid execution order. Every set used together with
// another (union, subset, ...) must have the same capacity, normally graph.num_nodes(); mixing
// capacities is a bug and fails an internal check. Equality and hashing include the capacity.
//
// Bits at or above capacity are always zero, so counting, comparing and hashing work on whole
// 64-bit words.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <string>
#include <vector>

#include "ir/status.h"

namespace tessera {

class NodeSet {
 public:
  // Iterates the indices in the set in increasing order.
  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = int;
    using difference_type = std::ptrdiff_t;
    using pointer = const int*;
    using reference = int;

    Iterator() = default;
    int operator*() const { return word_index_ * 64 + std::countr_zero(bits_); }
    Iterator& operator++() {
      bits_ &= bits_ - 1;  // drop the lowest set bit
      skip_empty_words();
      return *this;
    }
    Iterator operator++(int) {
      Iterator old = *this;
      ++*this;
      return old;
    }
    bool operator==(const Iterator& o) const {
      return word_index_ == o.word_index_ && bits_ == o.bits_;
    }

   private:
    friend class NodeSet;
    Iterator(const uint64_t* words, int num_words, int word_index)
        : words_(words),
          num_words_(num_words),
          word_index_(word_index),
          bits_(word_index < num_words ? words[word_index] : 0) {
      skip_empty_words();
    }
    void skip_empty_words() {
      while (bits_ == 0 && word_index_ < num_words_ && ++word_index_ < num_words_) {
        bits_ = words_[word_index_];
      }
    }
    const uint64_t* words_ = nullptr;
    int num_words_ = 0;
    int word_index_ = 0;  // num_words_ at the end
    uint64_t bits_ = 0;   // the not-yet-visited bits of words_[word_index_]
  };

  // The empty set over no indices.
  NodeSet() = default;
  // The empty set over [0, capacity).
  explicit NodeSet(int capacity);
  // The set of `indices` over [0, capacity).
  static NodeSet of(int capacity, std::initializer_list<int> indices);
  static NodeSet of(int capacity, const std::vector<int>& indices);
  // Every index in [0, capacity).
  static NodeSet all(int capacity);

  // The number of indices the set ranges over (not the number of members: see count()).
  int capacity() const { return capacity_; }
  // The number of members.
  int count() const;
  bool empty() const;

  void add(int index) {
    TESSERA_CHECK(index >= 0 && index < capacity_, "NodeSet::add index out of range");
    words_[index >> 6] |= uint64_t{1} << (index & 63);
  }
  void remove(int index) {
    TESSERA_CHECK(index >= 0 && index < capacity_, "NodeSet::remove index out of range");
    words_[index >> 6] &= ~(uint64_t{1} << (index & 63));
  }
  // False for indices outside [0, capacity).
  bool contains(int index) const {
    if (index < 0 || index >= capacity_) return false;
    return (words_[index >> 6] >> (index & 63)) & 1u;
  }
  void clear();

  // The lowest member, or -1 if the set is empty.
  int first() const { return next(-1); }
  // The lowest member greater than `index` (any index >= -1), or -1 if there is none.
  int next(int index) const;
  // The highest member, or -1 if the set is empty.
  int last() const;

  Iterator begin() const { return Iterator(words_.data(), num_words(), 0); }
  Iterator end() const { return Iterator(words_.data(), num_words(), num_words()); }
  // The members in increasing order.
  std::vector<int> to_vector() const;

  // In-place union, intersection and difference.
  NodeSet& operator|=(const NodeSet& o);
  NodeSet& operator&=(const NodeSet& o);
  NodeSet& operator-=(const NodeSet& o);
  friend NodeSet operator|(NodeSet a, const NodeSet& b) { return a |= b; }
  friend NodeSet operator&(NodeSet a, const NodeSet& b) { return a &= b; }
  friend NodeSet operator-(NodeSet a, const NodeSet& b) { return a -= b; }

  // Every member of this set is in `o`.
  bool subset_of(const NodeSet& o) const;
  // The sets share a member.
  bool intersects(const NodeSet& o) const;
  bool operator==(const NodeSet& o) const { return capacity_ == o.capacity_ && words_ == o.words_; }

  size_t hash() const;
  // "{1,4,5}"; "{}" when empty.
  std::string to_string() const;

 private:
  int num_words() const { return static_cast<int>(words_.size()); }
  void check_same_capacity(const NodeSet& o) const {
    TESSERA_CHECK(capacity_ == o.capacity_, "NodeSets of different capacities combined");
  }

  int capacity_ = 0;
  std::vector<uint64_t> words_;
};

}  // namespace tessera

template <>
struct std::hash<tessera::NodeSet> {
  size_t operator()(const tessera::NodeSet& s) const { return s.hash(); }
};
