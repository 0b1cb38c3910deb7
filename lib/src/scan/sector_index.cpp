// The sector index: the newest-wins rule over the gathered metablocks,
// built in place in their memory and stored packed, 12 bytes an entry.
#include "scan/sector_index_builder.hpp"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <sys/mman.h>
#include <thread>

#include "scan/bucket_sort.hpp"

namespace wbkit {

namespace detail {

std::byte* map_bytes(std::size_t bytes)
{
	if (bytes == 0)
		return nullptr;
	if (bytes < smallest_mapping_bytes) {
		void* p = std::malloc(bytes);
		if (!p)
			throw std::bad_alloc();
		return static_cast<std::byte*>(p);
	}
	void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		throw std::bad_alloc();
	return static_cast<std::byte*>(p);
}

void unmap_bytes(std::byte* data, std::size_t bytes) noexcept
{
	if (!data)
		return;
	if (bytes < smallest_mapping_bytes)
		std::free(data);
	else
		::munmap(data, bytes);
}

std::byte* map_pages(std::size_t bytes)
{
	if (bytes == 0)
		return nullptr;
	void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		throw std::bad_alloc();
	return static_cast<std::byte*>(p);
}

void unmap_pages(std::byte* data, std::size_t bytes) noexcept
{
	if (data)
		::munmap(data, bytes);
}

} // namespace detail

using detail::map_bytes;
using detail::Mapping;
using detail::MetablockEntry;
using detail::page_bytes;
using detail::smallest_mapping_bytes;
using detail::unmap_bytes;

namespace {

// A SectorIndex entry as stored.
struct PackedSource {
	std::uint32_t sector_low; // block_sector & 0xffffffff
	std::uint32_t log_index;
	std::uint8_t metablock_dirty; // bits 0..6: metablock; bit 7: dirty is all of sectors
	std::uint8_t sectors;
	std::uint8_t dirty_bits;
	std::uint8_t unused;
};
static_assert(sizeof(PackedSource) == 12);
constexpr std::uint8_t dirty_flag = 0x80;

// A lambda, not a function: std::sort inlines it (a function pointer costs
// a call per comparison, most of the sort's time on a full log).
constexpr auto by_block_then_replay_order = [](const MetablockEntry& a, const MetablockEntry& b) {
	if (a.block_sector != b.block_sector)
		return a.block_sector < b.block_sector;
	return wb_entry_is_newer(b.log_index, b.metablock, a.log_index, a.metablock);
};

} // namespace

void SectorIndexBuilder::store(std::byte* data, std::size_t i, const SectorSource& source)
{
	// A segment holds at most 127 metablocks: bit 7 is free. dirty is
	// either 0 or the whole of sectors, as build() and the overlap pass make it.
	const PackedSource p{.sector_low = std::uint32_t(source.block_sector),
			     .log_index = source.log_index,
			     .metablock_dirty = std::uint8_t((source.metablock & 0x7f) | (source.dirty ? dirty_flag : 0)),
			     .sectors = source.sectors,
			     .dirty_bits = source.dirty_bits,
			     .unused = 0};
	std::memcpy(data + i * sizeof(PackedSource), &p, sizeof p);
}

void SectorIndexBuilder::note_high(std::vector<SectorIndex::HighRun>& highs, std::size_t i, std::uint64_t block_sector)
{
	const std::uint32_t high = std::uint32_t(block_sector >> 32);
	if (highs.empty() || highs.back().high != high)
		highs.push_back(SectorIndex::HighRun{.high = high, .first = i});
}

void SectorIndexBuilder::build(LogScan& scan, std::unique_ptr<Mapping> entries, std::size_t count)
{
	static_assert(sizeof(PackedSource) <= sizeof(MetablockEntry));
	std::byte* data = entries->data();
	auto* in = reinterpret_cast<MetablockEntry*>(data);
	// Most of the scan's own work on a full log: in place, on every core.
	// The core count only where threads may be used: asking reads sysfs.
	const unsigned threads =
		count < detail::bucket_sort_min_elements ? 1u : std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
	detail::bucket_sort(
		in, count, [](const MetablockEntry& e) { return std::uint64_t(e.block_sector); },
		by_block_then_replay_order, threads);

	// Per block, newest entry first: each sector is decided by the newest
	// entry that touches it. A block's outputs are stored after all its
	// inputs were read, and outputs (12 bytes) never outrun inputs (14),
	// so the index is built in the same memory.
	SectorIndex index;
	scan.dirty_blocks = 0;
	scan.dirty_sectors = 0;
	std::size_t out = 0;
	std::vector<SectorSource> group_out;
	for (std::size_t begin = 0; begin < count;) {
		MetablockEntry first;
		std::memcpy(&first, data + begin * sizeof(MetablockEntry), sizeof first);
		const std::uint64_t block = first.block_sector;
		std::size_t end = begin + 1;
		for (;; ++end) {
			if (end == count)
				break;
			MetablockEntry e;
			std::memcpy(&e, data + end * sizeof(MetablockEntry), sizeof e);
			if (e.block_sector != block)
				break;
		}
		group_out.clear();
		std::uint8_t remaining = 0xff;
		std::uint8_t block_dirty = 0;
		for (std::size_t i = end; i-- > begin && remaining;) {
			MetablockEntry e;
			std::memcpy(&e, data + i * sizeof(MetablockEntry), sizeof e);
			const std::uint8_t touched = std::uint8_t(wb_entry_sectors(e.dirty_bits) & remaining);
			if (!touched)
				continue;
			remaining = std::uint8_t(remaining & ~touched);
			const std::uint8_t dirty = (e.dirty_bits && !scan.log[e.log_index].written_back) ? touched : 0;
			block_dirty |= dirty;
			group_out.push_back(SectorSource{.block_sector = block,
							 .log_index = e.log_index,
							 .metablock = e.metablock,
							 .sectors = touched,
							 .dirty = dirty,
							 .dirty_bits = e.dirty_bits});
		}
		for (auto it = group_out.rbegin(); it != group_out.rend(); ++it) {
			note_high(index.highs_, out, block);
			store(data, out++, *it);
		}
		if (block_dirty) {
			++scan.dirty_blocks;
			scan.dirty_sectors += std::popcount(block_dirty);
		}
		begin = end;
	}
	index.mapped_bytes_ = entries->bytes();
	index.data_ = entries->release();
	index.size_ = out;
	scan.index = std::move(index);
	resolve_unaligned_overlaps(scan);
	trim(scan.index);
}

// Metablocks whose sector is not a multiple of 8 (crafted or damaged logs)
// can overlap a block at another sector: 9..16 and 8..15 share 9..15. The
// per-block pass above decided each block on its own; here every sector goes
// to the newest entry that touches it across blocks too, as the target's
// reads present it (see docs/recovery.md: its writeback does not always agree).
void SectorIndexBuilder::resolve_unaligned_overlaps(LogScan& scan)
{
	SectorIndex& index = scan.index;
	const std::size_t n = index.size();
	bool any_unaligned = false;
	for (std::size_t i = 0; i < n && !any_unaligned; ++i)
		any_unaligned = index.block_sector(i) % block_sectors != 0;
	if (!any_unaligned)
		return;
	auto newer = [](const SectorSource& a, const SectorSource& b) {
		return wb_entry_is_newer(a.log_index, a.metablock, b.log_index, b.metablock);
	};
	std::vector<std::uint8_t> lose(n, 0);
	for (std::size_t i = 0; i < n; ++i) {
		const SectorSource e = index[i];
		// Entries of other blocks that start within 7 sectors after e; earlier starts looked at e already.
		for (std::size_t j = i + 1; j < n && index.block_sector(j) - e.block_sector < block_sectors; ++j) {
			const SectorSource f = index[j];
			if (f.block_sector == e.block_sector)
				continue;
			const unsigned shift = unsigned(f.block_sector - e.block_sector);
			const std::uint8_t shared = std::uint8_t(e.sectors & (f.sectors << shift)); // in e's bit positions
			if (!shared)
				continue;
			if (newer(f, e))
				lose[i] |= shared;
			else
				lose[j] |= std::uint8_t(shared >> shift);
		}
	}
	// Compact in place; positions are read through the old runs of high bits.
	std::vector<SectorIndex::HighRun> highs;
	std::size_t out = 0;
	for (std::size_t i = 0; i < n; ++i) {
		SectorSource e = index[i];
		e.sectors = std::uint8_t(e.sectors & ~lose[i]);
		e.dirty = std::uint8_t(e.dirty & ~lose[i]);
		if (!e.sectors)
			continue;
		note_high(highs, out, e.block_sector);
		store(index.data_, out++, e);
	}
	index.highs_ = std::move(highs);
	index.size_ = out;
	scan.dirty_blocks = 0;
	scan.dirty_sectors = 0;
	for (std::size_t begin = 0; begin < out;) {
		std::uint8_t block_dirty = 0;
		std::size_t end = begin;
		const std::uint64_t block = index.block_sector(begin);
		for (; end < out && index.block_sector(end) == block; ++end)
			block_dirty |= index[end].dirty;
		scan.dirty_blocks += block_dirty != 0;
		scan.dirty_sectors += std::popcount(block_dirty);
		begin = end;
	}
}

void SectorIndexBuilder::trim(SectorIndex& index) noexcept
{
	const std::size_t keep = (index.size_ * sizeof(PackedSource) + page_bytes - 1) / page_bytes * page_bytes;
	if (keep >= index.mapped_bytes_ || index.mapped_bytes_ < smallest_mapping_bytes)
		return; // nothing to give back, or a small region from malloc
	if (keep < smallest_mapping_bytes) {
		// What is left is a small region: it moves to malloc, as its size now says.
		std::byte* small = nullptr;
		try {
			small = map_bytes(keep);
		} catch (const std::bad_alloc&) {
			return; // the region stays as it is
		}
		if (small)
			std::memcpy(small, index.data_, index.size_ * sizeof(PackedSource));
		unmap_bytes(index.data_, index.mapped_bytes_);
		index.data_ = small;
	} else {
		::munmap(index.data_ + keep, index.mapped_bytes_ - keep);
	}
	index.mapped_bytes_ = keep;
	index.highs_.shrink_to_fit();
}

void build_sector_index(LogScan& scan, std::vector<SectorSource> entries)
{
	auto gathered = std::make_unique<Mapping>(entries.size() * sizeof(MetablockEntry));
	auto* out = reinterpret_cast<MetablockEntry*>(gathered->data());
	for (std::size_t i = 0; i < entries.size(); ++i)
		out[i] = MetablockEntry{.block_sector = entries[i].block_sector,
					.log_index = entries[i].log_index,
					.metablock = entries[i].metablock,
					.dirty_bits = entries[i].dirty_bits};
	const std::size_t count = entries.size();
	std::vector<SectorSource>().swap(entries);
	SectorIndexBuilder::build(scan, std::move(gathered), count);
}

SectorIndex::SectorIndex(const SectorIndex& other)
	: mapped_bytes_(other.mapped_bytes_), size_(other.size_), highs_(other.highs_)
{
	data_ = map_bytes(mapped_bytes_);
	if (size_)
		std::memcpy(data_, other.data_, size_ * sizeof(PackedSource));
}

SectorIndex& SectorIndex::operator=(const SectorIndex& other)
{
	if (this != &other)
		*this = SectorIndex(other);
	return *this;
}

SectorIndex::SectorIndex(SectorIndex&& other) noexcept
	: data_(std::exchange(other.data_, nullptr)), mapped_bytes_(std::exchange(other.mapped_bytes_, 0)),
	  size_(std::exchange(other.size_, 0)), highs_(std::move(other.highs_))
{
}

SectorIndex& SectorIndex::operator=(SectorIndex&& other) noexcept
{
	if (this != &other) {
		release();
		data_ = std::exchange(other.data_, nullptr);
		mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
		size_ = std::exchange(other.size_, 0);
		highs_ = std::move(other.highs_);
	}
	return *this;
}

SectorIndex::~SectorIndex() { release(); }

void SectorIndex::release() noexcept
{
	unmap_bytes(data_, mapped_bytes_);
	data_ = nullptr;
	mapped_bytes_ = 0;
	size_ = 0;
	highs_.clear();
}

std::uint64_t SectorIndex::block_sector(std::size_t i) const
{
	PackedSource p;
	std::memcpy(&p, data_ + i * sizeof(PackedSource), sizeof p);
	std::uint32_t high = highs_.front().high;
	if (highs_.size() > 1)
		high = std::prev(std::upper_bound(highs_.begin(), highs_.end(), i,
						  [](std::size_t at, const HighRun& run) { return at < run.first; }))
			       ->high;
	return std::uint64_t(high) << 32 | p.sector_low;
}

SectorSource SectorIndex::operator[](std::size_t i) const
{
	PackedSource p;
	std::memcpy(&p, data_ + i * sizeof(PackedSource), sizeof p);
	return SectorSource{.block_sector = block_sector(i),
			    .log_index = p.log_index,
			    .metablock = std::uint8_t(p.metablock_dirty & 0x7f),
			    .sectors = p.sectors,
			    .dirty = (p.metablock_dirty & dirty_flag) ? p.sectors : std::uint8_t(0),
			    .dirty_bits = p.dirty_bits};
}

std::size_t SectorIndex::lower_bound(std::uint64_t sector) const
{
	std::size_t low = 0, high = size_;
	while (low < high) {
		const std::size_t mid = low + (high - low) / 2;
		if (block_sector(mid) < sector)
			low = mid + 1;
		else
			high = mid;
	}
	return low;
}

std::size_t SectorIndex::memory_bytes() const noexcept
{
	return mapped_bytes_ + highs_.capacity() * sizeof(HighRun);
}

} // namespace wbkit
