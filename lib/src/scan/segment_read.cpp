#include "scan/segment_read.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace wbkit::detail {

SegmentChecksum read_segment_checksum(Device& cache, std::uint64_t slot_offset, std::span<const std::byte> header_block,
				      unsigned length, std::span<std::byte> piece, SegmentCrcStream& crc)
{
	crc.begin(header_block, length);
	const std::uint64_t data_bytes = std::uint64_t(length) * block_size;
	for (std::uint64_t done = 0; done < data_bytes;) {
		const auto part = piece.first(std::min<std::uint64_t>(piece.size(), data_bytes - done));
		if (int err = cache.read_at(slot_offset + block_size + done, part))
			return {.error = err};
		crc.update(part);
		done += part.size();
	}
	return {.computed = crc.finish()};
}

Finding metablock_tail_finding(std::uint64_t slot, const SegmentHeader& header, unsigned ignored_metablocks)
{
	const Place at{.slot = slot, .segment_id = header.id};
	if (ignored_metablocks == 0)
		return make_finding(FindingCode::unused_metablock_nonzero, at,
				    fmt::format("the header block past metablock {} is not zero", header.usable_length()));
	return make_finding(FindingCode::append_not_committed, at,
			    fmt::format("the newest append to this segment did not complete (a power cut between its two "
					"writes): the segment is valid at its stored length ({}); the {} metablock(s) past "
					"it are ignored",
					header.length, ignored_metablocks));
}

} // namespace wbkit::detail
