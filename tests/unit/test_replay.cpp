// The replay engine against an independent model of the writes, and the
// plan's shape (order, merging, bounds), over seeded random workloads.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fstream>
#include <iterator>
#include <set>

#include "replay_model.hpp"
#include "temp_image.hpp"
#include "wbkit/errors.hpp"
#include "wbkit/log_scan.hpp"
#include "wbkit/log_writer.hpp"
#include "wbkit/replay.hpp"
#include "wbkit/safety.hpp"

using namespace wbkit;
using namespace wbkit::testing;

namespace {

constexpr std::uint64_t MiB = 1 << 20;

std::uint64_t cache_bytes_for(std::uint64_t segments) { return superblock_size + segments * segment_size; }

struct Images {
	TempDir dir;
	std::string cache_path;
	std::string backing_path;
	std::unique_ptr<Device> cache;
	std::unique_ptr<Device> backing;
	std::vector<std::byte> base;

	Images(std::uint64_t segments, std::uint64_t backing_bytes, std::uint64_t seed)
	{
		cache_path = dir.make_image("cache.img", cache_bytes_for(segments));
		backing_path = dir.make_image("backing.img", backing_bytes);
		cache = dir.open_rw(cache_path);
		backing = dir.open_rw(backing_path);
		base = pattern_bytes(backing_bytes, seed ^ 0xbac1);
		backing->write_exact(0, base);
	}
};

void check_plan_shape(const ReplayPlan& plan, std::uint64_t max_extent_bytes)
{
	const LogScan& scan = plan.scan();
	std::uint64_t previous_end = 0;
	std::uint64_t sectors = 0;
	std::uint64_t extents = 0;
	plan.for_each_extent([&](const ReplayExtent& e) {
		ASSERT_GT(e.sectors, 0u);
		ASSERT_GE(e.backing_sector, previous_end) << "extents sorted by destination and disjoint";
		ASSERT_LE(e.bytes(), std::max<std::uint64_t>(max_extent_bytes, block_size));
		std::uint64_t covered = 0;
		for (const ExtentSource& s : e.sources) {
			ASSERT_EQ(s.extent_sector, covered) << "sources cover the extent in order";
			covered += s.sectors;
			// Every source sector is the newest dirty copy of its backing sector.
			for (std::uint64_t k = 0; k < s.sectors; ++k) {
				const std::uint64_t sector = e.backing_sector + s.extent_sector + k;
				const std::optional<SectorSource> src = scan.find_sector(sector);
				ASSERT_TRUE(src.has_value());
				const unsigned bit = unsigned(sector - src->block_sector);
				ASSERT_TRUE((src->dirty >> bit) & 1u);
				ASSERT_EQ(scan.source_offset(*src) + bit * sector_size, s.cache_offset + k * sector_size);
			}
		}
		ASSERT_EQ(covered, e.sectors);
		previous_end = e.backing_sector + e.sectors;
		sectors += e.sectors;
		++extents;
	});
	EXPECT_EQ(sectors, scan.dirty_sectors);
	EXPECT_EQ(sectors, plan.summary().dirty_sectors);
	EXPECT_EQ(plan.summary().dirty_blocks, scan.dirty_blocks);
	EXPECT_EQ(extents, plan.summary().extents);
}

struct RandomCase {
	std::uint64_t segments;
	std::uint64_t backing_bytes;
	unsigned partial_percent;
	unsigned clean_percent;
	bool merge;
	std::uint64_t max_extent_bytes;
	bool record;
};

void run_random_case(const RandomCase& c, std::uint64_t seed)
{
	SCOPED_TRACE(fmt::format("seed {} segments {} backing {} partial {}% clean {}% merge {} extent {} record {}", seed,
				 c.segments, c.backing_bytes, c.partial_percent, c.clean_percent, c.merge,
				 c.max_extent_bytes, c.record));
	Images s(c.segments, c.backing_bytes, seed);
	SectorModel model;
	std::mt19937_64 rng(seed);
	{
		LogWriter writer(*s.cache, {.merge_partial_overwrites = c.merge, .backing = s.backing.get()});
		Workload workload(seed, {.backing_bytes = c.backing_bytes,
					 .writes = unsigned(100 + rng() % 400),
					 .partial_percent = c.partial_percent,
					 .clean_percent = c.clean_percent,
					 .flush_every = unsigned(1 + rng() % 40)});
		workload.run(writer, *s.backing, model);
		if (c.record && writer.last_flushed_id() > 1) {
			// The daemon wrote some segments back and recorded it, as update_sb_record_interval does.
			const std::uint64_t id = 1 + rng() % (writer.last_flushed_id() - 1);
			writer.write_back_through(id);
			writer.set_superblock_record(std::max(id, writer.last_writeback_id()));
		}
	}
	const LogScan scan = scan_log(*s.cache);
	ASSERT_EQ(scan.stop_reason, StopReason::end_of_ring);
	const ReplayPlan plan = replay_plan(scan, {.max_extent_bytes = c.max_extent_bytes});
	check_plan_shape(plan, c.max_extent_bytes);
	const ReplayResult result = execute_replay(plan, *s.cache, *s.backing);
	EXPECT_EQ(result.bytes_written, plan.summary().bytes);
	EXPECT_EQ(result.extents_written, plan.summary().extents);

	const auto expected = model.image(s.base);
	const auto actual = read_all(*s.backing);
	ASSERT_EQ(first_difference(actual, expected), -1) << "first differing sector";

	// Idempotent: a second replay leaves the same bytes.
	execute_replay(plan, *s.cache, *s.backing);
	ASSERT_EQ(first_difference(read_all(*s.backing), expected), -1);
}

} // namespace

