// Output files: checked before the work, replaced atomically, never replacing what is not a
// regular file, nothing half-written.
#include "shardscope/core/output_file.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace shardscope {
namespace {

namespace fs = std::filesystem;

class OutputFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("shardscope-output-{}", ::getpid());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string read(const fs::path& p) {
    std::ifstream in(p);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  std::size_t entries() {
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir_), {}));
  }
  fs::path dir_;
};

TEST_F(OutputFile, ReplacesARegularFileAndLeavesNothingElse) {
  write_text_file_atomic(dir_ / "a.json", "old");
  write_text_file_atomic(dir_ / "a.json", "new");
  EXPECT_EQ(read(dir_ / "a.json"), "new");
  EXPECT_EQ(entries(), 1U);  // no temporary file left beside it
}

TEST_F(OutputFile, WritesThroughASymlinkAndKeepsIt) {
  fs::create_symlink(dir_ / "target.json", dir_ / "link.json");
  write_text_file_atomic(dir_ / "link.json", "x");
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.json"));
  EXPECT_EQ(read(dir_ / "target.json"), "x");
}

TEST_F(OutputFile, NeverReplacesADevice) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  try {
    write_text_file_atomic("/dev/full", "x");
    FAIL() << "writing to /dev/full succeeded";
  } catch (const ValidationError& e) {
    EXPECT_NE(std::string(e.what()).find("No space left on device"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_character_file("/dev/full"));
}

TEST_F(OutputFile, AFifoWithoutAReaderIsAnErrorNotAHang) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  EXPECT_THROW(write_text_file_atomic(dir_ / "fifo", "x"), ValidationError);
  EXPECT_TRUE(fs::is_fifo(dir_ / "fifo"));
}

TEST_F(OutputFile, ChecksNameEveryProblemBeforeTheWork) {
  const fs::path input = dir_ / "in.yaml";
  write_text_file_atomic(input, "model: {}");
  const fs::path inputs[] = {input};
  EXPECT_FALSE(check_output_path(input, "--json", inputs).empty());  // the input itself
  EXPECT_FALSE(check_output_path(dir_, "--json", inputs).empty());   // a directory
  EXPECT_FALSE(
      check_output_path(dir_ / "no" / "x.json", "--json", inputs).empty());  // no such directory
  EXPECT_TRUE(check_output_path(dir_ / "out.json", "--json", inputs).empty());
  const std::pair<std::string, std::string> twice[] = {{"--json", (dir_ / "o.json").string()},
                                                       {"--trace", (dir_ / "o.json").string()}};
  EXPECT_THROW(check_output_paths(twice, inputs), ValidationError);
}

TEST_F(OutputFile, AMissingDirectoryFailsWithoutCreatingAnything) {
  EXPECT_THROW(write_text_file_atomic(dir_ / "missing" / "x.json", "x"), ValidationError);
  EXPECT_FALSE(fs::exists(dir_ / "missing"));
}

}  // namespace
}  // namespace shardscope

namespace shardscope {
namespace {

// Inputs that are no regular file are refused before they are opened: a FIFO would block the
// open (and a sniff then a parse would read it twice), /dev/zero would fill memory. A file over
// the bound is refused by its size, before it is read.
TEST(ReadTextFile, RefusesWhatIsNoRegularFileAndWhatIsTooLarge) {
  const auto dir =
      std::filesystem::temp_directory_path() / fmt::format("shardscope-read-{}", ::getpid());
  std::filesystem::create_directories(dir);
  const auto fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::filesystem::path& p : {fifo, std::filesystem::path("/dev/zero")}) {
    try {
      (void)read_text_file(p);
      ADD_FAILURE() << "read " << p;
    } catch (const ValidationError& e) {
      EXPECT_EQ(e.problems().at(0).file, p.string());
      EXPECT_NE(e.problems().at(0).message.find("is not a regular file"), std::string::npos);
    }
  }
  const auto big = dir / "big.json";
  std::ofstream(big) << std::string(4096, ' ');
  EXPECT_EQ(read_text_file(big).size(), 4096U);
  try {
    (void)read_text_file(big, 1024);
    ADD_FAILURE() << "read a file over the bound";
  } catch (const ValidationError& e) {
    EXPECT_EQ(e.problems().at(0).message, "is 4.00 KiB");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace shardscope
