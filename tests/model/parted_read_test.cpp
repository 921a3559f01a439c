// io::PartedRead: a file read in parts by several threads leaves what one read_file would,
// including when the file shrank or grew after its parts were planned, and never leaves a
// part waiting on an open that failed.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "io/file.h"
#include "test_support.h"
#include "util/parallel.h"

namespace ckpt::ftest {
namespace {

std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 13) % 26);
  return s;
}

// Reads `p` with parts planned for `planned` bytes of `part` each, on `threads` threads.
std::pair<std::string, std::string> parted(const std::filesystem::path& p, uint64_t planned, uint64_t part,
                                           uint64_t max_bytes, unsigned threads) {
  io::PartedRead r(io::PartedRead::parts_for(planned, part), part);
  std::string out;
  parallel::run(r.parts(), threads, [&](size_t k) {
    if (k == 0) r.open_and_size(p, max_bytes, out, 64);
    r.read_part(k);
  });
  std::string error = r.finish();
  return {error, std::move(out)};  // moved: a copy would not keep the spare capacity
}

TEST(parted_read, equals_the_file_for_any_part_count_and_threads) {
  test::TempDir dir;
  for (size_t size : {size_t{0}, size_t{1}, size_t{4095}, size_t{4096}, size_t{4097}, size_t{40000}}) {
    const std::string text = pattern(size);
    test::write_text(dir / "f", text);
    for (uint64_t part : {uint64_t{1000}, uint64_t{4096}, uint64_t{1} << 20})
      for (unsigned threads : {1u, 2u, 4u}) {
        auto [error, out] = parted(dir / "f", size, part, 1u << 30, threads);
        EXPECT_EQ(error, "");
        EXPECT_EQ(out, text) << size << " bytes, parts of " << part << ", " << threads << " threads";
        EXPECT_GE(out.capacity() - out.size(), 64u);
      }
  }
}

TEST(parted_read, a_file_that_changed_size_after_planning_reads_as_it_is_now) {
  test::TempDir dir;
  const std::string now_small = pattern(2500), now_large = pattern(9000);
  test::write_text(dir / "small", now_small);
  test::write_text(dir / "large", now_large);
  for (unsigned threads : {1u, 2u}) {
    // planned for 8,000 bytes in parts of 1,000: parts 3.. find nothing, part 2 is short
    EXPECT_EQ(parted(dir / "small", 8000, 1000, 1u << 30, threads).second, now_small);
    // planned for 3,000: the last part takes everything beyond the first two
    EXPECT_EQ(parted(dir / "large", 3000, 1000, 1u << 30, threads).second, now_large);
  }
}

TEST(parted_read, errors_are_reported_and_no_part_waits_forever) {
  test::TempDir dir;
  test::write_text(dir / "f", pattern(5000));
  auto [missing, out1] = parted(dir / "absent", 5000, 1000, 1u << 30, 2);
  EXPECT_NE(missing, "");
  auto [too_big, out2] = parted(dir / "f", 5000, 1000, 4000, 2);
  EXPECT_NE(too_big.find("limit"), std::string::npos) << too_big;
  auto [dir_error, out3] = parted(dir.path(), 5000, 1000, 1u << 30, 2);
  EXPECT_NE(dir_error, "");
}

}  // namespace
}  // namespace ckpt::ftest
