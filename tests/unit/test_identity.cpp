// The identity rule for the paths a tool is given, and the complete-or-absent
// report file. Stacked block devices are modelled with device nodes (mknod)
// and a sysfs tree of our own, so partitions and device-mapper stacks are
// covered where the machine has neither; real loop devices are in the CLI tests.
#include <cstdlib>
#include <fstream>
#include <string_view>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "temp_image.hpp"
#include "wbkit/atomic_file.hpp"
#include "wbkit/errors.hpp"
#include "wbkit/identity.hpp"

using namespace wbkit;
using wbkit::testing::TempDir;
namespace fs = std::filesystem;

// A test that cannot run on this machine: skipped, or failed where every test
// must run (WBKIT_REQUIRE_ALL_TESTS=1, which make test sets): a safety guard
// whose check did not run must not read as one that passed.
#define CANNOT_RUN(why)                                                                         \
	do {                                                                                    \
		const char* require = std::getenv("WBKIT_REQUIRE_ALL_TESTS");                   \
		if (require && std::string_view(require) == "1")                                \
			FAIL() << (why) << " (WBKIT_REQUIRE_ALL_TESTS=1: every test must run)"; \
		GTEST_SKIP() << (why);                                                          \
	} while (0)

namespace {

std::string write_file(const fs::path& path, const std::string& text)
{
	std::ofstream(path) << text;
	return path.string();
}

std::string read_file(const fs::path& path)
{
	std::ifstream in(path);
	return std::string(std::istreambuf_iterator<char>(in), {});
}

std::optional<std::string> same(const std::string& a, const std::string& b, const std::string& sysfs = "/sys")
{
	return same_storage(identify_path(a, sysfs), identify_path(b, sysfs));
}

// A sysfs tree with /dev/block/M:m entries, and block device nodes for them.
class FakeBlockDevices : public ::testing::Test {
protected:
	void SetUp() override
	{
		sys = dir.path() / "sys";
		fs::create_directories(sys / "dev" / "block");
		fs::create_directories(sys / "devices");
	}

	// A device directory under devices/ (parent: a disk's directory, for partitions).
	fs::path add_device(unsigned maj, unsigned min, const fs::path& parent = {})
	{
		const fs::path where = (parent.empty() ? sys / "devices" : parent) / fmt_name(maj, min);
		fs::create_directories(where / "slaves");
		write_file(where / "dev", std::to_string(maj) + ":" + std::to_string(min) + "\n");
		if (!parent.empty())
			write_file(where / "partition", "1\n");
		fs::create_directory_symlink(where, sys / "dev" / "block" / (std::to_string(maj) + ":" + std::to_string(min)));
		return where;
	}

	void add_slave(const fs::path& holder, const fs::path& slave)
	{
		fs::create_directory_symlink(slave, holder / "slaves" / slave.filename());
	}

	void add_loop_file(const fs::path& device, const std::string& file)
	{
		fs::create_directories(device / "loop");
		write_file(device / "loop" / "backing_file", file + "\n");
	}

	// A block device node; skips the test where nodes cannot be made (not root).
	std::string node(unsigned maj, unsigned min)
	{
		const fs::path path = dir.path() / ("node-" + fmt_name(maj, min));
		if (fs::exists(path))
			return path.string();
		if (::mknod(path.c_str(), S_IFBLK | 0600, makedev(maj, min)) != 0)
			throw std::runtime_error("mknod");
		return path.string();
	}

	static std::string fmt_name(unsigned maj, unsigned min) { return "blk" + std::to_string(maj) + "_" + std::to_string(min); }

	bool can_mknod()
	{
		try {
			node(1, 250);
			return true;
		} catch (const std::runtime_error&) {
			return false;
		}
	}

	TempDir dir;
	fs::path sys;
};

} // namespace

TEST(Identity, SameFileThroughLinksIsOne)
{
	TempDir dir;
	const std::string file = write_file(dir.path() / "cache.img", "x");
	const std::string hard = (dir.path() / "hard.img").string();
	const std::string soft = (dir.path() / "soft.img").string();
	ASSERT_EQ(::link(file.c_str(), hard.c_str()), 0);
	ASSERT_EQ(::symlink(file.c_str(), soft.c_str()), 0);
	EXPECT_EQ(same(file, hard), "the same file");
	EXPECT_EQ(same(file, soft), "the same file");
	EXPECT_EQ(same(file, (dir.path() / "." / "cache.img").string()), "the same file");
}

TEST(Identity, DifferentFilesAreDistinct)
{
	TempDir dir;
	EXPECT_EQ(same(write_file(dir.path() / "a", "x"), write_file(dir.path() / "b", "x")), std::nullopt);
}

TEST(Identity, PathsToCreateCompareByDirectoryAndName)
{
	TempDir dir;
	const std::string a = (dir.path() / "new.img").string();
	EXPECT_EQ(same(a, (dir.path() / "." / "new.img").string()), "the same new file");
	EXPECT_EQ(same(a, (dir.path() / "other.img").string()), std::nullopt);
	EXPECT_EQ(same(a, write_file(dir.path() / "exists", "x")), std::nullopt);
	EXPECT_THROW(identify_path((dir.path() / "no-such-dir" / "x").string()), IoError);
}

