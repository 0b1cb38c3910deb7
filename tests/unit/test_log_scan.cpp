// The log scan against the replay rules of docs/FORMAT.md, case by case.
#include "scan_fixture.hpp"

using namespace wbkit;
using wbkit::testing::pattern_bytes;
using ScanCase = wbkit::testing::ScanTest;

TEST_F(ScanCase, FormattedEmptyCacheHasNothingToReplay)
{
	LogWriter w = make_writer();
	LogScan s = scan();
	EXPECT_TRUE(s.superblock.magic_ok);
	EXPECT_EQ(s.geometry.nr_segments, 6u);
	EXPECT_EQ(s.max_id, 0u);
	EXPECT_EQ(s.stop_reason, StopReason::empty_log);
	EXPECT_TRUE(s.log.empty());
	EXPECT_EQ(s.dirty_blocks, 0u);
	EXPECT_TRUE(s.findings.empty());
}

TEST_F(ScanCase, FlushedWritesAreDirtyAndFoundBySector)
{
	LogWriter w = make_writer();
	w.write(80, pattern_bytes(block_size, 1));       // block 80..87
	w.write(800, pattern_bytes(2 * sector_size, 2)); // sectors 800, 801
	w.flush();
	w.write(1600, pattern_bytes(block_size, 3));
	w.flush();
	LogScan s = scan();
	EXPECT_EQ(s.max_id, 2u);
	EXPECT_EQ(s.stop_reason, StopReason::end_of_ring);
	ASSERT_EQ(s.log.size(), 2u);
	EXPECT_EQ(s.oldest_id(), 1u);
	EXPECT_EQ(s.last_flushed_id, 2u);
	EXPECT_EQ(s.last_writeback_id, 0u);
	EXPECT_EQ(s.dirty_blocks, 3u);
	EXPECT_EQ(s.dirty_sectors, 8u + 2u + 8u);
	EXPECT_TRUE(s.findings.empty());

	const SectorSource* src = s.find_sector(801);
	ASSERT_NE(src, nullptr);
	EXPECT_EQ(src->block_sector, 800u);
	EXPECT_EQ(s.log[src->log_index].id, 1u);
	EXPECT_EQ(src->dirty, 0x03);
	EXPECT_EQ(s.find_sector(802), nullptr); // not written: the backing device holds it
	EXPECT_EQ(s.find_sector(79), nullptr);
	ASSERT_NE(s.find_sector(1607), nullptr);
	EXPECT_EQ(s.log[s.find_sector(1607)->log_index].id, 2u);
}

TEST_F(ScanCase, UnflushedWritesAreNotOnTheCache)
{
	LogWriter w = make_writer();
	w.write(0, pattern_bytes(block_size, 1));
	w.flush();
	w.write(8, pattern_bytes(block_size, 2)); // stays in RAM
	LogScan s = scan();
	EXPECT_EQ(s.last_flushed_id, 1u);
	EXPECT_EQ(s.dirty_blocks, 1u);
	EXPECT_EQ(s.find_sector(8), nullptr);
}

TEST_F(ScanCase, WrapAroundStartsAtTheOldestSlot)
{
	LogWriter w = make_writer();
	write_full_segments(w, 9); // 6 slots: ids 4..9 remain, 1..3 written back
	LogScan s = scan();
	EXPECT_EQ(s.max_id, 9u);
	ASSERT_EQ(s.log.size(), 6u);
	EXPECT_EQ(s.log.front().id, 4u);
	EXPECT_EQ(s.log.front().slot, 3u);
	EXPECT_EQ(s.log.back().id, 9u);
	EXPECT_EQ(s.last_flushed_id, 9u);
	EXPECT_EQ(s.last_writeback_id, 3u); // max(9 - 6, record 0)
	EXPECT_EQ(s.dirty_blocks, 6u * blocks_per_segment);
	EXPECT_TRUE(s.findings.empty());
}

TEST_F(ScanCase, TornNewestSegmentIsDiscardedWithoutDamage)
{
	LogWriter w = make_writer();
	write_full_segments(w, 3);
	w.tear_segment(3);
	LogScan s = scan();
	EXPECT_EQ(s.max_id, 3u);
	EXPECT_EQ(s.last_flushed_id, 2u);
	EXPECT_EQ(s.stop_reason, StopReason::checksum_mismatch);
	EXPECT_EQ(s.stop_slot, 2u);
	EXPECT_EQ(s.dirty_blocks, 2u * blocks_per_segment);
	EXPECT_TRUE(has(s, FindingCode::torn_newest_segment));
	EXPECT_FALSE(has(s, FindingCode::checksum_mismatch));
	EXPECT_FALSE(has_damage(s.findings));
}

TEST_F(ScanCase, CorruptMiddleSegmentStopsReplayAndDiscardsLaterOnes)
{
	LogWriter w = make_writer();
	write_full_segments(w, 5);
	w.corrupt_segment_data(3);
	LogScan s = scan();
	EXPECT_EQ(s.last_flushed_id, 2u);
	EXPECT_EQ(s.log.size(), 2u);
	EXPECT_EQ(s.discarded_segments, 2u);
	EXPECT_TRUE(has(s, FindingCode::checksum_mismatch));
	EXPECT_TRUE(has(s, FindingCode::valid_segments_discarded));
	EXPECT_TRUE(has_damage(s.findings));
	// Blocks of segments 3..5 are not part of the kernel's state.
	EXPECT_EQ(s.find_sector(3 * blocks_per_segment * block_sectors), nullptr);
	EXPECT_NE(s.find_sector(0), nullptr);
}

