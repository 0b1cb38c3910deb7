// The runtime contract of the writeboost target (format/wbkit_contract.h),
// the same rows the kernel target expands: its table options, its status
// line and its error counters, as constexpr arrays for the library, the
// tools and the tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string_view>

#include "wbkit_contract.h"
#include "wbkit_format.h"

namespace wbkit {

struct TunableRow {
	std::string_view key;
	std::uint64_t min;
	std::uint64_t max;
	std::uint64_t default_value;
	bool fixed; // only the table line sets it: a message naming it fails
	std::string_view error;
};

inline constexpr TunableRow tunable_rows[] = {
#define WBKIT_TUNABLE_ROW(e, key, lo, hi, def, fixed, error) {#key, lo, hi, def, (fixed) != 0, error},
	WB_TUNABLE_ROWS(WBKIT_TUNABLE_ROW)
#undef WBKIT_TUNABLE_ROW
};

// The index of a table option's row, or std::size(tunable_rows) when no row
// has that key. An index, not a pointer: GCC's ASan build does not take a
// pointer's comparison with nullptr as a constant expression.
constexpr std::size_t tunable_row_index(std::string_view key)
{
	std::size_t index = 0;
	while (index < std::size(tunable_rows) && tunable_rows[index].key != key)
		++index;
	return index;
}

// The row of a table option, or nullptr when no row has that key.
constexpr const TunableRow* find_tunable_row(std::string_view key)
{
	const std::size_t index = tunable_row_index(key);
	return index < std::size(tunable_rows) ? &tunable_rows[index] : nullptr;
}

// The row of a table option; a key no row has does not compile.
consteval const TunableRow& tunable_row(std::string_view key)
{
	const std::size_t index = tunable_row_index(key);
	if (index >= std::size(tunable_rows))
		throw "no table option of that name";
	return tunable_rows[index];
}

// The numbers of the status line before its pairs, in order: count numbers
// each (the 16 stat counters are one row).
struct StatusFieldRow {
	std::string_view name;
	unsigned count;
};

inline constexpr StatusFieldRow status_field_rows[] = {
#define WBKIT_STATUS_FIELD_ROW(e, name, count) {#name, count},
	WB_STATUS_FIELD_ROWS(WBKIT_STATUS_FIELD_ROW)
#undef WBKIT_STATUS_FIELD_ROW
};

// A pair of the status line: a table option's current value, or a figure of
// the target's state.
enum class StatusPairKind {
	tunable,
	state,
};

struct StatusPairRow {
	std::string_view key;
	StatusPairKind kind;
	bool upstream; // dm-writeboost prints it too
};

namespace contract_detail {
inline constexpr StatusPairKind TUNABLE = StatusPairKind::tunable;
inline constexpr StatusPairKind STATE = StatusPairKind::state;
} // namespace contract_detail

// The pairs dm-wbkit prints, in its order; upstream's come first.
inline constexpr StatusPairRow status_pair_rows[] = {
#define WBKIT_STATUS_PAIR_ROW(e, key, kind, upstream) {#key, contract_detail::kind, (upstream) != 0},
	WB_STATUS_PAIR_ROWS(WBKIT_STATUS_PAIR_ROW)
#undef WBKIT_STATUS_PAIR_ROW
};

// Whether the status line carries a table option's current value.
constexpr bool status_shows_tunable(std::string_view key)
{
	for (const StatusPairRow& row : status_pair_rows)
		if (row.kind == StatusPairKind::tunable && row.key == key)
			return true;
	return false;
}

// What an error a counter counts does to the target.
enum class ErrorEffect {
	not_fatal,       // fails one request at most, or is retried
	sometimes_fatal, // fatal for some of the I/O it counts, not for the rest
	fatal,           // every error it counts made the target dead
	unknown,         // a name this wbkit does not know
};

struct ErrorCounterInfo {
	const char* name;
	ErrorEffect effect;
};

namespace contract_detail {
inline constexpr ErrorEffect NOT_FATAL = ErrorEffect::not_fatal;
inline constexpr ErrorEffect SOMETIMES = ErrorEffect::sometimes_fatal;
inline constexpr ErrorEffect FATAL = ErrorEffect::fatal;
} // namespace contract_detail

// The counters dm-wbkit replies to error_counts, in its order.
inline constexpr ErrorCounterInfo known_error_counters[] = {
#define WBKIT_ERROR_COUNTER_ROW(e, name, effect) {#name, contract_detail::effect},
	WB_ERROR_COUNTER_ROWS(WBKIT_ERROR_COUNTER_ROW)
#undef WBKIT_ERROR_COUNTER_ROW
};

// What an I/O error of one device and operation does (the fault table).
enum class FaultEffect {
	fails_request,    // that bio fails, the target goes on
	served_elsewhere, // the read is served from the backing device's copy
	dead,             // fail-stop
	resume_fails,     // the resume fails, the target stays alive
	retried,          // sent again as long as it lasts
	nothing,
};

namespace contract_detail {
inline constexpr FaultEffect FAILS_REQUEST = FaultEffect::fails_request;
inline constexpr FaultEffect SERVED_ELSEWHERE = FaultEffect::served_elsewhere;
inline constexpr FaultEffect DEAD = FaultEffect::dead;
inline constexpr FaultEffect RESUME_FAILS = FaultEffect::resume_fails;
inline constexpr FaultEffect RETRIED = FaultEffect::retried;
inline constexpr FaultEffect NOTHING = FaultEffect::nothing;
} // namespace contract_detail

struct FaultRow {
	std::string_view device;
	std::string_view operation;
	FaultEffect effect;
	std::string_view counters; // "a, b"; "a / b": the operation says which; "none"
	std::string_view scenario; // where a VM scenario drives it
};

// The fault table, in kmod/README.md's order.
inline constexpr FaultRow fault_rows[] = {
#define WBKIT_FAULT_ROW(e, device, operation, effect, counters, scenario) \
	{device, operation, contract_detail::effect, counters, scenario},
	WB_FAULT_ROWS(WBKIT_FAULT_ROW)
#undef WBKIT_FAULT_ROW
};

// The target's kernel memory at most (WB_MEM_*, kmod/README.md "Memory"),
// in bytes, for a cache device of cache_sectors, read caching off.
inline std::uint64_t target_memory_bound(std::uint64_t cache_sectors)
{
	const std::uint64_t blocks = wb_nr_segments(cache_sectors) * WB_BLOCKS_PER_SEGMENT;
	return blocks * WB_MEM_MILLIBYTES_PER_BLOCK / 1000 + WB_MEM_FIXED_BYTES;
}

// The largest cache device, in bytes, whose target takes at most
// memory_bytes of kernel memory (read caching off); 0 if none fits.
inline std::uint64_t largest_cache_for_memory(std::uint64_t memory_bytes)
{
	if (memory_bytes < WB_MEM_FIXED_BYTES)
		return 0;
	const std::uint64_t blocks = (memory_bytes - WB_MEM_FIXED_BYTES) * 1000 / WB_MEM_MILLIBYTES_PER_BLOCK;
	const std::uint64_t slots = blocks / WB_BLOCKS_PER_SEGMENT;
	return slots ? (WB_SUPERBLOCK_SECTORS + slots * WB_SEGMENT_SECTORS) * 512 : 0;
}

} // namespace wbkit
