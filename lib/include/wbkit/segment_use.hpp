// What a replay does with each non-empty slot: whether its segment is used,
// and why, in one vocabulary for wbreplay's report and wbrecover's.
#pragma once

#include <cstdint>

#include "wbkit/slot_state.hpp"

namespace wbkit {

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
