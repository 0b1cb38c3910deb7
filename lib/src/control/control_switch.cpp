// control.hpp: the table switches of a live device: detach, replace-cache
// and mode (drained first), and attach.
#include "wbkit/control.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <limits>

#include "control/control_internal.hpp"

namespace wbkit {

// ---------------------------------------------------------------------------
// Detach and attach

namespace {

std::string full_line(const DmTargetLine& line)
{
	return fmt::format("{} {} {} {}", line.start, line.length, line.type, line.params);
}

void say(const SwitchOptions& options, const std::string& text)
{
	if (options.say)
		options.say(text);
}

// Resumes after a failed step; returns what to add to the error when even
// that failed.
std::string resume_after_failure(System& system, const std::string& name, bool clear_first)
{
	std::string trouble;
	if (clear_first) {
		try {
			system.clear(name);
		} catch (const Error& e) {
			trouble += fmt::format("; clearing the inactive table failed too: {}", e.what());
		}
	}
	try {
		system.resume(name);
	} catch (const Error& e) {
		trouble += fmt::format("; and resuming failed: {}: the device is still suspended, run `dmsetup resume "
				       "{}`",
				       e.what(), name);
	}
	return trouble;
}

FlushResult flush_or_throw(System& system, const std::string& name, const FlushOptions& options)
{
	FlushResult r = flush(system, name, options);
	if (r.end == FlushResult::End::interrupted)
		throw InterruptedError(fmt::format("{}: interrupted during the flush; the device is as it was "
						   "(writeboost, in use; writeback goes on in the background)",
						   name));
	if (r.end == FlushResult::End::timed_out)
		throw Error(fmt::format("{}: the flush did not finish in time ({} dirty blocks left); the device is "
					"as it was",
					name, r.dirty_left));
	return r;
}

// Writes back, while suspended, what came in after the flush; stops at the
// deadline. True when nothing is dirty any more.
bool write_back_suspended(System& system, const std::string& name, Clock::time_point deadline)
{
	std::unique_ptr<PendingMessage> message = system.start_drop_caches(name);
	for (;;) {
		if (auto done = message->poll()) {
			if (done->status != 0)
				throw DmsetupError(fmt::format("{}: `dmsetup message {} 0 drop_caches` on the suspended "
							       "device failed (exit {}): {}",
							       name, name, done->status, trimmed(done->err)));
			break;
		}
		if (system.now() >= deadline) {
			message->stop();
			return false;
		}
		system.sleep(std::chrono::milliseconds(10));
	}
	// Both modules' drop_caches returns 0 on a suspended device only when
	// nothing is left to write back (dm-wbkit: every flushed segment is
	// written back, and the suspend flushed the open one; upstream: no
	// dirty block), and fails on a dead target.
	return true;
}

} // namespace

namespace {

void refuse_dead(const WbTarget& target, const std::string& name)
{
	if (target.status.dead().value_or(false))
		throw Error(fmt::format("{}: the target is dead (fail-stop): its dirty data cannot be written back; "
					"see `wbstat {}` and wbrecover(8)",
					name, name));
}

// Zeroes the old cache's first and last MiB (its log names blocks that are written
// elsewhere from now on: a later attach, or a construction after a crash,
// must format it, not replay it). A failure is reported, not thrown: the
// switch goes on (the new table does not use the old cache), and wbctl
// exits 1 naming the device to wipe.
void wipe_old_cache(System& system, const std::string& devno, const std::string& name, const SwitchOptions& options,
		    SwitchResult& result)
{
	if (!options.wipe_cache)
		return;
	try {
		system.wipe_cache(devno, name);
		result.cache_wiped = true;
	} catch (const Error& e) {
		result.wipe_error = e.what();
	}
}

// What differs between the drained switches: the table they switch to.
struct DrainedSwitch {
	std::string new_table;
	std::string kind; // "linear", "writeboost": the new table, for messages
	// Load the new table only once the device is suspended and written
	// back (dm-writeboost's constructor replays or formats the cache it is
	// given: the live instance's own, for mode); otherwise before the
	// suspend, so that the suspend holds I/O for the write-back and the
	// resume only.
	bool load_while_suspended = false;
	// detach, replace-cache: the old cache device (major:minor), wiped
	// while the device is suspended, written back and not yet resumed.
	std::string wipe_devno;
};

// The switch of detach, replace-cache and mode: flush in rounds, load the
// new table, suspend, write back what came in after the flush, resume
// (which swaps the new table in); or, when that write-back takes longer
// than max_stall, clear the new table, resume with the old one and flush
// again, at most options.attempts times. Throws Error (the device resumed
// with its old table) when a step fails or the attempts run out, and
// InterruptedError when a flush is interrupted.
void drain_and_switch(System& system, const std::string& name, const WbTarget& target, const DrainedSwitch& plan,
		      const SwitchOptions& options, SwitchResult& result)
{
	result.old_table = full_line(target.line);
	result.new_table = plan.new_table;
	result.drained = true;

	// A resume with an inactive table swaps it in: every way back to the
	// old table clears it first.
	bool loaded = false;
	auto load = [&] {
		system.load(name, result.new_table);
		loaded = true;
	};
	auto unload = [&]() -> std::string {
		if (!loaded)
			return {};
		loaded = false;
		try {
			system.clear(name);
		} catch (const Error& e) {
			return fmt::format("; clearing the loaded {} table failed: {}: run `dmsetup clear {}` before "
					   "anything resumes the device",
					   plan.kind, e.what(), name);
		}
		return {};
	};

	say(options, fmt::format("flushing {} dirty blocks", target.status.nr_dirty_cache_blocks));
	for (unsigned attempt = 1; attempt <= options.attempts; ++attempt) {
		result.attempts = attempt;
		try {
			// Rounds, as a live migration copies: each flush is shorter than
			// the one before, and so are the writes that come in during it.
			// The suspend then finds only what the last round let in.
			std::uint64_t before = std::numeric_limits<std::uint64_t>::max();
			for (unsigned round = 0; round < options.flush_rounds; ++round) {
				FlushResult r = flush_or_throw(system, name, options.flush);
				if (attempt == 1 && round == 0)
					result.flushed = r;
				if (r.dirty_left <= options.small_dirty || r.dirty_left >= before)
					break;
				before = r.dirty_left;
				say(options, fmt::format("{} blocks written during the flush: flushing them", r.dirty_left));
			}
			if (!loaded && !plan.load_while_suspended)
				load();
		} catch (const Error& e) {
			const std::string trouble = unload();
			if (dynamic_cast<const InterruptedError*>(&e))
				throw InterruptedError(e.what() + trouble);
			throw Error(e.what() + trouble);
		}

		const Clock::time_point t0 = system.now();
		try {
			system.suspend(name, options.lockfs);
		} catch (const Error& e) {
			const std::string trouble = unload();
			throw Error(fmt::format("{}: {}; the device keeps its writeboost table", name, e.what()) + trouble +
				    resume_after_failure(system, name, false));
		}
		const Clock::time_point suspended = system.now();
		bool clean = false;
		Clock::time_point written{};
		try {
			// No status read here: the message is the check, and one
			// dmsetup run less is that much less stall. It returns at once
			// when nothing is dirty.
			clean = write_back_suspended(system, name, t0 + options.max_stall);
			written = system.now();
			if (clean && plan.load_while_suspended)
				load();
			if (!clean) {
				result.dirty_at_suspend = read_status(system, name).nr_dirty_cache_blocks;
				say(options, fmt::format("suspended: the write-back of what came in after the flush took "
							 "longer than {} ms ({} dirty blocks left)",
							 options.max_stall.count(), result.dirty_at_suspend));
			}
		} catch (const Error& e) {
			const std::string trouble = unload();
			throw Error(fmt::format("{}: {}; the device keeps its writeboost table", name, e.what()) + trouble +
				    resume_after_failure(system, name, false));
		}
		if (clean) {
			// The commit point of detach and replace-cache (wbctl(8),
			// CRASHES): a power cut before the wipe is durable leaves the
			// old cache, which replays to what the backing device holds
			// already; one after it leaves the backing device with every
			// block (the write-back flushed it). The old table's instance
			// is suspended and does no I/O any more. After the resume it
			// would be too late: writes through the new table change the
			// backing device while the old log, still there, would be
			// replayed over them by a construction after a crash.
			// Its time counts as write-back's, not as the load's (on
			// upstream the load came before it) or the resume's.
			std::chrono::milliseconds wipe_took{0};
			if (!plan.wipe_devno.empty()) {
				const Clock::time_point w0 = system.now();
				wipe_old_cache(system, plan.wipe_devno, name, options, result);
				wipe_took = ms_between(w0, system.now());
			}
			result.suspend_took = ms_between(t0, suspended);
			result.writeback_took = ms_between(suspended, written) + wipe_took;
			try {
				system.resume(name); // swaps the new table in
				loaded = false;
			} catch (const Error& e) {
				// dm swaps the tables before the new one's preresume
				// (dm-wbkit formats or replays its cache there): the old
				// instance may be gone, but nothing was dirty on its cache
				// any more, so a new instance of the old table starts clean
				// (and formats the old cache when the wipe zeroed it).
				loaded = false;
				std::string trouble;
				try {
					system.load(name, result.old_table);
					system.resume(name);
				} catch (const Error& again) {
					trouble = fmt::format("; putting the old table back failed too: {}: run `dmsetup load "
							      "{} --table \"{}\"` and `dmsetup resume {}`",
							      again.what(), name, result.old_table, name);
				}
				throw Error(fmt::format("{}: the {} table did not start (see the kernel log): {}", name,
							plan.kind, e.what()) +
					    (trouble.empty() ? std::string("; the old table is back (every block written "
									   "back: its cache holds nothing dirty)")
							     : trouble));
			}
			result.resume_took = ms_between(written, system.now()) - wipe_took;
			result.stall = ms_between(t0, system.now());
			result.stalls.push_back(result.stall);
			return;
		}
		// Back to the old table as it was: clear, then resume.
		std::string trouble = unload();
		try {
			system.resume(name);
		} catch (const Error& e) {
			throw Error(std::string(e.what()) + trouble + resume_after_failure(system, name, false));
		}
		if (!trouble.empty())
			throw Error(name + ": resumed with its writeboost table" + trouble);
		result.stalls.push_back(ms_between(t0, system.now()));
		if (attempt == options.attempts)
			throw Error(fmt::format("{}: still dirty after {} suspends (writes come in faster than the "
						"suspended write-back takes within --max-stall); the device is as it "
						"was (writeboost, resumed)",
						name, attempt));
		say(options, fmt::format("dirty blocks left after {} ms suspended: resumed, flushing again",
					 result.stalls.back().count()));
	}
}

} // namespace

SwitchResult detach(System& system, const std::string& name, const SwitchOptions& options)
{
	SwitchResult result;
	const WbTarget target = read_wb_target(system, name);
	refuse_dead(target, name);
	drain_and_switch(system, name, target,
			 {.new_table = linear_table_line(target.line.length, target.table.backing),
			  .kind = "linear",
			  .load_while_suspended = false,
			  .wipe_devno = target.table.cache},
			 options, result);
	return result;
}

std::vector<std::pair<std::string, std::string>> live_table_args(const WbTarget& target)
{
	std::vector<std::pair<std::string, std::string>> args = target.table.args;
	// The options a message may have changed since the table was loaded:
	// those the status line shows (format/wbkit_contract.h).
	for (const StatusPairRow& row : status_pair_rows) {
		if (row.kind != StatusPairKind::tunable)
			continue;
		const std::string_view key = row.key;
		const auto running = target.status.pair(key);
		const TunableRow* option = find_tunable_row(key); // every TUNABLE pair has one: test_contract
		if (!running || *running == target.table.arg(key).value_or(option ? option->default_value : 0))
			continue;
		const std::string value = std::to_string(*running);
		bool written = false;
		for (auto& [k, v] : args)
			if (k == key) {
				v = value; // every copy: the constructor takes the last
				written = true;
			}
		if (!written)
			args.emplace_back(key, value);
	}
	return args;
}

SwitchResult replace_cache(System& system, const std::string& name, const ReplaceRequest& request,
			   const SwitchOptions& options)
{
	SwitchResult result;
	const WbTarget target = read_wb_target(system, name);
	refuse_dead(target, name);
	if (!request.cache_devno.empty() && request.cache_devno == target.table.cache)
		throw RefusedError(fmt::format("{}: {} ({}) is its cache already", name, request.cache,
					       request.cache_devno));
	if (!request.cache_devno.empty() && request.cache_devno == target.table.backing)
		throw RefusedError(fmt::format("{}: {} ({}) is its backing device", name, request.cache,
					       request.cache_devno));
	if (request.check_cache)
		request.check_cache(target.table.backing, target.table.cache);
	// Upstream formats the new cache in its constructor: loaded before the
	// write-back, a crash would find the new cache formatted (the rule of
	// wbctl(8), CRASHES, picks it) while the old one still held dirty
	// blocks. So on upstream the load waits for the write-back, as mode's
	// does; dm-wbkit formats at the resume, after the wipe.
	const bool upstream = target.status.module() == TargetModule::dm_writeboost;
	drain_and_switch(system, name, target,
			 {.new_table = writeboost_table_line(target.line.length, target.table.backing, request.cache,
							     live_table_args(target)),
			  .kind = "writeboost",
			  .load_while_suspended = upstream,
			  .wipe_devno = target.table.cache},
			 options, result);
	say(options, fmt::format("{} now has the table: {}", name, result.new_table));
	return result;
}

bool table_write_around(const WbTable& table) { return table.arg("write_around_mode").value_or(0) != 0; }

SwitchResult set_mode(System& system, const std::string& name, bool write_around, const SwitchOptions& options)
{
	SwitchResult result;
	result.mode = write_around ? "write-around" : "write-back";
	const WbTarget target = read_wb_target(system, name);
	refuse_dead(target, name);
	result.old_table = full_line(target.line);
	if (table_write_around(target.table) == write_around) {
		result.new_table = result.old_table;
		result.changed = false;
		return result;
	}
	const bool upstream = target.status.module() == TargetModule::dm_writeboost;
	if (upstream && !write_around &&
	    (target.status.pair("read_cache_threshold").value_or(0) != 0 ||
	     target.table.arg("read_cache_threshold").value_or(0) != 0))
		throw RefusedError(fmt::format(
			"{}: dm-writeboost in write-around mode with read caching (read_cache_threshold): its "
			"write-back constructor would replay the cached copies of blocks that write-around writes "
			"changed since, and serve the old data; switch with `wbctl detach` and `wbctl attach` (a "
			"wiped cache) instead",
			name));
	std::vector<std::pair<std::string, std::string>> args;
	for (const auto& kv : live_table_args(target))
		if (kv.first != "write_around_mode")
			args.push_back(kv);
	args.emplace_back("write_around_mode", write_around ? "1" : "0");
	drain_and_switch(system, name, target,
			 {.new_table = writeboost_table_line(target.line.length, target.table.backing,
							     target.table.cache, args),
			  .kind = "writeboost",
			  .load_while_suspended = upstream,
			  .wipe_devno = {}}, // the same cache
			 options, result);
	say(options, fmt::format("{} now has the table: {}", name, result.new_table));
	return result;
}

SwitchResult attach(System& system, const std::string& name, const AttachRequest& request,
		    const SwitchOptions& options)
{
	SwitchResult result;
	const DmTargetLine line = single_target(system.table(name), name);
	if (line.type == "writeboost")
		throw Error(fmt::format("{}: already has a writeboost target", name));
	if (line.type != "linear")
		throw Error(fmt::format("{}: its target is {}, not linear: wbctl attaches a cache to a linear mapping "
					"of a whole device",
					name, line.type));
	const auto linear = parse_linear_params(line.params);
	if (!linear)
		throw Error(fmt::format("{}: its linear table does not read as `<device> <offset>`: '{}'", name,
					line.params));
	if (linear->offset != 0)
		throw Error(fmt::format("{}: it maps {} from sector {}, not from 0: wbctl attaches a cache only to a "
					"mapping of a whole device",
					name, linear->device, linear->offset));
	const std::uint64_t backing_sectors = system.device_sectors(linear->device);
	if (backing_sectors != line.length)
		throw Error(fmt::format("{}: it maps {} of the {} sectors of {}: wbctl attaches a cache only to a "
					"mapping of a whole device",
					name, line.length, backing_sectors, linear->device));
	if (!request.cache_devno.empty() && request.cache_devno == linear->device)
		throw RefusedError(fmt::format("{}: the cache {} is the backing device itself", name, request.cache));
	if (request.check_cache)
		request.check_cache(linear->device);
	result.old_table = full_line(line);
	result.new_table = writeboost_table_line(line.length, linear->device, request.cache, request.args);

	// The constructor only reads: a refusal (a foreign cache, a bad
	// option) leaves nothing behind.
	try {
		system.load(name, result.new_table);
	} catch (const Error& e) {
		throw Error(fmt::format("{}: the writeboost table was not accepted: {}; nothing changed", name,
					e.what()) +
			    resume_after_failure(system, name, true));
	}
	const Clock::time_point t0 = system.now();
	try {
		system.suspend(name, options.lockfs);
	} catch (const Error& e) {
		throw Error(fmt::format("{}: {}; nothing changed", name, e.what()) +
			    resume_after_failure(system, name, true));
	}
	const Clock::time_point suspended = system.now();
	result.suspend_took = ms_between(t0, suspended);
	try {
		system.resume(name);
	} catch (const Error& e) {
		// dm swapped the tables before the new one's preresume failed
		// (format or replay): put the linear table back.
		std::string trouble;
		try {
			system.load(name, result.old_table);
			system.resume(name);
		} catch (const Error& again) {
			trouble = fmt::format("; putting the linear table back failed too: {}: run `dmsetup load {} "
					      "--table \"{}\"` and `dmsetup resume {}`",
					      again.what(), name, result.old_table, name);
		}
		throw Error(fmt::format("{}: the writeboost target did not start (formatting or replaying the cache "
					"failed, see the kernel log): {}",
					name, e.what()) +
			    (trouble.empty() ? std::string("; the linear table is back") : trouble));
	}
	result.stall = ms_between(t0, system.now());
	result.resume_took = ms_between(suspended, system.now());
	result.stalls.push_back(result.stall);
	result.attempts = 1;
	say(options, fmt::format("{} now has the table: {}", name, result.new_table));
	return result;
}

} // namespace wbkit
