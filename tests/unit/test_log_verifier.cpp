// The background checksum check of a headers-only scan (LogVerifier), the
// replay that writes while it runs, and the packed sector index.
#include "scan_fixture.hpp"
#include "wbkit/replay.hpp"

using namespace wbkit;
using wbkit::testing::pattern_bytes;
using VerifierCase = wbkit::testing::ScanTest;

namespace {

void expect_same_scan(const LogScan& a, const LogScan& b)
{
	EXPECT_EQ(a.verified, b.verified);
	EXPECT_EQ(a.stop_reason, b.stop_reason);
	EXPECT_EQ(a.stop_slot, b.stop_slot);
	EXPECT_EQ(a.max_id, b.max_id);
	EXPECT_EQ(a.discarded_segments, b.discarded_segments);
	EXPECT_EQ(a.last_flushed_id, b.last_flushed_id);
	EXPECT_EQ(a.last_writeback_id, b.last_writeback_id);
	EXPECT_EQ(a.dirty_blocks, b.dirty_blocks);
	EXPECT_EQ(a.dirty_sectors, b.dirty_sectors);
	ASSERT_EQ(a.slots.size(), b.slots.size());
	for (std::size_t i = 0; i < a.slots.size(); ++i) {
		EXPECT_EQ(a.slots[i].id, b.slots[i].id) << "slot " << i;
		EXPECT_EQ(a.slots[i].state, b.slots[i].state) << "slot " << i;
		EXPECT_EQ(a.slots[i].stored_checksum, b.slots[i].stored_checksum) << "slot " << i;
		EXPECT_EQ(a.slots[i].computed_checksum, b.slots[i].computed_checksum) << "slot " << i;
		EXPECT_EQ(a.slots[i].in_log, b.slots[i].in_log) << "slot " << i;
		EXPECT_EQ(a.slots[i].ignored_metablocks, b.slots[i].ignored_metablocks) << "slot " << i;
	}
	ASSERT_EQ(a.log.size(), b.log.size());
	for (std::size_t i = 0; i < a.log.size(); ++i) {
		EXPECT_EQ(a.log[i].slot, b.log[i].slot);
		EXPECT_EQ(a.log[i].written_back, b.log[i].written_back);
	}
	ASSERT_EQ(a.findings.size(), b.findings.size());
	for (std::size_t i = 0; i < a.findings.size(); ++i) {
		EXPECT_EQ(a.findings[i].code, b.findings[i].code);
		EXPECT_EQ(a.findings[i].message, b.findings[i].message);
	}
	ASSERT_EQ(a.index.size(), b.index.size());
	for (std::size_t i = 0; i < a.index.size(); ++i) {
		const SectorSource x = a.index[i], y = b.index[i];
		EXPECT_EQ(x.block_sector, y.block_sector);
		EXPECT_EQ(x.log_index, y.log_index);
		EXPECT_EQ(x.metablock, y.metablock);
		EXPECT_EQ(x.sectors, y.sectors);
		EXPECT_EQ(x.dirty, y.dirty);
		EXPECT_EQ(x.dirty_bits, y.dirty_bits);
	}
}

} // namespace

TEST_F(VerifierCase, FinishedVerificationIsTheVerifyingScan)
{
	LogWriter w = make_writer();
	write_full_segments(w, 8); // 6 slots: wraps around, ids 1..2 written back
	w.write(3, pattern_bytes(2 * sector_size, 7));
	w.write_clean(16, pattern_bytes(block_size, 8));
	w.flush();
	LogScan headers = scan({.verify_checksums = false});
	ASSERT_TRUE(LogVerifier::applicable(headers));
	LogVerifier verifier(*cache, headers);
	for (const LogSegment& seg : headers.log)
		EXPECT_TRUE(verifier.wait_until_verified(seg.slot));
	ASSERT_TRUE(verifier.finish(headers));
	expect_same_scan(headers, scan());
}

