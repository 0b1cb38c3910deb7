#include "wbkit/replay_run.hpp"

#include <chrono>

#include "wbkit/errors.hpp"
#include "wbkit/log_scan.hpp"
#include "wbkit/safety.hpp"

namespace wbkit {

namespace {

class ReplayRunner {
public:
	ReplayRunner(Device& cache, Device& backing, const ReplayRunOptions& options)
		: cache_(cache), backing_(backing), options_(options)
	{
		run_.cache_path = cache.path();
		run_.backing_path = backing.path();
		run_.dry_run = options.dry_run;
	}

	ReplayRunResult run()
	{
		// A replay reads the headers, then writes while the checksums are
		// verified (LogVerifier): an extent waits for the segments it takes
		// data from. A dry run, a walk the headers already stop, or a check
		// that refuses or needs force read the whole log first, as the
		// kernel does.
		scan(options_.dry_run, "scan");
		std::unique_ptr<LogVerifier> verifier;
		if (!options_.dry_run && LogVerifier::applicable(*scan_)) {
			try {
				if (check_replay_safety(cache_, backing_, *scan_, false).empty())
					verifier = std::make_unique<LogVerifier>(cache_, *scan_);
			} catch (const RefusedError&) {
			}
		}
		// The same phase: its last progress line still comes after the checks.
		if (!options_.dry_run && !verifier)
			scan(true, "scan");
		run_.overridden = check_replay_safety(cache_, backing_, *scan_, options_.force);
		plan();

		if (!options_.dry_run) {
			ExecuteOptions exec{.progress = options_.progress, .unaligned_destination = options_.unaligned_backing};
			if (verifier)
				exec.may_write = write_when_verified(*verifier);
			run_.result = execute_replay(*run_.plan, cache_, backing_, exec);
			if (verifier && (!verifier->finish(*scan_) || run_.result->stopped)) {
				// The log stops before its headers' end: replay what the
				// verifying scan says. What was written so far is part of
				// that replay too; it is written again, with the same bytes.
				run_.plan.reset();
				verifier.reset();
				scan(true, "verify");
				run_.overridden = check_replay_safety(cache_, backing_, *scan_, options_.force);
				plan();
				exec.may_write = nullptr;
				run_.result = execute_replay(*run_.plan, cache_, backing_, exec);
			}
		}
		run_.shortfalls = replay_shortfalls(*run_.plan);
		if (!options_.dry_run && options_.mark_clean) {
			if (!run_.shortfalls.empty() && !options_.force) {
				run_.mark_clean_refused = "something was not replayed (see above); --force marks it clean anyway";
			} else {
				run_.headers_zeroed = mark_cache_clean(cache_, *scan_);
				run_.marked_clean = true;
			}
		}
		return std::move(run_);
	}

private:
	// Replaces the scan; the one before is freed first, so two scans of a
	// huge log never share the memory.
	void scan(bool verify, std::string_view phase)
	{
		scan_.reset();
		ScanOptions scan_options{
			.verify_checksums = verify, .backing_bytes = backing_.size_bytes(), .progress = options_.progress};
		// The scan reports phase "scan"; a rescan has a phase of its own.
		if (options_.progress && phase != "scan")
			scan_options.progress = [this, phase](std::string_view, std::uint64_t done, std::uint64_t total) {
				options_.progress(phase, done, total);
			};
		const auto start = std::chrono::steady_clock::now();
		scan_ = std::make_shared<LogScan>(scan_log(cache_, scan_options));
		run_.scan_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
	}

	void plan()
	{
		run_.plan = std::make_shared<const ReplayPlan>(
			replay_plan(scan_, {.backing_sectors = backing_.size_bytes() / sector_size}));
	}

	Device& cache_;
	Device& backing_;
	const ReplayRunOptions& options_;
	std::shared_ptr<LogScan> scan_;
	ReplayRunResult run_;
};

} // namespace

ReplayRunResult replay_run(Device& cache, Device& backing, const ReplayRunOptions& options)
{
	return ReplayRunner(cache, backing, options).run();
}

} // namespace wbkit
