// control.hpp: wbctl's table lines, the cache check's rule, the flush
// progress, and the steps of flush, detach, attach, replace-cache and mode
// against a fake
// System that plays device-mapper (a live table, an inactive one, suspend)
// and records every call, with its failures switched on one at a time.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fmt/format.h>
#include <fstream>

#include "wbkit/control.hpp"
#include "wbkit/format.hpp"
#include "wbkit/probe.hpp"
#include "temp_image.hpp"

using namespace wbkit;
using namespace std::chrono_literals;

namespace {

// The state of one writeboost instance, as its status line says it.
struct WbState {
	std::uint64_t current_id = 10;
	std::uint64_t last_flushed_id = 9;
	std::uint64_t last_writeback_id = 2;
	std::uint64_t dirty = 500;
	bool wbkit = false;
	bool dead = false;
	std::uint64_t writeback_threshold = 0; // as the status shows them
	std::uint64_t read_cache_threshold = 0;
};

std::string status_params(const WbState& s)
{
	std::string line = fmt::format("7 32512 256 {} {} {} {}", s.current_id, s.last_flushed_id, s.last_writeback_id,
				       s.dirty);
	for (int i = 0; i < 16; ++i)
		line += " 0";
	line += " 3";
	if (s.wbkit)
		line += fmt::format(" 12 writeback_threshold {} nr_cur_batched_writeback 0 sync_data_interval 0 "
				    "update_sb_record_interval 0 read_cache_threshold {} dead {}",
				    s.writeback_threshold, s.read_cache_threshold, s.dead ? 1 : 0);
	else
		line += fmt::format(" 10 writeback_threshold {} nr_cur_batched_writeback 0 sync_data_interval 0 "
				    "update_sb_record_interval 0 read_cache_threshold {}",
				    s.writeback_threshold, s.read_cache_threshold);
	return line;
}

class FakeSystem;

class FakeMessage : public PendingMessage {
public:
	FakeMessage(FakeSystem& system, int polls, int status) : system_(system), polls_(polls), status_(status) {}
	std::optional<ProgramOutput> poll() override;
	ProgramOutput stop() override;

private:
	FakeSystem& system_;
	int polls_; // polls before it ends; -1: never
	int status_;
	bool ended_ = false;
};

class FakeSystem : public System {
public:
	std::string live = "0 2097152 writeboost 254:0 254:16";
	std::optional<std::string> inactive;
	bool suspended = false;
	WbState wb;
	std::vector<std::string> calls;
	Clock::time_point time{};

	// Switched on by a test:
	bool fail_suspend = false;
	bool fail_load = false;
	int fail_resumes = 0;                 // the next N resumes fail
	bool resume_swaps_on_failure = false; // dm swapped before the preresume failed
	bool fail_wipe = false;
	std::uint64_t backing_sectors = 2097152;
	// Each drop_caches: polls until it ends (-1 never) and its exit status;
	// what it does to the state when it ends.
	std::deque<std::pair<int, int>> messages;
	std::function<void(WbState&)> on_message_done = [](WbState& s) {
		s.last_writeback_id = s.current_id;
		s.dirty = 0;
	};
	// Called at every status: new writes (while live).
	std::function<void(WbState&)> on_status;
	int messages_stopped = 0;
	bool suspended_with_lockfs = true;
	std::chrono::milliseconds suspend_takes{40};

	std::string table(const std::string& name) override
	{
		calls.push_back("table " + name);
		return live + "\n";
	}
	std::string status(const std::string& name) override
	{
		calls.push_back("status " + name);
		if (on_status && !suspended)
			on_status(wb);
		const auto words = live.substr(0, live.find(' ', live.find(' ', live.find(' ') + 1) + 1));
		if (live.find(" writeboost ") == std::string::npos)
			return live + "\n"; // linear: dmsetup prints no parameters, close enough
		return words + " " + status_params(wb) + "\n";
	}
	void suspend(const std::string& name, bool lockfs) override
	{
		calls.push_back("suspend " + name);
		suspended_with_lockfs = lockfs;
		if (fail_suspend)
			throw DmsetupError("suspend failed");
		suspended = true;
		time += suspend_takes;
	}
	void resume(const std::string& name) override
	{
		calls.push_back("resume " + name);
		if (fail_resumes > 0) {
			--fail_resumes;
			if (resume_swaps_on_failure && inactive) {
				live = *inactive;
				inactive.reset();
			}
			throw DmsetupError("resume failed");
		}
		if (inactive) {
			live = *inactive;
			inactive.reset();
		}
		suspended = false;
		time += 5ms;
	}
	void load(const std::string& name, const std::string& line) override
	{
		calls.push_back("load " + name + " " + line);
		if (fail_load)
			throw DmsetupError("load failed");
		inactive = line;
	}
	void clear(const std::string& name) override
	{
		calls.push_back("clear " + name);
		inactive.reset();
	}
	// create: whether the name exists; what create does.
	bool present = true;
	bool fail_create = false;
	bool create_leaves_device = false; // a failed create left the device
	bool fail_remove = false;
	bool exists(const std::string& name) override
	{
		calls.push_back("exists " + name);
		return present;
	}
	void create(const std::string& name, const std::string& line) override
	{
		calls.push_back("create " + name + " " + line);
		if (fail_create) {
			present = create_leaves_device;
			throw DmsetupError("create failed");
		}
		present = true;
		live = line;
	}
	void remove(const std::string& name) override
	{
		calls.push_back("remove " + name);
		if (fail_remove)
			throw DmsetupError("remove failed");
		present = false;
	}
	std::unique_ptr<PendingMessage> start_drop_caches(const std::string& name) override
	{
		calls.push_back(std::string("drop_caches ") + name + (suspended ? " (suspended)" : ""));
		auto [polls, status] = messages.empty() ? std::pair{1, 0} : messages.front();
		if (!messages.empty())
			messages.pop_front();
		return std::make_unique<FakeMessage>(*this, polls, status);
	}
	void flush_device(const std::string& name) override { calls.push_back("fsync " + name); }
	std::uint64_t device_sectors(const std::string& devno) override
	{
		calls.push_back("sectors " + devno);
		return backing_sectors;
	}
	void wipe_cache(const std::string& devno, const std::string& holder) override
	{
		calls.push_back("wipe " + devno + " held by " + holder + (suspended ? " (suspended)" : ""));
		if (fail_wipe)
			throw IoError("cannot open", "/dev/vdb", 16);
	}
	Clock::time_point now() override { return time; }
	void sleep(std::chrono::milliseconds d) override { time += d; }

	bool called(std::string_view prefix) const
	{
		for (const std::string& c : calls)
			if (c.rfind(prefix, 0) == 0)
				return true;
		return false;
	}
};

std::optional<ProgramOutput> FakeMessage::poll()
{
	if (ended_)
		return ProgramOutput{status_, "", status_ ? "device-mapper: message ioctl failed: Device or resource busy\n" : ""};
	if (polls_ < 0 || --polls_ > 0)
		return std::nullopt;
	ended_ = true;
	if (status_ == 0)
		system_.on_message_done(system_.wb);
	return poll();
}

ProgramOutput FakeMessage::stop()
{
	if (!ended_) {
		++system_.messages_stopped;
		ended_ = true;
		status_ = 143;
	}
	return {status_, "", ""};
}

WbStatus status_of(const WbState& s) { return parse_wb_status(status_params(s)); }

SwitchOptions quick()
{
	SwitchOptions o;
	o.flush.poll_interval = 100ms;
	o.flush_rounds = 1;
	return o;
}

} // namespace

// ---------------------------------------------------------------------------
// Table lines

TEST(ControlTable, SingleTarget)
{
	const DmTargetLine line = single_target("0 2097152 writeboost 254:0 254:16 2 writeback_threshold 70\n", "wb");
	EXPECT_EQ(line.type, "writeboost");
	EXPECT_EQ(line.length, 2097152u);
	EXPECT_EQ(parse_wb_table(line.params).backing, "254:0");
	EXPECT_THROW(single_target("", "wb"), Error);
	EXPECT_THROW(single_target("0 10 linear 8:0 0\n10 10 linear 8:1 0\n", "wb"), Error);
	EXPECT_THROW(single_target("8 10 linear 8:0 0\n", "wb"), Error);
	EXPECT_THROW(single_target("garbage\n", "wb"), Error);
}