TEST(ReplayModel, RandomWorkloadsAcrossGeometries)
{
	const RandomCase cases[] = {
		// Log larger than the workload: no wrap-around.
		{64, 4 * MiB, 30, 0, true, 4 * MiB, false},
		// Tiny rings wrap many times; the writer writes back to the backing device.
		{1, 2 * MiB, 30, 0, true, 4 * MiB, false},
		{2, 1 * MiB, 50, 10, true, 64 * 1024, false},
		{3, 8 * MiB, 0, 0, true, 4 * MiB, true},
		{5, 512 * 1024, 80, 20, false, 4096, false},
		{7, 3 * MiB, 40, 10, false, 1 * MiB, true},
		{17, 16 * MiB, 20, 5, true, 128 * 1024, true},
		{33, 256 * 1024, 60, 30, true, 4 * MiB, true},
	};
	for (const RandomCase& c : cases)
		for (std::uint64_t seed = 1; seed <= 4; ++seed)
			run_random_case(c, seed * 7919 + c.segments);
}

TEST(ReplayModel, MergeOffKeepsOlderEntriesDeciding)
{
	// Without the target's merge, a partial overwrite leaves the older entry
	// deciding the other sectors: the plan takes sectors from two segments.
	Images s(8, 1 * MiB, 5);
	SectorModel model;
	{
		LogWriter writer(*s.cache, {.merge_partial_overwrites = false, .backing = s.backing.get()});
		auto full = pattern_bytes(4096, 1);
		writer.write(64, full);
		model.write(64, full);
		writer.flush();
		auto part = pattern_bytes(1024, 2);
		writer.write(66, part);
		model.write(66, part);
		writer.flush();
	}
	const LogScan scan = scan_log(*s.cache);
	const ReplayPlan plan = replay_plan(scan);
	ASSERT_EQ(plan.summary().extents, 1u);
	std::vector<ReplayExtent> extents;
	plan.for_each_extent([&](const ReplayExtent& e) { extents.push_back(e); });
	ASSERT_EQ(extents.size(), 1u);
	EXPECT_EQ(extents[0].sectors, 8u);
	ASSERT_EQ(extents[0].sources.size(), 3u); // old 2 sectors, new 2 sectors, old 4 sectors
	EXPECT_EQ(extents[0].sources[0].segment_id, 1u);
	EXPECT_EQ(extents[0].sources[1].segment_id, 2u);
	EXPECT_EQ(extents[0].sources[2].segment_id, 1u);
	execute_replay(plan, *s.cache, *s.backing);
	EXPECT_EQ(first_difference(read_all(*s.backing), model.image(s.base)), -1);
}

TEST(ReplayPlan, DenseSequentialWritesMergeIntoBoundedExtents)
{
	Images s(40, 16 * MiB, 9);
	{
		LogWriter writer(*s.cache, {.backing = s.backing.get()});
		for (std::uint64_t block = 0; block < 2048; ++block) // 8 MiB, one 4 KiB write each
			writer.write(block * 8, pattern_bytes(4096, block));
		writer.flush();
	}
	const LogScan scan = scan_log(*s.cache);
	for (std::uint64_t max : {std::uint64_t(4096), 64 * 1024 * std::uint64_t(1), 1 * MiB, 4 * MiB}) {
		const ReplayPlan plan = replay_plan(scan, {.max_extent_bytes = max});
		EXPECT_EQ(plan.summary().dirty_blocks, 2048u);
		EXPECT_EQ(plan.summary().extents, (8 * MiB + max - 1) / max) << "max " << max;
		check_plan_shape(plan, max);
		plan.for_each_extent([&](const ReplayExtent& e) {
			// Sequential writes fill segments in order: a source runs to the end of a segment.
			for (const ExtentSource& src : e.sources)
				EXPECT_LE(src.sectors, std::uint64_t(blocks_per_segment) * block_sectors);
		});
	}
}

