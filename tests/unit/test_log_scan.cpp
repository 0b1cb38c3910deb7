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

	const std::optional<SectorSource> src = s.find_sector(801);
	ASSERT_TRUE(src.has_value());
	EXPECT_EQ(src->block_sector, 800u);
	EXPECT_EQ(s.log[src->log_index].id, 1u);
	EXPECT_EQ(src->dirty, 0x03);
	EXPECT_FALSE(s.find_sector(802).has_value()); // not written: the backing device holds it
	EXPECT_FALSE(s.find_sector(79).has_value());
	ASSERT_TRUE(s.find_sector(1607).has_value());
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
	EXPECT_FALSE(s.find_sector(8).has_value());
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
	EXPECT_FALSE(s.find_sector(3 * blocks_per_segment * block_sectors).has_value());
	EXPECT_TRUE(s.find_sector(0).has_value());
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
	const std::optional<SectorSource> old_copy = s.find_sector(0);
	const std::optional<SectorSource> new_copy = s.find_sector(2);
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
	const std::optional<SectorSource> copy = s.find_sector(0);
	ASSERT_TRUE(copy.has_value());
	EXPECT_EQ(s.log[copy->log_index].id, 2u);
	EXPECT_EQ(copy->dirty_bits, 0x47);
	EXPECT_EQ(s.dirty_sectors, 4u);
	EXPECT_FALSE(s.find_sector(3).has_value());
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
	const std::optional<SectorSource> copy = s.find_sector(20);
	ASSERT_TRUE(copy.has_value());
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

// Slots whose header lies in a hole of a sparse image are not read but taken
// as the zeros a read returns (empty slots): the scan of the sparse file must
// equal the scan of the same bytes in memory, where nothing is a hole.
TEST(SparseScan, HolesAreEmptySlotsExactlyAsReadingThemGives)
{
	wbkit::testing::TempDir dir;
	const std::uint64_t slots = 300;
	const std::string path = dir.make_image("sparse.img", superblock_size + slots * segment_size);
	{
		auto cache = dir.open_rw(path);
		AlignedBuffer sector(sector_size);
		write_superblock_magic(sector.span());
		cache->write_exact(0, sector.span());
		LogWriter w(*cache, {.format = false});
		for (unsigned i = 0; i < 5 * blocks_per_segment; ++i)
			w.write(std::uint64_t(i) * 977 * block_sectors, pattern_bytes(block_size, i));
		w.flush();
		const Geometry g = w.geometry();
		// Far out in the holes: a stray header (a valid-looking id in the wrong
		// slot), and a header block whose only data is a byte in its last
		// sector (id 0: empty), so a hole ends inside a header block.
		AlignedBuffer block(2 * block_size); // its data block stays a hole: zeros
		SegmentHeader stray;
		stray.id = 2;
		stray.length = 1;
		stray.metablocks[0] = {.sector = 8, .dirty_bits = 0xff};
		write_segment_header(block.span(), stray);
		stray.checksum = segment_checksum(block.span(), 1);
		write_segment_header(block.span(), stray);
		cache->write_exact(g.slot_offset(200), block.span().first(block_size));
		AlignedBuffer last(sector_size);
		last.data()[sector_size - 1] = std::byte{1};
		cache->write_exact(g.slot_offset(250) + block_size - sector_size, last.span());
		cache->flush_or_throw();
	}
	auto file = open_device(path);
	// The file has holes where the test expects them (else it proves nothing).
	const Geometry g = Geometry::for_cache_bytes(file->size_bytes());
	const Device::DataRange after_log = file->next_data(g.slot_offset(10));
	EXPECT_GT(after_log.begin, g.slot_offset(10));
	EXPECT_LE(after_log.begin, g.slot_offset(200));

	std::vector<std::byte> bytes(file->size_bytes());
	file->read_exact(0, bytes);
	MemoryDevice memory("memory", std::move(bytes));
	EXPECT_EQ(memory.next_data(12345).begin, 12345u); // a device without holes

	for (bool verify : {true, false}) {
		SCOPED_TRACE(verify);
		const LogScan a = scan_log(*file, {.verify_checksums = verify});
		const LogScan b = scan_log(memory, {.verify_checksums = verify});
		ASSERT_EQ(a.slots.size(), b.slots.size());
		for (std::size_t i = 0; i < a.slots.size(); ++i) {
			EXPECT_EQ(a.slots[i].id, b.slots[i].id) << "slot " << i;
			EXPECT_EQ(a.slots[i].state, b.slots[i].state) << "slot " << i;
			EXPECT_EQ(a.slots[i].computed_checksum, b.slots[i].computed_checksum) << "slot " << i;
		}
		EXPECT_EQ(a.slots[200].id, 2u);
		EXPECT_EQ(a.slots[200].state, verify ? SlotState::valid : SlotState::unverified);
		EXPECT_EQ(a.slots[250].state, SlotState::empty);
		ASSERT_EQ(a.findings.size(), b.findings.size());
		for (std::size_t i = 0; i < a.findings.size(); ++i)
			EXPECT_EQ(a.findings[i].message, b.findings[i].message);
		EXPECT_TRUE(std::any_of(a.findings.begin(), a.findings.end(),
					[](const Finding& f) { return f.code == FindingCode::slot_mismatch; }));
		EXPECT_EQ(a.log.size(), b.log.size());
		EXPECT_EQ(a.dirty_blocks, 5u * blocks_per_segment + 1); // and the stray's block
		ASSERT_EQ(a.index.size(), b.index.size());
		for (std::size_t i = 0; i < a.index.size(); ++i) {
			EXPECT_EQ(a.index[i].block_sector, b.index[i].block_sector);
			EXPECT_EQ(a.index[i].log_index, b.index[i].log_index);
		}
	}
}