TEST(ControlTable, Lines)
{
	EXPECT_EQ(linear_table_line(2097152, "254:0"), "0 2097152 linear 254:0 0");
	EXPECT_EQ(writeboost_table_line(100, "254:0", "/dev/vdb", {}), "0 100 writeboost 254:0 /dev/vdb");
	EXPECT_EQ(writeboost_table_line(100, "254:0", "/dev/vdb", {{"writeback_threshold", "70"}, {"sync_data_interval", "5"}}),
		  "0 100 writeboost 254:0 /dev/vdb 4 writeback_threshold 70 sync_data_interval 5");
	auto linear = parse_linear_params("254:0 0");
	ASSERT_TRUE(linear);
	EXPECT_EQ(linear->device, "254:0");
	EXPECT_EQ(linear->offset, 0u);
	EXPECT_FALSE(parse_linear_params("254:0"));
	EXPECT_FALSE(parse_linear_params("254:0 x"));
}

TEST(ControlTable, Options)
{
	const std::vector<std::string> words{"writeback_threshold=70", "Read_Cache_Threshold=31"};
	auto args = parse_table_options(words);
	ASSERT_EQ(args.size(), 2u);
	EXPECT_EQ(args[1].first, "read_cache_threshold");
	EXPECT_EQ(args[1].second, "31");
	const std::vector<std::string> unknown{"cache_size=3"};
	EXPECT_THROW(parse_table_options(unknown), UsageError);
	const std::vector<std::string> not_number{"writeback_threshold=x"};
	EXPECT_THROW(parse_table_options(not_number), UsageError);
	const std::vector<std::string> no_eq{"writeback_threshold"};
	EXPECT_THROW(parse_table_options(no_eq), UsageError);
}

// ---------------------------------------------------------------------------
// The cache check's rule

namespace {

// The first and last MiB of a device of `bytes` bytes, zero.
struct Ends {
	explicit Ends(std::uint64_t bytes = 16 << 20) : size(bytes) {}
	std::vector<std::byte> head = std::vector<std::byte>(cache_check_bytes);
	std::vector<std::byte> tail = std::vector<std::byte>(cache_check_bytes);
	std::uint64_t size;
	CacheContent classify() const { return classify_cache_content(head, tail, size); }
	void put(std::size_t at, std::string_view text) { std::memcpy(head.data() + at, text.data(), text.size()); }
	void put32(std::size_t at, std::uint32_t v) { std::memcpy(head.data() + at, &v, 4); } // little-endian host
};

} // namespace

TEST(ControlCache, Classify)
{
	Ends e;
	EXPECT_EQ(e.classify().kind, CacheContent::Kind::blank);

	e.put32(0, superblock_magic);
	EXPECT_EQ(e.classify().kind, CacheContent::Kind::writeboost);
	// The magic then anything but zeros in sector 0: not a superblock.
	e.put(100, "x");
	EXPECT_EQ(e.classify().kind, CacheContent::Kind::foreign);
	EXPECT_EQ(e.classify().what, "the writeboost magic but not a valid superblock");
	e.head[100] = std::byte{0};
	e.put32(0, superblock_magic ^ 0x11);
	EXPECT_EQ(e.classify().what, "a damaged writeboost superblock");
	e.put(0, "junkjunk");
	EXPECT_EQ(e.classify().what, "non-zero data at byte 0");

	Ends ext;
	ext.head[1080] = std::byte{0x53};
	ext.head[1081] = std::byte{0xef}; // sector 0 stays zero, as with ext4
	EXPECT_EQ(ext.classify().kind, CacheContent::Kind::foreign);
	EXPECT_EQ(ext.classify().what, "an ext2/3/4 file system");

	Ends btrfs;
	btrfs.put(65536 + 64, "_BHRfS_M");
	EXPECT_EQ(btrfs.classify().what, "a btrfs file system");
}

TEST(ControlCache, TotalRule)
{
	// Data the list does not know, anywhere in the first MiB or the last:
	// refused by where it is.
	Ends mid;
	mid.head[700000] = std::byte{1};
	EXPECT_EQ(mid.classify().kind, CacheContent::Kind::foreign);
	EXPECT_EQ(mid.classify().what, "non-zero data at byte 700000");
	Ends end;
	end.tail[cache_check_bytes - 1] = std::byte{1};
	EXPECT_EQ(end.classify().what, fmt::format("non-zero data at byte {}", (16 << 20) - 1));
	// Past the first MiB and before the last: not looked at.
	Ends small(3 << 20);
	EXPECT_EQ(small.classify().kind, CacheContent::Kind::blank);

	Ends f2fs, nilfs, jfs, reiser, iso, md12, md090, md10;
	f2fs.put32(1024, 0xf2f52010);
	EXPECT_EQ(f2fs.classify().what, "an f2fs file system");
	nilfs.put(1024 + 6, "\x34\x34");
	EXPECT_EQ(nilfs.classify().what, "a nilfs2 file system");
	jfs.put(32768, "JFS1");
	EXPECT_EQ(jfs.classify().what, "a JFS file system");
	reiser.put(65536 + 52, "ReIsEr2Fs");
	EXPECT_EQ(reiser.classify().what, "a ReiserFS file system");
	iso.put(32769, "CD001");
	EXPECT_EQ(iso.classify().what, "an ISO 9660 file system");
	md12.put32(4096, 0xa92b4efc);
	EXPECT_EQ(md12.classify().what, "an MD RAID superblock (1.2)");
	// 0.90: 64 KiB from the 64 KiB-aligned end; 1.0: 8 KiB from the end,
	// 4 KiB aligned. The tail is the last MiB of a 16 MiB device.
	const std::uint32_t md = 0xa92b4efc;
	std::memcpy(md090.tail.data() + cache_check_bytes - 65536, &md, 4);
	EXPECT_EQ(md090.classify().what, "an MD RAID superblock (0.90)");
	std::memcpy(md10.tail.data() + cache_check_bytes - 8192, &md, 4);
	EXPECT_EQ(md10.classify().what, "an MD RAID superblock (1.0)");
}

TEST(ControlCache, WipedCacheStart)
{
	// Debian's writeboost -u zeroes the first 4 KiB of a cache dm-wbkit
	// formatted: its trust record (sector 8) and the superblock record
	// (sector 2047) stay, old segments after them. Formatted again.
	Ends e;
	e.put32(4096, 0x72544257);
	e.put(4096 + 8, "\x01");
	e.put(0xFFE00, "\x07");
	e.tail[5] = std::byte{9};
	EXPECT_EQ(e.classify().kind, CacheContent::Kind::blank);
	// Anything else in the superblock region: not ours, refused.
	e.put(8192, "x");
	EXPECT_EQ(e.classify().kind, CacheContent::Kind::foreign);
	e.head[8192] = std::byte{0};
	e.put(4096 + 4, "p"); // the record's padding
	EXPECT_EQ(e.classify().kind, CacheContent::Kind::foreign);
}

TEST(ControlCache, OtherCachesSignatures)
{
	Ends e;
	// bcache's superblock sits at 4 KiB, its sector 0 zero.
	const unsigned char bcache_magic[] = {0xc6, 0x85, 0x73, 0xf6, 0x4e, 0x1a, 0x45, 0xca,
					      0x82, 0x65, 0xf5, 0x7f, 0x48, 0xba, 0x6d, 0x81};
	std::memcpy(e.head.data() + 4096 + 24, bcache_magic, sizeof bcache_magic);
	EXPECT_EQ(e.classify().kind, CacheContent::Kind::foreign);
	EXPECT_EQ(e.classify().what, "a bcache superblock");
	e.head[4096 + 30] = std::byte{0}; // one byte off is not bcache's: still not zero
	EXPECT_EQ(e.classify().what, "non-zero data at byte 4120");

	Ends wc;
	wc.put32(0, 0x23489321);
	EXPECT_EQ(wc.classify().what, "a dm-writecache superblock");
	Ends meta;
	meta.head[0] = std::byte{0x11}; // a checksum
	meta.put32(32, 6142003);
	EXPECT_EQ(meta.classify().what, "dm-cache metadata");
	meta.put32(32, 27022010);
	EXPECT_EQ(meta.classify().what, "dm-thin metadata");
}

