// Cache images for bench/replay.sh:
//   replay_synth dense CACHE BACKING MIB    MIB of sequential dirty 4 KiB blocks, no wrap-around
//   replay_synth sparse CACHE BACKING METABLOCKS
//       a sparse cache whose every segment is full (127 metablocks, each a
//       distinct dirty block) with zero data: only the header blocks are
//       written, with checksums that account for the zero data blocks.
//   replay_synth huge CACHE GIB MIB
//       a sparse cache of GIB GiB (a file of holes) whose log holds MIB MiB
//       of dirty blocks in its first slots: the header scan of a huge cache
//   replay_synth scan CACHE BACKING         scan + plan as wbreplay --dry-run does; prints
//       seconds and peak RSS, so the index's memory is measured without a tool's extras
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <string>
#include <sys/resource.h>
#include <chrono>
#include <unistd.h>

#include "wbkit/crc32c.hpp"
#include "wbkit/errors.hpp"
#include "wbkit/log_scan.hpp"
#include "wbkit/log_writer.hpp"
#include "wbkit/replay.hpp"

using namespace wbkit;

namespace {

void make_file(const std::string& path, std::uint64_t bytes)
{
	auto dev = open_device(path, {.writable = true, .create = true});
	if (::truncate(path.c_str(), 0) != 0 || ::truncate(path.c_str(), off_t(bytes)) != 0)
		throw IoError("cannot size the image", path, errno);
}

int dense(const std::string& cache_path, const std::string& backing_path, std::uint64_t mib)
{
	const std::uint64_t blocks = mib << 20 >> 12;
	const std::uint64_t segments = (blocks + blocks_per_segment - 1) / blocks_per_segment + 1;
	make_file(cache_path, superblock_size + segments * segment_size);
	make_file(backing_path, mib << 20);
	auto cache = open_device(cache_path, {.writable = true});
	LogWriter writer(*cache);
	std::vector<std::byte> chunk(64 * 1024);
	for (std::uint64_t b = 0; b < blocks; b += chunk.size() / block_size) {
		for (std::size_t i = 0; i < chunk.size(); i += 8)
			std::memcpy(chunk.data() + i, &b, 8); // cheap, non-zero, differs per write
		writer.write(b * block_sectors, chunk);
	}
	writer.flush();
	cache->flush_or_throw();
	return 0;
}

// Extending a CRC-32C register by zero bytes is linear over GF(2): the
// register after n zeros is M^n times the register before. M^n is found once
// by pushing each of the 32 unit registers through n zero bytes bitwise.
class ZeroExtension {
public:
	explicit ZeroExtension(std::uint64_t zero_bytes)
	{
		for (unsigned bit = 0; bit < 32; ++bit) {
			std::uint32_t reg = 1u << bit;
			for (std::uint64_t i = 0; i < zero_bytes * 8; ++i)
				reg = (reg >> 1) ^ (0x82F63B78u & (0u - (reg & 1u)));
			columns_[bit] = reg;
		}
	}
	// The CRC-32C of data || zeros, given the CRC-32C of data.
	std::uint32_t extend(std::uint32_t crc_of_data) const
	{
		const std::uint32_t reg = ~crc_of_data; // undo the final xor: the raw register
		std::uint32_t out = 0;
		for (unsigned bit = 0; bit < 32; ++bit)
			if ((reg >> bit) & 1u)
				out ^= columns_[bit];
		return ~out;
	}

private:
	std::uint32_t columns_[32]{};
};

int sparse(const std::string& cache_path, const std::string& backing_path, std::uint64_t metablocks)
{
	const std::uint64_t segments = (metablocks + blocks_per_segment - 1) / blocks_per_segment;
	make_file(cache_path, superblock_size + segments * segment_size);
	make_file(backing_path, segments * blocks_per_segment * block_size);
	auto cache = open_device(cache_path, {.writable = true});
	const ZeroExtension zeros(std::uint64_t(blocks_per_segment) * block_size);

	AlignedBuffer header(block_size);
	SegmentHeader h;
	h.length = blocks_per_segment;
	for (std::uint64_t slot = 0; slot < segments; ++slot) {
		h.id = slot + 1;
		for (unsigned i = 0; i < blocks_per_segment; ++i)
			h.metablocks[i] = Metablock{.sector = (slot * blocks_per_segment + i) * block_sectors, .dirty_bits = 0xff};
		h.checksum = 0;
		write_segment_header(header.span(), h);
		h.checksum = zeros.extend(crc32c(header.span().subspan(WB_SEGMENT_HEADER_SIZE)));
		if (slot == 0) {
			// The shortcut must agree with the checksum over the whole written segment.
			AlignedBuffer whole(block_size * (blocks_per_segment + 1));
			std::memcpy(whole.data(), header.data(), block_size);
			if (segment_checksum(whole.span(), blocks_per_segment) != h.checksum)
				throw Error("zero-extended checksum disagrees with the full computation");
		}
		write_segment_header(header.span(), h);
		cache->write_exact(Geometry::for_cache_bytes(cache->size_bytes()).slot_offset(slot), header.span());
	}
	AlignedBuffer sector(sector_size);
	write_superblock_magic(sector.span());
	cache->write_exact(0, sector.span());
	cache->flush_or_throw();
	fmt::print("{} segments, {} metablocks\n", segments, segments * blocks_per_segment);
	return 0;
}

int huge(const std::string& cache_path, std::uint64_t gib, std::uint64_t mib)
{
	make_file(cache_path, gib << 30);
	auto cache = open_device(cache_path, {.writable = true});
	// Formatting would write every slot's header: only the magic, the rest are holes (empty slots).
	AlignedBuffer sector(sector_size);
	write_superblock_magic(sector.span());
	cache->write_exact(0, sector.span());
	LogWriter writer(*cache, {.format = false});
	std::vector<std::byte> chunk(64 * 1024);
	const std::uint64_t blocks = mib << 20 >> 12;
	for (std::uint64_t b = 0; b < blocks; b += chunk.size() / block_size) {
		for (std::size_t i = 0; i < chunk.size(); i += 8)
			std::memcpy(chunk.data() + i, &b, 8);
		// Spread over the backing address space, so the index is not one run.
		writer.write(b * 977 % (1ULL << 30) * block_sectors, chunk);
	}
	writer.flush();
	cache->flush_or_throw();
	fmt::print("{} slots, {} segments written\n", writer.geometry().nr_segments, writer.last_flushed_id());
	return 0;
}

int scan(const std::string& cache_path, const std::string& backing_path)
{
	const auto start = std::chrono::steady_clock::now();
	auto cache = open_device(cache_path);
	auto backing = open_device(backing_path);
	const LogScan s = scan_log(*cache, {.verify_checksums = true, .backing_bytes = backing->size_bytes()});
	const ReplayPlan plan = replay_plan(s, {.backing_sectors = backing->size_bytes() / sector_size});
	const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
	rusage usage{};
	::getrusage(RUSAGE_SELF, &usage);
	std::uint64_t metablocks = 0;
	for (const LogSegment& seg : s.log)
		metablocks += seg.length;
	fmt::print("metablocks {} index_entries {} index_bytes {} dirty_blocks {} extents {} seconds {:.2f} "
		   "peak_rss_bytes {}\n",
		   metablocks, s.index.size(), s.index.memory_bytes(), plan.summary().dirty_blocks,
		   plan.summary().extents, seconds, std::uint64_t(usage.ru_maxrss) * 1024);
	return 0;
}

} // namespace

int main(int argc, char** argv)
{
	try {
		const std::string mode = argc > 1 ? argv[1] : "";
		if (mode == "dense" && argc == 5)
			return dense(argv[2], argv[3], std::stoull(argv[4]));
		if (mode == "sparse" && argc == 5)
			return sparse(argv[2], argv[3], std::stoull(argv[4]));
		if (mode == "huge" && argc == 5)
			return huge(argv[2], std::stoull(argv[3]), std::stoull(argv[4]));
		if (mode == "scan" && argc == 4)
			return scan(argv[2], argv[3]);
		std::fprintf(stderr, "usage: replay_synth dense|sparse CACHE BACKING N | huge CACHE GIB MIB | scan CACHE BACKING\n");
		return 2;
	} catch (const std::exception& e) {
		std::fprintf(stderr, "replay_synth: error: %s\n", e.what());
		return 3;
	}
}
