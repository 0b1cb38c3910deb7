#include "wbkit/probe.hpp"

#include <blkid/blkid.h>

#include <cerrno>
#include <memory>

#include <fmt/format.h>

#include "wbkit/errors.hpp"

namespace wbkit {

namespace {

struct ProbeFree {
	void operator()(blkid_probe probe) const noexcept { blkid_free_probe(probe); }
};
using Probe = std::unique_ptr<std::remove_pointer_t<blkid_probe>, ProbeFree>;

std::optional<std::string> lookup(blkid_probe probe, const char* name)
{
	const char* value = nullptr;
	if (blkid_probe_lookup_value(probe, name, &value, nullptr) != 0 || !value)
		return std::nullopt;
	return std::string(value);
}

} // namespace

std::optional<Signature> probe_signature(const std::string& path)
{
	errno = 0;
	Probe probe{blkid_new_probe_from_filename(path.c_str())};
	if (!probe)
		throw IoError("cannot open it for libblkid's probe", path, errno ? errno : EIO);
	if (blkid_probe_enable_superblocks(probe.get(), 1) != 0 ||
	    blkid_probe_set_superblocks_flags(probe.get(), BLKID_SUBLKS_TYPE | BLKID_SUBLKS_VERSION |
								   BLKID_SUBLKS_USAGE | BLKID_SUBLKS_MAGIC) != 0 ||
	    blkid_probe_enable_partitions(probe.get(), 1) != 0 ||
	    blkid_probe_set_partitions_flags(probe.get(), BLKID_PARTS_MAGIC) != 0)
		throw IoError("cannot set up libblkid's probe", path, EINVAL);
	errno = 0;
	const int rc = blkid_do_safeprobe(probe.get());
	if (rc == 1)
		return std::nullopt;
	if (rc == -2)
		return Signature{.type = "several signatures", .version = {}, .partition_table = false};
	if (rc != 0)
		throw IoError("libblkid's probe failed", path, errno ? errno : EIO);
	Signature found;
	if (auto type = lookup(probe.get(), "TYPE")) {
		found.type = *type;
		found.version = lookup(probe.get(), "VERSION").value_or("");
	} else if (auto pttype = lookup(probe.get(), "PTTYPE")) {
		found.type = *pttype;
		found.partition_table = true;
	} else {
		return std::nullopt;
	}
	return found;
}

std::string describe(const Signature& signature)
{
	if (signature.partition_table)
		return fmt::format("a {} partition table", signature.type);
	if (signature.type == "linux_raid_member" && !signature.version.empty())
		return fmt::format("{} {}", signature.type, signature.version);
	return signature.type;
}

} // namespace wbkit