// ---------------------------------------------------------------------------
// libblkid's probe (a regular file is a valid probe target)

namespace {

// Runs a program quietly; false when it is missing or fails.
bool run_quietly(const std::string& command)
{
	return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
}

} // namespace

TEST(ControlProbe, NothingOnZeros)
{
	wbkit::testing::TempDir dir;
	const std::string image = dir.make_image("zero.img", 16 << 20);
	EXPECT_FALSE(probe_signature(image).has_value());
}

TEST(ControlProbe, NamesWhatMkfsMade)
{
	wbkit::testing::TempDir dir;
	struct Case {
		const char* name;
		const char* command; // {}: the image
		const char* type;
		bool table;
	};
	const Case cases[] = {
		{"ext4", "mkfs.ext4 -q -F {}", "ext4", false},
		{"swap", "mkswap {}", "swap", false},
		{"xfs", "mkfs.xfs -q -f {}", "xfs", false},
		{"f2fs", "mkfs.f2fs -q -f {}", "f2fs", false},
		{"gpt", "printf 'label: gpt\\n,8M\\n' | sfdisk -q {}", "gpt", true},
	};
	int ran = 0;
	for (const Case& c : cases) {
		const std::string image =
			dir.make_image(std::string(c.name) + ".img", std::string(c.name) == "xfs" ? 320 << 20 : 64 << 20);
		if (!run_quietly(fmt::format(fmt::runtime(c.command), image)))
			continue; // the tool is not installed here
		++ran;
		const auto found = probe_signature(image);
		ASSERT_TRUE(found.has_value()) << c.name;
		EXPECT_EQ(found->type, c.type);
		EXPECT_EQ(found->partition_table, c.table);
	}
	if (ran == 0)
		GTEST_SKIP() << "no mkfs tool installed";
	const std::string md = dir.make_image("md.img", 16 << 20);
	if (run_quietly(fmt::format("python3 {}/tests/vm/mkmd.py {} 1.2", WBKIT_SOURCE_DIR, md))) {
		const auto found = probe_signature(md);
		ASSERT_TRUE(found.has_value());
		EXPECT_EQ(describe(*found), "linux_raid_member 1.2");
	}
}

TEST(ControlProbe, MissingFile)
{
	EXPECT_THROW(probe_signature("/nonexistent/wbkit-probe"), IoError);
}

// ---------------------------------------------------------------------------
// Flush progress

TEST(ControlFlush, ProgressMath)
{
	WbState s{.current_id = 12, .last_flushed_id = 11, .last_writeback_id = 2, .dirty = 1000};
	const FlushGoal goal = flush_goal(status_of(s));
	EXPECT_EQ(goal.start_dirty, 1000u);
	EXPECT_EQ(goal.target_id, 12u);

	FlushProgress p = flush_progress(goal, status_of(s));
	EXPECT_EQ(p.segments_total, 10u);
	EXPECT_EQ(p.segments_done, 0u);
	EXPECT_FALSE(p.complete);
	EXPECT_EQ(p.total_bytes, 1000u * 4096);
	EXPECT_EQ(p.done_bytes, 0u);

	s.last_writeback_id = 7;
	s.current_id = 20; // new writes: the goal stays where it was
	s.dirty = 1400;
	p = flush_progress(goal, status_of(s));
	EXPECT_EQ(p.segments_done, 5u);
	EXPECT_DOUBLE_EQ(p.fraction, 0.5);
	EXPECT_EQ(p.done_bytes, 500u * 4096);
	EXPECT_EQ(p.dirty_left, 1400u);
	EXPECT_FALSE(p.complete);

	s.last_writeback_id = 12;
	p = flush_progress(goal, status_of(s));
	EXPECT_TRUE(p.complete); // everything dirty at the start is home
	EXPECT_EQ(p.done_bytes, p.total_bytes);

	s.last_writeback_id = 3;
	s.dirty = 0;
	EXPECT_TRUE(flush_progress(goal, status_of(s)).complete);
}

TEST(ControlFlush, NothingDirtySendsNoMessage)
{
	FakeSystem sys;
	sys.wb.dirty = 0;
	const FlushResult r = flush(sys, "wb", {});
	EXPECT_EQ(r.end, FlushResult::End::done);
	EXPECT_FALSE(sys.called("drop_caches"));
}

TEST(ControlFlush, MessageReturns)
{
	FakeSystem sys;
	sys.messages = {{3, 0}};
	std::vector<FlushProgress> seen;
	FlushOptions o;
	o.poll_interval = 100ms;
	o.progress = [&](const FlushProgress& p) { seen.push_back(p); };
	const FlushResult r = flush(sys, "wb", o);
	EXPECT_EQ(r.end, FlushResult::End::done);
	EXPECT_EQ(r.start_dirty, 500u);
	EXPECT_EQ(r.dirty_left, 0u);
	EXPECT_TRUE(sys.called("fsync wb"));
	ASSERT_FALSE(seen.empty());
	EXPECT_TRUE(seen.back().complete);
	EXPECT_EQ(sys.messages_stopped, 0);
}

TEST(ControlFlush, GoalReachedUnderNewWritesStopsUpstreamsMessage)
{
	// Upstream's drop_caches waits for no dirty block at all; writes keep
	// coming, but writeback passed every segment of the start.
	FakeSystem sys;
	sys.messages = {{-1, 0}};
	sys.on_status = [](WbState& s) {
		s.current_id += 1;
		s.last_writeback_id += 3;
		s.dirty = 40;
	};
	FlushOptions o;
	o.poll_interval = 100ms;
	const FlushResult r = flush(sys, "wb", o);
	EXPECT_EQ(r.end, FlushResult::End::done);
	EXPECT_EQ(sys.messages_stopped, 1);
}

TEST(ControlFlush, InterruptStopsTheMessageOnly)
{
	FakeSystem sys;
	sys.messages = {{-1, 0}};
	int asked = 0;
	FlushOptions o;
	o.interrupted = [&] { return ++asked > 3; };
	const FlushResult r = flush(sys, "wb", o);
	EXPECT_EQ(r.end, FlushResult::End::interrupted);
	EXPECT_EQ(sys.messages_stopped, 1);
	for (const std::string& c : sys.calls)
		EXPECT_TRUE(c.rfind("status", 0) == 0 || c.rfind("table", 0) == 0 || c.rfind("fsync", 0) == 0 ||
			    c.rfind("drop_caches", 0) == 0)
			<< c;
}

TEST(ControlFlush, TimeoutAndFailure)
{
	FakeSystem sys;
	sys.messages = {{-1, 0}};
	FlushOptions o;
	o.timeout = 2s;
	EXPECT_EQ(flush(sys, "wb", o).end, FlushResult::End::timed_out);

	FakeSystem busy;
	busy.messages = {{2, 1}};
	EXPECT_THROW(flush(busy, "wb", {}), DmsetupError);

	FakeSystem dead;
	dead.wb.wbkit = true;
	dead.wb.dead = true;
	EXPECT_THROW(flush(dead, "wb", {}), Error);
	EXPECT_FALSE(dead.called("drop_caches"));
}

// ---------------------------------------------------------------------------
// Detach

TEST(ControlDetach, CleanAfterTheFlush)
{
	FakeSystem sys;
	const SwitchResult r = detach(sys, "wb", quick());
	EXPECT_EQ(sys.live, "0 2097152 linear 254:0 0");
	EXPECT_FALSE(sys.suspended);
	EXPECT_FALSE(sys.inactive);
	EXPECT_EQ(r.attempts, 1u);
	EXPECT_EQ(r.stall, 45ms); // the fake's suspend and resume
	EXPECT_EQ(r.old_table, "0 2097152 writeboost 254:0 254:16");
	EXPECT_TRUE(sys.called("wipe 254:16"));
	EXPECT_FALSE(r.wipe_error);
	EXPECT_FALSE(sys.suspended_with_lockfs); // --nolockfs unless asked
	// Load (inactive), suspend, the write-back (the check), the wipe
	// while still suspended (the commit point: wbctl(8), CRASHES), resume
	// (the swap). A wipe after the resume would leave a moment where the
	// linear table writes the backing device and the old log, replayed
	// after a crash, would write older data over it.
	std::vector<std::string> tail(sys.calls.end() - 5, sys.calls.end());
	EXPECT_EQ(tail, (std::vector<std::string>{"load wb 0 2097152 linear 254:0 0", "suspend wb",
						  "drop_caches wb (suspended)", "wipe 254:16 held by wb (suspended)",
						  "resume wb"}));
}

