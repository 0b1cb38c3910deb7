#include "wbkit/recover.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <memory>

#include "wbkit/errors.hpp"
#include "wbkit/inspect.hpp"
#include "wbkit/progress.hpp"

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
		[&](std::uint64_t at, std::span<const std::byte> part) { return device.write_at(at, part); }, on_bad,
		false);
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

std::string_view loss_reason_name(LossReason reason)
{
	switch (reason) {
	case LossReason::backing_unreadable:
		return "backing-unreadable";
	case LossReason::cache_copy_unreadable:
		return "cache-copy-unreadable";
	case LossReason::write_failed:
		return "write-failed";
	case LossReason::beyond_backing:
		return "beyond-backing";
	}
	return "unknown";
}

std::uint64_t RecoveryReport::lost_sectors() const
{
	std::uint64_t total = 0;
	for (const LostRange& r : lost)
		total += r.sectors;
	return total;
}

bool RecoveryReport::data_left_behind() const
{
	return std::any_of(segments.begin(), segments.end(),
			   [](const SegmentVerdict& v) {
				   // A failed checksum over readable bytes, or an unreadable header: what the segment held is gone.
				   return v.left_behind_sectors > 0 || v.reason == "checksum-mismatch" ||
					  v.reason == "header-unreadable";
			   });
}

namespace {

// One non-empty slot as far as it could be read.
struct SlotRead {
	std::uint64_t slot = 0;
	SegmentVerdict verdict;
	bool header_known = false; // id, length and checksum readable and consistent
	SegmentHeader header;
	std::array<bool, blocks_per_segment> metablock_known{};
	std::array<bool, blocks_per_segment> data_readable{}; // the sectors the metablock decides
};

class Recovery {
public:
	Recovery(Device& cache, Device& backing, Device* output, const RecoverOptions& options)
		: cache_(cache), backing_(backing), output_(output), options_(options),
		  reader_(cache, options.retries)
	{
	}

	RecoveryReport run()
	{
		report_.salvage = options_.salvage;
		report_.cache.path = cache_.path();
		report_.cache.size_bytes = cache_.size_bytes();
		report_.backing.path = backing_.path();
		report_.backing.size_bytes = backing_.size_bytes();
		if (output_)
			report_.output = output_->path();

		check_distinct(cache_, "the cache", backing_, "the backing device");
		if (output_) {
			check_distinct(*output_, "the output", cache_, "the cache");
			check_distinct(*output_, "the output", backing_, "the backing device");
			if (output_->is_block_device() && output_->size_bytes() < backing_.size_bytes())
				throw RefusedError(fmt::format("the output {} ({} bytes) is smaller than the backing device "
							       "{} ({} bytes)",
							       output_->path(), output_->size_bytes(), backing_.path(),
							       backing_.size_bytes()));
		}
		ScanOptions scan_options{.verify_checksums = true, .backing_bytes = backing_.size_bytes()};
		if (options_.progress)
			scan_options.progress = [this](std::uint64_t done, std::uint64_t total) {
				options_.progress("scan", ReplayProgress{.bytes_done = done, .bytes_total = total});
			};
		kernel_ = std::make_shared<LogScan>(scan_log(reader_, scan_options));
		check_safety();
		diagnose();
		read_slots();
		std::shared_ptr<const LogScan> policy = options_.salvage ? salvage_log() : kernel_;
		account_slots(*policy);

		destination_ = output_ ? output_ : &backing_;
		check_backing();
		rescue_clean_copies(*policy);
		replay(*policy);
		classify_unreadable_backing(*policy);
		report_.cache.unreadable = reader_.unreadable();
		report_.cache.bytes_checked = bytes_read_cache_;
		std::sort(report_.lost.begin(), report_.lost.end(),
			  [](const LostRange& a, const LostRange& b) { return a.sector < b.sector; });
		return std::move(report_);
	}

private:
	void check_safety()
	{
		const LogScan& k = *kernel_;
		if (k.geometry.nr_segments == 0)
			throw RefusedError(fmt::format("{} is not a writeboost cache: {} bytes is smaller than the "
						       "superblock and one segment ({} bytes)",
						       cache_.path(), cache_.size_bytes(), superblock_size + segment_size));
		// An unreadable superblock is one of the cases this tool is for; a readable wrong magic is not.
		if (k.superblock_readable && !k.superblock.magic_ok) {
			std::string what = fmt::format("{} has no writeboost magic (found 0x{:08x}): it is unformatted",
						       cache_.path(), k.superblock.magic);
			if (!options_.force)
				throw RefusedError(what + " (--force reads its log anyway)");
			report_.overridden.push_back(what);
		}
		std::uint64_t beyond = 0;
		for (const Finding& f : k.findings)
			beyond += f.code == FindingCode::metablock_sector_beyond_backing;
		if (beyond > 0) {
			std::string what = fmt::format("{} metablock(s) name blocks past the end of the backing device {} "
						       "({} bytes)",
						       beyond, backing_.path(), backing_.size_bytes());
			if (!options_.force)
				throw RefusedError(what + " (wrong backing device? --force recovers the rest)");
			report_.overridden.push_back(what + "; their sectors are reported lost");
		}
	}

