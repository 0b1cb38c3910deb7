// What a replay does with each non-empty slot: whether its segment is used,
// and why, in one vocabulary for wbreplay's report and wbrecover's.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "wbkit/log_scan.hpp"

namespace wbkit {

enum class SegmentReason : std::uint8_t {
	replayed,             // in the log; the plan writes sectors from it
	superseded,           // in the log; newer copies decide every sector it holds
	used,                 // recovery took all of it
	used_partially,       // recovery took the metablocks it could read
	already_written_back, // its id is at most last_writeback_id
	after_stop_point,     // readable, but past the point where the log ends
	torn_newest_segment,  // the newest segment fails its checksum: never acknowledged
	checksum_mismatch,    // fails its checksum over readable bytes: its content is wrong
	legacy_checksum,      // checksum of dm-writeboost before 2.0.2
	unreadable,           // its header or data could not be read
	header_unreadable,    // recovery could not read the header at all
	length_too_large,     // the header claims more than 127 blocks
	slot_mismatch,        // an unverifiable segment in a slot other than its id's
};

struct SegmentReasonInfo {
	SegmentReason reason;
	std::string_view name; // stable, kebab-case: what the JSON reports carry
};

std::span<const SegmentReasonInfo> all_segment_reasons();
std::string_view segment_reason_name(SegmentReason reason);

// Why a replay leaves out a non-empty segment, from its slot state. newest:
// its id is the largest on the cache. A readable segment is left out only
// when it lies after the point where the log stops.
SegmentReason left_out_reason(SlotState state, bool newest);

// One non-empty slot in a replay's report.
struct SegmentUse {
	std::uint64_t slot = 0;
	std::uint64_t id = 0;               // 0 when the header could not be read
	SlotState state = SlotState::empty; // as the kernel's scan saw it
	bool in_kernel_log = false;         // the kernel's replay applies it
	bool used = false;                  // the replay this report describes takes data from it
	SegmentReason reason = SegmentReason::unreadable;
	std::uint64_t sectors_replayed = 0; // dirty sectors the replay's plan writes from it
	bool data_left_behind = false;      // holds readable data that the kernel's replay does not take
	// Recovery reads every slot tolerantly and counts what it could read.
	unsigned metablocks = 0; // known (readable) metablocks
	unsigned metablocks_used = 0;
	std::uint64_t unreadable_dirty_sectors = 0; // dirty sectors whose data could not be read
	std::uint64_t left_behind_sectors = 0;      // readable dirty sectors the policy did not take
};

} // namespace wbkit
