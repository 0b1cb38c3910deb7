// The live state of a writeboost target as device-mapper reports it: the
// status line and the table line (`dmsetup status`, `dmsetup table`) of
// dm-writeboost 2.2.17 and of dm-wbkit, parsed, and the figures a person
// or a monitoring system wants from them (wbstat).
//
// The status grammar both modules print (kmod/README.md, dm-wbkit(4); the
// rows of format/wbkit_contract.h define it once):
//
//   cursor_pos nr_cache_blocks nr_segments current_id last_flushed_id
//   last_writeback_id nr_dirty_cache_blocks stat0 ... stat15 nr_partial_flushed
//   <count> <key> <value> ...            (count tokens: count / 2 pairs)
//
// dm-writeboost counts 10 tokens (writeback_threshold,
// nr_cur_batched_writeback, sync_data_interval, update_sb_record_interval,
// read_cache_threshold); dm-wbkit counts 16 and adds `dead 0|1`,
// `nr_discarded_blocks N` and `nr_discarded_dirty N` (a dm-wbkit from
// before discard support counts 12: `dead` alone). Every value is a decimal
// integer. The table: `<backing> <cache> [<count> <key> <value> ...]`,
// upstream printing the words of the table line as typed, dm-wbkit the keys
// it was given with their current values.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wbkit/contract.hpp"
#include "wbkit/errors.hpp"

namespace wbkit {

// Input that does not read as dmsetup's output for a writeboost target. An
// operational error (exit code 3): wbstat cannot say anything true about it.
class StatusFormatError : public Error {
public:
	using Error::Error;
};

// Which module printed a status line, told by its layout: only dm-wbkit
// has the pair `dead`.
enum class TargetModule {
	dm_writeboost,
	dm_wbkit,
};
std::string_view target_module_name(TargetModule module); // "dm-writeboost", "dm-wbkit"

// The 16 counters: stat[i] counts bios with i = write << 3 | hit << 2 |
// on_buffer << 1 | fullsize.
inline constexpr unsigned stat_write = 8;
inline constexpr unsigned stat_hit = 4;
inline constexpr unsigned stat_on_buffer = 2;
inline constexpr unsigned stat_fullsize = 1;
inline constexpr unsigned stat_count = WB_STATUS_SIZE_STAT;

namespace status_detail {
// A row of count numbers is one number, or an array of them.
template <unsigned count>
struct Numbers {
	using type = std::array<std::uint64_t, count>;
};
template <>
struct Numbers<1> {
	using type = std::uint64_t;
};
} // namespace status_detail

// One status line, field by field, in the kernel's order: a member for each
// row of WB_STATUS_FIELD_ROWS (format/wbkit_contract.h), named as the row.
struct WbStatus {
#define WBKIT_STATUS_MEMBER(e, name, count) status_detail::Numbers<count>::type name{};
	WB_STATUS_FIELD_ROWS(WBKIT_STATUS_MEMBER)
#undef WBKIT_STATUS_MEMBER
	// The counted key/value pairs, in the order printed (keys as printed).
	std::vector<std::pair<std::string, std::uint64_t>> pairs;

	std::optional<std::uint64_t> pair(std::string_view key) const;
	TargetModule module() const;
	// dm-wbkit only: whether the target is dead (fail-stop); nullopt for
	// dm-writeboost, which has no such state.
	std::optional<bool> dead() const;
	// dm-wbkit only: cached blocks a discard dropped since the target was
	// made, and the dirty ones among them (their data never reached the
	// backing device); nullopt for dm-writeboost, which takes no discards,
	// and for a dm-wbkit from before discard support.
	std::optional<std::uint64_t> discarded_blocks() const;
	std::optional<std::uint64_t> discarded_dirty_blocks() const;
};

// Parses the fields after `<start> <length> writeboost`. Throws
// StatusFormatError naming the field that is wrong.
WbStatus parse_wb_status(std::string_view params);

// One table line's parameters.
struct WbTable {
	std::string backing; // as printed: major:minor
	std::string cache;
	// The counted optional arguments as key/value pairs, keys lower-cased
	// (the targets read them in any case), in the order given.
	std::vector<std::pair<std::string, std::string>> args;

