// control.hpp: DmsetupSystem, the System that runs dmsetup(8) and reads
// sysfs for wbctl.
#include "wbkit/control.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fstream>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <thread>
#include <unistd.h>

#include "control/control_internal.hpp"
#include "control/words.hpp"
#include "wbkit/device.hpp"

namespace wbkit {

std::string trimmed(std::string text)
{
	while (!text.empty() && std::strchr(" \t\r\n", text.back()))
		text.pop_back();
	for (char& c : text)
		if (c == '\n')
			c = ' ';
	return text.empty() ? "(no message)" : text;
}

namespace {

class DmsetupMessage : public PendingMessage {
public:
	explicit DmsetupMessage(const std::vector<std::string>& argv) : program_(argv) {}
	std::optional<ProgramOutput> poll() override { return program_.poll(); }
	ProgramOutput stop() override { return program_.stop(); }

private:
	RunningProgram program_;
};

std::string read_sysfs(const std::string& path)
{
	std::ifstream in(path);
	if (!in)
		throw IoError("cannot read", path, errno ? errno : ENOENT);
	std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
	return text;
}

std::pair<unsigned, unsigned> parse_devno(const std::string& devno)
{
	const std::size_t colon = devno.find(':');
	auto major = colon == std::string::npos ? std::nullopt : decimal(std::string_view(devno).substr(0, colon));
	auto minor = colon == std::string::npos ? std::nullopt : decimal(std::string_view(devno).substr(colon + 1));
	if (!major || !minor)
		throw Error(fmt::format("'{}' is not a device number (major:minor)", devno));
	return {unsigned(*major), unsigned(*minor)};
}

} // namespace

// Zeroes the first and the last MiB of a cache device (all of a smaller
// one): its superblock and first segments, and whatever a foreign format
// keeps at the end (MD 0.90 and 1.0, a GPT's backup), so that the target
// formats it (the format rule: zeros at both ends) instead of replaying an
// old log or refusing it.
void zero_cache_head(const std::string& path, bool exclusive)
{
	auto device = open_device(path, {.writable = true, .direct = true, .exclusive = exclusive});
	const std::uint64_t size = device->size_bytes();
	const std::uint64_t bytes = std::min<std::uint64_t>(size, cache_check_bytes);
	AlignedBuffer zeros{std::size_t(bytes)};
	// The superblock goes first, durably: the last MiB holds the headers of
	// the ring's last slots, and zeroed alone (the magic still there after
	// a power cut) they would leave a log with a gap, whose replay puts the
	// older copies of those segments' blocks over the written-back ones.
	device->write_exact(0, zeros.span());
	device->flush_or_throw();
	if (size > bytes) {
		device->write_exact(size - bytes, zeros.span());
		device->flush_or_throw();
	}
}

DmsetupSystem::DmsetupSystem(std::string program) : program_(find_program(program)) {}

std::string DmsetupSystem::run(const std::vector<std::string>& args)
{
	std::vector<std::string> argv{program_};
	argv.insert(argv.end(), args.begin(), args.end());
	ProgramOutput done = run_program(argv, true);
	if (done.status != 0) {
		std::string words = program_;
		for (const std::string& a : args)
			words += a.find(' ') == std::string::npos ? " " + a : " \"" + a + "\"";
		throw DmsetupError(fmt::format("`{}` failed (exit {}): {}", words, done.status, trimmed(done.err)));
	}
	return done.out;
}

std::string DmsetupSystem::table(const std::string& name) { return run({"table", name}); }
std::string DmsetupSystem::status(const std::string& name) { return run({"status", name}); }
void DmsetupSystem::suspend(const std::string& name, bool lockfs)
{
	if (lockfs)
		run({"suspend", name});
	else
		run({"suspend", "--nolockfs", name});
}
void DmsetupSystem::resume(const std::string& name) { run({"resume", name}); }
void DmsetupSystem::load(const std::string& name, const std::string& line) { run({"load", name, "--table", line}); }
void DmsetupSystem::clear(const std::string& name) { run({"clear", name}); }

bool DmsetupSystem::exists(const std::string& name)
{
	return run_program({program_, "info", name}, true).status == 0;
}
void DmsetupSystem::create(const std::string& name, const std::string& line)
{
	run({"create", name, "--table", line});
}
void DmsetupSystem::remove(const std::string& name) { run({"remove", name}); }

std::unique_ptr<PendingMessage> DmsetupSystem::start_drop_caches(const std::string& name)
{
	return std::make_unique<DmsetupMessage>(std::vector<std::string>{program_, "message", name, "0", "drop_caches"});
}

void DmsetupSystem::flush_device(const std::string& name)
{
	const std::string path = name.find('/') == std::string::npos ? "/dev/mapper/" + name : name;
	const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return; // best effort: the drop_caches message does the work
	(void)::fsync(fd);
	::close(fd);
}

std::uint64_t DmsetupSystem::device_sectors(const std::string& devno)
{
	parse_devno(devno);
	const std::string path = "/sys/dev/block/" + devno + "/size";
	const std::string text = read_sysfs(path);
	const auto words = words_of(text);
	auto sectors = words.empty() ? std::nullopt : decimal(words.front());
	if (!sectors)
		throw Error(fmt::format("{}: not a number of sectors", path));
	return *sectors;
}

void DmsetupSystem::wipe_cache(const std::string& devno, const std::string& holder)
{
	const std::string path = block_device_path(devno);
	// The suspended table of `holder` must be the only one holding it:
	// /sys/dev/block/<devno>/holders/ names it (dm-N, whose dm/name is
	// the device-mapper name).
	const std::string holders = "/sys/dev/block/" + devno + "/holders";
	const std::string want = holder.substr(holder.rfind('/') + 1);
	std::vector<std::string> found;
	if (DIR* dir = ::opendir(holders.c_str())) {
		while (const dirent* entry = ::readdir(dir))
			if (entry->d_name[0] != '.')
				found.emplace_back(entry->d_name);
		::closedir(dir);
	}
	auto is_holder = [&](const std::string& dm) {
		if (dm == want)
			return true;
		try {
			const auto words = words_of(read_sysfs("/sys/block/" + dm + "/dm/name"));
			return !words.empty() && words.front() == want;
		} catch (const Error&) {
			return false;
		}
	};
	if (found.size() != 1 || !is_holder(found.front()))
		throw Error(fmt::format("{}: held by {} device(s) other than {} only: not wiped", path, found.size(),
					holder));
	zero_cache_head(path, false);
}

void DmsetupSystem::sleep(std::chrono::milliseconds duration) { std::this_thread::sleep_for(duration); }

std::string block_device_path(const std::string& devno, const std::string& sysfs_root)
{
	const auto [major, minor] = parse_devno(devno);
	const std::string uevent = sysfs_root + "/dev/block/" + devno + "/uevent";
	std::string devname;
	for (std::string_view word : words_of(read_sysfs(uevent)))
		if (word.substr(0, 8) == "DEVNAME=")
			devname = std::string(word.substr(8));
	if (devname.empty())
		throw IoError("no DEVNAME in", uevent, ENOENT);
	const std::string path = "/dev/" + devname;
	struct stat st {};
	if (::stat(path.c_str(), &st) != 0)
		throw IoError("cannot find the device node of " + devno, path, errno);
	if (!S_ISBLK(st.st_mode) || st.st_rdev != makedev(major, minor))
		throw IoError("is not the block device " + devno, path, ENODEV);
	return path;
}

} // namespace wbkit
