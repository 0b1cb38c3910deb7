// The replay rules of format/wbkit_format.h, which the kernel module and the
// library both call: their edges (empty log, wrap, ids and slot counts at the
// top of the 64-bit range), and the same answers from the C compilation the
// kernel uses.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <set>

#include "wbkit_format.h"

extern "C" {
__u64 wb_c_slot_of_id(__u64 id, __u64 nr_segments);
__u64 wb_c_oldest_slot(__u64 max_id, __u64 nr_segments);
__u64 wb_c_ring_slot(__u64 oldest_slot, __u64 step, __u64 nr_segments);
__u64 wb_c_last_writeback_id(__u64 last_flushed_id, __u64 sb_record, __u64 nr_segments);
bool wb_c_sb_record_in_range(__u64 sb_record, __u64 max_id, __u64 nr_segments);
__u8 wb_c_entry_sectors(__u8 dirty_bits);
bool wb_c_entry_is_newer(__u64 pos_a, __u32 index_a, __u64 pos_b, __u32 index_b);
bool wb_c_torn_rewrite(__u64 step, __u64 slot_id, __u64 max_id, __u64 nr_segments);
}

namespace {

constexpr std::uint64_t max64 = std::numeric_limits<std::uint64_t>::max();

} // namespace

TEST(ReplayRules, SlotOfIdStartsAtOneAndWraps)
{
	EXPECT_EQ(wb_slot_of_id(1, 3), 0u);
	EXPECT_EQ(wb_slot_of_id(3, 3), 2u);
	EXPECT_EQ(wb_slot_of_id(4, 3), 0u);
	EXPECT_EQ(wb_slot_of_id(6, 3), 2u);
	EXPECT_EQ(wb_slot_of_id(12345, 1), 0u);
	// 2^64 - 1 = 3 * 6148914691236517205: id 2^64 - 1 is the last of a lap of 3.
	EXPECT_EQ(wb_slot_of_id(max64, 3), 2u);
	EXPECT_EQ(wb_slot_of_id(max64, max64), max64 - 1);
	EXPECT_EQ(wb_slot_of_id(1ULL << 40, 1ULL << 33), (1ULL << 33) - 1);
}

TEST(ReplayRules, OldestSlotIsTheSlotAfterTheNewest)
{
	EXPECT_EQ(wb_oldest_slot(0, 5), 0u); // empty log: the walk starts at slot 0
	EXPECT_EQ(wb_oldest_slot(2, 5), 2u); // ids 1, 2 in slots 0, 1; slot 2 is next
	EXPECT_EQ(wb_oldest_slot(5, 5), 0u); // a full first lap: id 1 in slot 0 is the oldest
	EXPECT_EQ(wb_oldest_slot(7, 5), 2u); // ids 3..7: id 3 in slot 2 is the oldest
	for (std::uint64_t max_id = 0; max_id < 40; ++max_id)
		EXPECT_EQ(wb_oldest_slot(max_id, 7), wb_slot_of_id(max_id + 1, 7)) << max_id;
	// max_id + 1 would wrap to 0; the rule does not form it.
	EXPECT_EQ(wb_oldest_slot(max64, 3), 0u);
	EXPECT_EQ(wb_oldest_slot(max64, max64), 0u);
	EXPECT_EQ(wb_oldest_slot(max64 - 1, max64), max64 - 1);
}

TEST(ReplayRules, RingWalkVisitsEverySlotOnceFromTheOldest)
{
	for (std::uint64_t nr = 1; nr <= 17; ++nr)
		for (std::uint64_t oldest = 0; oldest < nr; ++oldest) {
			std::set<std::uint64_t> seen;
			for (std::uint64_t step = 0; step < nr; ++step) {
				const std::uint64_t slot = wb_ring_slot(oldest, step, nr);
				EXPECT_EQ(slot, (oldest + step) % nr);
				seen.insert(slot);
			}
			EXPECT_EQ(seen.size(), nr);
			EXPECT_EQ(wb_ring_slot(oldest, 0, nr), oldest);
		}
	// Near 2^64 slots the sum oldest + step would overflow; the walk still wraps to slot 0.
	EXPECT_EQ(wb_ring_slot(max64 - 2, 1, max64), max64 - 1);
	EXPECT_EQ(wb_ring_slot(max64 - 2, 2, max64), 0u);
	EXPECT_EQ(wb_ring_slot(max64 - 2, max64 - 1, max64), max64 - 3);
	EXPECT_EQ(wb_ring_slot(1ULL << 63, 1ULL << 63, max64), (1ULL << 63) - (max64 - (1ULL << 63)));
}

