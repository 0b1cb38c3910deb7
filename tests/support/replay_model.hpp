// An independent model of what a cache means, for replay and recovery tests:
// a plain map of backing sector -> newest data, built from the same list of
// writes that drove the LogWriter. It knows nothing of segments, metablocks
// or the library's scan, so a replay compared against it checks the whole
// chain (writer, scan, plan, executor) against the plain meaning of the writes.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <vector>

#include "temp_image.hpp"
#include "wbkit/crc32c.hpp"
#include "wbkit/device.hpp"
#include "wbkit/format.hpp"
#include "wbkit/log_writer.hpp"

namespace wbkit::testing {

using SectorData = std::array<std::byte, 512>;

class SectorModel {
public:
	void write(std::uint64_t sector, std::span<const std::byte> data)
	{
		for (std::size_t pos = 0; pos < data.size(); pos += 512) {
			SectorData& s = sectors_[sector + pos / 512];
			std::memcpy(s.data(), data.data() + pos, 512);
		}
	}

	// The device as the target presents it: `base` with every write on top.
	std::vector<std::byte> image(std::vector<std::byte> base) const
	{
		for (const auto& [sector, data] : sectors_)
			std::memcpy(base.data() + sector * 512, data.data(), 512);
		return base;
	}

	std::size_t size() const { return sectors_.size(); }

private:
	std::map<std::uint64_t, SectorData> sectors_;
};

struct WorkloadOptions {
	std::uint64_t backing_bytes = 8 << 20;
	unsigned writes = 300;
	unsigned partial_percent = 30; // writes that are not whole aligned blocks
	unsigned clean_percent = 0;    // clean entries (read-cache fills)
	unsigned flush_every = 20;     // 0: only the final flush
	unsigned max_blocks = 6;       // longest write, in 4 KiB blocks
};

// One write of the workload, kept so tests can rebuild models from subsets.
struct WorkloadWrite {
	std::uint64_t sector = 0;
	std::vector<std::byte> data;
	bool clean = false;
	std::uint64_t batch = 0; // flushes before this write
};

// Drives a LogWriter and the model with the same seeded writes. Clean entries
// stand for read-cache fills: the target fills only on a miss, so only blocks
// the workload never wrote get one (an older dirty copy would have been a hit).
// Their data is put on the backing device directly, as it was there to be read.
class Workload {
public:
	Workload(std::uint64_t seed, const WorkloadOptions& options) : rng_(seed), options_(options) {}

	void run(LogWriter& writer, Device& backing, SectorModel& model)
	{
		const std::uint64_t backing_sectors = options_.backing_bytes / 512;
		for (unsigned i = 0; i < options_.writes; ++i) {
			WorkloadWrite w;
			w.batch = batch_;
			bool clean = options_.clean_percent && rng_() % 100 < options_.clean_percent;
			std::uint64_t clean_block = 0;
			if (clean) {
				clean_block = (rng_() % (backing_sectors / 8)) * 8;
				clean = !touched_.count(clean_block);
			}
			const bool partial = !clean && rng_() % 100 < options_.partial_percent;
			std::uint64_t sectors;
			if (partial) {
				sectors = 1 + rng_() % (options_.max_blocks * 8 - 1);
				w.sector = rng_() % (backing_sectors - sectors + 1);
			} else {
				sectors = clean ? 8 : 8 * (1 + rng_() % options_.max_blocks);
				w.sector = clean ? clean_block : (rng_() % ((backing_sectors - sectors) / 8 + 1)) * 8;
			}
			w.data = pattern_bytes(sectors * 512, rng_());
			for (std::uint64_t b = w.sector / 8; b <= (w.sector + sectors - 1) / 8; ++b)
				touched_.insert(b * 8);
			w.clean = clean;
			if (clean) {
				backing.write_exact(w.sector * 512, w.data);
				writer.write_clean(w.sector, w.data);
			} else {
				writer.write(w.sector, w.data);
			}
			model.write(w.sector, w.data);
			writes_.push_back(std::move(w));
			if (options_.flush_every && (i + 1) % options_.flush_every == 0) {
				writer.flush();
				++batch_;
			}
		}
		writer.flush();
		++batch_;
	}

