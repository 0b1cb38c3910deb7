// wbrecover: bring the data of a writeboost cache home when things are bad:
// a dead target, unreadable sectors on either device, damaged segments.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

#include "progress.hpp"
#include "tool_main.hpp"
#include "wbkit/atomic_file.hpp"
#include "wbkit/errors.hpp"
#include "wbkit/identity.hpp"
#include "wbkit/recover.hpp"
#include "wbkit/report.hpp"

namespace {

constexpr const char* description = R"(Recover the data of a damaged writeboost cache (dm-writeboost 2.2 format).

First a diagnosis: whether each device can be read, which segment headers are
unreadable, which segments fail their checksum, where the kernel's replay
would stop. Every read tolerates errors: it is retried, then done in 4 KiB
pieces, then sector by sector, so one bad range never stops the recovery.

Then the cache's data is written, by default with the kernel's policy: the
consistent prefix of the log, a single point in time. --salvage also takes
valid segments after a damaged one, and the metablocks of segments whose
checksum cannot be verified because a sector was unreadable (when the
metablock and its data read fine); the result is then NOT a single point in
time, and the report says so.

Without --output the data goes onto the backing device (which is also read
in full, to find its unreadable sectors). With --output DEST the backing
device is left untouched: it is copied to DEST, tolerating its read errors
(unreadable sectors become zeros), then the cache's data is applied to DEST.
That is the way out when the backing device is the one failing. DEST is
created if it does not exist; a block device must be at least as large as
the backing device.

A dry run (--dry-run) does all of it but the writes: the diagnosis, the plan,
every read of both devices and of the cache's data, and reports what a real
run would recover and lose (with "dry_run": true in the JSON). No device is
opened for writing and no output file is created; --report FILE is still
written (it is the plan). Writes that a destination would refuse
(write-failed) show only in a real run.

Unreadable backing sectors for which the cache holds a clean copy are
restored from it. Everything that could not be saved is listed as backing
sector ranges (512-byte sectors), with the reason, so it can be mapped to
files: unreadable on the backing device with no cache copy, a dirty cache
copy that could not be read, a write the destination refused.

The cache is never written. Refused (exit 4): two of the paths (cache,
backing, output, report) name the same storage (the same file or device, a
loop device and its file, stacked devices), a device in use (O_EXCL), a cache smaller than one segment, a cache
without the writeboost magic or whose log names blocks past the backing
device's end (--force goes on for these two).

Exit codes (a dry run: those a real run would have): 0 nothing was lost,
1 finished but something was lost or left behind (listed), 2 usage error,
3 cannot open a device or flush the destination, 4 refused by a safety check.)";

struct Options {
	std::string cache;
	std::string backing;
	std::string output;
	std::string report;
	bool salvage = false;
	bool no_torn_rewrite = false;
	bool force = false;
	bool dry_run = false;
	wbkit::ProgressOptions progress{};
	bool json = false;
};

// A dry run creates no output: it fails where creating it would fail.
void check_creatable(const std::string& path)
{
	std::string dir = std::filesystem::path(path).parent_path().string();
	if (dir.empty())
		dir = ".";
	struct stat st {};
	if (::stat(dir.c_str(), &st) != 0)
		throw wbkit::IoError("cannot open", path, errno);
	if (!S_ISDIR(st.st_mode))
		throw wbkit::IoError("cannot open", path, ENOTDIR);
	if (::access(dir.c_str(), W_OK | X_OK) != 0)
		throw wbkit::IoError("cannot open", path, errno);
}