TEST(ControlDetach, WritesAfterTheFlushWrittenBackWhileSuspended)
{
	FakeSystem sys;
	// The flush's message; then the suspend finds 30 new dirty blocks,
	// which the suspended drop_caches writes back.
	sys.messages = {{1, 0}, {2, 0}};
	sys.on_message_done = [&](WbState& s) {
		s.last_writeback_id = s.current_id;
		s.dirty = 0;
	};
	int statuses = 0;
	sys.on_status = [&](WbState& s) {
		if (++statuses == 4) { // after the flush: writes came in
			s.current_id += 1;
			s.dirty = 30;
		}
	};
	const SwitchResult r = detach(sys, "wb", quick());
	EXPECT_TRUE(sys.called("drop_caches wb (suspended)"));
	EXPECT_EQ(sys.live, "0 2097152 linear 254:0 0");
	EXPECT_EQ(r.attempts, 1u);
	EXPECT_FALSE(sys.suspended);
}

TEST(ControlDetach, TooSlowWhileSuspendedResumesAndFlushesAgain)
{
	FakeSystem sys;
	// Flush; suspended write-back that does not end in time; flush again;
	// the second suspend finds nothing dirty.
	sys.messages = {{1, 0}, {-1, 0}, {1, 0}};
	bool dirty_once = false;
	sys.on_status = [&](WbState& s) {
		if (!dirty_once && s.dirty == 0) {
			dirty_once = true;
			s.current_id += 1;
			s.dirty = 5000;
		}
	};
	SwitchOptions o = quick();
	o.max_stall = 500ms;
	const SwitchResult r = detach(sys, "wb", o);
	EXPECT_EQ(r.attempts, 2u);
	ASSERT_EQ(r.stalls.size(), 2u);
	EXPECT_GE(r.stalls[0], 500ms);
	EXPECT_EQ(sys.messages_stopped, 1);
	EXPECT_EQ(sys.live, "0 2097152 linear 254:0 0");
	// The way back to the writeboost table cleared the loaded linear one
	// before it resumed (a resume would have swapped it in).
	auto first_suspend = std::find(sys.calls.begin(), sys.calls.end(), "suspend wb");
	auto clear = std::find(first_suspend, sys.calls.end(), "clear wb");
	auto resume = std::find(first_suspend, sys.calls.end(), "resume wb");
	EXPECT_LT(clear, resume);
	// The cache is wiped once, in the second suspend only: the first one
	// went back to the writeboost table, which still uses it.
	auto wipe = std::find(first_suspend, sys.calls.end(), "wipe 254:16 held by wb (suspended)");
	EXPECT_GT(wipe, resume);
	EXPECT_EQ(std::count_if(sys.calls.begin(), sys.calls.end(),
				[](const std::string& c) { return c.rfind("wipe", 0) == 0; }),
		  1);
}

TEST(ControlSwitchCrash, WhichDeviceAfterACrash)
{
	std::array<std::byte, 512> magic{}, zero{}, other{};
	write_superblock_magic(magic);
	other[0] = std::byte{0x74}; // one byte of the magic is not the magic
	using D = SwitchCrashDevice;
	// detach: the old cache while it has the magic, else the backing device.
	EXPECT_EQ(device_after_switch_crash(magic), D::old_cache);
	EXPECT_EQ(device_after_switch_crash(zero), D::backing);
	EXPECT_EQ(device_after_switch_crash(other), D::backing);
	// replace-cache: the new cache once formatted, whatever the old holds.
	EXPECT_EQ(device_after_switch_crash(magic, zero), D::old_cache);
	EXPECT_EQ(device_after_switch_crash(magic, magic), D::new_cache);
	EXPECT_EQ(device_after_switch_crash(zero, magic), D::new_cache);
	EXPECT_EQ(device_after_switch_crash(zero, zero), D::backing);
	EXPECT_EQ(device_after_switch_crash(std::span<const std::byte>(magic).first(3)), D::backing);
	EXPECT_STREQ(switch_crash_device_name(D::old_cache), "old-cache");
	EXPECT_STREQ(switch_crash_device_name(D::new_cache), "new-cache");
	EXPECT_STREQ(switch_crash_device_name(D::backing), "backing");
}

TEST(ControlDetach, AttemptsRunOutLeavesTheDeviceAsItWas)
{
	FakeSystem sys;
	sys.messages.assign(20, {-1, 0});
	for (std::size_t i = 0; i < sys.messages.size(); i += 2)
		sys.messages[i] = {1, 0}; // the flushes end, the suspended write-backs do not
	sys.on_status = [](WbState& s) {
		if (s.dirty == 0) {
			s.current_id += 1;
			s.dirty = 5000;
		}
	};
	SwitchOptions o = quick();
	o.attempts = 3;
	o.max_stall = 300ms;
	EXPECT_THROW(detach(sys, "wb", o), Error);
	EXPECT_EQ(sys.live, "0 2097152 writeboost 254:0 254:16");
	EXPECT_FALSE(sys.suspended);
	EXPECT_FALSE(sys.inactive);
	EXPECT_FALSE(sys.called("wipe"));
}

TEST(ControlDetach, LoadFailsBeforeAnySuspend)
{
	FakeSystem sys;
	sys.fail_load = true;
	EXPECT_THROW(detach(sys, "wb", quick()), Error);
	EXPECT_EQ(sys.live, "0 2097152 writeboost 254:0 254:16");
	EXPECT_FALSE(sys.called("suspend"));
	EXPECT_FALSE(sys.called("wipe"));
}

TEST(ControlDetach, SuspendedWriteBackFailsClearsAndResumes)
{
	FakeSystem sys;
	sys.wb.wbkit = true;
	// The flush; then the suspended drop_caches fails (-EIO of a target
	// that died).
	sys.messages = {{1, 0}, {1, 1}};
	EXPECT_THROW(detach(sys, "wb", quick()), Error);
	EXPECT_EQ(sys.live, "0 2097152 writeboost 254:0 254:16");
	EXPECT_FALSE(sys.suspended);
	EXPECT_FALSE(sys.inactive);
}

TEST(ControlDetach, FlushRoundsUntilLittleIsLeft)
{
	FakeSystem sys;
	// Each flush leaves what was written during it: fewer each round.
	std::deque<std::uint64_t> left{400, 100, 20};
	sys.on_message_done = [&](WbState& s) {
		s.last_writeback_id = s.current_id;
		s.current_id += 1;
		s.dirty = left.empty() ? 0 : left.front();
		if (!left.empty())
			left.pop_front();
	};
	SwitchOptions o = quick();
	o.flush_rounds = 4;
	const SwitchResult r = detach(sys, "wb", o);
	int flushes = 0;
	for (const std::string& c : sys.calls)
		flushes += c == "fsync wb";
	EXPECT_EQ(flushes, 3); // 500 -> 400 -> 100 -> 20, small enough
	EXPECT_EQ(sys.live, "0 2097152 linear 254:0 0");
}

TEST(ControlDetach, SuspendFailsResumes)
{
	FakeSystem sys;
	sys.fail_suspend = true;
	EXPECT_THROW(detach(sys, "wb", quick()), Error);
	EXPECT_EQ(sys.calls.back(), "resume wb");
	EXPECT_EQ(sys.live, "0 2097152 writeboost 254:0 254:16");
}

TEST(ControlDetach, RefusesDeadAndOtherTargets)
{
	FakeSystem dead;
	dead.wb.wbkit = true;
	dead.wb.dead = true;
	EXPECT_THROW(detach(dead, "wb", quick()), Error);
	EXPECT_FALSE(dead.called("suspend"));

	FakeSystem linear;
	linear.live = "0 100 linear 254:0 0";
	EXPECT_THROW(detach(linear, "wb", quick()), Error);
	EXPECT_FALSE(linear.called("suspend"));
}

