#include "wbkit/replay.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <cstring>
#include <mutex>
#include <thread>
#include <fmt/format.h>

#include "wbkit/errors.hpp"
#include "wbkit/identity.hpp"
#include "wbkit/tolerant_io.hpp"

namespace wbkit {

ReplayPlan::ReplayPlan(std::shared_ptr<const LogScan> scan, const ReplayOptions& options)
	: scan_(std::move(scan)), options_(options),
	  max_extent_sectors_(std::max<std::uint64_t>(block_sectors, options.max_extent_bytes / sector_size))
{
	summary_.segments_in_log = scan_->log.size();
	for (const LogSegment& seg : scan_->log)
		summary_.segments_written_back += seg.written_back;
	sectors_per_segment_.assign(scan_->log.size(), 0);

	// One pass over the plan gives the numbers a dry run prints; the
	// extents themselves are generated again when they are executed.
	Cursor cursor(*this);
	cursor.accounting_ = this;
	std::uint64_t last_block = ~0ULL;
	while (auto extent = cursor.next()) {
		++summary_.extents;
		summary_.dirty_sectors += extent->sectors;
		// Inclusive bounds: an extent may end at the last sector of the 64-bit space.
		const std::uint64_t first = extent->backing_sector & ~(block_sectors - 1);
		const std::uint64_t final = (extent->backing_sector + extent->sectors - 1) & ~(block_sectors - 1);
		for (std::uint64_t s = first;; s += block_sectors) {
			if (s != last_block) {
				++summary_.dirty_blocks;
				last_block = s;
			}
			if (s == final)
				break;
		}
	}
	summary_.bytes = summary_.dirty_sectors * sector_size;
	for (std::uint64_t n : sectors_per_segment_)
		summary_.segments_contributing += n > 0;
}

bool ReplayPlan::Cursor::load_block()
{
	const LogScan& scan = *plan_->scan_;
	const ReplayOptions& options = plan_->options_;
	while (position_ < scan.index.size()) {
		const std::uint64_t block = scan.index.block_sector(position_);
		mask_ = 0;
		for (; position_ < scan.index.size(); ++position_) {
			const SectorSource source = scan.index[position_];
			if (source.block_sector != block)
				break;
			for (unsigned j = 0; j < block_sectors; ++j)
				if ((source.dirty >> j) & 1u)
					owner_[j] = source;
			mask_ |= source.dirty;
		}
		{
			// Sectors past the backing device, or past 2^64 (a damaged
			// metablock near the top of the address space), cannot be written.
			const std::uint64_t end = options.backing_sectors.value_or(~0ULL);
			for (unsigned j = 0; j < block_sectors; ++j) {
				const bool wraps = block > ~0ULL - j;
				if (!((mask_ >> j) & 1u) || (!wraps && block + j < end))
					continue;
				mask_ = std::uint8_t(mask_ & ~(1u << j));
				if (accounting_) {
					++accounting_->summary_.skipped_sectors;
					if (!accounting_->summary_.first_skipped_sector)
						accounting_->summary_.first_skipped_sector = block + j;
				}
			}
		}
		if (mask_ == 0)
			continue;
		if (accounting_)
			for (unsigned j = 0; j < block_sectors; ++j)
				if ((mask_ >> j) & 1u)
					++accounting_->sectors_per_segment_[owner_[j].log_index];
		block_sector_ = block;
		next_sector_ = 0;
		have_block_ = true;
		return true;
	}
	return false;
}

std::optional<ReplayExtent> ReplayPlan::Cursor::next()
{
	const LogScan& scan = *plan_->scan_;
	ReplayExtent extent;
	for (;;) {
		if (!have_block_ && !load_block())
			break;
		for (; next_sector_ < block_sectors; ++next_sector_) {
			if (!((mask_ >> next_sector_) & 1u))
				continue;
			const std::uint64_t sector = block_sector_ + next_sector_;
			if (extent.sectors > 0 &&
			    (sector != extent.backing_sector + extent.sectors || extent.sectors >= plan_->max_extent_sectors_))
				return extent;
			if (extent.sectors == 0)
				extent.backing_sector = sector;
			const SectorSource& source = owner_[next_sector_];
			const LogSegment& segment = scan.log[source.log_index];
			const std::uint64_t cache_offset = scan.source_offset(source) + next_sector_ * sector_size;
			if (!extent.sources.empty()) {
				ExtentSource& last = extent.sources.back();
				if (last.segment_id == segment.id && last.cache_offset + last.sectors * sector_size == cache_offset) {
					++last.sectors;
					++extent.sectors;
					continue;
				}
			}
			extent.sources.push_back(ExtentSource{.cache_offset = cache_offset,
							      .extent_sector = extent.sectors,
							      .sectors = 1,
							      .segment_id = segment.id,
							      .slot = segment.slot});
			++extent.sectors;
		}
		have_block_ = false;
	}
	if (extent.sectors == 0)
		return std::nullopt;
	return extent;
}

void ReplayPlan::for_each_extent(const std::function<void(const ReplayExtent&)>& visit) const
{
	Cursor cursor = extents();
	while (auto extent = cursor.next())
		visit(*extent);
}

ReplayPlan replay_plan(std::shared_ptr<const LogScan> scan, const ReplayOptions& options)
{
	return ReplayPlan(std::move(scan), options);
}

ReplayPlan replay_plan(const LogScan& scan, const ReplayOptions& options)
{
	return ReplayPlan(std::shared_ptr<const LogScan>(&scan, [](const LogScan*) {}), options);
}

namespace {

std::uint64_t round_down(std::uint64_t value, std::uint64_t to) { return value / to * to; }
std::uint64_t round_up(std::uint64_t value, std::uint64_t to) { return (value + to - 1) / to * to; }

// One extent in flight: while the writer sends one stage to the
// destination, a reader thread fills the other from the cache.
struct Stage {
	// Not zeroed (up to 2 x 4 MiB per replay): the sources of an extent
	// cover it, every byte of data is read (or zero-filled where the read
	// fails) before it is written, and bounce is read before it is copied.
	explicit Stage(std::uint64_t bytes)
		: data(bytes, AlignedBuffer::uninitialised), bounce(bytes, AlignedBuffer::uninitialised)
	{
	}
	AlignedBuffer data;
	AlignedBuffer bounce; // aligned window when the cache needs O_DIRECT alignment
	ReplayExtent extent;
	std::vector<bool> bad; // per sector of the extent: the cache copy could not be read
	bool any_bad = false;
	std::uint64_t read_requests = 0;
};

// The executor's reader thread: one for the whole replay, started at the
// second extent. A thread per extent cost more than reading a small extent.
class ReadAhead {
public:
	explicit ReadAhead(std::function<void(Stage&)> read) : read_(std::move(read)) {}
	ReadAhead(const ReadAhead&) = delete;
	ReadAhead& operator=(const ReadAhead&) = delete;
	// After the read in flight, if any: the stage it fills outlives this.
	~ReadAhead()
	{
		if (!thread_.joinable())
			return;
		{
			std::lock_guard lock(mutex_);
			quit_ = true;
		}
		changed_.notify_all();
		thread_.join();
	}

