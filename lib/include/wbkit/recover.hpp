// Recovery from the bad cases: a dead target, unreadable sectors on the cache
// or the backing device, damaged segments. Reads tolerate errors (retry, then
// 4 KiB, then sector by sector) and every sector that could not be saved is
// reported as a range, so the user can map it to files.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wbkit/device.hpp"
#include "wbkit/log_scan.hpp"
#include "wbkit/progress.hpp"
#include "wbkit/replay.hpp"
#include "wbkit/segment_use.hpp"
#include "wbkit/tolerant_io.hpp"

namespace wbkit {

enum class LossReason {
	backing_unreadable,    // unreadable on the backing device, and the cache has no copy
	cache_copy_unreadable, // the newest copy is dirty in the cache and could not be read
	write_failed,          // the destination refused the write
	beyond_backing,        // a dirty copy for a sector past the backing device's end
};

std::string_view loss_reason_name(LossReason reason);

struct LostRange {
	std::uint64_t sector = 0; // backing sector
	std::uint64_t sectors = 0;
	LossReason reason = LossReason::backing_unreadable;
};

struct RecoverOptions {
	// Beyond the kernel's consistent prefix: valid segments after a gap, and
	// metablocks of unverifiable segments whose metablock and data read fine.
	bool salvage = false;
	// The other reading of a slot the kernel's walk takes for another
	// writer's torn rewrite (docs/FORMAT.md, replay step 2): damage, where
	// the log stops. ScanOptions::torn_rewrites; unset: as the kernel reads it.
	std::optional<bool> torn_rewrites{};
	unsigned retries = 2;
	// Go on without the writeboost magic, or with blocks past the backing end.
	bool force = false;
	ReplayOptions replay{};
	// phase: "scan", "reading backing" or "copying backing", "replay".
	ProgressSink progress{};
	// Everything a real run does but the writes: the diagnosis, the plan, the
	// reads of both devices and of the cache's data to be written, so what it
	// reports as recovered and lost is what a real run reports when the
	// destination takes every write. The writes go to a sink that keeps
	// nothing: no device is written. `output` is then only checked (opened
	// read-only, or null when it does not exist yet and `output_path` names it).
	bool dry_run = false;
	std::string output_path{};
};

struct DeviceDiagnosis {
	std::string path;
	std::uint64_t size_bytes = 0;
	std::uint64_t bytes_checked = 0;
	SectorRanges unreadable;
};

struct RecoveryReport {
	bool salvage = false;
	bool dry_run = false;             // nothing was written; the figures are what a real run writes
	bool single_point_in_time = true; // false when salvage took data past the kernel's stop point
	DeviceDiagnosis cache;
	DeviceDiagnosis backing;
	std::optional<std::string> output;
	std::vector<std::string> overridden; // safety checks --force skipped

	// The kernel's replay, as the diagnosis: the scan itself, and the figures
	// the text report uses.
	std::shared_ptr<const LogScan> kernel_log;
	std::uint64_t nr_segments = 0;
	std::uint64_t max_id = 0;
	std::uint64_t last_flushed_id = 0;
	std::uint64_t last_writeback_id = 0;
	StopReason stop_reason = StopReason::empty_log;
	std::optional<std::uint64_t> stop_slot{};
	std::vector<std::uint64_t> unreadable_header_slots;
	std::vector<std::uint64_t> checksum_failed_slots;
	std::vector<Finding> findings;

	std::vector<SegmentUse> segments; // what recovery did with each non-empty slot
	std::uint64_t extents = 0;
	std::uint64_t sectors_from_cache = 0;    // dirty sectors written from the cache
	std::uint64_t sectors_rescued_clean = 0; // unreadable backing sectors restored from clean cache copies
	std::uint64_t bytes_written = 0;         // a dry run: the bytes a real run writes
	std::vector<LostRange> lost;
	std::vector<std::string> notes; // data left behind and why, in words
	// Segments of the kernel's log an out-of-range superblock record marks as
	// written back (kernel policy): their data is left behind.
	std::uint64_t record_hidden_segments = 0;

	// A torn rewrite the kernel's walk skipped (docs/FORMAT.md, replay step
	// 2). Upstream's replay stops at that slot instead, so it does not
	// replay the segments of the kernel's log, all of which lie after it.
	struct TornRewrite {
		std::uint64_t slot = 0;
		std::uint64_t segment_id = 0;
		std::uint64_t upstream_dropped_segments = 0; // the kernel's log
		std::uint64_t upstream_lost_sectors = 0;     // dirty sectors whose newest data those segments hold
	};
	std::optional<TornRewrite> torn_rewrite{};

	std::uint64_t lost_sectors() const;
	bool data_left_behind() const;
	bool nothing_lost() const { return lost.empty() && !data_left_behind(); }
};

// Refuses (RefusedError) before anything is written when: two of the devices
// are one; the cache is too small to be a cache; it has no magic (unless
// force); the log names blocks past the backing device (unless force); the
// output is a block device smaller than the backing device.
// Diagnoses both devices, then writes the chosen log's data to `output`
// (after copying the backing device there) or, without output, to the
// backing device. Throws only for operational failures that stop everything
// (the cache cannot be scanned at all, a flush fails). With
// options.dry_run it writes nothing, to any device.
RecoveryReport recover(Device& cache, Device& backing, Device* output, const RecoverOptions& options);

} // namespace wbkit
