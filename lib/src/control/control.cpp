// control.hpp: flush, detach and attach of a live writeboost device.
#include "wbkit/control.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <thread>
#include <unistd.h>

#include "wbkit/atomic_file.hpp"
#include "wbkit/device.hpp"
#include "wbkit/format.hpp"
#include "wbkit/log_scan.hpp"
#include "wbkit/probe.hpp"
#include "wbkit/replay.hpp"
#include "control/words.hpp"

namespace wbkit {

namespace {

std::string trimmed(std::string text)
{
	while (!text.empty() && std::strchr(" \t\r\n", text.back()))
		text.pop_back();
	for (char& c : text)
		if (c == '\n')
			c = ' ';
	return text.empty() ? "(no message)" : text;
}

std::chrono::milliseconds ms_between(Clock::time_point a, Clock::time_point b)
{
	return std::chrono::duration_cast<std::chrono::milliseconds>(b - a);
}

std::string full_line(const DmTargetLine& line)
{
	return fmt::format("{} {} {} {}", line.start, line.length, line.type, line.params);
}

WbStatus read_status(System& system, const std::string& name)
{
	const DmTargetLine line = single_target(system.status(name), name);
	if (line.type != "writeboost")
		throw Error(fmt::format("{}: not a writeboost device (its target is {})", name, line.type));
	return parse_wb_status(line.params);
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

constexpr const char* known_table_keys[] = {
	"writeback_threshold",
	"nr_max_batched_writeback",
	"update_sb_record_interval",
	"sync_data_interval",
	"read_cache_threshold",
	"nr_read_cache_cells",
	"write_around_mode",
};

} // namespace

// ---------------------------------------------------------------------------
// Table lines

DmTargetLine single_target(std::string_view table_text, std::string_view name)
{
	std::vector<DmTargetLine> lines;
	std::size_t pos = 0;
	while (pos < table_text.size()) {
		std::size_t end = table_text.find('\n', pos);
		if (end == std::string_view::npos)
			end = table_text.size();
		std::string_view text = table_text.substr(pos, end - pos);
		pos = end + 1;
		if (words_of(text).empty())
			continue;
		auto line = split_dm_line(text);
		if (!line)
			throw Error(fmt::format("{}: dmsetup printed a line that is no target line: '{}'", name,
						std::string(text.substr(0, 80))));
		lines.push_back(std::move(*line));
	}
	if (lines.empty())
		throw Error(fmt::format("{}: the device has no table (no target)", name));
	if (lines.size() > 1)
		throw Error(fmt::format("{}: the device has {} targets; wbctl changes only a device of one target",
					name, lines.size()));
	if (lines.front().start != 0)
		throw Error(fmt::format("{}: its target starts at sector {}, not 0", name, lines.front().start));
	return lines.front();
}

std::optional<LinearParams> parse_linear_params(std::string_view params)
{
	const auto words = words_of(params);
	if (words.size() != 2)
		return std::nullopt;
	auto offset = decimal(words[1]);
	if (!offset)
		return std::nullopt;
	return LinearParams{std::string(words[0]), *offset};
}

std::string linear_table_line(std::uint64_t sectors, std::string_view backing)
{
	return fmt::format("0 {} linear {} 0", sectors, backing);
}

std::string writeboost_table_line(std::uint64_t sectors, std::string_view backing, std::string_view cache,
				  const std::vector<std::pair<std::string, std::string>>& args)
{
	std::string line = fmt::format("0 {} writeboost {} {}", sectors, backing, cache);
	if (!args.empty()) {
		line += fmt::format(" {}", args.size() * 2);
		for (const auto& [key, value] : args)
			line += fmt::format(" {} {}", key, value);
	}
	return line;
}

std::vector<std::pair<std::string, std::string>> parse_table_options(std::span<const std::string> words)
{
	std::vector<std::pair<std::string, std::string>> args;
	for (const std::string& word : words) {
		const std::size_t eq = word.find('=');
		if (eq == std::string::npos)
			throw UsageError(fmt::format("table option '{}': write it as KEY=VALUE", word));
		std::string key = word.substr(0, eq);
		std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return char(std::tolower(c)); });
		const std::string value = word.substr(eq + 1);
		if (std::find(std::begin(known_table_keys), std::end(known_table_keys), key) == std::end(known_table_keys))
			throw UsageError(fmt::format("table option '{}': unknown key (known: writeback_threshold, "
						     "nr_max_batched_writeback, update_sb_record_interval, "
						     "sync_data_interval, read_cache_threshold, nr_read_cache_cells, "
						     "write_around_mode)",
						     key));
		if (!decimal(value))
			throw UsageError(fmt::format("table option '{}': the value is not a decimal number: '{}'", key,
						     value));
		args.emplace_back(std::move(key), value);
	}
	return args;
}

