// The runtime contract (format/wbkit_contract.h, the rows the kernel target
// expands) against every place that states it for people or for the code:
// kmod/README.md's option table and error_counts order, dm-wbkit(4), and the
// library's own uses. A row changed in one place only fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <fmt/format.h>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "wbkit/contract.hpp"
#include "wbkit/wb_status.hpp"

extern "C" int wbkit_contract_rows_in_c(void);

using namespace wbkit;

namespace {

std::string source_file(const std::string& relative)
{
	std::ifstream in(std::string(WBKIT_SOURCE_DIR) + "/" + relative);
	EXPECT_TRUE(in) << relative << " not found";
	return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The cells of the table row of kmod/README.md that starts with `key`.
std::vector<std::string> readme_row(const std::string& text, std::string_view key)
{
	const std::string start = fmt::format("| `{}` | ", key);
	const std::size_t at = text.find("\n" + start);
	if (at == std::string::npos)
		return {};
	const std::string line = text.substr(at + 1, text.find('\n', at + 1) - at - 1);
	std::vector<std::string> cells;
	std::size_t from = 2;
	for (std::size_t bar; (bar = line.find(" | ", from)) != std::string::npos; from = bar + 3)
		cells.push_back(line.substr(from, bar - from));
	cells.push_back(line.substr(from, line.size() - from - 2));
	return cells;
}

// How the documents write a range: "0, 1" for two values, "0..3600" (with
// a unit after it or not) otherwise.
bool range_matches(const std::string& cell, const TunableRow& row)
{
	if (row.max == row.min + 1 && cell == fmt::format("{}, {}", row.min, row.max))
		return true;
	const std::string range = fmt::format("{}..{}", row.min, row.max);
	return cell == range || cell.rfind(range + " ", 0) == 0;
}

std::string collapse_space(std::string text)
{
	std::string out;
	for (char c : text) {
		const bool space = c == ' ' || c == '\n' || c == '\t';
		if (space && (out.empty() || out.back() == ' '))
			continue;
		out += space ? ' ' : c;
	}
	return out;
}

} // namespace

TEST(Contract, KmodReadmeOptionTableHasEveryRowAsDefined)
{
	const std::string readme = source_file("kmod/README.md");
	for (const TunableRow& row : tunable_rows) {
		const std::vector<std::string> cells = readme_row(readme, row.key);
		ASSERT_GE(cells.size(), 4U) << "kmod/README.md has no option row for " << row.key;
		EXPECT_TRUE(range_matches(cells[1], row)) << row.key << ": README says " << cells[1];
		EXPECT_EQ(cells[2], std::to_string(row.default_value)) << row.key;
		EXPECT_EQ(cells[3].find("fixed at construction") != std::string::npos, row.fixed) << row.key;
	}
	// And no option row the contract does not have.
	const std::size_t table = readme.find("| key | range | default | meaning |");
	ASSERT_NE(table, std::string::npos);
	std::istringstream lines(readme.substr(table));
	std::string line;
	std::getline(lines, line);
	std::getline(lines, line);
	int rows = 0;
	while (std::getline(lines, line) && line.rfind("| `", 0) == 0) {
		const std::string key = line.substr(3, line.find('`', 3) - 3);
		EXPECT_TRUE(find_tunable_row(key))
			<< "kmod/README.md documents an option the contract lacks: " << key;
		++rows;
	}
	EXPECT_EQ(rows, int(std::size(tunable_rows)));
}

TEST(Contract, ManPageGivesEveryOptionItsRangeAndDefault)
{
	const std::string page = source_file("docs/man/dm-wbkit.4.scd");
	for (const TunableRow& row : tunable_rows) {
		const std::string range = row.max == row.min + 1 ? fmt::format("{}|{}", row.min, row.max)
								 : fmt::format("{}..{}", row.min, row.max);
		const std::string entry = fmt::format("*{}* _{}_ (default {})", row.key, range, row.default_value);
		EXPECT_NE(page.find(entry), std::string::npos) << "dm-wbkit(4) lacks: " << entry;
	}
}

TEST(Contract, KmodReadmeAndManPageListTheErrorCountersInOrder)
{
	// fmt, not operator+: GCC 12 at -O3 reports a false -Wrestrict in the latter.
	std::string names;
	for (const ErrorCounterInfo& c : known_error_counters)
		names += fmt::format("{}{}", names.empty() ? "" : " ", c.name);
	const std::string readme = collapse_space(source_file("kmod/README.md"));
	EXPECT_NE(readme.find(fmt::format("this order (names may be added at the end): `{}`", names)), std::string::npos)
		<< "kmod/README.md does not list the error counters as: " << names;
	// The man page names them in order, with words between some of them.
	std::string page = collapse_space(source_file("docs/man/dm-wbkit.4.scd"));
	const std::size_t start = page.find("Print the error counters as _name_ _count_ pairs:");
	ASSERT_NE(start, std::string::npos);
	page = page.substr(start, page.find("see FAULTS", start) - start);
	std::size_t at = 0;
	for (const ErrorCounterInfo& c : known_error_counters) {
		at = page.find(fmt::format("*{}*", c.name), at);
		EXPECT_NE(at, std::string::npos) << "dm-wbkit(4) does not name " << c.name << " in order";
	}
}

TEST(Contract, EveryDefaultLiesInItsRangeAndNamesAreUnique)
{
	for (const TunableRow& row : tunable_rows) {
		EXPECT_LE(row.min, row.default_value) << row.key;
		EXPECT_LE(row.default_value, row.max) << row.key;
		EXPECT_EQ(std::count_if(std::begin(tunable_rows), std::end(tunable_rows),
					[&](const TunableRow& r) { return r.key == row.key; }),
			  1);
		EXPECT_EQ(row.error.rfind(std::string(row.key) + " must be ", 0), 0U) << row.error;
	}
	for (const ErrorCounterInfo& c : known_error_counters)
		EXPECT_EQ(error_counter_effect(c.name), c.effect) << c.name;
	EXPECT_EQ(error_counter_effect("no_such_counter"), ErrorEffect::unknown);
}

// The header compiles as C (the kernel's language) with its checks, and
// expands there to the same rows.
TEST(Contract, TheHeaderExpandsTheSameRowsInC)
{
	EXPECT_EQ(wbkit_contract_rows_in_c(), int(std::size(tunable_rows) * 100 + std::size(known_error_counters)));
}
