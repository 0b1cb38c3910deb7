// The torn-rewrite rule of docs/FORMAT.md replay step 2 (wb_torn_rewrite) in
// the library's walk, its replay and its recovery: a slot near the oldest
// whose checksum fails while it holds the id one lap behind is a rewrite the
// power cut tore, not the end of the log. Every case checks the replay
// against a model of the flushed writes: none may be lost, and no data of a
// segment the rule counts as written back may be written again.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>

#include "temp_image.hpp"
#include "wbkit/errors.hpp"
#include "wbkit/log_scan.hpp"
#include "wbkit/log_writer.hpp"
#include "wbkit/recover.hpp"
#include "wbkit/replay.hpp"
#include "wbkit/replay_run.hpp"

using namespace wbkit;
using namespace wbkit::testing;

namespace {

constexpr std::uint64_t backing_bytes = 4ULL << 20;

// A cache of nr slots and its backing device, written by the library's log
// writer (which writes a segment back before its slot is reused), and the
// newest flushed write of every block. Formatted as upstream does (no trust
// record: a log another writer left, where the rule applies) unless
// own_log says it is dm-wbkit's.
class Rig {
public:
	explicit Rig(std::uint64_t nr, bool own_log = false)
	{
		cache_path = dir.make_image("cache.img", superblock_size + nr * segment_size);
		backing_path = dir.make_image("backing.img", backing_bytes);
		cache = dir.open_rw(cache_path);
		backing = dir.open_rw(backing_path);
		writer.emplace(*cache, LogWriterOptions{.trust_record = own_log, .backing = backing.get()});
	}

	// One segment: blocks 0..2, which every segment writes; a block of its
	// own; and a block it shares with the segment before or after it (ids 2k
	// and 2k + 1), so that replaying the older of the two over the newer
	// one shows.
	void segment()
	{
		const std::uint64_t id = writer->open_id();
		for (std::uint64_t block : {std::uint64_t(0), std::uint64_t(1), std::uint64_t(2), 100 + id % 300,
					    400 + (id / 2) % 300})
			write(block, id * 1000 + block);
		writer->flush();
	}

	void segments(unsigned n)
	{
		for (unsigned i = 0; i < n; ++i)
			segment();
	}

	// What a power cut leaves when a writer had begun to reuse segment id's
	// slot: the segment was written back first, then the new write landed
	// some sectors but not the header.
	void tear_rewrite(std::uint64_t id)
	{
		writer->write_back_through(id);
		writer->corrupt_segment_data(id);
	}

	std::uint64_t slot_of(std::uint64_t id) const { return writer->geometry().slot_of_id(id); }

	void set_id(std::uint64_t slot, std::uint64_t id)
	{
		AlignedBuffer block(block_size);
		const std::uint64_t offset = writer->geometry().slot_offset(slot);
		cache->read_exact(offset, block.span());
		SegmentHeader h = parse_segment_header(block.span());
		h.id = id; // outside the checksum
		write_segment_header(block.span(), h);
		cache->write_exact(offset, block.span());
	}

	LogScan scan(ScanOptions options = {}) { return scan_log(*cache, options); }

	// The replay onto the backing device, then every block of the model.
	void replay_and_check(const LogScan& s)
	{
		execute_replay(replay_plan(s), *cache, *backing);
		check_backing();
	}

	// Every block of the model but `lost` (a damaged segment's own block).
	void check_backing(std::optional<std::uint64_t> lost = std::nullopt)
	{
		std::vector<std::byte> block(block_size);
		for (const auto& [blk, seed] : model) {
			if (blk == lost)
				continue;
			backing->read_exact(blk * block_size, block);
			EXPECT_TRUE(block == pattern_bytes(block_size, seed)) << "block " << blk << " lost write " << seed;
		}
	}

