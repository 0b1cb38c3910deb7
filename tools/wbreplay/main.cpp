// wbreplay: write the dirty data of a writeboost cache back to its backing
// device, offline, exactly as the kernel target's replay would present it.
#include <CLI/CLI.hpp>
#include <chrono>
#include <fmt/format.h>
#include <iostream>
#include <memory>
#include <optional>

#include "progress.hpp"
#include "tool_main.hpp"
#include "wbkit/errors.hpp"
#include "wbkit/identity.hpp"
#include "wbkit/replay.hpp"
#include "wbkit/report.hpp"

namespace {

constexpr const char* description = R"(Replay a writeboost cache onto its backing device (dm-writeboost 2.2 format).

Walks the cache's log as the kernel target does on construction and writes
every sector whose newest copy is dirty in the cache to the backing device,
sorted by destination and merged into large writes, with O_DIRECT where the
device allows it. The backing device is flushed before success is reported.
Afterwards the backing device alone holds the data the target presented.
The writes start while the checksums are still verified: a write waits
until the segments it takes data from, and every older one, verified good.

Safety checks, before anything is written (a refusal exits with 4):
  - the backing device is not the cache: not the same file or device, not
    a loop device over the other's file, not stacked on it
  - block devices are opened exclusively (O_EXCL): refused while a target,
    a mount or anything else holds them
  - the cache has the writeboost magic            (--force overrides)
  - every block the log names lies inside the backing device
                                                   (--force overrides; those
                                                    sectors are not replayed)

The cache is never written, unless --mark-clean is given: then, and only
after the backing device was flushed, the superblock record is set to the
last replayed segment, so a target constructed on this cache again does not
replay the same data a second time. If the replay stopped before the end of
the log, the headers from the stop point on are zeroed first, as the target
does when it replays. --mark-clean is refused when something could not be
replayed (--force overrides; salvage first with wbrecover --salvage).

A replay can be run again, or after being killed halfway: it writes the same
bytes and ends in the same state.

Exit codes: 0 replayed everything, 1 finished but something was not replayed
(listed), 2 usage error, 3 cannot open, read, write or flush a device,
4 refused by a safety check.)";

struct Options {
	std::string cache;
	std::string backing;
	bool dry_run = false;
	bool json = false;
	bool quiet = false;
	bool mark_clean = false;
	bool force = false;
	int progress_fd = -1;
};

