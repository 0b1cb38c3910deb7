// The on-disk layout and the CRC, pinned against the numbers of docs/FORMAT.md.
#include <gtest/gtest.h>

#include <cstring>
#include <string_view>

#include "wbkit/crc32c.hpp"
#include "wbkit/device.hpp"
#include "wbkit/endian.hpp"
#include "wbkit/format.hpp"

using namespace wbkit;

namespace {

std::span<const std::byte> bytes_of(std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); }

} // namespace

TEST(Format, StructSizesAndOffsetsMatchTheSpecification)
{
	EXPECT_EQ(sizeof(wb_metablock_device), 16u);
	EXPECT_EQ(sizeof(wb_segment_header_device), 512u);
	EXPECT_EQ(offsetof(wb_segment_header_device, checksum), 8u);
	EXPECT_EQ(offsetof(wb_segment_header_device, length), 12u);
	EXPECT_EQ(offsetof(wb_metablock_device, dirty_bits), 8u);
	EXPECT_EQ(WB_SB_RECORD_OFFSET, 0xFFE00u);
	EXPECT_EQ(WB_METABLOCK_OFFSET(126) + WB_METABLOCK_SIZE, 512u + 127u * 16u);
}

TEST(Format, GeometryFollowsFormatMd)
{
	// 2048 superblock sectors, then whole 1024-sector segments; a short tail is unused.
	Geometry g = Geometry::for_cache_bytes((2048 + 3 * 1024 + 1000) * 512ULL);
	EXPECT_EQ(g.nr_segments, 3u);
	EXPECT_EQ(g.slot_offset(0), 2048 * 512ULL);
	EXPECT_EQ(g.data_block_offset(1, 0), (2048 + 1024 + 8) * 512ULL);
	EXPECT_EQ(g.data_block_offset(1, 126), (2048 + 1024 + 8 * 127) * 512ULL);
	EXPECT_EQ(g.slot_of_id(1), 0u);
	EXPECT_EQ(g.slot_of_id(4), 0u);
	EXPECT_EQ(g.slot_of_id(6), 2u);
	EXPECT_EQ(Geometry::for_cache_bytes(2047 * 512ULL).nr_segments, 0u);
	EXPECT_EQ(Geometry::for_cache_bytes((2048 + 1023) * 512ULL).nr_segments, 0u);
}

TEST(Format, SixtyFourBitOffsetsOnMultiTerabyteCaches)
{
	Geometry g = Geometry::for_cache_bytes(8ULL << 40); // 8 TiB
	EXPECT_EQ(g.nr_segments, ((8ULL << 40) / 512 - 2048) / 1024);
	const std::uint64_t last = g.nr_segments - 1;
	EXPECT_EQ(g.slot_offset(last), (2048 + 1024 * last) * 512ULL);
	EXPECT_GT(g.slot_offset(last), 1ULL << 42);
}

TEST(Crc32c, CheckValueOfTheCastagnoliPolynomial)
{
	EXPECT_EQ(crc32c(bytes_of("123456789")), 0xE3069283u);
	EXPECT_EQ(crc32c({}), 0u);
}

TEST(Crc32c, IncrementalEqualsOneShot)
{
	std::string_view text = "the quick brown fox jumps over the lazy dog";
	Crc32c crc;
	crc.update(bytes_of(text.substr(0, 10)));
	crc.update(bytes_of(text.substr(10)));
	EXPECT_EQ(crc.finish(), crc32c(bytes_of(text)));
}

TEST(Crc32c, EmptySegmentChecksumIsTheSpecifiedVector)
{
	AlignedBuffer segment(block_size);
	EXPECT_EQ(segment_checksum(segment.span(), 0), 143703573u);
	EXPECT_EQ(segment_checksum(segment.span(), 0), WB_EMPTY_SEGMENT_CHECKSUM);
}

TEST(Crc32c, ChecksumSkipsTheHeaderSectorAndCoversTheData)
{
	AlignedBuffer segment(3 * block_size);
	std::uint32_t base = segment_checksum(segment.span(), 2);
	segment.data()[0] = std::byte{0xff}; // id: not covered
	segment.data()[511] = std::byte{0xff};
	EXPECT_EQ(segment_checksum(segment.span(), 2), base);
	segment.data()[3 * block_size - 1] = std::byte{1}; // last byte of data block 1: covered
	EXPECT_NE(segment_checksum(segment.span(), 2), base);
}

TEST(Parse, SegmentHeaderRoundTrip)
{
	SegmentHeader h;
	h.id = 0x0102030405060708ULL;
	h.checksum = 0xdeadbeef;
	h.length = 2;
	h.metablocks[0] = {.sector = 8, .dirty_bits = 0xff};
	h.metablocks[1] = {.sector = 1ULL << 40, .dirty_bits = 0x0f};
	AlignedBuffer block(block_size);
	write_segment_header(block.span(), h);
	// Little-endian on disk whatever the host.
	EXPECT_EQ(block.data()[0], std::byte{0x08});
	EXPECT_EQ(block.data()[7], std::byte{0x01});
	SegmentHeader back = parse_segment_header(block.span());
	EXPECT_EQ(back.id, h.id);
	EXPECT_EQ(back.checksum, h.checksum);
	EXPECT_EQ(back.length, 2);
	EXPECT_EQ(back.metablocks[1].sector, 1ULL << 40);
	EXPECT_EQ(back.metablocks[1].dirty_bits, 0x0f);
	EXPECT_FALSE(back.header_padding_nonzero);
	EXPECT_FALSE(back.unused_metablocks_nonzero);
	EXPECT_FALSE(back.metablocks[0].padding_nonzero);
}

TEST(Parse, FlagsNonZeroPaddingAndOverlongLength)
{
	AlignedBuffer block(block_size);
	store_le<std::uint8_t>(block.span(), WB_SEG_LENGTH_OFFSET, 200);
	block.data()[100] = std::byte{1};
	SegmentHeader h = parse_segment_header(block.span());
	EXPECT_FALSE(h.length_valid());
	EXPECT_EQ(h.usable_length(), 127u);
	EXPECT_TRUE(h.header_padding_nonzero);

	AlignedBuffer block2(block_size);
	store_le<std::uint8_t>(block2.span(), WB_SEG_LENGTH_OFFSET, 1);
	block2.data()[WB_METABLOCK_OFFSET(0) + 12] = std::byte{1}; // metablock 0 padding
	block2.data()[WB_METABLOCK_OFFSET(5)] = std::byte{1};      // past the length
	SegmentHeader h2 = parse_segment_header(block2.span());
	EXPECT_TRUE(h2.metablocks[0].padding_nonzero);
	EXPECT_TRUE(h2.unused_metablocks_nonzero);
}

TEST(Parse, SuperblockMagicBytes)
{
	AlignedBuffer sector(sector_size);
	write_superblock_magic(sector.span());
	EXPECT_EQ(sector.data()[0], std::byte{0x74});
	EXPECT_EQ(sector.data()[1], std::byte{0x73});
	EXPECT_EQ(sector.data()[2], std::byte{0x42});
	EXPECT_EQ(sector.data()[3], std::byte{0x57});
	SuperblockHeader sb = parse_superblock_header(sector.span());
	EXPECT_TRUE(sb.magic_ok);
	EXPECT_FALSE(sb.rest_nonzero);
	sector.data()[3] = std::byte{0};
	EXPECT_FALSE(parse_superblock_header(sector.span()).magic_ok);
}