// ---------------------------------------------------------------------------
// What a cache device holds

CacheContent classify_cache_content(std::span<const std::byte> head, std::span<const std::byte> tail,
				    std::uint64_t device_bytes)
{
	constexpr std::size_t mib = cache_check_bytes;
	constexpr std::uint32_t md_magic = 0xa92b4efc;
	if (head.size() < mib || tail.size() < mib || device_bytes < mib)
		throw Error("classify_cache_content: the first and the last MiB are needed");
	const std::uint64_t tail_offset = device_bytes - mib;
	auto u8 = [](std::span<const std::byte> b, std::size_t at) { return std::uint8_t(b[at]); };
	auto le16 = [&](std::span<const std::byte> b, std::size_t at) {
		return std::uint16_t(u8(b, at) | u8(b, at + 1) << 8);
	};
	auto le32 = [&](std::span<const std::byte> b, std::size_t at) {
		return std::uint32_t(u8(b, at)) | std::uint32_t(u8(b, at + 1)) << 8 | std::uint32_t(u8(b, at + 2)) << 16 |
		       std::uint32_t(u8(b, at + 3)) << 24;
	};
	auto has = [](std::span<const std::byte> b, std::size_t at, std::string_view text) {
		return std::memcmp(b.data() + at, text.data(), text.size()) == 0;
	};
	auto zero = [](std::span<const std::byte> b) {
		return std::all_of(b.begin(), b.end(), [](std::byte x) { return x == std::byte{0}; });
	};
	const std::uint32_t magic = le32(head, 0);
	if (magic == superblock_magic) {
		if (wb_superblock_valid(reinterpret_cast<const __u8*>(head.data())))
			return {CacheContent::Kind::writeboost, "a writeboost cache (its log would be replayed)"};
		return {CacheContent::Kind::foreign, "the writeboost magic but not a valid superblock"};
	}

	// Where the first non-zero byte is, if any: zeros at both ends are a
	// request for a new cache, whatever a list of signatures knows.
	std::optional<std::uint64_t> nonzero;
	auto first = std::find_if(head.begin(), head.begin() + mib, [](std::byte x) { return x != std::byte{0}; });
	if (first != head.begin() + mib) {
		nonzero = std::uint64_t(first - head.begin());
	} else {
		auto last = std::find_if(tail.begin(), tail.begin() + mib, [](std::byte x) { return x != std::byte{0}; });
		if (last != tail.begin() + mib)
			nonzero = tail_offset + std::uint64_t(last - tail.begin());
	}
	if (!nonzero)
		return {CacheContent::Kind::blank, "nothing (the first and the last MiB are zero)"};
	// wb_wiped_cache_start: the trust record of a dm-wbkit cache whose
	// first 4 KiB were zeroed (Debian's `writeboost -u`).
	const std::size_t trust = WB_TRUST_SECTOR * sector_size;
	if (zero(head.subspan(0, trust)) && le32(head, trust) == WB_TRUST_MAGIC && zero(head.subspan(trust + 4, 4)) &&
	    zero(head.subspan(trust + 16, 4096 - 16)) && zero(head.subspan(trust + 4096, WB_SB_RECORD_OFFSET - trust - 4096)))
		return {CacheContent::Kind::blank, "a dm-wbkit cache whose first 4 KiB were zeroed (formatted again)"};

	// Only names what is there, for the message: the kernel's list.
	const char* what = nullptr;
	const std::uint64_t md090 = (device_bytes & ~std::uint64_t(65535)) - 65536;
	const std::uint64_t md10 = ((device_bytes / 512 - 16) & ~std::uint64_t(7)) * 512;
	if (has(head, 0, "XFSB"))
		what = "an XFS file system";
	else if (has(head, 0, "LUKS\xba\xbe"))
		what = "a LUKS header";
	else if (le32(head, 0) == 0x23489321)
		what = "a dm-writecache superblock";
	else if (le32(head, 0) == md_magic)
		what = "an MD RAID superblock (1.1)";
	else if (le32(head, 4096) == md_magic)
		what = "an MD RAID superblock (1.2)";
	else if (has(head, 0, "LABELONE") || has(head, 512, "LABELONE") || has(head, 1024, "LABELONE") ||
		 has(head, 1536, "LABELONE"))
		what = "an LVM2 physical volume label";
	else if (has(head, 4096 + 24, "\xc6\x85\x73\xf6\x4e\x1a\x45\xca\x82\x65\xf5\x7f\x48\xba\x6d\x81"))
		what = "a bcache superblock";
	else if (le16(head, 1080) == 0xef53)
		what = "an ext2/3/4 file system";
	else if (le32(head, 1024) == 0xf2f52010)
		what = "an f2fs file system";
	else if (le16(head, 1024 + 6) == 0x3434)
		what = "a nilfs2 file system";
	else if (has(head, 65536 + 64, "_BHRfS_M"))
		what = "a btrfs file system";
	else if (has(head, 65536 + 52, "ReIsEr") || has(head, 8192 + 52, "ReIsEr"))
		what = "a ReiserFS file system";
	else if (has(head, 32768, "JFS1"))
		what = "a JFS file system";
	else if (has(head, 32768 + 1, "CD001"))
		what = "an ISO 9660 file system";
	else if (has(head, 4086, "SWAPSPACE2") || has(head, 4086, "SWAP-SPACE"))
		what = "a swap area";
	else if (le32(head, 32) == 6142003 && le32(head, 36) == 0)
		what = "dm-cache metadata";
	else if (le32(head, 32) == 27022010 && le32(head, 36) == 0)
		what = "dm-thin metadata";
	else if (has(head, 512, "EFI PART"))
		what = "a GPT partition table";
	else if (u8(head, 510) == 0x55 && u8(head, 511) == 0xaa)
		what = "a DOS partition table or boot sector";
	else if (md090 >= tail_offset && le32(tail, md090 - tail_offset) == md_magic)
		what = "an MD RAID superblock (0.90)";
	else if (md10 >= tail_offset && le32(tail, md10 - tail_offset) == md_magic)
		what = "an MD RAID superblock (1.0)";
	else if (__builtin_popcount(magic ^ superblock_magic) <= 2)
		what = "a damaged writeboost superblock";
	if (what)
		return {CacheContent::Kind::foreign, what};
	return {CacheContent::Kind::foreign, fmt::format("non-zero data at byte {}", *nonzero)};
}