TEST(ControlDetach, InterruptedFlushThrowsBeforeAnySuspend)
{
	FakeSystem sys;
	sys.messages = {{-1, 0}};
	SwitchOptions o = quick();
	o.flush.interrupted = [] { return true; };
	EXPECT_THROW(detach(sys, "wb", o), InterruptedError);
	EXPECT_FALSE(sys.called("suspend"));
}

TEST(ControlDetach, WipeFailureIsReportedNotThrown)
{
	FakeSystem sys;
	sys.fail_wipe = true;
	const SwitchResult r = detach(sys, "wb", quick());
	EXPECT_EQ(sys.live, "0 2097152 linear 254:0 0");
	ASSERT_TRUE(r.wipe_error);
}

// ---------------------------------------------------------------------------
// Attach

TEST(ControlAttach, LinearToWriteboost)
{
	FakeSystem sys;
	sys.live = "0 2097152 linear 254:0 0";
	std::string checked;
	AttachRequest req{.cache = "/dev/vdb", .cache_devno = "254:16", .args = {{"writeback_threshold", "70"}}, .check_cache = {}};
	req.check_cache = [&](const std::string& backing) { checked = backing; };
	const SwitchResult r = attach(sys, "wb", req, quick());
	EXPECT_EQ(checked, "254:0");
	EXPECT_EQ(sys.live, "0 2097152 writeboost 254:0 /dev/vdb 2 writeback_threshold 70");
	EXPECT_EQ(r.stall, 45ms);
	EXPECT_FALSE(sys.suspended);
	std::vector<std::string> tail(sys.calls.end() - 3, sys.calls.end());
	EXPECT_EQ(tail[0].rfind("load wb 0 2097152 writeboost", 0), 0u);
	EXPECT_EQ(tail[1], "suspend wb");
	EXPECT_EQ(tail[2], "resume wb");
}

TEST(ControlAttach, RefusesWhatIsNotAWholeLinearMapping)
{
	AttachRequest req{.cache = "/dev/vdb", .cache_devno = "254:16", .args = {}, .check_cache = {}};
	FakeSystem wb;
	EXPECT_THROW(attach(wb, "wb", req, quick()), Error);
	FakeSystem offset;
	offset.live = "0 1000 linear 254:0 8";
	EXPECT_THROW(attach(offset, "wb", req, quick()), Error);
	FakeSystem part;
	part.live = "0 1000 linear 254:0 0";
	EXPECT_THROW(attach(part, "wb", req, quick()), Error);
	FakeSystem same;
	same.live = "0 2097152 linear 254:16 0";
	EXPECT_THROW(attach(same, "wb", req, quick()), RefusedError);
	for (FakeSystem* s : {&wb, &offset, &part, &same})
		EXPECT_FALSE(s->called("load") || s->called("suspend"));
}

TEST(ControlAttach, CheckRefusalChangesNothing)
{
	FakeSystem sys;
	sys.live = "0 2097152 linear 254:0 0";
	AttachRequest req{.cache = "/dev/vdb", .cache_devno = "254:16", .args = {}, .check_cache = {}};
	req.check_cache = [](const std::string&) { throw RefusedError("holds an ext2/3/4 file system"); };
	EXPECT_THROW(attach(sys, "wb", req, quick()), RefusedError);
	EXPECT_FALSE(sys.called("load"));
}

TEST(ControlAttach, TargetRefusesTheTable)
{
	FakeSystem sys;
	sys.live = "0 2097152 linear 254:0 0";
	sys.fail_load = true;
	AttachRequest req{.cache = "/dev/vdb", .cache_devno = "254:16", .args = {}, .check_cache = {}};
	EXPECT_THROW(attach(sys, "wb", req, quick()), Error);
	EXPECT_EQ(sys.live, "0 2097152 linear 254:0 0");
	EXPECT_FALSE(sys.called("suspend"));
	EXPECT_FALSE(sys.suspended);
}

TEST(ControlAttach, FailedResumePutsTheLinearTableBack)
{
	FakeSystem sys;
	sys.live = "0 2097152 linear 254:0 0";
	sys.fail_resumes = 1;
	sys.resume_swaps_on_failure = true;
	AttachRequest req{.cache = "/dev/vdb", .cache_devno = "254:16", .args = {}, .check_cache = {}};
	EXPECT_THROW(attach(sys, "wb", req, quick()), Error);
	EXPECT_EQ(sys.live, "0 2097152 linear 254:0 0");
	EXPECT_FALSE(sys.suspended);
}

// ---------------------------------------------------------------------------
// Replace-cache

namespace {

ReplaceRequest new_cache(std::string* checked = nullptr)
{
	ReplaceRequest req{.cache = "/dev/vdc", .cache_devno = "254:32", .check_cache = {}};
	req.check_cache = [checked](const std::string& backing, const std::string& old_cache) {
		if (checked)
			*checked = backing + " " + old_cache;
	};
	return req;
}

constexpr const char* replaced = "0 2097152 writeboost 254:0 /dev/vdc 2 writeback_threshold 70";

} // namespace

TEST(ControlReplace, SameOptionsNewCacheOneSuspend)
{
	FakeSystem sys;
	sys.wb.wbkit = true; // loaded before the suspend (upstream's order: below)
	sys.live = "0 2097152 writeboost 254:0 254:16 2 writeback_threshold 70";
	sys.wb.writeback_threshold = 70;
	std::string checked;
	const SwitchResult r = replace_cache(sys, "wb", new_cache(&checked), quick());
	EXPECT_EQ(checked, "254:0 254:16");
	EXPECT_EQ(sys.live, replaced);
	EXPECT_FALSE(sys.suspended);
	EXPECT_FALSE(sys.inactive);
	EXPECT_TRUE(r.drained);
	EXPECT_EQ(r.stalls.size(), 1u);
	EXPECT_EQ(r.old_table, "0 2097152 writeboost 254:0 254:16 2 writeback_threshold 70");
	EXPECT_FALSE(sys.suspended_with_lockfs);
	// Loaded before the suspend; the suspended write-back; the old cache
	// wiped while still suspended; the resume swaps (and formats the new
	// cache).
	std::vector<std::string> tail(sys.calls.end() - 5, sys.calls.end());
	EXPECT_EQ(tail, (std::vector<std::string>{std::string("load wb ") + replaced, "suspend wb",
						  "drop_caches wb (suspended)", "wipe 254:16 held by wb (suspended)",
						  "resume wb"}));
	const std::string doc = switch_result_json("replace-cache", "wb", r);
	EXPECT_NE(doc.find("\"cache_wiped\": true"), std::string::npos);
	EXPECT_NE(doc.find("\"flush\""), std::string::npos);
}

TEST(ControlReplace, TunablesAsTheTargetRunsThem)
{
	// A message set writeback_threshold since: upstream's table still
	// shows the typed value, and a key the line did not give shows nowhere
	// but in the status.
	WbTarget t;
	t.table = parse_wb_table("254:0 254:16 6 writeback_threshold 70 nr_read_cache_cells 64 writeback_threshold 70");
	t.status = status_of(WbState{.writeback_threshold = 30});
	EXPECT_EQ(live_table_args(t), (std::vector<std::pair<std::string, std::string>>{
					      {"writeback_threshold", "30"}, {"nr_read_cache_cells", "64"}, {"writeback_threshold", "30"}}));
	t.table = parse_wb_table("254:0 254:16");
	EXPECT_EQ(live_table_args(t),
		  (std::vector<std::pair<std::string, std::string>>{{"writeback_threshold", "30"}}));
	t.status = status_of(WbState{});
	EXPECT_TRUE(live_table_args(t).empty()); // 0 is the default: nothing to write

	FakeSystem sys;
	sys.wb.writeback_threshold = 30;
	replace_cache(sys, "wb", new_cache(), quick());
	EXPECT_EQ(sys.live, "0 2097152 writeboost 254:0 /dev/vdc 2 writeback_threshold 30");
}

