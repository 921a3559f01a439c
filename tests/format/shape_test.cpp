// st::Shape stores up to two dimensions inline and spills to the heap beyond; it must behave
// like the std::vector<uint64_t> it replaced at every size.
#include <gtest/gtest.h>

#include <algorithm>
#include <span>
#include <vector>

#include "ckpt/safetensors.h"

namespace ckpt::ftest {
namespace {

TEST(Shape, behaves_like_a_vector_inline_and_spilled) {
  for (size_t n = 0; n <= 12; ++n) {
    st::Shape s;
    std::vector<uint64_t> v;
    for (size_t i = 0; i < n; ++i) {
      s.push_back(i * 7 + 1);
      v.push_back(i * 7 + 1);
    }
    ASSERT_EQ(s.size(), n);
    EXPECT_TRUE(s == v);
    EXPECT_EQ(std::vector<uint64_t>(s), v);
    std::span<const uint64_t> sp = s;
    EXPECT_TRUE(std::equal(sp.begin(), sp.end(), v.begin(), v.end()));

    st::Shape copy = s;
    EXPECT_TRUE(copy == s);
    st::Shape moved = std::move(copy);
    EXPECT_TRUE(moved == v);
    EXPECT_TRUE(copy.empty());  // NOLINT: a moved-from Shape is empty by contract
    st::Shape assigned;
    assigned = moved;
    assigned = std::move(assigned);  // self-move keeps the value
    EXPECT_TRUE(assigned == v);

    // insert at the front, the middle and the end, single values and ranges
    s.insert(s.begin(), 99);
    v.insert(v.begin(), 99);
    const auto k = static_cast<std::ptrdiff_t>(std::min<size_t>(3, v.size()));  // v holds at least 99
    const std::vector<uint64_t> first3(v.begin(), v.begin() + k);
    s.insert(s.begin() + static_cast<std::ptrdiff_t>(s.size() / 2), first3.begin(), first3.end());
    const std::vector<uint64_t> head(v.begin(), v.begin() + k);
    v.insert(v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), head.begin(), head.end());
    s.insert(s.end(), 5);
    v.insert(v.end(), 5);
    EXPECT_TRUE(s == v) << n;
    EXPECT_EQ(s.front(), v.front());
    EXPECT_EQ(s.back(), v.back());
  }
}

TEST(Shape, assignment_from_vector_and_list) {
  st::Shape s = {3, 4};
  EXPECT_EQ(s.size(), 2u);
  s = std::vector<uint64_t>{1, 2, 3, 4, 5, 6};
  EXPECT_TRUE(s == (std::vector<uint64_t>{1, 2, 3, 4, 5, 6}));
  s = st::Shape{};
  EXPECT_TRUE(s.empty());
  const uint64_t nine[] = {9};
  s.assign(std::begin(nine), std::end(nine));
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0], 9u);
}

}  // namespace
}  // namespace ckpt::ftest