// docs/FORMAT.md, "Checksum": an append in place cut between its two writes
// leaves the committed length and checksum over a metablock area that names
// the blocks past it. The segment is valid at its committed length, and
// replay takes its first `length` blocks only.
TEST_F(ScanCase, AnAppendCutBetweenItsWritesIsValidAtItsCommittedLength)
{
	LogWriter w = make_writer();
	write_segment(w, 5, 0);    // segment 1, blocks 0..4
	write_segment(w, 10, 100); // segment 2, blocks 100..109
	cut_append(w, 2, 4);       // committed at 4: blocks 104..109 were the append
	const LogScan s = scan();
	const SlotInfo& slot = s.slots[1];
	EXPECT_EQ(slot.state, SlotState::valid);
	EXPECT_EQ(slot.length, 4u);
	EXPECT_EQ(slot.ignored_metablocks, 6u);
	EXPECT_EQ(slot.computed_checksum, slot.stored_checksum); // the reading that matched
	EXPECT_EQ(s.slots[0].ignored_metablocks, 0u);
	EXPECT_EQ(s.stop_reason, StopReason::end_of_ring);
	ASSERT_EQ(s.log.size(), 2u);
	EXPECT_EQ(s.log[1].length, 4u);
	EXPECT_EQ(s.last_flushed_id, 2u);
	EXPECT_EQ(s.dirty_blocks, 5u + 4u);
	EXPECT_TRUE(s.find_sector(103 * block_sectors).has_value());
	for (std::uint64_t block = 104; block < 110; ++block)
		EXPECT_FALSE(s.find_sector(block * block_sectors).has_value()) << "block " << block;

	ASSERT_EQ(s.findings.size(), 1u);
	const Finding& f = s.findings[0];
	EXPECT_EQ(f.code, FindingCode::append_not_committed);
	EXPECT_EQ(f.severity, Severity::info);
	EXPECT_EQ(f.place.slot, 1u);
	EXPECT_EQ(f.place.segment_id, 2u);
	EXPECT_NE(f.message.find("valid at its stored length (4); the 6 metablock(s) past it are ignored"),
		  std::string::npos)
		<< f.message;
	EXPECT_FALSE(has(s, FindingCode::unused_metablock_nonzero));
	EXPECT_FALSE(has_damage(s.findings));
}

TEST_F(ScanCase, AnAppendCutBeforeTheNewestSegmentKeepsTheLogGoing)
{
	LogWriter w = make_writer();
	write_segment(w, 5, 0);
	write_segment(w, 10, 100);
	write_segment(w, 3, 200);
	cut_append(w, 2, 7);
	const LogScan s = scan();
	EXPECT_EQ(s.slots[1].state, SlotState::valid);
	EXPECT_EQ(s.slots[1].ignored_metablocks, 3u);
	ASSERT_EQ(s.log.size(), 3u);
	EXPECT_EQ(s.last_flushed_id, 3u);
	EXPECT_EQ(s.dirty_blocks, 5u + 7u + 3u);
	EXPECT_FALSE(s.find_sector(107 * block_sectors).has_value());
	EXPECT_FALSE(s.refused());
	EXPECT_FALSE(has_damage(s.findings));
}

