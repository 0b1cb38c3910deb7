// control.hpp: reading a live writeboost target, and wbctl flush.
#include "wbkit/control.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "control/control_internal.hpp"
#include "wbkit/format.hpp"

namespace wbkit {

WbStatus read_status(System& system, const std::string& name)
{
	const DmTargetLine line = single_target(system.status(name), name);
	if (line.type != "writeboost")
		throw Error(fmt::format("{}: not a writeboost device (its target is {})", name, line.type));
	return parse_wb_status(line.params);
}

WbTarget read_wb_target(System& system, const std::string& name)
{
	WbTarget t;
	t.line = single_target(system.table(name), name);
	if (t.line.type != "writeboost")
		throw Error(fmt::format("{}: not a writeboost device (its target is {})", name, t.line.type));
	t.table = parse_wb_table(t.line.params);
	t.status = read_status(system, name);
	return t;
}

// ---------------------------------------------------------------------------
// Flush

FlushGoal flush_goal(const WbStatus& status)
{
	return {.start_dirty = status.nr_dirty_cache_blocks,
		.start_writeback_id = status.last_writeback_id,
		.target_id = std::max(status.current_id, status.last_writeback_id)};
}

FlushProgress flush_progress(const FlushGoal& goal, const WbStatus& now)
{
	FlushProgress p;
	p.dirty_left = now.nr_dirty_cache_blocks;
	p.segments_total = goal.target_id - goal.start_writeback_id;
	const std::uint64_t written =
		now.last_writeback_id > goal.start_writeback_id ? now.last_writeback_id - goal.start_writeback_id : 0;
	p.segments_done = std::min(written, p.segments_total);
	p.complete = now.nr_dirty_cache_blocks == 0 || now.last_writeback_id >= goal.target_id;
	if (p.complete)
		p.fraction = 1.0;
	else if (p.segments_total == 0)
		p.fraction = 0.0;
	else
		p.fraction = double(p.segments_done) / double(p.segments_total);
	p.total_bytes = goal.start_dirty * block_size;
	p.done_bytes = std::uint64_t(double(p.total_bytes) * p.fraction);
	return p;
}

FlushResult flush(System& system, const std::string& name, const FlushOptions& options)
{
	const Clock::time_point start = system.now();
	FlushResult result;
	WbTarget target = read_wb_target(system, name);
	if (target.status.dead().value_or(false))
		throw Error(fmt::format("{}: the target is dead (fail-stop): nothing can be written back; see `wbstat {}`",
					name, name));
	auto finish = [&](FlushResult::End end, std::uint64_t left) {
		result.end = end;
		result.dirty_left = left;
		result.took = ms_between(start, system.now());
		return result;
	};
	result.start_dirty = target.status.nr_dirty_cache_blocks;
	if (result.start_dirty == 0) {
		if (options.progress)
			options.progress(flush_progress(flush_goal(target.status), target.status));
		return finish(FlushResult::End::done, 0);
	}
	// Upstream's drop_caches waits for its open segment, which only a
	// flush (or sync_data_interval) writes to the cache device.
	system.flush_device(name);
	WbStatus status = read_status(system, name);
	const FlushGoal goal = flush_goal(status);
	result.start_dirty = std::max(result.start_dirty, goal.start_dirty);
	FlushProgress progress = flush_progress(goal, status);
	if (options.progress)
		options.progress(progress);
	if (progress.complete)
		return finish(FlushResult::End::done, progress.dirty_left);

	std::unique_ptr<PendingMessage> message = system.start_drop_caches(name);
	const auto tick = std::min(options.poll_interval, std::chrono::milliseconds(100));
	Clock::time_point next_status = system.now() + options.poll_interval;
	for (;;) {
		system.sleep(tick);
		if (options.interrupted && options.interrupted()) {
			message->stop();
			return finish(FlushResult::End::interrupted, progress.dirty_left);
		}
		if (auto done = message->poll()) {
			if (done->status != 0)
				throw DmsetupError(fmt::format("{}: `dmsetup message {} 0 drop_caches` failed (exit {}): {}",
							       name, name, done->status, trimmed(done->err)));
			status = read_status(system, name);
			progress = flush_progress(goal, status);
			progress.complete = true;
			progress.fraction = 1.0;
			progress.done_bytes = progress.total_bytes;
			if (options.progress)
				options.progress(progress);
			return finish(FlushResult::End::done, progress.dirty_left);
		}
		const Clock::time_point now = system.now();
		if (options.timeout && now - start >= *options.timeout) {
			message->stop();
			return finish(FlushResult::End::timed_out, progress.dirty_left);
		}
		if (now < next_status)
			continue;
		next_status = now + options.poll_interval;
		status = read_status(system, name);
		if (status.dead().value_or(false)) {
			message->stop();
			throw Error(fmt::format("{}: the target died during the flush; see `wbstat {}`", name, name));
		}
		progress = flush_progress(goal, status);
		if (options.progress)
			options.progress(progress);
		if (progress.complete) {
			// Everything dirty at the start is home; upstream's message
			// may wait on for blocks written since.
			message->stop();
			return finish(FlushResult::End::done, progress.dirty_left);
		}
	}
}

} // namespace wbkit