// The headers alone name a non-zero metablock tail unused-metablock-nonzero;
// verified, an append in place cut between its two writes is what the
// verifying scan names it, in the same place.
TEST_F(VerifierCase, AnAppendCutBetweenItsWritesVerifiesAsTheVerifyingScanReadsIt)
{
	LogWriter w = make_writer();
	write_segment(w, 5, 0);
	write_segment(w, 10, 100);
	write_segment(w, 3, 200);
	cut_append(w, 2, 4);
	cut_append(w, 3, 1);
	LogScan headers = scan({.verify_checksums = false});
	ASSERT_TRUE(LogVerifier::applicable(headers));
	EXPECT_TRUE(has(headers, FindingCode::unused_metablock_nonzero));
	LogVerifier verifier(*cache, headers);
	for (const LogSegment& seg : headers.log)
		EXPECT_TRUE(verifier.wait_until_verified(seg.slot));
	ASSERT_TRUE(verifier.finish(headers));
	EXPECT_EQ(headers.slots[1].ignored_metablocks, 6u);
	EXPECT_EQ(headers.slots[2].ignored_metablocks, 2u);
	EXPECT_FALSE(has(headers, FindingCode::unused_metablock_nonzero));
	EXPECT_FALSE(has_damage(headers.findings));
	expect_same_scan(headers, scan());
}

TEST_F(VerifierCase, ACorruptSegmentStopsWhatMayBeWrittenAtIt)
{
	LogWriter w = make_writer();
	write_full_segments(w, 5); // ids 1..5 in slots 0..4
	w.corrupt_segment_data(3);
	LogScan headers = scan({.verify_checksums = false});
	ASSERT_TRUE(LogVerifier::applicable(headers));
	EXPECT_EQ(headers.log.size(), 5u); // the headers alone do not show the damage
	LogVerifier verifier(*cache, headers);
	EXPECT_TRUE(verifier.wait_until_verified(0));
	EXPECT_TRUE(verifier.wait_until_verified(1));
	EXPECT_FALSE(verifier.wait_until_verified(2));
	EXPECT_FALSE(verifier.wait_until_verified(4)); // valid itself, but after the stop point
	EXPECT_FALSE(verifier.finish(headers));
	EXPECT_EQ(headers.stop_reason, StopReason::not_verified); // left as it was
}

TEST_F(VerifierCase, AWalkThatStopsAtAHeaderIsNotForTheVerifier)
{
	LogWriter w = make_writer();
	write_full_segments(w, 3);
	patch_header(1, Checksum::recompute, [](SegmentHeader& h) { h.length = blocks_per_segment + 1; });
	EXPECT_FALSE(LogVerifier::applicable(scan({.verify_checksums = false})));
	EXPECT_FALSE(LogVerifier::applicable(scan())); // verified already
}

TEST_F(VerifierCase, ReplayWritesOnlyWhatTheVerifiedLogReplays)
{
	LogWriter w = make_writer();
	write_full_segments(w, 5); // blocks 0..634 in log order, ids 1..5 in slots 0..4
	w.corrupt_segment_data(3); // blocks 254..380: the log stops there
	const std::vector<std::byte> before = pattern_bytes(backing_bytes, 99);
	backing->write_exact(0, before);

	LogScan headers = scan({.verify_checksums = false});
	LogVerifier verifier(*cache, headers);
	const ReplayOptions small{.max_extent_bytes = 16 * block_size};
	const ReplayPlan early = replay_plan(headers, small);
	MemoryDevice partial("partial", before);
	const ReplayResult result = execute_replay(early, *cache, partial, {.may_write = write_when_verified(verifier)});
	EXPECT_TRUE(result.stopped);
	// 15 extents of 16 blocks lie wholly in segments 1 and 2; the 16th takes blocks of segment 3.
	EXPECT_EQ(result.bytes_written, 15u * 16 * block_size);
	EXPECT_FALSE(verifier.finish(headers));

	const LogScan verified = scan();
	MemoryDevice full("full", before);
	execute_replay(replay_plan(verified, small), *cache, full);
	for (std::uint64_t at = 0; at < backing_bytes; at += sector_size) {
		const bool untouched = std::equal(partial.bytes().begin() + at, partial.bytes().begin() + at + sector_size,
						  before.begin() + at);
		const bool as_replayed = std::equal(partial.bytes().begin() + at, partial.bytes().begin() + at + sector_size,
						    full.bytes().begin() + at);
		ASSERT_TRUE(untouched || as_replayed) << "sector " << at / sector_size;
	}
}