	// Starts filling stage; the read started before was waited for.
	void start(Stage& stage)
	{
		if (!thread_.joinable())
			thread_ = std::thread([this] { loop(); });
		{
			std::lock_guard lock(mutex_);
			pending_ = &stage;
			busy_ = true;
		}
		changed_.notify_all();
	}

	// Waits for the read start() began; rethrows what it threw.
	void wait()
	{
		std::unique_lock lock(mutex_);
		changed_.wait(lock, [&] { return !busy_; });
		if (failure_)
			std::rethrow_exception(std::exchange(failure_, nullptr));
	}

private:
	void loop()
	{
		std::unique_lock lock(mutex_);
		for (;;) {
			changed_.wait(lock, [&] { return pending_ || quit_; });
			if (!pending_)
				return;
			Stage* stage = std::exchange(pending_, nullptr);
			lock.unlock();
			std::exception_ptr failure;
			try {
				read_(*stage);
			} catch (...) {
				failure = std::current_exception();
			}
			lock.lock();
			failure_ = failure;
			busy_ = false;
			changed_.notify_all();
		}
	}

	std::function<void(Stage&)> read_;
	std::mutex mutex_;
	std::condition_variable changed_;
	Stage* pending_ = nullptr; // under mutex_, as the rest
	bool busy_ = false;
	bool quit_ = false;
	std::exception_ptr failure_;
	std::thread thread_;
};

class Executor {
public:
	Executor(const ReplayPlan& plan, Device& cache, Device& destination, const ExecuteOptions& options)
		: plan_(plan), cache_(cache), destination_(destination), options_(options),
		  max_bytes_(std::max<std::uint64_t>(block_size, plan.options().max_extent_bytes / sector_size * sector_size)),
		  rmw_(max_bytes_ + 2 * block_size, AlignedBuffer::uninitialised) // read before it is written
	{
	}

