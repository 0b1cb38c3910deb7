// The executor: a replay plan's extents read from the cache by a reader
// thread while the one before is written, failures narrowed down and
// reported or thrown, the destination flushed at the end.
#include "wbkit/replay.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <fmt/format.h>
#include <functional>
#include <mutex>
#include <thread>

#include "wbkit/errors.hpp"
#include "wbkit/tolerant_io.hpp"

namespace wbkit {

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
				options_.progress("replay", done_, total);
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

} // namespace wbkit
