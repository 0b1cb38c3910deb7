// control.hpp: what a cache device holds, and the checks of a device before
// attach and create make it a cache.
#include "wbkit/control.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "control/control_internal.hpp"
#include "wbkit/device.hpp"
#include "wbkit/format.hpp"
#include "wbkit/log_scan.hpp"
#include "wbkit/probe.hpp"
#include "wbkit/replay.hpp"

namespace wbkit {

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

} // namespace wbkit
