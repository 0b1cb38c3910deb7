// wbdump: dump and validate a writeboost cache device. Read-only.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <iostream>

#include "wbkit/errors.hpp"
#include "wbkit/progress.hpp"
#include "wbkit/tool_main.hpp"
#include "wbkit/inspect.hpp"

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

Progress of the scan goes to stderr (a bar on a terminal, plain lines
otherwise; -q: none); --progress-fd N writes `scan DONE TOTAL` lines (bytes)
to file descriptor N for programs.

Exit codes: 0 no damage found, 1 damage found (a finding of severity warning
or error), 2 usage error, 3 cannot open or read.)";

struct Options {
	std::string cache;
	std::string backing;
	bool json = false;
	bool metablocks = false;
	bool no_verify = false;
	bool quiet = false;
	int progress_fd = -1;
	std::optional<std::uint64_t> slot;
	std::optional<std::uint64_t> segment;
	std::optional<std::uint64_t> block;
};

int run(const Options& o)
{
	using namespace wbkit;
	if (o.cache.empty())
		throw UsageError("the cache is required: wbdump CACHE or wbdump --cache CACHE");
	ProgressReporter progress("wbdump", o.quiet);
	progress.set_machine_fd(o.progress_fd);
	auto cache = open_device(o.cache);
	ScanOptions scan_options{.verify_checksums = !o.no_verify};
	if (!o.backing.empty())
		scan_options.backing_bytes = open_device(o.backing)->size_bytes();
	scan_options.progress = [&](std::uint64_t done, std::uint64_t total) { progress.update("scan", done, total); };
	LogScan scan = scan_log(*cache, scan_options);

	nlohmann::json doc;
	if (o.json)
		doc = scan_json(scan, o.cache);
	else
		print_summary(std::cout, scan, o.cache);

	if (o.slot || o.segment) {
		if (scan.geometry.nr_segments == 0)
			throw UsageError("the cache has no segment slots");
		std::uint64_t slot;
		if (o.slot) {
			if (*o.slot >= scan.geometry.nr_segments)
				throw UsageError(fmt::format("--slot {} is past the last slot ({})", *o.slot,
							     scan.geometry.nr_segments - 1));
			slot = *o.slot;
		} else {
			if (*o.segment == 0)
				throw UsageError("segment ids start at 1");
			slot = scan.geometry.slot_of_id(*o.segment);
			if (scan.slots[slot].id != *o.segment)
				throw UsageError(fmt::format("segment {} is not on the cache (slot {} holds segment {})",
							     *o.segment, slot, scan.slots[slot].id));
		}
		SlotDetail detail = inspect_slot(*cache, scan.geometry, slot);
		if (o.json) {
			doc["segment"] = slot_json(detail);
			doc["segment"]["in_log"] = scan.slots[slot].in_log;
		} else {
			std::cout << '\n';
			print_slot(std::cout, detail);
		}
	}

	if (o.metablocks) {
		nlohmann::json list = nlohmann::json::array();
		if (!o.json)
			std::cout << "\nmetablocks of the log, in replay order (segment, index, backing sector, dirty bits)\n";
		for_each_log_metablock(*cache, scan, [&](const LogSegment& seg, unsigned i, const Metablock& mb) {
			if (o.json)
				list.push_back({{"segment_id", seg.id},
						{"slot", seg.slot},
						{"index", i},
						{"sector", mb.sector},
						{"dirty_bits", mb.dirty_bits}});
			else
				fmt::print("  {:>10} [{:3}] sector {:>12}  dirty_bits 0x{:02x}\n", seg.id, i, mb.sector,
					   mb.dirty_bits);
		});
		if (o.json)
			doc["metablocks"] = std::move(list);
	}

	if (o.block) {
		SectorDetail detail = inspect_sector(*cache, scan, *o.block);
		if (o.json) {
			doc["block"] = sector_json(detail);
		} else {
			std::cout << '\n';
			print_sector(std::cout, detail);
		}
	}

	if (o.json)
		std::cout << doc.dump(2) << '\n';
	// Last, so that an error (a bad --slot, say) is the first thing on stderr.
	progress.finish();
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
	app.add_flag("--json", o.json, "print one JSON document (keys documented in the README)");
	app.add_flag("--metablocks", o.metablocks, "list every metablock of the log");
	auto* slot = app.add_option("--slot", o.slot, "show slot K in full (0-based)");
	auto* segment = app.add_option("--segment", o.segment, "show the segment with this id in full");
	slot->excludes(segment);
	app.add_option("--block", o.block, "where the newest copy of this backing SECTOR lives, with a hexdump");
	app.add_flag("--no-verify", o.no_verify, "read segment headers only; do not verify checksums");
	app.add_flag("-q,--quiet", o.quiet, "no progress output");
	app.add_option("--progress-fd", o.progress_fd, "write `phase done total` progress lines to file descriptor N")
		->check(CLI::NonNegativeNumber);
	return wbkit::run_tool("wbdump", app, argc, argv, [&] { return run(o); });
}
