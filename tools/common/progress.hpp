// Progress of long work on stderr, the way every tool shows it, as dd and
// rsync do: a bar with percentage, bytes, rate and ETA when stderr is a
// terminal; plain lines only when --progress asks for them (logs and cron
// mail get none otherwise); nothing when quiet. Independently, --progress-fd N
// gets lines for programs: `phase done total` (bytes; the phase one word),
// like e2fsck -C.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "wbkit/progress.hpp"

namespace wbkit {

// The progress options every tool takes (add_progress_options).
struct ProgressOptions {
	bool quiet = false;  // -q: nothing on stderr
	bool asked = false;  // --progress: lines on stderr even when it is not a terminal
	int machine_fd = -1; // --progress-fd N
};

class ProgressReporter {
public:
	enum class Mode { none,
			  bar,
			  lines };

	// A bar when `stream` is a terminal; otherwise lines when `asked`
	// (--progress), else nothing. quiet: nothing.
	ProgressReporter(std::string tool, bool quiet, bool asked, std::FILE* stream = stderr);
	// From the options; throws UsageError when --progress-fd names no fd open for writing.
	ProgressReporter(std::string tool, const ProgressOptions& options);

	Mode mode() const { return mode_; }
	// Also write `phase done total` lines to fd (not closed here); -1: none.
	// Throws UsageError when fd is not open for writing.
	void set_machine_fd(int fd);
	void update(std::string_view phase, std::uint64_t done, std::uint64_t total);
	// update() as the engines' progress sink; this reporter must outlive it.
	ProgressSink sink()
	{
		return [this](std::string_view phase, std::uint64_t done, std::uint64_t total) { update(phase, done, total); };
	}
	// Prints the final state of the current phase (and ends the bar's line).
	void finish();
	// A few words after the figures from now on ("120 dirty blocks left"),
	// for what bytes done and total do not say; empty: none.
	void set_note(std::string note) { note_ = std::move(note); }

private:
	void print(bool final);
	void print_machine();

	std::string tool_;
	std::FILE* stream_;
	Mode mode_;
	std::string phase_;
	std::string note_;
	std::uint64_t done_ = 0;
	std::uint64_t total_ = 0;
	bool open_ = false;
	std::chrono::steady_clock::time_point phase_start_;
	std::chrono::steady_clock::time_point last_print_;
	int machine_fd_ = -1;
	std::chrono::steady_clock::time_point last_machine_print_;
};

} // namespace wbkit