namespace {

bool has_superblock_magic(std::span<const std::byte> sector0)
{
	if (sector0.size() < 4)
		return false;
	const std::uint32_t magic = std::uint32_t(sector0[0]) | std::uint32_t(sector0[1]) << 8 |
				    std::uint32_t(sector0[2]) << 16 | std::uint32_t(sector0[3]) << 24;
	return magic == superblock_magic;
}

} // namespace

SwitchCrashDevice device_after_switch_crash(std::span<const std::byte> old_cache_sector0,
					    std::span<const std::byte> new_cache_sector0)
{
	if (has_superblock_magic(new_cache_sector0))
		return SwitchCrashDevice::new_cache;
	if (has_superblock_magic(old_cache_sector0))
		return SwitchCrashDevice::old_cache;
	return SwitchCrashDevice::backing;
}

const char* switch_crash_device_name(SwitchCrashDevice device)
{
	switch (device) {
	case SwitchCrashDevice::old_cache:
		return "old-cache";
	case SwitchCrashDevice::new_cache:
		return "new-cache";
	case SwitchCrashDevice::backing:
		return "backing";
	}
	return "?";
}

// ---------------------------------------------------------------------------
// The real system

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

// Zeroes the first and the last MiB of a cache device (all of a smaller
// one): its superblock and first segments, and whatever a foreign format
// keeps at the end (MD 0.90 and 1.0, a GPT's backup), so that the target
// formats it (the format rule: zeros at both ends) instead of replaying an
// old log or refusing it.
void zero_cache_head(const std::string& path, bool exclusive = true)
{
	auto device = open_device(path, {.writable = true, .direct = true, .exclusive = exclusive});
	const std::uint64_t size = device->size_bytes();
	const std::uint64_t bytes = std::min<std::uint64_t>(size, cache_check_bytes);
	AlignedBuffer zeros{std::size_t(bytes)};
	device->write_exact(0, zeros.span());
	if (size > bytes)
		device->write_exact(size - bytes, zeros.span());
	device->flush_or_throw();
}

} // namespace

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