	void diagnose()
	{
		const LogScan& k = *kernel_;
		report_.nr_segments = k.geometry.nr_segments;
		report_.max_id = k.max_id;
		report_.last_flushed_id = k.last_flushed_id;
		report_.last_writeback_id = k.last_writeback_id;
		report_.stop_reason = k.stop_reason;
		report_.stop_slot = k.stop_slot;
		report_.findings = k.findings;
		report_.kernel_log = kernel_;
		for (std::uint64_t slot = 0; slot < k.slots.size(); ++slot) {
			const SlotState state = k.slots[slot].state;
			if (state == SlotState::header_unreadable)
				report_.unreadable_header_slots.push_back(slot);
			if (state == SlotState::checksum_mismatch || state == SlotState::legacy_checksum)
				report_.checksum_failed_slots.push_back(slot);
		}
	}

	// Re-reads, through the tolerant reader, what the salvage policy and the
	// report need per slot: which metablocks and which data blocks are readable.
	void read_slots()
	{
		const LogScan& k = *kernel_;
		AlignedBuffer header_block(block_size);
		for (std::uint64_t slot = 0; slot < k.slots.size(); ++slot) {
			const SlotInfo& info = k.slots[slot];
			if (info.state == SlotState::empty)
				continue;
			SlotRead r;
			r.slot = slot;
			r.verdict = SegmentVerdict{.slot = slot, .id = info.id, .state = info.state, .in_kernel_log = info.in_log};
			const std::uint64_t offset = k.geometry.slot_offset(slot);
			reader_.read_at(offset, header_block.span());
			const std::uint64_t first_sector = offset / sector_size;
			if (reader_.unreadable().contains(first_sector)) {
				r.verdict.reason = "header-unreadable";
				report_.notes.push_back(fmt::format("slot {}: the segment header cannot be read; which blocks "
								    "it held, and their data, are unknown",
								    slot));
				slots_.push_back(std::move(r));
				continue;
			}
			r.header = parse_segment_header(header_block.span());
			r.verdict.id = r.header.id;
			if (r.header.id == 0)
				continue; // only the metablock sectors were bad; the slot was never written
			// The kernel applies a valid segment in the wrong slot; an unverifiable one there is not trusted.
			const bool misplaced = k.geometry.slot_of_id(r.header.id) != slot && info.state != SlotState::valid;
			if (!r.header.length_valid() || misplaced) {
				r.verdict.reason = r.header.length_valid() ? "slot-mismatch" : "length-too-large";
				slots_.push_back(std::move(r));
				continue;
			}
			r.header_known = true;
			const unsigned length = r.header.length;
			if (info.state == SlotState::header_unreadable || info.state == SlotState::data_unreadable ||
			    info.state == SlotState::valid) {
				// Valid segments were read in full by the scan; the others need their data blocks tried.
				if (info.state != SlotState::valid && length > 0) {
					AlignedBuffer data(block_size * length);
					reader_.read_at(offset + block_size, data.span());
					bytes_read_cache_ += data.size();
				}
			}
			for (unsigned i = 0; i < length; ++i) {
				const std::uint64_t mb_sector = first_sector + WB_METABLOCK_OFFSET(i) / sector_size;
				r.metablock_known[i] = !reader_.unreadable().contains(mb_sector);
				if (!r.metablock_known[i])
					continue;
				++r.verdict.metablocks;
				const Metablock& mb = r.header.metablocks[i];
				const std::uint8_t touched = mb.touched_sectors();
				const std::uint64_t data_sector = k.geometry.data_block_offset(slot, i) / sector_size;
				bool readable = true;
				for (unsigned j = 0; j < block_sectors; ++j)
					if ((touched >> j) & 1u)
						readable &= !reader_.unreadable().contains(data_sector + j);
				r.data_readable[i] = readable;
			}
			slots_.push_back(std::move(r));
		}
	}