	ReplayResult run()
	{
		const auto start = std::chrono::steady_clock::now();
		const std::uint64_t total = plan_.summary().bytes;
		Stage stages[2] = {Stage(max_bytes_ + 2 * block_size), Stage(max_bytes_ + 2 * block_size)};
		ReadAhead read_ahead([this](Stage& stage) { read_stage(stage); }); // after stages: ends first
		ReplayPlan::Cursor cursor = plan_.extents();
		std::optional<ReplayExtent> next = cursor.next();
		Stage* current = &stages[0];
		if (next) {
			current->extent = std::move(*next);
			read_stage(*current);
		}
		while (next) {
			next = cursor.next();
			Stage* ahead = current == &stages[0] ? &stages[1] : &stages[0];
			const bool reading = next.has_value();
			if (reading) {
				ahead->extent = std::move(*next);
				read_ahead.start(*ahead);
			}
			if (options_.may_write && !options_.may_write(current->extent)) {
				if (reading)
					read_ahead.wait();
				result_.stopped = true;
				break;
			}
			write_stage(*current);
			result_.read_requests += current->read_requests;
			++result_.extents_written;
			done_ += current->extent.bytes();
			if (options_.progress)
				options_.progress(ReplayProgress{.bytes_done = done_, .bytes_total = total});
			if (reading)
				read_ahead.wait(); // rethrows a read error of the reader thread
			current = ahead;
		}
		// Ordering: nothing is reported as replayed before the destination has it on stable media.
		destination_.flush_or_throw();
		if (options_.unaligned_destination && options_.unaligned_destination != &destination_)
			options_.unaligned_destination->flush_or_throw();
		result_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
		return result_;
	}

private:
	void read_stage(Stage& stage)
	{
		stage.bad.assign(stage.extent.sectors, false);
		stage.any_bad = false;
		stage.read_requests = 0;
		for (const ExtentSource& source : stage.extent.sources)
			stage.any_bad |= !read_source(stage, source);
	}

	void write_stage(const Stage& stage)
	{
		const ReplayExtent& extent = stage.extent;
		if (!stage.any_bad) {
			write(extent.backing_sector, stage.data.span().first(extent.bytes()));
			return;
		}
		// Write the runs of sectors whose cache copy could be read.
		for (std::uint64_t s = 0; s < extent.sectors;) {
			if (stage.bad[s]) {
				++s;
				continue;
			}
			std::uint64_t e = s;
			while (e < extent.sectors && !stage.bad[e])
				++e;
			write(extent.backing_sector + s, stage.data.span().subspan(s * sector_size, (e - s) * sector_size));
			s = e;
		}
	}

	// Returns false when some sectors could not be read (marked in stage.bad).
	bool read_source(Stage& stage, const ExtentSource& source)
	{
		const ReplayExtent& extent = stage.extent;
		std::span<std::byte> dest = stage.data.span().subspan(source.extent_sector * sector_size, source.sectors * sector_size);
		const std::uint64_t align = cache_.required_alignment();
		const std::uint64_t begin = round_down(source.cache_offset, align);
		const std::uint64_t end = round_up(source.cache_offset + dest.size(), align);
		const bool direct_ok = begin == source.cache_offset && end == source.cache_offset + dest.size() &&
				       reinterpret_cast<std::uintptr_t>(dest.data()) % align == 0;
		std::span<std::byte> target = direct_ok ? dest : stage.bounce.span().first(end - begin);
		++stage.read_requests;
		int err = cache_.read_at(begin, target);
		if (err && !options_.on_failure)
			throw IoError(fmt::format("reading {} bytes of segment {} at cache offset {} failed", target.size(),
						  source.segment_id, begin),
				      cache_.path(), err);
		bool complete = true;
		if (err) {
			complete = read_tolerant(cache_, begin, target, options_.retries, [&](std::uint64_t offset, std::uint64_t length) {
				// Map the unreadable cache bytes back to the extent's sectors.
				const std::uint64_t lo = std::max(offset, source.cache_offset);
				const std::uint64_t hi = std::min(offset + length, source.cache_offset + dest.size());
				if (lo >= hi)
					return;
				const std::uint64_t first = (lo - source.cache_offset) / sector_size;
				const std::uint64_t last = (hi - source.cache_offset + sector_size - 1) / sector_size;
				for (std::uint64_t s = first; s < last; ++s)
					stage.bad[source.extent_sector + s] = true;
				report(extent.backing_sector + source.extent_sector + first, last - first,
				       ReplayFailure::cache_unreadable);
			});
		}
		if (!direct_ok)
			std::memcpy(dest.data(), target.data() + (source.cache_offset - begin), dest.size());
		return complete;
	}

