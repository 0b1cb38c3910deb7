// The shared replay decision of format/wbkit_format.h (wb_replay_walk_begin,
// wb_replay_walk_slot, wb_replay_decide), which the kernel's construction and
// the library's scan both call, on crafted states: every expected value is
// derived by hand from docs/FORMAT.md's replay rules in the comment above it.
// Then the same findings on a cache image the LogWriter wrote, through
// wbkit::scan_log.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "temp_image.hpp"
#include "wbkit/log_scan.hpp"
#include "wbkit/log_writer.hpp"
#include "wbkit_format.h"

using namespace wbkit;
using namespace wbkit::testing;

namespace {

constexpr std::uint64_t none = WB_TRUST_NONE;

struct SlotIn {
	std::uint64_t id = 0; // 0: empty, or an unreadable header
	wb_slot_verdict verdict = WB_SLOT_EMPTY;
};

SlotIn valid(std::uint64_t id) { return {id, WB_SLOT_VALID}; }
SlotIn bad(std::uint64_t id) { return {id, WB_SLOT_BAD}; }
SlotIn empty() { return {}; }

// What a step told the caller: (action, slot, id).
struct Step {
	wb_walk_action action;
	std::uint64_t slot, id;
	bool operator==(const Step&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Step& s)
{
	static const char* names[] = {"skip", "apply", "restart", "stop", "lost"};
	return os << names[s.action] << "(slot " << s.slot << ", id " << s.id << ")";
}

struct Outcome {
	std::vector<Step> steps; // every step but the skipped ones
	wb_replay_plan plan{};
};

// The decision as the tools call it (kernel = false: every slot with its
// verdict) or as the kernel does (past the stop it reads nothing and passes
// a non-empty slot as valid).
Outcome decide(const std::vector<SlotIn>& slots, std::uint64_t record, bool trust_record,
	       std::uint64_t trusted_from_id, std::optional<bool> torn_rewrites = std::nullopt, bool kernel = false)
{
	const std::uint64_t nr = slots.size();
	std::uint64_t max_id = 0;
	for (const SlotIn& s : slots)
		max_id = std::max(max_id, s.id);
	wb_replay_walk w;
	wb_replay_walk_begin(&w, nr, max_id, torn_rewrites.value_or(!trust_record));
	Outcome out;
	for (std::uint64_t step = 0; step < nr; ++step) {
		const std::uint64_t slot = wb_ring_slot(w.oldest_slot, step, nr);
		wb_slot_verdict verdict = slots[slot].verdict;
		if (kernel && w.stopped)
			verdict = slots[slot].id ? WB_SLOT_VALID : WB_SLOT_EMPTY;
		const wb_walk_action action = wb_replay_walk_slot(&w, step, slots[slot].id, verdict);
		if (action != WB_WALK_SKIP)
			out.steps.push_back({action, slot, slots[slot].id});
	}
	wb_replay_decide(&w, record, trust_record ? trusted_from_id : none, &out.plan);
	return out;
}

// 16 slots holding ids first..first + 15, each in its own slot ((id - 1) mod 16).
std::vector<SlotIn> ring16(std::uint64_t first)
{
	std::vector<SlotIn> slots(16);
	for (std::uint64_t id = first; id < first + 16; ++id)
		slots[(id - 1) % 16] = valid(id);
	return slots;
}

// The slots the plan zeroes, in its order.
std::vector<std::uint64_t> drops(const wb_replay_plan& p)
{
	return {p.drop_slot, p.drop_slot + p.nr_drop_slots};
}

// 14 slots holding ids first..first + 13, each in its own slot ((id - 1) mod 14),
// the geometry of the upstream recordings whose torn states found the rule.
std::vector<SlotIn> ring14(std::uint64_t first)
{
	std::vector<SlotIn> slots(14);
	for (std::uint64_t id = first; id < first + 14; ++id)
		slots[(id - 1) % 14] = valid(id);
	return slots;
}

void expect_same_plan(const wb_replay_plan& a, const wb_replay_plan& b)
{
	EXPECT_EQ(a.refusal, b.refusal);
	EXPECT_EQ(a.refusal_slot, b.refusal_slot);
	EXPECT_EQ(a.refusal_id, b.refusal_id);
	EXPECT_EQ(a.last_flushed_id, b.last_flushed_id);
	EXPECT_EQ(a.last_writeback_id, b.last_writeback_id);
	EXPECT_EQ(a.next_id, b.next_id);
	EXPECT_EQ(a.trusted_from_id, b.trusted_from_id);
	EXPECT_EQ(a.write_trust, b.write_trust);
	EXPECT_EQ(a.zero_stop_slot, b.zero_stop_slot);
	EXPECT_EQ(a.stop_slot, b.stop_slot);
	EXPECT_EQ(a.rewrite_record, b.rewrite_record);
	EXPECT_EQ(drops(a), drops(b));
}

} // namespace

// Finding 1. 16 slots, ids 85..100 (max 100), each in its own slot; the walk
// starts at slot 100 mod 16 = 4 (id 85). Id 88 = max - 12 lies at step 3,
// slot 7, and fails its checksum: one lap behind what a writer puts there
// (100 - 88 = 12 = 16 - 1 - 3), within the window, on a full ring: the shape
// of a torn rewrite.
TEST(ReplayDecision, Finding1_ADamagedOldSegmentOfOurOwnLogIsRefusedNotSkipped)
{
	std::vector<SlotIn> slots = ring16(85);
	slots[7] = bad(88);

	// With the trust record (value 1: dm-wbkit wrote this log) the rule is off:
	// apply 85, 86, 87, stop at 88, the stop is not the newest (100) and
	// rewrite-shaped -> damaged-rewrite at slot 7, id 88. lf = 87. Record 0:
	// lw = max(87 - 16, min(0, 87), 0) = 71, what the ring proves, below 88,
	// which reading 88 as a rewrite would have counted written back.
	// next_id 88; record 0 is not > 87: no rewrite, the trust stays 1; the
	// stop slot 7 is the one to zero.
	const Outcome own = decide(slots, 0, true, 1);
	EXPECT_EQ(own.plan.refusal, WB_REPLAY_DAMAGED_REWRITE);
	EXPECT_EQ(own.plan.refusal_slot, 7u);
	EXPECT_EQ(own.plan.refusal_id, 88u);
	EXPECT_EQ(own.steps, (std::vector<Step>{{WB_WALK_APPLY, 4, 85},
						{WB_WALK_APPLY, 5, 86},
						{WB_WALK_APPLY, 6, 87},
						{WB_WALK_STOP, 7, 88}}));
	EXPECT_EQ(own.plan.last_flushed_id, 87u);
	EXPECT_EQ(own.plan.last_writeback_id, 71u);
	EXPECT_LT(own.plan.last_writeback_id, 88u);
	EXPECT_EQ(own.plan.next_id, 88u);
	EXPECT_EQ(own.plan.trusted_from_id, 1u);
	EXPECT_FALSE(own.plan.write_trust);
	EXPECT_TRUE(own.plan.zero_stop_slot);
	EXPECT_EQ(own.plan.stop_slot, 7u);
	EXPECT_FALSE(own.plan.rewrite_record);
	// The kernel passes the slots past the stop as valid: the same plan.
	expect_same_plan(decide(slots, 0, true, 1, std::nullopt, true).plan, own.plan);
	// The superblock record at the previous lap (84): lw = max(71, min(84, 87)) = 84.
	EXPECT_EQ(decide(slots, 84, true, 1).plan.last_writeback_id, 84u);

	// Without the trust record (another writer's log) the rule is on: 85..87
	// applied, then forgotten at the torn rewrite 88 (restart), 89..100
	// applied. No stop, no refusal. lf = max(100, 88) = 100; lw = max(100 - 16,
	// min(0, 100), 88) = 88 = max - 12; next_id 101; nothing to zero or rewrite;
	// the trust stays NONE.
	const Outcome other = decide(slots, 0, false, none);
	EXPECT_EQ(other.plan.refusal, WB_REPLAY_OK);
	ASSERT_EQ(other.steps.size(), 16u);
	EXPECT_EQ(other.steps[3], (Step{WB_WALK_RESTART, 7, 88}));
	for (std::size_t i = 4; i < 16; ++i)
		EXPECT_EQ(other.steps[i], (Step{WB_WALK_APPLY, (4 + i) % 16, 85 + i})) << i;
	EXPECT_EQ(other.plan.last_flushed_id, 100u);
	EXPECT_EQ(other.plan.last_writeback_id, 88u);
	EXPECT_EQ(other.plan.next_id, 101u);
	EXPECT_EQ(other.plan.trusted_from_id, none);
	EXPECT_FALSE(other.plan.write_trust);
	EXPECT_FALSE(other.plan.zero_stop_slot);
	EXPECT_FALSE(other.plan.rewrite_record);

	// A tool's option overrides the trust record either way.
	wb_replay_plan forced_on = other.plan;
	forced_on.trusted_from_id = 1; // the trust record's value, kept
	expect_same_plan(decide(slots, 0, true, 1, true).plan, forced_on);
	EXPECT_EQ(decide(slots, 0, false, none, false).plan.refusal, WB_REPLAY_DAMAGED_REWRITE);

	// Every slot of an intact ring holds the id one lap behind its step, so
	// it is the window that decides: id 93 bad at step 8 (slot 12) is past it,
	// damage with or without the trust record: stops-early at slot 12, id 93,
	// after 85..92 (lf 92).
	std::vector<SlotIn> later = ring16(85);
	later[12] = bad(93);
	for (const bool trust : {false, true}) {
		const Outcome past_window = decide(later, 0, trust, trust ? 1 : none);
		EXPECT_EQ(past_window.plan.refusal, WB_REPLAY_STOPS_EARLY) << trust;
		EXPECT_EQ(past_window.plan.refusal_slot, 12u) << trust;
		EXPECT_EQ(past_window.plan.refusal_id, 93u) << trust;
		EXPECT_EQ(past_window.plan.last_flushed_id, 92u) << trust;
	}
}

// Finding 2. 4 slots, only segment 1 (slot 0, valid): max 1, the walk starts
// at slot 1 and applies 1 at step 3. lf = 1, lw = max(0, min(record, 1)) = 1.
TEST(ReplayDecision, Finding2_ARecordBeyondTheLogLowersTheTrust)
{
	const std::vector<SlotIn> slots{valid(1), empty(), empty(), empty()};

	// Record 2 > lf 1: the record is rewritten (to lw 1), and as the trust
	// (1) is <= lf, no copy of the log may serve reads as clean: the trust
	// becomes lf + 1 = 2, written first.
	const Outcome beyond = decide(slots, 2, true, 1);
	EXPECT_EQ(beyond.plan.refusal, WB_REPLAY_OK);
	EXPECT_EQ(beyond.steps, (std::vector<Step>{{WB_WALK_APPLY, 0, 1}}));
	EXPECT_EQ(beyond.plan.last_flushed_id, 1u);
	EXPECT_EQ(beyond.plan.last_writeback_id, 1u);
	EXPECT_EQ(beyond.plan.next_id, 2u);
	EXPECT_TRUE(beyond.plan.rewrite_record);
	EXPECT_EQ(beyond.plan.trusted_from_id, 2u);
	EXPECT_TRUE(beyond.plan.write_trust);
	EXPECT_FALSE(beyond.plan.zero_stop_slot);

	// Record 1 = lf: nothing beyond the log; lw = 1, the trust stays 1.
	const Outcome within = decide(slots, 1, true, 1);
	EXPECT_EQ(within.plan.last_writeback_id, 1u);
	EXPECT_FALSE(within.plan.rewrite_record);
	EXPECT_EQ(within.plan.trusted_from_id, 1u);
	EXPECT_FALSE(within.plan.write_trust);

	// Record 2 with a trust of NONE (present, or absent): nothing to lower.
	for (const bool present : {true, false}) {
		const Outcome untrusted = decide(slots, 2, present, none);
		EXPECT_TRUE(untrusted.plan.rewrite_record);
		EXPECT_EQ(untrusted.plan.trusted_from_id, none);
		EXPECT_FALSE(untrusted.plan.write_trust);
	}
	// A trust already above lf (2): unchanged too.
	EXPECT_FALSE(decide(slots, 2, true, 2).plan.write_trust);
}

// Finding 3. 4 slots, ids 5, 6, 7, 8 in slots 0..3, slots 2 and 3 bad, no
// trust record. Max 8, the walk starts at slot 0: 5 and 6 applied; 7 at
// step 2 is one lap behind (8 - 7 = 1 = 4 - 1 - 2): a torn rewrite, 5 and 6
// forgotten; 8 at step 3 is the last step, not a rewrite: the stop, at the
// newest, so no refusal. lf = max(0, 7) = 7 (not 0); lw = max(7 - 4, min(0,
// 7), 7) = 7; next_id 8, the slot of 8 (slot 3) is zeroed, so the next
// segment, 8, goes there.
TEST(ReplayDecision, Finding3_ATornRewriteThenTheTornNewestKeepsTheRewrittenId)
{
	const std::vector<SlotIn> slots{valid(5), valid(6), bad(7), bad(8)};
	const Outcome out = decide(slots, 0, false, none);
	EXPECT_EQ(out.plan.refusal, WB_REPLAY_OK);
	EXPECT_EQ(out.steps, (std::vector<Step>{{WB_WALK_APPLY, 0, 5},
						{WB_WALK_APPLY, 1, 6},
						{WB_WALK_RESTART, 2, 7},
						{WB_WALK_STOP, 3, 8}}));
	EXPECT_EQ(out.plan.last_flushed_id, 7u);
	EXPECT_EQ(out.plan.last_writeback_id, 7u);
	EXPECT_EQ(out.plan.next_id, 8u);
	EXPECT_TRUE(out.plan.zero_stop_slot);
	EXPECT_EQ(out.plan.stop_slot, 3u);
	EXPECT_FALSE(out.plan.rewrite_record);
	EXPECT_FALSE(out.plan.write_trust);
	// Replay zeroes what the walk discarded, the torn rewrite last: 5, 6, 7.
	EXPECT_EQ(drops(out.plan), (std::vector<std::uint64_t>{0, 1, 2}));
	expect_same_plan(decide(slots, 0, false, none, std::nullopt, true).plan, out.plan);
}

// 4 slots, ids 5, 6, 3, 8 in slots 0..3 (3 is in its own slot, (3 - 1) mod 4
// = 2). Max 8, the walk from slot 0 meets 5, 6, then 3 <= 6 at slot 2.
TEST(ReplayDecision, IdsNotRising)
{
	// All valid: ids-not-rising at slot 2, id 3. The walk still applies
	// all four (what --force would replay): lf 8, lw = max(8 - 4, min(0, 8)) = 4.
	// The rule for another writer's log is off here (3 is one lap below the
	// 7 expected at step 2, within the window: a segment lost in flight
	// there, LostInFlight below).
	const Outcome out = decide({valid(5), valid(6), valid(3), valid(8)}, 0, false, none, false);
	EXPECT_EQ(out.plan.refusal, WB_REPLAY_IDS_NOT_RISING);
	EXPECT_EQ(out.plan.refusal_slot, 2u);
	EXPECT_EQ(out.plan.refusal_id, 3u);
	EXPECT_EQ(out.steps.size(), 4u);
	EXPECT_EQ(out.plan.last_flushed_id, 8u);
	EXPECT_EQ(out.plan.last_writeback_id, 4u);
	EXPECT_FALSE(out.plan.zero_stop_slot);

	// The id of a bad slot counts too: 3 bad at step 2 is not rewrite-shaped
	// (8 - 3 = 5 != 1), so the walk stops there, but the ids-not-rising found
	// at that step comes first: not stops-early. lf 6, lw = max(2, 0) = 2.
	const Outcome bad_low = decide({valid(5), valid(6), bad(3), valid(8)}, 0, false, none, false);
	EXPECT_EQ(bad_low.plan.refusal, WB_REPLAY_IDS_NOT_RISING);
	EXPECT_EQ(bad_low.plan.refusal_slot, 2u);
	EXPECT_EQ(bad_low.plan.refusal_id, 3u);
	EXPECT_EQ(bad_low.plan.last_flushed_id, 6u);
	EXPECT_EQ(bad_low.plan.last_writeback_id, 2u);
	EXPECT_TRUE(bad_low.plan.zero_stop_slot);
	EXPECT_EQ(bad_low.plan.stop_slot, 2u);

	// The stop slot's own id is compared: 5, then 2 bad at slot 1 ((2 - 1)
	// mod 4 = 1, its own slot): 2 <= 5, ids-not-rising at slot 1, id 2 (the
	// lost-in-flight rule off: 2 is one lap below the 6 expected there).
	const Outcome at_stop = decide({valid(5), bad(2), valid(3), valid(8)}, 0, false, none, false);
	EXPECT_EQ(at_stop.plan.refusal, WB_REPLAY_IDS_NOT_RISING);
	EXPECT_EQ(at_stop.plan.refusal_slot, 1u);
	EXPECT_EQ(at_stop.plan.refusal_id, 2u);

	// Past the stop ids are not compared. With the trust record (the rule
	// off): 5, then 6 bad at step 1, rewrite-shaped (8 - 6 = 2 = 4 - 1 - 1):
	// the stop; 3 after it (in its own slot 2) is below 6 but past the stop,
	// so the refusal is the stop's: damaged-rewrite at slot 1, id 6. lf 5,
	// lw = max(1, min(0, 5)) = 1.
	const std::vector<SlotIn> past{valid(5), bad(6), valid(3), valid(8)};
	const Outcome after = decide(past, 0, true, 1);
	EXPECT_EQ(after.plan.refusal, WB_REPLAY_DAMAGED_REWRITE);
	EXPECT_EQ(after.plan.refusal_slot, 1u);
	EXPECT_EQ(after.plan.refusal_id, 6u);
	EXPECT_EQ(after.plan.last_flushed_id, 5u);
	EXPECT_EQ(after.plan.last_writeback_id, 1u);
	expect_same_plan(decide(past, 0, true, 1, std::nullopt, true).plan, after.plan);
	// Without the trust record 6 is a torn rewrite and the walk goes on: 3
	// after 6 at step 2 is one lap below the 7 expected there (8 - 3 = 5 =
	// 2 * 4 - 1 - 2), behind the newest: a segment lost in flight, skipped.
	// No refusal; 5, 3 and 6 are zeroed (the lost one first, the torn
	// rewrite last).
	const Outcome rewrite = decide(past, 0, false, none);
	EXPECT_EQ(rewrite.plan.refusal, WB_REPLAY_OK);
	EXPECT_EQ(rewrite.steps[2], (Step{WB_WALK_LOST, 2, 3}));
	EXPECT_EQ(drops(rewrite.plan), (std::vector<std::uint64_t>{2, 0, 1}));
}

// The shape upstream's module leaves (issue 57): 14 slots, ids 5..18 in
// their slots, max 18, the walk starts at slot 18 mod 14 = 4 (id 5). The
// writes of 17 and 18 were in flight; 18 landed, 17 did not, so slot 2
// ((17 - 1) mod 14) still holds 3, one lap below the 17 expected at step 12
// (18 + 1 - 14 + 12 = 17; 18 - 3 = 15 = 2 * 14 - 1 - 12), behind the
// newest and within the 8 positions a writer keeps in flight. On another
// writer's log: a segment lost in flight, skipped as an empty slot (3 was
// written back before its slot was reused). lf 18; lw = max(18 - 14,
// min(0, 18)) = 4 >= 3; nothing refused; slot 2 is zeroed before the trust
// record, so the log reads the same on the next construction.
TEST(ReplayDecision, LostInFlight_ALapOldSegmentBehindTheNewestIsSkipped)
{
	std::vector<SlotIn> slots = ring14(5);
	slots[2] = valid(3);
	const Outcome out = decide(slots, 0, false, none);
	EXPECT_EQ(out.plan.refusal, WB_REPLAY_OK);
	ASSERT_EQ(out.steps.size(), 14u);
	EXPECT_EQ(out.steps[12], (Step{WB_WALK_LOST, 2, 3}));
	EXPECT_EQ(out.steps[13], (Step{WB_WALK_APPLY, 3, 18}));
	EXPECT_EQ(out.plan.last_flushed_id, 18u);
	EXPECT_EQ(out.plan.last_writeback_id, 4u);
	EXPECT_EQ(out.plan.next_id, 19u);
	EXPECT_FALSE(out.plan.zero_stop_slot);
	EXPECT_EQ(drops(out.plan), (std::vector<std::uint64_t>{2}));
	expect_same_plan(decide(slots, 0, false, none, std::nullopt, true).plan, out.plan);

	// The same with the new write's sectors partly landed under the old
	// header: a bad checksum under the lap-old id, the same reading.
	slots[2] = bad(3);
	const Outcome torn = decide(slots, 0, false, none);
	EXPECT_EQ(torn.plan.refusal, WB_REPLAY_OK);
	EXPECT_EQ(torn.steps[12], (Step{WB_WALK_LOST, 2, 3}));
	EXPECT_EQ(torn.plan.last_flushed_id, 18u);
	EXPECT_EQ(drops(torn.plan), (std::vector<std::uint64_t>{2}));

	// Two lost (16 and 17 in slots 1 and 2 hold 2 and 3), then a torn newest:
	// both skipped, in walk order, the stop at 18 is the newest; lf 15.
	slots = ring14(5);
	slots[1] = valid(2);
	slots[2] = bad(3);
	slots[3] = bad(18);
	const Outcome two = decide(slots, 0, false, none);
	EXPECT_EQ(two.plan.refusal, WB_REPLAY_OK);
	EXPECT_EQ(two.steps[11], (Step{WB_WALK_LOST, 1, 2}));
	EXPECT_EQ(two.steps[12], (Step{WB_WALK_LOST, 2, 3}));
	EXPECT_EQ(two.steps[13], (Step{WB_WALK_STOP, 3, 18}));
	EXPECT_EQ(two.plan.last_flushed_id, 15u);
	EXPECT_TRUE(two.plan.zero_stop_slot);
	EXPECT_EQ(two.plan.stop_slot, 3u);
	EXPECT_EQ(drops(two.plan), (std::vector<std::uint64_t>{1, 2}));
}

// What the rule does not cover stays refused.
TEST(ReplayDecision, LostInFlight_RealDamageIsStillRefused)
{
	// dm-wbkit's own log (the trust record): it zeroes a header before a
	// new segment goes into the slot, so a lap-old segment there is a lap
	// out of order: ids-not-rising at slot 2, id 3, nothing to zero.
	std::vector<SlotIn> slots = ring14(5);
	slots[2] = valid(3);
	const Outcome own = decide(slots, 0, true, 1);
	EXPECT_EQ(own.plan.refusal, WB_REPLAY_IDS_NOT_RISING);
	EXPECT_EQ(own.plan.refusal_slot, 2u);
	EXPECT_EQ(own.plan.refusal_id, 3u);
	EXPECT_EQ(own.plan.nr_drop_slots, 0u);

	// 14 slots, ids 27..40, the walk starts at slot 40 mod 14 = 12 (id 27);
	// step s expects 27 + s. A lap-old segment at step 6 (slot 4, 33 expected,
	// 19 there): 7 newer positions behind it, within the window: lost.
	slots = ring14(27);
	slots[4] = valid(19);
	const Outcome edge = decide(slots, 0, false, none);
	EXPECT_EQ(edge.plan.refusal, WB_REPLAY_OK);
	EXPECT_EQ(edge.steps[6], (Step{WB_WALK_LOST, 4, 19}));

	// At step 5 (slot 3, 32 expected, 18 there), 8 newer segments follow:
	// more than a writer keeps in flight; a lap in the middle of the log,
	// refused.
	slots = ring14(27);
	slots[3] = valid(18);
	const Outcome middle = decide(slots, 0, false, none);
	EXPECT_EQ(middle.plan.refusal, WB_REPLAY_IDS_NOT_RISING);
	EXPECT_EQ(middle.plan.refusal_slot, 3u);
	EXPECT_EQ(middle.plan.refusal_id, 18u);

	// Near the oldest (step 1, slot 13, 28 expected, 14 there): refused.
	slots = ring14(27);
	slots[13] = valid(14);
	EXPECT_EQ(decide(slots, 0, false, none).plan.refusal, WB_REPLAY_IDS_NOT_RISING);

	// Two laps old at a lost position (step 8, slot 6 holds 7 where 35 is
	// expected): not the segment the lost write replaced, refused.
	slots = ring14(27);
	slots[6] = valid(7);
	EXPECT_EQ(decide(slots, 0, false, none).plan.refusal, WB_REPLAY_IDS_NOT_RISING);

	// An unreadable slot there is no lap-old segment: the walk stops, the
	// tools refuse (unreadable).
	slots = ring14(5);
	slots[2] = {0, WB_SLOT_UNREADABLE};
	EXPECT_EQ(decide(slots, 0, false, none).plan.refusal, WB_REPLAY_UNREADABLE);
}

// 6 slots, max 5: the walk starts at slot 5 (empty), then 1 (slot 0, valid),
// 2 (slot 1, bad: max 5 < 6, a first lap, so no rewrite): the stop, before
// the newest.
TEST(ReplayDecision, SlotMismatchAfterTheStop)
{
	// Slot 3 holds id 2 ((2 - 1) mod 6 = 1, not 3), met at step 4, past the
	// stop: still a slot mismatch, and it is the first refusal met (the stop's
	// own refusal comes after the walk): slot-mismatch at slot 3, id 2.
	// lf 1, lw = max(0, min(0, 1)) = 0; the stop slot 1 is zeroed.
	const std::vector<SlotIn> slots{valid(1), bad(2), valid(3), valid(2), valid(5), empty()};
	const Outcome out = decide(slots, 0, false, none);
	EXPECT_EQ(out.plan.refusal, WB_REPLAY_SLOT_MISMATCH);
	EXPECT_EQ(out.plan.refusal_slot, 3u);
	EXPECT_EQ(out.plan.refusal_id, 2u);
	EXPECT_EQ(out.steps, (std::vector<Step>{{WB_WALK_APPLY, 0, 1}, {WB_WALK_STOP, 1, 2}}));
	EXPECT_EQ(out.plan.last_flushed_id, 1u);
	EXPECT_EQ(out.plan.last_writeback_id, 0u);
	EXPECT_TRUE(out.plan.zero_stop_slot);
	EXPECT_EQ(out.plan.stop_slot, 1u);
	// The kernel, which reads nothing past the stop, finds the same.
	expect_same_plan(decide(slots, 0, false, none, std::nullopt, true).plan, out.plan);
	// A bad verdict there changes nothing: it is not looked at.
	std::vector<SlotIn> bad_there = slots;
	bad_there[3] = bad(2);
	expect_same_plan(decide(bad_there, 0, false, none).plan, out.plan);

	// With id 4 in slot 3 (its own) only the stop is left: stops-early at
	// slot 1, id 2.
	std::vector<SlotIn> own = slots;
	own[3] = valid(4);
	const Outcome stop = decide(own, 0, false, none);
	EXPECT_EQ(stop.plan.refusal, WB_REPLAY_STOPS_EARLY);
	EXPECT_EQ(stop.plan.refusal_slot, 1u);
	EXPECT_EQ(stop.plan.refusal_id, 2u);
}

// 4 slots, ids 5, 6, 7 valid in slots 0..2.
TEST(ReplayDecision, UnreadableNewest)
{
	// The header of slot 3 (where 8 would be) cannot be read: its id is not
	// known (0), so max = 7 and the walk starts at slot 7 mod 4 = 3, where it
	// stops at once: unreadable at slot 3 (id 0). lf 0, lw 0, next_id 1.
	const Outcome header = decide({valid(5), valid(6), valid(7), {0, WB_SLOT_UNREADABLE}}, 0, false, none);
	EXPECT_EQ(header.plan.refusal, WB_REPLAY_UNREADABLE);
	EXPECT_EQ(header.plan.refusal_slot, 3u);
	EXPECT_EQ(header.plan.refusal_id, 0u);
	EXPECT_EQ(header.steps, (std::vector<Step>{{WB_WALK_STOP, 3, 0}}));
	EXPECT_EQ(header.plan.last_flushed_id, 0u);
	EXPECT_EQ(header.plan.last_writeback_id, 0u);
	EXPECT_EQ(header.plan.next_id, 1u);

	// Its header read (id 8, the newest) but not its data: max 8, the walk
	// applies 5, 6, 7 and stops at slot 3. Unlike a bad newest segment
	// (the power cut's), an unreadable one is refused: unreadable at slot 3,
	// id 8. lf 7, lw = max(3, min(0, 7)) = 3.
	const Outcome data = decide({valid(5), valid(6), valid(7), {8, WB_SLOT_UNREADABLE}}, 0, false, none);
	EXPECT_EQ(data.plan.refusal, WB_REPLAY_UNREADABLE);
	EXPECT_EQ(data.plan.refusal_slot, 3u);
	EXPECT_EQ(data.plan.refusal_id, 8u);
	EXPECT_EQ(data.plan.last_flushed_id, 7u);
	EXPECT_EQ(data.plan.last_writeback_id, 3u);
	// The same slot bad instead: the torn newest, no refusal.
	EXPECT_EQ(decide({valid(5), valid(6), valid(7), bad(8)}, 0, false, none).plan.refusal, WB_REPLAY_OK);
}

// 4 empty slots: max 0, nothing to walk. lf = lw = 0, next_id 1, no refusal,
// nothing to zero.
TEST(ReplayDecision, EmptyLogWithARecord)
{
	// Record 5 > lf 0: rewritten (to lw 0). The trust (1) is not <= lf 0:
	// unchanged.
	const Outcome out = decide({empty(), empty(), empty(), empty()}, 5, true, 1);
	EXPECT_EQ(out.plan.refusal, WB_REPLAY_OK);
	EXPECT_TRUE(out.steps.empty());
	EXPECT_EQ(out.plan.last_flushed_id, 0u);
	EXPECT_EQ(out.plan.last_writeback_id, 0u);
	EXPECT_EQ(out.plan.next_id, 1u);
	EXPECT_TRUE(out.plan.rewrite_record);
	EXPECT_EQ(out.plan.trusted_from_id, 1u);
	EXPECT_FALSE(out.plan.write_trust);
	EXPECT_FALSE(out.plan.zero_stop_slot);
	// Record 0: nothing to rewrite.
	EXPECT_FALSE(decide({empty(), empty(), empty(), empty()}, 0, true, 1).plan.rewrite_record);
}

namespace {

// Finding 1 on a cache the library's LogWriter wrote (it formats as dm-wbkit
// does, with the trust record from id 1): 16 slots, segments 1..100 each one
// block of its own, so ids 85..100 are on the cache; segment 88's slot (7)
// is written back and then torn (a byte of its data flipped: the checksum
// fails), as a rewrite of it cut by a power loss would leave it.
class Finding1Image {
public:
	Finding1Image()
	{
		cache_path = dir.make_image("cache.img", superblock_size + 16 * segment_size);
		backing_path = dir.make_image("backing.img", 4ULL << 20);
		cache = dir.open_rw(cache_path);
		backing = dir.open_rw(backing_path);
		LogWriter writer(*cache, LogWriterOptions{.backing = backing.get()});
		for (std::uint64_t id = 1; id <= 100; ++id) {
			writer.write(id * block_sectors, pattern_bytes(block_size, id));
			writer.flush();
		}
		writer.write_back_through(88);
		writer.corrupt_segment_data(88);
	}

