// Every finding code, triggered by a crafted image.
#include <fstream>
#include <iterator>
#include <set>

#include "scan_fixture.hpp"

using namespace wbkit;
using wbkit::testing::pattern_bytes;
using Findings = wbkit::testing::ScanTest;

TEST(FindingTable, EveryCodeHasOneUniqueNameAndSummary)
{
	std::set<std::string_view> names;
	for (const FindingInfo& info : all_findings()) {
		EXPECT_FALSE(info.name.empty());
		EXPECT_FALSE(info.summary.empty());
		EXPECT_TRUE(names.insert(info.name).second) << info.name;
		EXPECT_EQ(finding_info(info.code).name, info.name);
	}
	EXPECT_EQ(all_findings().size(), std::size_t(FindingCode::log_refused) + 1);
}

TEST_F(Findings, BadMagic)
{
	LogScan s = scan(); // never formatted
	EXPECT_TRUE(has(s, FindingCode::bad_magic));
	EXPECT_FALSE(s.replayable());
}

TEST_F(Findings, SuperblockPaddingNonzero)
{
	LogWriter w = make_writer();
	poke(100, std::byte{1});
	EXPECT_TRUE(has(scan(), FindingCode::superblock_padding_nonzero));
}

TEST_F(Findings, SuperblockUnreadable)
{
	LogWriter w = make_writer();
	FaultInjectingDevice faulty(open_device(cache_path));
	faulty.fail_reads(0, sector_size);
	LogScan s = scan_log(faulty);
	EXPECT_TRUE(has(s, FindingCode::superblock_unreadable));
	EXPECT_FALSE(s.replayable());
}

TEST_F(Findings, CacheTooSmall)
{
	std::string tiny = dir.make_image("tiny.img", superblock_size + segment_size - 1);
	auto dev = open_device(tiny);
	LogScan s = scan_log(*dev);
	EXPECT_TRUE(has(s, FindingCode::cache_too_small));
	EXPECT_EQ(s.geometry.nr_segments, 0u);
}

TEST_F(Findings, SuperblockRecordOutOfRange)
{
	LogWriter w = make_writer();
	write_full_segments(w, 1);
	w.set_superblock_record(7);
	EXPECT_TRUE(has(scan(), FindingCode::sb_record_out_of_range));
}

TEST_F(Findings, HeaderAndDataUnreadable)
{
	LogWriter w = make_writer();
	write_full_segments(w, 3);
	Geometry g = Geometry::for_cache_bytes(cache_bytes);
	{
		FaultInjectingDevice faulty(open_device(cache_path));
		faulty.fail_reads(g.slot_offset(1), sector_size);
		LogScan s = scan_log(faulty);
		EXPECT_TRUE(has(s, FindingCode::header_unreadable));
		EXPECT_EQ(s.stop_reason, StopReason::unreadable);
		EXPECT_EQ(s.last_flushed_id, 1u);
	}
	{
		FaultInjectingDevice faulty(open_device(cache_path));
		faulty.fail_reads(g.data_block_offset(2, 100), sector_size);
		LogScan s = scan_log(faulty);
		EXPECT_TRUE(has(s, FindingCode::data_unreadable));
		EXPECT_EQ(s.stop_reason, StopReason::unreadable);
		EXPECT_EQ(s.last_flushed_id, 2u);
	}
}

TEST_F(Findings, LengthTooLarge)
{
	LogWriter w = make_writer();
	write_full_segments(w, 2);
	patch_header(1, Checksum::stale, [](SegmentHeader& h) { h.length = 200; });
	LogScan s = scan();
	EXPECT_TRUE(has(s, FindingCode::length_too_large));
	EXPECT_EQ(s.slots[1].state, SlotState::length_too_large);
	EXPECT_EQ(s.last_flushed_id, 1u);
}

TEST_F(Findings, SlotMismatchAndIdRepeat)
{
	LogWriter w = make_writer();
	write_full_segments(w, 3);
	patch_header(2, Checksum::recompute, [](SegmentHeader& h) { h.id = 2; }); // id 2 again, in slot 2
	LogScan s = scan();
	EXPECT_TRUE(has(s, FindingCode::slot_mismatch));
	EXPECT_TRUE(has(s, FindingCode::id_repeat));
}

TEST_F(Findings, IdGap)
{
	LogWriter w = make_writer();
	write_full_segments(w, 3);
	patch_header(1, Checksum::stale, [](SegmentHeader& h) { h = SegmentHeader{}; });
	EXPECT_TRUE(has(scan(), FindingCode::id_gap));
}

TEST_F(Findings, HeaderPaddingNonzero)
{
	LogWriter w = make_writer();
	write_full_segments(w, 1);
	poke(superblock_size + 100, std::byte{1}); // not covered by the checksum
	LogScan s = scan();
	EXPECT_TRUE(has(s, FindingCode::header_padding_nonzero));
	EXPECT_EQ(s.slots[0].state, SlotState::valid);
}

