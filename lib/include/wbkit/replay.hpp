// The replay engine: turns the kernel-equivalent state of a LogScan into
// writes to the backing device (docs/FORMAT.md, "Replay"), and executes them.
//
// A plan is computed lazily from LogScan::index: extents come out sorted by
// destination, adjacent dirty sectors merged up to a bounded size, so a plan
// over a log of many TiB needs no memory beyond the scan's index.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "wbkit/device.hpp"
#include "wbkit/log_scan.hpp"
#include "wbkit/progress.hpp"
#include "wbkit/segment_use.hpp"

namespace wbkit {

struct ReplayOptions {
	// Largest single write to the backing device, and so the size of the
	// buffer the executor holds. One block (4096) turns merging off.
	std::uint64_t max_extent_bytes = 4ULL << 20;
	// Size of the backing device in sectors: dirty sectors at or past it are
	// left out of the plan and counted as skipped. Unset: no limit.
	std::optional<std::uint64_t> backing_sectors{};
};

// Sectors that are contiguous both on the cache and within the extent.
struct ExtentSource {
	std::uint64_t cache_offset = 0;  // bytes, on the cache device
	std::uint64_t extent_sector = 0; // first sector, relative to the extent's start
	std::uint64_t sectors = 0;
	std::uint64_t segment_id = 0;
	std::uint64_t slot = 0;
};

// One write to the backing device.
struct ReplayExtent {
	std::uint64_t backing_sector = 0;
	std::uint64_t sectors = 0;
	std::vector<ExtentSource> sources; // in destination order, covering the extent exactly

	std::uint64_t backing_offset() const { return backing_sector * sector_size; }
	std::uint64_t bytes() const { return sectors * sector_size; }
};

struct ReplaySummary {
	std::uint64_t segments_in_log = 0;
	std::uint64_t segments_written_back = 0; // in the log, already on the backing device
	std::uint64_t segments_contributing = 0; // provide at least one sector to the plan
	std::uint64_t dirty_blocks = 0;          // 4 KiB backing blocks with a sector to write
	std::uint64_t dirty_sectors = 0;
	std::uint64_t bytes = 0;
	std::uint64_t extents = 0;
	std::uint64_t skipped_sectors = 0; // dirty sectors past the backing device's end
	std::optional<std::uint64_t> first_skipped_sector{};
};

class ReplayPlan {
public:
	// Yields the plan's extents in destination order, one at a time.
	class Cursor {
	public:
		std::optional<ReplayExtent> next();

	private:
		friend class ReplayPlan;
		explicit Cursor(const ReplayPlan& plan) : plan_(&plan) {}
		bool load_block();

		const ReplayPlan* plan_;
		// The constructor's pass fills the plan's counters through this.
		ReplayPlan* accounting_ = nullptr;
		std::size_t position_ = 0; // into LogScan::index
		bool have_block_ = false;
		unsigned next_sector_ = 0;
		std::uint64_t block_sector_ = 0;
		std::uint8_t mask_ = 0;
		std::array<SectorSource, block_sectors> owner_{}; // the index entry that decides each sector
	};

	ReplayPlan(std::shared_ptr<const LogScan> scan, const ReplayOptions& options);

	const LogScan& scan() const { return *scan_; }
	const ReplayOptions& options() const { return options_; }
	const ReplaySummary& summary() const { return summary_; }
	// Dirty sectors each segment of LogScan::log provides, by log position.
	const std::vector<std::uint64_t>& sectors_per_segment() const { return sectors_per_segment_; }

	Cursor extents() const { return Cursor(*this); }
	void for_each_extent(const std::function<void(const ReplayExtent&)>& visit) const;

private:
	std::shared_ptr<const LogScan> scan_;
	ReplayOptions options_;
	std::uint64_t max_extent_sectors_;
	ReplaySummary summary_;
	std::vector<std::uint64_t> sectors_per_segment_;
};

ReplayPlan replay_plan(std::shared_ptr<const LogScan> scan, const ReplayOptions& options = {});
// Does not own the scan: it must outlive the plan.
ReplayPlan replay_plan(const LogScan& scan, const ReplayOptions& options = {});

enum class ReplayFailure {
	cache_unreadable, // the cache copy of these sectors could not be read
	write_failed,     // the destination refused the write
};

struct ExecuteOptions {
	// Phase "replay": after each extent, the bytes written and the plan's total.
	ProgressSink progress{};
	// A buffered handle on the destination for extents that O_DIRECT cannot
	// take (not 4 KiB aligned). Without it such extents are read-modify-written.
	Device* unaligned_destination = nullptr;
	// Unset: the first read or write error throws IoError. Set: failing
	// ranges are narrowed down (retry, 4 KiB, sector), reported here, left
	// out, and the replay goes on. Called from the executor's reader thread
	// too, one call at a time.
	std::function<void(std::uint64_t backing_sector, std::uint64_t sectors, ReplayFailure kind)> on_failure{};
	unsigned retries = 2;
	// Called before each extent is written, in destination order, while
	// the next extent is read: false stops the replay before this extent
	// (ReplayResult::stopped); the destination is still flushed.
	std::function<bool(const ReplayExtent&)> may_write{};
};

struct ReplayResult {
	std::uint64_t bytes_written = 0;
	std::uint64_t extents_written = 0;
	std::uint64_t write_requests = 0;
	std::uint64_t read_requests = 0;
	std::uint64_t failed_sectors = 0;
	double seconds = 0;   // writing and the final flush
	bool stopped = false; // ExecuteOptions::may_write said no: extents were left out
};

// ExecuteOptions::may_write for a replay whose plan comes from a headers-only
// scan that verifier checks meanwhile: an extent waits until every segment
// it takes data from verified valid, with every segment before it in the log.
std::function<bool(const ReplayExtent&)> write_when_verified(LogVerifier& verifier);

// Writes every extent, then flushes the destination: nothing counts as
// replayed until the flush returned.
ReplayResult execute_replay(const ReplayPlan& plan, Device& cache, Device& destination,
			    const ExecuteOptions& options = {});

// The superblock record that tells the target everything up to
// last_flushed_id is on the backing device. Call only after the backing
// device was flushed; flushes the cache itself. When the replay stopped
// before the end of the log, the header of every slot from the stop point
// on is zeroed first, as the target does at construction (see
// docs/recovery.md). Returns the number of headers zeroed.
std::uint64_t mark_cache_clean(Device& cache, const LogScan& scan);

// Every non-empty slot in ring order from the oldest, and what the kernel's
// replay (this plan) does with it.
std::vector<SegmentUse> segment_uses(const ReplayPlan& plan);

// Things a kernel-policy replay leaves behind: empty when everything the cache
// holds reached the plan. A torn newest segment is not listed: its writes were
// never acknowledged as flushed.
std::vector<std::string> replay_shortfalls(const ReplayPlan& plan);

} // namespace wbkit
