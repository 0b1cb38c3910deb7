// wbstat: the live state of every writeboost target (dm-writeboost and
// dm-wbkit), from dmsetup status and table: labelled figures, JSON, or the
// Prometheus text format. Read-only.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <thread>

#include "tool_main.hpp"
#include "wbkit/atomic_file.hpp"
#include "wbkit/dmsetup.hpp"
#include "wbkit/errors.hpp"
#include "wbkit/report.hpp"

namespace {

constexpr const char* description = R"(Show the live state of writeboost devices (dm-writeboost and dm-wbkit).

Reads `dmsetup status --target writeboost` and `dmsetup table --target
writeboost` for every device, or for the DEVICEs named, and prints labelled
figures: dirty blocks and bytes, read and write hit ratios, segments in use,
writeback progress (current, last flushed and last written-back segment id),
the tunables, dm-wbkit's error counters (the reply to the read-only message
`error_counts`), and for a dead dm-wbkit target why it died (the reply to
the read-only message `dead_cause`). --interval adds rates over each
interval.

`wbstat -` (or --from-file FILE) reads the output of dmsetup status, and
table lines too, from stdin or a file instead: `dmsetup status | wbstat -`.

--json prints one JSON document (schema wbstat/1); --prometheus the
Prometheus text format, for node_exporter's textfile collector:
--prometheus-file PATH writes it to PATH atomically (a temporary file in the
same directory, renamed into place).

wbstat never writes to a device and changes nothing.

Exit codes: 0 success, 1 a dm-wbkit target is dead, 2 usage error,
3 operational error (dmsetup failed, a device is not a writeboost device,
input that does not parse).)";

struct Options {
	std::vector<std::string> devices;
	std::string from_file;
	bool json = false;
	bool prometheus = false;
	std::string prometheus_file;
	std::optional<double> interval;
	std::optional<std::uint64_t> count;
	std::string dmsetup = "dmsetup";
};

struct Sample {
	std::vector<wbkit::WbDevice> devices;
	std::int64_t time = 0;
	std::chrono::steady_clock::time_point taken;
};

std::string read_input(const std::string& path)
{
	std::ostringstream text;
	if (path == "-") {
		text << std::cin.rdbuf();
		if (std::cin.bad())
			throw wbkit::IoError("cannot read", "stdin", errno);
		return text.str();
	}
	std::ifstream in(path, std::ios::binary);
	if (!in)
		throw wbkit::IoError("cannot open", path, errno);
	text << in.rdbuf();
	if (in.bad())
		throw wbkit::IoError("cannot read", path, errno);
	return text.str();
}

void warn(const std::vector<std::string>& warnings)
{
	for (const std::string& w : warnings)
		std::cerr << "wbstat: warning: " << w << '\n';
}

bool any_dead(const std::vector<wbkit::WbDevice>& devices)
{
	for (const wbkit::WbDevice& d : devices)
		if (d.status.dead().value_or(false))
			return true;
	return false;
}

class Output {
public:
	explicit Output(const Options& o) : o_(o) {}

	void emit(const wbkit::StatusReport& report, bool many)
	{
		using namespace wbkit;
		if (!o_.prometheus_file.empty()) {
			AtomicFile file(o_.prometheus_file);
			write_status_prometheus(file.stream(), report);
			file.commit();
			return;
		}
		if (o_.json) {
			// One document; in a series, one compact document per line.
			std::cout << status_json(report, many ? -1 : 2) << '\n';
		} else if (o_.prometheus) {
			write_status_prometheus(std::cout, report);
		} else {
			if (many) {
				std::time_t t = std::time_t(report.time);
				std::tm tm{};
				::gmtime_r(&t, &tm);
				char stamp[32];
				std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S UTC", &tm);
				std::cout << (reports_++ ? "\n" : "") << "--- " << stamp << '\n';
			}
			print_status(std::cout, report);
		}
		std::cout.flush();
		if (!std::cout)
			throw IoError("cannot write the output", "stdout", errno);
	}

private:
	const Options& o_;
	unsigned reports_ = 0;
};