int run(const Options& o)
{
	using namespace wbkit;
	const bool in_place = o.output.empty();
	// Every pair of paths, before anything is opened for writing: a report or
	// an output that aliases the cache or the backing device would destroy
	// what is being recovered.
	const RolePath paths[] = {{"the cache", o.cache},
				  {"the backing device", o.backing},
				  {"the output", o.output},
				  {"the report", o.report == "-" ? std::string() : o.report}};
	check_distinct_paths(paths);
	// Created now (as a temporary file), so a bad path fails before the devices are touched.
	// `--report -` is the report on stdout, as --json.
	const bool json = o.json || o.report == "-";
	std::optional<AtomicFile> report_file;
	if (!o.report.empty() && o.report != "-")
		report_file.emplace(o.report);

	auto cache = open_device(o.cache, {.direct = true, .exclusive = true});
	// In place, the backing device takes writes of single sectors: buffered.
	// A dry run opens every device as a real run does, read-only.
	auto backing = open_device(o.backing, {.writable = in_place && !o.dry_run, .direct = !in_place, .exclusive = true});
	std::unique_ptr<Device> output;
	bool output_created = false;
	if (!in_place) {
		const bool exists = ::access(o.output.c_str(), F_OK) == 0;
		if (!o.dry_run) {
			output_created = !exists;
			output = open_device(o.output, {.writable = true, .exclusive = true, .create = true});
		} else if (exists) {
			// Checked as a real run checks it: distinct, not in use, large enough.
			output = open_device(o.output, {.exclusive = true});
		} else {
			check_creatable(o.output);
		}
	}

	ProgressReporter progress("wbrecover", o.progress);
	RecoverOptions options{.salvage = o.salvage, .force = o.force, .dry_run = o.dry_run, .output_path = o.output};
	if (o.no_torn_rewrite)
		options.torn_rewrites = false;
	options.progress = progress.sink();
	RecoveryReport report;
	try {
		report = recover(*cache, *backing, output.get(), options);
	} catch (const RefusedError&) {
		// Refused before anything was written: leave no output file behind.
		if (output_created) {
			output.reset();
			::unlink(o.output.c_str());
		}
		throw;
	}
	progress.finish();
	if (!o.dry_run && output && !output->is_block_device() && output->size_bytes() > backing->size_bytes()) {
		// An existing, larger file keeps no stale tail: the result is the backing device's size.
		if (::truncate(o.output.c_str(), off_t(backing->size_bytes())) != 0)
			throw IoError("cannot cut the output to the backing device's size", o.output, errno);
		output->flush_or_throw();
	}
	for (const std::string& what : report.overridden)
		std::cerr << "wbrecover: --force: overriding: " << what << '\n';

	// stdout carries one thing: the JSON document, or the text for people.
	if (json)
		write_recovery_json(std::cout, report);
	else
		print_recovery(std::cout, report);
	if (report_file) {
		write_recovery_json(report_file->stream(), report);
		report_file->commit();
	}
	return int(report.nothing_lost() ? ExitCode::ok : ExitCode::damage);
}

} // namespace

int main(int argc, char** argv)
{
	CLI::App app(description, "wbrecover");
	Options o;
	app.add_option("--cache", o.cache, "cache device or image file (never written)")->required();
	app.add_option("--backing", o.backing, "backing device or image file")->required();
	app.add_option("--output", o.output, "copy the backing device here and recover onto the copy; the backing device is not written");
	app.add_flag("--salvage", o.salvage, "take verifiable data beyond the kernel's consistent prefix");
	app.add_flag("--no-torn-rewrite", o.no_torn_rewrite,
		     "read a slot the kernel takes for another writer's torn rewrite as damage: the log stops there "
		     "(with --salvage, the segments after it are still taken)");
	app.add_option("--report", o.report, "write the full report as JSON to FILE (`-`: to stdout, as --json)");
	app.add_flag("--json", o.json, "print the full report as one JSON document instead of text");
	app.add_flag("--dry-run", o.dry_run,
		     "diagnose and plan, report what would be recovered and lost; write no device, create no output");
	app.add_flag("--force", o.force, "go on without the magic, or with blocks past the backing end");
	wbkit::add_progress_options(app, o.progress);
	return wbkit::run_tool("wbrecover", app, argc, argv, [&] { return run(o); });
}
