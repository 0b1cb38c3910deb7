// control.hpp: wbctl create, and the writeboosttab line that recreates the
// device at boot.
#include "wbkit/control.hpp"

#include <cerrno>
#include <fmt/format.h>
#include <fstream>
#include <sstream>

#include "control/control_internal.hpp"
#include "control/words.hpp"
#include "wbkit/atomic_file.hpp"
#include "wbkit/contract.hpp"

namespace wbkit {

// ---------------------------------------------------------------------------
// Create

CreateResult create(System& system, const std::string& name, const CreateRequest& request)
{
	if (name.empty() || name.find('/') != std::string::npos)
		throw UsageError(fmt::format("'{}': a device-mapper name has no '/'", name));
	if (system.exists(name))
		throw Error(fmt::format("{}: a device-mapper device of that name exists already", name));
	if (!request.check_devices)
		throw Error("create: no device check");
	const std::uint64_t sectors = request.check_devices();
	CreateResult result;
	result.table = request.cache ? writeboost_table_line(sectors, request.backing, *request.cache, request.args)
				     : linear_table_line(sectors, request.backing);
	const Clock::time_point t0 = system.now();
	try {
		system.create(name, result.table);
	} catch (const Error& e) {
		// dmsetup removes a device whose table did not load or resume;
		// one left behind (an older dmsetup, a signal) has no usable table.
		std::string left;
		if (system.exists(name)) {
			try {
				system.remove(name);
				left = "; the half-made device was removed";
			} catch (const Error& again) {
				left = fmt::format("; the half-made device is left: run `dmsetup remove {}` ({})", name,
						   again.what());
			}
		}
		throw Error(fmt::format("{}: the target did not start (the kernel log says why): {}", name, e.what()) +
			    left);
	}
	result.took = ms_between(t0, system.now());
	const DmTargetLine line = single_target(system.table(name), name);
	const std::string want = request.cache ? "writeboost" : "linear";
	if (line.type != want)
		throw Error(fmt::format("{}: created, but its table names the target {}, not {}", name, line.type, want));
	if (request.cache)
		result.dirty_blocks = read_status(system, name).nr_dirty_cache_blocks;
	return result;
}

std::string writeboosttab_line(const std::string& name, const std::string& backing, const std::string& cache,
			       const std::vector<std::pair<std::string, std::string>>& args)
{
	std::string options;
	for (const auto& [key, value] : args) {
		const TunableRow* row = find_tunable_row(key);
		if (row && row->fixed)
			throw UsageError(fmt::format("{}: writeboosttab's options are sent as messages after the "
						     "device is created, and {} is fixed at construction",
						     key, key));
		options += (options.empty() ? "" : ",") + key + "=" + value;
	}
	for (const std::string* word : {&name, &backing, &cache})
		if (word->empty() || word->find_first_of(" \t\n#") != std::string::npos)
			throw UsageError(fmt::format("'{}': a writeboosttab field has no blanks and no '#'", *word));
	std::string line = name + "\t" + backing + "\t" + cache;
	if (!options.empty())
		line += "\t" + options;
	return line;
}

namespace {

// The file's text ("" when it does not exist); RefusedError when a line
// names the device already.
std::string writeboosttab_without(const std::string& path, const std::string& name)
{
	std::string text;
	if (std::ifstream in{path}) {
		text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
		std::istringstream lines(text);
		std::string entry;
		while (std::getline(lines, entry)) {
			const auto words = words_of(entry);
			if (!words.empty() && words.front() == name)
				throw RefusedError(fmt::format("{}: names {} already", path, name));
		}
	} else if (errno != ENOENT) {
		throw IoError("cannot read", path, errno);
	}
	return text;
}

} // namespace

void check_writeboosttab(const std::string& path, const std::string& name) { writeboosttab_without(path, name); }

void append_writeboosttab(const std::string& path, const std::string& name, const std::string& line)
{
	std::string text = writeboosttab_without(path, name);
	if (!text.empty() && text.back() != '\n')
		text += '\n';
	AtomicFile out(path);
	out.stream() << text << line << '\n';
	out.commit();
}

} // namespace wbkit