TEST(ReplayPlan, WrittenBackSegmentsAreNotReplayed)
{
	Images s(4, 1 * MiB, 2);
	std::uint64_t last;
	{
		LogWriter writer(*s.cache, {.backing = s.backing.get()});
		for (std::uint64_t i = 0; i < 4; ++i) {
			writer.write(i * 64, pattern_bytes(4096, i));
			writer.flush();
		}
		writer.write_back_through(2);
		writer.set_superblock_record(2);
		last = writer.last_flushed_id();
	}
	const LogScan scan = scan_log(*s.cache);
	ASSERT_EQ(scan.last_writeback_id, 2u);
	const ReplayPlan plan = replay_plan(scan);
	EXPECT_EQ(plan.summary().segments_in_log, last);
	EXPECT_EQ(plan.summary().segments_written_back, 2u);
	EXPECT_EQ(plan.summary().dirty_blocks, 2u);
	const auto uses = segment_uses(plan);
	ASSERT_EQ(uses.size(), 4u);
	EXPECT_EQ(segment_reason_name(uses[0].reason), "already-written-back");
	EXPECT_EQ(segment_reason_name(uses[1].reason), "already-written-back");
	EXPECT_EQ(segment_reason_name(uses[2].reason), "replayed");
	EXPECT_EQ(uses[3].sectors_replayed, 8u);
	EXPECT_TRUE(replay_shortfalls(plan).empty());
}

TEST(ReplayPlan, EmptyLogHasNothingToDo)
{
	Images s(4, 1 * MiB, 3);
	{
		LogWriter writer(*s.cache);
	}
	const LogScan scan = scan_log(*s.cache);
	const ReplayPlan plan = replay_plan(scan);
	EXPECT_EQ(plan.summary().extents, 0u);
	EXPECT_FALSE(plan.extents().next().has_value());
	const ReplayResult r = execute_replay(plan, *s.cache, *s.backing);
	EXPECT_EQ(r.write_requests, 0u);
	EXPECT_EQ(first_difference(read_all(*s.backing), s.base), -1);
}

TEST(ReplayPlan, SectorsPastTheBackingEndAreSkippedAndCounted)
{
	Images s(4, 1 * MiB, 4);
	{
		LogWriter writer(*s.cache);
		writer.write(0, pattern_bytes(4096, 1));
		writer.write(4096, pattern_bytes(8192, 2)); // sectors 4096..4111
		writer.flush();
	}
	const LogScan scan = scan_log(*s.cache);
	const ReplayPlan plan = replay_plan(scan, {.backing_sectors = 4100});
	EXPECT_EQ(plan.summary().dirty_sectors, 8u + 4u);
	EXPECT_EQ(plan.summary().skipped_sectors, 12u);
	EXPECT_EQ(plan.summary().first_skipped_sector, 4100u);
	ASSERT_EQ(replay_shortfalls(plan).size(), 1u);
}

TEST(ReplayPlan, TornNewestSegmentIsNotAShortfallButCorruptMiddleIs)
{
	for (bool torn : {true, false}) {
		Images s(8, 1 * MiB, 6);
		SectorModel prefix;
		{
			LogWriter writer(*s.cache, {.backing = s.backing.get()});
			for (std::uint64_t i = 0; i < 5; ++i) {
				auto data = pattern_bytes(8192, i);
				writer.write(i * 16, data);
				writer.flush();
				if (i < (torn ? 4u : 2u))
					prefix.write(i * 16, data);
			}
			if (torn)
				writer.tear_segment(5);
			else
				writer.corrupt_segment_data(3);
		}
		const LogScan scan = scan_log(*s.cache);
		const ReplayPlan plan = replay_plan(scan);
		EXPECT_EQ(replay_shortfalls(plan).empty(), torn);
		execute_replay(plan, *s.cache, *s.backing);
		EXPECT_EQ(first_difference(read_all(*s.backing), prefix.image(s.base)), -1) << "torn " << torn;
		const auto uses = segment_uses(plan);
		ASSERT_EQ(uses.size(), 5u);
		EXPECT_EQ(segment_reason_name(uses[torn ? 4 : 2].reason), torn ? "torn-newest-segment" : "checksum-mismatch");
		if (!torn) {
			EXPECT_EQ(segment_reason_name(uses[3].reason), "after-stop-point");
		}
	}
}

// docs/FORMAT.md, "Checksum": an append in place cut between its two writes
// leaves a segment valid at its committed length. Replay writes its first
// `length` blocks and nothing of the blocks past it, whose data is on the
// cache but was never acknowledged; the kernel-rule model agrees.
TEST(ReplayPlan, AnAppendCutBetweenItsWritesReplaysItsCommittedBlocksOnly)
{
	for (bool newest : {true, false}) {
		SCOPED_TRACE(newest);
		Images s(8, 1 * MiB, 9);
		SectorModel committed;
		{
			LogWriter writer(*s.cache, {.backing = s.backing.get()});
			auto first = pattern_bytes(3 * block_size, 1);
			writer.write(0, first);
			writer.flush();
			committed.write(0, first);
			// Segment 2: 10 blocks at backing block 32 on, committed at 4.
			auto second = pattern_bytes(10 * block_size, 2);
			writer.write(32 * block_sectors, second);
			writer.flush();
			committed.write(32 * block_sectors, std::span(second).first(4 * block_size));
			if (!newest) {
				auto third = pattern_bytes(2 * block_size, 3);
				writer.write(100 * block_sectors, third);
				writer.flush();
				committed.write(100 * block_sectors, third);
			}
			writer.cut_append(2, 4);
		}
		const LogScan scan = scan_log(*s.cache);
		ASSERT_EQ(scan.slots[1].state, SlotState::valid);
		ASSERT_EQ(scan.slots[1].ignored_metablocks, 6u);
		ASSERT_EQ(scan.log.size(), newest ? 2u : 3u);
		EXPECT_FALSE(has_damage(scan.findings));
		const ReplayPlan plan = replay_plan(scan);
		EXPECT_TRUE(replay_shortfalls(plan).empty());
		EXPECT_EQ(plan.summary().dirty_blocks, newest ? 7u : 9u);

		const std::vector<std::byte> image = read_all(*s.cache);
		const KernelRuleModel model(image);
		EXPECT_EQ(model.last_flushed_id(), scan.last_flushed_id);
		EXPECT_EQ(model.writes().size(), plan.summary().dirty_sectors);
		EXPECT_FALSE(model.writes().contains(36 * block_sectors)); // block 4 of segment 2: never committed

		execute_replay(plan, *s.cache, *s.backing);
		EXPECT_EQ(first_difference(read_all(*s.backing), committed.image(s.base)), -1);
		const auto uses = segment_uses(plan);
		ASSERT_GE(uses.size(), 2u);
		EXPECT_EQ(segment_reason_name(uses[1].reason), "replayed");
	}
}

