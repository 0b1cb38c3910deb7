// Which storage a path names, to tell whether two paths a tool was given
// would read or write the same bytes.
//
// Two paths are the same target when they resolve to the same file (device
// and inode), the same block device, a loop device and the file behind it,
// two loop devices over one file, or block devices stacked on one another
// (a partition and its disk, a device-mapper device and what it maps onto,
// followed through sysfs `slaves`). Two partitions of one disk are distinct.
// A path that does not exist yet names the file it would create.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>

namespace wbkit {

struct PathIdentity {
	using FileId = std::pair<std::uint64_t, std::uint64_t>; // (st_dev, st_ino)

	std::string path;
	bool exists = false;
	bool block_device = false;
	bool regular_file = false;
	// A regular file (or anything else that is not a block device): its own id.
	std::optional<FileId> file;
	// A path that does not exist: the directory it would be created in, and its name.
	std::optional<std::pair<FileId, std::string>> to_create;
	std::uint64_t rdev = 0; // a block device's number
	// A block device: itself and every device below it (slaves, recursively).
	std::set<std::uint64_t> devices;
	// Whole disks of the partitions in `devices`: a partition overlaps its disk.
	std::set<std::uint64_t> partition_disks;
	// Files behind the loop devices in `devices`.
	std::set<FileId> loop_files;
};

// Throws IoError when the path (or, for a path to create, its directory)
// cannot be examined. sysfs_root is "/sys" except in tests.
PathIdentity identify_path(const std::string& path, const std::string& sysfs_root = "/sys");

// Why a and b name the same storage, in words ("the same file", "a loop
// device over the file", ...); nullopt when they are distinct.
std::optional<std::string> same_storage(const PathIdentity& a, const PathIdentity& b);

struct RolePath {
	std::string role; // "the cache", "the report", ...
	std::string path; // empty: not given, skipped
};

// Checks every pair before anything is opened for writing; throws
// RefusedError naming both roles, both paths and the reason.
void check_distinct_paths(std::span<const RolePath> paths);

} // namespace wbkit
