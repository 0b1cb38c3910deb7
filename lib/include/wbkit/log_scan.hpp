// The log scan: docs/FORMAT.md's replay walk, exactly as the kernel target does it
// on construction, plus the validator's extra checks, and the resulting
// kernel-equivalent state of every backing sector.
#pragma once

#include <cstdint>
#include <cstddef>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "wbkit/device.hpp"
#include "wbkit/findings.hpp"
#include "wbkit/format.hpp"
#include "wbkit/progress.hpp"
#include "wbkit/slot_state.hpp"

namespace wbkit {

struct ScanOptions {
	// Read the written part of every segment and check its CRC. Without it
	// only headers are read and every non-empty segment is assumed valid, so
	// where the kernel's replay stops is not known.
	bool verify_checksums = true;
	// Size of the backing device, to report metablocks that point past it.
	std::optional<std::uint64_t> backing_bytes{};
	// Whether the torn-rewrite rule applies (docs/FORMAT.md, replay step
	// 2). Unset: as the kernel decides, only on a cache without the trust
	// record. false reads such a slot as damage (wbrecover --no-torn-rewrite).
	std::optional<bool> torn_rewrites{};
	// Phase "scan": after each segment slot, the cache bytes covered so far
	// and in total (slots x 512 KiB), from one thread at a time.
	ProgressSink progress{};
};

// Per slot, 24 bytes: memory grows with the number of segments only.
struct SlotInfo {
	std::uint64_t id = 0;
	std::uint32_t stored_checksum = 0;
	std::uint32_t computed_checksum = 0; // meaningful for valid/mismatch/legacy
	std::uint8_t length = 0;
	SlotState state = SlotState::empty;
	bool in_log = false; // applied by the replay walk
	// Valid only with the metablocks past length read as zero, an append in
	// place cut between its two writes (checksum_verdict): how many. 0 otherwise.
	std::uint8_t ignored_metablocks = 0;
};

// A segment the replay walk applied, in replay order (oldest first).
struct LogSegment {
	std::uint64_t slot = 0;
	std::uint64_t id = 0;
	std::uint8_t length = 0;
	bool written_back = false; // id <= last_writeback_id
};

// The newest cache copy of some sectors of one 4 KiB backing block. A value:
// LogScan::index stores it packed (see SectorIndex).
struct SectorSource {
	std::uint64_t block_sector = 0; // metablock sector (the 4 KiB block's first sector)
	std::uint32_t log_index = 0;    // into LogScan::log
	std::uint8_t metablock = 0;     // index within the segment = data block index
	std::uint8_t sectors = 0;       // mask: sectors of the block this copy is newest for
	std::uint8_t dirty = 0;         // subset of sectors: dirty and not yet written back
	std::uint8_t dirty_bits = 0;    // the metablock's own dirty_bits
};

// SectorSource entries sorted by (block_sector, log_index), 12 bytes each: a
// huge log has one entry per metablock, and this index is most of a scan's
// memory. The high 32 bits of block_sector are kept once per run of entries
// that share them; `dirty` is one bit, as it is either all of `sectors` or
// none. The entries live in their own mapping, trimmed to size when built.
class SectorIndex {
public:
	SectorIndex() = default;
	SectorIndex(const SectorIndex& other);
	SectorIndex& operator=(const SectorIndex& other);
	SectorIndex(SectorIndex&& other) noexcept;
	SectorIndex& operator=(SectorIndex&& other) noexcept;
	~SectorIndex();

	std::size_t size() const noexcept { return size_; }
	bool empty() const noexcept { return size_ == 0; }
	SectorSource operator[](std::size_t i) const;
	std::uint64_t block_sector(std::size_t i) const;
	// The first position whose block_sector is at least the given one.
	std::size_t lower_bound(std::uint64_t block_sector) const;
	// Bytes held, mapping and run table.
	std::size_t memory_bytes() const noexcept;

	class const_iterator {
	public:
		using iterator_category = std::forward_iterator_tag;
		using value_type = SectorSource;
		using difference_type = std::ptrdiff_t;
		using pointer = void;
		using reference = SectorSource;
		const_iterator() = default;
		SectorSource operator*() const { return (*index_)[position_]; }
		const_iterator& operator++()
		{
			++position_;
			return *this;
		}
		const_iterator operator++(int)
		{
			const_iterator old = *this;
			++position_;
			return old;
		}
		bool operator==(const const_iterator& other) const { return position_ == other.position_; }

	private:
		friend class SectorIndex;
		const_iterator(const SectorIndex* index, std::size_t position) : index_(index), position_(position) {}
		const SectorIndex* index_ = nullptr;
		std::size_t position_ = 0;
	};
	const_iterator begin() const { return {this, 0}; }
	const_iterator end() const { return {this, size_}; }

private:
	friend class SectorIndexBuilder;
	struct HighRun {
		std::uint32_t high = 0; // block_sector >> 32 of entries [first, next run's first)
		std::size_t first = 0;
	};
	void release() noexcept;