TEST(ReplayExecute, KilledHalfwayThenRerunEndsInTheSameBytes)
{
	Images s(16, 4 * MiB, 11);
	SectorModel model;
	{
		LogWriter writer(*s.cache, {.backing = s.backing.get()});
		Workload workload(11, {.backing_bytes = 4 * MiB, .writes = 400, .partial_percent = 40});
		workload.run(writer, *s.backing, model);
	}
	const LogScan scan = scan_log(*s.cache);
	const ReplayPlan plan = replay_plan(scan, {.max_extent_bytes = 16 * 1024});
	{
		// The "crash": writes into the upper half of the backing device fail.
		FaultInjectingDevice failing(open_device(s.backing_path, {.writable = true}));
		failing.fail_writes(2 * MiB, 2 * MiB);
		EXPECT_THROW(execute_replay(plan, *s.cache, failing), IoError);
		EXPECT_NE(first_difference(read_all(*s.backing), model.image(s.base)), -1);
	}
	execute_replay(plan, *s.cache, *s.backing);
	EXPECT_EQ(first_difference(read_all(*s.backing), model.image(s.base)), -1);
}

TEST(ReplayExecute, DirectIoDestinationWithPartialSectorExtents)
{
	// O_DIRECT takes aligned blocks only: partial extents are read-modify-written,
	// or sent through a buffered handle when one is given.
	for (bool buffered_handle : {false, true}) {
		Images s(16, 4 * MiB, 12);
		SectorModel model;
		{
			LogWriter writer(*s.cache, {.backing = s.backing.get()});
			Workload workload(12, {.backing_bytes = 4 * MiB, .writes = 300, .partial_percent = 70});
			workload.run(writer, *s.backing, model);
		}
		auto cache = open_device(s.cache_path, {.direct = true});
		auto direct = open_device(s.backing_path, {.writable = true, .direct = true});
		std::unique_ptr<Device> buffered;
		if (buffered_handle)
			buffered = open_device(s.backing_path, {.writable = true});
		const LogScan scan = scan_log(*cache);
		const ReplayPlan plan = replay_plan(scan);
		execute_replay(plan, *cache, *direct, {.unaligned_destination = buffered.get()});
		EXPECT_EQ(first_difference(read_all(*s.backing), model.image(s.base)), -1) << "buffered " << buffered_handle;
	}
}

TEST(ReplayExecute, ReadErrorWithoutToleranceIsAnIoError)
{
	Images s(8, 1 * MiB, 13);
	{
		LogWriter writer(*s.cache);
		writer.write(0, pattern_bytes(4096, 1));
		writer.flush();
	}
	const LogScan scan = scan_log(*s.cache);
	const ReplayPlan plan = replay_plan(scan);
	FaultInjectingDevice cache(open_device(s.cache_path));
	cache.fail_reads(Geometry::for_cache_bytes(cache.size_bytes()).data_block_offset(0, 0), 512);
	EXPECT_THROW(execute_replay(plan, cache, *s.backing), IoError);
}

// Blocks 0..19 at sectors 0, 16, 32, ...: 20 extents, one segment.
void write_twenty_separate_blocks(Device& cache)
{
	LogWriter writer(cache);
	for (std::uint64_t i = 0; i < 20; ++i)
		writer.write(i * 16, pattern_bytes(4096, i));
	writer.flush();
}