TEST_F(VerifierCase, IndexKeepsSectorsAcrossHigh32BitRuns)
{
	LogWriter w = make_writer();
	write_full_segments(w, 2);
	const std::uint64_t far[] = {1ULL << 32, (1ULL << 32) + 8, 1ULL << 40, (1ULL << 63) + 16, ~0ULL - 7};
	patch_header(1, Checksum::recompute, [&](SegmentHeader& h) {
		for (unsigned i = 0; i < std::size(far); ++i)
			h.metablocks[i].sector = far[i];
	});
	const LogScan s = scan();
	ASSERT_EQ(s.index.size(), 2u * blocks_per_segment);
	std::uint64_t previous = 0;
	for (std::size_t i = 0; i < s.index.size(); ++i) {
		EXPECT_LE(previous, s.index.block_sector(i));
		previous = s.index.block_sector(i);
		EXPECT_EQ(s.index[i].block_sector, previous);
	}
	for (unsigned i = 0; i < std::size(far); ++i) {
		const std::optional<SectorSource> src = s.find_sector(far[i] + 7);
		ASSERT_TRUE(src.has_value()) << far[i];
		EXPECT_EQ(src->block_sector, far[i]);
		EXPECT_EQ(s.log[src->log_index].id, 2u);
		EXPECT_EQ(src->metablock, i);
		EXPECT_EQ(src->dirty, 0xff);
		EXPECT_EQ(s.index.lower_bound(far[i]), s.index.size() - std::size(far) + i);
	}
	const LogScan copy = s; // an index copies into its own memory
	EXPECT_EQ(copy.index[copy.index.size() - 1].block_sector, ~0ULL - 7);
	EXPECT_LE(s.index.memory_bytes(), 4096 + s.index.size() * 12 + 64 * sizeof(std::size_t));
}

// A log that rewrites the same blocks in every segment gathers far more
// metablock entries (a large region of its own) than its index keeps (a small
// one): the index moves into the small region whole, in a sparse cache of
// headers only, with and without verification.
TEST(IndexTrim, ManyOverwritesLeaveAnIndexOfTheNewestCopies)
{
	wbkit::testing::TempDir dir;
	const std::uint64_t slots = 700; // 700 * 127 entries of 14 bytes: more than 1 MiB
	const std::string path = dir.make_image("overwritten.img", superblock_size + slots * segment_size);
	{
		auto cache = dir.open_rw(path);
		AlignedBuffer sector(sector_size);
		write_superblock_magic(sector.span());
		cache->write_exact(0, sector.span());
		const Geometry g = Geometry::for_cache_bytes(cache->size_bytes());
		AlignedBuffer segment(segment_size); // the data blocks stay holes: zeros
		for (std::uint64_t id = 1; id <= slots; ++id) {
			SegmentHeader h;
			h.id = id;
			h.length = blocks_per_segment;
			for (unsigned i = 0; i < blocks_per_segment; ++i)
				h.metablocks[i] = {.sector = std::uint64_t(i) * block_sectors, .dirty_bits = 0xff};
			write_segment_header(segment.span(), h);
			h.checksum = segment_checksum(segment.span(), h.length);
			write_segment_header(segment.span(), h);
			cache->write_exact(g.slot_offset(g.slot_of_id(id)), segment.span().first(block_size));
		}
		cache->flush_or_throw();
	}
	auto file = open_device(path);
	for (bool verify : {true, false}) {
		SCOPED_TRACE(verify);
		const LogScan s = scan_log(*file, {.verify_checksums = verify});
		ASSERT_EQ(s.log.size(), slots);
		ASSERT_EQ(s.index.size(), blocks_per_segment);
		EXPECT_EQ(s.dirty_blocks, blocks_per_segment);
		for (unsigned i = 0; i < blocks_per_segment; ++i) {
			const SectorSource src = s.index[i];
			EXPECT_EQ(src.block_sector, std::uint64_t(i) * block_sectors);
			EXPECT_EQ(s.log[src.log_index].id, slots);
			EXPECT_EQ(src.metablock, i);
			EXPECT_EQ(src.dirty, 0xff);
		}
		EXPECT_LE(s.index.memory_bytes(), 4096 + s.index.size() * 12 + 64 * sizeof(std::size_t));
		const LogScan copy = s;
		EXPECT_EQ(copy.index[blocks_per_segment - 1].block_sector, std::uint64_t(blocks_per_segment - 1) * block_sectors);
	}
}
