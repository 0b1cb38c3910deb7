// The engine fuzzer's committed corpus as a regression test: every input runs
// through the same harness (scan, plan, execution, recovery with and without
// salvage, against the kernel-rule model) in the normal, sanitizer and
// ThreadSanitizer builds, which have no libFuzzer driver.
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <vector>

#include "../fuzz/fuzz_engine.cpp"

TEST(EngineCorpus, EveryInputKeepsTheInvariants)
{
	const std::filesystem::path corpus = std::filesystem::path(WBKIT_SOURCE_DIR) / "tests" / "fuzz" / "corpus" / "engine";
	unsigned inputs = 0;
	for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
		std::ifstream in(entry.path(), std::ios::binary);
		std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
		SCOPED_TRACE(entry.path().filename().string());
		EXPECT_EQ(LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()), 0);
		++inputs;
	}
	EXPECT_GE(inputs, 5u);
}
