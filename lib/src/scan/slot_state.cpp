#include "wbkit/slot_state.hpp"

#include <array>

namespace wbkit {

namespace {

// No finding: any code will do, has_finding says it is not one.
constexpr FindingCode none = FindingCode::checksum_mismatch;

// The one mapping from a slot state to the walk, the findings and a replay's
// report. Order: the enumerators'.
constexpr std::array slot_state_table{
	SlotStateInfo{SlotState::empty, "empty", false, StopReason::end_of_ring, false, none,
		      SegmentReason::after_stop_point},
	SlotStateInfo{SlotState::valid, "valid", true, StopReason::end_of_ring, false, none,
		      SegmentReason::after_stop_point},
	SlotStateInfo{SlotState::unverified, "unverified", true, StopReason::not_verified, false, none,
		      SegmentReason::after_stop_point},
	SlotStateInfo{SlotState::checksum_mismatch, "checksum-mismatch", false, StopReason::checksum_mismatch, true,
		      FindingCode::checksum_mismatch, SegmentReason::checksum_mismatch},
	SlotStateInfo{SlotState::legacy_checksum, "legacy-checksum", false, StopReason::checksum_mismatch, true,
		      FindingCode::checksum_legacy_inverted, SegmentReason::legacy_checksum},
	SlotStateInfo{SlotState::length_too_large, "length-too-large", false, StopReason::checksum_mismatch, true,
		      FindingCode::length_too_large, SegmentReason::length_too_large},
	SlotStateInfo{SlotState::header_unreadable, "header-unreadable", false, StopReason::unreadable, true,
		      FindingCode::header_unreadable, SegmentReason::unreadable},
	SlotStateInfo{SlotState::data_unreadable, "data-unreadable", false, StopReason::unreadable, true,
		      FindingCode::data_unreadable, SegmentReason::unreadable},
};

constexpr std::array stop_reason_table{
	StopReasonInfo{StopReason::end_of_ring, "end-of-ring"},
	StopReasonInfo{StopReason::empty_log, "empty-log"},
	StopReasonInfo{StopReason::checksum_mismatch, "checksum-mismatch"},
	StopReasonInfo{StopReason::unreadable, "unreadable"},
	StopReasonInfo{StopReason::not_verified, "not-verified"},
};

using enum SegmentReason;

constexpr std::array segment_reason_table{
	SegmentReasonInfo{replayed, "replayed"},
	SegmentReasonInfo{superseded, "superseded"},
	SegmentReasonInfo{used, "used"},
	SegmentReasonInfo{used_partially, "used-partially"},
	SegmentReasonInfo{already_written_back, "already-written-back"},
	SegmentReasonInfo{after_stop_point, "after-stop-point"},
	SegmentReasonInfo{torn_newest_segment, "torn-newest-segment"},
	SegmentReasonInfo{torn_rewrite, "torn-rewrite"},
	SegmentReasonInfo{lost_in_flight, "lost-in-flight"},
	SegmentReasonInfo{checksum_mismatch, "checksum-mismatch"},
	SegmentReasonInfo{legacy_checksum, "legacy-checksum"},
	SegmentReasonInfo{unreadable, "unreadable"},
	SegmentReasonInfo{header_unreadable, "header-unreadable"},
	SegmentReasonInfo{length_too_large, "length-too-large"},
	SegmentReasonInfo{slot_mismatch, "slot-mismatch"},
};

// Each table lists its enumerators in order, so a value indexes it; the unit
// tests check the order.
template <typename Table, typename Enum>
const auto& entry(const Table& table, Enum value)
{
	const auto i = std::size_t(value);
	return i < table.size() ? table[i] : table.front();
}

} // namespace

std::span<const SlotStateInfo> all_slot_states() { return slot_state_table; }
std::span<const StopReasonInfo> all_stop_reasons() { return stop_reason_table; }
std::span<const SegmentReasonInfo> all_segment_reasons() { return segment_reason_table; }

const SlotStateInfo& slot_state_info(SlotState state) { return entry(slot_state_table, state); }
std::string_view slot_state_name(SlotState state) { return entry(slot_state_table, state).name; }
std::string_view stop_reason_name(StopReason reason) { return entry(stop_reason_table, reason).name; }
std::string_view segment_reason_name(SegmentReason reason) { return entry(segment_reason_table, reason).name; }

ChecksumVerdict checksum_verdict(std::uint32_t stored, const SegmentCrc& computed)
{
	if (stored == computed.as_is)
		return {.state = SlotState::valid, .computed = computed.as_is};
	if (computed.tail_zeroed && stored == *computed.tail_zeroed)
		return {.state = SlotState::valid,
			.computed = *computed.tail_zeroed,
			.ignored_metablocks = computed.tail_metablocks};
	// Upstream before 2.0.2 wrote whole segments only: its tail is zero.
	if (stored == ~computed.as_is)
		return {.state = SlotState::legacy_checksum, .computed = computed.as_is};
	return {.state = SlotState::checksum_mismatch, .computed = computed.as_is};
}

SegmentReason left_out_reason(SlotState state, bool newest)
{
	if (state == SlotState::checksum_mismatch && newest)
		return torn_newest_segment;
	return slot_state_info(state).left_out;
}

} // namespace wbkit
