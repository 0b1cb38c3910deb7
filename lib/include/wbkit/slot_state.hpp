// The vocabulary of a slot: what a scan made of it (SlotState), why the
// replay walk ended (StopReason), what a replay did with its segment
// (SegmentReason), and the one mapping between them and the findings
// (FindingCode). Every name comes from a table (slot_state.cpp); names are
// stable, kebab-case: the JSON documents carry them and scripts match on them.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "wbkit/findings.hpp"
#include "wbkit/format.hpp"

namespace wbkit {

enum class SlotState : std::uint8_t {
	empty,             // id 0: never written
	valid,             // checksum matches
	unverified,        // headers-only scan
	checksum_mismatch, // checksum does not match
	legacy_checksum,   // stored value is the bitwise NOT (upstream < 2.0.2)
	length_too_large,  // length > 127
	header_unreadable, // read error on the header block
	data_unreadable,   // read error on the data blocks
};

enum class StopReason : std::uint8_t {
	end_of_ring,       // every slot was walked
	empty_log,         // max_id is 0: nothing to replay
	checksum_mismatch, // a segment failed its checksum (or its length)
	unreadable,        // a segment could not be read
	not_verified,      // headers-only scan: the walk assumed every checksum good
};

enum class SegmentReason : std::uint8_t {
	replayed,             // in the log; the plan writes sectors from it
	superseded,           // in the log; newer copies decide every sector it holds
	used,                 // recovery took all of it
	used_partially,       // recovery took the metablocks it could read
	already_written_back, // its id is at most last_writeback_id
	after_stop_point,     // readable, but past the point where the log ends
	torn_newest_segment,  // the newest segment fails its checksum: never acknowledged
	torn_rewrite,         // a torn rewrite the walk skipped: written back before its slot was reused
	lost_in_flight,       // a lap-old segment where a write was lost in flight: written back before its slot was reused
	checksum_mismatch,    // fails its checksum over readable bytes: its content is wrong
	legacy_checksum,      // checksum of dm-writeboost before 2.0.2
	unreadable,           // its header or data could not be read
	header_unreadable,    // recovery could not read the header at all
	length_too_large,     // the header claims more than 127 blocks
	slot_mismatch,        // an unverifiable segment in a slot other than its id's
};

// One slot state and what it means everywhere else.
struct SlotStateInfo {
	SlotState state;
	std::string_view name;
	// The walk applies the segment (and goes on). Otherwise, for a non-empty
	// slot, the walk stops there for `stop`.
	bool in_log;
	StopReason stop;
	// The finding the scan reports for a segment in this state, when it has one.
	bool has_finding;
	FindingCode finding;
	// Why a replay leaves out a segment in this state (a readable one: it
	// lies after the stop point).
	SegmentReason left_out;
};

struct StopReasonInfo {
	StopReason reason;
	std::string_view name;
};

struct SegmentReasonInfo {
	SegmentReason reason;
	std::string_view name;
};

std::span<const SlotStateInfo> all_slot_states();
std::span<const StopReasonInfo> all_stop_reasons();
std::span<const SegmentReasonInfo> all_segment_reasons();

const SlotStateInfo& slot_state_info(SlotState state);
std::string_view slot_state_name(SlotState state);
std::string_view stop_reason_name(StopReason reason);
std::string_view segment_reason_name(SegmentReason reason);

// What a stored checksum says about a non-empty segment.
struct ChecksumVerdict {
	SlotState state = SlotState::checksum_mismatch; // valid, legacy_checksum or checksum_mismatch
	// The CRC of the reading that matched; the CRC as the bytes are when none did.
	std::uint32_t computed = 0;
	// Valid only with the metablocks past length read as zero (an append in
	// place cut between its two writes): how many it ignores. 0 otherwise.
	unsigned ignored_metablocks = 0;

	bool tail_ignored() const { return ignored_metablocks > 0; }
};

// The one decision whether a segment's checksum matches (docs/FORMAT.md,
// "Checksum"): the stored value is the CRC of the bytes as they are, or the
// CRC with the metablocks from index length on read as zero. The inverted
// value of upstream before 2.0.2 is named, never valid.
ChecksumVerdict checksum_verdict(std::uint32_t stored, const SegmentCrc& computed);

// Why a replay leaves out a non-empty segment, from its slot state. newest:
// its id is the largest on the cache (a torn newest segment was never
// acknowledged). A readable segment is left out only when it lies after the
// point where the log stops.
SegmentReason left_out_reason(SlotState state, bool newest);

} // namespace wbkit
