// Shared setup for the scan tests: a cache and backing image in a temp dir,
// a LogWriter over them, and header patching for crafted damage.
#pragma once

#include <algorithm>
#include <functional>
#include <gtest/gtest.h>

#include "temp_image.hpp"
#include "wbkit/endian.hpp"
#include "wbkit/log_scan.hpp"
#include "wbkit/log_writer.hpp"

namespace wbkit::testing {

class ScanTest : public ::testing::Test {
protected:
	static constexpr std::uint64_t cache_bytes = superblock_size + 6 * segment_size; // 6 slots
	static constexpr std::uint64_t backing_bytes = 8ULL << 20;

	void SetUp() override
	{
		cache_path = dir.make_image("cache.img", cache_bytes);
		backing_path = dir.make_image("backing.img", backing_bytes);
		cache = dir.open_rw(cache_path);
		backing = dir.open_rw(backing_path);
	}

	LogWriter make_writer(bool merge = true)
	{
		return LogWriter(*cache, {.merge_partial_overwrites = merge, .backing = backing.get()});
	}

	// Fills `segments` full segments of distinct dirty blocks.
	void write_full_segments(LogWriter& w, unsigned segments, std::uint64_t first_block = 0)
	{
		for (unsigned i = 0; i < segments * blocks_per_segment; ++i)
			w.write((first_block + i) * block_sectors, pattern_bytes(block_size, first_block + i));
		w.flush();
	}

	// Flushes one segment of `blocks` whole dirty blocks, backing blocks
	// first_block on, each with its own pattern.
	void write_segment(LogWriter& w, unsigned blocks, std::uint64_t first_block)
	{
		for (unsigned i = 0; i < blocks; ++i)
			w.write((first_block + i) * block_sectors, pattern_bytes(block_size, first_block + i));
		w.flush();
	}

	LogScan scan(ScanOptions options = {}) { return scan_log(*cache, options); }

	enum class Checksum {
		stale,
		recompute,
	};

	// Rewrites slot's header through `edit`; the checksum stays as it was or is recomputed.
	void patch_header(std::uint64_t slot, Checksum checksum, const std::function<void(SegmentHeader&)>& edit)
	{
		Geometry g = Geometry::for_cache_bytes(cache_bytes);
		AlignedBuffer seg(segment_size);
		cache->read_exact(g.slot_offset(slot), seg.span());
		SegmentHeader h = parse_segment_header(seg.span().first(block_size));
		edit(h);
		write_segment_header(seg.span().first(block_size), h);
		if (checksum == Checksum::recompute) {
			h.checksum = segment_checksum(seg.span(), h.usable_length());
			write_segment_header(seg.span().first(block_size), h);
		}
		cache->write_exact(g.slot_offset(slot), seg.span().first(block_size));
	}

	// The segment of id, written at `length`, as an append in place cut
	// between its two writes leaves it (docs/FORMAT.md, "Checksum"):
	// committed at `committed`, its metablock area and data blocks already
	// naming and holding the blocks from there to `length`.
	// Checksum::stale: the committed checksum; recompute: the checksum of
	// the bytes as they are (tail included), which a writer never stores.
	void cut_append(LogWriter& w, std::uint64_t id, unsigned committed, Checksum checksum = Checksum::stale)
	{
		w.cut_append(id, committed);
		if (checksum == Checksum::stale)
			return;
		Geometry g = Geometry::for_cache_bytes(cache_bytes);
		AlignedBuffer seg(segment_size);
		const std::uint64_t offset = g.slot_offset(g.slot_of_id(id));
		cache->read_exact(offset, seg.span());
		store_le<std::uint32_t>(seg.span(), WB_SEG_CHECKSUM_OFFSET, segment_checksum(seg.span(), committed));
		cache->write_exact(offset, seg.span().first(block_size));
	}

	void poke(std::uint64_t offset, std::byte value) { cache->write_exact(offset, std::span(&value, 1)); }

	static bool has(const LogScan& s, FindingCode code)
	{
		return std::any_of(s.findings.begin(), s.findings.end(), [&](const Finding& f) { return f.code == code; });
	}

	TempDir dir;
	std::string cache_path, backing_path;
	std::unique_ptr<Device> cache, backing;
};

} // namespace wbkit::testing
