#include "wbkit/identity.hpp"

#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <vector>

#include "wbkit/errors.hpp"

namespace wbkit {

namespace {

namespace fs = std::filesystem;

std::string sysfs_dir(const std::string& root, std::uint64_t dev)
{
	return fmt::format("{}/dev/block/{}:{}", root, major(dev), minor(dev));
}

std::optional<std::string> read_line(const fs::path& file)
{
	std::ifstream in(file);
	std::string line;
	if (!in || !std::getline(in, line))
		return std::nullopt;
	return line;
}

std::optional<std::uint64_t> parse_dev(const std::string& text)
{
	unsigned maj = 0, min = 0;
	if (std::sscanf(text.c_str(), "%u:%u", &maj, &min) != 2)
		return std::nullopt;
	return std::uint64_t(makedev(maj, min));
}

// The file behind a loop device: LOOP_GET_STATUS64 names it by device and
// inode even when its path was deleted or is not visible here; sysfs's
// backing_file is the fallback when the node cannot be opened.
void add_loop_file(PathIdentity& id, const std::string& node, const fs::path& sysdir)
{
	int fd = ::open(node.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		loop_info64 info{};
		if (::ioctl(fd, LOOP_GET_STATUS64, &info) == 0)
			id.loop_files.insert({std::uint64_t(info.lo_device), std::uint64_t(info.lo_inode)});
		::close(fd);
	}
	if (auto file = read_line(sysdir / "loop" / "backing_file")) {
		struct stat st {};
		if (::stat(file->c_str(), &st) == 0)
			id.loop_files.insert({std::uint64_t(st.st_dev), std::uint64_t(st.st_ino)});
	}
}

// Adds dev and everything stacked below it.
void add_block_device(PathIdentity& id, const std::string& root, std::uint64_t dev, const std::string& node,
		      unsigned depth)
{
	if (depth > 16 || !id.devices.insert(dev).second)
		return;
	const fs::path sysdir = sysfs_dir(root, dev);
	std::error_code ec;
	if (fs::exists(sysdir / "loop", ec))
		add_loop_file(id, node, sysdir);
	if (fs::exists(sysdir / "partition", ec)) {
		// /sys/dev/block/M:m links to .../<disk>/<partition>: the disk is the parent directory.
		const fs::path real = fs::canonical(sysdir, ec);
		if (!ec)
			if (auto disk = parse_dev(read_line(real.parent_path() / "dev").value_or("")))
				id.partition_disks.insert(*disk);
	}
	for (const auto& slave : fs::directory_iterator(sysdir / "slaves", ec)) {
		auto slave_dev = parse_dev(read_line(slave.path() / "dev").value_or(""));
		if (slave_dev)
			add_block_device(id, root, *slave_dev, "/dev/" + slave.path().filename().string(), depth + 1);
	}
}

} // namespace

PathIdentity identify_path(const std::string& path, const std::string& sysfs_root)
{
	PathIdentity id;
	id.path = path;
	struct stat st {};
	if (::stat(path.c_str(), &st) != 0) {
		if (errno != ENOENT)
			throw IoError("cannot examine", path, errno);
		// Not there yet: it is the name it would be created under in its directory.
		const fs::path p(path);
		const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
		struct stat dir_st {};
		if (::stat(dir.c_str(), &dir_st) != 0)
			throw IoError("cannot examine the directory of", path, errno);
		id.to_create = {{std::uint64_t(dir_st.st_dev), std::uint64_t(dir_st.st_ino)}, p.filename().string()};
		return id;
	}
	id.exists = true;
	if (S_ISBLK(st.st_mode)) {
		id.block_device = true;
		id.rdev = std::uint64_t(st.st_rdev);
		add_block_device(id, sysfs_root, std::uint64_t(st.st_rdev), path, 0);
	} else {
		id.regular_file = S_ISREG(st.st_mode);
		id.file = PathIdentity::FileId{std::uint64_t(st.st_dev), std::uint64_t(st.st_ino)};
	}
	return id;
}

std::optional<std::string> same_storage(const PathIdentity& a, const PathIdentity& b)
{
	if (a.to_create && b.to_create)
		return *a.to_create == *b.to_create ? std::optional<std::string>("the same new file") : std::nullopt;
	if (a.file && b.file)
		return *a.file == *b.file ? std::optional<std::string>("the same file") : std::nullopt;
	if (a.block_device && b.block_device) {
		if (a.rdev == b.rdev)
			return "the same block device";
		for (std::uint64_t dev : a.devices)
			if (b.devices.count(dev))
				return fmt::format("block devices stacked on one device ({}:{})", major(dev), minor(dev));
		for (std::uint64_t disk : a.partition_disks)
			if (b.devices.count(disk))
				return fmt::format("a partition and its disk ({}:{})", major(disk), minor(disk));
		for (std::uint64_t disk : b.partition_disks)
			if (a.devices.count(disk))
				return fmt::format("a partition and its disk ({}:{})", major(disk), minor(disk));
		for (const auto& file : a.loop_files)
			if (b.loop_files.count(file))
				return "loop devices over the same file";
		return std::nullopt;
	}
	const PathIdentity& device = a.block_device ? a : b;
	const PathIdentity& other = a.block_device ? b : a;
	if (device.block_device && other.file && device.loop_files.count(*other.file))
		return "a loop device and the file behind it";
	return std::nullopt;
}

void check_distinct_paths(std::span<const RolePath> paths)
{
	std::vector<std::pair<const RolePath*, PathIdentity>> ids;
	for (const RolePath& p : paths)
		if (!p.path.empty())
			ids.emplace_back(&p, identify_path(p.path));
	for (std::size_t i = 0; i < ids.size(); ++i)
		for (std::size_t j = i + 1; j < ids.size(); ++j)
			if (auto why = same_storage(ids[i].second, ids[j].second))
				throw RefusedError(fmt::format("{} ({}) and {} ({}) are the same storage: {}", ids[i].first->role,
							       ids[i].first->path, ids[j].first->role, ids[j].first->path,
							       *why));
}

} // namespace wbkit
