// The log scan: docs/FORMAT.md's replay walk, exactly as the kernel target does it
// on construction, plus the validator's extra checks, and the resulting
// kernel-equivalent state of every backing sector.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "wbkit/device.hpp"
#include "wbkit/findings.hpp"
#include "wbkit/format.hpp"

namespace wbkit {

struct ScanOptions {
	// Read the written part of every segment and check its CRC. Without it
	// only headers are read and every non-empty segment is assumed valid, so
	// where the kernel's replay stops is not known.
	bool verify_checksums = true;
	// Size of the backing device, to report metablocks that point past it.
	std::optional<std::uint64_t> backing_bytes{};
	// Called after each segment slot with the cache bytes covered so far and
	// in total (slots x 512 KiB), from one thread at a time.
	std::function<void(std::uint64_t bytes_done, std::uint64_t bytes_total)> progress{};
};

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

std::string_view slot_state_name(SlotState state);

// What a stored checksum says about a non-empty segment whose content hashed to computed.
SlotState checksum_state(std::uint32_t stored, std::uint32_t computed);

// Per slot, 24 bytes: memory grows with the number of segments only.
struct SlotInfo {
	std::uint64_t id = 0;
	std::uint32_t stored_checksum = 0;
	std::uint32_t computed_checksum = 0; // meaningful for valid/mismatch/legacy
	std::uint8_t length = 0;
	SlotState state = SlotState::empty;
	bool in_log = false; // applied by the replay walk
};

// A segment the replay walk applied, in replay order (oldest first).
struct LogSegment {
	std::uint64_t slot = 0;
	std::uint64_t id = 0;
	std::uint8_t length = 0;
	bool written_back = false; // id <= last_writeback_id
};

enum class StopReason {
	end_of_ring,       // every slot was walked
	empty_log,         // max_id is 0: nothing to replay
	checksum_mismatch, // a segment failed its checksum
	unreadable,        // a segment could not be read
	not_verified,      // headers-only scan: the walk assumed every checksum good
};

std::string_view stop_reason_name(StopReason reason);

// The newest cache copy of some sectors of one 4 KiB backing block.
// 16 bytes: the index stays within 32 bytes per metablock on huge logs.
struct SectorSource {
	std::uint64_t block_sector = 0; // metablock sector (the 4 KiB block's first sector)
	std::uint32_t log_index = 0;    // into LogScan::log
	std::uint8_t metablock = 0;     // index within the segment = data block index
	std::uint8_t sectors = 0;       // mask: sectors of the block this copy is newest for
	std::uint8_t dirty = 0;         // subset of sectors: dirty and not yet written back
	std::uint8_t dirty_bits = 0;    // the metablock's own dirty_bits
};
static_assert(sizeof(SectorSource) == 16);

struct LogScan {
	Geometry geometry;
	bool superblock_readable = true;
	SuperblockHeader superblock;
	std::uint64_t sb_record = 0;
	bool verified = false;

	std::vector<SlotInfo> slots; // indexed by slot
	std::uint64_t max_id = 0;
	std::vector<LogSegment> log; // what the replay applies, oldest first
	StopReason stop_reason = StopReason::empty_log;
	std::optional<std::uint64_t> stop_slot{}; // the slot the walk stopped at
	std::uint64_t discarded_segments = 0;     // good segments after the stop point

	std::uint64_t last_flushed_id = 0;
	std::uint64_t last_writeback_id = 0;

	// Sorted by (block_sector, log_index); a block has one entry per copy
	// that is newest for some of its sectors.
	std::vector<SectorSource> index;
	std::uint64_t dirty_blocks = 0;
	std::uint64_t dirty_sectors = 0;

	std::vector<Finding> findings;

	std::uint64_t oldest_id() const { return log.empty() ? 0 : log.front().id; }
	// Slot -> position in log, or not_in_log.
	static constexpr std::uint32_t not_in_log = ~std::uint32_t(0);
	std::vector<std::uint32_t> log_positions() const;
	std::uint64_t writeback_bytes() const { return dirty_sectors * sector_size; }
	bool replayable() const { return superblock_readable && superblock.magic_ok && geometry.nr_segments > 0; }

	// The copy that decides a backing sector, or nullptr: the backing device holds it.
	const SectorSource* find_sector(std::uint64_t backing_sector) const;
	// Byte offset on the cache device of the data block behind a source.
	std::uint64_t source_offset(const SectorSource& source) const
	{
		return geometry.data_block_offset(log[source.log_index].slot, source.metablock);
	}
};

// Never throws for damage; throws IoError only when the cache's size is unusable
// for reading at all. Unreadable ranges become findings.
LogScan scan_log(Device& cache, const ScanOptions& options = {});

// The kernel's newest-wins rule (docs/FORMAT.md replay step 3) over metablock
// entries whose log_index points into scan.log: fills scan.index,
// dirty_blocks and dirty_sectors. scan_log() uses it for the kernel's log;
// recovery uses it for a log it assembled itself (salvage).
void build_sector_index(LogScan& scan, std::vector<SectorSource> entries);

// Calls visit(segment, metablock index, metablock) for every metablock of the
// log in replay order, re-reading the segment headers one at a time.
void for_each_log_metablock(Device& cache, const LogScan& scan,
			    const std::function<void(const LogSegment&, unsigned, const Metablock&)>& visit);

} // namespace wbkit