	TempDir dir;
	std::string cache_path, backing_path;
	std::unique_ptr<Device> cache, backing;
	std::optional<LogWriter> writer;
	std::map<std::uint64_t, std::uint64_t> model; // block -> seed of its newest flushed write

private:
	void write(std::uint64_t block, std::uint64_t seed)
	{
		writer->write(block * block_sectors, pattern_bytes(block_size, seed));
		model[block] = seed;
	}
};

std::size_t count(const LogScan& s, FindingCode code)
{
	return std::size_t(
		std::count_if(s.findings.begin(), s.findings.end(), [&](const Finding& f) { return f.code == code; }));
}

Severity f_severity(const LogScan& s, FindingCode code)
{
	for (const Finding& f : s.findings)
		if (f.code == code)
			return f.severity;
	ADD_FAILURE() << "no such finding";
	return Severity::info;
}

std::vector<std::uint64_t> log_ids(const LogScan& s)
{
	std::vector<std::uint64_t> ids;
	for (const LogSegment& seg : s.log)
		ids.push_back(seg.id);
	return ids;
}

// first..last, empty when last < first; last may be 2^64 - 1.
std::vector<std::uint64_t> ids(std::uint64_t first, std::uint64_t last)
{
	std::vector<std::uint64_t> out;
	for (std::uint64_t id = first; first <= last; ++id) {
		out.push_back(id);
		if (id == last)
			break;
	}
	return out;
}

// Tears segment torn's slot, then: the log is first..last, the rule counts
// torn as written back, and the replay keeps every flushed write.
void expect_skipped(Rig& r, std::uint64_t torn, std::uint64_t first, std::uint64_t last)
{
	r.tear_rewrite(torn);
	const LogScan s = r.scan();
	EXPECT_EQ(s.rewritten_id, torn);
	EXPECT_EQ(log_ids(s), ids(first, last));
	EXPECT_EQ(s.last_writeback_id, torn);
	r.replay_and_check(s);
}

} // namespace

TEST(TornRewrite, AtStepZeroOfAFullRingTheLogStartsAfterIt)
{
	Rig r(6);
	r.segments(9); // ids 4..9 on the cache, 4 the oldest
	r.tear_rewrite(4);
	const LogScan s = r.scan();
	EXPECT_EQ(s.rewrite_slot, r.slot_of(4));
	EXPECT_EQ(s.rewritten_id, 4u);
	EXPECT_EQ(log_ids(s), ids(5, 9));
	EXPECT_EQ(s.stop_reason, StopReason::end_of_ring);
	EXPECT_FALSE(s.stop_slot.has_value());
	EXPECT_EQ(s.last_flushed_id, 9u);
	EXPECT_EQ(s.last_writeback_id, 4u);
	EXPECT_EQ(count(s, FindingCode::torn_rewrite_skipped), 1u);
	EXPECT_EQ(count(s, FindingCode::checksum_mismatch), 0u);
	// A warning: media damage in that slot would read the same, and the
	// finding says what the other reading would lose.
	EXPECT_TRUE(has_damage(s.findings));
	EXPECT_EQ(f_severity(s, FindingCode::torn_rewrite_skipped), Severity::warning);
	const Finding& f = s.findings.back();
	EXPECT_EQ(f.place.slot, r.slot_of(4));
	EXPECT_EQ(f.place.segment_id, 4u);
	EXPECT_NE(f.message.find("it and the 0 segment(s) before it (ids up to 4) count as written back"),
		  std::string::npos)
		<< f.message;
	EXPECT_NE(f.message.find("read as damage, the log would stop at it"), std::string::npos) << f.message;
	EXPECT_FALSE(s.slots[r.slot_of(4)].in_log);
	r.replay_and_check(s);
}

