// The detail views of a cache: one slot read in full, and where the newest
// copy of one backing sector lives. report.hpp renders them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "wbkit/device.hpp"
#include "wbkit/log_scan.hpp"

namespace wbkit {

// One slot read in full: its header, checksum, read errors.
struct SlotDetail {
	std::uint64_t slot = 0;
	std::uint64_t cache_offset = 0;
	bool header_readable = false;
	bool data_readable = false;
	SegmentHeader header;
	// When header and data were readable: the CRC of the reading that
	// matched (checksum_verdict), or of the bytes as they are.
	std::optional<std::uint32_t> computed_checksum;
	SlotState state = SlotState::empty;
	// Valid only with the metablocks past length read as zero (an append in
	// place cut between its two writes): how many it ignores. 0 otherwise.
	unsigned ignored_metablocks = 0;
	std::string error; // why something could not be read
};

SlotDetail inspect_slot(Device& cache, const Geometry& geometry, std::uint64_t slot);
// The segment with this id, read from the slot it must live in. UsageError
// when the id cannot be on this cache or that slot holds another segment.
SlotDetail inspect_segment(Device& cache, const Geometry& geometry, std::uint64_t id);
// The same, but a segment the scan found in another slot than its own
// (slot-mismatch) is still on the cache: it is shown where it lies.
SlotDetail inspect_segment(Device& cache, const LogScan& scan, std::uint64_t id);

// Where the newest copy of one backing sector lives, and its 512 bytes.
struct SectorDetail {
	std::uint64_t backing_sector = 0;
	std::optional<SectorSource> source{}; // none: the backing device holds the sector
	std::uint64_t segment_id = 0;
	std::uint64_t slot = 0;
	std::uint64_t cache_offset = 0; // of the sector itself
	bool dirty = false;
	bool readable = false;
	std::vector<std::byte> data; // the cache copy, when readable
	std::string error;
};

SectorDetail inspect_sector(Device& cache, const LogScan& scan, std::uint64_t backing_sector);

} // namespace wbkit
