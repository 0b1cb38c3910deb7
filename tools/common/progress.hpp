// Progress of long work on stderr, the way both recovery tools show it: a bar
// with percentage, bytes, rate and ETA on a terminal, plain lines otherwise
// (logs, pipes), nothing when quiet.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace wbkit {

class ProgressReporter {
public:
	enum class Mode { none,
			  bar,
			  lines };

	// Picks bar or lines from whether `stream` is a terminal.
	ProgressReporter(std::string tool, bool quiet, std::FILE* stream = stderr);

	Mode mode() const { return mode_; }
	void update(std::string_view phase, std::uint64_t done, std::uint64_t total);
	// Prints the final state of the current phase (and ends the bar's line).
	void finish();

private:
	void print(bool final);

	std::string tool_;
	std::FILE* stream_;
	Mode mode_;
	std::string phase_;
	std::uint64_t done_ = 0;
	std::uint64_t total_ = 0;
	bool open_ = false;
	std::chrono::steady_clock::time_point phase_start_;
	std::chrono::steady_clock::time_point last_print_;
};

} // namespace wbkit