TEST(TornRewrite, AtStepThreeTheSegmentsBeforeItAreForgotten)
{
	Rig r(6);
	r.segments(9); // ids 4..9; id 7 at step 3
	r.tear_rewrite(7);
	const LogScan s = r.scan();
	EXPECT_EQ(s.rewrite_slot, r.slot_of(7));
	EXPECT_EQ(log_ids(s), ids(8, 9));
	EXPECT_EQ(s.last_writeback_id, 7u);
	for (std::uint64_t id = 4; id <= 7; ++id)
		EXPECT_FALSE(s.slots[r.slot_of(id)].in_log) << id;
	// Nothing of ids 4..6 is in the index: the replay writes none of it.
	for (const SectorSource& src : s.index)
		EXPECT_GE(s.log[src.log_index].id, 8u);
	EXPECT_NE(s.findings.back().message.find("the 3 segment(s) before it"), std::string::npos);
	EXPECT_FALSE(s.refused());
	r.replay_and_check(s);

	// What wbreplay reports for each slot.
	const ReplayPlan plan = replay_plan(s);
	std::map<std::uint64_t, SegmentReason> reason;
	for (const SegmentUse& u : segment_uses(plan))
		reason[u.id] = u.reason;
	EXPECT_EQ(reason[4], SegmentReason::already_written_back);
	EXPECT_EQ(reason[6], SegmentReason::already_written_back);
	EXPECT_EQ(reason[7], SegmentReason::torn_rewrite);
	EXPECT_EQ(reason[8], SegmentReason::replayed);
	EXPECT_TRUE(replay_shortfalls(plan).empty());
}

TEST(TornRewrite, TheLastStepOfTheWindowCountsAndTheNextDoesNot)
{
	{
		Rig r(12);
		r.segments(14); // ids 3..14; id 10 at step 7
		expect_skipped(r, 10, 11, 14);
	}
	{
		Rig r(12);
		r.segments(14); // id 11 at step 8: damage, as before the rule
		r.writer->corrupt_segment_data(11);
		const LogScan s = r.scan();
		EXPECT_FALSE(s.rewrite_slot.has_value());
		EXPECT_EQ(s.stop_slot, r.slot_of(11));
		EXPECT_EQ(log_ids(s), ids(3, 10));
		EXPECT_EQ(s.discarded_segments, 3u);
		EXPECT_EQ(count(s, FindingCode::checksum_mismatch), 1u);
		EXPECT_EQ(count(s, FindingCode::valid_segments_discarded), 1u);
		EXPECT_EQ(count(s, FindingCode::torn_rewrite_skipped), 0u);
	}
}

TEST(TornRewrite, OneSlotIsTheNewestTornAsTheNewestIs)
{
	Rig r(1);
	r.segments(3); // id 3 in the only slot
	r.writer->corrupt_segment_data(3);
	const LogScan s = r.scan();
	EXPECT_FALSE(s.rewrite_slot.has_value());
	EXPECT_EQ(s.stop_slot, 0u);
	EXPECT_TRUE(s.log.empty());
	EXPECT_EQ(count(s, FindingCode::torn_newest_segment), 1u);
	EXPECT_EQ(s.last_writeback_id, 0u);
}

TEST(TornRewrite, TwoSlotsOnlyTheOlder)
{
	Rig r(2);
	r.segments(5);              // ids 4, 5
	expect_skipped(r, 4, 5, 5); // step 0; step 1 is the newest
}

TEST(TornRewrite, ALogThatHasNotFilledTheRingStopsAsBefore)
{
	for (std::uint64_t damaged : {1, 2, 3}) {
		Rig r(6);
		r.segments(5); // ids 1..5, slot 5 empty at step 0: ids 1..4 lie at steps 1..4
		r.writer->corrupt_segment_data(damaged);
		const LogScan s = r.scan();
		EXPECT_FALSE(s.rewrite_slot.has_value()) << damaged;
		EXPECT_EQ(s.stop_slot, r.slot_of(damaged));
		EXPECT_EQ(log_ids(s), ids(1, damaged - 1));
		EXPECT_EQ(s.last_writeback_id, 0u);
		EXPECT_EQ(count(s, FindingCode::checksum_mismatch), 1u);
	}
	// Filled exactly once: id 1 at step 0 is a torn rewrite.
	Rig r(6);
	r.segments(6);
	expect_skipped(r, 1, 2, 6);
}

