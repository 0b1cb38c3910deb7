// wbctl: change a live writeboost device (dm-writeboost and dm-wbkit):
// status, flush, detach, attach, replace-cache and mode. The steps are in the library
// (wbkit/control.hpp); this file parses the command line and prints.
#include <CLI/CLI.hpp>
#include <csignal>
#include <fmt/format.h>
#include <iostream>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "progress.hpp"
#include "tool_main.hpp"
#include "wbkit/control.hpp"
#include "wbkit/dmsetup.hpp"
#include "wbkit/errors.hpp"
#include "wbkit/report.hpp"

namespace {

constexpr const char* description = R"(Change a live writeboost device (dm-writeboost and dm-wbkit) while it is in use.

  wbctl create NAME --backing DEV [--cache DEV]
                                    a new writeboost device (the cache checked
                                    first; a log on it is replayed), or without
                                    --cache a linear mapping to attach one to later
  wbctl status NAME                 what wbstat shows, for one device
  wbctl flush NAME                  write every dirty block home, with progress
  wbctl detach NAME                 flush, then switch NAME to a linear mapping of
                                    its backing device (one short suspend)
  wbctl attach NAME --cache DEV     switch a linear mapping of a whole device to a
                                    writeboost table over DEV (one short suspend)
  wbctl replace-cache NAME --cache DEV
                                    flush, then switch NAME to the same writeboost
                                    table over the blank cache DEV (one short suspend)
  wbctl mode NAME write-back|write-around
                                    flush, then reload NAME's table with
                                    write_around_mode 0 or 1 (one short suspend)

detach, attach, replace-cache and mode print how long I/O was held (suspend
to resume). Every failure leaves the device usable: resumed, with the table
it had.

Exit codes: 0 success, 1 stopped before done (Ctrl-C, --timeout) with the
device as it was, or switched but the old cache not wiped, 2 usage error,
3 operational error (a dmsetup step failed; the message says what state the
device is in), 4 refused (a check on the cache device; nothing changed).)";

volatile std::sig_atomic_t interrupted = 0;

extern "C" void on_signal(int) { interrupted = 1; }

void catch_signals()
{
	struct sigaction sa {};
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (int sig : {SIGINT, SIGTERM, SIGHUP})
		::sigaction(sig, &sa, nullptr);
}

struct Options {
	std::string name;
	std::string dmsetup = "dmsetup";
	bool json = false;
	wbkit::ProgressOptions progress;
	double timeout = 0;
	double max_stall = 2.0;
	unsigned attempts = 5;
	bool keep_cache = false;
	bool lockfs = false;
	std::string cache;
	std::vector<std::string> table_options;
	bool force = false;
	std::string mode;
	std::string backing;
	bool tab = false;
	std::string tab_file = "/etc/writeboosttab";
};

std::string stall_text(const wbkit::SwitchResult& r)
{
	std::string text = fmt::format("I/O held {} ms (suspend to resume: suspend {} ms, ", r.stall.count(),
				       r.suspend_took.count());
	if (r.drained)
		text += fmt::format("write-back {} ms, ", r.writeback_took.count());
	text += fmt::format("load and resume {} ms", r.resume_took.count());
	if (r.stalls.size() > 1) {
		text += fmt::format("; {} suspends:", r.stalls.size());
		for (auto s : r.stalls)
			text += fmt::format(" {}", s.count());
		text += " ms";
	}
	return text + ")";
}

wbkit::FlushOptions flush_options(const Options& o, wbkit::ProgressReporter& reporter)
{
	wbkit::FlushOptions f;
	f.interrupted = [] { return interrupted != 0; };
	if (o.timeout > 0)
		f.timeout = std::chrono::milliseconds(std::int64_t(o.timeout * 1000));
	f.progress = [&reporter](const wbkit::FlushProgress& p) {
		reporter.set_note(fmt::format("{} dirty blocks left", p.dirty_left));
		reporter.update("flush", p.done_bytes, p.total_bytes);
	};
	return f;
}