TEST(ReplayRules, PreviousLapIdIsTheSlotsFormerTenant)
{
	EXPECT_EQ(wb_previous_lap_id(0, 4), 0u);
	EXPECT_EQ(wb_previous_lap_id(4, 4), 0u); // first lap: the slot was empty
	EXPECT_EQ(wb_previous_lap_id(5, 4), 1u);
	EXPECT_EQ(wb_previous_lap_id(max64, 4), max64 - 4);
	EXPECT_EQ(wb_previous_lap_id(max64, max64), 0u);
	for (std::uint64_t id = 5; id < 30; ++id)
		EXPECT_EQ(wb_slot_of_id(wb_previous_lap_id(id, 4), 4), wb_slot_of_id(id, 4)) << id;
}

TEST(ReplayRules, LastWritebackIdTakesTheRecordCappedAndTheRingBound)
{
	EXPECT_EQ(wb_last_writeback_id(0, 0, 8), 0u);    // empty log
	EXPECT_EQ(wb_last_writeback_id(0, 5, 8), 0u);    // a record with no log behind it counts for nothing
	EXPECT_EQ(wb_last_writeback_id(6, 0, 8), 0u);    // first lap, record never written
	EXPECT_EQ(wb_last_writeback_id(6, 4, 8), 4u);    // the record
	EXPECT_EQ(wb_last_writeback_id(6, 9, 8), 6u);    // a record past the log is capped at it
	EXPECT_EQ(wb_last_writeback_id(20, 0, 8), 12u);  // wrapped: one lap behind is written back
	EXPECT_EQ(wb_last_writeback_id(20, 3, 8), 12u);  // a stale record loses to the ring
	EXPECT_EQ(wb_last_writeback_id(20, 15, 8), 15u); // a newer record wins
	EXPECT_EQ(wb_last_writeback_id(9, 0, 8), 1u);    // the first wrap
	EXPECT_EQ(wb_last_writeback_id(max64, max64, 1), max64);
	EXPECT_EQ(wb_last_writeback_id(max64, 0, 1), max64 - 1);
	EXPECT_EQ(wb_last_writeback_id(max64, 0, max64), 0u);
	EXPECT_EQ(wb_last_writeback_id(max64 - 1, max64, 2), max64 - 1);
}

TEST(ReplayRules, SuperblockRecordRange)
{
	EXPECT_TRUE(wb_sb_record_in_range(0, 0, 4));   // never written
	EXPECT_TRUE(wb_sb_record_in_range(0, 100, 4)); // 0 always fits
	EXPECT_FALSE(wb_sb_record_in_range(1, 0, 4));  // a record on an empty log
	EXPECT_TRUE(wb_sb_record_in_range(3, 3, 4));
	EXPECT_FALSE(wb_sb_record_in_range(4, 3, 4));
	EXPECT_TRUE(wb_sb_record_in_range(96, 100, 4)); // the low end: max_id - nr_segments
	EXPECT_FALSE(wb_sb_record_in_range(95, 100, 4));
	EXPECT_TRUE(wb_sb_record_in_range(100, 100, 4));
	EXPECT_FALSE(wb_sb_record_in_range(101, 100, 4));
	EXPECT_TRUE(wb_sb_record_in_range(max64, max64, 2));
	EXPECT_FALSE(wb_sb_record_in_range(max64 - 3, max64, 2));
	EXPECT_TRUE(wb_sb_record_in_range(1, max64, max64));
}

TEST(ReplayRules, EntrySectorsOfDirtyAndCleanEntries)
{
	EXPECT_EQ(wb_entry_sectors(0), 0xffu); // a clean entry decides the whole block
	EXPECT_EQ(wb_entry_sectors(0x01), 0x01u);
	EXPECT_EQ(wb_entry_sectors(0x81), 0x81u);
	EXPECT_EQ(wb_entry_sectors(0xff), 0xffu);
	// The kernel's replay keeps an older entry's dirty sectors that the newer one does not decide.
	const std::uint8_t older = 0x0f;
	EXPECT_EQ(std::uint8_t(older & ~wb_entry_sectors(0x03)), 0x0cu);
	EXPECT_EQ(std::uint8_t(older & ~wb_entry_sectors(0)), 0u);
}

TEST(ReplayRules, LaterSegmentThenHigherMetablockWins)
{
	EXPECT_TRUE(wb_entry_is_newer(2, 0, 1, 126));
	EXPECT_FALSE(wb_entry_is_newer(1, 126, 2, 0));
	EXPECT_TRUE(wb_entry_is_newer(5, 3, 5, 2));
	EXPECT_FALSE(wb_entry_is_newer(5, 2, 5, 3));
	EXPECT_FALSE(wb_entry_is_newer(5, 2, 5, 2)); // an entry is not newer than itself
	EXPECT_TRUE(wb_entry_is_newer(max64, 0, max64 - 1, 126));
}

