// wbdump: dump and validate a writeboost cache device. Read-only.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <functional>
#include <iostream>

#include "progress.hpp"
#include "tool_main.hpp"
#include "wbkit/errors.hpp"
#include "wbkit/report.hpp"

namespace {

constexpr const char* description = R"(Dump and validate a writeboost cache device (dm-writeboost 2.2 format).

Reads the superblock and every segment of CACHE, walks the log exactly as the
kernel target's replay does, and reports where replay stops, the segment ids,
the dirty data it would write back, and every inconsistency found.

By default every segment's checksum is verified, which reads the written part
of each segment (as the kernel does at construction): where replay stops, and
so which data counts, depends on the checksums. --no-verify reads only the
4 KiB header of each segment, for a quick look at a cache of many TiB; the
stop point is then unknown.

wbdump never writes: the cache is opened read-only.

Progress of the scan goes to stderr as a bar when stderr is a terminal; when
it is not (a log, cron mail) only --progress prints it, as plain lines; -q:
none. --progress-fd N writes `scan DONE TOTAL` lines (bytes) to file
descriptor N for programs.

Exit codes: 0 no damage found, 1 damage found (a finding of severity warning
or error), 2 usage error, 3 cannot open or read.)";

struct Options {
	std::string cache;
	std::string backing;
	bool json = false;
	bool metablocks = false;
	bool no_verify = false;
	wbkit::ProgressOptions progress{};
	std::optional<std::uint64_t> slot;
	std::optional<std::uint64_t> segment;
	std::optional<std::uint64_t> block;
};

int run(const Options& o)
{
	using namespace wbkit;
	if (o.cache.empty())
		throw UsageError("the cache is required: wbdump CACHE or wbdump --cache CACHE");
	ProgressReporter progress("wbdump", o.progress);
	auto cache = open_device(o.cache);
	ScanOptions scan_options{.verify_checksums = !o.no_verify};
	if (!o.backing.empty())
		scan_options.backing_bytes = open_device(o.backing)->size_bytes();
	scan_options.progress = progress.sink();
	const LogScan scan = scan_log(*cache, scan_options);

	DumpReport report{.scan = scan, .cache_path = o.cache};
	if (o.slot)
		report.segment = inspect_slot(*cache, scan.geometry, scan.geometry.checked_slot(*o.slot));
	else if (o.segment)
		report.segment = inspect_segment(*cache, scan, *o.segment);
	if (o.metablocks)
		report.metablocks = [&](const std::function<void(const LogMetablockRow&)>& visit) {
			for_each_log_metablock(*cache, scan, [&](const LogSegment& seg, unsigned i, const Metablock& mb) {
				visit(LogMetablockRow{.segment_id = seg.id, .slot = seg.slot, .index = i, .metablock = mb});
			});
		};
	if (o.block)
		report.block = inspect_sector(*cache, scan, *o.block);

	// The scan's last progress line ends before the first line of output, and
	// after the checks of --slot/--segment, so an error is the first thing on stderr.
	progress.finish();
	if (o.json)
		write_dump_json(std::cout, report);
	else
		print_dump(std::cout, report);
	std::cout.flush();
	if (!std::cout)
		throw IoError("cannot write the output", "stdout", errno);
	return int(has_damage(scan.findings) ? ExitCode::damage : ExitCode::ok);
}

} // namespace

int main(int argc, char** argv)
{
	CLI::App app(description, "wbdump");
	Options o;
	auto* positional = app.add_option("CACHE", o.cache, "cache device or image file");
	app.add_option("--cache", o.cache, "the cache, as in the other tools (instead of CACHE)")->excludes(positional);
	app.add_option("--backing", o.backing, "backing device: report blocks that lie past its end");
	app.add_flag("--json", o.json, "print one JSON document (keys documented in docs/tools.md)");
	app.add_flag("--metablocks", o.metablocks, "list every metablock of the log");
	auto* slot = app.add_option("--slot", o.slot, "show slot K in full (0-based)")->check(wbkit::unsigned_64());
	auto* segment =
		app.add_option("--segment", o.segment, "show the segment with this id in full")->check(wbkit::unsigned_64());
	slot->excludes(segment);
	app.add_option("--block", o.block, "where the newest copy of this backing SECTOR lives, with a hexdump")
		->check(wbkit::unsigned_64());
	app.add_flag("--no-verify", o.no_verify, "read segment headers only; do not verify checksums");
	wbkit::add_progress_options(app, o.progress);
	return wbkit::run_tool("wbdump", app, argc, argv, [&] { return run(o); });
}
