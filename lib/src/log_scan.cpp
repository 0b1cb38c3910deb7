#include "wbkit/log_scan.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <iterator>
#include <memory>
#include <utility>
#include <bit>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <fmt/format.h>
#include <limits>

#include "bucket_sort.hpp"
#include "wbkit/crc32c.hpp"
#include "wbkit/errors.hpp"

namespace wbkit {

std::string_view slot_state_name(SlotState state)
{
	switch (state) {
	case SlotState::empty:
		return "empty";
	case SlotState::valid:
		return "valid";
	case SlotState::unverified:
		return "unverified";
	case SlotState::checksum_mismatch:
		return "checksum-mismatch";
	case SlotState::legacy_checksum:
		return "legacy-checksum";
	case SlotState::length_too_large:
		return "length-too-large";
	case SlotState::header_unreadable:
		return "header-unreadable";
	case SlotState::data_unreadable:
		return "data-unreadable";
	}
	return "unknown";
}

SlotState checksum_state(std::uint32_t stored, std::uint32_t computed)
{
	if (stored == computed)
		return SlotState::valid;
	if (stored == ~computed)
		return SlotState::legacy_checksum;
	return SlotState::checksum_mismatch;
}

std::string_view stop_reason_name(StopReason reason)
{
	switch (reason) {
	case StopReason::end_of_ring:
		return "end-of-ring";
	case StopReason::empty_log:
		return "empty-log";
	case StopReason::checksum_mismatch:
		return "checksum-mismatch";
	case StopReason::unreadable:
		return "unreadable";
	case StopReason::not_verified:
		return "not-verified";
	}
	return "unknown";
}

namespace {

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

// Metablock entries gathered per batch of slots.
template <typename T>
struct MappedAllocator {
	using value_type = T;
	MappedAllocator() = default;
	template <typename U>
	MappedAllocator(const MappedAllocator<U>&) noexcept
	{
	}
	T* allocate(std::size_t n) { return reinterpret_cast<T*>(map_bytes(n * sizeof(T))); }
	void deallocate(T* p, std::size_t n) noexcept { unmap_bytes(reinterpret_cast<std::byte*>(p), n * sizeof(T)); }
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

} // namespace

// Builds LogScan::index inside the mapping that holds the gathered entries.
class SectorIndexBuilder {
public:
	// entries holds count MetablockEntry records whose log_index is a position in scan.log.
	static void build(LogScan& scan, std::unique_ptr<Mapping> entries, std::size_t count);

private:
	// Stores source at position i of a mapping holding SectorIndex entries.
	static void store(std::byte* data, std::size_t i, const SectorSource& source);
	static void note_high(std::vector<SectorIndex::HighRun>& highs, std::size_t i, std::uint64_t block_sector);
	static void resolve_unaligned_overlaps(LogScan& scan);
	static void trim(SectorIndex& index) noexcept;
};

namespace {

class Scanner {
public:
	Scanner(Device& cache, const ScanOptions& options, LogScan& scan)
		: cache_(cache), options_(options), scan_(scan), buffer_(sector_size)
	{
	}

	void run()
	{
		scan_.geometry = Geometry::for_cache_bytes(cache_.size_bytes());
		scan_.verified = options_.verify_checksums;
		read_superblock();
		if (scan_.geometry.nr_segments == 0) {
			add(FindingCode::cache_too_small, {},
			    fmt::format("the cache holds {} bytes; it needs at least {} (superblock and one segment)",
					scan_.geometry.cache_bytes, superblock_size + segment_size));
			return;
		}
		if (scan_.geometry.nr_segments > std::numeric_limits<std::uint32_t>::max())
			throw Error(fmt::format("{}: {} segments is more than this tool can index", cache_.path(),
						scan_.geometry.nr_segments));
		read_slots();
		walk();
		compute_writeback_point();
		build_index();
	}

private:
	void add(FindingCode code, Place place, std::string message)
	{
		scan_.findings.push_back(make_finding(code, std::move(place), std::move(message)));
	}