	const std::vector<WorkloadWrite>& writes() const { return writes_; }

private:
	std::mt19937_64 rng_;
	WorkloadOptions options_;
	std::uint64_t batch_ = 0;
	std::vector<WorkloadWrite> writes_;
	std::set<std::uint64_t> touched_; // blocks written so far
};

inline std::vector<std::byte> read_all(Device& device)
{
	std::vector<std::byte> out(device.size_bytes());
	device.read_exact(0, out);
	return out;
}

// First differing sector, for messages that say where a comparison failed.
inline std::int64_t first_difference(const std::vector<std::byte>& a, const std::vector<std::byte>& b)
{
	if (a.size() != b.size())
		return -2;
	for (std::size_t i = 0; i < a.size(); ++i)
		if (a[i] != b[i])
			return std::int64_t(i / 512);
	return -1;
}

// The raw bytes of a cache image as the models read them: little-endian
// fields, and the number of segment slots.
struct RawCache {
	const std::vector<std::byte>& image;

	bool holds_a_slot() const { return image.size() >= superblock_size + segment_size; }
	std::uint64_t nr_slots() const { return (image.size() - superblock_size) / segment_size; }
	std::uint64_t slot_base(std::uint64_t slot) const { return superblock_size + slot * segment_size; }
	std::uint64_t le(std::uint64_t offset, unsigned bytes) const
	{
		std::uint64_t v = 0;
		for (unsigned i = 0; i < bytes; ++i)
			v |= std::uint64_t(image[offset + i]) << (8 * i);
		return v;
	}
	// The slot's length fits and its checksum (over the header past its
	// first sector and the data blocks) holds: as the bytes are, or with the
	// header's bytes from metablock `length` on read as zero (an append in
	// place whose header did not land).
	bool segment_good(std::uint64_t slot) const
	{
		const std::uint64_t base = slot_base(slot);
		const unsigned length = unsigned(le(base + 12, 1));
		if (length > blocks_per_segment)
			return false;
		const std::uint32_t stored = std::uint32_t(le(base + 8, 4));
		const auto area = std::span(image).subspan(base + 512, block_size * (length + 1) - 512);
		if (crc32c(area) == stored)
			return true;
		const auto tail = area.subspan(16 * length, block_size - 512 - 16 * length);
		if (std::all_of(tail.begin(), tail.end(), [](std::byte b) { return b == std::byte{0}; }))
			return false; // the same bytes: the same CRC
		std::vector<std::byte> zeroed(area.begin(), area.end());
		std::fill(zeroed.begin() + 16 * length, zeroed.begin() + (block_size - 512), std::byte{0});
		return crc32c(zeroed) == stored;
	}
};

// FORMAT.md's newest-wins rule over the segments a replay applies, oldest
// first, as (slot, id): per backing sector, the newest entry for it decides
// (a partial entry only for its dirty sectors; a clean one for all 8); the
// result is the byte offset on the cache of each sector whose newest entry
// is dirty and newer than last_writeback_id.
inline std::map<std::uint64_t, std::uint64_t>
newest_dirty_copies(const RawCache& cache, const std::vector<std::pair<std::uint64_t, std::uint64_t>>& applied,
		    std::uint64_t last_writeback_id)
{
	struct Owner {
		std::uint64_t id;
		bool dirty;
		std::uint64_t offset;
	};
	std::map<std::uint64_t, Owner> newest;
	for (const auto& [slot, id] : applied) {
		const std::uint64_t base = cache.slot_base(slot);
		const unsigned length = unsigned(cache.le(base + 12, 1));
		for (unsigned i = 0; i < length; ++i) {
			const std::uint64_t sector = cache.le(base + 512 + 16 * i, 8);
			const unsigned bits = unsigned(cache.le(base + 512 + 16 * i + 8, 1));
			for (unsigned j = 0; j < block_sectors; ++j) {
				if (bits && !((bits >> j) & 1u))
					continue; // a partial entry leaves this sector to older ones
				if (sector + j < sector)
					break; // past 2^64 - 1: no such sector
				newest[sector + j] = {id, bits != 0, base + block_size * (i + 1ULL) + sector_size * j};
			}
		}
	}
	std::map<std::uint64_t, std::uint64_t> writes;
	for (const auto& [sector, owner] : newest)
		if (owner.dirty && owner.id > last_writeback_id)
			writes.emplace(sector, owner.offset);
	return writes;
}

// FORMAT.md's replay rules written out plainly over the raw bytes of a cache
// image, without the library's scan: the slot walk, the newest entry per
// sector (across overlapping unaligned metablocks too), last_writeback_id,
// and whether the kernel refuses the log. The fuzzer and the tests hold the
// scan and the plan against it.
//
// The torn-rewrite and lost-in-flight rules apply only to a log another
// writer left, that is a cache without the trust record (sector 8: le32
// magic 0x72544257 at byte 0); torn_rewrites overrides that, as ScanOptions::torn_rewrites does. A
// refused log (refused()) is still walked and planned up to its stop, as the
// library plans it for wbreplay --force.
class KernelRuleModel {
public:
	explicit KernelRuleModel(const std::vector<std::byte>& image, std::optional<bool> torn_rewrites = std::nullopt)
	{
		const RawCache cache{image};
		if (!cache.holds_a_slot())
			return;
		const std::uint64_t nr = cache.nr_slots();
		auto le = [&](std::uint64_t offset, unsigned bytes) { return cache.le(offset, bytes); };
		const std::uint64_t record = le(WB_SB_RECORD_OFFSET, 8);
		const bool trust_record = le(8 * 512, 4) == 0x72544257;
		const bool torn_rule = torn_rewrites.value_or(!trust_record);
		std::uint64_t max_id = 0;
		for (std::uint64_t slot = 0; slot < nr; ++slot) {
			const std::uint64_t id = le(cache.slot_base(slot), 8);
			max_id = std::max(max_id, id);
			// Every segment must sit in the slot of its id: (id - 1) mod nr.
			if (id != 0 && (id - 1) % nr != slot)
				refused_ = true;
		}
		if (max_id == 0)
			return;
		std::vector<std::pair<std::uint64_t, std::uint64_t>> log; // (slot, id) the replay applies
		std::uint64_t rewritten = 0;                              // the id of a torn rewrite the walk skipped
		std::uint64_t previous = 0;                               // the id met before in the walk, 0: none yet
		for (std::uint64_t step = 0; step < nr; ++step) {
			// The slot after max_id's, as the kernel finds it: (max_id mod nr) + step,
			// never max_id + step, which wraps past 2^64 - 1.
			const std::uint64_t slot = (max_id % nr + step) % nr;
			const std::uint64_t base = cache.slot_base(slot);
			const std::uint64_t id = le(base, 8);
			if (id == 0)
				continue;
			// A segment write lost in flight: among the newest positions
			// (the steps before the last whose expected id lies within 8
			// of max_id), the slot holds the segment one lap older than
			// the id expected there, checksum good or bad. It was written
			// back before its slot was reused: a gap, as an empty slot.
			if (torn_rule && step + 1 < nr && step + 8 >= nr && max_id >= id && max_id - id == 2 * nr - 1 - step)
				continue;
			// Ids rise in ring order up to the stop, bad segments' too.
			if (previous != 0 && id <= previous)
				refused_ = true;
			previous = id;
			if (cache.segment_good(slot)) {
				log.emplace_back(slot, id);
				continue;
			}
			// A torn rewrite: in the first 8 steps but the last, of a log
			// that filled the ring, the id one lap behind max_id + 1 + step.
			// The log starts after it; ids up to it are written back.
			if (torn_rule && max_id >= nr && step < 8 && step + 1 < nr && max_id - id == nr - 1 - step) {
				log.clear();
				rewritten = id;
				continue;
			}
			// Only the newest segment may end the log: a power cut tore it.
			if (id != max_id)
				refused_ = true;
			break;
		}
		// A torn rewrite proves its id flushed and written back, even with
		// nothing applied after it.
		rewritten_ = rewritten;
		last_flushed_id_ = std::max(log.empty() ? 0 : log.back().second, rewritten);
		const std::uint64_t inferred = last_flushed_id_ > nr ? last_flushed_id_ - nr : 0;
		last_writeback_id_ = std::max({inferred, std::min(record, last_flushed_id_), rewritten});
		writes_ = newest_dirty_copies(cache, log, last_writeback_id_);
	}