	// Another writer's cache: the same log without the trust record.
	void drop_trust_record()
	{
		AlignedBuffer zero(sector_size);
		std::ranges::fill(zero.span(), std::byte{0});
		cache->write_exact(WB_TRUST_SECTOR * sector_size, zero.span());
	}

	TempDir dir;
	std::string cache_path, backing_path;
	std::unique_ptr<Device> cache, backing;
};

std::vector<Finding> with_code(const LogScan& s, FindingCode code)
{
	std::vector<Finding> out;
	std::copy_if(s.findings.begin(), s.findings.end(), std::back_inserter(out),
		     [&](const Finding& f) { return f.code == code; });
	return out;
}

} // namespace

TEST(ReplayDecision, Finding1_OnALogWriterImage)
{
	Finding1Image image;
	// dm-wbkit's own log (the trust record is there): the damaged segment 88
	// at step 3 (slot 7) is refused as damaged-rewrite, the log ends at 87,
	// and nothing past 87 counts as written back.
	const LogScan own = scan_log(*image.cache);
	ASSERT_TRUE(own.trust_record);
	EXPECT_EQ(own.max_id, 100u);
	EXPECT_FALSE(own.torn_rewrites);
	EXPECT_TRUE(own.refused());
	EXPECT_EQ(own.decision.refusal, WB_REPLAY_DAMAGED_REWRITE);
	EXPECT_EQ(own.decision.refusal_slot, 7u);
	EXPECT_EQ(own.decision.refusal_id, 88u);
	EXPECT_EQ(own.stop_slot, 7u);
	EXPECT_EQ(own.rewritten_id, 0u);
	EXPECT_EQ(own.last_flushed_id, 87u);
	// What the ring proves (87 - 16) or the record (capped at 87): below 88.
	EXPECT_EQ(own.last_writeback_id, std::max<std::uint64_t>(71, std::min<std::uint64_t>(own.sb_record, 87)));
	EXPECT_LT(own.last_writeback_id, 88u);
	const std::vector<Finding> refused = with_code(own, FindingCode::log_refused);
	ASSERT_EQ(refused.size(), 1u);
	EXPECT_EQ(refused[0].place.slot, 7u);
	EXPECT_EQ(refused[0].place.segment_id, 88u);
	EXPECT_TRUE(has_damage(own.findings));
	// A tool told to apply the rule (wbrecover --torn-rewrite) reads it as a rewrite.
	const LogScan forced = scan_log(*image.cache, {.torn_rewrites = true});
	EXPECT_FALSE(forced.refused());
	EXPECT_EQ(forced.rewritten_id, 88u);

	// Another writer's log (no trust record): a torn rewrite, skipped. The
	// log is 89..100, everything up to 88 counts as written back, no refusal.
	image.drop_trust_record();
	const LogScan other = scan_log(*image.cache);
	EXPECT_FALSE(other.trust_record);
	EXPECT_TRUE(other.torn_rewrites);
	EXPECT_FALSE(other.refused());
	EXPECT_EQ(other.rewritten_id, 88u);
	EXPECT_EQ(other.rewrite_slot, 7u);
	ASSERT_EQ(other.log.size(), 12u);
	EXPECT_EQ(other.log.front().id, 89u);
	EXPECT_EQ(other.log.back().id, 100u);
	EXPECT_EQ(other.last_flushed_id, 100u);
	EXPECT_GE(other.last_writeback_id, 88u);
	EXPECT_TRUE(with_code(other, FindingCode::log_refused).empty());
	EXPECT_EQ(with_code(other, FindingCode::torn_rewrite_skipped).size(), 1u);
}
