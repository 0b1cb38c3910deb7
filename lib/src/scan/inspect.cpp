#include "wbkit/inspect.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

#include "wbkit/errors.hpp"

namespace wbkit {

SlotDetail inspect_slot(Device& cache, const Geometry& geometry, std::uint64_t slot)
{
	SlotDetail d;
	d.slot = slot;
	d.cache_offset = geometry.slot_offset(slot);
	AlignedBuffer buffer(segment_size);
	if (int err = cache.read_at(d.cache_offset, buffer.span().first(block_size))) {
		d.state = SlotState::header_unreadable;
		d.error = fmt::format("reading the header failed: {}", std::strerror(err));
		return d;
	}
	d.header_readable = true;
	d.header = parse_segment_header(buffer.span().first(block_size));
	if (!d.header.length_valid()) {
		d.state = SlotState::length_too_large;
		return d;
	}
	if (int err = cache.read_at(d.cache_offset + block_size,
				    buffer.span().subspan(block_size, block_size * d.header.length))) {
		d.state = SlotState::data_unreadable;
		d.error = fmt::format("reading the data blocks failed: {}", std::strerror(err));
		return d;
	}
	d.data_readable = true;
	const ChecksumVerdict verdict = checksum_verdict(d.header.checksum, segment_crc(buffer.span(), d.header.length));
	d.computed_checksum = verdict.computed;
	if (d.header.id == 0) {
		d.state = SlotState::empty;
	} else {
		d.state = verdict.state;
		d.ignored_metablocks = verdict.ignored_metablocks;
	}
	return d;
}

SlotDetail inspect_segment(Device& cache, const Geometry& geometry, std::uint64_t id)
{
	SlotDetail d = inspect_slot(cache, geometry, geometry.checked_slot_of_id(id));
	if (d.header.id != id)
		throw UsageError(
			fmt::format("segment {} is not on the cache (slot {} holds segment {})", id, d.slot, d.header.id));
	return d;
}

SlotDetail inspect_segment(Device& cache, const LogScan& scan, std::uint64_t id)
{
	const std::uint64_t home = scan.geometry.checked_slot_of_id(id);
	if (home < scan.slots.size() && scan.slots[home].id != id) {
		auto found = std::find_if(scan.slots.begin(), scan.slots.end(),
					  [&](const SlotInfo& info) { return info.id == id; });
		if (found != scan.slots.end())
			return inspect_slot(cache, scan.geometry, std::uint64_t(found - scan.slots.begin()));
	}
	return inspect_segment(cache, scan.geometry, id);
}

SectorDetail inspect_sector(Device& cache, const LogScan& scan, std::uint64_t backing_sector)
{
	SectorDetail d;
	d.backing_sector = backing_sector;
	d.source = scan.find_sector(backing_sector);
	if (!d.source)
		return d;
	const LogSegment& seg = scan.log[d.source->log_index];
	const unsigned bit = unsigned(backing_sector - d.source->block_sector);
	d.segment_id = seg.id;
	d.slot = seg.slot;
	d.dirty = (d.source->dirty >> bit) & 1u;
	d.cache_offset = scan.source_offset(*d.source) + bit * sector_size;
	d.data.resize(sector_size);
	if (int err = cache.read_at(d.cache_offset, d.data)) {
		d.error = fmt::format("reading the cache copy failed: {}", std::strerror(err));
		d.data.clear();
	} else {
		d.readable = true;
	}
	return d;
}

} // namespace wbkit