int run(const Options& o)
{
	using namespace wbkit;
	std::string file = o.from_file;
	if (o.devices.size() == 1 && o.devices.front() == "-")
		file = "-";
	else
		for (const std::string& d : o.devices)
			if (d == "-")
				throw UsageError("`-` (stdin) cannot be mixed with device names");
	if (!file.empty() && !o.from_file.empty() && !o.devices.empty())
		throw UsageError("name devices or give --from-file, not both");
	if (o.count && !o.interval)
		throw UsageError("--count needs --interval");
	if (!file.empty() && o.interval)
		throw UsageError("--interval needs live devices: a file holds one sample");

	Output output(o);
	if (!file.empty()) {
		StatusReport report{.devices = read_dmsetup_output(read_input(file), file == "-" ? "stdin" : file)};
		report.source = file;
		report.time = std::int64_t(std::time(nullptr));
		output.emit(report, false);
		return int(any_dead(report.devices) ? ExitCode::damage : ExitCode::ok);
	}

	DmsetupReader reader(o.dmsetup);
	auto sample = [&] {
		Sample s;
		s.devices = o.devices.empty() ? reader.all() : reader.named(o.devices);
		s.time = std::int64_t(std::time(nullptr));
		s.taken = std::chrono::steady_clock::now();
		return s;
	};
	Sample previous = sample();
	warn(reader.warnings());
	if (!o.interval) {
		StatusReport report{.devices = previous.devices, .time = previous.time};
		output.emit(report, false);
		return int(any_dead(report.devices) ? ExitCode::damage : ExitCode::ok);
	}

	const auto period = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
		std::chrono::duration<double>(*o.interval));
	const bool many = !o.count || *o.count > 1;
	const auto start = previous.taken;
	bool dead = false;
	for (std::uint64_t n = 1; !o.count || n <= *o.count; ++n) {
		std::this_thread::sleep_until(start + period * n);
		std::size_t seen = reader.warnings().size();
		Sample current = sample();
		if (reader.warnings().size() > seen)
			warn({reader.warnings().begin() + std::ptrdiff_t(seen), reader.warnings().end()});
		const double seconds = std::chrono::duration<double>(current.taken - previous.taken).count();
		StatusReport report{.devices = current.devices, .interval_seconds = *o.interval, .time = current.time};
		for (const WbDevice& d : current.devices) {
			std::optional<WbRates> r;
			for (const WbDevice& p : previous.devices)
				if (p.name == d.name && p.start == d.start)
					r = wb_rates(p, d, seconds);
			report.rates.push_back(r);
		}
		output.emit(report, many);
		dead = any_dead(current.devices);
		previous = std::move(current);
	}
	return int(dead ? ExitCode::damage : ExitCode::ok);
}

} // namespace

int main(int argc, char** argv)
{
	CLI::App app(description, "wbstat");
	Options o;
	app.add_option("DEVICE", o.devices, "device-mapper devices to show (default: every writeboost device); `-`: read dmsetup's output from stdin")
		->type_name("DEVICE ...");
	app.add_option("--from-file", o.from_file, "read the output of dmsetup status (and table) from FILE (`-`: stdin) instead of running dmsetup")
		->type_name("FILE");
	auto* json = app.add_flag("--json", o.json, "print one JSON document (schema wbstat/1)");
	auto* prometheus = app.add_flag("--prometheus", o.prometheus, "print the Prometheus text format (node_exporter's textfile collector)");
	auto* prometheus_file = app.add_option("--prometheus-file", o.prometheus_file, "write the Prometheus text format to PATH atomically (temporary file, then rename)")
					->type_name("PATH");
	json->excludes(prometheus)->excludes(prometheus_file);
	prometheus->excludes(prometheus_file);
	app.add_option("--interval", o.interval, "take a sample every SECONDS and show rates over each interval")
		->type_name("SECONDS")
		->check(CLI::PositiveNumber);
	app.add_option("--count", o.count, "stop after N reports (with --interval; default: run until interrupted)")
		->type_name("N")
		->check(CLI::PositiveNumber);
	app.add_option("--dmsetup", o.dmsetup, "the dmsetup program to run (default: dmsetup from PATH, /usr/sbin or /sbin)")
		->type_name("PROGRAM");
	return wbkit::run_tool("wbstat", app, argc, argv, [&] { return run(o); });
}