namespace {

// The device number (major:minor) of the block device at path; `role`
// ("cache", "backing") names it in the errors.
std::string block_device_number(const std::string& path, const std::string& role)
{
	struct stat st {};
	if (::stat(path.c_str(), &st) != 0)
		throw IoError("cannot find the " + role + " device", path, errno);
	if (!S_ISBLK(st.st_mode))
		throw RefusedError(fmt::format("{}: not a block device: the {} device must be one", path, role));
	return fmt::format("{}:{}", major(st.st_rdev), minor(st.st_rdev));
}

// The cache device's checks common to attach and create: a block device,
// none of not_devnos, free (an exclusive open), large enough; what its
// first blocks hold. The device stays open (read-only, exclusive) for a
// closer look.
std::unique_ptr<Device> open_cache_candidate(const std::string& path, const std::vector<std::string>& not_devnos,
					     CacheCheck& check)
{
	check.devno = block_device_number(path, "cache");
	for (const std::string& other : not_devnos)
		if (other == check.devno)
			throw RefusedError(fmt::format("{} ({}) is the backing device or the device itself", path,
						       check.devno));
	// Exclusive: refused while mounted, held by a target or another O_EXCL
	// opener. Read-only until --force has to wipe it.
	auto device = open_device(path, {.writable = false, .direct = true, .exclusive = true});
	check.bytes = device->size_bytes();
	const std::uint64_t least = superblock_size + segment_size;
	if (check.bytes < least)
		throw RefusedError(fmt::format("{}: {} bytes, smaller than the superblock region and one segment ({} "
					       "bytes)",
					       path, check.bytes, least));
	// The kernel's rule first (what the target would do), then libblkid,
	// which knows far more signatures and names them as blkid(8) does.
	AlignedBuffer head(cache_check_bytes), tail(cache_check_bytes);
	device->read_exact(0, head.span());
	device->read_exact(check.bytes - cache_check_bytes, tail.span());
	check.content = classify_cache_content(head.span(), tail.span(), check.bytes);
	if (check.content.kind != CacheContent::Kind::writeboost) {
		if (auto found = probe_signature(path))
			check.content = {CacheContent::Kind::foreign, fmt::format("{} (found by libblkid)", describe(*found))};
	}
	return device;
}

// --force over a refusal: the first and last MiB zeroed (the target formats the
// cache), the refusal kept as what was overridden; without force, the
// refusal thrown.
void zero_or_refuse(const std::string& path, std::unique_ptr<Device> device, CacheCheck& check, bool force,
		    const std::string& held)
{
	if (!force)
		throw RefusedError(fmt::format("{} holds {}: refusing to use it as a cache (--force zeroes its first "
					       "and last MiB and formats it: what it holds is lost)",
					       path, held));
	check.overridden = fmt::format("{} held {}: --force zeroed its first and last MiB, the target formats it",
				       path, held);
	device.reset();
	zero_cache_head(path);
}

} // namespace