TEST(TornRewrite, WithATornNewestSegmentToo)
{
	Rig r(6);
	r.segments(9);
	r.tear_rewrite(5);                 // step 1
	r.writer->corrupt_segment_data(9); // the newest, step 5: never acknowledged
	r.model.clear();                   // what segment 9 held was not flushed: rebuild the model up to 8
	for (std::uint64_t id = 1; id <= 8; ++id)
		for (std::uint64_t block : {std::uint64_t(0), std::uint64_t(1), std::uint64_t(2), 100 + id % 300,
					    400 + (id / 2) % 300})
			r.model[block] = id * 1000 + block;
	const LogScan s = r.scan();
	EXPECT_EQ(s.rewritten_id, 5u);
	EXPECT_EQ(log_ids(s), ids(6, 8));
	EXPECT_EQ(s.stop_slot, r.slot_of(9));
	EXPECT_EQ(s.last_flushed_id, 8u);
	EXPECT_EQ(s.last_writeback_id, 5u); // max(8 - 6, 5)
	EXPECT_EQ(count(s, FindingCode::torn_rewrite_skipped), 1u);
	EXPECT_EQ(count(s, FindingCode::torn_newest_segment), 1u);
	EXPECT_FALSE(s.refused());
	r.replay_and_check(s);
}

TEST(TornRewrite, OfTwoTornSlotsInTheWindowTheLaterWins)
{
	Rig r(6);
	r.segments(9);
	r.tear_rewrite(4); // step 0
	r.tear_rewrite(6); // step 2
	const LogScan s = r.scan();
	EXPECT_EQ(s.rewrite_slot, r.slot_of(6));
	EXPECT_EQ(s.rewritten_id, 6u);
	EXPECT_EQ(log_ids(s), ids(7, 9));
	EXPECT_EQ(s.last_writeback_id, 6u);
	EXPECT_EQ(count(s, FindingCode::torn_rewrite_skipped), 2u);
	EXPECT_EQ(count(s, FindingCode::id_gap) + count(s, FindingCode::id_repeat), 0u);
	r.replay_and_check(s);

	std::map<std::uint64_t, SegmentReason> reason;
	for (const SegmentUse& u : segment_uses(replay_plan(s)))
		reason[u.id] = u.reason;
	EXPECT_EQ(reason[4], SegmentReason::torn_rewrite);
	EXPECT_EQ(reason[5], SegmentReason::already_written_back);
	EXPECT_EQ(reason[6], SegmentReason::torn_rewrite);
}

TEST(TornRewrite, AnInvertedChecksumOrAnImpossibleLengthCountsAsAMismatch)
{
	{
		Rig r(6);
		r.segments(9);
		r.writer->write_back_through(5);
		const LogScan before = r.scan();
		const std::uint32_t computed = before.slots[r.slot_of(5)].computed_checksum;
		AlignedBuffer block(block_size);
		const std::uint64_t offset = r.writer->geometry().slot_offset(r.slot_of(5));
		r.cache->read_exact(offset, block.span());
		SegmentHeader h = parse_segment_header(block.span());
		h.checksum = ~computed;
		write_segment_header(block.span(), h);
		r.cache->write_exact(offset, block.span());
		const LogScan s = r.scan();
		EXPECT_EQ(s.slots[r.slot_of(5)].state, SlotState::legacy_checksum);
		EXPECT_EQ(s.rewritten_id, 5u);
		EXPECT_EQ(log_ids(s), ids(6, 9));
		EXPECT_EQ(count(s, FindingCode::checksum_legacy_inverted), 0u);
		r.replay_and_check(s);
	}
	{
		Rig r(6);
		r.segments(9);
		r.writer->write_back_through(5);
		AlignedBuffer block(block_size);
		const std::uint64_t offset = r.writer->geometry().slot_offset(r.slot_of(5));
		r.cache->read_exact(offset, block.span());
		SegmentHeader h = parse_segment_header(block.span());
		h.length = blocks_per_segment + 1;
		write_segment_header(block.span(), h);
		r.cache->write_exact(offset, block.span());
		const LogScan s = r.scan();
		EXPECT_EQ(s.rewritten_id, 5u);
		EXPECT_EQ(log_ids(s), ids(6, 9));
		EXPECT_EQ(count(s, FindingCode::length_too_large), 1u); // still reported when the slot is read
		r.replay_and_check(s);
	}
}