// A tail the stored checksum covers as it is: no writer leaves one.
TEST_F(Findings, UnusedMetablockNonzero)
{
	LogWriter w = make_writer();
	w.write(0, pattern_bytes(block_size, 1));
	w.flush();
	poke(superblock_size + WB_METABLOCK_OFFSET(3), std::byte{1});
	AlignedBuffer seg(2 * block_size);
	cache->read_exact(superblock_size, seg.span());
	store_le<std::uint32_t>(seg.span(), WB_SEG_CHECKSUM_OFFSET, segment_checksum(seg.span(), 1));
	cache->write_exact(superblock_size, seg.span().first(sector_size));
	LogScan s = scan();
	EXPECT_EQ(s.slots[0].state, SlotState::valid);
	EXPECT_TRUE(has(s, FindingCode::unused_metablock_nonzero));
	EXPECT_FALSE(has(s, FindingCode::append_not_committed));
}

// A tail the stored checksum does not cover: the header of an append in
// place did not land (docs/FORMAT.md, "Checksum").
TEST_F(Findings, AppendNotCommitted)
{
	LogWriter w = make_writer();
	w.write(0, pattern_bytes(block_size, 1));
	w.flush();
	poke(superblock_size + WB_METABLOCK_OFFSET(3), std::byte{1});
	LogScan s = scan();
	EXPECT_EQ(s.slots[0].state, SlotState::valid);
	EXPECT_EQ(s.slots[0].ignored_metablocks, 3u);
	EXPECT_TRUE(has(s, FindingCode::append_not_committed));
	EXPECT_FALSE(has(s, FindingCode::unused_metablock_nonzero));
	EXPECT_FALSE(has_damage(s.findings));
}

TEST_F(Findings, MetablockPaddingNonzero)
{
	LogWriter w = make_writer();
	w.write(0, pattern_bytes(block_size, 1));
	w.flush();
	poke(superblock_size + WB_METABLOCK_OFFSET(0) + 15, std::byte{1});
	EXPECT_TRUE(has(scan(), FindingCode::metablock_padding_nonzero));
}

TEST_F(Findings, MetablockSectorUnaligned)
{
	LogWriter w = make_writer();
	w.write(0, pattern_bytes(block_size, 1));
	w.flush();
	patch_header(0, Checksum::recompute, [](SegmentHeader& h) { h.metablocks[0].sector = 13; });
	LogScan s = scan();
	EXPECT_TRUE(has(s, FindingCode::metablock_sector_unaligned));
	ASSERT_TRUE(s.find_sector(20).has_value()); // the kernel would still use it as is
	EXPECT_FALSE(s.find_sector(21).has_value());
}

TEST_F(Findings, MetablockSectorBeyondBacking)
{
	LogWriter w = make_writer();
	w.write(8000, pattern_bytes(block_size, 1));
	w.flush();
	EXPECT_FALSE(has(scan({.backing_bytes = 8000 * sector_size + block_size}),
			 FindingCode::metablock_sector_beyond_backing));
	EXPECT_TRUE(has(scan({.backing_bytes = 8000 * sector_size + block_size - 1}),
			FindingCode::metablock_sector_beyond_backing));
}

TEST_F(Findings, ChecksumLegacyInverted)
{
	LogWriter w = make_writer();
	write_full_segments(w, 2);
	patch_header(0, Checksum::stale, [](SegmentHeader& h) { h.checksum = ~h.checksum; });
	LogScan s = scan();
	EXPECT_TRUE(has(s, FindingCode::checksum_legacy_inverted));
	EXPECT_EQ(s.last_flushed_id, 0u); // recognised, not accepted
}

TEST_F(Findings, ChecksumMismatchTornAndDiscarded)
{
	LogWriter w = make_writer();
	write_full_segments(w, 4);
	w.corrupt_segment_data(2);
	w.tear_segment(4);
	LogScan s = scan();
	EXPECT_TRUE(has(s, FindingCode::checksum_mismatch));
	EXPECT_TRUE(has(s, FindingCode::valid_segments_discarded));
	EXPECT_EQ(s.discarded_segments, 1u); // segment 3; segment 4 is torn
}

TEST_F(Findings, EveryFindingNamesItsPlace)
{
	LogWriter w = make_writer();
	write_full_segments(w, 2);
	w.corrupt_segment_data(1);
	LogScan s = scan();
	for (const Finding& f : s.findings)
		EXPECT_NE(f.place_text(), "cache") << f.name();
}

TEST(FindingTable, ToolsReferenceDocumentsEveryCodeWithItsSeverity)
{
	std::ifstream readme(std::string(WBKIT_SOURCE_DIR) + "/docs/tools.md");
	ASSERT_TRUE(readme) << "docs/tools.md not found";
	std::string text((std::istreambuf_iterator<char>(readme)), std::istreambuf_iterator<char>());
	for (const FindingInfo& info : all_findings()) {
		std::string row = "| `" + std::string(info.name) + "` | " + std::string(severity_name(info.severity)) + " |";
		EXPECT_NE(text.find(row), std::string::npos) << "docs/tools.md lacks the row for " << info.name;
	}
}