TEST(ControlReplace, KeepCacheAndWipeFailure)
{
	FakeSystem keep;
	SwitchOptions o = quick();
	o.wipe_cache = false;
	const SwitchResult kept = replace_cache(keep, "wb", new_cache(), o);
	EXPECT_FALSE(keep.called("wipe"));
	EXPECT_FALSE(kept.cache_wiped);
	EXPECT_NE(switch_result_json("replace-cache", "wb", kept).find("\"cache_wiped\": false"), std::string::npos);

	FakeSystem busy;
	busy.fail_wipe = true;
	const SwitchResult r = replace_cache(busy, "wb", new_cache(), quick());
	EXPECT_EQ(busy.live, "0 2097152 writeboost 254:0 /dev/vdc");
	ASSERT_TRUE(r.wipe_error);
}

TEST(ControlReplace, RefusesTheOldCacheTheBackingAndACheckRefusal)
{
	ReplaceRequest same = new_cache();
	same.cache_devno = "254:16";
	FakeSystem a;
	EXPECT_THROW(replace_cache(a, "wb", same, quick()), RefusedError);
	ReplaceRequest backing = new_cache();
	backing.cache_devno = "254:0";
	FakeSystem b;
	EXPECT_THROW(replace_cache(b, "wb", backing, quick()), RefusedError);
	ReplaceRequest refused = new_cache();
	refused.check_cache = [](const std::string&, const std::string&) { throw RefusedError("holds XFS"); };
	FakeSystem c;
	EXPECT_THROW(replace_cache(c, "wb", refused, quick()), RefusedError);
	for (FakeSystem* s : {&a, &b, &c}) {
		EXPECT_FALSE(s->called("load") || s->called("suspend") || s->called("drop_caches"));
		EXPECT_EQ(s->live, "0 2097152 writeboost 254:0 254:16");
	}
}

TEST(ControlReplace, RefusesDeadLinearAndInterrupted)
{
	FakeSystem dead;
	dead.wb.wbkit = true;
	dead.wb.dead = true;
	EXPECT_THROW(replace_cache(dead, "wb", new_cache(), quick()), Error);
	EXPECT_FALSE(dead.called("suspend"));

	FakeSystem linear;
	linear.live = "0 100 linear 254:0 0";
	EXPECT_THROW(replace_cache(linear, "wb", new_cache(), quick()), Error);
	EXPECT_FALSE(linear.called("load"));

	FakeSystem sys;
	sys.messages = {{-1, 0}};
	SwitchOptions o = quick();
	o.flush.interrupted = [] { return true; };
	EXPECT_THROW(replace_cache(sys, "wb", new_cache(), o), InterruptedError);
	EXPECT_FALSE(sys.called("suspend"));
	EXPECT_FALSE(sys.called("load"));
}

TEST(ControlReplace, UpstreamLoadsOnlyAfterTheWriteBack)
{
	// Upstream formats the new cache in its constructor: loaded before
	// the write-back, a crash would find a formatted new cache (the rule
	// picks it) while the old one still held dirty blocks.
	FakeSystem sys;
	const SwitchResult r = replace_cache(sys, "wb", new_cache(), quick());
	EXPECT_EQ(sys.live, "0 2097152 writeboost 254:0 /dev/vdc");
	EXPECT_TRUE(r.cache_wiped);
	std::vector<std::string> tail(sys.calls.end() - 5, sys.calls.end());
	EXPECT_EQ(tail, (std::vector<std::string>{"suspend wb", "drop_caches wb (suspended)",
						  "load wb 0 2097152 writeboost 254:0 /dev/vdc",
						  "wipe 254:16 held by wb (suspended)", "resume wb"}));
}

TEST(ControlReplace, TargetRefusesTheNewTable)
{
	FakeSystem sys;
	sys.wb.wbkit = true;
	sys.fail_load = true;
	EXPECT_THROW(replace_cache(sys, "wb", new_cache(), quick()), Error);
	EXPECT_EQ(sys.live, "0 2097152 writeboost 254:0 254:16");
	EXPECT_FALSE(sys.called("suspend"));
	EXPECT_FALSE(sys.called("wipe"));

	// Upstream refuses it while suspended, written back: the old table
	// resumes, its cache not wiped (the load comes first).
	FakeSystem up;
	up.fail_load = true;
	EXPECT_THROW(replace_cache(up, "wb", new_cache(), quick()), Error);
	EXPECT_EQ(up.live, "0 2097152 writeboost 254:0 254:16");
	EXPECT_FALSE(up.suspended);
	EXPECT_FALSE(up.called("wipe"));
}

TEST(ControlReplace, SuspendFailsClearsAndResumes)
{
	FakeSystem sys;
	sys.fail_suspend = true;
	EXPECT_THROW(replace_cache(sys, "wb", new_cache(), quick()), Error);
	EXPECT_EQ(sys.live, "0 2097152 writeboost 254:0 254:16");
	EXPECT_FALSE(sys.inactive);
	EXPECT_EQ(sys.calls.back(), "resume wb");
	EXPECT_FALSE(sys.called("wipe"));
}

TEST(ControlReplace, SuspendedWriteBackFailsClearsAndResumes)
{
	FakeSystem sys;
	sys.wb.wbkit = true;
	sys.messages = {{1, 0}, {1, 1}};
	EXPECT_THROW(replace_cache(sys, "wb", new_cache(), quick()), Error);
	EXPECT_EQ(sys.live, "0 2097152 writeboost 254:0 254:16");
	EXPECT_FALSE(sys.suspended);
	EXPECT_FALSE(sys.inactive);
	EXPECT_FALSE(sys.called("wipe"));
}

TEST(ControlReplace, TooSlowWhileSuspendedPutsTheOldTableBackAndRetries)
{
	FakeSystem sys;
	sys.wb.wbkit = true;
	sys.messages = {{1, 0}, {-1, 0}, {1, 0}};
	bool dirty_once = false;
	sys.on_status = [&](WbState& s) {
		if (!dirty_once && s.dirty == 0) {
			dirty_once = true;
			s.current_id += 1;
			s.dirty = 5000;
		}
	};
	SwitchOptions o = quick();
	o.max_stall = 500ms;
	const SwitchResult r = replace_cache(sys, "wb", new_cache(), o);
	EXPECT_EQ(r.attempts, 2u);
	EXPECT_EQ(r.stalls.size(), 2u);
	EXPECT_EQ(sys.live, "0 2097152 writeboost 254:0 /dev/vdc");
	auto first_suspend = std::find(sys.calls.begin(), sys.calls.end(), "suspend wb");
	EXPECT_LT(std::find(first_suspend, sys.calls.end(), "clear wb"),
		  std::find(first_suspend, sys.calls.end(), "resume wb"));
	// Loaded twice: once per attempt.
	int loads = 0;
	for (const std::string& c : sys.calls)
		loads += c.rfind("load wb", 0) == 0;
	EXPECT_EQ(loads, 2);
}

TEST(ControlReplace, AttemptsRunOutLeavesTheOldTable)
{
	FakeSystem sys;
	sys.messages.assign(20, {-1, 0});
	for (std::size_t i = 0; i < sys.messages.size(); i += 2)
		sys.messages[i] = {1, 0};
	sys.on_status = [](WbState& s) {
		if (s.dirty == 0) {
			s.current_id += 1;
			s.dirty = 5000;
		}
	};
	SwitchOptions o = quick();
	o.attempts = 2;
	o.max_stall = 300ms;
	EXPECT_THROW(replace_cache(sys, "wb", new_cache(), o), Error);
	EXPECT_EQ(sys.live, "0 2097152 writeboost 254:0 254:16");
	EXPECT_FALSE(sys.suspended);
	EXPECT_FALSE(sys.inactive);
	EXPECT_FALSE(sys.called("wipe"));
}