	void write(std::uint64_t backing_sector, std::span<const std::byte> data)
	{
		const std::uint64_t offset = backing_sector * sector_size;
		const std::uint64_t align = destination_.required_alignment();
		Device* device = &destination_;
		const bool aligned = offset % align == 0 && data.size() % align == 0 &&
				     reinterpret_cast<std::uintptr_t>(data.data()) % align == 0;
		if (!aligned) {
			if (!options_.unaligned_destination)
				return read_modify_write(offset, data);
			device = options_.unaligned_destination;
		}
		++result_.write_requests;
		int err = device->write_at(offset, data);
		if (!err) {
			result_.bytes_written += data.size();
			return;
		}
		if (!options_.on_failure || is_out_of_space(err))
			throw IoError(fmt::format("writing {} bytes at backing sector {} failed", data.size(), backing_sector),
				      device->path(), err);
		std::uint64_t failed = 0;
		write_tolerant(*device, offset, data, options_.retries, [&](std::uint64_t bad, std::uint64_t length) {
			failed += length;
			report(bad / sector_size, length / sector_size, ReplayFailure::write_failed);
		});
		result_.bytes_written += data.size() - failed;
	}

	// O_DIRECT takes only whole aligned blocks: widen to them with the
	// destination's current bytes around the extent.
	void read_modify_write(std::uint64_t offset, std::span<const std::byte> data)
	{
		const std::uint64_t align = destination_.required_alignment();
		const std::uint64_t begin = round_down(offset, align);
		const std::uint64_t end = round_up(offset + data.size(), align);
		std::span<std::byte> window = rmw_.span().first(end - begin);
		++result_.read_requests;
		int err = destination_.read_at(begin, window);
		if (!err) {
			std::memcpy(window.data() + (offset - begin), data.data(), data.size());
			++result_.write_requests;
			err = destination_.write_at(begin, window);
		}
		if (!err) {
			result_.bytes_written += data.size();
			return;
		}
		if (!options_.on_failure || is_out_of_space(err))
			throw IoError(fmt::format("read-modify-write of {} bytes at offset {} failed", window.size(), begin),
				      destination_.path(), err);
		report(offset / sector_size, data.size() / sector_size, ReplayFailure::write_failed);
	}

	// Called by the writer and the reader thread.
	void report(std::uint64_t backing_sector, std::uint64_t sectors, ReplayFailure kind)
	{
		std::lock_guard lock(report_mutex_);
		result_.failed_sectors += sectors;
		options_.on_failure(backing_sector, sectors, kind);
	}