TEST(TornRewrite, IdsAtTheTopOfThe64BitRange)
{
	constexpr std::uint64_t max64 = std::numeric_limits<std::uint64_t>::max();
	Rig r(6);
	r.segments(9); // ids 4..9 in slots 3, 4, 5, 0, 1, 2
	// Shift every id by a multiple of 6 (slots stay) so that the newest is 2^64 - 1.
	const std::uint64_t base = max64 - 9;
	ASSERT_EQ(base % 6, 0u);
	for (std::uint64_t id = 4; id <= 9; ++id)
		r.set_id(r.slot_of(id), base + id);
	r.tear_rewrite(5); // step 1
	const LogScan s = r.scan();
	EXPECT_EQ(s.max_id, max64);
	EXPECT_EQ(s.rewritten_id, base + 5);
	EXPECT_EQ(log_ids(s), ids(base + 6, max64));
	EXPECT_EQ(s.last_flushed_id, max64);
	EXPECT_EQ(s.last_writeback_id, base + 5);
	EXPECT_FALSE(s.refused());
	r.replay_and_check(s);
}

TEST(TornRewrite, AnIdThatIsNotOneLapBehindStopsAsBefore)
{
	Rig r(6);
	r.segments(21); // ids 16..21; id 16 in slot 3 at step 0
	r.writer->corrupt_segment_data(16);
	// Two laps behind: same slot, not the id a writer reuses (10), nor the
	// one a segment lost in flight leaves (10 too: one lap below 16).
	r.set_id(r.slot_of(16), 4);
	const LogScan s = r.scan();
	EXPECT_FALSE(s.rewrite_slot.has_value());
	EXPECT_TRUE(s.lost_slots.empty());
	EXPECT_EQ(s.stop_slot, r.slot_of(16));
	EXPECT_TRUE(s.log.empty());
	EXPECT_EQ(count(s, FindingCode::checksum_mismatch), 1u);
	EXPECT_EQ(count(s, FindingCode::valid_segments_discarded), 1u);
	EXPECT_EQ(count(s, FindingCode::id_gap), 1u); // 4 then 17
}

TEST(TornRewrite, TheSuperblockRecordAndTheRuleTakeTheLarger)
{
	for (const auto& [record, expected] :
	     std::vector<std::pair<std::uint64_t, std::uint64_t>>{{0, 5}, {3, 5}, {5, 5}, {7, 7}, {9, 9}, {42, 9}}) {
		Rig r(6);
		r.segments(9);
		r.tear_rewrite(5);
		if (record)
			r.writer->write_back_through(std::min<std::uint64_t>(record, 9));
		r.writer->set_superblock_record(record);
		const LogScan s = r.scan();
		EXPECT_EQ(s.rewritten_id, 5u) << record;
		EXPECT_EQ(s.last_writeback_id, expected) << record;
		EXPECT_EQ(count(s, FindingCode::sb_record_out_of_range), record > 9 ? 1u : 0u) << record;
		r.replay_and_check(s);
	}
}

TEST(TornRewrite, EmptySlotsBeforeItAreSkipped)
{
	Rig r(6);
	r.segments(9);
	r.tear_rewrite(6);
	r.set_id(r.slot_of(4), 0); // invalidated ahead of its reuse
	const LogScan s = r.scan();
	EXPECT_EQ(s.rewritten_id, 6u);
	EXPECT_EQ(log_ids(s), ids(7, 9));
	r.replay_and_check(s);
}