CacheCheck prepare_attach_cache(const std::string& path, const std::vector<std::string>& not_devnos, bool force)
{
	CacheCheck check;
	auto device = open_cache_candidate(path, not_devnos, check);
	if (check.content.kind != CacheContent::Kind::blank)
		zero_or_refuse(path, std::move(device), check, force, check.content.what);
	return check;
}

CreateCheck prepare_create_devices(const std::string& backing, const std::optional<std::string>& cache, bool force)
{
	CreateCheck check;
	check.backing_devno = block_device_number(backing, "backing");
	{
		// Exclusive: a mounted file system or a target holding it would
		// be written behind the cache's back.
		auto device = open_device(backing, {.writable = false, .direct = true, .exclusive = true});
		check.backing_sectors = device->size_bytes() / sector_size;
	}
	if (check.backing_sectors == 0)
		throw RefusedError(backing + ": the backing device is empty");
	if (!cache)
		return check;

	CacheCheck& c = check.cache.emplace();
	auto device = open_cache_candidate(*cache, {check.backing_devno}, c);
	switch (c.content.kind) {
	case CacheContent::Kind::blank:
		return check;
	case CacheContent::Kind::foreign:
		zero_or_refuse(*cache, std::move(device), c, force, c.content.what);
		return check;
	case CacheContent::Kind::writeboost:
		break;
	}
	// A log: the target replays it. Whether it would, and onto what, is
	// read here first, without writing.
	const LogScan scan = scan_log(*device, {.backing_bytes = check.backing_sectors * sector_size});
	const ReplayPlan plan = replay_plan(scan, {.backing_sectors = check.backing_sectors});
	std::string refusal;
	if (!scan.replayable())
		refusal = "a writeboost superblock whose geometry does not read";
	else if (scan.refused())
		refusal = "a writeboost log the target refuses to replay (see `wbdump --validate`)";
	else if (plan.summary().skipped_sectors > 0)
		refusal = fmt::format("a writeboost log with dirty sectors past the end of {} (the first: {}), so "
				      "the log of another backing device",
				      backing, plan.summary().first_skipped_sector.value_or(0));
	if (!refusal.empty()) {
		if (scan.dirty_blocks > 0)
			refusal += fmt::format(" ({} dirty blocks: `wbrecover` reads them)", scan.dirty_blocks);
		zero_or_refuse(*cache, std::move(device), c, force, refusal);
		return check;
	}
	check.replay_dirty_blocks = plan.summary().dirty_blocks;
	check.replay_segments = plan.summary().segments_contributing;
	return check;
}

WbTarget read_wb_target(System& system, const std::string& name)
{
	WbTarget t;
	t.line = single_target(system.table(name), name);
	if (t.line.type != "writeboost")
		throw Error(fmt::format("{}: not a writeboost device (its target is {})", name, t.line.type));
	t.table = parse_wb_table(t.line.params);
	t.status = read_status(system, name);
	return t;
}

// ---------------------------------------------------------------------------
// Flush

FlushGoal flush_goal(const WbStatus& status)
{
	return {.start_dirty = status.nr_dirty_cache_blocks,
		.start_writeback_id = status.last_writeback_id,
		.target_id = std::max(status.current_id, status.last_writeback_id)};
}