	bool slot_usable_for_salvage(const SlotRead& r) const
	{
		if (!r.header_known)
			return false;
		switch (r.verdict.state) {
		case SlotState::valid:
		case SlotState::data_unreadable:
		case SlotState::header_unreadable:
			return true;
		default:
			return false; // a checksum that fails over readable bytes means the content is wrong
		}
	}

	// Every verifiable segment in id order, and the readable metablocks of
	// segments that could not be verified because a sector was unreadable.
	std::shared_ptr<const LogScan> salvage_log()
	{
		auto s = std::make_shared<LogScan>();
		s->geometry = kernel_->geometry;
		s->superblock_readable = kernel_->superblock_readable;
		s->superblock = kernel_->superblock;
		s->sb_record = kernel_->sb_record;
		s->verified = true;
		s->slots = kernel_->slots;
		s->max_id = kernel_->max_id;

		std::vector<const SlotRead*> usable;
		for (const SlotRead& r : slots_)
			if (slot_usable_for_salvage(r))
				usable.push_back(&r);
		std::sort(usable.begin(), usable.end(),
			  [](const SlotRead* a, const SlotRead* b) { return a->header.id < b->header.id; });
		s->last_flushed_id = usable.empty() ? 0 : usable.back()->header.id;
		s->last_writeback_id = wb_last_writeback_id(s->last_flushed_id, s->sb_record, s->geometry.nr_segments);

		std::vector<SectorSource> entries;
		for (const SlotRead* r : usable) {
			const std::uint32_t position = std::uint32_t(s->log.size());
			s->log.push_back(LogSegment{.slot = r->slot,
						    .id = r->header.id,
						    .length = r->header.length,
						    .written_back = r->header.id <= s->last_writeback_id});
			for (unsigned i = 0; i < r->header.length; ++i)
				if (r->metablock_known[i] && r->data_readable[i])
					entries.push_back(SectorSource{.block_sector = r->header.metablocks[i].sector,
								       .log_index = position,
								       .metablock = std::uint8_t(i),
								       .dirty_bits = r->header.metablocks[i].dirty_bits});
		}
		build_sector_index(*s, std::move(entries));

		// One point in time only when salvage took exactly the kernel's log.
		bool same = s->log.size() == kernel_->log.size();
		for (std::size_t i = 0; same && i < s->log.size(); ++i)
			same = s->log[i].slot == kernel_->log[i].slot;
		for (const SlotRead* r : usable)
			for (unsigned i = 0; same && i < r->header.length; ++i)
				same = r->metablock_known[i] && r->data_readable[i];
		report_.single_point_in_time = same;
		return s;
	}

