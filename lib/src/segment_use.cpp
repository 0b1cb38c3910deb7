#include "wbkit/segment_use.hpp"

#include <array>

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

} // namespace wbkit
