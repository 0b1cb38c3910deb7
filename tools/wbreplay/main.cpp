// wbreplay: write the dirty data of a writeboost cache back to its backing
// device, offline, exactly as the kernel target's replay would present it.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <iostream>
#include <memory>

#include "progress.hpp"
#include "tool_main.hpp"
#include "wbkit/errors.hpp"
#include "wbkit/identity.hpp"
#include "wbkit/replay_run.hpp"
#include "wbkit/safety.hpp"
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
	wbkit::ProgressOptions progress{};
	bool mark_clean = false;
	bool force = false;
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
	// O_DIRECT takes only aligned blocks; partial-block extents go through the page cache.
	std::unique_ptr<Device> buffered;
	if (!o.dry_run && backing->required_alignment() > 1)
		buffered = open_device(o.backing, {.writable = true});

	ProgressReporter progress("wbreplay", o.progress);
	const ReplayRunResult report = replay_run(*cache, *backing,
						  {.dry_run = o.dry_run,
						   .mark_clean = o.mark_clean,
						   .force = o.force,
						   .unaligned_backing = buffered.get(),
						   .progress = progress.sink()});
	progress.finish();
	for (const std::string& what : report.overridden)
		std::cerr << "wbreplay: --force: overriding: " << what << '\n';

	if (o.json)
		write_replay_report_json(std::cout, report);
	else
		print_replay_report(std::cout, report);
	return int(report.complete() ? ExitCode::ok : ExitCode::damage);
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
	app.add_flag("--mark-clean", o.mark_clean,
		     "after the backing device is flushed, set the superblock record so the target does not replay again");
	app.add_flag("--force", o.force, "override the checks that allow it (missing magic, blocks past the backing end)");
	wbkit::add_progress_options(app, o.progress);
	return wbkit::run_tool("wbreplay", app, argc, argv, [&] { return run(o); });
}