	void read_superblock()
	{
		auto sector = buffer_.span().first(sector_size);
		if (scan_.geometry.cache_bytes < sector_size) {
			// Nothing to read: cache-too-small says what is wrong, not an I/O error.
			scan_.superblock_readable = false;
			return;
		}
		if (int err = cache_.read_at(0, sector)) {
			scan_.superblock_readable = false;
			add(FindingCode::superblock_unreadable, {.cache_offset = 0},
			    fmt::format("reading sector 0 failed: {}", std::strerror(err)));
		} else {
			scan_.superblock = parse_superblock_header(sector);
			if (!scan_.superblock.magic_ok)
				add(FindingCode::bad_magic, {.cache_offset = 0},
				    fmt::format("magic is 0x{:08x}, expected 0x{:08x}: the target would format this cache",
						scan_.superblock.magic, superblock_magic));
			if (scan_.superblock.rest_nonzero)
				add(FindingCode::superblock_padding_nonzero, {.cache_offset = 0},
				    "sector 0 has non-zero bytes after the magic");
		}
		if (scan_.geometry.cache_bytes < superblock_size)
			return;
		if (int err = cache_.read_at(WB_SB_RECORD_OFFSET, sector)) {
			scan_.superblock_readable = false;
			add(FindingCode::superblock_unreadable, {.cache_offset = WB_SB_RECORD_OFFSET},
			    fmt::format("reading the superblock record (sector 2047) failed: {}", std::strerror(err)));
		} else {
			scan_.sb_record = parse_superblock_record(sector);
		}
	}

	// What one reader thread found in its range of slots; merged in slot order.
	struct RangeResult {
		std::vector<Finding> findings;
		std::vector<MetablockEntry, MappedAllocator<MetablockEntry>> entries;
	};

	static void note(RangeResult& out, FindingCode code, Place place, std::string message)
	{
		out.findings.push_back(make_finding(code, std::move(place), std::move(message)));
	}

	void check_header(RangeResult& out, std::uint64_t slot, const SegmentHeader& h) const
	{
		Place at{.slot = slot, .segment_id = h.id};
		if (!h.length_valid())
			note(out, FindingCode::length_too_large, at,
			     fmt::format("length is {}; a segment holds at most {} blocks", h.length, blocks_per_segment));
		if (scan_.geometry.slot_of_id(h.id) != slot)
			note(out, FindingCode::slot_mismatch, at,
			     fmt::format("segment {} belongs in slot {}", h.id, scan_.geometry.slot_of_id(h.id)));
		if (h.header_padding_nonzero)
			note(out, FindingCode::header_padding_nonzero, at, "bytes 13..511 of the header are not zero");
		if (h.unused_metablocks_nonzero)
			note(out, FindingCode::unused_metablock_nonzero, at,
			     fmt::format("the header block past metablock {} is not zero", h.usable_length()));
		for (unsigned i = 0; i < h.usable_length(); ++i) {
			const Metablock& mb = h.metablocks[i];
			Place mb_at{.slot = slot, .segment_id = h.id, .metablock = i, .backing_sector = mb.sector};
			if (mb.padding_nonzero)
				note(out, FindingCode::metablock_padding_nonzero, mb_at, "metablock padding is not zero");
			if (mb.sector % block_sectors != 0)
				note(out, FindingCode::metablock_sector_unaligned, mb_at,
				     fmt::format("sector {} is not a multiple of 8", mb.sector));
			if (options_.backing_bytes) {
				std::uint64_t backing_sectors = *options_.backing_bytes / sector_size;
				if (mb.sector > backing_sectors || backing_sectors - mb.sector < block_sectors)
					note(out, FindingCode::metablock_sector_beyond_backing, mb_at,
					     fmt::format("block at sector {} ends past the backing device's {} sectors",
							 mb.sector, backing_sectors));
			}
		}
	}

