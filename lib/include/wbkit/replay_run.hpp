// The whole wbreplay procedure over two opened devices: a headers-only scan,
// the safety checks, the replay written while the checksums are verified
// (or after a verifying scan), a rescan when the log turns out to stop
// early, and the mark-clean policy. Tools map their options onto it and
// render its result.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "wbkit/device.hpp"
#include "wbkit/progress.hpp"
#include "wbkit/replay.hpp"

namespace wbkit {

struct ReplayRunOptions {
	// Plan only: the whole log is scanned and verified, nothing is written.
	bool dry_run = false;
	// After the backing device was flushed, set the superblock record (and
	// zero the headers from the stop point on): the cache must be writable.
	// Refused when something was not replayed, unless force.
	bool mark_clean = false;
	// Go on past the safety checks that allow it, and mark clean anyway.
	bool force = false;
	// A buffered handle on the backing device for extents that O_DIRECT
	// cannot take; null: they are read-modify-written.
	Device* unaligned_backing = nullptr;
	// Phases "scan", "replay", and "verify" when the log stops early.
	ProgressSink progress{};
};

// What a replay run did, for its report.
struct ReplayRunResult {
	std::string cache_path;
	std::string backing_path;
	bool dry_run = false;
	// The plan that was carried out (or, on a dry run, would be), with its scan.
	std::shared_ptr<const ReplayPlan> plan{};
	std::optional<ReplayResult> result{}; // unset on a dry run
	bool marked_clean = false;
	std::uint64_t headers_zeroed = 0;      // by mark-clean: slots from the stop point on
	std::string mark_clean_refused{};      // why mark-clean was not carried out
	std::vector<std::string> overridden{}; // safety checks force skipped
	std::vector<std::string> shortfalls{}; // what was not replayed (replay_shortfalls)
	double scan_seconds = 0;

	// Everything was replayed, and marked clean when asked.
	bool complete() const { return shortfalls.empty() && mark_clean_refused.empty(); }
};

// Throws RefusedError when a safety check refuses (before anything is
// written), IoError when a device cannot be read, written or flushed.
ReplayRunResult replay_run(Device& cache, Device& backing, const ReplayRunOptions& options);

} // namespace wbkit
