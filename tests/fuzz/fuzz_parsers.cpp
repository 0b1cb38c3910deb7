// libFuzzer target for every parser entry point: superblock, segment header,
// the whole log scan over an image whose headers come from the input, and
// dmsetup's status and table lines and dm-wbkit's error counters as wbstat
// reads them.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string_view>
#include <vector>

#include "wbkit/inspect.hpp"
#include "wbkit/report.hpp"
#include "wbkit/log_scan.hpp"
#include "wbkit/wb_status.hpp"

using namespace wbkit;

namespace {

constexpr unsigned fuzz_slots = 3;

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
	std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);

	// The input as dmsetup's output: a parse error is an answer, nothing else is.
	try {
		StatusReport report{.devices = read_dmsetup_output(
					    std::string_view(reinterpret_cast<const char*>(data), size), "fuzz")};
		(void)status_json(report);
		std::ostringstream text;
		print_status(text, report);
		write_status_prometheus(text, report);
	} catch (const StatusFormatError&) {
	}

	// The input as dm-wbkit's reply to error_counts, shown with a device.
	try {
		StatusReport report{.devices = read_dmsetup_output(
					    "wb: 0 8 writeboost 0 1778 14 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 2 dead 1",
					    "fuzz")};
		report.devices[0].errors = parse_error_counts(std::string_view(reinterpret_cast<const char*>(data), size));
		report.rates.push_back(wb_rates(report.devices[0], report.devices[0], 1.0));
		report.interval_seconds = 1.0;
		(void)status_json(report);
		std::ostringstream text;
		print_status(text, report);
		write_status_prometheus(text, report);
	} catch (const StatusFormatError&) {
	}

	std::vector<std::byte> block(block_size);
	std::memcpy(block.data(), input.data(), std::min<std::size_t>(size, block_size));
	(void)parse_superblock_header(std::span(block).first(sector_size));
	(void)parse_superblock_record(std::span(block).first(sector_size));
	(void)parse_segment_header(block);

	// Slot header blocks from the input, the rest of the input as slot 0's data.
	// The image is kept between runs (zeroed where the input went) for speed.
	static std::vector<std::byte> image(superblock_size + fuzz_slots * segment_size);
	write_superblock_magic(std::span(image).first(sector_size));
	std::size_t used = 0;
	for (unsigned slot = 0; slot < fuzz_slots && used < size; ++slot) {
		std::size_t n = std::min<std::size_t>(size - used, block_size);
		std::memcpy(image.data() + superblock_size + slot * segment_size, input.data() + used, n);
		used += n;
	}
	if (used < size)
		std::memcpy(image.data() + superblock_size + block_size, input.data() + used,
			    std::min<std::size_t>(size - used, segment_size - block_size));

	MemoryDevice cache("fuzz", std::move(image));
	const bool verify = size > 0 && (data[size - 1] & 1);
	LogScan scan = scan_log(cache, {.verify_checksums = verify, .backing_bytes = 1ULL << 30});
	(void)scan_json(scan, "fuzz");
	for (std::uint64_t slot = 0; slot < fuzz_slots; ++slot)
		(void)slot_json(inspect_slot(cache, scan.geometry, slot));
	for (std::size_t i = 0; i < scan.index.size() && i < 16; ++i)
		(void)inspect_sector(cache, scan, scan.index[i].block_sector + i % block_sectors);
	for_each_log_metablock(cache, scan, [](const LogSegment&, unsigned, const Metablock&) {});

	image = std::move(cache.bytes());
	for (unsigned slot = 0; slot < fuzz_slots; ++slot)
		std::memset(image.data() + superblock_size + slot * segment_size, 0, block_size);
	std::memset(image.data() + superblock_size + block_size, 0, segment_size - block_size);
	return 0;
}
