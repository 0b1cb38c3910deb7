// The checks the destructive tools (wbreplay, wbrecover) make before anything
// is written, in the style of e2fsck's problem table: finding a reason to
// refuse is separate from wording it. Every refusal has an id, a stable name,
// whether --force may override it, and one message, in the table in
// safety.cpp. A refusal throws RefusedError (exit 4); an overridden one is
// returned, worded, for the tool to print.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wbkit/device.hpp"
#include "wbkit/log_scan.hpp"

namespace wbkit {

enum class Refusal : std::uint8_t {
	not_distinct,          // two roles name one device or file, or stacked storage
	cache_too_small,       // smaller than the superblock and one segment
	superblock_unreadable, // wbreplay only: wbrecover is the tool for it
	no_magic,              // an unformatted cache: the target would format it
	blocks_beyond_backing, // the log names blocks past the backing device's end
	output_too_small,      // a block device as output, smaller than the backing device
	log_refused,           // wbreplay only: the kernel refuses the log (wb_replay_decide)
};

struct RefusalInfo {
	Refusal id;
	std::string_view name;       // stable, kebab-case
	bool force_overrides;        // --force goes on, and the tool says what it overrode
	std::string_view message;    // fmt format with the names of RefusalContext's members
	std::string_view refused;    // appended when refused: what --force would do
	std::string_view overridden; // appended when overridden: what that costs
};

std::span<const RefusalInfo> all_refusals();
const RefusalInfo& refusal_info(Refusal id);

// The facts a refusal's message names; members that do not apply stay empty.
struct RefusalContext {
	std::string_view cache{};
	std::uint64_t cache_bytes = 0;
	std::string_view backing{};
	std::uint64_t backing_bytes = 0;
	std::string_view output{};
	std::uint64_t output_bytes = 0;
	std::uint32_t magic = 0;
	std::uint64_t metablocks = 0;
	std::string first{}; // the first offending finding: place and message
	// not_distinct: "the cache (c.img) and the backing device (c.img)", and why.
	std::string pair{};
	std::string what{};
};

// Words a refusal: its message, and what follows it when refused or overridden.
std::string refusal_text(Refusal id, const RefusalContext& context, bool overridden);

// Throws RefusedError for id, unless force is given and the table lets it
// override: then appends the worded refusal to overridden.
void refuse(Refusal id, const RefusalContext& context, bool force, std::vector<std::string>& overridden);

// Refuses when two opened devices are the same storage: the same device or
// file, a loop device over the other's file, stacked devices.
void check_distinct(const Device& a, std::string_view a_role, const Device& b, std::string_view b_role);

struct CacheSafetyOptions {
	bool force = false;
	// A replay needs the superblock; recovery is the way past an unreadable one.
	bool superblock_must_be_readable = true;
	// Count metablocks past the backing device's end in the kernel's log only
	// (all a replay takes); recovery's salvage may take any segment.
	bool beyond_backing_in_log_only = true;
};

// The checks on a scanned cache and its backing device (docs/FORMAT.md's
// replay needs a formatted cache and a backing device that holds every block
// the log names). Returns the refusals force overrode.
std::vector<std::string> check_cache_safety(const Device& cache, const Device& backing, const LogScan& scan,
					    const CacheSafetyOptions& options);

// wbreplay's checks: the devices are distinct, then check_cache_safety.
std::vector<std::string> check_replay_safety(const Device& cache, const Device& backing, const LogScan& scan,
					     bool force);

} // namespace wbkit