// The first append to a fresh segment of an open slot, cut: length 0, and
// the whole metablock area is the tail.
TEST_F(ScanCase, AnAppendCutAtLengthZeroLeavesAnEmptyValidSegment)
{
	LogWriter w = make_writer();
	write_segment(w, 3, 0);
	write_segment(w, 4, 50);
	cut_append(w, 2, 0);
	const LogScan s = scan();
	EXPECT_EQ(s.slots[1].state, SlotState::valid);
	EXPECT_EQ(s.slots[1].length, 0u);
	EXPECT_EQ(s.slots[1].ignored_metablocks, 4u);
	ASSERT_EQ(s.log.size(), 2u);
	EXPECT_EQ(s.dirty_blocks, 3u);
	EXPECT_FALSE(s.find_sector(50 * block_sectors).has_value());
	EXPECT_TRUE(has(s, FindingCode::append_not_committed));
	EXPECT_FALSE(has_damage(s.findings));
}

// Damage in the committed prefix: neither reading matches, and the
// metablock tail is only the unused area it always was.
TEST_F(ScanCase, AnAppendCutOverDamagedDataMatchesNeitherReading)
{
	LogWriter w = make_writer();
	write_segment(w, 5, 0);
	write_segment(w, 10, 100);
	cut_append(w, 2, 4);
	w.corrupt_segment_data(2); // a byte of data block 0
	const LogScan s = scan();
	EXPECT_EQ(s.slots[1].state, SlotState::checksum_mismatch);
	EXPECT_EQ(s.slots[1].ignored_metablocks, 0u);
	EXPECT_NE(s.slots[1].computed_checksum, s.slots[1].stored_checksum);
	EXPECT_EQ(s.stop_reason, StopReason::checksum_mismatch);
	EXPECT_EQ(s.stop_slot, 1u);
	EXPECT_EQ(s.log.size(), 1u);
	EXPECT_EQ(s.last_flushed_id, 1u);
	EXPECT_TRUE(has(s, FindingCode::torn_newest_segment)); // the newest: what a power cut leaves
	EXPECT_TRUE(has(s, FindingCode::unused_metablock_nonzero));
	EXPECT_FALSE(has(s, FindingCode::append_not_committed));
	EXPECT_FALSE(s.refused());
}

TEST_F(ScanCase, AnAppendCutOverDamagedDataBeforeTheNewestStopsTheLog)
{
	LogWriter w = make_writer();
	write_segment(w, 5, 0);
	write_segment(w, 10, 100);
	write_segment(w, 3, 200);
	cut_append(w, 2, 4);
	w.corrupt_segment_data(2);
	const LogScan s = scan();
	EXPECT_EQ(s.slots[1].state, SlotState::checksum_mismatch);
	EXPECT_EQ(s.stop_slot, 1u);
	EXPECT_EQ(s.log.size(), 1u);
	EXPECT_TRUE(has(s, FindingCode::checksum_mismatch));
	EXPECT_FALSE(has(s, FindingCode::append_not_committed));
	EXPECT_TRUE(s.refused());
}

// A checksum over the tail as it is: valid by the first reading, and the
// tail is the unused area a writer leaves zero, as before.
TEST_F(ScanCase, AChecksumOverANonZeroTailIsValidAsItWasBefore)
{
	LogWriter w = make_writer();
	write_segment(w, 5, 0);
	write_segment(w, 10, 100);
	cut_append(w, 2, 4, Checksum::recompute);
	const LogScan s = scan();
	EXPECT_EQ(s.slots[1].state, SlotState::valid);
	EXPECT_EQ(s.slots[1].ignored_metablocks, 0u);
	EXPECT_EQ(s.dirty_blocks, 5u + 4u);
	EXPECT_TRUE(has(s, FindingCode::unused_metablock_nonzero));
	EXPECT_FALSE(has(s, FindingCode::append_not_committed));
	EXPECT_TRUE(has_damage(s.findings));
}

// A header-only scan cannot tell an append that did not complete from a
// tail that should be zero: it reports the tail, as it always did.
TEST_F(ScanCase, HeadersOnlyScanReportsTheTailItCannotJudge)
{
	LogWriter w = make_writer();
	write_segment(w, 5, 0);
	write_segment(w, 10, 100);
	cut_append(w, 2, 4);
	const LogScan s = scan({.verify_checksums = false});
	EXPECT_EQ(s.slots[1].state, SlotState::unverified);
	EXPECT_EQ(s.slots[1].ignored_metablocks, 0u);
	EXPECT_EQ(s.dirty_blocks, 5u + 4u);
	EXPECT_TRUE(has(s, FindingCode::unused_metablock_nonzero));
	EXPECT_FALSE(has(s, FindingCode::append_not_committed));
}
