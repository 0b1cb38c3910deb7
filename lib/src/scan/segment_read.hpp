// Reading a segment's data blocks and checksumming them as they come: in
// pieces that stay in the CPU's cache, so the data crosses memory once (the
// copy out of the page cache or the device) instead of a second time when a
// whole 512 KiB segment is checksummed after it was read. Internal to the
// library: the scanner and the log verifier share it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "wbkit/device.hpp"
#include "wbkit/findings.hpp"
#include "wbkit/format.hpp"

namespace wbkit::detail {

// A piece: well inside a core's L2 cache, large enough that a read per piece
// costs little next to copying it.
constexpr std::size_t segment_piece_bytes = 128 * 1024;

struct SegmentChecksum {
	int error = 0; // errno of the read that failed; 0: computed is set
	SegmentCrc computed{};
};

// Both readings of the segment checksum (segment_crc) of the segment at
// slot_offset whose header block, already read, is header_block, reading its
// `length` data blocks into piece (segment_piece_bytes, aligned for the
// device) one piece at a time.
SegmentChecksum read_segment_checksum(Device& cache, std::uint64_t slot_offset, std::span<const std::byte> header_block,
				      unsigned length, std::span<std::byte> piece, SegmentCrcStream& crc);

// The finding for a header whose metablock area past length is not zero:
// append-not-committed when the checksum matched only with that tail read as
// zero (ignored_metablocks of them), unused-metablock-nonzero otherwise. The
// scan and the log verifier word it the same.
Finding metablock_tail_finding(std::uint64_t slot, const SegmentHeader& header, unsigned ignored_metablocks);

} // namespace wbkit::detail