TEST(ReplayExecute, ReadErrorOnTheReaderThreadIsAnIoErrorAfterTheExtentsBefore)
{
	Images s(8, 1 * MiB, 16);
	write_twenty_separate_blocks(*s.cache);
	const LogScan scan = scan_log(*s.cache);
	const ReplayPlan plan = replay_plan(scan);
	ASSERT_EQ(plan.summary().extents, 20u);
	// Extent 9 is read by the executor's reader thread while extent 8 is written.
	FaultInjectingDevice cache(open_device(s.cache_path));
	cache.fail_reads(Geometry::for_cache_bytes(cache.size_bytes()).data_block_offset(0, 9), 512);
	EXPECT_THROW(execute_replay(plan, cache, *s.backing), IoError);
	const std::vector<std::byte> after = read_all(*s.backing);
	for (std::uint64_t i = 0; i < 20; ++i) {
		const std::vector<std::byte> block(after.begin() + i * 16 * 512, after.begin() + (i * 16 + 8) * 512);
		const std::vector<std::byte> before(s.base.begin() + i * 16 * 512, s.base.begin() + (i * 16 + 8) * 512);
		EXPECT_EQ(block, i < 9 ? pattern_bytes(4096, i) : before) << "extent " << i;
	}
}

TEST(ReplayExecute, ProgressReachesTheTotal)
{
	Images s(8, 1 * MiB, 14);
	write_twenty_separate_blocks(*s.cache);
	const LogScan scan = scan_log(*s.cache);
	const ReplayPlan plan = replay_plan(scan);
	std::uint64_t calls = 0;
	std::uint64_t last_done = 0, last_total = 0;
	auto on_progress = [&](std::string_view phase, std::uint64_t done, std::uint64_t total) {
		EXPECT_EQ(phase, "replay");
		EXPECT_GE(done, last_done);
		last_done = done;
		last_total = total;
		++calls;
	};
	execute_replay(plan, *s.cache, *s.backing, {.progress = on_progress});
	EXPECT_EQ(calls, plan.summary().extents);
	EXPECT_EQ(last_done, 20u * 4096);
	EXPECT_EQ(last_total, 20u * 4096);
}

TEST(ReplayMarkClean, RecordMakesTheNextScanClean)
{
	Images s(8, 1 * MiB, 15);
	{
		LogWriter writer(*s.cache);
		writer.write(0, pattern_bytes(8192, 1));
		writer.flush();
		writer.write(64, pattern_bytes(4096, 2));
		writer.flush();
	}
	const LogScan before = scan_log(*s.cache);
	ASSERT_EQ(before.dirty_blocks, 3u);
	execute_replay(replay_plan(before), *s.cache, *s.backing);
	mark_cache_clean(*s.cache, before);
	const LogScan after = scan_log(*s.cache);
	EXPECT_EQ(after.sb_record, 2u);
	EXPECT_EQ(after.last_writeback_id, 2u);
	EXPECT_EQ(after.dirty_blocks, 0u);
	EXPECT_EQ(replay_plan(after).summary().extents, 0u);
}

// A segment as the target writes it after going live: one dirty block.
void write_live_segment(Device& cache, std::uint64_t id, std::uint64_t block_sector, std::span<const std::byte> block)
{
	const Geometry geometry = Geometry::for_cache_bytes(cache.size_bytes());
	AlignedBuffer segment(2 * block_size);
	std::ranges::fill(segment.span(), std::byte{0});
	std::ranges::copy(block, segment.span().begin() + block_size);
	SegmentHeader header;
	header.id = id;
	header.length = 1;
	header.metablocks[0] = {.sector = block_sector, .dirty_bits = 0xff};
	write_segment_header(segment.span().first(block_size), header); // the checksum covers the header too
	header.checksum = segment_checksum(segment.span(), 1);
	write_segment_header(segment.span().first(block_size), header);
	cache.write_exact(geometry.slot_offset(geometry.slot_of_id(id)), segment.span());
	cache.flush_or_throw();
}

TEST(ReplayMarkClean, AfterAStopInTheLogTheNextSegmentsDoNotRunIntoOldOnes)
{
	// Segments 1..6 all write block 0; 4 is damaged, so the replay stops
	// after 3 and the good 5 and 6 lie after the stop point. Marked clean
	// (forced), then the target goes live and reuses ids 4 and 5 for new
	// writes, then the power fails: the next replay must end with the new
	// data. Were the old 6 still there, its id would follow the new 5 and
	// its old block 0 would be replayed over the new one.
	Images s(8, 1 * MiB, 17);
	{
		LogWriter writer(*s.cache);
		for (std::uint64_t id = 1; id <= 6; ++id) {
			writer.write(0, pattern_bytes(4096, id));
			writer.flush();
		}
		writer.corrupt_segment_data(4);
	}
	const LogScan stopped = scan_log(*s.cache);
	ASSERT_EQ(stopped.last_flushed_id, 3u);
	ASSERT_EQ(stopped.discarded_segments, 2u);
	execute_replay(replay_plan(stopped), *s.cache, *s.backing);
	EXPECT_EQ(mark_cache_clean(*s.cache, stopped), 3u); // slots of 4, 5 and 6

	const LogScan marked = scan_log(*s.cache);
	EXPECT_EQ(marked.max_id, 3u);
	EXPECT_EQ(marked.discarded_segments, 0u);
	EXPECT_EQ(marked.dirty_blocks, 0u);

	const auto newest = pattern_bytes(4096, 100);
	write_live_segment(*s.cache, 4, 0, newest);
	write_live_segment(*s.cache, 5, 64, pattern_bytes(4096, 101));
	const LogScan after_crash = scan_log(*s.cache);
	EXPECT_EQ(after_crash.last_flushed_id, 5u);
	execute_replay(replay_plan(after_crash), *s.cache, *s.backing);
	std::vector<std::byte> block0(4096);
	s.backing->read_exact(0, block0);
	EXPECT_TRUE(block0 == newest) << "an old segment after the stop point was replayed over newer data";
}