	const ReplayPlan& plan_;
	Device& cache_;
	Device& destination_;
	const ExecuteOptions& options_;
	std::uint64_t max_bytes_;
	AlignedBuffer rmw_;
	std::mutex report_mutex_;
	std::uint64_t done_ = 0;
	ReplayResult result_;
};

} // namespace

ReplayResult execute_replay(const ReplayPlan& plan, Device& cache, Device& destination, const ExecuteOptions& options)
{
	return Executor(plan, cache, destination, options).run();
}

std::function<bool(const ReplayExtent&)> write_when_verified(LogVerifier& verifier)
{
	return [&verifier](const ReplayExtent& extent) {
		for (const ExtentSource& source : extent.sources)
			if (!verifier.wait_until_verified(source.slot))
				return false;
		return true;
	};
}

std::uint64_t mark_cache_clean(Device& cache, const LogScan& scan)
{
	// Slots from the stop point on are not part of the log, yet a good
	// segment there keeps an id that the next segments reuse and follow: a
	// later replay would walk from the new segments into it and put its
	// older data over theirs (upstream's target does). So their headers go,
	// as the target's own replay zeroes them. The order makes every power
	// cut leave a disk that replays the same: first the slots beyond the
	// stop (the walk stops before them anyway), then the stop slot itself
	// (while it stands the walk stops there; zeroed earlier, the walk would
	// skip it and run on into the old segments), then the record; each
	// durable before the next.
	std::uint64_t zeroed = 0;
	if (scan.stop_slot) {
		const std::uint64_t nr = scan.slots.size();
		const std::uint64_t oldest = wb_oldest_slot(scan.max_id, nr);
		AlignedBuffer zeros(block_size);
		std::ranges::fill(zeros.span(), std::byte{0});
		auto zero_header = [&](std::uint64_t slot) {
			cache.write_exact(scan.geometry.slot_offset(slot), zeros.span());
			++zeroed;
		};
		bool after_stop = false;
		for (std::uint64_t step = 0; step < nr; ++step) {
			const std::uint64_t slot = wb_ring_slot(oldest, step, nr);
			if (after_stop && scan.slots[slot].state != SlotState::empty)
				zero_header(slot);
			after_stop |= slot == *scan.stop_slot;
		}
		cache.flush_or_throw();
		zero_header(*scan.stop_slot);
		cache.flush_or_throw();
	}
	AlignedBuffer sector(sector_size);
	write_superblock_record(sector.span(), scan.last_flushed_id);
	cache.write_exact(WB_SB_RECORD_OFFSET, sector.span());
	cache.flush_or_throw();
	return zeroed;
}

std::vector<SegmentUse> segment_uses(const ReplayPlan& plan)
{
	const LogScan& scan = plan.scan();
	const std::vector<std::uint32_t> log_position = scan.log_positions();

	std::vector<SegmentUse> uses;
	if (scan.slots.empty())
		return uses;
	// Ring order from the oldest, as the replay walks.
	const std::uint64_t nr = scan.slots.size();
	const std::uint64_t oldest = wb_oldest_slot(scan.max_id, nr);
	bool after_stop = false;
	for (std::uint64_t step = 0; step < nr; ++step) {
		const std::uint64_t slot = wb_ring_slot(oldest, step, nr);
		const SlotInfo& info = scan.slots[slot];
		if (info.state == SlotState::empty)
			continue;
		SegmentUse use{
			.slot = slot, .id = info.id, .state = info.state, .in_kernel_log = info.in_log, .used = info.in_log};
		const bool at_stop = scan.stop_slot && *scan.stop_slot == slot;
		after_stop |= at_stop;
		if (info.in_log) {
			const std::uint32_t pos = log_position[slot];
			use.sectors_replayed = plan.sectors_per_segment()[pos];
			if (scan.log[pos].written_back)
				use.reason = SegmentReason::already_written_back;
			else if (use.sectors_replayed > 0)
				use.reason = SegmentReason::replayed;
			else
				use.reason = SegmentReason::superseded;
		} else if (after_stop && !at_stop) {
			use.reason = SegmentReason::after_stop_point;
			use.data_left_behind = info.state == SlotState::valid || info.state == SlotState::unverified;
		} else {
			const bool newest = info.id == scan.max_id;
			use.reason = left_out_reason(info.state, newest);
			// A torn newest segment held no acknowledged write: nothing of it is missed.
			use.data_left_behind = at_stop && (!newest || info.state != SlotState::checksum_mismatch);
		}
		uses.push_back(use);
	}
	return uses;
}

std::vector<std::string> replay_shortfalls(const ReplayPlan& plan)
{
	std::vector<std::string> out;
	const LogScan& scan = plan.scan();
	if (scan.stop_slot) {
		const SlotInfo& info = scan.slots[*scan.stop_slot];
		const bool torn = info.id == scan.max_id && info.state == SlotState::checksum_mismatch;
		if (!torn)
			out.push_back(fmt::format("the log stops at slot {} (segment {}, {}): that segment is not replayed",
						  *scan.stop_slot, info.id, slot_state_name(info.state)));
	}
	if (scan.discarded_segments > 0)
		out.push_back(fmt::format("{} valid segment(s) after the stop point are not replayed (wbrecover --salvage "
					  "can take them)",
					  scan.discarded_segments));
	if (scan.sb_record != 0 && scan.sb_record > scan.max_id) {
		// The kernel's rule takes the record as is: everything up to it counts as written back.
		const std::uint64_t inferred = wb_previous_lap_id(scan.last_flushed_id, scan.geometry.nr_segments);
		if (scan.last_flushed_id > inferred)
			out.push_back(fmt::format("the superblock record ({}) is past the newest segment id ({}) "
						  "(sb-record-out-of-range): as the kernel does, segments {}..{} are taken as "
						  "written back and not replayed (wbrecover --salvage replays them)",
						  scan.sb_record, scan.max_id, std::max(inferred + 1, scan.oldest_id()),
						  scan.last_flushed_id));
	}
	const ReplaySummary& s = plan.summary();
	if (s.skipped_sectors > 0)
		out.push_back(fmt::format("{} dirty sector(s) lie past the end of the backing device (first: sector {}) "
					  "and are not replayed",
					  s.skipped_sectors, *s.first_skipped_sector));
	return out;
}

} // namespace wbkit
