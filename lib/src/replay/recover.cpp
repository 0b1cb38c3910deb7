#include "wbkit/recover.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <memory>

#include "wbkit/errors.hpp"
#include "wbkit/safety.hpp"

namespace wbkit {

std::string_view loss_reason_name(LossReason reason)
{
	// In the enumerators' order. Names are stable: scripts match on them.
	constexpr std::array<std::string_view, 4> names{"backing-unreadable", "cache-copy-unreadable", "write-failed",
							"beyond-backing"};
	const auto i = std::size_t(reason);
	return i < names.size() ? names[i] : "unknown";
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
	return record_hidden_segments > 0 || std::any_of(segments.begin(), segments.end(), [](const SegmentUse& v) {
		       // A failed checksum over readable bytes, or an unreadable header: what the segment held is gone.
		       return v.left_behind_sectors > 0 || v.reason == SegmentReason::checksum_mismatch ||
			      v.reason == SegmentReason::header_unreadable;
	       });
}

namespace {

// Where a dry run's writes go: it takes every write and keeps nothing, so the
// dry run reads and decides exactly what a real run does, up to the writes.
class DiscardingDevice final : public Device {
public:
	DiscardingDevice(std::string path, std::uint64_t size) : path_(std::move(path)), size_(size) {}

	const std::string& path() const noexcept override { return path_; }
	std::uint64_t size_bytes() const noexcept override { return size_; }
	bool is_block_device() const noexcept override { return false; }
	DeviceIdentity identity() const noexcept override { return {}; }
	// Alignment 1, as the real destinations (opened buffered): the replay
	// never reads a destination back to widen a write, so this is not reached.
	int read_at(std::uint64_t, std::span<std::byte>) noexcept override { return EIO; }
	int write_at(std::uint64_t, std::span<const std::byte>) noexcept override { return 0; }
	int flush() noexcept override { return 0; }

private:
	std::string path_;
	std::uint64_t size_;
};

// One non-empty slot as far as it could be read.
struct SlotRead {
	std::uint64_t slot = 0;
	SegmentUse verdict;
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
		const bool has_output = output_ != nullptr || (options_.dry_run && !options_.output_path.empty());
		if (options_.dry_run) {
			sink_.emplace(has_output ? (output_ ? output_->path() : options_.output_path) : backing_.path(),
				      backing_.size_bytes());
			destination_ = &*sink_;
		} else {
			destination_ = output_ ? output_ : &backing_;
		}
		copy_to_ = has_output ? destination_ : nullptr;
	}