TEST(Identity, CheckDistinctPathsNamesBothRolesAndSkipsEmptyOnes)
{
	TempDir dir;
	const std::string cache = write_file(dir.path() / "cache.img", "x");
	const std::string backing = write_file(dir.path() / "backing.img", "y");
	const RolePath fine[] = {{"the cache", cache}, {"the backing device", backing}, {"the output", ""}};
	EXPECT_NO_THROW(check_distinct_paths(fine));
	const RolePath bad[] = {{"the cache", cache}, {"the backing device", backing}, {"the report", cache}};
	try {
		check_distinct_paths(bad);
		FAIL() << "not refused";
	} catch (const RefusedError& e) {
		EXPECT_NE(std::string(e.what()).find("the cache"), std::string::npos);
		EXPECT_NE(std::string(e.what()).find("the report"), std::string::npos);
	}
}

TEST_F(FakeBlockDevices, SameNodeNumberIsOneDevice)
{
	if (!can_mknod())
		CANNOT_RUN("cannot make device nodes here (needs root)");
	add_device(240, 1);
	const std::string a = node(240, 1);
	const std::string b = (dir.path() / "alias").string();
	ASSERT_EQ(::mknod(b.c_str(), S_IFBLK | 0600, makedev(240, 1)), 0);
	EXPECT_EQ(same(a, b, sys), "the same block device");
}

TEST_F(FakeBlockDevices, MapperDeviceOverALoopIsStacked)
{
	if (!can_mknod())
		CANNOT_RUN("cannot make device nodes here (needs root)");
	const fs::path loop = add_device(7, 3);
	const fs::path dm = add_device(254, 0);
	add_slave(dm, loop);
	const fs::path other = add_device(7, 4);
	EXPECT_TRUE(same(node(254, 0), node(7, 3), sys).value_or("").starts_with("block devices stacked"));
	EXPECT_EQ(same(node(254, 0), node(7, 4), sys), std::nullopt);
	(void)other;
}

TEST_F(FakeBlockDevices, PartitionOverlapsItsDiskButNotItsSibling)
{
	if (!can_mknod())
		CANNOT_RUN("cannot make device nodes here (needs root)");
	const fs::path disk = add_device(259, 0);
	add_device(259, 1, disk);
	add_device(259, 2, disk);
	EXPECT_TRUE(same(node(259, 1), node(259, 0), sys).value_or("").starts_with("a partition and its disk"));
	EXPECT_TRUE(same(node(259, 0), node(259, 2), sys).value_or("").starts_with("a partition and its disk"));
	EXPECT_EQ(same(node(259, 1), node(259, 2), sys), std::nullopt);
}

TEST_F(FakeBlockDevices, LoopDeviceAndItsFileAndTwoLoopsOverOneFile)
{
	if (!can_mknod())
		CANNOT_RUN("cannot make device nodes here (needs root)");
	const std::string file = write_file(dir.path() / "cache.img", "x");
	const std::string other = write_file(dir.path() / "other.img", "y");
	add_loop_file(add_device(7, 10), file);
	add_loop_file(add_device(7, 11), file);
	add_loop_file(add_device(7, 12), other);
	EXPECT_EQ(same(node(7, 10), file, sys), "a loop device and the file behind it");
	EXPECT_EQ(same(file, node(7, 10), sys), "a loop device and the file behind it");
	EXPECT_EQ(same(node(7, 10), node(7, 11), sys), "loop devices over the same file");
	EXPECT_EQ(same(node(7, 10), node(7, 12), sys), std::nullopt);
	EXPECT_EQ(same(node(7, 12), file, sys), std::nullopt);
}

TEST(AtomicFile, AppearsOnlyWhenCommitted)
{
	TempDir dir;
	const fs::path path = dir.path() / "report.json";
	write_file(path, "old report\n");
	{
		AtomicFile f(path.string());
		f.stream() << "new report\n";
		EXPECT_EQ(read_file(path), "old report\n");
	} // not committed: as if the run had failed
	EXPECT_EQ(read_file(path), "old report\n");
	EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
	{
		AtomicFile f(path.string());
		f.stream() << "new report\n";
		f.commit();
	}
	EXPECT_EQ(read_file(path), "new report\n");
	EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

TEST(AtomicFile, ReplacesTheTargetOfASymlinkNotTheLink)
{
	TempDir dir;
	const fs::path target = dir.path() / "real.json";
	const fs::path link = dir.path() / "link.json";
	write_file(target, "old");
	fs::create_symlink(target, link);
	AtomicFile f(link.string());
	f.stream() << "new";
	f.commit();
	EXPECT_TRUE(fs::is_symlink(link));
	EXPECT_EQ(read_file(target), "new");
}

TEST(AtomicFile, RefusesAnythingButARegularFile)
{
	TempDir dir;
	EXPECT_THROW(AtomicFile(dir.path().string()), RefusedError);
	const fs::path fifo = dir.path() / "fifo";
	ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
	EXPECT_THROW(AtomicFile(fifo.string()), RefusedError);
	const fs::path node = dir.path() / "node";
	if (::mknod(node.c_str(), S_IFBLK | 0600, makedev(7, 200)) == 0) {
		EXPECT_THROW(AtomicFile(node.string()), RefusedError);
	}
	EXPECT_THROW(AtomicFile((dir.path() / "missing" / "r.json").string()), IoError);
}