	void read_slot_range(std::uint64_t begin, std::uint64_t end, Device::DataRange data, RangeResult& out) const
	{
		// Not zeroed: a header is parsed, and a segment checksummed, only
		// after the read of those very bytes succeeded.
		AlignedBuffer buffer(options_.verify_checksums ? segment_size : block_size, AlignedBuffer::uninitialised);
		// A header block wholly inside a hole of a sparse image reads as
		// zeros, id 0: an empty slot. Such slots are taken as read.
		// slot_done() in the increment: it runs after every `continue` too.
		for (std::uint64_t slot = begin; slot < end; slot_done(), ++slot) {
			SlotInfo& info = scan_.slots[slot];
			std::uint64_t offset = scan_.geometry.slot_offset(slot);
			if (offset >= data.end)
				data = cache_.next_data(offset);
			if (offset + block_size <= data.begin)
				continue; // SlotInfo{} is the empty slot
			auto header_block = buffer.span().first(block_size);
			if (int err = cache_.read_at(offset, header_block)) {
				info.state = SlotState::header_unreadable;
				note(out, FindingCode::header_unreadable, {.slot = slot, .cache_offset = offset},
				     fmt::format("reading the header failed: {}", std::strerror(err)));
				continue;
			}
			SegmentHeader h = parse_segment_header(header_block);
			info.id = h.id;
			info.length = h.length;
			info.stored_checksum = h.checksum;
			if (h.id == 0) {
				info.state = SlotState::empty;
				continue;
			}
			check_header(out, slot, h);
			if (!h.length_valid()) {
				info.state = SlotState::length_too_large;
				continue;
			}
			if (out.entries.capacity() == 0) // room for the whole batch; untouched pages cost nothing
				out.entries.reserve((end - slot) * blocks_per_segment);
			for (unsigned i = 0; i < h.length; ++i)
				out.entries.push_back(MetablockEntry{.block_sector = h.metablocks[i].sector,
								     .log_index = std::uint32_t(slot),
								     .metablock = std::uint8_t(i),
								     .dirty_bits = h.metablocks[i].dirty_bits});
			if (!options_.verify_checksums) {
				info.state = SlotState::unverified;
				continue;
			}
			auto data_blocks = buffer.span().subspan(block_size, block_size * h.length);
			if (int err = cache_.read_at(offset + block_size, data_blocks)) {
				info.state = SlotState::data_unreadable;
				note(out, FindingCode::data_unreadable,
				     {.slot = slot, .segment_id = h.id, .cache_offset = offset + block_size},
				     fmt::format("reading {} data blocks failed: {}", h.length, std::strerror(err)));
				continue;
			}
			info.computed_checksum = segment_checksum(buffer.span(), h.length);
			info.state = checksum_state(h.checksum, info.computed_checksum);
		}
	}

	// A batch of slots for one reader thread, in slot order.
	struct Batch {
		std::uint64_t begin = 0, end = 0;
		Device::DataRange data{}; // the next data range as of begin
		RangeResult result;
	};

	// The next batch, starting at the first slot at or after cursor whose
	// header block is not wholly in a hole; nullptr at the end of the ring.
	// Runs under the dispatch lock: holes are found once, not per batch.
	Batch* next_batch(std::uint64_t& cursor, Device::DataRange& data, std::deque<Batch>& batches) const
	{
		const std::uint64_t nr = scan_.geometry.nr_segments;
		const std::uint64_t batch = batch_slots();
		while (cursor < nr) {
			const std::uint64_t offset = scan_.geometry.slot_offset(cursor);
			if (offset >= data.end)
				data = cache_.next_data(offset);
			if (offset + block_size <= data.begin) {
				// The first slot whose header block reaches past the hole.
				const std::uint64_t first = (data.begin - block_size - scan_.geometry.slot_offset(0)) / segment_size + 1;
				const std::uint64_t next = std::clamp(first, cursor + 1, nr);
				slot_done(next - cursor); // read as empty without a read
				cursor = next;
				continue;
			}
			Batch& b = batches.emplace_back();
			b.begin = cursor;
			b.end = std::min(nr, cursor + batch);
			b.data = data;
			cursor = b.end;
			return &b;
		}
		return nullptr;
	}

	std::uint64_t batch_slots() const { return options_.verify_checksums ? 64 : 1024; }

	// Called by the reader threads after each slot; the callback runs under
	// a lock, so it need not be thread-safe.
	void slot_done(std::uint64_t slots = 1) const
	{
		if (!options_.progress)
			return;
		std::lock_guard lock(progress_lock_);
		slots_done_ += slots;
		options_.progress(slots_done_ * segment_size, scan_.geometry.nr_segments * segment_size);
	}

