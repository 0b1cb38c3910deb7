#include "progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include "wbkit/report.hpp"

namespace wbkit {

ProgressReporter::ProgressReporter(std::string tool, bool quiet, std::FILE* stream)
	: tool_(std::move(tool)), stream_(stream),
	  mode_(quiet ? Mode::none : (::isatty(::fileno(stream)) ? Mode::bar : Mode::lines))
{
}

void ProgressReporter::update(std::string_view phase, std::uint64_t done, std::uint64_t total)
{
	if (mode_ == Mode::none)
		return;
	const auto now = std::chrono::steady_clock::now();
	if (phase != phase_) {
		finish();
		phase_ = phase;
		phase_start_ = now;
		last_print_ = now;
		open_ = true;
	}
	done_ = done;
	total_ = total;
	// A terminal redraws often; a log gets a line every few seconds, not a flood.
	const auto interval = mode_ == Mode::bar ? std::chrono::milliseconds(200) : std::chrono::milliseconds(2000);
	if (now - last_print_ >= interval) {
		print(false);
		last_print_ = now;
	}
}

void ProgressReporter::finish()
{
	if (mode_ == Mode::none || !open_)
		return;
	print(true);
	open_ = false;
}

void ProgressReporter::print(bool final)
{
	const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - phase_start_).count();
	const double rate = seconds > 0 ? double(done_) / seconds : 0;
	const double fraction = total_ ? double(done_) / double(total_) : 1.0;
	std::string eta = "--";
	if (rate > 0 && total_ >= done_) {
		const auto left = std::uint64_t(double(total_ - done_) / rate);
		eta = fmt::format("{}:{:02}:{:02}", left / 3600, left / 60 % 60, left % 60);
	}
	const std::string figures = fmt::format("{:5.1f}% {} / {}, {}/s, ETA {}", fraction * 100, human_bytes(done_),
						human_bytes(total_), human_bytes(std::uint64_t(rate)), eta);
	if (mode_ == Mode::bar) {
		constexpr int width = 30;
		const int filled = int(fraction * width);
		fmt::print(stream_, "\r{}: {} [{}{}] {}\x1b[K", tool_, phase_, std::string(std::size_t(filled), '#'),
			   std::string(std::size_t(width - filled), '.'), figures);
		if (final)
			fmt::print(stream_, "\n");
	} else {
		fmt::print(stream_, "{}: {}: {}{}\n", tool_, phase_, figures, final ? " (done)" : "");
	}
	std::fflush(stream_);
}

} // namespace wbkit
