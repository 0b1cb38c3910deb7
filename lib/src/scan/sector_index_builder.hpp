// The scan's gathered metablocks and the index built from them in place
// (SectorIndex): internal to the library, shared by the scanner
// (log_scan.cpp) and the index (sector_index.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "wbkit/log_scan.hpp"

namespace wbkit {

namespace detail {

// Regions below this size come from malloc: a small log's scan would
// otherwise spend more time in mmap and munmap than in reading its slots.
// Larger ones are mappings of their own (see map_bytes).
constexpr std::size_t smallest_mapping_bytes = std::size_t(1) << 20;

// Large regions are anonymous mappings: freeing one returns its pages to the
// system at once (malloc would keep them in its heap), so merging the batches
// of gathered entries into the index costs one batch of memory, not a second
// copy of every entry, and the index's unused tail can be given back. The
// size alone says which kind a region is, so every caller frees with the
// size it allocated.
std::byte* map_bytes(std::size_t bytes);
// Frees with the size map_bytes was given.
void unmap_bytes(std::byte* data, std::size_t bytes) noexcept;

// Always an anonymous mapping, whatever the size: see MappedAllocator.
std::byte* map_pages(std::size_t bytes);
void unmap_pages(std::byte* data, std::size_t bytes) noexcept;

// Metablock entries gathered per batch of slots. Always mappings: every batch
// of a scan is held until the last one is read, then copied into one region
// and freed. Batches from malloc (113 KiB each when verifying) stayed in its
// heap once freed, so the scan's memory held every entry twice, 28 bytes a
// metablock; unmapped, each batch's pages go back as it is copied.
template <typename T>
struct MappedAllocator {
	using value_type = T;
	MappedAllocator() = default;
	template <typename U>
	MappedAllocator(const MappedAllocator<U>&) noexcept
	{
	}
	T* allocate(std::size_t n) { return reinterpret_cast<T*>(map_pages(n * sizeof(T))); }
	void deallocate(T* p, std::size_t n) noexcept { unmap_pages(reinterpret_cast<std::byte*>(p), n * sizeof(T)); }
	template <typename U>
	bool operator==(const MappedAllocator<U>&) const noexcept
	{
		return true;
	}
};

// One metablock as the scan gathers it, 14 bytes: on a huge log these are
// most of the scan's peak memory, until the index replaces them in place.
struct __attribute__((packed)) MetablockEntry {
	std::uint64_t block_sector;
	std::uint32_t log_index; // the slot while reading, then the position in LogScan::log
	std::uint8_t metablock;
	std::uint8_t dirty_bits;
};
static_assert(sizeof(MetablockEntry) == 14);

constexpr std::size_t page_bytes = 4096;

// A region of map_bytes: the index is built inside it and, when it is a
// mapping, its unused tail is given back to the system at once.
class Mapping {
public:
	explicit Mapping(std::size_t bytes) : bytes_((bytes + page_bytes - 1) / page_bytes * page_bytes)
	{
		data_ = map_bytes(bytes_);
	}
	Mapping(const Mapping&) = delete;
	Mapping& operator=(const Mapping&) = delete;
	~Mapping() { unmap_bytes(data_, bytes_); }
	std::byte* data() const noexcept { return data_; }
	std::size_t bytes() const noexcept { return bytes_; }
	std::byte* release() noexcept { return std::exchange(data_, nullptr); }

private:
	std::size_t bytes_ = 0;
	std::byte* data_ = nullptr;
};

} // namespace detail

// Builds LogScan::index inside the mapping that holds the gathered entries.
class SectorIndexBuilder {
public:
	// entries holds count MetablockEntry records whose log_index is a position in scan.log.
	static void build(LogScan& scan, std::unique_ptr<detail::Mapping> entries, std::size_t count);

private:
	// Stores source at position i of a mapping holding SectorIndex entries.
	static void store(std::byte* data, std::size_t i, const SectorSource& source);
	static void note_high(std::vector<SectorIndex::HighRun>& highs, std::size_t i, std::uint64_t block_sector);
	static void resolve_unaligned_overlaps(LogScan& scan);
	static void trim(SectorIndex& index) noexcept;
};

} // namespace wbkit
