#include "wbkit/log_writer.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

#include "wbkit/errors.hpp"

namespace wbkit {

LogWriter::LogWriter(Device& cache, const LogWriterOptions& options)
	: cache_(cache), options_(options), geometry_(Geometry::for_cache_bytes(cache.size_bytes())),
	  open_segment_(segment_size)
{
	if (geometry_.nr_segments == 0)
		throw Error(fmt::format("{}: cache of {} bytes is smaller than the superblock and one segment",
					cache.path(), cache.size_bytes()));
	open_header_.id = open_id_;
	if (!options_.format)
		return;
	// docs/FORMAT.md's order: superblock region, every slot header, flush, then the magic.
	// With the trust record as dm-wbkit formats (every entry it writes may
	// serve reads after a replay), in the same write as the zeroing.
	AlignedBuffer region(superblock_size);
	std::ranges::fill(region.span(), std::byte{0});
	if (options_.trust_record)
		write_clean_trust(region.span().subspan(WB_TRUST_SECTOR * sector_size, sector_size), 1,
				  geometry_.nr_segments);
	cache_.write_exact(0, region.span());
	for (std::uint64_t slot = 0; slot < geometry_.nr_segments; ++slot)
		cache_.write_exact(geometry_.slot_offset(slot), region.span().first(block_size));
	cache_.flush_or_throw();
	AlignedBuffer sector(sector_size);
	write_superblock_magic(sector.span());
	cache_.write_exact(0, sector.span());
}

void LogWriter::write(std::uint64_t backing_sector, std::span<const std::byte> data)
{
	if (data.size() % sector_size != 0)
		throw UsageError(fmt::format("write of {} bytes is not a whole number of sectors", data.size()));
	std::uint64_t sector = backing_sector;
	while (!data.empty()) {
		std::uint64_t block = sector - sector % block_sectors;
		unsigned first = unsigned(sector - block);
		std::size_t count = std::min<std::size_t>(block_sectors - first, data.size() / sector_size);
		write_block(block, first, data.first(count * sector_size), false);
		data = data.subspan(count * sector_size);
		sector += count;
	}
}

void LogWriter::write_clean(std::uint64_t block_sector, std::span<const std::byte> block)
{
	if (block.size() != block_size || block_sector % block_sectors != 0)
		throw UsageError("a clean entry is one aligned 4 KiB block");
	write_block(block_sector, 0, block, true);
}

void LogWriter::write_block(std::uint64_t block_sector, unsigned first, std::span<const std::byte> sectors,
			    bool clean)
{
	const unsigned count = unsigned(sectors.size() / sector_size);
	const std::uint8_t mask = std::uint8_t(((1u << count) - 1) << first);
	BlockOwners& owners = owners_[block_sector];

	auto found = open_index_.find(block_sector);
	if (found == open_index_.end() && open_header_.length == blocks_per_segment)
		seal_segment();
	found = open_index_.find(block_sector);

	unsigned index;
	std::uint8_t dirty_bits;
	if (found != open_index_.end()) {
		// A hit in the RAM segment is overwritten in place.
		index = found->second;
		Metablock& mb = open_header_.metablocks[index];
		dirty_bits = (clean && mb.dirty_bits == 0) ? 0 : std::uint8_t(mb.dirty_bits | (clean ? 0xff : mask));
	} else {
		index = open_header_.length++;
		open_index_[block_sector] = index;
		dirty_bits = clean ? 0 : mask;
		if (!clean && mask != 0xff && options_.merge_partial_overwrites) {
			// The target reads the older dirty sectors into the new block.
			std::byte* dest = open_segment_.data() + block_size * (index + 1);
			for (unsigned s = 0; s < block_sectors; ++s) {
				const SectorOwner& o = owners[s];
				if ((mask >> s) & 1u || !o.dirty)
					continue;
				cache_.read_exact(geometry_.data_block_offset(written_slot_of(o.segment_id), o.index) +
							  s * sector_size,
						  {dest + s * sector_size, sector_size});
				dirty_bits |= std::uint8_t(1u << s);
			}
		}
	}
	std::memcpy(open_segment_.data() + block_size * (index + 1) + first * sector_size, sectors.data(), sectors.size());
	open_header_.metablocks[index] = Metablock{.sector = block_sector, .dirty_bits = dirty_bits};

	const std::uint8_t owned = clean ? 0xff : dirty_bits;
	for (unsigned s = 0; s < block_sectors; ++s)
		if ((owned >> s) & 1u)
			owners[s] = SectorOwner{open_id_, std::uint8_t(index), !clean || ((dirty_bits >> s) & 1u)};
}

std::uint64_t LogWriter::written_slot_of(std::uint64_t id) const { return geometry_.slot_of_id(id); }

void LogWriter::flush()
{
	if (open_header_.length > 0)
		seal_segment();
}

void LogWriter::seal_segment()
{
	const std::uint64_t nr = geometry_.nr_segments;
	if (const std::uint64_t previous = wb_previous_lap_id(open_id_, nr))
		write_back_through(previous); // the slot's previous segment must be on the backing device

	auto block0 = open_segment_.span().first(block_size);
	open_header_.checksum = 0;
	write_segment_header(block0, open_header_);
	open_header_.checksum = segment_checksum(open_segment_.span(), open_header_.length);
	write_segment_header(block0, open_header_);
	cache_.write_exact(geometry_.slot_offset(geometry_.slot_of_id(open_id_)),
			   open_segment_.span().first(open_header_.written_bytes()));

	sealed_[open_id_] = std::vector<Metablock>(open_header_.metablocks.begin(),
						   open_header_.metablocks.begin() + open_header_.length);
	sealed_length_[open_id_] = open_header_.length;
	if (sealed_length_.size() > nr)
		sealed_length_.erase(sealed_length_.begin());
	++open_id_;
	open_header_ = SegmentHeader{};
	open_header_.id = open_id_;
	open_index_.clear();
}

void LogWriter::write_back_through(std::uint64_t id)
{
	bool wrote = false;
	while (!sealed_.empty() && sealed_.begin()->first <= id) {
		write_back_segment(sealed_.begin()->first);
		sealed_.erase(sealed_.begin());
		wrote = true;
	}
	// docs/FORMAT.md, "Durability across the two devices": the data is on
	// the backing device's media before its segments count as written
	// back (the record may name them, their slots be reused).
	if (wrote && options_.backing)
		options_.backing->flush_or_throw();
	last_writeback_id_ = std::max(last_writeback_id_, std::min(id, open_id_ - 1));
}

void LogWriter::write_back_segment(std::uint64_t id)
{
	const std::vector<Metablock>& mbs = sealed_.at(id);
	AlignedBuffer block(block_size);
	for (unsigned i = 0; i < mbs.size(); ++i) {
		BlockOwners& owners = owners_[mbs[i].sector];
		bool loaded = false;
		for (unsigned s = 0; s < block_sectors; ++s) {
			SectorOwner& o = owners[s];
			if (o.segment_id != id || o.index != i || !o.dirty)
				continue;
			if (!options_.backing)
				throw Error(fmt::format("segment {} still holds dirty data and its slot is reused: "
							"the log writer needs a backing device",
							id));
			if (!loaded) {
				cache_.read_exact(geometry_.data_block_offset(written_slot_of(id), i), block.span());
				loaded = true;
			}
			options_.backing->write_exact((mbs[i].sector + s) * sector_size,
						      block.span().subspan(s * sector_size, sector_size));
			o.dirty = false;
		}
	}
}

void LogWriter::corrupt_segment_data(std::uint64_t id)
{
	auto length = sealed_length_.find(id);
	if (length == sealed_length_.end())
		throw UsageError(fmt::format("segment {} is not on the cache device", id));
	// Data block 0; without blocks, the stored checksum: a byte of the
	// metablock area past the length could be an append that did not
	// complete, which the checksum's second reading takes as zero.
	std::uint64_t offset = geometry_.slot_offset(geometry_.slot_of_id(id)) +
			       (length->second > 0 ? block_size : WB_SEG_CHECKSUM_OFFSET);
	std::byte b[1];
	cache_.read_exact(offset, b);
	b[0] ^= std::byte{0x01};
	cache_.write_exact(offset, b);
}

void LogWriter::tear_segment(std::uint64_t id)
{
	auto length = sealed_length_.find(id);
	if (length == sealed_length_.end() || length->second == 0)
		throw UsageError(fmt::format("segment {} is not on the cache device with data to tear", id));
	const std::uint64_t blocks = length->second + 1ULL;
	const std::uint64_t kept = std::max<std::uint64_t>(1, blocks / 2);
	std::vector<std::byte> stale((blocks - kept) * block_size, std::byte{0x5a});
	cache_.write_exact(geometry_.slot_offset(geometry_.slot_of_id(id)) + kept * block_size, stale);
}

void LogWriter::cut_append(std::uint64_t id, unsigned committed)
{
	auto length = sealed_length_.find(id);
	if (length == sealed_length_.end() || committed >= length->second)
		throw UsageError(fmt::format("segment {} is not on the cache device with more than {} blocks", id, committed));
	const std::uint64_t offset = geometry_.slot_offset(geometry_.slot_of_id(id));
	AlignedBuffer prefix(block_size * (committed + 1ULL));
	cache_.read_exact(offset, prefix.span());
	// The header as the commit at `committed` wrote it: its metablock area
	// then ended there, zero after.
	SegmentHeader header = parse_segment_header(prefix.span().first(block_size));
	header.length = std::uint8_t(committed);
	write_segment_header(prefix.span().first(block_size), header);
	header.checksum = segment_checksum(prefix.span(), committed);
	write_segment_header(prefix.span().first(block_size), header);
	// Only its first sector: the second write of the append never landed.
	cache_.write_exact(offset, prefix.span().first(WB_SEGMENT_HEADER_SIZE));
	length->second = std::uint8_t(committed);
}

void LogWriter::set_superblock_record(std::uint64_t last_writeback_id)
{
	AlignedBuffer sector(sector_size);
	write_superblock_record(sector.span(), last_writeback_id);
	cache_.write_exact(WB_SB_RECORD_OFFSET, sector.span());
}

} // namespace wbkit
