#include "scan/segment_read.hpp"

#include <algorithm>

namespace wbkit::detail {

SegmentChecksum read_segment_checksum(Device& cache, std::uint64_t slot_offset, std::span<const std::byte> header_block,
				      unsigned length, std::span<std::byte> piece, Crc32c& crc)
{
	crc.finish(); // a fresh start, whatever an earlier call left
	crc.update(header_block.subspan(WB_METABLOCK_AREA_OFFSET, block_size - WB_METABLOCK_AREA_OFFSET));
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

} // namespace wbkit::detail
