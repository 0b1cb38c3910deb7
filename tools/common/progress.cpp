#include "progress.hpp"

#include <algorithm>
#include <csignal>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include "wbkit/errors.hpp"
#include "wbkit/report.hpp"

namespace wbkit {

ProgressReporter::ProgressReporter(std::string tool, bool quiet, bool asked, std::FILE* stream)
	: tool_(std::move(tool)), stream_(stream), mode_(quiet                        ? Mode::none
							 : ::isatty(::fileno(stream)) ? Mode::bar
							 : asked                      ? Mode::lines
										      : Mode::none)
{
}

ProgressReporter::ProgressReporter(std::string tool, const ProgressOptions& options)
	: ProgressReporter(std::move(tool), options.quiet, options.asked)
{
	set_machine_fd(options.machine_fd);
}

void ProgressReporter::set_machine_fd(int fd)
{
	if (fd >= 0) {
		const int flags = ::fcntl(fd, F_GETFL);
		if (flags == -1 || (flags & O_ACCMODE) == O_RDONLY)
			throw UsageError(fmt::format("--progress-fd {}: not a file descriptor open for writing", fd));
		// A progress reader that goes away must not kill the work with SIGPIPE.
		std::signal(SIGPIPE, SIG_IGN);
	}
	machine_fd_ = fd;
}

void ProgressReporter::update(std::string_view phase, std::uint64_t done, std::uint64_t total)
{
	if (mode_ == Mode::none && machine_fd_ < 0)
		return;
	const auto now = std::chrono::steady_clock::now();
	// A new phase, or the same one again after finish() (wbctl's flush rounds).
	if (phase != phase_ || !open_) {
		finish();
		phase_ = phase;
		phase_start_ = now;
		last_print_ = now;
		last_machine_print_ = now - std::chrono::seconds(1);
		open_ = true;
	}
	done_ = done;
	total_ = total;
	// A program reading the fd gets a line every 100 ms at most, and the first at once.
	if (machine_fd_ >= 0 && now - last_machine_print_ >= std::chrono::milliseconds(100)) {
		print_machine();
		last_machine_print_ = now;
	}
	if (mode_ == Mode::none)
		return;
	// A terminal redraws often; a log gets a line every few seconds, not a flood.
	const auto interval = mode_ == Mode::bar ? std::chrono::milliseconds(200) : std::chrono::milliseconds(2000);
	if (now - last_print_ >= interval) {
		print(false);
		last_print_ = now;
	}
}

void ProgressReporter::finish()
{
	if (!open_)
		return;
	if (machine_fd_ >= 0)
		print_machine();
	if (mode_ != Mode::none)
		print(true);
	open_ = false;
}

void ProgressReporter::print_machine()
{
	std::string word(phase_);
	std::replace(word.begin(), word.end(), ' ', '-');
	const std::string line = fmt::format("{} {} {}\n", word, done_, total_);
	// Progress is best effort: a reader that went away must not stop the work.
	[[maybe_unused]] ssize_t written = ::write(machine_fd_, line.data(), line.size());
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
	std::string figures = fmt::format("{:5.1f}% {} / {}, {}/s, ETA {}", fraction * 100, human_bytes(done_),
					  human_bytes(total_), human_bytes(std::uint64_t(rate)), eta);
	if (!note_.empty())
		figures += ", " + note_;
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