// Records the writes and flushes a device is given, without applying them.
class WriteRecorder final : public Device {
public:
	struct Write {
		std::uint64_t offset;
		std::vector<std::byte> data;
		unsigned epoch; // flushes before it
	};
	explicit WriteRecorder(MemoryDevice& under) : under_(under) {}
	const std::string& path() const noexcept override { return under_.path(); }
	std::uint64_t size_bytes() const noexcept override { return under_.size_bytes(); }
	bool is_block_device() const noexcept override { return false; }
	DeviceIdentity identity() const noexcept override { return {}; }
	int read_at(std::uint64_t offset, std::span<std::byte> buf) noexcept override
	{
		return under_.read_at(offset, buf);
	}
	int write_at(std::uint64_t offset, std::span<const std::byte> buf) noexcept override
	{
		writes.push_back({offset, {buf.begin(), buf.end()}, epoch_});
		return 0;
	}
	int flush() noexcept override
	{
		++epoch_;
		return 0;
	}
	std::vector<Write> writes;

private:
	MemoryDevice& under_;
	unsigned epoch_ = 0;
};

TEST(ReplayMarkClean, APowerCutAnywhereInItLeavesTheSameReplay)
{
	// As in the test above: the replay stops at damaged segment 4, good 5
	// and 6 after it. A cut can leave every write of earlier flush epochs
	// and any subset of the writes of the current one: on each such disk a
	// rerun must leave the backing device as the uninterrupted run did.
	Images s(8, 1 * MiB, 19);
	{
		LogWriter writer(*s.cache);
		for (std::uint64_t id = 1; id <= 6; ++id) {
			writer.write(0, pattern_bytes(4096, id));
			writer.write(16 + 8 * id, pattern_bytes(4096, 50 + id));
			writer.flush();
		}
		writer.corrupt_segment_data(4);
	}
	MemoryDevice cache("cache", read_all(*s.cache));
	const std::vector<std::byte> base = read_all(*s.backing);
	const LogScan scan = scan_log(cache);
	ASSERT_EQ(scan.discarded_segments, 2u);
	MemoryDevice replayed("backing", base);
	execute_replay(replay_plan(scan), cache, replayed);

	WriteRecorder recorder(cache);
	ASSERT_EQ(mark_cache_clean(recorder, scan), 3u);
	const auto& writes = recorder.writes;
	unsigned states = 0;
	for (std::size_t durable = 0; durable <= writes.size(); ++durable) {
		// writes[0, durable) reached the media; the epoch of writes[durable]
		// is in flight: any subset of its writes may have landed too.
		std::vector<std::size_t> in_flight;
		for (std::size_t i = durable; i < writes.size() && writes[i].epoch == writes[durable].epoch; ++i)
			in_flight.push_back(i);
		for (std::uint64_t subset = 0; subset < (1ULL << in_flight.size()); ++subset) {
			MemoryDevice cut("cut", cache.bytes());
			for (std::size_t i = 0; i < durable; ++i)
				cut.write_exact(writes[i].offset, writes[i].data);
			for (std::size_t k = 0; k < in_flight.size(); ++k)
				if (subset >> k & 1)
					cut.write_exact(writes[in_flight[k]].offset, writes[in_flight[k]].data);
			// The cut came after the replay (and the backing device's flush):
			// the rerun replays onto its result.
			MemoryDevice rerun("backing", replayed.bytes());
			execute_replay(replay_plan(scan_log(cut)), cut, rerun);
			ASSERT_EQ(first_difference(rerun.bytes(), replayed.bytes()), -1)
				<< "cut after " << durable << " durable writes, in-flight subset " << subset;
			++states;
		}
		// Past the in-flight epoch's first write, the next prefixes are covered by its subsets.
		durable += in_flight.size() > 0 ? in_flight.size() - 1 : 0;
	}
	EXPECT_GE(states, 6u);
}

TEST(ReplayMarkClean, WithoutAStopOnlyTheRecordAndTheTrustRecordAreWritten)
{
	Images s(8, 1 * MiB, 18);
	{
		LogWriter writer(*s.cache);
		writer.write(0, pattern_bytes(4096, 1));
		writer.flush();
	}
	const std::vector<std::byte> before = read_all(*s.cache);
	const LogScan scan = scan_log(*s.cache);
	EXPECT_EQ(scan.trusted_from_id, 1u); // formatted as dm-wbkit formats
	EXPECT_EQ(mark_cache_clean(*s.cache, scan), 0u);
	const std::vector<std::byte> after = read_all(*s.cache);
	ASSERT_EQ(before.size(), after.size());
	for (std::size_t i = 0; i < after.size(); ++i) {
		if (i / sector_size != WB_SB_RECORD_OFFSET / sector_size && i / sector_size != WB_TRUST_SECTOR) {
			ASSERT_EQ(before[i], after[i]) << "byte " << i << " changed";
		}
	}
	// The repair changed the backing device outside the log: no copy logged
	// before it may serve reads after the next replay.
	EXPECT_EQ(scan_log(*s.cache).trusted_from_id, WB_TRUST_NONE);
}

