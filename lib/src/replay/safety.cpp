#include "wbkit/safety.hpp"

#include <array>
#include <fmt/format.h>
#include <optional>

#include "wbkit/errors.hpp"
#include "wbkit/identity.hpp"

namespace wbkit {

namespace {

using enum Refusal;

// The one list of refusals. Names are stable; messages may name any member of
// RefusalContext, and {minimum}, the smallest cache.
constexpr std::array refusal_table{
	RefusalInfo{not_distinct, "not-distinct", false, "{pair} are the same {what}", "", ""},
	RefusalInfo{cache_too_small, "cache-too-small", false,
		    "{cache} is not a writeboost cache: {cache_bytes} bytes is smaller than the superblock and one segment "
		    "({minimum} bytes)",
		    "", ""},
	RefusalInfo{superblock_unreadable, "superblock-unreadable", false,
		    "{cache}: the superblock cannot be read; use wbrecover, which tolerates read errors", "", ""},
	RefusalInfo{no_magic, "no-magic", true,
		    "{cache} has no writeboost magic (found 0x{magic:08x}): it is unformatted, and the target would "
		    "format it and replay nothing",
		    " (--force reads its log anyway)", ""},
	RefusalInfo{blocks_beyond_backing, "blocks-beyond-backing", true,
		    "{metablocks} metablock(s) of the log name blocks past the end of the backing device {backing} "
		    "({backing_bytes} bytes); first: {first}",
		    " (wrong backing device? --force goes on without them)",
		    "; those sectors are not written, and are listed"},
	RefusalInfo{output_too_small, "output-too-small", false,
		    "the output {output} ({output_bytes} bytes) is smaller than the backing device {backing} "
		    "({backing_bytes} bytes)",
		    "", ""},
	RefusalInfo{log_refused, "log-refused", true,
		    "{cache}: the kernel refuses to replay this log: {first}",
		    " (wbrecover --salvage takes every segment it can read; --force replays the log up to where the walk "
		    "stops, as a tool that ignores the damage would)",
		    "; segments after the damage are not replayed"},
};

} // namespace

std::span<const RefusalInfo> all_refusals() { return refusal_table; }

const RefusalInfo& refusal_info(Refusal id)
{
	for (const RefusalInfo& info : refusal_table)
		if (info.id == id)
			return info;
	// Every enumerator is in the table; the unit tests check it.
	return refusal_table.front();
}

std::string refusal_text(Refusal id, const RefusalContext& c, bool overridden)
{
	const RefusalInfo& info = refusal_info(id);
	std::string text = fmt::format(
		fmt::runtime(info.message), fmt::arg("cache", c.cache), fmt::arg("cache_bytes", c.cache_bytes),
		fmt::arg("backing", c.backing), fmt::arg("backing_bytes", c.backing_bytes), fmt::arg("output", c.output),
		fmt::arg("output_bytes", c.output_bytes), fmt::arg("magic", c.magic), fmt::arg("metablocks", c.metablocks),
		fmt::arg("first", c.first), fmt::arg("pair", c.pair), fmt::arg("what", c.what),
		fmt::arg("minimum", superblock_size + segment_size));
	text += overridden ? info.overridden : info.refused;
	return text;
}

void refuse(Refusal id, const RefusalContext& context, bool force, std::vector<std::string>& overridden)
{
	const bool override = force && refusal_info(id).force_overrides;
	std::string text = refusal_text(id, context, override);
	if (!override)
		throw RefusedError(text);
	overridden.push_back(std::move(text));
}

void check_distinct(const Device& a, std::string_view a_role, const Device& b, std::string_view b_role)
{
	// Devices in memory have no identity and are never the same storage.
	if (a.identity() == DeviceIdentity{} || b.identity() == DeviceIdentity{})
		return;
	RefusalContext context{.pair = fmt::format("{} ({}) and {} ({})", a_role, a.path(), b_role, b.path())};
	std::vector<std::string> none;
	if (a.identity() == b.identity()) {
		context.what = a.is_block_device() ? "device" : "file";
		refuse(not_distinct, context, false, none);
	}
	// Aliases the numbers do not show: a loop device over the other's file, stacked devices.
	std::optional<std::string> why;
	try {
		why = same_storage(identify_path(a.path()), identify_path(b.path()));
	} catch (const IoError&) {
		return; // a path that is gone after opening: the tools checked every path before opening
	}
	if (why) {
		context.what = "storage: " + *why;
		refuse(not_distinct, context, false, none);
	}
}

std::vector<std::string> check_cache_safety(const Device& cache, const Device& backing, const LogScan& scan,
					    const CacheSafetyOptions& options)
{
	std::vector<std::string> overridden;
	RefusalContext context{.cache = cache.path(),
			       .cache_bytes = cache.size_bytes(),
			       .backing = backing.path(),
			       .backing_bytes = backing.size_bytes(),
			       .magic = scan.superblock.magic};
	if (scan.geometry.nr_segments == 0)
		refuse(cache_too_small, context, options.force, overridden);
	if (!scan.superblock_readable && options.superblock_must_be_readable)
		refuse(superblock_unreadable, context, options.force, overridden);
	if (scan.superblock_readable && !scan.superblock.magic_ok)
		refuse(no_magic, context, options.force, overridden);
	for (const Finding& f : scan.findings) {
		if (f.code != FindingCode::metablock_sector_beyond_backing)
			continue;
		if (options.beyond_backing_in_log_only && !(f.place.slot && scan.slots[*f.place.slot].in_log))
			continue;
		if (context.metablocks++ == 0)
			context.first = fmt::format("{}: {}", f.place_text(), f.message);
	}
	if (context.metablocks > 0)
		refuse(blocks_beyond_backing, context, options.force, overridden);
	return overridden;
}

std::vector<std::string> check_replay_safety(const Device& cache, const Device& backing, const LogScan& scan,
					     bool force)
{
	check_distinct(cache, "the cache", backing, "the backing device");
	std::vector<std::string> overridden = check_cache_safety(cache, backing, scan, {.force = force});
	// A log the kernel would not replay (a damaged segment before the newest,
	// ids out of order): replaying what the walk reads of it would drop or
	// reorder acknowledged data.
	if (scan.replayable() && scan.refused()) {
		const RefusalContext context{
			.cache = cache.path(),
			.first = fmt::format("slot {}, segment {}: {}", scan.decision.refusal_slot, scan.decision.refusal_id,
					     wb_replay_refusal_text(scan.decision.refusal))};
		refuse(log_refused, context, force, overridden);
	}
	return overridden;
}

} // namespace wbkit
