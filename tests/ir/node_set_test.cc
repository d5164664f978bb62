#include "ir/node_set.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <random>
#include <set>
#include <unordered_map>

namespace tessera {
namespace {

// A random subset of [0, capacity) where each index is in with probability `density`.
std::set<int> random_set(std::mt19937& rng, int capacity, double density) {
  std::bernoulli_distribution in(density);
  std::set<int> s;
  for (int i = 0; i < capacity; ++i)
    if (in(rng)) s.insert(i);
  return s;
}

NodeSet to_node_set(int capacity, const std::set<int>& s) {
  NodeSet n(capacity);
  for (int i : s) n.add(i);
  return n;
}

std::vector<int> to_vector(const std::set<int>& s) { return {s.begin(), s.end()}; }

std::string to_string(const std::set<int>& s) {
  std::string out = "{";
  for (int i : s) {
    if (out.size() > 1) out += ',';
    out += std::to_string(i);
  }
  return out + "}";
}

// Checks every observer of `n` against the reference set.
void expect_same(const NodeSet& n, const std::set<int>& ref, int capacity) {
  ASSERT_EQ(n.capacity(), capacity);
  EXPECT_EQ(n.count(), static_cast<int>(ref.size()));
  EXPECT_EQ(n.empty(), ref.empty());
  EXPECT_EQ(n.to_vector(), to_vector(ref));
  EXPECT_EQ(n.to_string(), to_string(ref));
  EXPECT_EQ(n.first(), ref.empty() ? -1 : *ref.begin());
  EXPECT_EQ(n.last(), ref.empty() ? -1 : *ref.rbegin());
  std::vector<int> by_next;
  for (int i = n.first(); i != -1; i = n.next(i)) by_next.push_back(i);
  EXPECT_EQ(by_next, to_vector(ref));
  std::vector<int> by_range;
  for (int i : n) by_range.push_back(i);
  EXPECT_EQ(by_range, to_vector(ref));
  for (int i = -2; i < capacity + 2; ++i) {
    ASSERT_EQ(n.contains(i), ref.count(i) == 1) << i;
    if (i >= -1) {
      auto it = ref.upper_bound(i);
      ASSERT_EQ(n.next(i), it == ref.end() ? -1 : *it) << i;
    }
  }
}

class NodeSetRandom : public ::testing::TestWithParam<int> {};

TEST_P(NodeSetRandom, MatchesStdSet) {
  const int capacity = GetParam();
  std::mt19937 rng(1234 + capacity);
  for (double density : {0.0, 0.05, 0.5, 0.95, 1.0}) {
    for (int trial = 0; trial < 4; ++trial) {
      SCOPED_TRACE("density " + std::to_string(density) + " trial " + std::to_string(trial));
      std::set<int> ra = random_set(rng, capacity, density);
      std::set<int> rb = random_set(rng, capacity, 0.5);
      NodeSet a = to_node_set(capacity, ra);
      NodeSet b = to_node_set(capacity, rb);
      expect_same(a, ra, capacity);
      expect_same(b, rb, capacity);

      std::set<int> r_union, r_inter, r_diff;
      std::set_union(ra.begin(), ra.end(), rb.begin(), rb.end(),
                     std::inserter(r_union, r_union.end()));
      std::set_intersection(ra.begin(), ra.end(), rb.begin(), rb.end(),
                            std::inserter(r_inter, r_inter.end()));
      std::set_difference(ra.begin(), ra.end(), rb.begin(), rb.end(),
                          std::inserter(r_diff, r_diff.end()));
      expect_same(a | b, r_union, capacity);
      expect_same(a & b, r_inter, capacity);
      expect_same(a - b, r_diff, capacity);
      NodeSet c = a;
      c |= b;
      expect_same(c, r_union, capacity);
      c = a;
      c &= b;
      expect_same(c, r_inter, capacity);
      c = a;
      c -= b;
      expect_same(c, r_diff, capacity);
      expect_same(a, ra, capacity);  // the returning forms left `a` alone

      EXPECT_EQ(a.subset_of(b), std::includes(rb.begin(), rb.end(), ra.begin(), ra.end()));
      EXPECT_TRUE((a & b).subset_of(a));
      EXPECT_TRUE(a.subset_of(a | b));
      EXPECT_EQ(a.intersects(b), !r_inter.empty());
      EXPECT_EQ(a == b, ra == rb);
      EXPECT_TRUE(a == to_node_set(capacity, ra));
      EXPECT_EQ(a.hash(), to_node_set(capacity, ra).hash());

      // Removing every other member.
      NodeSet d = a;
      std::set<int> rd = ra;
      bool drop = true;
      for (int i : ra) {
        if (drop) {
          d.remove(i);
          rd.erase(i);
        }
        drop = !drop;
      }
      expect_same(d, rd, capacity);
      d.clear();
      expect_same(d, {}, capacity);
    }
  }
  // all() and of().
  std::set<int> everything;
  for (int i = 0; i < capacity; ++i) everything.insert(i);
  expect_same(NodeSet::all(capacity), everything, capacity);
  std::vector<int> some;
  for (int i = 0; i < capacity; i += 3) some.push_back(i);
  expect_same(NodeSet::of(capacity, some), std::set<int>(some.begin(), some.end()), capacity);
}

INSTANTIATE_TEST_SUITE_P(Sizes, NodeSetRandom, ::testing::Values(0, 1, 63, 64, 65, 127, 128, 1000));

TEST(NodeSet, Basics) {
  NodeSet s = NodeSet::of(10, {5, 1, 4});
  EXPECT_EQ(s.to_string(), "{1,4,5}");
  EXPECT_EQ(NodeSet(10).to_string(), "{}");
  EXPECT_EQ(NodeSet().capacity(), 0);
  EXPECT_TRUE(NodeSet().empty());
  EXPECT_EQ(NodeSet().first(), -1);
  EXPECT_EQ(NodeSet().begin(), NodeSet().end());
  s.add(4);  // idempotent
  EXPECT_EQ(s.count(), 3);
  s.remove(7);  // removing a non-member is fine
  EXPECT_EQ(s.count(), 3);
  EXPECT_FALSE(s.contains(-1));
  EXPECT_FALSE(s.contains(10));
  EXPECT_EQ(s.next(5), -1);
  EXPECT_EQ(s.next(9), -1);
  EXPECT_EQ(s.next(100), -1);
  // Same members over different capacities are different sets.
  EXPECT_FALSE(NodeSet::of(10, {1}) == NodeSet::of(11, {1}));
  EXPECT_TRUE(NodeSet(0).subset_of(NodeSet(0)));
  EXPECT_FALSE(NodeSet(0).intersects(NodeSet(0)));
}

TEST(NodeSet, WordBoundaries) {
  NodeSet s = NodeSet::of(200, {0, 63, 64, 127, 128, 199});
  EXPECT_EQ(s.to_vector(), (std::vector<int>{0, 63, 64, 127, 128, 199}));
  EXPECT_EQ(s.next(0), 63);
  EXPECT_EQ(s.next(63), 64);
  EXPECT_EQ(s.next(64), 127);
  EXPECT_EQ(s.next(128), 199);
  EXPECT_EQ(s.last(), 199);
  EXPECT_EQ(NodeSet::all(64).count(), 64);
  EXPECT_EQ(NodeSet::all(65).count(), 65);
  EXPECT_EQ(NodeSet::all(65).last(), 64);
  // Difference from all() never sets bits beyond capacity.
  NodeSet complement = NodeSet::all(70) - NodeSet::of(70, {3});
  EXPECT_EQ(complement.count(), 69);
  EXPECT_TRUE(complement == (NodeSet::all(70) - NodeSet::of(70, {3})));
}

TEST(NodeSet, KeysUnorderedMap) {
  std::mt19937 rng(7);
  std::unordered_map<NodeSet, int> index;
  std::vector<NodeSet> sets;
  for (int trial = 0; trial < 200; ++trial) {
    NodeSet s = to_node_set(100, random_set(rng, 100, 0.1));
    if (index.emplace(s, static_cast<int>(sets.size())).second) sets.push_back(s);
  }
  EXPECT_GT(sets.size(), 190u);
  for (const NodeSet& s : sets) ASSERT_EQ(sets[index.at(s)], s);
  EXPECT_EQ(index.count(NodeSet(101)), 0u);
  // Single-member sets hash differently from each other (no trivial collisions).
  std::set<size_t> hashes;
  for (int i = 0; i < 100; ++i) hashes.insert(std::hash<NodeSet>()(NodeSet::of(100, {i})));
  EXPECT_EQ(hashes.size(), 100u);
}

TEST(NodeSet, IteratorIsForwardIterator) {
  NodeSet s = NodeSet::of(130, {2, 64, 129});
  EXPECT_EQ(std::distance(s.begin(), s.end()), 3);
  auto it = s.begin();
  auto copy = it++;
  EXPECT_EQ(*copy, 2);
  EXPECT_EQ(*it, 64);
  EXPECT_EQ(std::count_if(s.begin(), s.end(), [](int i) { return i > 10; }), 2);
  static_assert(std::forward_iterator<NodeSet::Iterator>);
}

}  // namespace
}  // namespace tessera