TEST(ControlReplace, FailedResumePutsTheOldTableBack)
{
	// dm swapped the tables, then the new instance's preresume (the format
	// of the new cache) failed.
	FakeSystem sys;
	sys.fail_resumes = 1;
	sys.resume_swaps_on_failure = true;
	EXPECT_THROW(replace_cache(sys, "wb", new_cache(), quick()), Error);
	EXPECT_EQ(sys.live, "0 2097152 writeboost 254:0 254:16");
	EXPECT_FALSE(sys.suspended);
	EXPECT_FALSE(sys.inactive);
	// The old cache was wiped before the resume: the old table's new
	// instance formats it (nothing was dirty on it).
	EXPECT_TRUE(sys.called("wipe 254:16 held by wb (suspended)"));
	// The old table went back only after the suspended write-back.
	auto wb = std::find(sys.calls.begin(), sys.calls.end(), "drop_caches wb (suspended)");
	EXPECT_NE(std::find(wb, sys.calls.end(), "load wb 0 2097152 writeboost 254:0 254:16"), sys.calls.end());
}

TEST(ControlReplace, FailedResumeAndFailedWayBackSaySo)
{
	FakeSystem sys;
	sys.fail_resumes = 2;
	sys.resume_swaps_on_failure = true;
	try {
		replace_cache(sys, "wb", new_cache(), quick());
		FAIL() << "no error";
	} catch (const Error& e) {
		EXPECT_NE(std::string(e.what()).find("putting the old table back failed too"), std::string::npos)
			<< e.what();
	}
}

// ---------------------------------------------------------------------------
// Mode

TEST(ControlMode, WriteAroundKeepsEveryOtherOptionAndFlushesFirst)
{
	FakeSystem sys;
	sys.wb.wbkit = true;
	sys.wb.writeback_threshold = 70;
	sys.wb.read_cache_threshold = 8;
	sys.live = "0 2097152 writeboost 254:0 254:16 4 writeback_threshold 70 read_cache_threshold 8";
	const SwitchResult r = set_mode(sys, "wb", true, quick());
	EXPECT_TRUE(r.changed);
	EXPECT_EQ(*r.mode, "write-around");
	EXPECT_EQ(sys.live, "0 2097152 writeboost 254:0 254:16 6 writeback_threshold 70 read_cache_threshold 8 "
			    "write_around_mode 1");
	EXPECT_TRUE(sys.called("drop_caches wb (suspended)"));
	EXPECT_FALSE(sys.called("wipe"));
	// dm-wbkit: loaded before the suspend (its constructor only reads).
	auto load = std::find_if(sys.calls.begin(), sys.calls.end(), [](const std::string& c) { return c.rfind("load", 0) == 0; });
	EXPECT_LT(load, std::find(sys.calls.begin(), sys.calls.end(), "suspend wb"));
	EXPECT_FALSE(sys.suspended);
	EXPECT_FALSE(sys.inactive);
}

TEST(ControlMode, BackToWriteBackReplacesTheKey)
{
	FakeSystem sys;
	sys.wb.wbkit = true;
	sys.wb.dirty = 0;
	sys.wb.writeback_threshold = 70;
	sys.live = "0 2097152 writeboost 254:0 254:16 4 write_around_mode 1 writeback_threshold 70";
	const SwitchResult r = set_mode(sys, "wb", false, quick());
	EXPECT_TRUE(r.changed);
	EXPECT_EQ(sys.live, "0 2097152 writeboost 254:0 254:16 4 writeback_threshold 70 write_around_mode 0");
}

TEST(ControlMode, AlreadyInThatModeChangesNothing)
{
	FakeSystem sys;
	const SwitchResult r = set_mode(sys, "wb", false, quick());
	EXPECT_FALSE(r.changed);
	EXPECT_EQ(r.new_table, r.old_table);
	EXPECT_FALSE(sys.called("drop_caches") || sys.called("suspend") || sys.called("load"));

	FakeSystem wa;
	wa.live = "0 2097152 writeboost 254:0 254:16 2 WRITE_AROUND_MODE 1";
	EXPECT_FALSE(set_mode(wa, "wb", true, quick()).changed);
	EXPECT_FALSE(wa.called("suspend"));
	const std::string doc = switch_result_json("mode", "wb", set_mode(wa, "wb", true, quick()));
	EXPECT_NE(doc.find("\"changed\": false"), std::string::npos);
}

TEST(ControlMode, UpstreamLoadsOnlyWhenSuspendedAndWrittenBack)
{
	// dm-writeboost's constructor formats (write-around) or replays the
	// cache the live instance uses: not before the old one is quiet.
	FakeSystem sys;
	const SwitchResult r = set_mode(sys, "wb", true, quick());
	EXPECT_EQ(sys.live, "0 2097152 writeboost 254:0 254:16 2 write_around_mode 1");
	std::vector<std::string> tail(sys.calls.end() - 4, sys.calls.end());
	EXPECT_EQ(tail, (std::vector<std::string>{"suspend wb", "drop_caches wb (suspended)",
						  "load wb 0 2097152 writeboost 254:0 254:16 2 write_around_mode 1",
						  "resume wb"}));
	EXPECT_EQ(r.stalls.size(), 1u);
}

TEST(ControlMode, UpstreamLoadFailureResumesTheOldTable)
{
	FakeSystem sys;
	sys.fail_load = true;
	EXPECT_THROW(set_mode(sys, "wb", true, quick()), Error);
	EXPECT_EQ(sys.live, "0 2097152 writeboost 254:0 254:16");
	EXPECT_FALSE(sys.suspended);
	EXPECT_FALSE(sys.inactive);
}

TEST(ControlMode, UpstreamTooSlowWhileSuspendedLoadsNothing)
{
	FakeSystem sys;
	sys.messages = {{1, 0}, {-1, 0}, {1, 0}};
	bool dirty_once = false;
	sys.on_status = [&](WbState& s) {
		if (!dirty_once && s.dirty == 0) {
			dirty_once = true;
			s.current_id += 1;
			s.dirty = 5000;
		}
	};
	SwitchOptions o = quick();
	o.max_stall = 500ms;
	const SwitchResult r = set_mode(sys, "wb", true, o);
	EXPECT_EQ(r.attempts, 2u);
	EXPECT_FALSE(sys.called("clear")); // nothing was loaded in the first suspend
	int loads = 0;
	for (const std::string& c : sys.calls)
		loads += c.rfind("load wb", 0) == 0;
	EXPECT_EQ(loads, 1);
	EXPECT_EQ(sys.live, "0 2097152 writeboost 254:0 254:16 2 write_around_mode 1");
}

TEST(ControlMode, FailedResumePutsTheOldTableBack)
{
	FakeSystem sys;
	sys.wb.wbkit = true;
	sys.fail_resumes = 1;
	sys.resume_swaps_on_failure = true;
	EXPECT_THROW(set_mode(sys, "wb", true, quick()), Error);
	EXPECT_EQ(sys.live, "0 2097152 writeboost 254:0 254:16");
	EXPECT_FALSE(sys.suspended);
}

TEST(ControlMode, SuspendAndWriteBackFailuresLeaveTheOldTable)
{
	FakeSystem suspend;
	suspend.wb.wbkit = true;
	suspend.fail_suspend = true;
	EXPECT_THROW(set_mode(suspend, "wb", true, quick()), Error);
	FakeSystem message;
	message.wb.wbkit = true;
	message.messages = {{1, 0}, {1, 1}};
	EXPECT_THROW(set_mode(message, "wb", true, quick()), Error);
	for (FakeSystem* s : {&suspend, &message}) {
		EXPECT_EQ(s->live, "0 2097152 writeboost 254:0 254:16");
		EXPECT_FALSE(s->suspended);
		EXPECT_FALSE(s->inactive);
	}
}

TEST(ControlMode, UpstreamWriteAroundWithReadCachingIsNotSwitchedBack)
{
	FakeSystem sys;
	sys.live = "0 2097152 writeboost 254:0 254:16 4 write_around_mode 1 read_cache_threshold 8";
	EXPECT_THROW(set_mode(sys, "wb", false, quick()), RefusedError);
	EXPECT_FALSE(sys.called("load") || sys.called("suspend"));
	// dm-wbkit distrusts those copies itself: switched.
	FakeSystem wk;
	wk.wb.wbkit = true;
	wk.live = sys.live;
	EXPECT_TRUE(set_mode(wk, "wb", false, quick()).changed);
}