int run_status(const Options& o)
{
	wbkit::DmsetupReader reader(o.dmsetup);
	wbkit::StatusReport report{.devices = reader.named({o.name}), .time = std::int64_t(std::time(nullptr))};
	for (const std::string& w : reader.warnings())
		std::cerr << "wbctl: warning: " << w << '\n';
	if (o.json)
		std::cout << wbkit::status_json(report) << '\n';
	else
		wbkit::print_status(std::cout, report);
	for (const wbkit::WbDevice& d : report.devices)
		if (d.status.dead().value_or(false))
			return int(wbkit::ExitCode::damage);
	return int(wbkit::ExitCode::ok);
}

int run_flush(const Options& o)
{
	catch_signals();
	wbkit::DmsetupSystem system(o.dmsetup);
	wbkit::ProgressReporter reporter("wbctl", o.progress.quiet, true);
	reporter.set_machine_fd(o.progress.machine_fd);
	const wbkit::FlushResult r = wbkit::flush(system, o.name, flush_options(o, reporter));
	reporter.finish();
	if (o.json)
		std::cout << wbkit::flush_result_json(o.name, r) << '\n';
	switch (r.end) {
	case wbkit::FlushResult::End::done:
		if (!o.json)
			std::cout << fmt::format("{}: flushed: {} dirty blocks written back in {:.1f} s ({} dirty now)\n",
						 o.name, r.start_dirty, double(r.took.count()) / 1000, r.dirty_left);
		return int(wbkit::ExitCode::ok);
	case wbkit::FlushResult::End::interrupted:
		std::cerr << "wbctl: " << o.name
			  << ": interrupted: the flush stopped, the device is as it was (writeback goes on in the "
			     "background)\n";
		return int(wbkit::ExitCode::damage);
	case wbkit::FlushResult::End::timed_out:
		std::cerr << "wbctl: " << o.name << ": --timeout: the flush stopped with " << r.dirty_left
			  << " dirty blocks left; the device is as it was\n";
		return int(wbkit::ExitCode::damage);
	}
	return int(wbkit::ExitCode::operational);
}

wbkit::SwitchOptions switch_options(const Options& o, wbkit::ProgressReporter& reporter)
{
	wbkit::SwitchOptions s;
	s.flush = flush_options(o, reporter);
	s.attempts = o.attempts;
	s.max_stall = std::chrono::milliseconds(std::int64_t(o.max_stall * 1000));
	s.wipe_cache = !o.keep_cache;
	s.lockfs = o.lockfs;
	s.say = [&o, &reporter](const std::string& text) {
		reporter.finish();
		if (!o.progress.quiet)
			std::cerr << "wbctl: " << o.name << ": " << text << '\n';
	};
	return s;
}

int wipe_exit(const Options& o, const wbkit::SwitchResult& r)
{
	if (r.wipe_error) {
		std::cerr << "wbctl: " << o.name << ": the old cache device could not be wiped: " << *r.wipe_error
			  << "; it still holds the old log: zero its first and last MiB before it is used again\n";
		return int(wbkit::ExitCode::damage);
	}
	return int(wbkit::ExitCode::ok);
}

int run_detach(const Options& o)
{
	catch_signals();
	wbkit::DmsetupSystem system(o.dmsetup);
	wbkit::ProgressReporter reporter("wbctl", o.progress.quiet, true);
	reporter.set_machine_fd(o.progress.machine_fd);
	const wbkit::SwitchResult r = wbkit::detach(system, o.name, switch_options(o, reporter));
	reporter.finish();
	if (o.json) {
		std::cout << wbkit::switch_result_json("detach", o.name, r) << '\n';
	} else {
		std::cout << fmt::format("{}: detached: {}\n", o.name, r.new_table);
		std::cout << fmt::format("{}: {}\n", o.name, stall_text(r));
	}
	return wipe_exit(o, r);
}

std::string devno_of(const std::string& path)
{
	struct stat st {};
	if (::stat(path.c_str(), &st) != 0 || !S_ISBLK(st.st_mode))
		return {};
	return fmt::format("{}:{}", major(st.st_rdev), minor(st.st_rdev));
}

