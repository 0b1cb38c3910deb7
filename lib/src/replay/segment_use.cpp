#include "wbkit/segment_use.hpp"

#include <algorithm>

#include "wbkit/replay.hpp"

namespace wbkit {

std::vector<SegmentUse> segment_uses(const ReplayPlan& plan)
{
	const LogScan& scan = plan.scan();
	const std::vector<std::uint32_t> log_position = scan.log_positions();

	std::vector<SegmentUse> uses;
	if (scan.slots.empty())
		return uses;
	// Ring order from the oldest, as the replay walks.
	const std::uint64_t nr = scan.slots.size();
	const std::uint64_t oldest = wb_oldest_slot(scan.max_id, nr);
	bool after_stop = false;
	// Up to a torn rewrite the walk skipped, every segment counts as written back.
	bool up_to_rewrite = scan.rewrite_slot.has_value();
	for (std::uint64_t step = 0; step < nr; ++step) {
		const std::uint64_t slot = wb_ring_slot(oldest, step, nr);
		const SlotInfo& info = scan.slots[slot];
		if (info.state == SlotState::empty)
			continue;
		SegmentUse use{
			.slot = slot, .id = info.id, .state = info.state, .in_kernel_log = info.in_log, .used = info.in_log};
		const bool at_stop = scan.stop_slot && *scan.stop_slot == slot;
		after_stop |= at_stop;
		if (up_to_rewrite) {
			// A good segment before it, or a torn rewrite (the skipped slot, or an earlier one).
			use.reason = slot_state_info(info.state).in_log ? SegmentReason::already_written_back
									: SegmentReason::torn_rewrite;
			up_to_rewrite = slot != *scan.rewrite_slot;
		} else if (info.in_log) {
			const std::uint32_t pos = log_position[slot];
			use.sectors_replayed = plan.sectors_per_segment()[pos];
			if (scan.log[pos].written_back)
				use.reason = SegmentReason::already_written_back;
			else if (use.sectors_replayed > 0)
				use.reason = SegmentReason::replayed;
			else
				use.reason = SegmentReason::superseded;
		} else if (std::ranges::find(scan.lost_slots, slot) != scan.lost_slots.end()) {
			// Its old segment was written back before the lost write reused the slot.
			use.reason = SegmentReason::lost_in_flight;
		} else if (after_stop && !at_stop) {
			use.reason = SegmentReason::after_stop_point;
			use.data_left_behind = slot_state_info(info.state).in_log;
		} else {
			const bool newest = info.id == scan.max_id;
			use.reason = left_out_reason(info.state, newest);
			// A torn newest segment held no acknowledged write: nothing of it is missed.
			use.data_left_behind = at_stop && (!newest || info.state != SlotState::checksum_mismatch);
		}
		uses.push_back(use);
	}
	return uses;
}

} // namespace wbkit