	// Verification reads and checksums every segment: CPU-bound on a cache in
	// page cache or on a fast SSD; a header scan waits on the device for each
	// 4 KiB read. Either way a few threads take batches of slots in turn (a
	// busy core does not hold up the rest), and results are merged in slot
	// order, so output does not depend on the thread count.
	void read_slots()
	{
		const std::uint64_t nr = scan_.geometry.nr_segments;
		scan_.slots.assign(nr, SlotInfo{});
		// No more threads than batches: a small cache is read by the calling
		// thread alone (without asking for the core count, which reads sysfs).
		const std::uint64_t nr_batches = (nr + batch_slots() - 1) / batch_slots();
		unsigned threads = 1;
		if (nr_batches > 1) {
			threads = options_.verify_checksums ? std::clamp(std::thread::hardware_concurrency(), 1u, 4u) : 4;
			threads = unsigned(std::min<std::uint64_t>(threads, nr_batches));
		}
		std::deque<Batch> batches; // grows at the back only: references stay valid
		std::mutex dispatch_lock;
		std::uint64_t cursor = 0;
		Device::DataRange data{};
		std::vector<std::thread> workers;
		std::exception_ptr failure;
		auto work = [&] {
			for (;;) {
				Batch* b = nullptr;
				{
					std::lock_guard lock(dispatch_lock);
					if (failure || !(b = next_batch(cursor, data, batches)))
						return;
				}
				try {
					read_slot_range(b->begin, b->end, b->data, b->result);
				} catch (...) {
					std::lock_guard lock(dispatch_lock);
					failure = std::current_exception();
				}
			}
		};
		for (unsigned t = 1; t < threads; ++t)
			workers.emplace_back(work);
		work();
		for (auto& w : workers)
			w.join();
		if (failure)
			std::rethrow_exception(failure);
		std::vector<RangeResult*> results;
		for (Batch& b : batches)
			results.push_back(&b.result);
		std::size_t total = 0;
		for (const RangeResult* r : results)
			total += r->entries.size();
		// Pages of the mapping are touched as the batches are copied in and
		// freed: the merge costs one batch more than the entries.
		entries_ = std::make_unique<Mapping>(total * sizeof(MetablockEntry));
		for (RangeResult* r : results) {
			for (Finding& f : r->findings)
				scan_.findings.push_back(std::move(f));
			if (!r->entries.empty())
				std::memcpy(entries_->data() + entry_count_ * sizeof(MetablockEntry), r->entries.data(),
					    r->entries.size() * sizeof(MetablockEntry));
			entry_count_ += r->entries.size();
			decltype(r->entries)().swap(r->entries);
		}
		for (const SlotInfo& info : scan_.slots)
			scan_.max_id = std::max(scan_.max_id, info.id);
	}

	// docs/FORMAT.md's replay walk, then the validator's look at the whole ring.
	void walk()
	{
		const std::uint64_t nr = scan_.geometry.nr_segments;
		if (scan_.max_id == 0) {
			scan_.stop_reason = StopReason::empty_log;
			return;
		}
		const std::uint64_t oldest = wb_oldest_slot(scan_.max_id, nr);
		bool stopped = false;
		std::uint64_t previous_id = 0;
		for (std::uint64_t step = 0; step < nr; ++step) {
			const std::uint64_t slot = wb_ring_slot(oldest, step, nr);
			SlotInfo& info = scan_.slots[slot];
			if (info.state == SlotState::empty)
				continue;
			if (info.state != SlotState::header_unreadable) {
				check_id_sequence(slot, previous_id, info.id);
				previous_id = info.id;
			}
			if (stopped) {
				if (info.state == SlotState::valid || info.state == SlotState::unverified)
					++scan_.discarded_segments;
				else
					report_bad_segment(slot, info, false);
				continue;
			}
			switch (info.state) {
			case SlotState::valid:
			case SlotState::unverified:
				info.in_log = true;
				scan_.log.push_back(LogSegment{.slot = slot, .id = info.id, .length = info.length});
				break;
			case SlotState::header_unreadable:
			case SlotState::data_unreadable:
				stopped = true;
				scan_.stop_reason = StopReason::unreadable;
				scan_.stop_slot = slot;
				break;
			default:
				stopped = true;
				scan_.stop_reason = StopReason::checksum_mismatch;
				scan_.stop_slot = slot;
				report_bad_segment(slot, info, info.id == scan_.max_id);
				break;
			}
		}
		if (!stopped)
			scan_.stop_reason = scan_.verified ? StopReason::end_of_ring : StopReason::not_verified;
		if (scan_.discarded_segments > 0)
			add(FindingCode::valid_segments_discarded, {.slot = scan_.stop_slot},
			    fmt::format("{} good segment(s) after the stop point at slot {} are not part of the log",
					scan_.discarded_segments, *scan_.stop_slot));
	}