	std::byte* data_ = nullptr;
	std::size_t mapped_bytes_ = 0;
	std::size_t size_ = 0;
	std::vector<HighRun> highs_;
};

struct LogScan {
	Geometry geometry;
	bool superblock_readable = true;
	SuperblockHeader superblock;
	std::uint64_t sb_record = 0;
	// The clean-copy trust record: copies of segments with an id below it
	// may be stale (wb_clean_copy_trusted); WB_TRUST_NONE: no copy is trusted.
	// Without the record (upstream formatted the cache, or a dm-wbkit older
	// than the record), the kernel trusts no copy and the tools know nothing.
	bool trust_record = false;
	std::uint64_t trusted_from_id = WB_TRUST_NONE;
	// The ring size the trust record names (0: none recorded).
	std::uint64_t trust_nr_segments = 0;
	bool verified = false;

	std::vector<SlotInfo> slots; // indexed by slot
	std::uint64_t max_id = 0;
	std::vector<LogSegment> log; // what the replay applies, oldest first
	StopReason stop_reason = StopReason::empty_log;
	std::optional<std::uint64_t> stop_slot{}; // the slot the walk stopped at
	std::uint64_t discarded_segments = 0;     // good segments after the stop point
	// The torn rewrite the walk skipped (wb_torn_rewrite; the later one of
	// two), and its id: the log starts after it, every id up to it counts as
	// written back. rewritten_id is 0 when the walk skipped none.
	std::optional<std::uint64_t> rewrite_slot{};
	std::uint64_t rewritten_id = 0;
	// The slots the walk skipped as segments lost in flight
	// (wb_lost_in_flight), in walk order.
	std::vector<std::uint64_t> lost_slots{};

	std::uint64_t last_flushed_id = 0;
	std::uint64_t last_writeback_id = 0;
	// The shared replay decision (wb_replay_decide) the walk arrived at:
	// whether the kernel refuses the log, and what it writes before going
	// live. last_flushed_id and last_writeback_id above are its values.
	bool torn_rewrites = false; // the rule the walk applied
	wb_replay_plan decision{};
	bool refused() const { return decision.refusal != WB_REPLAY_OK; }

	// Sorted by (block_sector, log_index); a block has one entry per copy
	// that is newest for some of its sectors.
	SectorIndex index;
	std::uint64_t dirty_blocks = 0;
	std::uint64_t dirty_sectors = 0;

	std::vector<Finding> findings;

	std::uint64_t oldest_id() const { return log.empty() ? 0 : log.front().id; }
	// Slot -> position in log, or not_in_log.
	static constexpr std::uint32_t not_in_log = ~std::uint32_t(0);
	std::vector<std::uint32_t> log_positions() const;
	std::uint64_t writeback_bytes() const { return dirty_sectors * sector_size; }
	bool replayable() const { return superblock_readable && superblock.magic_ok && geometry.nr_segments > 0; }

	// The copy that decides a backing sector; none: the backing device holds it.
	std::optional<SectorSource> find_sector(std::uint64_t backing_sector) const;
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

// The checksum check of a headers-only scan (verify_checksums off), run by
// threads in the background, segment by segment in ring order from the
// oldest. A replay may start writing before it ends: data of a segment whose
// whole ring prefix, and the first WB_REWRITE_WINDOW steps, verified valid
// is certain to be replayed, as the verifying scan's log is then a prefix of
// the headers-only log (no torn rewrite can start it later), and a sector's
// newest copy in a log is its newest copy in any shorter log that holds it.
class LogVerifier {
public:
	// Whether the verification of this headers-only scan can be finished
	// here: every non-empty slot is in its log. Otherwise (an unreadable
	// header, a bad length: the walk stopped) only a verifying scan tells.
	static bool applicable(const LogScan& headers);

	// headers must stay alive and unchanged until finish() or destruction.
	LogVerifier(Device& cache, const LogScan& headers);
	LogVerifier(const LogVerifier&) = delete;
	LogVerifier& operator=(const LogVerifier&) = delete;
	~LogVerifier(); // stops the threads

	// Blocks until the slot is verified: true when it, every slot before it
	// in ring order and every slot of the first WB_REWRITE_WINDOW steps
	// verified valid, false when one of them did not.
	bool wait_until_verified(std::uint64_t slot);

	// Waits for the threads. True when every segment verified valid: then
	// scan (the headers-only scan given to the constructor) is made exactly
	// what scan_log with verify_checksums returns. False: scan is left as
	// it is, and only a verifying scan tells where the log stops.
	bool finish(LogScan& scan);

private:
	struct State;
	std::unique_ptr<State> state_;
};

// Calls visit(segment, metablock index, metablock) for every metablock of the
// log in replay order, re-reading the segment headers one at a time.
void for_each_log_metablock(Device& cache, const LogScan& scan,
			    const std::function<void(const LogSegment&, unsigned, const Metablock&)>& visit);

} // namespace wbkit
