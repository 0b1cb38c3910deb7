// wbsynth: writes a synthetic cache image (and backing image) with the
// library's LogWriter, from a seed, for fixtures, CLI tests and benchmarks.
// A developer tool, not installed.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <cstring>
#include <iostream>
#include <optional>
#include <unistd.h>
#include <random>
#include <string>

#include "wbkit/errors.hpp"
#include "tool_main.hpp"
#include "wbkit/log_writer.hpp"

namespace {

struct Options {
	std::string cache;
	std::uint64_t cache_mib = 16;
	std::string backing;
	std::uint64_t backing_mib = 64;
	bool backing_pattern = false;
	std::uint64_t seed = 1;
	std::uint64_t writes = 200;
	unsigned partial_percent = 20;
	unsigned clean_percent = 0;
	std::uint64_t flush_every = 50;
	bool final_flush = true;
	bool no_merge = false;
	bool tear_newest = false;
	std::vector<std::uint64_t> corrupt_ids;
	std::optional<std::uint64_t> record;
	std::optional<std::uint64_t> region_mib;
	std::string expected;
};

// Deterministic content: every sector says where and when it was written,
// repeated to fill the sector, so fixture images compress well.
void fill_sector(std::span<std::byte> sector, std::uint64_t seed, std::uint64_t write_no, std::uint64_t backing_sector)
{
	std::string stamp = fmt::format("wbsynth seed={} write={} sector={}\n", seed, write_no, backing_sector);
	for (std::size_t i = 0; i < sector.size(); ++i)
		sector[i] = std::byte(stamp[i % stamp.size()]);
}

void make_file(const std::string& path, std::uint64_t bytes)
{
	auto dev = wbkit::open_device(path, {.writable = true, .create = true});
	if (::truncate(path.c_str(), 0) != 0 || ::truncate(path.c_str(), off_t(bytes)) != 0)
		throw wbkit::IoError("cannot size the image", path, errno);
}

// One write of the workload: whole sectors within one 4 KiB block.
struct Op {
	std::uint64_t sector;
	std::uint64_t count;
	bool clean; // a read-cache fill of the whole block
};

std::vector<Op> make_workload(const Options& o, std::uint64_t region_blocks)
{
	std::mt19937_64 rng(o.seed);
	std::vector<Op> ops;
	ops.reserve(o.writes);
	for (std::uint64_t w = 0; w < o.writes; ++w) {
		std::uint64_t block = (rng() % region_blocks) * wbkit::block_sectors;
		if (rng() % 100 < o.clean_percent) {
			ops.push_back({block, wbkit::block_sectors, true});
			continue;
		}
		std::uint64_t first = 0, count = wbkit::block_sectors;
		if (rng() % 100 < o.partial_percent) {
			first = rng() % wbkit::block_sectors;
			count = 1 + rng() % (wbkit::block_sectors - first);
		}
		ops.push_back({block + first, count, false});
	}
	return ops;
}

// The stamped data of write number `write_no`.
std::span<const std::byte> op_data(const Options& o, std::uint64_t write_no, const Op& op, std::vector<std::byte>& data)
{
	data.resize(op.count * wbkit::sector_size);
	for (std::uint64_t s = 0; s < op.count; ++s)
		fill_sector(std::span(data).subspan(s * wbkit::sector_size, wbkit::sector_size), o.seed, write_no,
			    op.sector + s);
	return data;
}

// A backing-sized image: zeros, or stamped old content that differs from every cache copy.
std::unique_ptr<wbkit::Device> create_backing_image(const Options& o, const std::string& path)
{
	make_file(path, o.backing_mib << 20);
	auto device = wbkit::open_device(path, {.writable = true});
	std::vector<std::byte> chunk(1 << 20);
	for (std::uint64_t off = 0; o.backing_pattern && off < (o.backing_mib << 20); off += chunk.size()) {
		for (std::size_t s = 0; s < chunk.size(); s += wbkit::sector_size)
			fill_sector(std::span(chunk).subspan(s, wbkit::sector_size), o.seed, 0, (off + s) / wbkit::sector_size);
		device->write_exact(off, chunk);
	}
	return device;
}

int run(const Options& o)
{
	using namespace wbkit;
	if (!o.expected.empty() && (o.tear_newest || !o.corrupt_ids.empty() || !o.final_flush || o.clean_percent))
		throw UsageError("--expected describes an undamaged, fully flushed log without clean entries only");
	make_file(o.cache, o.cache_mib << 20);
	std::unique_ptr<Device> backing;
	const std::uint64_t backing_sectors = (o.backing_mib << 20) / sector_size;
	if (!o.backing.empty()) {
		backing = create_backing_image(o, o.backing);
	}
	auto cache = open_device(o.cache, {.writable = true});
	LogWriter writer(*cache, {.merge_partial_overwrites = !o.no_merge, .backing = backing.get()});

	const std::uint64_t region_sectors =
		std::min(backing_sectors, o.region_mib ? (*o.region_mib << 20) / sector_size : backing_sectors);
	const std::uint64_t region_blocks = region_sectors / block_sectors;
	if (region_blocks == 0)
		throw UsageError("the backing region holds no 4 KiB block");
	const std::vector<Op> ops = make_workload(o, region_blocks);

	std::vector<std::byte> data;
	for (std::uint64_t w = 1; w <= ops.size(); ++w) {
		const Op& op = ops[w - 1];
		if (op.clean) {
			// A clean entry carries the backing device's own data.
			data.assign(block_size, std::byte{0});
			if (backing)
				backing->read_exact(op.sector * sector_size, data);
			writer.write_clean(op.sector, data);
		} else {
			writer.write(op.sector, op_data(o, w, op, data));
		}
		if (o.flush_every && w % o.flush_every == 0)
			writer.flush();
	}
	if (o.final_flush)
		writer.flush();
	for (std::uint64_t id : o.corrupt_ids)
		writer.corrupt_segment_data(id);
	if (o.tear_newest)
		writer.tear_segment(writer.last_flushed_id());
	if (o.record)
		writer.set_superblock_record(*o.record);
	cache->flush_or_throw();

	if (!o.expected.empty()) {
		// The same workload straight onto the old backing content: the logical device.
		auto expected = create_backing_image(o, o.expected);
		for (std::uint64_t w = 1; w <= ops.size(); ++w)
			if (!ops[w - 1].clean)
				expected->write_exact(ops[w - 1].sector * sector_size, op_data(o, w, ops[w - 1], data));
	}
	fmt::print("cache {} segments, last_flushed_id {}, last_writeback_id {}\n", writer.geometry().nr_segments,
		   writer.last_flushed_id(), writer.last_writeback_id());
	return 0;
}

} // namespace

