// The on-disk layout and the CRC, pinned against the numbers of docs/FORMAT.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>
#include <string_view>

#include "wbkit/crc32c.hpp"
#include "wbkit/device.hpp"
#include "wbkit/endian.hpp"
#include "wbkit/errors.hpp"
#include "wbkit/format.hpp"
#include "wbkit/slot_state.hpp"

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

TEST(Format, CheckedSlotsRefuseWhatCannotBeOnTheCache)
{
	const Geometry g = Geometry::for_cache_bytes((2048 + 3 * 1024) * 512ULL);
	EXPECT_EQ(g.checked_slot(2), 2u);
	EXPECT_THROW(g.checked_slot(3), UsageError);
	EXPECT_EQ(g.checked_slot_of_id(7), 0u);
	EXPECT_THROW(g.checked_slot_of_id(0), UsageError);
	const Geometry none = Geometry::for_cache_bytes(4096);
	EXPECT_THROW(none.checked_slot(0), UsageError);
	EXPECT_THROW(none.checked_slot_of_id(1), UsageError);
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

// Every engine against Crypto++, the reference: the format's vectors, then
// random buffers of odd lengths at odd alignments (ISA-L takes different code
// paths for short tails, misaligned heads and long folded runs).
constexpr Crc32cEngine engines_under_test[] = {Crc32cEngine::fast, Crc32cEngine::portable};

TEST(Crc32c, EveryEngineGivesTheFormatVectors)
{
	AlignedBuffer empty_segment(block_size);
	auto empty_checksum_area = empty_segment.span().subspan(WB_METABLOCK_AREA_OFFSET);
	for (Crc32cEngine engine : {Crc32cEngine::fast, Crc32cEngine::portable, Crc32cEngine::reference}) {
		SCOPED_TRACE(int(engine));
		EXPECT_EQ(crc32c(bytes_of("123456789"), engine), 0xE3069283u);
		EXPECT_EQ(crc32c({}, engine), 0u);
		EXPECT_EQ(crc32c(empty_checksum_area, engine), 0x0890BE15u);
		EXPECT_EQ(crc32c(empty_checksum_area, engine), WB_EMPTY_SEGMENT_CHECKSUM);
	}
}

TEST(Crc32c, EveryEngineAgreesWithTheReferenceOnRandomBuffers)
{
	std::mt19937_64 rng(20260515);
	std::vector<std::byte> pool(segment_size + 64);
	for (std::byte& b : pool)
		b = std::byte(rng());
	std::vector<std::size_t> lengths = {1, 2, 3, 7, 8, 15, 16, 31, 63, 64, 65, 127, 255, 256, 257, 1023, 4095, 4096, 4097,
					    WB_SEGMENT_HEADER_SIZE * 7 + 3, block_size * 128 - WB_METABLOCK_AREA_OFFSET,
					    segment_size};
	for (int i = 0; i < 200; ++i)
		lengths.push_back(std::size_t(rng() % segment_size) + 1);
	for (std::size_t length : lengths)
		for (std::size_t offset : {0, 1, 3, 8, 13, 63}) {
			auto data = std::span<const std::byte>(pool).subspan(offset, length);
			const std::uint32_t want = crc32c(data, Crc32cEngine::reference);
			for (Crc32cEngine engine : engines_under_test)
				ASSERT_EQ(crc32c(data, engine), want)
					<< "engine " << int(engine) << ", length " << length << ", offset " << offset;
		}
}

TEST(Crc32c, EveryEngineStreamsInPiecesAsInOneGo)
{
	std::mt19937_64 rng(7);
	std::vector<std::byte> data(100000);
	for (std::byte& b : data)
		b = std::byte(rng());
	const std::uint32_t want = crc32c(data, Crc32cEngine::reference);
	for (Crc32cEngine engine : {Crc32cEngine::fast, Crc32cEngine::portable, Crc32cEngine::reference}) {
		Crc32c crc(engine);
		for (std::size_t at = 0; at < data.size();) {
			const std::size_t n = std::min<std::size_t>(data.size() - at, rng() % 9000);
			crc.update(std::span<const std::byte>(data).subspan(at, n));
			at += n;
		}
		EXPECT_EQ(crc.finish(), want) << "engine " << int(engine);
		// finish() resets: the next value starts from scratch.
		crc.update(bytes_of("123456789"));
		EXPECT_EQ(crc.finish(), 0xE3069283u) << "engine " << int(engine);
	}
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

namespace {

// A segment of `length` blocks whose data bytes are not zero, its header
// naming `length + extra` blocks, as an append in place that did not commit.
std::vector<std::byte> appended_segment(unsigned length, unsigned extra)
{
	std::vector<std::byte> segment(block_size * (length + extra + 1ULL));
	for (std::size_t i = block_size; i < segment.size(); ++i)
		segment[i] = std::byte(i * 7 + 1);
	SegmentHeader h;
	h.id = 3;
	h.length = std::uint8_t(length + extra);
	for (unsigned i = 0; i < h.length; ++i)
		h.metablocks[i] = {.sector = 8ULL * (i + 1), .dirty_bits = 0xff};
	write_segment_header(std::span(segment).first(block_size), h);
	store_le<std::uint8_t>(segment, WB_SEG_LENGTH_OFFSET, std::uint8_t(length));
	return segment;
}

} // namespace

TEST(Crc32c, BothReadingsOfTheChecksum)
{
	// A zero tail: one reading, the stored CRC.
	const std::vector<std::byte> whole = appended_segment(3, 0);
	const SegmentCrc plain = segment_crc(whole, 3);
	EXPECT_EQ(plain.as_is, segment_checksum(whole, 3));
	EXPECT_FALSE(plain.tail_zeroed.has_value());
	EXPECT_EQ(plain.tail_metablocks, 0u);

	// Metablocks 3..7 past the length: the second reading is the CRC of
	// the header as the commit at length 3 wrote it.
	const std::vector<std::byte> appended = appended_segment(3, 5);
	const SegmentCrc both = segment_crc(appended, 3);
	EXPECT_EQ(both.as_is, segment_checksum(appended, 3));
	ASSERT_TRUE(both.tail_zeroed.has_value());
	EXPECT_EQ(*both.tail_zeroed, plain.as_is);
	EXPECT_NE(both.as_is, plain.as_is);
	EXPECT_EQ(both.tail_metablocks, 5u);

	// In pieces as in one go.
	SegmentCrcStream stream(Crc32cEngine::portable);
	stream.begin(std::span(appended).first(block_size), 3);
	for (std::size_t at = block_size; at < 4 * block_size; at += 1000)
		stream.update(std::span(appended).subspan(at, std::min<std::size_t>(1000, 4 * block_size - at)));
	const SegmentCrc pieces = stream.finish();
	EXPECT_EQ(pieces.as_is, both.as_is);
	EXPECT_EQ(pieces.tail_zeroed, both.tail_zeroed);
	// A segment after it starts afresh.
	stream.begin(std::span(whole).first(block_size), 3);
	stream.update(std::span(whole).subspan(block_size, 3 * block_size));
	const SegmentCrc next = stream.finish();
	EXPECT_EQ(next.as_is, plain.as_is);
	EXPECT_FALSE(next.tail_zeroed.has_value());

	// Length 0: the whole metablock area is the tail; a stray byte at its
	// very end counts every metablock slot up to it.
	std::vector<std::byte> empty(block_size);
	empty[block_size - 1] = std::byte{1};
	const SegmentCrc last = segment_crc(empty, 0);
	EXPECT_EQ(last.tail_zeroed, WB_EMPTY_SEGMENT_CHECKSUM);
	EXPECT_EQ(last.tail_metablocks, (block_size - WB_METABLOCK_AREA_OFFSET) / WB_METABLOCK_SIZE);
}

TEST(Crc32c, TheChecksumVerdict)
{
	const SegmentCrc one{.as_is = 0x1234};
	EXPECT_EQ(checksum_verdict(0x1234, one).state, SlotState::valid);
	EXPECT_FALSE(checksum_verdict(0x1234, one).tail_ignored());
	EXPECT_EQ(checksum_verdict(~0x1234u, one).state, SlotState::legacy_checksum);
	EXPECT_EQ(checksum_verdict(0x4321, one).state, SlotState::checksum_mismatch);
	EXPECT_EQ(checksum_verdict(0x4321, one).computed, 0x1234u);

	const SegmentCrc two{.as_is = 0x1234, .tail_zeroed = 0x5678, .tail_metablocks = 9};
	const ChecksumVerdict as_is = checksum_verdict(0x1234, two);
	EXPECT_EQ(as_is.state, SlotState::valid);
	EXPECT_EQ(as_is.ignored_metablocks, 0u);
	EXPECT_EQ(as_is.computed, 0x1234u);
	const ChecksumVerdict zeroed = checksum_verdict(0x5678, two);
	EXPECT_EQ(zeroed.state, SlotState::valid);
	EXPECT_TRUE(zeroed.tail_ignored());
	EXPECT_EQ(zeroed.ignored_metablocks, 9u);
	EXPECT_EQ(zeroed.computed, 0x5678u);
	// Upstream before 2.0.2 never appended in place: only the first reading inverted.
	EXPECT_EQ(checksum_verdict(~0x5678u, two).state, SlotState::checksum_mismatch);
	EXPECT_EQ(checksum_verdict(0x9999, two).state, SlotState::checksum_mismatch);
	EXPECT_EQ(checksum_verdict(0x9999, two).computed, 0x1234u);
	EXPECT_EQ(checksum_verdict(0x9999, two).ignored_metablocks, 0u);
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