// The torn slot's metablocks may be the new segment's: a headers-only scan
// then takes the segment before it for the newest copy of a block the torn
// one had (and wrote back). wbreplay writes while it verifies: that copy
// must not be written before the torn slot is known.
TEST(TornRewrite, AReplayThatWritesWhileItVerifiesWritesNothingOfTheForgottenSegments)
{
	Rig r(6);
	r.segments(9); // ids 4 and 5 both write block 402
	r.tear_rewrite(5);
	AlignedBuffer block(block_size);
	const std::uint64_t offset = r.writer->geometry().slot_offset(r.slot_of(5));
	r.cache->read_exact(offset, block.span());
	SegmentHeader h = parse_segment_header(block.span());
	for (unsigned i = 0; i < h.length; ++i)
		if (h.metablocks[i].sector == 402 * block_sectors)
			h.metablocks[i].sector = 900 * block_sectors;
	write_segment_header(block.span(), h);
	r.cache->write_exact(offset, block.span());

	const LogScan headers = r.scan({.verify_checksums = false});
	ASSERT_TRUE(LogVerifier::applicable(headers));
	{
		LogVerifier verifier(*r.cache, headers);
		EXPECT_FALSE(verifier.wait_until_verified(r.slot_of(4))); // step 0: waits for the torn step 1
	}
	const ReplayRunResult run = replay_run(*r.cache, *r.backing, {});
	EXPECT_EQ(run.plan->scan().rewritten_id, 5u);
	r.check_backing();
	std::vector<std::byte> untouched(block_size);
	r.backing->read_exact(900 * block_size, untouched);
	EXPECT_TRUE(std::all_of(untouched.begin(), untouched.end(), [](std::byte b) { return b == std::byte{0}; }));
}

TEST(TornRewrite, RecoveryReportsWhatUpstreamsReplayWouldHaveDropped)
{
	for (const bool salvage : {false, true}) {
		Rig r(6);
		r.segments(9);
		r.tear_rewrite(6); // step 2
		const RecoveryReport report = recover(*r.cache, *r.backing, nullptr, {.salvage = salvage});
		ASSERT_TRUE(report.torn_rewrite.has_value());
		EXPECT_EQ(report.torn_rewrite->slot, r.slot_of(6));
		EXPECT_EQ(report.torn_rewrite->segment_id, 6u);
		EXPECT_EQ(report.torn_rewrite->upstream_dropped_segments, 3u); // ids 7..9
		EXPECT_EQ(report.torn_rewrite->upstream_lost_sectors, report.kernel_log->dirty_sectors);
		EXPECT_GT(report.torn_rewrite->upstream_lost_sectors, 0u);
		EXPECT_TRUE(report.nothing_lost()) << salvage;
		EXPECT_EQ(report.single_point_in_time, true) << salvage;
		const auto note = std::find_if(report.notes.begin(), report.notes.end(), [](const std::string& n) {
			return n.find("torn-rewrite-skipped") != std::string::npos;
		});
		ASSERT_NE(note, report.notes.end());
		EXPECT_NE(note->find("would not replay the 3 segment(s) after it (ids 7..9)"), std::string::npos) << *note;
		for (const SegmentUse& u : report.segments) {
			if (u.id == 6) {
				EXPECT_EQ(u.reason, SegmentReason::torn_rewrite);
			} else if (u.id < 6) {
				EXPECT_EQ(u.reason, SegmentReason::already_written_back) << u.id;
			}
		}
		r.check_backing();
	}
	// No torn rewrite: no such report.
	Rig r(6);
	r.segments(9);
	EXPECT_FALSE(recover(*r.cache, *r.backing, nullptr, {}).torn_rewrite.has_value());
}

void expect_damaged(const RecoveryReport& report, std::uint64_t id)
{
	const auto use = std::find_if(report.segments.begin(), report.segments.end(),
				      [&](const SegmentUse& u) { return u.id == id; });
	ASSERT_NE(use, report.segments.end());
	EXPECT_EQ(use->reason, SegmentReason::checksum_mismatch);
}

