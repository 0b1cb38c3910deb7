// Marking a replayed cache clean: the superblock record, and the headers
// from the stop point on, in an order every power cut survives.
#include "wbkit/replay.hpp"

#include <algorithm>

namespace wbkit {

std::uint64_t mark_cache_clean(Device& cache, const LogScan& scan)
{
	// Slots from the stop point on are not part of the log, yet a good
	// segment there keeps an id that the next segments reuse and follow: a
	// later replay would walk from the new segments into it and put its
	// older data over theirs (upstream's target does). So their headers go,
	// as the target's own replay zeroes them. The order makes every power
	// cut leave a disk that replays the same: first the slots beyond the
	// stop (the walk stops before them anyway), then the stop slot itself
	// (while it stands the walk stops there; zeroed earlier, the walk would
	// skip it and run on into the old segments), then the record; each
	// durable before the next.
	// The slots the walk discarded on a log another writer left (a torn
	// rewrite and the slots before it, segments lost in flight: the plan's
	// drop_slot) go before the trust record: with the record there, the
	// next replay reads them as damage and refuses the log. In the plan's
	// order, the last torn rewrite last, each durable before the next:
	// while it stands, the walk still starts after it. The kernel's replay
	// zeroes the same slots in the same order.
	AlignedBuffer zeros(block_size);
	std::ranges::fill(zeros.span(), std::byte{0});
	std::uint64_t zeroed = 0;
	for (unsigned int i = 0; i < scan.decision.nr_drop_slots; ++i) {
		cache.write_exact(scan.geometry.slot_offset(scan.decision.drop_slot[i]), zeros.span());
		cache.flush_or_throw();
		++zeroed;
	}

	// This repair changes the backing device outside the log (the salvage
	// policy even with data after the stop point): no cache copy logged
	// before it may serve reads afterwards, so the trust record goes first.
	AlignedBuffer trust(sector_size);
	write_clean_trust(trust.span(), WB_TRUST_NONE, scan.geometry.nr_segments);
	cache.write_exact(WB_TRUST_SECTOR * sector_size, trust.span());
	cache.flush_or_throw();

	if (scan.stop_slot) {
		const std::uint64_t nr = scan.slots.size();
		const std::uint64_t oldest = wb_oldest_slot(scan.max_id, nr);
		auto zero_header = [&](std::uint64_t slot) {
			cache.write_exact(scan.geometry.slot_offset(slot), zeros.span());
			++zeroed;
		};
		bool after_stop = false;
		for (std::uint64_t step = 0; step < nr; ++step) {
			const std::uint64_t slot = wb_ring_slot(oldest, step, nr);
			if (after_stop && scan.slots[slot].state != SlotState::empty)
				zero_header(slot);
			after_stop |= slot == *scan.stop_slot;
		}
		cache.flush_or_throw();
		zero_header(*scan.stop_slot);
		cache.flush_or_throw();
	}
	AlignedBuffer sector(sector_size);
	write_superblock_record(sector.span(), scan.last_flushed_id);
	cache.write_exact(WB_SB_RECORD_OFFSET, sector.span());
	cache.flush_or_throw();
	return zeroed;
}

} // namespace wbkit