	std::uint64_t last_flushed_id() const { return last_flushed_id_; }
	std::uint64_t last_writeback_id() const { return last_writeback_id_; }
	// The kernel refuses to construct on the log: a segment in a slot not
	// its id's, ids that do not rise up to the stop, or a stop before the
	// newest segment.
	bool refused() const { return refused_; }
	// The id of the torn rewrite the walk skipped, 0: none.
	std::uint64_t rewritten_id() const { return rewritten_; }
	// Backing sector -> byte offset on the cache of the data replay writes there.
	const std::map<std::uint64_t, std::uint64_t>& writes() const { return writes_; }

private:
	std::uint64_t rewritten_ = 0;
	std::uint64_t last_flushed_id_ = 0;
	std::uint64_t last_writeback_id_ = 0;
	bool refused_ = false;
	std::map<std::uint64_t, std::uint64_t> writes_;
};

// wbrecover --salvage's rules (docs/recovery.md, Policies) written out plainly
// for a cache whose every byte is readable: every segment whose length fits
// and whose checksum holds, wherever the walk would stop and in whatever slot
// it sits, applied oldest id first, the newest copy deciding each sector; a
// segment that fails its checksum is never taken. Written back are the ids up
// to last_writeback_id: the ring's lap behind the newest usable id, the
// superblock record capped there, or, when the record is past every id on
// the cache (it cannot be true), the ring's lap alone; a torn rewrite the
// kernel's walk skipped (rewritten_id) proves its id written back as well.
// Two usable segments with one id leave the order undefined: no expectation.
class SalvageRuleModel {
public:
	SalvageRuleModel(const std::vector<std::byte>& image, std::uint64_t rewritten_id)
	{
		const RawCache cache{image};
		if (!cache.holds_a_slot())
			return;
		const std::uint64_t nr = cache.nr_slots();
		auto le = [&](std::uint64_t offset, unsigned bytes) { return cache.le(offset, bytes); };
		const std::uint64_t record = le(WB_SB_RECORD_OFFSET, 8);
		std::map<std::uint64_t, std::uint64_t> usable; // id -> slot
		std::uint64_t max_id = 0;
		for (std::uint64_t slot = 0; slot < nr; ++slot) {
			const std::uint64_t base = cache.slot_base(slot);
			const std::uint64_t id = le(base, 8);
			max_id = std::max(max_id, id);
			if (id == 0 || !cache.segment_good(slot))
				continue;
			if (!usable.emplace(id, slot).second)
				return; // two copies of one id
		}
		defined_ = true;
		const std::uint64_t newest = usable.empty() ? 0 : usable.rbegin()->first;
		const std::uint64_t lap = newest > nr ? newest - nr : 0;
		const std::uint64_t by_record = record != 0 && record > max_id ? 0 : std::min(record, newest);
		last_writeback_id_ = std::max({lap, by_record, rewritten_id});

		std::vector<std::pair<std::uint64_t, std::uint64_t>> applied; // oldest id first
		for (const auto& [id, slot] : usable)
			applied.emplace_back(slot, id);
		writes_ = newest_dirty_copies(cache, applied, last_writeback_id_);
	}

	// False when the rules leave the result open (two usable copies of an id).
	bool defined() const { return defined_; }
	std::uint64_t last_writeback_id() const { return last_writeback_id_; }
	const std::map<std::uint64_t, std::uint64_t>& writes() const { return writes_; }

private:
	bool defined_ = false;
	std::uint64_t last_writeback_id_ = 0;
	std::map<std::uint64_t, std::uint64_t> writes_;
};

} // namespace wbkit::testing
