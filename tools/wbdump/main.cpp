// wbdump: dump and validate a writeboost cache device. Read-only.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <fmt/format.h>
#include <iostream>

#include "wbkit/errors.hpp"
#include "wbkit/tool_main.hpp"
#include "wbkit/inspect.hpp"
#include "wbkit/json_stream.hpp"

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

Exit codes: 0 no damage found, 1 damage found (a finding of severity warning
or error), 2 usage error, 3 cannot open or read.)";

struct Options {
	std::string cache;
	std::string backing;
	bool json = false;
	bool metablocks = false;
	bool no_verify = false;
	std::optional<std::uint64_t> slot;
	std::optional<std::uint64_t> segment;
	std::optional<std::uint64_t> block;
};

int run(const Options& o)
{
	using namespace wbkit;
	auto cache = open_device(o.cache);
	ScanOptions scan_options{.verify_checksums = !o.no_verify};
	if (!o.backing.empty())
		scan_options.backing_bytes = open_device(o.backing)->size_bytes();
	LogScan scan = scan_log(*cache, scan_options);

	// Options that depend on the cache are checked before anything is printed.
	std::optional<std::uint64_t> slot;
	if (o.slot || o.segment) {
		if (scan.geometry.nr_segments == 0)
			throw UsageError("the cache has no segment slots");
		if (o.slot) {
			if (*o.slot >= scan.geometry.nr_segments)
				throw UsageError(fmt::format("--slot {} is past the last slot ({})", *o.slot,
							     scan.geometry.nr_segments - 1));
			slot = *o.slot;
		} else {
			if (*o.segment == 0)
				throw UsageError("segment ids start at 1");
			slot = scan.geometry.slot_of_id(*o.segment);
			if (scan.slots[*slot].id != *o.segment) {
				// A misplaced segment (slot-mismatch) is still on the cache: show it where it is.
				auto found = std::find_if(scan.slots.begin(), scan.slots.end(),
							  [&](const SlotInfo& info) { return info.id == *o.segment; });
				if (found == scan.slots.end())
					throw UsageError(fmt::format("segment {} is not on the cache (slot {} holds segment {})",
								     *o.segment, *slot, scan.slots[*slot].id));
				slot = std::uint64_t(found - scan.slots.begin());
			}
		}
	}

	nlohmann::json doc;
	if (o.json)
		doc = scan_json(scan, o.cache);
	else
		print_summary(std::cout, scan, o.cache);

	if (slot) {
		SlotDetail detail = inspect_slot(*cache, scan.geometry, *slot);
		if (o.json) {
			doc["segment"] = slot_json(detail);
			doc["segment"]["in_log"] = scan.slots[*slot].in_log;
		} else {
			std::cout << '\n';
			print_slot(std::cout, detail);
		}
	}

	if (o.metablocks && !o.json) {
		std::cout << "\nmetablocks of the log, in replay order (segment, index, backing sector, dirty bits)\n";
		for_each_log_metablock(*cache, scan, [&](const LogSegment& seg, unsigned i, const Metablock& mb) {
			fmt::print("  {:>10} [{:3}] sector {:>12}  dirty_bits 0x{:02x}\n", seg.id, i, mb.sector, mb.dirty_bits);
		});
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

	if (o.json) {
		if (!o.metablocks) {
			std::cout << doc.dump(2) << '\n';
		} else {
			// The list grows with the log (millions of entries on a large cache): it is
			// written one entry at a time, never held.
			const StreamedArray metablocks[] = {{"metablocks", [&](const JsonSink& sink) {
								     for_each_log_metablock(*cache, scan, [&](const LogSegment& seg, unsigned i, const Metablock& mb) {
									     sink({{"segment_id", seg.id},
										   {"slot", seg.slot},
										   {"index", i},
										   {"sector", mb.sector},
										   {"dirty_bits", mb.dirty_bits}});
								     });
							     }}};
			write_json_document(std::cout, doc, metablocks);
		}
	}
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
	app.add_option("CACHE", o.cache, "cache device or image file")->required();
	app.add_option("--backing", o.backing, "backing device: report blocks that lie past its end");
	app.add_flag("--json", o.json, "print one JSON document (keys documented in the README)");
	app.add_flag("--metablocks", o.metablocks, "list every metablock of the log");
	auto* slot = app.add_option("--slot", o.slot, "show slot K in full (0-based)")->check(wbkit::unsigned_64());
	auto* segment =
		app.add_option("--segment", o.segment, "show the segment with this id in full")->check(wbkit::unsigned_64());
	slot->excludes(segment);
	app.add_option("--block", o.block, "where the newest copy of this backing SECTOR lives, with a hexdump")
		->check(wbkit::unsigned_64());
	app.add_flag("--no-verify", o.no_verify, "read segment headers only; do not verify checksums");
	return wbkit::run_tool("wbdump", app, argc, argv, [&] { return run(o); });
}