	void report_bad_segment(std::uint64_t slot, const SlotInfo& info, bool newest)
	{
		Place at{.slot = slot, .segment_id = info.id};
		if (info.state == SlotState::checksum_mismatch) {
			if (newest)
				add(FindingCode::torn_newest_segment, at,
				    fmt::format("stored checksum 0x{:08x}, computed 0x{:08x}", info.stored_checksum,
						info.computed_checksum));
			else
				add(FindingCode::checksum_mismatch, at,
				    fmt::format("stored checksum 0x{:08x}, computed 0x{:08x}", info.stored_checksum,
						info.computed_checksum));
		} else if (info.state == SlotState::legacy_checksum) {
			add(FindingCode::checksum_legacy_inverted, at,
			    fmt::format("stored checksum 0x{:08x} is the bitwise NOT of 0x{:08x}; not accepted as valid",
					info.stored_checksum, info.computed_checksum));
		}
	}

	void check_id_sequence(std::uint64_t slot, std::uint64_t previous_id, std::uint64_t id)
	{
		if (previous_id == 0 || id == previous_id + 1)
			return;
		Place at{.slot = slot, .segment_id = id};
		if (id > previous_id)
			add(FindingCode::id_gap, at, fmt::format("segment {} follows segment {} in ring order", id, previous_id));
		else
			add(FindingCode::id_repeat, at,
			    fmt::format("segment {} follows segment {} in ring order", id, previous_id));
	}

	void compute_writeback_point()
	{
		const std::uint64_t nr = scan_.geometry.nr_segments;
		scan_.last_flushed_id = scan_.log.empty() ? 0 : scan_.log.back().id;
		const std::uint64_t record = scan_.sb_record;
		scan_.last_writeback_id = wb_last_writeback_id(scan_.last_flushed_id, record, nr);
		for (LogSegment& seg : scan_.log)
			seg.written_back = seg.id <= scan_.last_writeback_id;

		if (!wb_sb_record_in_range(record, scan_.max_id, nr))
			add(FindingCode::sb_record_out_of_range, {.cache_offset = WB_SB_RECORD_OFFSET},
			    fmt::format("record says segment {} was written back; the log holds ids {}..{}", record,
					wb_previous_lap_id(scan_.max_id, nr), scan_.max_id));
	}

	void build_index()
	{
		// Keep the metablocks the walk applied, with their position in the
		// log. The log is in ring order from the oldest slot, so a slot's
		// position is found by bisection (no table of every slot: on a huge
		// cache that would be 4 bytes per slot); entries come in slot order,
		// so one search per segment.
		const std::uint64_t nr = scan_.geometry.nr_segments;
		const std::uint64_t oldest = scan_.max_id ? wb_oldest_slot(scan_.max_id, nr) : 0;
		auto ring_step = [&](std::uint64_t slot) { return slot >= oldest ? slot - oldest : slot + nr - oldest; };
		auto position_of = [&](std::uint64_t slot) -> std::optional<std::uint32_t> {
			auto it = std::lower_bound(scan_.log.begin(), scan_.log.end(), ring_step(slot),
						   [&](const LogSegment& seg, std::uint64_t step) { return ring_step(seg.slot) < step; });
			if (it == scan_.log.end() || it->slot != slot)
				return std::nullopt;
			return std::uint32_t(it - scan_.log.begin());
		};
		std::size_t kept = 0;
		std::uint64_t last_slot = ~0ULL;
		std::optional<std::uint32_t> pos;
		if (!entries_)
			entries_ = std::make_unique<Mapping>(0);
		auto* entries = reinterpret_cast<MetablockEntry*>(entries_->data());
		for (std::size_t i = 0; i < entry_count_; ++i) {
			MetablockEntry e = entries[i];
			if (e.log_index != last_slot) {
				last_slot = e.log_index;
				pos = position_of(e.log_index);
			}
			if (!pos)
				continue;
			e.log_index = *pos;
			entries[kept++] = e;
		}
		SectorIndexBuilder::build(scan_, std::move(entries_), kept);
	}