int run(const Options& o)
{
	using namespace wbkit;
	const bool write_cache = o.mark_clean && !o.dry_run;
	// Before anything is opened for writing: aliases (a loop device over the
	// cache's file, two loops over one file, stacked devices) included.
	const RolePath paths[] = {{"the cache", o.cache}, {"the backing device", o.backing}};
	check_distinct_paths(paths);
	// Buffered reads of the cache get readahead; O_DIRECT matters for the writes, not here.
	auto cache = open_device(o.cache, {.writable = write_cache, .exclusive = true});
	auto backing = open_device(o.backing, {.writable = !o.dry_run, .direct = true, .exclusive = true});
	check_distinct(*cache, "the cache", *backing, "the backing device");

	ProgressReporter progress("wbreplay", o.quiet);
	progress.set_machine_fd(o.progress_fd);
	ReplayRun report{.cache_path = o.cache, .backing_path = o.backing, .dry_run = o.dry_run};
	const std::uint64_t backing_sectors = backing->size_bytes() / sector_size;
	auto scan_with = [&](bool verify, std::string_view phase) {
		const auto start = std::chrono::steady_clock::now();
		LogScan scan = scan_log(*cache, {.verify_checksums = verify,
						 .backing_bytes = backing->size_bytes(),
						 .progress = [&](std::uint64_t done, std::uint64_t total) {
							 progress.update(phase, done, total);
						 }});
		report.scan_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
		return scan;
	};
	// A replay reads the headers, then writes while the checksums are
	// verified (LogVerifier): an extent waits for the segments it takes data
	// from. A dry run, a walk the headers already stop, or a check that
	// refuses or needs --force read the whole log first, as the kernel does.
	LogScan scan = scan_with(o.dry_run, "scan");
	std::unique_ptr<LogVerifier> verifier;
	if (!o.dry_run && LogVerifier::applicable(scan)) {
		try {
			if (check_replay_safety(*cache, *backing, scan, false).empty())
				verifier = std::make_unique<LogVerifier>(*cache, scan);
		} catch (const RefusedError&) {
		}
	}
	// The same phase: its last progress line still comes after the checks.
	if (!o.dry_run && !verifier)
		scan = scan_with(true, "scan");
	// A refusal is the first thing on stderr: the scan's last progress line comes after the checks.
	report.overridden = check_replay_safety(*cache, *backing, scan, o.force);
	progress.finish();
	for (const std::string& what : report.overridden)
		std::cerr << "wbreplay: --force: overriding: " << what << '\n';

	std::optional<ReplayPlan> plan;
	plan.emplace(replay_plan(scan, {.backing_sectors = backing_sectors}));

	if (!o.dry_run) {
		// O_DIRECT takes only aligned blocks; partial-block extents go through the page cache.
		std::unique_ptr<Device> buffered;
		if (backing->required_alignment() > 1)
			buffered = open_device(o.backing, {.writable = true});
		ExecuteOptions exec{.progress = [&](const ReplayProgress& p) { progress.update("replay", p.bytes_done, p.bytes_total); },
				    .unaligned_destination = buffered.get()};
		if (verifier)
			exec.may_write = write_when_verified(*verifier);
		report.result = execute_replay(*plan, *cache, *backing, exec);
		progress.finish();
		if (verifier && (!verifier->finish(scan) || report.result->stopped)) {
			// The log stops before its headers' end: replay what the
			// verifying scan says. What was written so far is part of
			// that replay too; it is written again, with the same bytes.
			plan.reset();
			verifier.reset();
			scan = scan_with(true, "verify");
			progress.finish();
			report.overridden = check_replay_safety(*cache, *backing, scan, o.force);
			plan.emplace(replay_plan(scan, {.backing_sectors = backing_sectors}));
			exec.may_write = nullptr;
			report.result = execute_replay(*plan, *cache, *backing, exec);
			progress.finish();
		}
	}
	report.shortfalls = replay_shortfalls(*plan);
	if (!o.dry_run && o.mark_clean) {
		if (!report.shortfalls.empty() && !o.force) {
			report.mark_clean_refused = "something was not replayed (see above); --force marks it clean anyway";
		} else {
			report.headers_zeroed = mark_cache_clean(*cache, scan);
			report.marked_clean = true;
		}
	}

	if (o.json)
		write_replay_report_json(std::cout, *plan, report);
	else
		print_replay_report(std::cout, *plan, report);
	return int(report.shortfalls.empty() && report.mark_clean_refused.empty() ? ExitCode::ok : ExitCode::damage);
}

} // namespace

int main(int argc, char** argv)
{
	CLI::App app(description, "wbreplay");
	Options o;
	app.add_option("--cache", o.cache, "cache device or image file (read-only unless --mark-clean)")->required();
	app.add_option("--backing", o.backing, "backing device or image file to write the dirty data to")->required();
	app.add_flag("--dry-run", o.dry_run, "print the plan (segments, dirty blocks and sectors, bytes, extents); write nothing");
	app.add_flag("--json", o.json, "print the report as one JSON document");
	app.add_flag("-q,--quiet", o.quiet, "no progress output");
	app.add_flag("--mark-clean", o.mark_clean,
		     "after the backing device is flushed, set the superblock record so the target does not replay again");
	app.add_flag("--force", o.force, "override the checks that allow it (missing magic, blocks past the backing end)");
	app.add_option("--progress-fd", o.progress_fd, "write `phase done total` progress lines to file descriptor N")
		->check(CLI::NonNegativeNumber);
	return wbkit::run_tool("wbreplay", app, argc, argv, [&] { return run(o); });
}
