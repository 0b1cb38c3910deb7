// Writes a cache image the way the target does, for tests, fixtures and
// benchmarks: formats the cache, gathers writes into segments, flushes them
// with their checksums, writes back old segments before their slot is reused.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <unordered_map>
#include <vector>

#include "wbkit/device.hpp"
#include "wbkit/format.hpp"

namespace wbkit {

struct LogWriterOptions {
	// Zero the superblock region and every slot header, write the clean-copy
	// trust record (from id 1, as dm-wbkit does), then the magic.
	bool format = true;
	// Off: format as upstream does, without the trust record: a log another
	// writer left, where the torn-rewrite rule applies (docs/FORMAT.md).
	bool trust_record = true;
	// A partial write over an older dirty copy takes that copy's other dirty
	// sectors into the new block, as the target does. Off: the new entry
	// carries only its own sectors and the older entry still decides the rest.
	bool merge_partial_overwrites = true;
	// Where segments are written back before their slot is reused. Without
	// one, wrapping over a segment that still holds dirty data is an error.
	Device* backing = nullptr;
};

class LogWriter {
public:
	explicit LogWriter(Device& cache, const LogWriterOptions& options = {});

	// A write of whole sectors at a backing sector; split into 4 KiB blocks.
	void write(std::uint64_t backing_sector, std::span<const std::byte> data);
	// A clean entry for one 4 KiB block whose data equals the backing device's.
	void write_clean(std::uint64_t block_sector, std::span<const std::byte> block);
	// REQ_PREFLUSH: the open segment, if it holds anything, goes to the cache now.
	void flush();
	// Writes back every sealed segment up to and including id (the daemon's job).
	void write_back_through(std::uint64_t id);

	// Damage for tests, applied to a segment already on the cache device.
	void corrupt_segment_data(std::uint64_t id); // one flipped byte: checksum fails
	void tear_segment(std::uint64_t id);         // later half holds stale bytes, as after a torn write
	// An append in place cut between its two writes (docs/FORMAT.md,
	// "Checksum"): the header's first sector goes back to what it was when
	// the segment was committed at length `committed` (less than its
	// length): that length, and the checksum of that prefix. The metablock
	// area and the data blocks still name and hold the blocks past it.
	void cut_append(std::uint64_t id, unsigned committed);
	void set_superblock_record(std::uint64_t last_writeback_id);

	const Geometry& geometry() const { return geometry_; }
	std::uint64_t open_id() const { return open_id_; }
	std::uint64_t last_flushed_id() const { return open_id_ - 1; }
	std::uint64_t last_writeback_id() const { return last_writeback_id_; }

private:
	// Who holds the newest copy of one sector of a block.
	struct SectorOwner {
		std::uint64_t segment_id = 0; // 0: the backing device
		std::uint8_t index = 0;
		bool dirty = false;
	};
	using BlockOwners = std::array<SectorOwner, block_sectors>;

	void write_block(std::uint64_t block_sector, unsigned first, std::span<const std::byte> sectors, bool clean);
	void seal_segment();
	void write_back_segment(std::uint64_t id);
	std::uint64_t written_slot_of(std::uint64_t id) const;

	Device& cache_;
	LogWriterOptions options_;
	Geometry geometry_;
	std::uint64_t open_id_ = 1; // the segment being gathered in RAM
	std::uint64_t last_writeback_id_ = 0;
	AlignedBuffer open_segment_;
	SegmentHeader open_header_;
	std::unordered_map<std::uint64_t, unsigned> open_index_; // block -> index in the open segment
	std::unordered_map<std::uint64_t, BlockOwners> owners_;
	std::map<std::uint64_t, std::vector<Metablock>> sealed_; // id -> metablocks, not yet written back
	std::map<std::uint64_t, std::uint8_t> sealed_length_;    // id -> length, every segment on the cache
};

} // namespace wbkit