	// Per slot: what the chosen log took, what it left, what is unreadable.
	void account_slots(const LogScan& policy)
	{
		std::vector<std::uint32_t> position(policy.geometry.nr_segments, ~0u);
		for (std::size_t i = 0; i < policy.log.size(); ++i)
			position[policy.log[i].slot] = std::uint32_t(i);
		for (SlotRead& r : slots_) {
			SegmentVerdict& v = r.verdict;
			const std::uint32_t pos = position[r.slot];
			v.used = pos != ~0u;
			const bool written_back = r.header_known && r.header.id <= policy.last_writeback_id;
			// A checksum that fails over readable bytes says the metablocks themselves may be
			// wrong (a torn newest segment, damaged media): nothing in them can be counted.
			const bool trustworthy = r.verdict.state == SlotState::valid ||
						 r.verdict.state == SlotState::data_unreadable ||
						 r.verdict.state == SlotState::header_unreadable;
			if (r.header_known && trustworthy && !written_back) {
				for (unsigned i = 0; i < r.header.length; ++i) {
					if (!r.metablock_known[i])
						continue;
					const Metablock& mb = r.header.metablocks[i];
					const bool taken = v.used && r.data_readable[i];
					v.metablocks_used += taken;
					if (taken || !mb.is_dirty())
						continue;
					// A dirty copy not taken matters only where nothing newer in the chosen log decides.
					std::uint64_t newest_elsewhere = 0;
					for (unsigned j = 0; j < block_sectors; ++j) {
						if (!((mb.dirty_bits >> j) & 1u))
							continue;
						const SectorSource* src = policy.find_sector(mb.sector + j);
						if (src && policy.log[src->log_index].id > r.header.id) {
							newest_elsewhere = std::max(newest_elsewhere, policy.log[src->log_index].id);
							continue;
						}
						if (r.data_readable[i]) {
							++v.left_behind_sectors;
						} else {
							++v.unreadable_dirty_sectors;
							report_.lost.push_back(LostRange{.sector = mb.sector + j,
											 .sectors = 1,
											 .reason = LossReason::cache_copy_unreadable});
						}
					}
				}
			} else if (r.header_known && v.used) {
				v.metablocks_used = r.header.length;
			}
			v.reason = verdict_reason(r, policy, written_back);
			if (v.left_behind_sectors > 0)
				report_.notes.push_back(fmt::format(
					"segment {} (slot {}) holds {} readable dirty sector(s) that were not used ({}){}", v.id,
					v.slot, v.left_behind_sectors, v.reason,
					options_.salvage ? "" : "; --salvage takes them"));
			if (v.reason == "checksum-mismatch")
				report_.notes.push_back(fmt::format(
					"segment {} (slot {}) fails its checksum over readable data: its content is wrong and "
					"not used; what it held is lost",
					v.id, v.slot));
			report_.segments.push_back(v);
		}
		// Lost ranges were collected per sector: merge neighbours with the same reason.
		merge_lost();
	}

	std::string verdict_reason(const SlotRead& r, const LogScan& policy, bool written_back) const
	{
		const SegmentVerdict& v = r.verdict;
		if (!r.header_known)
			return v.reason;
		if (v.used) {
			if (written_back)
				return "already-written-back";
			if (v.state == SlotState::valid)
				return "used";
			return "used-partially";
		}
		const bool newest = r.header.id == kernel_->max_id;
		switch (v.state) {
		case SlotState::checksum_mismatch:
			return newest ? "torn-newest-segment" : "checksum-mismatch";
		case SlotState::legacy_checksum:
			return "legacy-checksum";
		case SlotState::header_unreadable:
		case SlotState::data_unreadable:
			return "unreadable";
		case SlotState::valid:
			return policy.log.empty() || r.header.id > policy.last_flushed_id ? "after-stop-point"
											  : "already-written-back";
		default:
			return std::string(slot_state_name(v.state));
		}
	}

	void merge_lost()
	{
		std::sort(report_.lost.begin(), report_.lost.end(), [](const LostRange& a, const LostRange& b) {
			return a.sector != b.sector ? a.sector < b.sector : a.reason < b.reason;
		});
		std::vector<LostRange> merged;
		for (const LostRange& r : report_.lost) {
			if (!merged.empty() && merged.back().reason == r.reason &&
			    merged.back().sector + merged.back().sectors >= r.sector) {
				LostRange& m = merged.back();
				m.sectors = std::max(m.sector + m.sectors, r.sector + r.sectors) - m.sector;
				continue;
			}
			merged.push_back(r);
		}
		report_.lost = std::move(merged);
	}

