// The runtime contract of the writeboost target (format/wbkit_contract.h),
// the same rows the kernel target expands: its table options and its error
// counters, as constexpr arrays for the library, the tools and the tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string_view>

#include "wbkit_contract.h"

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

} // namespace wbkit