	RecoveryReport run()
	{
		report_.salvage = options_.salvage;
		report_.dry_run = options_.dry_run;
		report_.cache.path = cache_.path();
		report_.cache.size_bytes = cache_.size_bytes();
		report_.backing.path = backing_.path();
		report_.backing.size_bytes = backing_.size_bytes();
		if (copy_to_)
			report_.output = copy_to_->path();

		check_distinct(cache_, "the cache", backing_, "the backing device");
		if (output_) {
			check_distinct(*output_, "the output", cache_, "the cache");
			check_distinct(*output_, "the output", backing_, "the backing device");
			if (output_->is_block_device() && output_->size_bytes() < backing_.size_bytes())
				refuse(Refusal::output_too_small,
				       {.backing = backing_.path(),
					.backing_bytes = backing_.size_bytes(),
					.output = output_->path(),
					.output_bytes = output_->size_bytes()},
				       false, report_.overridden);
		}
		const ScanOptions scan_options{.verify_checksums = true,
					       .backing_bytes = backing_.size_bytes(),
					       .torn_rewrites = options_.torn_rewrites,
					       .progress = options_.progress};
		kernel_ = std::make_shared<LogScan>(scan_log(reader_, scan_options));
		check_safety();
		diagnose();
		if (!options_.salvage)
			note_record_hiding_segments();
		note_torn_rewrite();
		note_refusal();
		read_slots();
		std::shared_ptr<const LogScan> policy = options_.salvage ? salvage_log() : kernel_;
		account_slots(*policy);

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
	// A record past max_id is corrupt (sb-record-out-of-range). The kernel takes it as is, so
	// everything up to last_flushed_id counts as written back and is never replayed.
	bool record_past_log() const { return kernel_->sb_record != 0 && kernel_->sb_record > kernel_->max_id; }

	void note_record_hiding_segments()
	{
		const LogScan& k = *kernel_;
		if (!record_past_log())
			return;
		const std::uint64_t inferred = wb_previous_lap_id(k.last_flushed_id, k.geometry.nr_segments);
		for (const LogSegment& seg : k.log)
			report_.record_hidden_segments += seg.id > inferred;
		if (report_.record_hidden_segments > 0)
			report_.notes.push_back(fmt::format(
				"the superblock record ({}) is past the newest segment id ({}) (sb-record-out-of-range): "
				"the kernel takes every segment up to it as written back, so {} segment(s) up to {} are not "
				"replayed; --salvage replays them",
				k.sb_record, k.max_id, report_.record_hidden_segments, k.last_flushed_id));
	}

	// What upstream's replay, which stops at the first bad checksum, would
	// have lost on a cache whose walk skipped a torn rewrite.
	void note_torn_rewrite()
	{
		const LogScan& k = *kernel_;
		if (!k.rewrite_slot)
			return;
		report_.torn_rewrite = RecoveryReport::TornRewrite{.slot = *k.rewrite_slot,
								   .segment_id = k.rewritten_id,
								   .upstream_dropped_segments = k.log.size(),
								   .upstream_lost_sectors = k.dirty_sectors};
		std::string dropped = "nothing after it";
		if (!k.log.empty())
			dropped = fmt::format("the {} segment(s) after it (ids {}..{}), the newest data of {} dirty sector(s)",
					      k.log.size(), k.log.front().id, k.log.back().id, k.dirty_sectors);
		report_.notes.push_back(fmt::format(
			"slot {} (segment {}) was being rewritten when the power was cut (torn-rewrite-skipped): the log "
			"starts after it, and segments up to {} count as written back. Upstream's replay stops at the first "
			"checksum that fails, and would not replay {}",
			*k.rewrite_slot, k.rewritten_id, k.rewritten_id, dropped));
	}

	// The kernel would not construct on this log (wb_replay_decide): say so,
	// with the way out this tool offers.
	void note_refusal()
	{
		const LogScan& k = *kernel_;
		if (!k.refused())
			return;
		report_.notes.push_back(fmt::format(
			"the kernel refuses this log (log-refused): slot {}, segment {}: {}. {}",
			k.decision.refusal_slot, k.decision.refusal_id, wb_replay_refusal_text(k.decision.refusal),
			options_.salvage ? "--salvage takes the segments after the damage too"
					 : "this run replays the part before it; --salvage also takes the segments after it"));
	}

	// Whether the kernel's walk skipped this slot as a torn rewrite (the last
	// one, or one before it).
	bool skipped_as_torn_rewrite(const SlotRead& r) const
	{
		const LogScan& k = *kernel_;
		if (!k.rewrite_slot || slot_state_info(r.verdict.state).in_log)
			return false;
		const std::uint64_t nr = k.geometry.nr_segments;
		const std::uint64_t oldest = wb_oldest_slot(k.max_id, nr);
		auto step = [&](std::uint64_t slot) { return slot >= oldest ? slot - oldest : slot + nr - oldest; };
		return step(r.slot) <= step(*k.rewrite_slot);
	}

	// An unreadable superblock is one of the cases this tool is for; a
	// readable wrong magic is not. Salvage may take any segment, so every
	// block past the backing device's end counts.
	void check_safety()
	{
		report_.overridden = check_cache_safety(cache_, backing_, *kernel_,
							{.force = options_.force,
							 .superblock_must_be_readable = false,
							 .beyond_backing_in_log_only = false});
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
			r.verdict = SegmentUse{.slot = slot, .id = info.id, .state = info.state, .in_kernel_log = info.in_log};
			const std::uint64_t offset = k.geometry.slot_offset(slot);
			reader_.read_at(offset, header_block.span());
			const std::uint64_t first_sector = offset / sector_size;
			if (reader_.unreadable().contains(first_sector)) {
				r.verdict.reason = SegmentReason::header_unreadable;
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
				r.verdict.reason = r.header.length_valid() ? SegmentReason::slot_mismatch
									   : SegmentReason::length_too_large;
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
		// A torn rewrite proves its id and every older one written back, whatever the policy.
		s->last_writeback_id = std::max<std::uint64_t>(
			wb_last_writeback_id(s->last_flushed_id, s->sb_record, s->geometry.nr_segments), kernel_->rewritten_id);
		if (record_past_log()) {
			const std::uint64_t inferred = wb_previous_lap_id(s->last_flushed_id, s->geometry.nr_segments);
			s->last_writeback_id = std::max<std::uint64_t>(inferred, kernel_->rewritten_id);
			report_.notes.push_back(fmt::format(
				"the superblock record ({}) is past the newest segment id ({}), which cannot be true: no "
				"segment newer than the newest was ever written back. Salvage ignores it and replays the "
				"whole ring from segment {}. That is safe: a replay writes absolute data, oldest first and "
				"newest wins per sector, so segments that were in fact written back put the same data the "
				"backing device already received from them (unless the backing device was written directly, "
				"without the cache, since)",
				s->sb_record, s->max_id, inferred + 1));
		}

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

		// One point in time only when salvage took exactly the kernel's log
		// (segments a torn rewrite counts as written back aside: they
		// precede it, and no data of theirs is written).
		std::size_t first = 0;
		while (first < s->log.size() && s->log[first].id <= kernel_->rewritten_id)
			++first;
		bool same = s->log.size() - first == kernel_->log.size();
		for (std::size_t i = 0; same && first + i < s->log.size(); ++i)
			same = s->log[first + i].slot == kernel_->log[i].slot;
		for (const SlotRead* r : usable)
			for (unsigned i = 0; same && i < r->header.length; ++i)
				same = r->metablock_known[i] && r->data_readable[i];
		report_.single_point_in_time = same;
		return s;
	}

	// Per slot: what the chosen log took, what it left, what is unreadable.
	void account_slots(const LogScan& policy)
	{
		const std::vector<std::uint32_t> position = policy.log_positions();
		for (SlotRead& r : slots_) {
			SegmentUse& v = r.verdict;
			const std::uint32_t pos = position[r.slot];
			v.used = pos != LogScan::not_in_log;
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
					for (unsigned j = 0; j < block_sectors; ++j) {
						if (!((mb.dirty_bits >> j) & 1u))
							continue;
						const std::optional<SectorSource> src = policy.find_sector(mb.sector + j);
						if (src && policy.log[src->log_index].id > r.header.id)
							continue;
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
					v.slot, v.left_behind_sectors, segment_reason_name(v.reason),
					options_.salvage ? "" : "; --salvage takes them"));
			if (v.reason == SegmentReason::checksum_mismatch)
				report_.notes.push_back(fmt::format(
					"segment {} (slot {}) fails its checksum over readable data: its content is wrong and "
					"not used; what it held is lost",
					v.id, v.slot));
			report_.segments.push_back(v);
		}
		// Lost ranges were collected per sector: merge neighbours with the same reason.
		merge_lost();
	}

	SegmentReason verdict_reason(const SlotRead& r, const LogScan& policy, bool written_back) const
	{
		const SegmentUse& v = r.verdict;
		if (!r.header_known)
			return v.reason;
		if (!v.used && skipped_as_torn_rewrite(r))
			return SegmentReason::torn_rewrite;
		if (v.used) {
			if (written_back)
				return SegmentReason::already_written_back;
			return v.state == SlotState::valid ? SegmentReason::used : SegmentReason::used_partially;
		}
		// A good segment the policy left out that is not newer than its log was written back.
		if (v.state == SlotState::valid && !policy.log.empty() && r.header.id <= policy.last_flushed_id)
			return SegmentReason::already_written_back;
		return left_out_reason(v.state, r.header.id == kernel_->max_id);
	}

	void merge_lost()
	{
		std::sort(report_.lost.begin(), report_.lost.end(), [](const LostRange& a, const LostRange& b) {
			return a.sector != b.sector ? a.sector < b.sector : a.reason < b.reason;
		});
		std::vector<LostRange> merged;
		for (const LostRange& r : report_.lost) {
			// Sorted by sector, so r.sector >= m.sector; ends are never computed, as a
			// range may end at 2^64 exactly (sector 2^64 - 1 is a valid sector).
			if (!merged.empty() && merged.back().reason == r.reason &&
			    r.sector - merged.back().sector <= merged.back().sectors) {
				LostRange& m = merged.back();
				m.sectors = std::max(m.sectors, r.sector - m.sector + r.sectors);
				continue;
			}
			merged.push_back(r);
		}
		report_.lost = std::move(merged);
	}

	// Reads the whole backing device (copying it to the output if there is
	// one), so unreadable sectors are known before the cache's data goes on.
	// A dry run reads it all the same: its unreadable sectors decide what is lost.
	void check_backing()
	{
		const std::uint64_t size = backing_.size_bytes();
		const std::uint64_t chunk = std::min<std::uint64_t>(4ULL << 20, (size + block_size - 1) / block_size * block_size);
		// Not zeroed: read_tolerant fills every byte (zeros where the read fails) before it is copied.
		AlignedBuffer buffer(chunk, AlignedBuffer::uninitialised);
		const std::string_view phase = copy_to_ && !options_.dry_run ? "copying backing" : "reading backing";
		for (std::uint64_t offset = 0; offset < size; offset += chunk) {
			auto part = buffer.span().first(std::min(chunk, size - offset));
			read_tolerant(backing_, offset, part, options_.retries, [&](std::uint64_t at, std::uint64_t length) {
				report_.backing.unreadable.add(at / sector_size, (length + sector_size - 1) / sector_size);
			});
			if (copy_to_)
				write_tolerant(*copy_to_, offset, part, options_.retries, [&](std::uint64_t at, std::uint64_t length) {
					output_failed_.add(at / sector_size, (length + sector_size - 1) / sector_size);
				});
			report_.backing.bytes_checked = offset + part.size();
			if (options_.progress)
				options_.progress(phase, offset + part.size(), size);
		}
		for (const auto& [first, count] : output_failed_.list())
			report_.lost.push_back(LostRange{.sector = first, .sectors = count, .reason = LossReason::write_failed});
	}

	// A clean cache copy equals what the backing device held, unless the
	// backing device changed outside the log since (the trust record says
	// so): such a copy restores backing sectors that can no longer be read.
	// Without a record nothing is known, and the copy is used, as before
	// the record existed (upstream's own reading).
	void rescue_clean_copies(const LogScan& policy)
	{
		AlignedBuffer sector(sector_size);
		std::uint64_t untrusted = 0;
		for (const auto& [first, count] : report_.backing.unreadable.list()) {
			for (std::uint64_t s = first; s < first + count; ++s) {
				const std::optional<SectorSource> src = policy.find_sector(s);
				if (!src)
					continue;
				const unsigned bit = unsigned(s - src->block_sector);
				if ((src->dirty >> bit) & 1u)
					continue; // the replay writes it
				if (policy.trust_record &&
				    !wb_clean_copy_trusted(policy.log[src->log_index].id, policy.trusted_from_id)) {
					++untrusted;
					continue;
				}
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
		if (untrusted > 0)
			report_.notes.push_back(fmt::format(
				"{} unreadable backing sector(s) have a clean copy on the cache that was not used: "
				"the trust record does not cover it (a write-around session or an offline repair "
				"may have changed the backing device since it was logged)",
				untrusted));
	}

	void replay(const LogScan& policy)
	{
		ReplayOptions replay_options = options_.replay;
		replay_options.backing_sectors = backing_.size_bytes() / sector_size;
		ReplayPlan plan = replay_plan(policy, replay_options);
		const std::vector<std::uint32_t> position = policy.log_positions();
		for (SegmentUse& v : report_.segments)
			if (v.used)
				v.sectors_replayed = plan.sectors_per_segment()[position[v.slot]];
		ExecuteOptions exec;
		exec.retries = options_.retries;
		exec.progress = options_.progress;
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
				if (((src.dirty >> j) & 1u) && src.block_sector + j >= end && src.block_sector + j >= src.block_sector)
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
				const std::optional<SectorSource> src = policy.find_sector(s);
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
	Device* destination_ = nullptr; // where the cache's data goes: the output, the backing device or the sink
	Device* copy_to_ = nullptr;     // where the backing device is copied first: the output or the sink
	std::optional<DiscardingDevice> sink_;
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

} // namespace

RecoveryReport recover(Device& cache, Device& backing, Device* output, const RecoverOptions& options)
{
	return Recovery(cache, backing, output, options).run();
}

} // namespace wbkit