	Device& cache_;
	const ScanOptions& options_;
	mutable std::uint64_t slots_done_ = 0; // under progress_lock_
	mutable std::mutex progress_lock_;
	LogScan& scan_;
	AlignedBuffer buffer_;
	std::unique_ptr<Mapping> entries_; // MetablockEntry records, entry_count_ of them
	std::size_t entry_count_ = 0;
};

} // namespace

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

LogScan scan_log(Device& cache, const ScanOptions& options)
{
	LogScan scan;
	Scanner(cache, options, scan).run();
	return scan;
}

std::vector<std::uint32_t> LogScan::log_positions() const
{
	std::vector<std::uint32_t> position(geometry.nr_segments, not_in_log);
	for (std::size_t i = 0; i < log.size(); ++i)
		position[log[i].slot] = std::uint32_t(i);
	return position;
}

std::optional<SectorSource> LogScan::find_sector(std::uint64_t backing_sector) const
{
	const std::uint64_t low = backing_sector >= block_sectors - 1 ? backing_sector - (block_sectors - 1) : 0;
	std::optional<SectorSource> best;
	for (std::size_t i = index.lower_bound(low); i < index.size(); ++i) {
		const SectorSource s = index[i];
		if (s.block_sector > backing_sector)
			break;
		const unsigned bit = unsigned(backing_sector - s.block_sector);
		if ((s.sectors >> bit) & 1u)
			if (!best || wb_entry_is_newer(s.log_index, s.metablock, best->log_index, best->metablock))
				best = s;
	}
	return best;
}

bool LogVerifier::applicable(const LogScan& headers)
{
	return !headers.verified && headers.stop_reason == StopReason::not_verified && headers.geometry.nr_segments > 0;
}

struct LogVerifier::State {
	State(Device& cache, const LogScan& headers)
		: cache(cache), headers(headers), nr(headers.geometry.nr_segments),
		  oldest(headers.max_id ? wb_oldest_slot(headers.max_id, nr) : 0), chunks((nr + chunk_steps - 1) / chunk_steps)
	{
	}

	// Ring steps per unit of work: 16 segments, 8 MiB.
	static constexpr std::uint64_t chunk_steps = 16;

	std::uint64_t ring_step(std::uint64_t slot) const { return slot >= oldest ? slot - oldest : slot + nr - oldest; }

	// Valid, as the verifying scan would find it: one read of the header
	// and the written data blocks (a read error is a failure as much as a
	// checksum that does not match), and a header unchanged since the scan.
	bool verify_slot(std::uint64_t slot, AlignedBuffer& buffer) const
	{
		const SlotInfo& info = headers.slots[slot];
		if (info.state == SlotState::empty)
			return true;
		if (info.state != SlotState::unverified || info.length > blocks_per_segment)
			return false;
		auto segment = buffer.span().first(block_size * (1 + std::size_t(info.length)));
		if (cache.read_at(headers.geometry.slot_offset(slot), segment) != 0)
			return false;
		const SegmentHeader h = parse_segment_header(segment.first(block_size));
		if (h.id != info.id || h.length != info.length || h.checksum != info.stored_checksum)
			return false;
		return checksum_state(h.checksum, segment_checksum(segment, h.length)) == SlotState::valid;
	}

	// Ring steps from the oldest on that verified valid; under the mutex.
	// A failing chunk's steps before the failure were checked in order.
	std::uint64_t valid_steps() const
	{
		if (failed_step != ~0ULL && failed_step / chunk_steps == prefix)
			return failed_step;
		return std::min(nr, prefix * chunk_steps);
	}