// docs/FORMAT.md, replay step 2, "a cache dm-wbkit wrote": one corrupted byte
// in the data of an old dirty segment of a wrapped log (16 slots, ids
// 25..40 dirty: the writer wrote 1..24 back to reuse their slots), at step 3 of the walk
// where the slot holds the id one lap behind: a torn-rewrite shape. dm-wbkit
// invalidates headers before it rewrites a slot, so in its own log that is
// damage, and reading it as a rewrite would count segments 25..28 as
// written back: their data silently lost. The log is refused instead.
TEST(TornRewrite, InALogDmWbkitWroteTheSameDamageIsRefused)
{
	Rig r(16, /*own_log=*/true);
	r.segments(40);
	ASSERT_EQ(r.writer->last_writeback_id(), 24u);
	r.writer->corrupt_segment_data(28); // not written back: still dirty
	const LogScan s = r.scan();
	ASSERT_TRUE(s.trust_record);
	EXPECT_FALSE(s.torn_rewrites);
	EXPECT_TRUE(s.refused());
	EXPECT_EQ(s.decision.refusal, WB_REPLAY_DAMAGED_REWRITE);
	EXPECT_EQ(s.decision.refusal_slot, r.slot_of(28));
	EXPECT_EQ(s.decision.refusal_id, 28u);
	EXPECT_EQ(s.rewritten_id, 0u);
	// The log stops at 28: the ring proves 27 - 16 written back, no more.
	EXPECT_EQ(s.last_writeback_id, 11u);
	EXPECT_EQ(log_ids(s), ids(25, 27));
	EXPECT_EQ(s.stop_slot, r.slot_of(28));
	EXPECT_EQ(count(s, FindingCode::torn_rewrite_skipped), 0u);
	EXPECT_EQ(count(s, FindingCode::log_refused), 1u);
	EXPECT_EQ(count(s, FindingCode::checksum_mismatch), 1u);

	// wbreplay refuses it; forced, it replays 25..27 and nothing after.
	EXPECT_THROW(replay_run(*r.cache, *r.backing, {}), RefusedError);
	std::vector<std::byte> untouched(block_size);
	r.backing->read_exact(125 * block_size, untouched); // segment 25's own block
	EXPECT_TRUE(std::all_of(untouched.begin(), untouched.end(), [](std::byte b) { return b == std::byte{0}; }));

	// Recovery with salvage takes every segment after the damaged one too:
	// every block but the damaged segment's own (block 128: 100 + 28) is
	// right, and the report names segment 28 as damaged.
	const RecoveryReport report = recover(*r.cache, *r.backing, nullptr, {.salvage = true});
	EXPECT_FALSE(report.single_point_in_time);
	expect_damaged(report, 28);
	r.check_backing(128);
}

// The same state in a log another writer left (no trust record): the rule
// reads it as a torn rewrite, and the warning says what each reading loses;
// wbrecover --no-torn-rewrite takes the other reading.
TEST(TornRewrite, InAnotherWritersLogTheRuleHoldsAndTheOtherReadingIsOffered)
{
	Rig r(16);
	r.segments(40);
	r.writer->corrupt_segment_data(28);
	const LogScan s = r.scan();
	EXPECT_TRUE(s.torn_rewrites);
	EXPECT_FALSE(s.refused());
	EXPECT_EQ(s.rewritten_id, 28u);
	EXPECT_EQ(s.last_writeback_id, 28u);
	EXPECT_EQ(log_ids(s), ids(29, 40));
	ASSERT_EQ(count(s, FindingCode::torn_rewrite_skipped), 1u);
	EXPECT_EQ(f_severity(s, FindingCode::torn_rewrite_skipped), Severity::warning);

	const LogScan other = r.scan({.torn_rewrites = false});
	EXPECT_TRUE(other.refused());
	EXPECT_EQ(other.decision.refusal, WB_REPLAY_DAMAGED_REWRITE);
	EXPECT_EQ(log_ids(other), ids(25, 27));
	EXPECT_EQ(other.last_writeback_id, 11u);

	RecoverOptions options{.salvage = true};
	options.torn_rewrites = false;
	const RecoveryReport report = recover(*r.cache, *r.backing, nullptr, options);
	EXPECT_FALSE(report.torn_rewrite.has_value());
	expect_damaged(report, 28);
	r.check_backing(128);
}