	// Reads the whole backing device (copying it to the output if there is
	// one), so unreadable sectors are known before the cache's data goes on.
	void check_backing()
	{
		const std::uint64_t size = backing_.size_bytes();
		constexpr std::uint64_t chunk = 4ULL << 20;
		AlignedBuffer buffer(chunk);
		const std::string_view phase = output_ ? "copying backing" : "reading backing";
		for (std::uint64_t offset = 0; offset < size; offset += chunk) {
			auto part = buffer.span().first(std::min(chunk, size - offset));
			read_tolerant(backing_, offset, part, options_.retries, [&](std::uint64_t at, std::uint64_t length) {
				report_.backing.unreadable.add(at / sector_size, (length + sector_size - 1) / sector_size);
			});
			if (output_)
				write_tolerant(*output_, offset, part, options_.retries, [&](std::uint64_t at, std::uint64_t length) {
					output_failed_.add(at / sector_size, (length + sector_size - 1) / sector_size);
				});
			report_.backing.bytes_checked = offset + part.size();
			if (options_.progress)
				options_.progress(phase, ReplayProgress{.bytes_done = offset + part.size(), .bytes_total = size});
		}
		for (const auto& [first, count] : output_failed_.list())
			report_.lost.push_back(LostRange{.sector = first, .sectors = count, .reason = LossReason::write_failed});
	}

	// A clean cache copy equals what the backing device held: it restores
	// backing sectors that can no longer be read.
	void rescue_clean_copies(const LogScan& policy)
	{
		AlignedBuffer sector(sector_size);
		for (const auto& [first, count] : report_.backing.unreadable.list()) {
			for (std::uint64_t s = first; s < first + count; ++s) {
				const SectorSource* src = policy.find_sector(s);
				if (!src)
					continue;
				const unsigned bit = unsigned(s - src->block_sector);
				if ((src->dirty >> bit) & 1u)
					continue; // the replay writes it
				const std::uint64_t at = policy.source_offset(*src) + bit * sector_size;
				bool ok = read_tolerant(cache_, at, sector.span(), options_.retries, [](std::uint64_t, std::uint64_t) {});
				ok = ok && write_tolerant(*destination_, s * sector_size, sector.span(), options_.retries,
							  [](std::uint64_t, std::uint64_t) {});
				if (ok) {
					rescued_.add(s, 1);
					++report_.sectors_rescued_clean;
				}
			}
		}
	}

	void replay(const LogScan& policy)
	{
		ReplayOptions replay_options = options_.replay;
		replay_options.backing_sectors = backing_.size_bytes() / sector_size;
		ReplayPlan plan = replay_plan(policy, replay_options);
		ExecuteOptions exec;
		exec.retries = options_.retries;
		if (options_.progress)
			exec.progress = [&](const ReplayProgress& p) { options_.progress("replay", p); };
		exec.on_failure = [&](std::uint64_t sector, std::uint64_t sectors, ReplayFailure kind) {
			failed_.add(sector, sectors);
			report_.lost.push_back(LostRange{.sector = sector,
							 .sectors = sectors,
							 .reason = kind == ReplayFailure::write_failed ? LossReason::write_failed
												       : LossReason::cache_copy_unreadable});
		};
		ReplayResult result = execute_replay(plan, cache_, *destination_, exec);
		report_.extents = result.extents_written;
		report_.bytes_written = result.bytes_written;
		report_.sectors_from_cache = plan.summary().dirty_sectors - result.failed_sectors;
		if (plan.summary().skipped_sectors > 0)
			report_.notes.push_back(fmt::format("{} dirty sector(s) lie past the end of the backing device "
							    "(first: sector {}) and were not written",
							    plan.summary().skipped_sectors, *plan.summary().first_skipped_sector));
		const std::uint64_t end = *replay_options.backing_sectors;
		for (const SectorSource& src : policy.index)
			for (unsigned j = 0; j < block_sectors; ++j)
				if (((src.dirty >> j) & 1u) && src.block_sector + j >= end)
					report_.lost.push_back(LostRange{.sector = src.block_sector + j,
									 .sectors = 1,
									 .reason = LossReason::beyond_backing});
	}

