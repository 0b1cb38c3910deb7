#include "wbkit/tolerant_io.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <new>
#include <type_traits>

#include "wbkit/errors.hpp"
#include "wbkit/format.hpp"

namespace wbkit {

void SectorRanges::add(std::uint64_t first, std::uint64_t count)
{
	if (count == 0)
		return;
	std::uint64_t begin = first;
	std::uint64_t end = first + count;
	auto it = ranges_.upper_bound(begin);
	if (it != ranges_.begin() && std::prev(it)->second >= begin)
		--it;
	while (it != ranges_.end() && it->first <= end) {
		begin = std::min(begin, it->first);
		end = std::max(end, it->second);
		it = ranges_.erase(it);
	}
	ranges_.emplace(begin, end);
}

bool SectorRanges::contains(std::uint64_t sector) const { return intersects(sector, 1); }

bool SectorRanges::intersects(std::uint64_t first, std::uint64_t count) const
{
	if (count == 0)
		return false;
	auto it = ranges_.upper_bound(first);
	if (it != ranges_.begin() && std::prev(it)->second > first)
		return true;
	return it != ranges_.end() && it->first < first + count;
}

std::uint64_t SectorRanges::total_sectors() const
{
	std::uint64_t total = 0;
	for (const auto& [begin, end] : ranges_)
		total += end - begin;
	return total;
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> SectorRanges::list() const
{
	std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
	out.reserve(ranges_.size());
	for (const auto& [begin, end] : ranges_)
		out.emplace_back(begin, end - begin);
	return out;
}

namespace {

template <typename Op>
int with_retries(unsigned retries, Op op)
{
	int err = op();
	for (unsigned attempt = 0; err && attempt < retries; ++attempt)
		err = op();
	return err;
}

// Retry the whole range, then 4 KiB pieces, then the sectors of the pieces
// that still fail: one bad sector costs one sector, not the whole request.
template <typename Span, typename Op>
bool narrow_down(std::uint64_t offset, Span buf, unsigned retries, Op op, const BadRangeSink& on_bad,
		 bool zero_fill)
{
	if (!with_retries(retries, [&] { return op(offset, buf); }))
		return true;
	bool complete = true;
	auto sectors = [&](std::uint64_t piece_offset, Span piece) {
		for (std::uint64_t pos = 0; pos < piece.size(); pos += sector_size) {
			const std::uint64_t len = std::min<std::uint64_t>(sector_size, piece.size() - pos);
			Span sector = piece.subspan(pos, len);
			if (with_retries(retries, [&] { return op(piece_offset + pos, sector); })) {
				complete = false;
				if constexpr (!std::is_const_v<typename Span::element_type>)
					if (zero_fill)
						std::memset(sector.data(), 0, sector.size());
				on_bad(piece_offset + pos, len);
			}
		}
	};
	if (buf.size() <= block_size) {
		sectors(offset, buf);
		return complete;
	}
	// 4 KiB pieces on 4 KiB boundaries of the device.
	std::uint64_t pos = 0;
	while (pos < buf.size()) {
		const std::uint64_t here = offset + pos;
		const std::uint64_t len = std::min<std::uint64_t>(block_size - here % block_size, buf.size() - pos);
		Span piece = buf.subspan(pos, len);
		if (with_retries(retries, [&] { return op(here, piece); }))
			sectors(here, piece);
		pos += len;
	}
	return complete;
}

} // namespace

bool read_tolerant(Device& device, std::uint64_t offset, std::span<std::byte> buf, unsigned retries,
		   const BadRangeSink& on_bad)
{
	return narrow_down(
		offset, buf, retries,
		[&](std::uint64_t at, std::span<std::byte> part) { return device.read_at(at, part); }, on_bad, true);
}

bool write_tolerant(Device& device, std::uint64_t offset, std::span<const std::byte> buf, unsigned retries,
		    const BadRangeSink& on_bad)
{
	return narrow_down(
		offset, buf, retries,
		[&](std::uint64_t at, std::span<const std::byte> part) {
			const int err = device.write_at(at, part);
			// A full file system or a file size limit is not a bad sector: retrying
			// sector by sector would only report the rest of the device as lost.
			if (is_out_of_space(err))
				throw IoError(fmt::format("writing {} bytes at offset {} failed", part.size(), at),
					      device.path(), err);
			return err;
		},
		on_bad, false);
}

int TolerantReader::read_at(std::uint64_t offset, std::span<std::byte> buf) noexcept
{
	if (offset > inner_.size_bytes() || buf.size() > inner_.size_bytes() - offset)
		return EIO;
	try {
		bool complete = read_tolerant(inner_, offset, buf, retries_, [&](std::uint64_t at, std::uint64_t length) {
			unreadable_.add(at / sector_size, (at % sector_size + length + sector_size - 1) / sector_size);
		});
		return complete ? 0 : EIO;
	} catch (const std::bad_alloc&) {
		return ENOMEM;
	}
}

int TolerantReader::write_at(std::uint64_t, std::span<const std::byte>) noexcept { return EROFS; }

} // namespace wbkit