int run_attach(const Options& o)
{
	catch_signals();
	wbkit::DmsetupSystem system(o.dmsetup);
	wbkit::ProgressReporter reporter("wbctl", true, false);
	wbkit::AttachRequest request;
	request.cache = o.cache;
	request.cache_devno = devno_of(o.cache);
	request.args = wbkit::parse_table_options(o.table_options);
	std::optional<wbkit::CacheCheck> check;
	const std::string self = devno_of(o.name.find('/') == std::string::npos ? "/dev/mapper/" + o.name : o.name);
	request.check_cache = [&](const std::string& backing) {
		std::vector<std::string> not_devnos{backing};
		if (!self.empty())
			not_devnos.push_back(self);
		check = wbkit::prepare_attach_cache(o.cache, not_devnos, o.force);
		if (check->overridden)
			std::cerr << "wbctl: warning: " << *check->overridden << '\n';
	};
	const wbkit::SwitchResult r = wbkit::attach(system, o.name, request, switch_options(o, reporter));
	if (o.json) {
		std::cout << wbkit::switch_result_json("attach", o.name, r, check) << '\n';
	} else {
		std::cout << fmt::format("{}: attached: {}\n", o.name, r.new_table);
		std::cout << fmt::format("{}: {}\n", o.name, stall_text(r));
	}
	return int(wbkit::ExitCode::ok);
}

int run_replace(const Options& o)
{
	catch_signals();
	wbkit::DmsetupSystem system(o.dmsetup);
	wbkit::ProgressReporter reporter("wbctl", o.progress.quiet, true);
	reporter.set_machine_fd(o.progress.machine_fd);
	wbkit::ReplaceRequest request;
	request.cache = o.cache;
	request.cache_devno = devno_of(o.cache);
	std::optional<wbkit::CacheCheck> check;
	const std::string self = devno_of(o.name.find('/') == std::string::npos ? "/dev/mapper/" + o.name : o.name);
	request.check_cache = [&](const std::string& backing, const std::string& old_cache) {
		std::vector<std::string> not_devnos{backing, old_cache};
		if (!self.empty())
			not_devnos.push_back(self);
		check = wbkit::prepare_attach_cache(o.cache, not_devnos, o.force);
		if (check->overridden)
			std::cerr << "wbctl: warning: " << *check->overridden << '\n';
	};
	const wbkit::SwitchResult r = wbkit::replace_cache(system, o.name, request, switch_options(o, reporter));
	reporter.finish();
	if (o.json) {
		std::cout << wbkit::switch_result_json("replace-cache", o.name, r, check) << '\n';
	} else {
		std::cout << fmt::format("{}: cache replaced: {}\n", o.name, r.new_table);
		std::cout << fmt::format("{}: {}\n", o.name, stall_text(r));
	}
	return wipe_exit(o, r);
}

int run_mode(const Options& o)
{
	catch_signals();
	wbkit::DmsetupSystem system(o.dmsetup);
	wbkit::ProgressReporter reporter("wbctl", o.progress.quiet, true);
	reporter.set_machine_fd(o.progress.machine_fd);
	const wbkit::SwitchResult r =
		wbkit::set_mode(system, o.name, o.mode == "write-around", switch_options(o, reporter));
	reporter.finish();
	if (o.json) {
		std::cout << wbkit::switch_result_json("mode", o.name, r) << '\n';
	} else if (!r.changed) {
		std::cout << fmt::format("{}: already in {} mode, nothing changed: {}\n", o.name, o.mode, r.old_table);
	} else {
		std::cout << fmt::format("{}: {} mode: {}\n", o.name, o.mode, r.new_table);
		std::cout << fmt::format("{}: {}\n", o.name, stall_text(r));
	}
	return int(wbkit::ExitCode::ok);
}

