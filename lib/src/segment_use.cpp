#include "wbkit/segment_use.hpp"

#include <array>

#include "wbkit/replay.hpp"

namespace wbkit {

namespace {

using enum SegmentReason;

// The one list of segment reasons. Names are stable: scripts match on them.
constexpr std::array segment_reason_table{
	SegmentReasonInfo{replayed, "replayed"},
	SegmentReasonInfo{superseded, "superseded"},
	SegmentReasonInfo{used, "used"},
	SegmentReasonInfo{used_partially, "used-partially"},
	SegmentReasonInfo{already_written_back, "already-written-back"},
	SegmentReasonInfo{after_stop_point, "after-stop-point"},
	SegmentReasonInfo{torn_newest_segment, "torn-newest-segment"},
	SegmentReasonInfo{checksum_mismatch, "checksum-mismatch"},
	SegmentReasonInfo{legacy_checksum, "legacy-checksum"},
	SegmentReasonInfo{unreadable, "unreadable"},
	SegmentReasonInfo{header_unreadable, "header-unreadable"},
	SegmentReasonInfo{length_too_large, "length-too-large"},
	SegmentReasonInfo{slot_mismatch, "slot-mismatch"},
};

} // namespace

std::span<const SegmentReasonInfo> all_segment_reasons() { return segment_reason_table; }

std::string_view segment_reason_name(SegmentReason reason)
{
	for (const auto& info : segment_reason_table)
		if (info.reason == reason)
			return info.name;
	// Every enumerator is in the table; the unit tests check it.
	return "unknown";
}

SegmentReason left_out_reason(SlotState state, bool newest)
{
	switch (state) {
	case SlotState::checksum_mismatch:
		return newest ? torn_newest_segment : checksum_mismatch;
	case SlotState::legacy_checksum:
		return legacy_checksum;
	case SlotState::header_unreadable:
	case SlotState::data_unreadable:
		return unreadable;
	case SlotState::length_too_large:
		return length_too_large;
	case SlotState::empty:
	case SlotState::valid:
	case SlotState::unverified:
		break;
	}
	return after_stop_point;
}

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
	for (std::uint64_t step = 0; step < nr; ++step) {
		const std::uint64_t slot = wb_ring_slot(oldest, step, nr);
		const SlotInfo& info = scan.slots[slot];
		if (info.state == SlotState::empty)
			continue;
		SegmentUse use{
			.slot = slot, .id = info.id, .state = info.state, .in_kernel_log = info.in_log, .used = info.in_log};
		const bool at_stop = scan.stop_slot && *scan.stop_slot == slot;
		after_stop |= at_stop;
		if (info.in_log) {
			const std::uint32_t pos = log_position[slot];
			use.sectors_replayed = plan.sectors_per_segment()[pos];
			if (scan.log[pos].written_back)
				use.reason = SegmentReason::already_written_back;
			else if (use.sectors_replayed > 0)
				use.reason = SegmentReason::replayed;
			else
				use.reason = SegmentReason::superseded;
		} else if (after_stop && !at_stop) {
			use.reason = SegmentReason::after_stop_point;
			use.data_left_behind = info.state == SlotState::valid || info.state == SlotState::unverified;
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