	void work()
	{
		// A chunk that throws is neither done nor failed: whoever waits for
		// it is told no once every thread has stopped.
		try {
			AlignedBuffer buffer(segment_size);
			for (;;) {
				// Chunks are taken in order: when one fails, every chunk before it was taken and is finished.
				const std::uint64_t chunk = next_chunk.fetch_add(1);
				if (chunk >= chunks || stop.load() || chunk * chunk_steps > first_failure.load())
					break;
				const std::uint64_t end = std::min(nr, (chunk + 1) * chunk_steps);
				std::uint64_t bad_step = ~0ULL;
				for (std::uint64_t step = chunk * chunk_steps; step < end; ++step)
					if (!verify_slot(wb_ring_slot(oldest, step, nr), buffer)) {
						bad_step = step;
						break;
					}
				std::lock_guard lock(mutex);
				if (bad_step != ~0ULL) {
					failed_step = std::min(failed_step, bad_step);
					first_failure = failed_step;
				} else {
					done[chunk] = true;
					while (prefix < chunks && done[prefix])
						++prefix;
				}
				changed.notify_all();
			}
		} catch (...) {
		}
		std::lock_guard lock(mutex);
		--running;
		changed.notify_all();
	}

	Device& cache;
	const LogScan& headers;
	const std::uint64_t nr;
	const std::uint64_t oldest;
	const std::uint64_t chunks;
	std::atomic<std::uint64_t> next_chunk = 0;
	std::atomic<bool> stop = false;
	std::atomic<std::uint64_t> first_failure = ~0ULL; // failed_step, for the threads to read without the lock
	std::mutex mutex;
	std::condition_variable changed;
	std::vector<bool> done = std::vector<bool>(chunks, false); // under mutex
	std::uint64_t prefix = 0;                                  // chunks done from the first on
	std::uint64_t failed_step = ~0ULL;                         // the first failing ring step found
	unsigned running = 0;
	std::vector<std::thread> threads;
};

LogVerifier::LogVerifier(Device& cache, const LogScan& headers) : state_(std::make_unique<State>(cache, headers))
{
	if (!applicable(headers))
		throw Error("a log verifier needs a headers-only scan whose walk reached the end of the ring");
	const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
	state_->running = threads;
	try {
		for (unsigned t = 0; t < threads; ++t)
			state_->threads.emplace_back([s = state_.get()] { s->work(); });
	} catch (...) {
		state_->stop = true;
		for (std::thread& t : state_->threads)
			t.join();
		throw;
	}
}

LogVerifier::~LogVerifier()
{
	state_->stop = true; // no new chunks
	for (std::thread& t : state_->threads)
		if (t.joinable())
			t.join();
}

bool LogVerifier::wait_until_verified(std::uint64_t slot)
{
	State& s = *state_;
	const std::uint64_t step = s.ring_step(slot);
	std::unique_lock lock(s.mutex);
	s.changed.wait(lock, [&] { return step < s.valid_steps() || s.failed_step <= step || s.running == 0; });
	return step < s.valid_steps();
}

bool LogVerifier::finish(LogScan& scan)
{
	State& s = *state_;
	for (std::thread& t : s.threads)
		t.join();
	s.threads.clear();
	if (&scan != &s.headers || s.failed_step != ~0ULL || s.prefix != s.chunks)
		return false;
	// Every non-empty slot is in the log and valid: the verifying scan's
	// walk takes the same log to the end of the ring, with the same
	// findings, index and write-back point.
	for (SlotInfo& info : scan.slots)
		if (info.state == SlotState::unverified) {
			info.state = SlotState::valid;
			info.computed_checksum = info.stored_checksum;
		}
	scan.verified = true;
	scan.stop_reason = StopReason::end_of_ring;
	return true;
}

void for_each_log_metablock(Device& cache, const LogScan& scan,
			    const std::function<void(const LogSegment&, unsigned, const Metablock&)>& visit)
{
	AlignedBuffer block(block_size);
	for (const LogSegment& seg : scan.log) {
		cache.read_exact(scan.geometry.slot_offset(seg.slot), block.span());
		SegmentHeader h = parse_segment_header(block.span());
		for (unsigned i = 0; i < h.usable_length(); ++i)
			visit(seg, i, h.metablocks[i]);
	}
}

} // namespace wbkit