	// Unreadable backing sectors that neither the replay nor a clean copy restored.
	void classify_unreadable_backing(const LogScan& policy)
	{
		for (const auto& [first, count] : report_.backing.unreadable.list()) {
			std::uint64_t run_start = 0;
			std::uint64_t run_length = 0;
			auto close_run = [&] {
				if (run_length)
					report_.lost.push_back(LostRange{.sector = run_start,
									 .sectors = run_length,
									 .reason = LossReason::backing_unreadable});
				run_length = 0;
			};
			for (std::uint64_t s = first; s < first + count; ++s) {
				const SectorSource* src = policy.find_sector(s);
				const bool replayed = src && ((src->dirty >> (s - src->block_sector)) & 1u) && !failed_.contains(s);
				if (replayed || rescued_.contains(s) || failed_.contains(s)) {
					close_run();
					continue;
				}
				if (run_length == 0)
					run_start = s;
				++run_length;
			}
			close_run();
		}
		merge_lost();
	}

	Device& cache_;
	Device& backing_;
	Device* output_;
	Device* destination_ = nullptr;
	const RecoverOptions& options_;
	TolerantReader reader_;
	std::shared_ptr<LogScan> kernel_;
	std::vector<SlotRead> slots_;
	SectorRanges failed_;
	SectorRanges rescued_;
	SectorRanges output_failed_;
	std::uint64_t bytes_read_cache_ = 0;
	RecoveryReport report_;
};

nlohmann::json ranges_json(const SectorRanges& ranges)
{
	nlohmann::json list = nlohmann::json::array();
	for (const auto& [first, count] : ranges.list())
		list.push_back({{"sector", first}, {"sectors", count}});
	return list;
}

nlohmann::json diagnosis_json(const DeviceDiagnosis& d)
{
	return {{"path", d.path},
		{"size_bytes", d.size_bytes},
		{"readable", d.unreadable.empty()},
		{"unreadable_sectors", d.unreadable.total_sectors()},
		{"unreadable", ranges_json(d.unreadable)}};
}

} // namespace

RecoveryReport recover(Device& cache, Device& backing, Device* output, const RecoverOptions& options)
{
	return Recovery(cache, backing, output, options).run();
}

nlohmann::json recovery_json(const RecoveryReport& r)
{
	nlohmann::json segments = nlohmann::json::array();
	for (const SegmentVerdict& v : r.segments)
		segments.push_back({{"slot", v.slot},
				    {"id", v.id},
				    {"state", std::string(slot_state_name(v.state))},
				    {"in_kernel_log", v.in_kernel_log},
				    {"used", v.used},
				    {"reason", v.reason},
				    {"metablocks", v.metablocks},
				    {"metablocks_used", v.metablocks_used},
				    {"unreadable_dirty_sectors", v.unreadable_dirty_sectors},
				    {"left_behind_sectors", v.left_behind_sectors}});
	nlohmann::json lost = nlohmann::json::array();
	for (const LostRange& l : r.lost)
		lost.push_back({{"sector", l.sector},
				{"sectors", l.sectors},
				{"bytes", l.sectors * sector_size},
				{"reason", std::string(loss_reason_name(l.reason))}});
	nlohmann::json findings = nlohmann::json::array();
	for (const Finding& f : r.findings)
		findings.push_back(finding_json(f));
	return {
		{"schema", schema_wbrecover},
		{"policy", r.salvage ? "salvage" : "kernel"},
		{"forced", r.overridden},
		{"single_point_in_time", r.single_point_in_time},
		{"devices",
		 {{"cache", diagnosis_json(r.cache)},
		  {"backing", diagnosis_json(r.backing)},
		  {"output", r.output ? nlohmann::json(*r.output) : nlohmann::json(nullptr)}}},
		{"geometry", r.kernel_log ? geometry_json(*r.kernel_log) : nlohmann::json(nullptr)},
		{"log", r.kernel_log ? log_json(*r.kernel_log) : nlohmann::json(nullptr)},
		{"diagnosis",
		 {{"unreadable_header_slots", r.unreadable_header_slots},
		  {"checksum_failed_slots", r.checksum_failed_slots},
		  {"findings", findings}}},
		{"segments", segments},
		{"recovered",
		 {{"extents", r.extents},
		  {"sectors_from_cache", r.sectors_from_cache},
		  {"sectors_rescued_from_clean_copies", r.sectors_rescued_clean},
		  {"bytes_written", r.bytes_written}}},
		{"lost", lost},
		{"lost_sectors", r.lost_sectors()},
		{"notes", r.notes},
		{"nothing_lost", r.nothing_lost()},
	};
}