	// The value of a key as an integer (the last one given wins, as in the
	// constructor); nullopt when absent or not a number.
	std::optional<std::uint64_t> arg(std::string_view key) const;
};

// Parses the fields after `<start> <length> writeboost`. Throws
// StatusFormatError.
WbTable parse_wb_table(std::string_view params);

// One line of `dmsetup status` or `dmsetup table`: `[<name>: ]<start>
// <length> <type> <params>` (dmsetup prefixes the name when it lists more
// than one device).
struct DmTargetLine {
	std::string name; // empty without the prefix
	std::uint64_t start = 0;
	std::uint64_t length = 0;
	std::string type;
	std::string params;
};

// nullopt when the line has not that shape.
std::optional<DmTargetLine> split_dm_line(std::string_view line);

// dm-wbkit's error counters: its reply to the read-only message
// `error_counts`, `<name> <count>` pairs on one line, dm-wbkit 1 printing
//
//   backing_read N backing_write N backing_flush N cache_read N cache_write N
//   cache_flush N cache_read_fallback N failed_requests N transient N
//
// Counted since the target was made (clear_stat leaves them). A later module
// may add names at the end: every pair is kept, known or not. dm-writeboost
// (and a dm-wbkit older than the message) fails the message: no counters.
struct WbErrorCounts {
	// In the order printed; names unique.
	std::vector<std::pair<std::string, std::uint64_t>> counters;

	std::optional<std::uint64_t> count(std::string_view name) const;
};

// Parses the reply (surrounding white space allowed). Throws
// StatusFormatError for anything else: no pairs, a name without a count, a
// name that is not [A-Za-z_][A-Za-z0-9_]* of at most 64 characters, a count
// that is not a decimal number, a name twice.
WbErrorCounts parse_error_counts(std::string_view reply);

// The counters dm-wbkit 1 replies, in its order, and what their errors do
// (ErrorEffect, known_error_counters: wbkit/contract.hpp, from the rows the
// kernel target expands; dm-wbkit(4), the fault table of kmod/README.md):
// backing_read fails the request (read misses, the backing part of a partly
// cached block, read-cache staging reads, clean-copy fallbacks);
// backing_write counts writeback writes (fatal) and write_around_mode writes
// (the request fails); cache_read counts clean copies (served from the
// backing device instead, also counted in cache_read_fallback), dirty data
// and writeback or replay reads (fatal); cache_write counts segments, header
// zeroing, the superblock record and the trust record; failed_requests the
// requests failed while the target stayed live; transient -EAGAIN and
// -ENOMEM, retried or passed up.
ErrorEffect error_counter_effect(std::string_view name);

// The counters summed up, for a person: the errors of each device, the
// requests that failed, and the counters of errors that kill the target.
struct WbErrorSummary {
	std::uint64_t backing = 0;         // backing_read + backing_write + backing_flush
	std::uint64_t cache = 0;           // cache_read + cache_write + cache_flush
	std::uint64_t failed_requests = 0; // failed_requests
	std::uint64_t transient = 0;       // transient
	// Nonzero counters, in the order printed, unknown names among them.
	std::vector<std::pair<std::string, std::uint64_t>> nonzero;
	// Nonzero counters whose errors are all fatal (ErrorEffect::fatal).
	std::vector<std::pair<std::string, std::uint64_t>> fatal;
	// Nonzero counters whose errors may have been fatal (sometimes_fatal):
	// backing_write, backing_flush, and cache_read beyond the clean copies
	// served from the backing device.
	std::vector<std::pair<std::string, std::uint64_t>> maybe_fatal;
};

WbErrorSummary error_summary(const WbErrorCounts& counts);

// One writeboost target of a device: what its status and table say.
struct WbDevice {
	std::string name;         // the device-mapper name (or how the input named it)
	std::uint64_t start = 0;  // the target's first sector in the device
	std::uint64_t length = 0; // its length in 512-byte sectors
	WbStatus status;
	std::optional<WbTable> table;
	// dm-wbkit's reply to the message `dead_cause` when it is dead and the
	// reply was read.
	std::optional<std::string> dead_cause;
	// dm-wbkit's reply to the message `error_counts`, when it was read and
	// parsed (never from a file, never for dm-writeboost).
	std::optional<WbErrorCounts> errors;
};

// Reads dmsetup's output: status lines, table lines, or both (a writeboost
// line whose parameters start with a number is a status line, else a table
// line), of any targets: lines of other targets, empty lines and dmsetup's
// "No devices found" are skipped. A status line may also be the bare
// parameters (`dmsetup status wb | cut -d' ' -f4-`). Lines without a name
// are named `<source>:<line number>`, and their tables pair with them in
// order. Throws StatusFormatError with `<source>:<line>: ` in front for a
// line that is neither.
std::vector<WbDevice> read_dmsetup_output(std::string_view text, std::string_view source);

// The figures derived from one status line.
struct WbFigures {
	std::uint64_t cache_blocks = 0;
	std::uint64_t cache_bytes = 0;
	std::uint64_t dirty_blocks = 0;
	std::uint64_t dirty_bytes = 0;     // dirty blocks x 4 KiB: a partly written block counts whole
	std::optional<double> dirty_ratio; // of the cache blocks
	std::uint64_t segments = 0;
	// Segments holding data not yet written back, the open one included:
	// current_id - last_writeback_id. At nr_segments writes wait for writeback.
	std::uint64_t segments_in_use = 0;
	std::optional<double> segments_in_use_ratio;
	// current_id - last_flushed_id: the open segment and those on their way
	// to the cache device.
	std::uint64_t segments_unflushed = 0;
	// last_flushed_id - last_writeback_id: on the cache device, waiting for
	// writeback.
	std::uint64_t segments_to_write_back = 0;