FlushProgress flush_progress(const FlushGoal& goal, const WbStatus& now)
{
	FlushProgress p;
	p.dirty_left = now.nr_dirty_cache_blocks;
	p.segments_total = goal.target_id - goal.start_writeback_id;
	const std::uint64_t written =
		now.last_writeback_id > goal.start_writeback_id ? now.last_writeback_id - goal.start_writeback_id : 0;
	p.segments_done = std::min(written, p.segments_total);
	p.complete = now.nr_dirty_cache_blocks == 0 || now.last_writeback_id >= goal.target_id;
	if (p.complete)
		p.fraction = 1.0;
	else if (p.segments_total == 0)
		p.fraction = 0.0;
	else
		p.fraction = double(p.segments_done) / double(p.segments_total);
	p.total_bytes = goal.start_dirty * block_size;
	p.done_bytes = std::uint64_t(double(p.total_bytes) * p.fraction);
	return p;
}

FlushResult flush(System& system, const std::string& name, const FlushOptions& options)
{
	const Clock::time_point start = system.now();
	FlushResult result;
	WbTarget target = read_wb_target(system, name);
	if (target.status.dead().value_or(false))
		throw Error(fmt::format("{}: the target is dead (fail-stop): nothing can be written back; see `wbstat {}`",
					name, name));
	auto finish = [&](FlushResult::End end, std::uint64_t left) {
		result.end = end;
		result.dirty_left = left;
		result.took = ms_between(start, system.now());
		return result;
	};
	result.start_dirty = target.status.nr_dirty_cache_blocks;
	if (result.start_dirty == 0) {
		if (options.progress)
			options.progress(flush_progress(flush_goal(target.status), target.status));
		return finish(FlushResult::End::done, 0);
	}
	// Upstream's drop_caches waits for its open segment, which only a
	// flush (or sync_data_interval) writes to the cache device.
	system.flush_device(name);
	WbStatus status = read_status(system, name);
	const FlushGoal goal = flush_goal(status);
	result.start_dirty = std::max(result.start_dirty, goal.start_dirty);
	FlushProgress progress = flush_progress(goal, status);
	if (options.progress)
		options.progress(progress);
	if (progress.complete)
		return finish(FlushResult::End::done, progress.dirty_left);

	std::unique_ptr<PendingMessage> message = system.start_drop_caches(name);
	const auto tick = std::min(options.poll_interval, std::chrono::milliseconds(100));
	Clock::time_point next_status = system.now() + options.poll_interval;
	for (;;) {
		system.sleep(tick);
		if (options.interrupted && options.interrupted()) {
			message->stop();
			return finish(FlushResult::End::interrupted, progress.dirty_left);
		}
		if (auto done = message->poll()) {
			if (done->status != 0)
				throw DmsetupError(fmt::format("{}: `dmsetup message {} 0 drop_caches` failed (exit {}): {}",
							       name, name, done->status, trimmed(done->err)));
			status = read_status(system, name);
			progress = flush_progress(goal, status);
			progress.complete = true;
			progress.fraction = 1.0;
			progress.done_bytes = progress.total_bytes;
			if (options.progress)
				options.progress(progress);
			return finish(FlushResult::End::done, progress.dirty_left);
		}
		const Clock::time_point now = system.now();
		if (options.timeout && now - start >= *options.timeout) {
			message->stop();
			return finish(FlushResult::End::timed_out, progress.dirty_left);
		}
		if (now < next_status)
			continue;
		next_status = now + options.poll_interval;
		status = read_status(system, name);
		if (status.dead().value_or(false)) {
			message->stop();
			throw Error(fmt::format("{}: the target died during the flush; see `wbstat {}`", name, name));
		}
		progress = flush_progress(goal, status);
		if (options.progress)
			options.progress(progress);
		if (progress.complete) {
			// Everything dirty at the start is home; upstream's message
			// may wait on for blocks written since.
			message->stop();
			return finish(FlushResult::End::done, progress.dirty_left);
		}
	}
}

// ---------------------------------------------------------------------------
// Detach and attach