int run_create(const Options& o)
{
	const std::optional<std::string> cache = o.cache.empty() ? std::nullopt : std::optional(o.cache);
	const auto args = wbkit::parse_table_options(o.table_options);
	if (!cache && !args.empty())
		throw wbkit::UsageError("table options (-o) need --cache: a linear mapping has none");
	if (o.tab && !cache)
		throw wbkit::UsageError("--tab needs --cache: writeboosttab names a backing and a cache device");
	// Checked before anything is created: a bad option must not leave a
	// device that the file does not name.
	const std::string tab_line = o.tab ? wbkit::writeboosttab_line(o.name, o.backing, *cache, args) : "";
	if (o.tab)
		wbkit::check_writeboosttab(o.tab_file, o.name);
	wbkit::DmsetupSystem system(o.dmsetup);
	wbkit::CreateCheck check;
	const wbkit::CreateRequest request{.backing = o.backing, .cache = cache, .args = args, .check_devices = [&] {
						   check = wbkit::prepare_create_devices(o.backing, cache, o.force);
						   if (check.cache && check.cache->overridden)
							   std::cerr << "wbctl: warning: " << *check.cache->overridden << '\n';
						   return check.backing_sectors;
					   }};
	const wbkit::CreateResult r = wbkit::create(system, o.name, request);
	std::optional<std::string> tab_written;
	if (o.tab) {
		try {
			wbkit::append_writeboosttab(o.tab_file, o.name, tab_line);
		} catch (const wbkit::Error& e) {
			throw wbkit::Error(fmt::format("{} was created ({}), but not added to {}: {}", o.name, r.table,
						       o.tab_file, e.what()));
		}
		tab_written = o.tab_file;
	}
	if (tab_written)
		for (const std::string* dev : {&o.backing, &o.cache})
			if (dev->rfind("/dev/disk/", 0) != 0 && dev->rfind("/dev/mapper/", 0) != 0)
				std::cerr << "wbctl: warning: " << *dev
					  << " is a kernel name, which can change between boots: name it in "
					  << *tab_written << " by /dev/disk/by-id/..., by-partuuid or UUID=\n";
	if (o.json) {
		std::cout << wbkit::create_result_json(o.name, r, check, tab_written) << '\n';
		return int(wbkit::ExitCode::ok);
	}
	std::cout << fmt::format("{}: created: {}\n", o.name, r.table);
	if (check.cache) {
		if (check.replay_dirty_blocks && !check.cache->overridden)
			std::cout << fmt::format("{}: the cache held a log with {} dirty blocks (in {} segments): the "
						 "target replayed it and holds {} dirty blocks\n",
						 o.name, *check.replay_dirty_blocks, check.replay_segments.value_or(0),
						 r.dirty_blocks.value_or(0));
		else
			std::cout << fmt::format("{}: the cache was formatted\n", o.name);
	} else {
		std::cout << fmt::format("{}: a linear mapping of {}: `wbctl attach {} --cache DEV` adds a cache "
					 "later, without an unmount\n",
					 o.name, o.backing, o.name);
	}
	if (tab_written)
		std::cout << fmt::format("{}: added to {}: {}\n", o.name, *tab_written, tab_line);
	return int(wbkit::ExitCode::ok);
}

// The options of the drained switches (detach, replace-cache, mode).
void add_drain_options(CLI::App& command, Options& o)
{
	command.add_flag("--json", o.json, "print the result as JSON (schema wbctl/1)");
	command.add_option("--timeout", o.timeout, "give up when a flush takes longer than SECONDS (the device as it was)")
		->type_name("SECONDS")
		->check(CLI::PositiveNumber);
	command.add_option("--max-stall", o.max_stall,
			   "write back the blocks written after the flush while suspended for at most SECONDS, "
			   "else resume and flush again (default 2)")
		->type_name("SECONDS")
		->check(CLI::PositiveNumber);
	command.add_option("--attempts", o.attempts, "suspend at most N times (default 5)")
		->type_name("N")
		->check(CLI::Range(1, 100));
	command.add_flag("--lockfs", o.lockfs, "freeze a mounted file system for the suspend (default: --nolockfs)");
	wbkit::add_progress_options(command, o.progress);
}

} // namespace

