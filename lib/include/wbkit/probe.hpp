// What libblkid (util-linux's probing library, the one blkid(8), mount and
// udev use) finds on a device: the tools that prepare a cache (wbctl
// create, attach, replace-cache) refuse a device that holds anything it
// knows, by the name it gives, before the kernel's own rule (first and
// last MiB zero, kmod/README.md) is asked.
#pragma once

#include <optional>
#include <string>

namespace wbkit {

struct Signature {
	// libblkid's name of what it found: a superblock's TYPE ("ext4",
	// "linux_raid_member", "crypto_LUKS", "LVM2_member", "bcache", ...) or
	// a partition table's PTTYPE ("gpt", "dos"); "several signatures" when
	// more than one was found and it would not choose (an ambivalent probe).
	std::string type;
	std::string version; // VERSION when it gives one ("1.2" for MD), else empty
	bool partition_table = false;
};

// Probes a block device or an image file (superblocks with their magic,
// and partition tables) with blkid_do_safeprobe. Nothing found: nullopt.
// Throws IoError when it cannot be opened or read.
std::optional<Signature> probe_signature(const std::string& path);

// "ext4", "linux_raid_member 1.2", "a gpt partition table": for messages.
std::string describe(const Signature& signature);

} // namespace wbkit