int main(int argc, char** argv)
{
	CLI::App app("Write a synthetic writeboost cache image (developer tool for fixtures and tests).", "wbsynth");
	Options o;
	app.add_option("--cache", o.cache, "cache image to create")->required();
	app.add_option("--cache-mib", o.cache_mib, "cache size in MiB");
	app.add_option("--backing", o.backing, "backing image to create (receives write-back when the log wraps)");
	app.add_option("--backing-mib", o.backing_mib, "backing size in MiB");
	app.add_flag("--backing-pattern", o.backing_pattern, "fill the backing image with stamped old content");
	app.add_option("--seed", o.seed, "workload seed");
	app.add_option("--writes", o.writes, "number of writes");
	app.add_option("--partial-percent", o.partial_percent, "share of writes that cover part of a block")
		->check(CLI::Range(0, 100));
	app.add_option("--clean-percent", o.clean_percent, "share of clean entries (read-cache fills)")
		->check(CLI::Range(0, 100));
	app.add_option("--flush-every", o.flush_every, "flush after every N writes (0: never)");
	app.add_flag("!--no-final-flush", o.final_flush, "leave the last writes in RAM (lost)");
	app.add_flag("--no-merge", o.no_merge, "partial overwrites do not take in older dirty sectors");
	app.add_flag("--tear-newest", o.tear_newest, "tear the newest segment, as a power cut would");
	app.add_option("--corrupt-id", o.corrupt_ids, "flip a byte in this segment (repeatable)");
	app.add_option("--record", o.record, "superblock record (last written-back segment id)");
	app.add_option("--region-mib", o.region_mib, "only write the first N MiB of the backing device");
	app.add_option("--expected", o.expected, "also write the expected logical image here");
	return wbkit::run_tool("wbsynth", app, argc, argv, [&] { return run(o); });
}
