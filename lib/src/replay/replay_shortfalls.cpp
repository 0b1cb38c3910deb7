// What a kernel-policy replay leaves behind, in words for its report.
#include "wbkit/replay.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace wbkit {

std::vector<std::string> replay_shortfalls(const ReplayPlan& plan)
{
	std::vector<std::string> out;
	const LogScan& scan = plan.scan();
	if (scan.stop_slot) {
		const SlotInfo& info = scan.slots[*scan.stop_slot];
		const bool torn = info.id == scan.max_id && info.state == SlotState::checksum_mismatch;
		if (!torn)
			out.push_back(fmt::format("the log stops at slot {} (segment {}, {}): that segment is not replayed",
						  *scan.stop_slot, info.id, slot_state_name(info.state)));
	}
	if (scan.discarded_segments > 0)
		out.push_back(fmt::format("{} valid segment(s) after the stop point are not replayed (wbrecover --salvage "
					  "can take them)",
					  scan.discarded_segments));
	if (scan.sb_record != 0 && scan.sb_record > scan.max_id) {
		// The kernel's rule takes the record as is: everything up to it counts as written back.
		const std::uint64_t inferred = wb_previous_lap_id(scan.last_flushed_id, scan.geometry.nr_segments);
		if (scan.last_flushed_id > inferred)
			out.push_back(fmt::format("the superblock record ({}) is past the newest segment id ({}) "
						  "(sb-record-out-of-range): as the kernel does, segments {}..{} are taken as "
						  "written back and not replayed (wbrecover --salvage replays them)",
						  scan.sb_record, scan.max_id, std::max(inferred + 1, scan.oldest_id()),
						  scan.last_flushed_id));
	}
	const ReplaySummary& s = plan.summary();
	if (s.skipped_sectors > 0)
		out.push_back(fmt::format("{} dirty sector(s) lie past the end of the backing device (first: sector {}) "
					  "and are not replayed",
					  s.skipped_sectors, *s.first_skipped_sector));
	return out;
}

} // namespace wbkit