void print_recovery(std::ostream& out, const RecoveryReport& r)
{
	auto device_line = [&](std::string_view name, const DeviceDiagnosis& d) {
		if (d.unreadable.empty())
			fmt::print(out, "{:<8} {} ({}): readable\n", name, d.path, human_bytes(d.size_bytes));
		else
			fmt::print(out, "{:<8} {} ({}): {} unreadable sector(s) in {} range(s)\n", name, d.path,
				   human_bytes(d.size_bytes), d.unreadable.total_sectors(), d.unreadable.list().size());
	};
	out << "diagnosis\n";
	device_line("cache", r.cache);
	device_line("backing", r.backing);
	if (!r.unreadable_header_slots.empty())
		fmt::print(out, "  unreadable segment headers in slot(s): {}\n", fmt::join(r.unreadable_header_slots, ", "));
	if (!r.checksum_failed_slots.empty())
		fmt::print(out, "  segments failing their checksum in slot(s): {}\n", fmt::join(r.checksum_failed_slots, ", "));
	fmt::print(out, "  log: max id {}, kernel replay applies up to segment {} (stop: {}{})\n", r.max_id,
		   r.last_flushed_id, stop_reason_name(r.stop_reason),
		   r.stop_slot ? fmt::format(" at slot {}", *r.stop_slot) : std::string());

	fmt::print(out, "\npolicy: {}\n", r.salvage ? "salvage (beyond the kernel's consistent prefix)" : "kernel (consistent prefix of the log)");
	if (!r.single_point_in_time)
		out << "  note: the result is NOT a single point in time: it combines segments past a gap or damage\n";
	for (const SegmentVerdict& v : r.segments)
		if (v.reason != "used" && v.reason != "already-written-back")
			fmt::print(out, "  slot {} segment {}: {} ({} of {} metablocks used)\n", v.slot, v.id, v.reason,
				   v.metablocks_used, v.metablocks);
	if (r.output)
		fmt::print(out, "\nwritten to {} (the backing device was not modified)\n", *r.output);
	fmt::print(out, "\nrecovered: {} sector(s) from the cache in {} write(s), {} unreadable backing sector(s) "
			"restored from clean cache copies\n",
		   r.sectors_from_cache, r.extents, r.sectors_rescued_clean);
	for (const std::string& note : r.notes)
		fmt::print(out, "  {}\n", note);
	if (r.lost.empty()) {
		out << "lost: nothing\n";
	} else {
		fmt::print(out, "lost: {} sector(s) in {} range(s) (backing sectors, 512 bytes each):\n", r.lost_sectors(),
			   r.lost.size());
		for (const LostRange& l : r.lost)
			fmt::print(out, "  sectors {}..{} ({} sector(s)): {}\n", l.sector, l.sector + l.sectors - 1, l.sectors,
				   loss_reason_name(l.reason));
	}
}

} // namespace wbkit