TEST(ControlMode, RefusesDeadAndLinear)
{
	FakeSystem dead;
	dead.wb.wbkit = true;
	dead.wb.dead = true;
	EXPECT_THROW(set_mode(dead, "wb", true, quick()), Error);
	EXPECT_FALSE(dead.called("suspend"));
	FakeSystem linear;
	linear.live = "0 100 linear 254:0 0";
	EXPECT_THROW(set_mode(linear, "wb", true, quick()), Error);
}

TEST(ControlJson, Documents)
{
	SwitchResult r;
	r.stall = 120ms;
	r.stalls = {120ms};
	r.old_table = "0 8 writeboost 254:0 254:16";
	r.new_table = "0 8 linear 254:0 0";
	r.cache_wiped = true;
	const std::string doc = switch_result_json("detach", "wb", r);
	EXPECT_NE(doc.find("\"schema\": \"wbctl/1\""), std::string::npos);
	EXPECT_NE(doc.find("\"stall_ms\": 120"), std::string::npos);
	EXPECT_NE(doc.find("\"cache_wiped\": true"), std::string::npos);
}

// ---------------------------------------------------------------------------
// Create

namespace {

CreateRequest create_request(std::optional<std::string> cache, std::uint64_t sectors = 409600)
{
	return {.backing = "/dev/vdb",
		.cache = std::move(cache),
		.args = {{"writeback_threshold", "70"}},
		.check_devices = [sectors] { return sectors; }};
}

} // namespace

TEST(ControlCreate, WriteboostTableFromTheCheckedSize)
{
	FakeSystem sys;
	sys.present = false;
	sys.wb.dirty = 17; // what the target replayed
	const CreateResult r = create(sys, "wb", create_request("/dev/vdc"));
	EXPECT_EQ(r.table, "0 409600 writeboost /dev/vdb /dev/vdc 2 writeback_threshold 70");
	EXPECT_TRUE(sys.called("create wb 0 409600 writeboost /dev/vdb /dev/vdc 2 writeback_threshold 70"));
	EXPECT_EQ(r.dirty_blocks, 17u);
	EXPECT_FALSE(sys.called("remove"));
}

TEST(ControlCreate, LinearWithoutACache)
{
	FakeSystem sys;
	sys.present = false;
	CreateRequest request = create_request(std::nullopt);
	request.args.clear();
	const CreateResult r = create(sys, "wb", request);
	EXPECT_EQ(r.table, "0 409600 linear /dev/vdb 0");
	EXPECT_FALSE(r.dirty_blocks);
	// What attach takes: one linear target over the whole device from 0.
	EXPECT_TRUE(parse_linear_params("/dev/vdb 0"));
}

TEST(ControlCreate, RefusesAnExistingNameBeforeTheCheck)
{
	FakeSystem sys;
	bool checked = false;
	CreateRequest request = create_request("/dev/vdc");
	request.check_devices = [&] {
		checked = true;
		return std::uint64_t(8);
	};
	EXPECT_THROW(create(sys, "wb", request), Error);
	EXPECT_FALSE(checked);
	EXPECT_FALSE(sys.called("create"));
	EXPECT_THROW(create(sys, "a/b", request), UsageError);
}

TEST(ControlCreate, CheckRefusalCreatesNothing)
{
	FakeSystem sys;
	sys.present = false;
	CreateRequest request = create_request("/dev/vdc");
	request.check_devices = []() -> std::uint64_t { throw RefusedError("/dev/vdc holds an XFS file system"); };
	EXPECT_THROW(create(sys, "wb", request), RefusedError);
	EXPECT_FALSE(sys.called("create"));
}

TEST(ControlCreate, FailedCreateLeavesNoDevice)
{
	FakeSystem sys;
	sys.present = false;
	sys.fail_create = true;
	EXPECT_THROW(create(sys, "wb", create_request("/dev/vdc")), Error);
	EXPECT_FALSE(sys.called("remove")); // dmsetup removed it itself

	FakeSystem left;
	left.present = false;
	left.fail_create = true;
	left.create_leaves_device = true;
	try {
		create(left, "wb", create_request("/dev/vdc"));
		FAIL() << "no throw";
	} catch (const Error& e) {
		EXPECT_NE(std::string(e.what()).find("was removed"), std::string::npos) << e.what();
	}
	EXPECT_TRUE(left.called("remove wb"));
	EXPECT_FALSE(left.present);

	FakeSystem stuck;
	stuck.present = false;
	stuck.fail_create = true;
	stuck.create_leaves_device = true;
	stuck.fail_remove = true;
	try {
		create(stuck, "wb", create_request("/dev/vdc"));
		FAIL() << "no throw";
	} catch (const Error& e) {
		EXPECT_NE(std::string(e.what()).find("run `dmsetup remove wb`"), std::string::npos) << e.what();
	}
}

TEST(ControlCreate, WritebooststabLine)
{
	EXPECT_EQ(writeboosttab_line("wb", "/dev/disk/by-id/a", "/dev/disk/by-id/b", {}),
		  "wb\t/dev/disk/by-id/a\t/dev/disk/by-id/b");
	EXPECT_EQ(writeboosttab_line("wb", "UUID=1-2", "/dev/vdc", {{"writeback_threshold", "70"}, {"sync_data_interval", "5"}}),
		  "wb\tUUID=1-2\t/dev/vdc\twriteback_threshold=70,sync_data_interval=5");
	// The file's options are messages: fixed ones cannot be given there.
	EXPECT_THROW(writeboosttab_line("wb", "/dev/vdb", "/dev/vdc", {{"write_around_mode", "1"}}), UsageError);
	EXPECT_THROW(writeboosttab_line("wb", "/dev/vdb", "/dev/vdc", {{"nr_read_cache_cells", "8"}}), UsageError);
	EXPECT_THROW(writeboosttab_line("w b", "/dev/vdb", "/dev/vdc", {}), UsageError);
	EXPECT_THROW(writeboosttab_line("wb", "/dev/vdb#x", "/dev/vdc", {}), UsageError);
}

TEST(ControlCreate, WriteboosttabAppend)
{
	wbkit::testing::TempDir dir;
	const std::string tab = (dir.path() / "writeboosttab").string();
	check_writeboosttab(tab, "wb"); // no file: names nothing
	append_writeboosttab(tab, "wb", "wb\t/dev/vdb\t/dev/vdc");
	{
		std::ofstream out(tab, std::ios::app);
		out << "# a comment naming wb2\nother /dev/vdd /dev/vde"; // no final newline
	}
	append_writeboosttab(tab, "wb2", "wb2\t/dev/vdf\t/dev/vdg");
	std::ifstream in(tab);
	const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
	EXPECT_EQ(text, "wb\t/dev/vdb\t/dev/vdc\n# a comment naming wb2\nother /dev/vdd /dev/vde\nwb2\t/dev/vdf\t/dev/vdg\n");
	EXPECT_THROW(check_writeboosttab(tab, "other"), RefusedError);
	EXPECT_THROW(append_writeboosttab(tab, "wb", "wb\t/dev/x\t/dev/y"), RefusedError);
	std::ifstream again(tab);
	const std::string after((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>());
	EXPECT_EQ(after, text);
}

TEST(ControlJson, CreateDocument)
{
	CreateCheck check;
	check.backing_devno = "254:16";
	check.backing_sectors = 409600;
	check.cache.emplace();
	check.cache->devno = "254:32";
	check.cache->bytes = 64 << 20;
	check.cache->content = {CacheContent::Kind::writeboost, "a writeboost cache"};
	check.replay_dirty_blocks = 40;
	CreateResult r;
	r.table = "0 409600 writeboost /dev/vdb /dev/vdc";
	r.took = 30ms;
	r.dirty_blocks = 40;
	const std::string doc = create_result_json("wb", r, check, std::string("/etc/writeboosttab"));
	EXPECT_NE(doc.find("\"command\": \"create\""), std::string::npos) << doc;
	EXPECT_NE(doc.find("\"start\": \"replayed\""), std::string::npos) << doc;
	EXPECT_NE(doc.find("\"log_dirty_blocks\": 40"), std::string::npos) << doc;
	EXPECT_NE(doc.find("\"writeboosttab\": \"/etc/writeboosttab\""), std::string::npos) << doc;
}