	std::uint64_t reads = 0;
	std::uint64_t read_hits = 0;
	std::uint64_t read_hits_on_buffer = 0;
	std::uint64_t reads_fullsize = 0;
	std::uint64_t writes = 0;
	std::uint64_t write_hits = 0;
	std::uint64_t write_hits_on_buffer = 0;
	std::uint64_t writes_fullsize = 0;
	std::optional<double> read_hit_ratio; // nullopt without reads
	std::optional<double> write_hit_ratio;
};

WbFigures wb_figures(const WbStatus& status);

// What changed between two samples of one target, taken `seconds` apart.
struct WbRates {
	double seconds = 0;
	// A counter or an id went backwards (clear_stat, or the device was made
	// again): nothing below is known.
	bool reset = false;
	std::uint64_t reads = 0;
	std::uint64_t read_hits = 0;
	std::uint64_t writes = 0;
	std::uint64_t write_hits = 0;
	std::uint64_t segments_flushed = 0;      // last_flushed_id went up by this much
	std::uint64_t segments_written_back = 0; // last_writeback_id went up by this much
	std::uint64_t partial_flushed = 0;
	std::int64_t dirty_blocks_change = 0; // net: writes add, writeback removes
	std::optional<double> read_hit_ratio; // over the interval; nullopt without reads
	std::optional<double> write_hit_ratio;
	// How much each error counter went up, in the order of the later
	// sample (names in both samples); nullopt when a sample has no
	// counters, a counter went backwards (the device was made again) or
	// `reset` is set.
	std::optional<std::vector<std::pair<std::string, std::uint64_t>>> errors;

	double per_second(std::uint64_t delta) const { return seconds > 0 ? double(delta) / seconds : 0; }
	double per_second(std::int64_t delta) const { return seconds > 0 ? double(delta) / seconds : 0; }
};

// nullopt when the two are not the same target (name, start, geometry).
std::optional<WbRates> wb_rates(const WbDevice& before, const WbDevice& after, double seconds);

} // namespace wbkit