TEST_F(ScanCase, CorruptOldestSegmentLosesTheWholeLog)
{
	LogWriter w = make_writer();
	write_full_segments(w, 2);
	w.corrupt_segment_data(1);
	LogScan s = scan();
	EXPECT_EQ(s.last_flushed_id, 0u); // the kernel starts counting from 0 again
	EXPECT_TRUE(s.log.empty());
	EXPECT_EQ(s.dirty_blocks, 0u);
	EXPECT_TRUE(has(s, FindingCode::valid_segments_discarded));
}

TEST_F(ScanCase, SuperblockRecordMarksSegmentsWrittenBack)
{
	LogWriter w = make_writer();
	write_full_segments(w, 4);
	w.write_back_through(2);
	w.set_superblock_record(2);
	LogScan s = scan();
	EXPECT_EQ(s.sb_record, 2u);
	EXPECT_EQ(s.last_writeback_id, 2u);
	EXPECT_TRUE(s.log[0].written_back);
	EXPECT_TRUE(s.log[1].written_back);
	EXPECT_FALSE(s.log[2].written_back);
	EXPECT_EQ(s.dirty_blocks, 2u * blocks_per_segment);
	EXPECT_TRUE(s.findings.empty());
}

TEST_F(ScanCase, SuperblockRecordIsClampedToTheLastFlushedId)
{
	LogWriter w = make_writer();
	write_full_segments(w, 2);
	w.set_superblock_record(40);
	LogScan s = scan();
	EXPECT_EQ(s.last_writeback_id, 2u);
	EXPECT_EQ(s.dirty_blocks, 0u);
	EXPECT_TRUE(has(s, FindingCode::sb_record_out_of_range));
}

TEST_F(ScanCase, PartialOverwriteWithoutMergeKeepsOlderDirtySectors)
{
	LogWriter w = make_writer(/*merge=*/false);
	w.write(0, pattern_bytes(block_size, 1));
	w.flush();
	w.write(2, pattern_bytes(2 * sector_size, 2)); // sectors 2, 3 newer
	w.flush();
	LogScan s = scan();
	EXPECT_EQ(s.dirty_blocks, 1u);
	EXPECT_EQ(s.dirty_sectors, 8u);
	const SectorSource* old_copy = s.find_sector(0);
	const SectorSource* new_copy = s.find_sector(2);
	ASSERT_TRUE(old_copy && new_copy);
	EXPECT_EQ(s.log[old_copy->log_index].id, 1u);
	EXPECT_EQ(old_copy->sectors, 0xf3);
	EXPECT_EQ(s.log[new_copy->log_index].id, 2u);
	EXPECT_EQ(new_copy->sectors, 0x0c);
}

TEST_F(ScanCase, PartialOverwriteWithMergeTakesTheOlderSectorsAlong)
{
	LogWriter w = make_writer(/*merge=*/true);
	w.write(0, pattern_bytes(3 * sector_size, 1)); // sectors 0..2
	w.flush();
	w.write(6, pattern_bytes(sector_size, 2)); // sector 6
	w.flush();
	LogScan s = scan();
	const SectorSource* copy = s.find_sector(0);
	ASSERT_NE(copy, nullptr);
	EXPECT_EQ(s.log[copy->log_index].id, 2u);
	EXPECT_EQ(copy->dirty_bits, 0x47);
	EXPECT_EQ(s.dirty_sectors, 4u);
	EXPECT_EQ(s.find_sector(3), nullptr);
}

TEST_F(ScanCase, NewerCleanEntryMakesOlderDirtyDataObsolete)
{
	LogWriter w = make_writer();
	w.write(16, pattern_bytes(block_size, 1));
	w.flush();
	w.write_clean(16, pattern_bytes(block_size, 2));
	w.flush();
	LogScan s = scan();
	EXPECT_EQ(s.dirty_blocks, 0u);
	EXPECT_EQ(s.dirty_sectors, 0u);
	const SectorSource* copy = s.find_sector(20);
	ASSERT_NE(copy, nullptr);
	EXPECT_EQ(copy->dirty, 0);
	EXPECT_EQ(s.log[copy->log_index].id, 2u);
}

TEST_F(ScanCase, EmptySlotsInsideTheRingAreSkipped)
{
	LogWriter w = make_writer();
	write_full_segments(w, 3);
	patch_header(1, Checksum::stale, [](SegmentHeader& h) { h = SegmentHeader{}; }); // slot 1 never written
	LogScan s = scan();
	ASSERT_EQ(s.log.size(), 2u);
	EXPECT_EQ(s.log[0].id, 1u);
	EXPECT_EQ(s.log[1].id, 3u);
	EXPECT_TRUE(has(s, FindingCode::id_gap));
}

TEST_F(ScanCase, HeadersOnlyScanAssumesEveryChecksumGood)
{
	LogWriter w = make_writer();
	write_full_segments(w, 3);
	w.corrupt_segment_data(2);
	LogScan s = scan({.verify_checksums = false});
	EXPECT_FALSE(s.verified);
	EXPECT_EQ(s.stop_reason, StopReason::not_verified);
	EXPECT_EQ(s.log.size(), 3u);
	EXPECT_EQ(s.slots[1].state, SlotState::unverified);
}

TEST_F(ScanCase, MetablocksAreVisitedInReplayOrder)
{
	LogWriter w = make_writer();
	write_full_segments(w, 7);
	LogScan s = scan();
	std::uint64_t count = 0, previous_id = 0;
	for_each_log_metablock(*cache, s, [&](const LogSegment& seg, unsigned, const Metablock&) {
		EXPECT_GE(seg.id, previous_id);
		previous_id = seg.id;
		++count;
	});
	EXPECT_EQ(count, 6u * blocks_per_segment);
}