namespace {

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
	for (const char* key : {"writeback_threshold", "sync_data_interval", "update_sb_record_interval",
				"read_cache_threshold"}) {
		const auto running = target.status.pair(key);
		if (!running || *running == target.table.arg(key).value_or(0))
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
		if (key == "write_around_mode" || key == "nr_read_cache_cells")
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

// ---------------------------------------------------------------------------
// JSON

namespace {

using ojson = nlohmann::ordered_json;

ojson flush_json(const FlushResult& r)
{
	const char* end = r.end == FlushResult::End::done          ? "done"
			  : r.end == FlushResult::End::interrupted ? "interrupted"
								   : "timed_out";
	return ojson{{"end", end},
		     {"start_dirty_blocks", r.start_dirty},
		     {"dirty_blocks_left", r.dirty_left},
		     {"milliseconds", r.took.count()}};
}

} // namespace

std::string switch_result_json(std::string_view command, std::string_view name, const SwitchResult& result,
			       const std::optional<CacheCheck>& cache)
{
	ojson doc{{"schema", "wbctl/1"}, {"command", command}, {"device", name}};
	doc["old_table"] = result.old_table;
	doc["new_table"] = result.new_table;
	doc["stall_ms"] = result.stall.count();
	ojson stalls = ojson::array();
	for (auto s : result.stalls)
		stalls.push_back(s.count());
	doc["suspends_ms"] = stalls;
	doc["parts_ms"] = ojson{{"suspend", result.suspend_took.count()},
				{"writeback", result.writeback_took.count()},
				{"load_and_resume", result.resume_took.count()}};

	if (result.mode) {
		doc["mode"] = *result.mode;
		doc["changed"] = result.changed;
	}
	if (result.drained || command == "detach" || command == "replace-cache" || command == "mode")
		doc["flush"] = flush_json(result.flushed);
	if (command == "detach" || command == "replace-cache") {
		doc["cache_wiped"] = result.cache_wiped; // false with --keep-cache
		if (result.wipe_error)
			doc["wipe_error"] = *result.wipe_error;
	}
	if (cache) {
		doc["cache"] = ojson{{"devno", cache->devno},
				     {"bytes", cache->bytes},
				     {"held", cache->content.what},
				     {"forced", cache->overridden.has_value()}};
	}
	return doc.dump(2);
}

std::string create_result_json(std::string_view name, const CreateResult& result, const CreateCheck& check,
			       const std::optional<std::string>& tab_path)
{
	ojson doc{{"schema", "wbctl/1"}, {"command", "create"}, {"device", name}};
	doc["new_table"] = result.table;
	doc["create_ms"] = result.took.count();
	doc["backing"] = ojson{{"devno", check.backing_devno}, {"sectors", check.backing_sectors}};
	if (check.cache) {
		const char* kind = check.cache->overridden                                       ? "zeroed"
				   : check.cache->content.kind == CacheContent::Kind::writeboost ? "replayed"
												 : "formatted";
		doc["cache"] = ojson{{"devno", check.cache->devno},
				     {"bytes", check.cache->bytes},
				     {"held", check.cache->content.what},
				     {"forced", check.cache->overridden.has_value()},
				     {"start", kind}};
		doc["log_dirty_blocks"] = check.replay_dirty_blocks ? ojson(*check.replay_dirty_blocks) : ojson(nullptr);
		doc["dirty_blocks"] = result.dirty_blocks ? ojson(*result.dirty_blocks) : ojson(nullptr);
	}
	doc["writeboosttab"] = tab_path ? ojson(*tab_path) : ojson(nullptr);
	return doc.dump(2);
}

std::string flush_result_json(std::string_view name, const FlushResult& result)
{
	ojson doc{{"schema", "wbctl/1"}, {"command", "flush"}, {"device", name}};
	doc["flush"] = flush_json(result);
	return doc.dump(2);
}

} // namespace wbkit