TEST(CleanTrust, RecordAndRule)
{
	std::vector<std::byte> sector(sector_size);
	EXPECT_EQ(parse_clean_trust(sector), std::nullopt) << "no magic: no record";
	EXPECT_EQ(parse_clean_trust_segments(sector), 0u) << "no magic: no ring size";
	write_clean_trust(sector, 17, 62);
	EXPECT_EQ(parse_clean_trust(sector), std::optional<std::uint64_t>{17});
	EXPECT_EQ(parse_clean_trust_segments(sector), 62u);
	EXPECT_EQ(std::to_integer<unsigned>(sector[0]), 0x57u); // "WBTr"
	EXPECT_EQ(std::to_integer<unsigned>(sector[3]), 0x72u);
	EXPECT_FALSE(wb_clean_copy_trusted(16, 17));
	EXPECT_TRUE(wb_clean_copy_trusted(17, 17));
	EXPECT_TRUE(wb_clean_copy_trusted(~0ULL - 1, 1));
	EXPECT_FALSE(wb_clean_copy_trusted(~0ULL - 1, WB_TRUST_NONE));
	write_clean_trust(sector, WB_TRUST_NONE, 0);
	EXPECT_EQ(parse_clean_trust(sector), std::optional<std::uint64_t>{WB_TRUST_NONE});
	EXPECT_EQ(parse_clean_trust_segments(sector), 0u) << "a record without the size";
}

TEST(ReplaySafety, ACacheDeviceShrunkUnderItsLogIsRefused)
{
	// A first-lap log in a 10-slot ring, the device then cut to 4 slots:
	// what is left reads as an intact log of segments 1..4, whose replay
	// would drop the newer segments' dirty data without a word. Only the
	// trust record's ring size tells.
	Images s(10, 8 * MiB, 21);
	{
		LogWriter writer(*s.cache);
		for (std::uint64_t seg = 0; seg < 6; ++seg) {
			writer.write(seg * 64, pattern_bytes(4096, seg));
			writer.flush();
		}
	}
	const LogScan whole = scan_log(*s.cache);
	ASSERT_EQ(whole.decision.refusal, WB_REPLAY_OK);
	ASSERT_GE(whole.max_id, 6u);
	EXPECT_EQ(whole.trust_nr_segments, 10u);

	TempDir dir;
	std::vector<std::byte> bytes(cache_bytes_for(4));
	s.cache->read_exact(0, bytes);
	auto cut = dir.open_rw(dir.make_image("cut.img", bytes.size()));
	cut->write_exact(0, bytes);
	const LogScan shrunk = scan_log(*cut);
	EXPECT_EQ(shrunk.decision.refusal, WB_REPLAY_RING_SHRUNK);
	EXPECT_EQ(shrunk.decision.refusal_slot, 4u);
	EXPECT_TRUE(shrunk.refused());
	EXPECT_THROW(check_replay_safety(*cut, *s.backing, shrunk, false), RefusedError);

	// Grown instead: the first lap still reads as it did.
	auto grown = dir.open_rw(dir.make_image("grown.img", cache_bytes_for(12)));
	std::vector<std::byte> all(cache_bytes_for(10));
	s.cache->read_exact(0, all);
	grown->write_exact(0, all);
	EXPECT_EQ(scan_log(*grown).decision.refusal, WB_REPLAY_OK);
}

TEST(ReplaySafety, Refusals)
{
	Images s(8, 1 * MiB, 16);
	{
		LogWriter writer(*s.cache);
		writer.write(4096, pattern_bytes(4096, 1)); // sector 4096: past a 1 MiB backing device
		writer.flush();
	}
	auto same = open_device(s.cache_path);
	EXPECT_THROW(check_distinct(*s.cache, "cache", *same, "backing"), RefusedError);
	const LogScan scan = scan_log(*s.cache, {.backing_bytes = s.backing->size_bytes()});
	EXPECT_THROW(check_replay_safety(*s.cache, *s.backing, scan, false), RefusedError);
	EXPECT_EQ(check_replay_safety(*s.cache, *s.backing, scan, true).size(), 1u);

	TempDir dir;
	auto blank = dir.open_rw(dir.make_image("blank.img", cache_bytes_for(2)));
	const LogScan unformatted = scan_log(*blank);
	EXPECT_THROW(check_replay_safety(*blank, *s.backing, unformatted, false), RefusedError);
	auto tiny = dir.open_rw(dir.make_image("tiny.img", 4096));
	const LogScan too_small = scan_log(*tiny);
	EXPECT_THROW(check_replay_safety(*tiny, *s.backing, too_small, true), RefusedError);
}

