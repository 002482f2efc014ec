// `mixlab analyze` end to end: runs the built binary, checks exit codes, messages and output.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "mixlab_test_paths.h"
#include "support/run_command.h"

namespace analyze_cli_test {

namespace {

RunResult run_mixlab(const std::string& args) {
  const std::string binary = MIXLAB_BINARY_DIR "/mixlab";
  EXPECT_TRUE(std::filesystem::exists(binary)) << binary << " is missing: build the mixlab_cli target first";
  return run_command(binary + " " + args + " 2>&1");
}

void expect_failure(const std::string& args, const std::string& fragment) {
  auto r = run_mixlab(args);
  EXPECT_NE(r.code, 0) << args << "\n" << r.output;
  EXPECT_NE(r.output.find(fragment), std::string::npos) << args << "\n" << r.output;
}

}  // namespace

TEST(AnalyzeCli, BadArguments) {
  // Each run starts the binary (about a second of library loading), so only the CLI's own checks
  // are here; the library's argument errors are tested in tests/analysis.
  expect_failure("analyze --pattern pow2 --T 0", "--T must be in [1, 1048576], got 0");
  expect_failure("analyze --pattern pow2 --T 99999999", "--T must be in");
  expect_failure("analyze --pattern bogus --T 16", "unknown kind 'bogus'");
  expect_failure("analyze --T 16", "give exactly one of --pattern SPEC or --all");
  expect_failure("analyze --pattern pow2 --T 16 --plot out.txt", ".png or .svg");
  expect_failure("analyze --pattern pow2 --T 300 --plot out.png", "plot limit 256");
}

TEST(AnalyzeCli, JsonAndTable) {
  auto r = run_mixlab("analyze --pattern pow2 --T 64 --json");
  ASSERT_EQ(r.code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["spec"], "pow2");
  EXPECT_EQ(j["shortest_path"]["max"], 6);
  auto t = run_mixlab("analyze --all --T 64");
  ASSERT_EQ(t.code, 0) << t.output;
  for (const char* row : {"causal", "band:8", "order:1", "order:8", "dense", "pow2+cache", "square+cache"})
    EXPECT_NE(t.output.find(row), std::string::npos) << row;
  EXPECT_NE(t.output.find("0-based"), std::string::npos);
}

TEST(AnalyzeCli, PlotWritesFile) {
  auto path = std::filesystem::temp_directory_path() / ("mixlab_cli_plot_" + std::to_string(::getpid()) + ".png");
  auto r = run_mixlab("analyze --pattern square+cache --T 32 --plot " + path.string());
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_TRUE(std::filesystem::exists(path));
  EXPECT_GT(std::filesystem::file_size(path), 200u);
  std::filesystem::remove(path);
}

// `mixlab --version` names the instruction set the native kernels run: bench.sh records it with
// every generated table, and it is the first thing a timing or rounding report needs.
TEST(AnalyzeCli, VersionNamesTheKernelsInstructionSet) {
  auto r = run_mixlab("--version");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("mixlab "), std::string::npos) << r.output;
  const bool named = r.output.find("(native kernels: generic)") != std::string::npos ||
                     r.output.find("(native kernels: avx2)") != std::string::npos ||
                     r.output.find("(native kernels: avx512)") != std::string::npos;
  EXPECT_TRUE(named) << r.output;
  r = run_command("MIXLAB_CPU_ISA=generic " MIXLAB_BINARY_DIR "/mixlab --version 2>&1");
  EXPECT_NE(r.output.find("(native kernels: generic)"), std::string::npos) << r.output;
  // ...and the BLAS kernels: OpenBLAS's core, and whether OPENBLAS_CORETYPE chose it.
  EXPECT_NE(r.output.find("), BLAS: "), std::string::npos) << r.output;
#if defined(__x86_64__)
  if (r.output.find("BLAS: OpenBLAS") != std::string::npos) {
    // Every x86-64 OpenBLAS built with DYNAMIC_ARCH (Debian's) has the Prescott (SSE3) kernels.
    r = run_command("OPENBLAS_CORETYPE=Prescott " MIXLAB_BINARY_DIR "/mixlab --version 2>&1");
    EXPECT_NE(r.output.find(", Prescott kernels (forced by OPENBLAS_CORETYPE)"), std::string::npos) << r.output;
  }
#endif
}

}  // namespace analyze_cli_test