TEST(ReplayRules, TornRewriteIsTheLapBehindIdInTheFirstStepsOfAFullRing)
{
	// 10 slots, ids 3..12: step s holds id 3 + s, one lap behind 13 + s.
	for (std::uint64_t step = 0; step < 8; ++step)
		EXPECT_TRUE(wb_torn_rewrite(step, 3 + step, 12, 10)) << step;
	EXPECT_FALSE(wb_torn_rewrite(8, 11, 12, 10)); // past the window: damage
	EXPECT_FALSE(wb_torn_rewrite(9, 12, 12, 10)); // the newest: torn as the newest is
	EXPECT_FALSE(wb_torn_rewrite(1, 3, 12, 10));  // not the id a writer reuses at that step
	EXPECT_FALSE(wb_torn_rewrite(1, 5, 12, 10));
	EXPECT_FALSE(wb_torn_rewrite(0, 0, 12, 10)); // an empty slot is skipped, not torn
	EXPECT_FALSE(wb_torn_rewrite(0, 13, 12, 10));
	// A ring filled exactly once (ids 1..10): id 1 at step 0.
	EXPECT_TRUE(wb_torn_rewrite(0, 1, 10, 10));
	// A log that has not filled the ring: damage, as before the rule.
	EXPECT_FALSE(wb_torn_rewrite(1, 1, 9, 10)); // ids 1..9, slot 9 empty at step 0
	EXPECT_FALSE(wb_torn_rewrite(2, 2, 5, 6));  // fixtures/synthetic/corrupt-middle
	// One slot: its segment is the newest; two slots: only step 0.
	EXPECT_FALSE(wb_torn_rewrite(0, 5, 5, 1));
	EXPECT_TRUE(wb_torn_rewrite(0, 4, 5, 2));
	EXPECT_FALSE(wb_torn_rewrite(1, 5, 5, 2));
	// The window is the steps, not the ring's size.
	EXPECT_TRUE(wb_torn_rewrite(7, 5000 - 1024 + 1 + 7, 5000, 1024));
	EXPECT_FALSE(wb_torn_rewrite(8, 5000 - 1024 + 1 + 8, 5000, 1024));
	// Ids at the top of the 64-bit range: no sum passes 2^64.
	EXPECT_TRUE(wb_torn_rewrite(0, max64 - 5, max64, 6));
	EXPECT_TRUE(wb_torn_rewrite(4, max64 - 1, max64, 6));
	EXPECT_FALSE(wb_torn_rewrite(5, max64, max64, 6));
	EXPECT_TRUE(wb_torn_rewrite(0, 1, max64, max64));
	EXPECT_FALSE(wb_torn_rewrite(0, max64, max64, max64));
}

TEST(ReplayRules, TheCCompilationAgrees)
{
	const std::uint64_t values[] = {0, 1, 2, 3, 7, 8, 9, 1ULL << 32, (1ULL << 63) + 5, max64 - 1, max64};
	for (std::uint64_t a : values)
		for (std::uint64_t nr : values) {
			if (nr == 0)
				continue;
			if (a > 0) {
				EXPECT_EQ(wb_c_slot_of_id(a, nr), wb_slot_of_id(a, nr));
			}
			EXPECT_EQ(wb_c_oldest_slot(a, nr), wb_oldest_slot(a, nr));
			const std::uint64_t oldest = wb_oldest_slot(a, nr);
			EXPECT_EQ(wb_c_ring_slot(oldest, nr - 1, nr), wb_ring_slot(oldest, nr - 1, nr));
			for (std::uint64_t b : values) {
				EXPECT_EQ(wb_c_last_writeback_id(a, b, nr), wb_last_writeback_id(a, b, nr));
				EXPECT_EQ(wb_c_sb_record_in_range(b, a, nr), wb_sb_record_in_range(b, a, nr));
				EXPECT_EQ(wb_c_entry_is_newer(a, 1, b, 2), wb_entry_is_newer(a, 1, b, 2));
				for (const std::uint64_t step : {std::uint64_t(0), std::uint64_t(1), std::uint64_t(7), std::uint64_t(8), nr - 1})
					EXPECT_EQ(wb_c_torn_rewrite(step, b, a, nr), wb_torn_rewrite(step, b, a, nr));
			}
		}
	for (unsigned bits = 0; bits < 256; ++bits)
		EXPECT_EQ(wb_c_entry_sectors(__u8(bits)), wb_entry_sectors(__u8(bits)));
}
