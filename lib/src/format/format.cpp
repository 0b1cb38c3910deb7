#include "wbkit/format.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "wbkit/crc32c.hpp"
#include "wbkit/endian.hpp"
#include "wbkit/errors.hpp"

namespace wbkit {

namespace {

// Every header block is checked this way (its unused 3.5 KiB included):
// the first byte, then the rest against itself shifted by one, in memcmp's
// word-at-a-time loop rather than a byte loop.
bool all_zero(std::span<const std::byte> bytes)
{
	return bytes.empty() || (bytes[0] == std::byte{0} && std::memcmp(bytes.data(), bytes.data() + 1, bytes.size() - 1) == 0);
}

} // namespace

Geometry Geometry::for_cache_bytes(std::uint64_t cache_bytes)
{
	Geometry g;
	g.cache_bytes = cache_bytes;
	g.nr_segments = wb_nr_segments(cache_bytes / sector_size);
	return g;
}

std::uint64_t Geometry::checked_slot(std::uint64_t slot) const
{
	if (nr_segments == 0)
		throw UsageError("the cache has no segment slots");
	if (slot >= nr_segments)
		throw UsageError(fmt::format("slot {} is past the last slot ({} slots)", slot, nr_segments));
	return slot;
}

std::uint64_t Geometry::checked_slot_of_id(std::uint64_t id) const
{
	if (nr_segments == 0)
		throw UsageError("the cache has no segment slots");
	if (id == 0)
		throw UsageError("segment ids start at 1");
	return slot_of_id(id);
}

SegmentHeader parse_segment_header(std::span<const std::byte> block)
{
	SegmentHeader h;
	h.id = load_le<std::uint64_t>(block, WB_SEG_ID_OFFSET);
	h.checksum = load_le<std::uint32_t>(block, WB_SEG_CHECKSUM_OFFSET);
	h.length = load_le<std::uint8_t>(block, WB_SEG_LENGTH_OFFSET);
	h.header_padding_nonzero =
		!all_zero(block.subspan(WB_SEG_PADDING_OFFSET, WB_SEGMENT_HEADER_SIZE - WB_SEG_PADDING_OFFSET));

	unsigned n = h.usable_length();
	for (unsigned i = 0; i < n; ++i) {
		auto mb = block.subspan(WB_METABLOCK_OFFSET(i), WB_METABLOCK_SIZE);
		Metablock& m = h.metablocks[i];
		m.sector = load_le<std::uint64_t>(mb, WB_MB_SECTOR_OFFSET);
		m.dirty_bits = load_le<std::uint8_t>(mb, WB_MB_DIRTY_BITS_OFFSET);
		m.padding_nonzero = !all_zero(mb.subspan(WB_MB_PADDING_OFFSET, WB_METABLOCK_SIZE - WB_MB_PADDING_OFFSET));
	}
	h.unused_metablocks_nonzero = !all_zero(block.subspan(WB_METABLOCK_OFFSET(n), block_size - WB_METABLOCK_OFFSET(n)));
	return h;
}

SuperblockHeader parse_superblock_header(std::span<const std::byte> sector0)
{
	SuperblockHeader sb;
	sb.magic = load_le<std::uint32_t>(sector0, WB_SB_MAGIC_OFFSET);
	sb.magic_ok = sb.magic == superblock_magic;
	sb.rest_nonzero = !all_zero(sector0.subspan(sizeof(std::uint32_t), sector_size - sizeof(std::uint32_t)));
	return sb;
}

std::uint64_t parse_superblock_record(std::span<const std::byte> record_sector)
{
	return load_le<std::uint64_t>(record_sector, 0);
}

std::optional<std::uint64_t> parse_clean_trust(std::span<const std::byte> trust_sector)
{
	if (load_le<std::uint32_t>(trust_sector, WB_TRUST_MAGIC_OFFSET) != WB_TRUST_MAGIC)
		return std::nullopt;
	return load_le<std::uint64_t>(trust_sector, WB_TRUST_FROM_OFFSET);
}

std::uint64_t parse_clean_trust_segments(std::span<const std::byte> trust_sector)
{
	if (load_le<std::uint32_t>(trust_sector, WB_TRUST_MAGIC_OFFSET) != WB_TRUST_MAGIC)
		return 0;
	return load_le<std::uint64_t>(trust_sector, WB_TRUST_SEGMENTS_OFFSET);
}

std::uint32_t segment_checksum(std::span<const std::byte> segment, unsigned length)
{
	return crc32c(segment.subspan(WB_METABLOCK_AREA_OFFSET, block_size * (length + 1ULL) - WB_METABLOCK_AREA_OFFSET));
}

SegmentCrcStream::SegmentCrcStream(Crc32cEngine engine) : as_is_(engine), tail_zeroed_(engine) {}

void SegmentCrcStream::begin(std::span<const std::byte> header_block, unsigned length)
{
	as_is_.finish(); // a fresh start, whatever an earlier segment left
	tail_zeroed_.finish();
	tail_metablocks_ = 0;
	const auto area = header_block.subspan(WB_METABLOCK_AREA_OFFSET, block_size - WB_METABLOCK_AREA_OFFSET);
	as_is_.update(area);
	const auto* bytes = reinterpret_cast<const __u8*>(header_block.data());
	if (wb_metablock_tail_is_zero(bytes, length))
		return;
	std::array<std::byte, block_size> zeroed;
	std::memcpy(zeroed.data(), header_block.data(), block_size);
	wb_zero_metablock_tail(reinterpret_cast<__u8*>(zeroed.data()), length);
	tail_zeroed_.update(std::span(zeroed).subspan(WB_METABLOCK_AREA_OFFSET));
	std::size_t end = block_size;
	while (bytes[end - 1] == 0)
		--end; // stops inside the tail: it holds a non-zero byte
	tail_metablocks_ = unsigned((end - WB_METABLOCK_OFFSET(length) + WB_METABLOCK_SIZE - 1) / WB_METABLOCK_SIZE);
}

void SegmentCrcStream::update(std::span<const std::byte> data)
{
	as_is_.update(data);
	if (tail_metablocks_)
		tail_zeroed_.update(data);
}

SegmentCrc SegmentCrcStream::finish()
{
	SegmentCrc crc{.as_is = as_is_.finish(), .tail_metablocks = tail_metablocks_};
	if (tail_metablocks_)
		crc.tail_zeroed = tail_zeroed_.finish();
	return crc;
}

SegmentCrc segment_crc(std::span<const std::byte> segment, unsigned length)
{
	SegmentCrcStream stream;
	stream.begin(segment.first(block_size), length);
	stream.update(segment.subspan(block_size, block_size * length));
	return stream.finish();
}

void write_segment_header(std::span<std::byte> block, const SegmentHeader& header)
{
	std::memset(block.data(), 0, block_size);
	store_le<std::uint64_t>(block, WB_SEG_ID_OFFSET, header.id);
	store_le<std::uint32_t>(block, WB_SEG_CHECKSUM_OFFSET, header.checksum);
	store_le<std::uint8_t>(block, WB_SEG_LENGTH_OFFSET, header.length);
	for (unsigned i = 0; i < header.usable_length(); ++i) {
		auto mb = block.subspan(WB_METABLOCK_OFFSET(i), WB_METABLOCK_SIZE);
		store_le<std::uint64_t>(mb, WB_MB_SECTOR_OFFSET, header.metablocks[i].sector);
		store_le<std::uint8_t>(mb, WB_MB_DIRTY_BITS_OFFSET, header.metablocks[i].dirty_bits);
	}
}

void write_superblock_magic(std::span<std::byte> sector0)
{
	std::memset(sector0.data(), 0, sector_size);
	store_le<std::uint32_t>(sector0, WB_SB_MAGIC_OFFSET, superblock_magic);
}

void write_superblock_record(std::span<std::byte> record_sector, std::uint64_t last_writeback_id)
{
	std::memset(record_sector.data(), 0, sector_size);
	store_le<std::uint64_t>(record_sector, 0, last_writeback_id);
}

void write_clean_trust(std::span<std::byte> trust_sector, std::uint64_t trusted_from_id, std::uint64_t nr_segments)
{
	std::memset(trust_sector.data(), 0, sector_size);
	store_le<std::uint32_t>(trust_sector, WB_TRUST_MAGIC_OFFSET, WB_TRUST_MAGIC);
	store_le<std::uint64_t>(trust_sector, WB_TRUST_FROM_OFFSET, trusted_from_id);
	store_le<std::uint64_t>(trust_sector, WB_TRUST_SEGMENTS_OFFSET, nr_segments);
}

} // namespace wbkit