TEST(ReplaySafety, EveryRefusalHasOneUniqueNameAndItsForceWording)
{
	std::set<std::string_view> names;
	for (const RefusalInfo& info : all_refusals()) {
		EXPECT_TRUE(names.insert(info.name).second) << info.name;
		EXPECT_EQ(refusal_info(info.id).name, info.name);
		// What --force does is said when refused, and only for refusals it overrides.
		EXPECT_EQ(info.refused.find("--force") != std::string_view::npos, info.force_overrides) << info.name;
	}
	EXPECT_EQ(all_refusals().size(), std::size_t(Refusal::log_refused) + 1);
	const RefusalContext context{.cache = "c.img", .magic = 0x1234};
	std::vector<std::string> overridden;
	EXPECT_THROW(refuse(Refusal::no_magic, context, false, overridden), RefusedError);
	EXPECT_THROW(refuse(Refusal::cache_too_small, context, true, overridden), RefusedError);
	EXPECT_TRUE(overridden.empty());
	refuse(Refusal::no_magic, context, true, overridden);
	ASSERT_EQ(overridden.size(), 1u);
	EXPECT_EQ(overridden[0], refusal_text(Refusal::no_magic, context, true));
	EXPECT_NE(overridden[0].find("c.img has no writeboost magic (found 0x00001234)"), std::string::npos);
}

TEST(SegmentReasons, EveryReasonHasOneUniqueDocumentedName)
{
	std::ifstream doc(std::string(WBKIT_SOURCE_DIR) + "/docs/recovery.md");
	ASSERT_TRUE(doc) << "docs/recovery.md not found";
	const std::string text((std::istreambuf_iterator<char>(doc)), std::istreambuf_iterator<char>());
	std::set<std::string_view> names;
	for (const SegmentReasonInfo& info : all_segment_reasons()) {
		EXPECT_TRUE(names.insert(info.name).second) << info.name;
		EXPECT_EQ(segment_reason_name(info.reason), info.name);
		EXPECT_NE(text.find(fmt::format("`{}`", info.name)), std::string::npos)
			<< "docs/recovery.md does not name " << info.name;
	}
	EXPECT_EQ(all_segment_reasons().size(), std::size_t(SegmentReason::slot_mismatch) + 1);
}

TEST(SlotStates, TablesAreInEnumeratorOrderAndAgreeOnSharedNames)
{
	for (std::size_t i = 0; i < all_slot_states().size(); ++i)
		EXPECT_EQ(std::size_t(all_slot_states()[i].state), i);
	EXPECT_EQ(all_slot_states().size(), std::size_t(SlotState::data_unreadable) + 1);
	for (std::size_t i = 0; i < all_stop_reasons().size(); ++i)
		EXPECT_EQ(std::size_t(all_stop_reasons()[i].reason), i);
	EXPECT_EQ(all_stop_reasons().size(), std::size_t(StopReason::not_verified) + 1);
	for (std::size_t i = 0; i < all_segment_reasons().size(); ++i)
		EXPECT_EQ(std::size_t(all_segment_reasons()[i].reason), i);
	// A state that is a finding has the finding's name, and stops the walk for a reason of the same kind.
	for (const SlotStateInfo& info : all_slot_states()) {
		if (info.has_finding && info.state != SlotState::legacy_checksum) {
			EXPECT_EQ(finding_info(info.finding).name, info.name);
		}
		if (!info.in_log && info.state != SlotState::empty) {
			EXPECT_NE(info.stop, StopReason::end_of_ring) << info.name;
		}
	}
	EXPECT_EQ(slot_state_name(SlotState::checksum_mismatch), stop_reason_name(StopReason::checksum_mismatch));
	EXPECT_EQ(slot_state_name(SlotState::checksum_mismatch), segment_reason_name(SegmentReason::checksum_mismatch));
	EXPECT_EQ(slot_state_name(SlotState::header_unreadable), segment_reason_name(SegmentReason::header_unreadable));
}

TEST(SegmentReasons, LeftOutSegmentsAreExplainedByTheirSlotState)
{
	EXPECT_EQ(left_out_reason(SlotState::checksum_mismatch, true), SegmentReason::torn_newest_segment);
	EXPECT_EQ(left_out_reason(SlotState::checksum_mismatch, false), SegmentReason::checksum_mismatch);
	EXPECT_EQ(left_out_reason(SlotState::legacy_checksum, true), SegmentReason::legacy_checksum);
	EXPECT_EQ(left_out_reason(SlotState::header_unreadable, false), SegmentReason::unreadable);
	EXPECT_EQ(left_out_reason(SlotState::data_unreadable, true), SegmentReason::unreadable);
	EXPECT_EQ(left_out_reason(SlotState::length_too_large, false), SegmentReason::length_too_large);
	EXPECT_EQ(left_out_reason(SlotState::valid, false), SegmentReason::after_stop_point);
	EXPECT_EQ(left_out_reason(SlotState::unverified, true), SegmentReason::after_stop_point);
}
