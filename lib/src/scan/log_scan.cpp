// The scanner: the superblock, every slot (by a few threads, in batches),
// the kernel's replay walk and the validator's checks, into a LogScan.
#include "wbkit/log_scan.hpp"

#include <algorithm>
#include <cstring>
#include <deque>
#include <exception>
#include <fmt/format.h>
#include <limits>
#include <mutex>
#include <thread>

#include "scan/sector_index_builder.hpp"
#include "scan/segment_read.hpp"
#include "wbkit/errors.hpp"

namespace wbkit {

namespace {

using detail::MappedAllocator;
using detail::Mapping;
using detail::MetablockEntry;

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
				    "sector 0 has non-zero bytes after the magic: not a valid superblock, dm-wbkit "
				    "refuses the device (neither replayed nor formatted)");
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
		// Unreadable, it trusts nothing: the safe reading, and the sectors
		// are reported by the scan of the superblock region's neighbours.
		if (cache_.read_at(WB_TRUST_SECTOR * sector_size, sector) == 0) {
			const std::optional<std::uint64_t> trust = parse_clean_trust(sector);
			scan_.trust_record = trust.has_value();
			scan_.trusted_from_id = trust.value_or(WB_TRUST_NONE);
			scan_.trust_nr_segments = parse_clean_trust_segments(sector);
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

	// ignored_metablocks: the checksum matched only with the metablocks past
	// length read as zero (checksum_verdict).
	void check_header(RangeResult& out, std::uint64_t slot, const SegmentHeader& h, unsigned ignored_metablocks = 0) const
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
			out.findings.push_back(detail::metablock_tail_finding(slot, h, ignored_metablocks));
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
		AlignedBuffer buffer(block_size + (options_.verify_checksums ? detail::segment_piece_bytes : 0),
				     AlignedBuffer::uninitialised);
		SegmentCrcStream crc;
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
			if (!h.length_valid()) {
				check_header(out, slot, h);
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
				check_header(out, slot, h);
				info.state = SlotState::unverified;
				continue;
			}
			// The checksum first: which finding a non-zero metablock tail
			// is depends on it. The header's findings still come first.
			const detail::SegmentChecksum sum = detail::read_segment_checksum(
				cache_, offset, header_block, h.length, buffer.span().subspan(block_size), crc);
			if (sum.error) {
				check_header(out, slot, h);
				info.state = SlotState::data_unreadable;
				note(out, FindingCode::data_unreadable,
				     {.slot = slot, .segment_id = h.id, .cache_offset = offset + block_size},
				     fmt::format("reading {} data blocks failed: {}", h.length, std::strerror(sum.error)));
				continue;
			}
			const ChecksumVerdict verdict = checksum_verdict(h.checksum, sum.computed);
			check_header(out, slot, h, verdict.ignored_metablocks);
			info.computed_checksum = verdict.computed;
			info.state = verdict.state;
			info.ignored_metablocks = std::uint8_t(verdict.ignored_metablocks);
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
		options_.progress("scan", slots_done_ * segment_size, scan_.geometry.nr_segments * segment_size);
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

	// docs/FORMAT.md's replay walk, by the shared decision (wb_replay_walk_slot),
	// then the validator's look at the whole ring.
	void walk()
	{
		const std::uint64_t nr = scan_.geometry.nr_segments;
		scan_.torn_rewrites = options_.torn_rewrites.value_or(!scan_.trust_record);
		wb_replay_walk_begin(&walk_, nr, scan_.max_id, scan_.torn_rewrites);
		// Every step, also of an empty log: a header that could not be read
		// is a refusal there too (the walk applies nothing).
		std::uint64_t previous_id = 0;
		for (std::uint64_t step = 0; step < nr; ++step) {
			const std::uint64_t slot = wb_ring_slot(walk_.oldest_slot, step, nr);
			SlotInfo& info = scan_.slots[slot];
			if (info.state == SlotState::empty)
				continue;
			const bool stopped = walk_.stopped;
			const wb_walk_action action = wb_replay_walk_slot(&walk_, step, info.id, verdict(info.state));
			// A segment lost in flight is skipped as an empty slot: no id
			// of the log.
			if (info.state != SlotState::header_unreadable && action != WB_WALK_LOST) {
				check_id_sequence(slot, previous_id, info.id);
				previous_id = info.id;
			}
			if (stopped) {
				if (slot_state_info(info.state).in_log)
					++scan_.discarded_segments;
				else
					report_bad_segment(slot, info, false);
				continue;
			}
			switch (action) {
			case WB_WALK_APPLY:
				info.in_log = true;
				scan_.log.push_back(LogSegment{.slot = slot, .id = info.id, .length = info.length});
				break;
			case WB_WALK_RESTART:
				skip_torn_rewrite(step, slot, info);
				break;
			case WB_WALK_STOP:
				scan_.stop_reason = slot_state_info(info.state).stop;
				scan_.stop_slot = slot;
				report_bad_segment(slot, info, info.id == scan_.max_id);
				break;
			case WB_WALK_LOST:
				scan_.lost_slots.push_back(slot);
				add(FindingCode::lost_in_flight_skipped, {.slot = slot, .segment_id = info.id},
				    fmt::format("segment {} ({}) is one lap older than the segment {} expected at step {} of the "
						"walk, behind segment {} that landed: a segment write lost in flight (a log "
						"another writer left), skipped as an empty slot; its old segment is written back",
						info.id, slot_state_name(info.state), info.id + nr, step, scan_.max_id));
				break;
			case WB_WALK_SKIP:
				break;
			}
		}
		if (scan_.max_id == 0)
			scan_.stop_reason = StopReason::empty_log;
		else if (!walk_.stopped)
			scan_.stop_reason = scan_.verified ? StopReason::end_of_ring : StopReason::not_verified;
		if (scan_.discarded_segments > 0)
			add(FindingCode::valid_segments_discarded, {.slot = scan_.stop_slot},
			    fmt::format("{} good segment(s) after the stop point at slot {} are not part of the log",
					scan_.discarded_segments, *scan_.stop_slot));
	}

	// What the walk makes of a slot: a checksum that fails (the legacy
	// inverted one included) or an impossible length is bad; a headers-only
	// scan assumes every segment good.
	static wb_slot_verdict verdict(SlotState state)
	{
		switch (state) {
		case SlotState::empty:
			return WB_SLOT_EMPTY;
		case SlotState::valid:
		case SlotState::unverified:
			return WB_SLOT_VALID;
		case SlotState::checksum_mismatch:
		case SlotState::legacy_checksum:
		case SlotState::length_too_large:
			return WB_SLOT_BAD;
		case SlotState::header_unreadable:
		case SlotState::data_unreadable:
			break;
		}
		return WB_SLOT_UNREADABLE;
	}

	// The log starts after the torn slot: what the walk applied so far is
	// forgotten, and every id up to the slot's counts as written back
	// (compute_writeback_point). Another writer's log only: the finding
	// says what each reading of the slot would lose.
	void skip_torn_rewrite(std::uint64_t step, std::uint64_t slot, const SlotInfo& info)
	{
		for (const LogSegment& seg : scan_.log)
			scan_.slots[seg.slot].in_log = false;
		add(FindingCode::torn_rewrite_skipped, {.slot = slot, .segment_id = info.id},
		    fmt::format("segment {} ({}) holds the id one lap behind step {} of the walk: read as a rewrite the "
				"power cut tore, the log starts after it, and it and the {} segment(s) before it (ids up to "
				"{}) count as written back; read as damage, the log would stop at it and the segments after "
				"it would not be replayed (wbrecover --no-torn-rewrite reads it so)",
				info.id, slot_state_name(info.state), step, scan_.log.size(), info.id));
		scan_.log.clear();
		scan_.rewrite_slot = slot;
		scan_.rewritten_id = info.id;
	}

	// The walk finds the checksum states; the others were reported when the slot was read.
	void report_bad_segment(std::uint64_t slot, const SlotInfo& info, bool newest)
	{
		const bool legacy = info.state == SlotState::legacy_checksum;
		if (info.state != SlotState::checksum_mismatch && !legacy)
			return;
		const FindingCode code =
			newest && !legacy ? FindingCode::torn_newest_segment : slot_state_info(info.state).finding;
		const std::string_view form = legacy
						      ? "stored checksum 0x{:08x} is the bitwise NOT of 0x{:08x}; not accepted as valid"
						      : "stored checksum 0x{:08x}, computed 0x{:08x}";
		add(code, {.slot = slot, .segment_id = info.id},
		    fmt::format(fmt::runtime(form), info.stored_checksum, info.computed_checksum));
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
		const std::uint64_t record = scan_.sb_record;
		wb_replay_decide(&walk_, record, scan_.trusted_from_id, &scan_.decision);
		wb_replay_check_ring(&scan_.decision, scan_.trust_nr_segments, nr);
		scan_.last_flushed_id = scan_.decision.last_flushed_id;
		scan_.last_writeback_id = scan_.decision.last_writeback_id;
		for (LogSegment& seg : scan_.log)
			seg.written_back = wb_segment_written_back(seg.id, scan_.last_writeback_id);

		if (!wb_sb_record_in_range(record, scan_.max_id, nr))
			add(FindingCode::sb_record_out_of_range, {.cache_offset = WB_SB_RECORD_OFFSET},
			    fmt::format("record says segment {} was written back; the log holds ids {}..{}", record,
					wb_previous_lap_id(scan_.max_id, nr), scan_.max_id));
		if (scan_.refused())
			add(FindingCode::log_refused,
			    {.slot = scan_.decision.refusal_slot, .segment_id = scan_.decision.refusal_id},
			    fmt::format("{}; the kernel refuses to construct on this log, wbreplay refuses without --force, "
					"wbrecover --salvage takes what it holds",
					wb_replay_refusal_text(scan_.decision.refusal)));
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
	wb_replay_walk walk_{};
	std::size_t entry_count_ = 0;
};

} // namespace

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
