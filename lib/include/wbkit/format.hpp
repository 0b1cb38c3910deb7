// Host-order views of the on-disk structures in format/wbkit_format.h, and
// their parsers. The parsers never fail: what they cannot make sense of is
// recorded in flags that validation turns into findings.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "wbkit/crc32c.hpp"
#include "wbkit_format.h"

namespace wbkit {

inline constexpr std::uint64_t sector_size = WB_SECTOR_SIZE;
inline constexpr std::uint64_t block_size = WB_BLOCK_SIZE;
inline constexpr std::uint64_t block_sectors = WB_BLOCK_SECTORS;
inline constexpr std::uint64_t segment_size = WB_SEGMENT_SIZE;
inline constexpr std::uint64_t segment_sectors = WB_SEGMENT_SECTORS;
inline constexpr std::uint64_t superblock_size = WB_SUPERBLOCK_SECTORS * WB_SECTOR_SIZE;
inline constexpr unsigned blocks_per_segment = WB_BLOCKS_PER_SEGMENT;
inline constexpr std::uint32_t superblock_magic = WB_MAGIC;

struct Geometry {
	std::uint64_t cache_bytes = 0;
	std::uint64_t nr_segments = 0;

	static Geometry for_cache_bytes(std::uint64_t cache_bytes);

	// Byte offsets on the cache device.
	std::uint64_t slot_offset(std::uint64_t slot) const { return wb_slot_start_sector(slot) * sector_size; }
	std::uint64_t data_block_offset(std::uint64_t slot, unsigned index) const
	{
		return wb_data_block_sector(slot, index) * sector_size;
	}
	// The slot a segment id must live in; id must be non-zero.
	std::uint64_t slot_of_id(std::uint64_t id) const { return wb_slot_of_id(id, nr_segments); }

	// A slot or segment id a user asked for, checked: UsageError when the
	// cache has no slots, the slot is past the last, or the id is 0.
	std::uint64_t checked_slot(std::uint64_t slot) const;
	std::uint64_t checked_slot_of_id(std::uint64_t id) const;
};

struct Metablock {
	std::uint64_t sector = 0; // backing sector of the 4 KiB block
	std::uint8_t dirty_bits = 0;
	bool padding_nonzero = false;

	bool is_dirty() const { return dirty_bits != 0; }
	// The sectors this entry decides: its dirty ones, or all 8 for a clean entry.
	std::uint8_t touched_sectors() const { return wb_entry_sectors(dirty_bits); }
};

struct SegmentHeader {
	std::uint64_t id = 0;
	std::uint32_t checksum = 0;
	std::uint8_t length = 0;
	bool header_padding_nonzero = false;    // bytes 13..511
	bool unused_metablocks_nonzero = false; // metablock area past length
	std::array<Metablock, blocks_per_segment> metablocks{};

	bool length_valid() const { return length <= blocks_per_segment; }
	// Metablocks that can be read: min(length, 127).
	unsigned usable_length() const { return length <= blocks_per_segment ? length : blocks_per_segment; }
	// Bytes the target writes when it flushes the segment, header included.
	std::uint64_t written_bytes() const { return block_size * (usable_length() + 1ULL); }
};

// The 4 KiB header block of a segment.
SegmentHeader parse_segment_header(std::span<const std::byte> header_block);

struct SuperblockHeader {
	std::uint32_t magic = 0;
	bool magic_ok = false;
	bool rest_nonzero = false; // sector 0 past the magic is not zero
};

SuperblockHeader parse_superblock_header(std::span<const std::byte> sector0);
std::uint64_t parse_superblock_record(std::span<const std::byte> record_sector);
// The clean-copy trust record (sector 8, struct wb_clean_trust_device):
// trusted_from_id (WB_TRUST_NONE: none), or nothing without its magic.
std::optional<std::uint64_t> parse_clean_trust(std::span<const std::byte> trust_sector);
// The ring size the trust record was written for; 0 without its magic or
// in records that predate the field (wb_replay_check_ring).
std::uint64_t parse_clean_trust_segments(std::span<const std::byte> trust_sector);

// CRC-32C over [512, 4096 * (length + 1)) of a segment whose first
// `(length + 1) * 4 KiB` are in `segment` (length must be <= 127): the value
// a writer stores.
std::uint32_t segment_checksum(std::span<const std::byte> segment, unsigned length);

// The two readings of a segment's checksum (docs/FORMAT.md, "Checksum"): the
// CRC of the bytes as they are, and the CRC with the metablocks from index
// length on read as zero, which is what a header still holds when an append
// in place was cut between its two writes. The second is computed only when
// that tail is not zero; otherwise the two are the same.
struct SegmentCrc {
	std::uint32_t as_is = 0;
	std::optional<std::uint32_t> tail_zeroed{};
	// The metablocks from index length on, up to the last non-zero byte of
	// the header block: 0 when the tail is zero.
	unsigned tail_metablocks = 0;
};

// Both readings at once, as the bytes come: begin() with the header block,
// then the `length` data blocks in pieces of any size, each piece read once
// and fed to both CRCs.
class SegmentCrcStream {
public:
	explicit SegmentCrcStream(Crc32cEngine engine = Crc32cEngine::fast);

	// Starts a segment, whatever an earlier one left: its 4 KiB header block
	// and its length (<= 127).
	void begin(std::span<const std::byte> header_block, unsigned length);
	void update(std::span<const std::byte> data);
	SegmentCrc finish();

private:
	Crc32c as_is_;
	Crc32c tail_zeroed_;
	unsigned tail_metablocks_ = 0;
};

// Both readings of a segment whose first `(length + 1) * 4 KiB` are in
// `segment` (length must be <= 127).
SegmentCrc segment_crc(std::span<const std::byte> segment, unsigned length);

// Serialisers, for the log writer and the kernel-equivalent tooling.
void write_segment_header(std::span<std::byte> header_block, const SegmentHeader& header);
void write_superblock_magic(std::span<std::byte> sector0);
void write_superblock_record(std::span<std::byte> record_sector, std::uint64_t last_writeback_id);
void write_clean_trust(std::span<std::byte> trust_sector, std::uint64_t trusted_from_id, std::uint64_t nr_segments);

} // namespace wbkit