int main(int argc, char** argv)
{
	CLI::App app(description, "wbctl");
	app.require_subcommand(1, 1);
	Options o;
	app.add_option("--dmsetup", o.dmsetup, "the dmsetup program to run (default: dmsetup from PATH, /usr/sbin or /sbin)")
		->type_name("PROGRAM");

	auto* create = app.add_subcommand("create", "make a writeboost device, or a linear mapping to attach a cache to later");
	create->add_option("NAME", o.name, "the new device-mapper device's name")->required();
	create->add_option("--backing", o.backing, "the backing device (a block device, not in use)")
		->type_name("DEV")
		->required();
	create->add_option("--cache", o.cache,
			   "the cache device: blank (formatted), or holding a writeboost log (replayed); without it, a "
			   "linear mapping")
		->type_name("DEV");
	create->add_option("-o,--option", o.table_options,
			   "a table option KEY=VALUE (writeback_threshold=70, ...), repeatable")
		->type_name("KEY=VALUE");
	create->add_flag("--force", o.force,
			 "use a cache device that holds something else (a file system, another cache, a log the "
			 "target would refuse or of another backing device): its first and last MiB are zeroed and the target "
			 "formats it");
	auto* tab = create->add_flag("--tab", o.tab,
				     "add the device to /etc/writeboosttab, so that it is created at boot");
	// Alone it would be ignored: the user meant the device to come back at boot.
	create->add_option("--tab-file", o.tab_file, "the writeboosttab file --tab adds to (default /etc/writeboosttab)")
		->type_name("FILE")
		->needs(tab);
	create->add_flag("--json", o.json, "print the result as JSON (schema wbctl/1)");

	auto* status = app.add_subcommand("status", "show the device's state, as wbstat does");
	status->add_option("NAME", o.name, "the device-mapper device")->required();
	status->add_flag("--json", o.json, "print wbstat's JSON document (schema wbstat/1)");

	auto* flush = app.add_subcommand("flush", "write every dirty block home while the device stays in use");
	flush->add_option("NAME", o.name, "the device-mapper device")->required();
	flush->add_flag("--json", o.json, "print the result as JSON (schema wbctl/1)");
	flush->add_option("--timeout", o.timeout, "stop after SECONDS (exit 1, the device as it was)")
		->type_name("SECONDS")
		->check(CLI::PositiveNumber);
	wbkit::add_progress_options(*flush, o.progress);

	auto* detach = app.add_subcommand("detach", "flush, then switch the device to a linear mapping of its backing device");
	detach->add_option("NAME", o.name, "the device-mapper device")->required();
	detach->add_flag("--keep-cache", o.keep_cache,
			 "leave the cache device's old log in place (default: zero its first and last MiB once it is free; "
			 "a later attach of the old log would replay stale data)");
	add_drain_options(*detach, o);

	auto* attach = app.add_subcommand("attach", "switch a linear mapping of a whole device to a writeboost table");
	attach->add_option("NAME", o.name, "the device-mapper device (a linear mapping of a whole device)")->required();
	attach->add_option("--cache", o.cache, "the cache device (a block device, blank unless --force)")
		->type_name("DEV")
		->required();
	attach->add_option("-o,--option", o.table_options,
			   "a table option KEY=VALUE (writeback_threshold=70, ...), repeatable")
		->type_name("KEY=VALUE");
	attach->add_flag("--force", o.force,
			 "use a cache device that holds something (a file system, another cache's log): its first "
			 "MiB is zeroed and the target formats it");
	attach->add_flag("--json", o.json, "print the result as JSON (schema wbctl/1)");
	attach->add_flag("--lockfs", o.lockfs, "freeze a mounted file system for the suspend (default: --nolockfs)");

	auto* replace = app.add_subcommand("replace-cache",
					   "flush, then switch the device to the same writeboost table over another cache");
	replace->add_option("NAME", o.name, "the device-mapper device (a writeboost device)")->required();
	replace->add_option("--cache", o.cache, "the new cache device (a block device, blank unless --force)")
		->type_name("DEV")
		->required();
	replace->add_flag("--force", o.force,
			  "use a new cache device that holds something (a file system, another cache's log): its "
			  "first and last MiB are zeroed and the target formats it");
	replace->add_flag("--keep-cache", o.keep_cache,
			  "leave the old cache device's log in place (default: zero its first and last MiB once it is free)");
	add_drain_options(*replace, o);

	auto* mode = app.add_subcommand("mode", "flush, then reload the device's table in write-back or write-around mode");
	mode->add_option("NAME", o.name, "the device-mapper device (a writeboost device)")->required();
	mode->add_option("MODE", o.mode, "write-back (write_around_mode 0) or write-around (write_around_mode 1)")
		->required()
		->check(CLI::IsMember({"write-back", "write-around"}));
	add_drain_options(*mode, o);

	return wbkit::run_tool("wbctl", app, argc, argv, [&] {
		if (create->parsed())
			return run_create(o);
		if (status->parsed())
			return run_status(o);
		if (flush->parsed())
			return run_flush(o);
		if (detach->parsed())
			return run_detach(o);
		if (replace->parsed())
			return run_replace(o);
		if (mode->parsed())
			return run_mode(o);
		return run_attach(o);
	});
}
