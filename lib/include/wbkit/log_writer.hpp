// Writes a cache image the way the target does, for tests, fixtures and
// benchmarks: formats the cache, gathers writes into segments, flushes them
// with their checksums, writes back old segments before their slot is reused.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "wbkit/device.hpp"
#include "wbkit/format.hpp"

namespace wbkit {

struct LogWriterOptions {
	bool format = true; // zero the superblock region and slot headers, write the magic
	// A partial write over an older dirty copy takes that copy's other dirty
	// sectors into the new block, as the target does. Off: the new entry
	// carries only its own sectors, and the older entry stays in the log.
	bool merge_partial_overwrites = true;
	// Write back a segment before its slot is reused (needs a backing device).
	Device* backing = nullptr;
};

class LogWriter {
public:
	LogWriter(Device& cache, const LogWriterOptions& options = {});

	// A write of whole sectors at a backing sector; split into 4 KiB blocks.
	void write(std::uint64_t backing_sector, std::span<const std::byte> data);
	// A clean entry for one 4 KiB block (data equal to the backing device's).
	void write_clean(std::uint64_t block_sector, std::span<const std::byte> block);
	// REQ_PREFLUSH: the open segment goes to the cache device now.
	void flush();

	// Damage for tests: applied to a segment already written.
	void corrupt_segment_data(std::uint64_t id); // flips a data byte: checksum fails
	void tear_segment(std::uint64_t id);         // zeroes the second half: a torn write
	void set_superblock_record(std::uint64_t last_writeback_id);

	const Geometry& geometry() const { return geometry_; }
	std::uint64_t current_id() const { return open_id_; }
	std::uint64_t last_flushed_id() const { return open_id_ - 1; }
	std::uint64_t last_writeback_id() const { return last_writeback_id_; }

private:
	struct CachedBlock {
		std::uint64_t segment_id;
		unsigned index;
		std::uint8_t dirty_bits;
	};
	void write_block(std::uint64_t block_sector, unsigned first_sector, std::span<const std::byte> sectors,
			 bool clean);
	void seal_segment();
	void write_back_segment(std::uint64_t id);

	Device& cache_;
	LogWriterOptions options_;
	Geometry geometry_;
	std::uint64_t open_id_ = 1; // the segment being gathered in RAM
	std::uint64_t last_writeback_id_ = 0;
	AlignedBuffer open_segment_;
	SegmentHeader open_header_;
	std::unordered_map<std::uint64_t, CachedBlock> newest_; // block sector -> newest entry
	// Metablocks per segment id still on the cache device, to write them back.
	std::map<std::uint64_t, std::vector<Metablock>> on_cache_;
};

} // namespace wbkit
