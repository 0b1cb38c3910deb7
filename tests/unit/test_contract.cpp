// The runtime contract (format/wbkit_contract.h, the rows the kernel target
// expands) against every place that states it for people or for the code:
// kmod/README.md's option table and error_counts order, dm-wbkit(4), and the
// library's own uses. A row changed in one place only fails here.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

// The cells of one markdown table line, "| a | b |".
std::vector<std::string> table_cells(const std::string& line)
{
	std::vector<std::string> cells;
	std::size_t from = 2;
	for (std::size_t bar; (bar = line.find(" | ", from)) != std::string::npos; from = bar + 3)
		cells.push_back(line.substr(from, bar - from));
	cells.push_back(line.substr(from, line.size() - from - 2));
	return cells;
}

// The cells of the table row of kmod/README.md that starts with `key`.
std::vector<std::string> readme_row(const std::string& text, std::string_view key)
{
	const std::string start = fmt::format("| `{}` | ", key);
	const std::size_t at = text.find("\n" + start);
	if (at == std::string::npos)
		return {};
	return table_cells(text.substr(at + 1, text.find('\n', at + 1) - at - 1));
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

// Every TUNABLE pair of the status line shows a table option; keys unique.
TEST(Contract, StatusPairsOfKindTunableAreTableOptions)
{
	for (const StatusPairRow& pair : status_pair_rows) {
		EXPECT_EQ(pair.kind == StatusPairKind::tunable, find_tunable_row(pair.key) != nullptr) << pair.key;
		EXPECT_EQ(std::count_if(std::begin(status_pair_rows), std::end(status_pair_rows),
					[&](const StatusPairRow& p) { return p.key == pair.key; }),
			  1);
	}
}

// The status line as the rows make it, numbered 1, 2, 3... in every place,
// with upstream's pairs, with those of a dm-wbkit from before discard
// support (up to dead) and with every pair: the parser puts each number in
// the member of its row, tells the modules apart, and has the discard
// counters only where the line has them.
TEST(Contract, AStatusLineMadeFromTheRowsParsesIntoTheirMembers)
{
	for (const std::size_t nr_pairs : {std::size_t(WB_STATUS_NR_UPSTREAM_PAIRS), std::size_t(WB_STATUS_PAIR_DEAD + 1),
					   std::size(status_pair_rows)}) {
		std::string line;
		std::uint64_t next = 1;
		for (const StatusFieldRow& row : status_field_rows)
			for (unsigned i = 0; i < row.count; ++i)
				line += fmt::format("{}{}", line.empty() ? "" : " ", next++);
		std::string pairs;
		unsigned tokens = 0;
		for (std::size_t p = 0; p < nr_pairs; ++p) {
			const StatusPairRow& pair = status_pair_rows[p];
			pairs += fmt::format(" {} {}", pair.key, pair.key == "dead" ? 0 : next++);
			tokens += 2;
		}
		const WbStatus s = parse_wb_status(fmt::format("{} {}{}", line, tokens, pairs));
		const bool wbkit = nr_pairs > WB_STATUS_NR_UPSTREAM_PAIRS;
		const bool discards = nr_pairs == std::size(status_pair_rows);
		EXPECT_EQ(s.cursor_pos, 1U);
		EXPECT_EQ(s.nr_dirty_cache_blocks, 7U);
		EXPECT_EQ(s.stat[0], 8U);
		EXPECT_EQ(s.stat[15], 23U);
		EXPECT_EQ(s.nr_partial_flushed, 24U);
		EXPECT_EQ(s.pairs.size(), tokens / 2);
		EXPECT_EQ(s.pair("writeback_threshold"), 25U);
		EXPECT_EQ(s.module(), wbkit ? TargetModule::dm_wbkit : TargetModule::dm_writeboost);
		EXPECT_EQ(s.dead(), wbkit ? std::optional<bool>(false) : std::nullopt);
		// Upstream's five values are 25..29; dead's is 0.
		EXPECT_EQ(s.discarded_blocks(), discards ? std::optional<std::uint64_t>(30) : std::nullopt);
		EXPECT_EQ(s.discarded_dirty_blocks(), discards ? std::optional<std::uint64_t>(31) : std::nullopt);
	}
	EXPECT_EQ(std::size(status_pair_rows), 8U);
	EXPECT_EQ(status_pair_rows[WB_STATUS_PAIR_DEAD].key, "dead");
	EXPECT_EQ(status_pair_rows[WB_STATUS_PAIR_NR_DISCARDED_BLOCKS].key, "nr_discarded_blocks");
	EXPECT_EQ(status_pair_rows[WB_STATUS_PAIR_NR_DISCARDED_DIRTY].key, "nr_discarded_dirty");
}

// kmod/README.md writes the status grammar out: its fields and pairs in the
// rows' order, and the count dm-wbkit prints.
TEST(Contract, KmodReadmeStatusGrammarFollowsTheRows)
{
	const std::string readme = source_file("kmod/README.md");
	const std::size_t section = readme.find("\n## Status\n");
	ASSERT_NE(section, std::string::npos);
	const std::size_t begin = readme.find("```\n", section) + 4;
	const std::string grammar = collapse_space(readme.substr(begin, readme.find("```", begin) - begin));
	std::string expected;
	for (const StatusFieldRow& row : status_field_rows)
		expected += row.count == 1 ? fmt::format("<{}> ", row.name)
					   : fmt::format("<{0} 0> ... <{0} {1}> ", row.name, row.count - 1);
	expected += std::to_string(2 * std::size(status_pair_rows));
	for (const StatusPairRow& pair : status_pair_rows)
		expected += fmt::format(" {} {}", pair.key, pair.key == "dead" ? "<0|1>" : "<n>");
	EXPECT_EQ(grammar, expected + " ");
}

namespace {

// The counter names of a fault row's counters cell ("a, b", "a / b", "none").
std::vector<std::string> fault_counters(std::string_view cell)
{
	std::vector<std::string> names;
	std::string name;
	for (char c : std::string(cell) + ",") {
		if (c == ',' || c == '/' || c == ' ') {
			if (!name.empty() && name != "none")
				names.push_back(name);
			name.clear();
		} else {
			name += c;
		}
	}
	return names;
}

} // namespace

// kmod/README.md's fault table is the rows: the same devices and operations
// in order, the same counters and scenario rows, and "What happens" says
// dead exactly where the row is DEAD.
TEST(Contract, KmodReadmeFaultTableIsTheRows)
{
	const std::string readme = source_file("kmod/README.md");
	const std::size_t header = readme.find("\n| Device, operation | What happens |");
	ASSERT_NE(header, std::string::npos);
	std::istringstream lines(readme.substr(header + 1));
	std::string line;
	std::getline(lines, line); // header
	std::getline(lines, line); // |---|
	std::vector<std::vector<std::string>> table;
	while (std::getline(lines, line) && line.rfind("| ", 0) == 0)
		table.push_back(table_cells(line));
	ASSERT_EQ(table.size(), std::size(fault_rows));
	for (std::size_t i = 0; i < table.size(); ++i) {
		const FaultRow& row = fault_rows[i];
		ASSERT_EQ(table[i].size(), 6U) << table[i][0];
		EXPECT_EQ(table[i][0], fmt::format("{}, {}", row.device, row.operation));
		EXPECT_EQ(table[i][1].rfind("dead", 0) == 0, row.effect == FaultEffect::dead) << table[i][0];
		EXPECT_EQ(table[i][4], row.counters) << table[i][0];
		EXPECT_EQ(table[i][5], row.scenario) << table[i][0];
	}
}

// Each error counter's effect is what the fault rows that name it do, and
// every counter is named by a row.
TEST(Contract, ErrorCounterEffectsAgreeWithTheFaultTable)
{
	for (const ErrorCounterInfo& counter : known_error_counters) {
		unsigned dead = 0, alive = 0;
		for (const FaultRow& row : fault_rows) {
			const auto names = fault_counters(row.counters);
			if (std::find(names.begin(), names.end(), counter.name) == names.end())
				continue;
			(row.effect == FaultEffect::dead ? dead : alive)++;
		}
		EXPECT_GT(dead + alive, 0U) << counter.name << ": no fault row counts it";
		const ErrorEffect expected = dead == 0    ? ErrorEffect::not_fatal
					     : alive == 0 ? ErrorEffect::fatal
							  : ErrorEffect::sometimes_fatal;
		EXPECT_EQ(counter.effect, expected) << counter.name;
	}
	for (const FaultRow& row : fault_rows)
		for (const std::string& name : fault_counters(row.counters))
			EXPECT_NE(error_counter_effect(name), ErrorEffect::unknown) << row.operation << ": " << name;
}

// Every row key a fault row gives for scenario 92 is one the scenario reports.
TEST(Contract, FaultRowsNameRowsOfTheFaultScenario)
{
	const std::string scenario = source_file("tests/vm/scenarios/92-fault-table.sh");
	unsigned keys = 0;
	for (const FaultRow& row : fault_rows) {
		if (row.scenario.rfind("92 ", 0) != 0)
			continue;
		const std::regex key("`([a-z_]+)`");
		const std::string cell(row.scenario);
		for (auto it = std::sregex_iterator(cell.begin(), cell.end(), key); it != std::sregex_iterator(); ++it) {
			++keys;
			EXPECT_NE(scenario.find((*it)[1].str()), std::string::npos)
				<< row.operation << ": 92-fault-table.sh has no row " << (*it)[1];
		}
	}
	EXPECT_GE(keys, 12U);
}

// wbstat's JSON schema names the status numbers of the rows, and as
// tunables upstream's status pairs and the table options the status does
// not show: what report_status.cpp prints from the same rows.
TEST(Contract, WbstatSchemaNamesTheRows)
{
	const auto schema = nlohmann::json::parse(source_file("docs/schemas/wbstat-1.schema.json"));
	const auto& device = schema.at("properties").at("devices").at("items").at("properties");
	std::vector<std::string> status_names;
	for (const auto& [name, _] : device.at("status").at("properties").items())
		status_names.push_back(name);
	std::vector<std::string> expected;
	for (const StatusFieldRow& row : status_field_rows)
		expected.emplace_back(row.name);
	expected.emplace_back("pairs");
	std::sort(status_names.begin(), status_names.end());
	std::sort(expected.begin(), expected.end());
	EXPECT_EQ(status_names, expected);

	std::vector<std::string> tunable_names;
	for (const auto& [name, _] : device.at("tunables").at("properties").items())
		tunable_names.push_back(name);
	expected.clear();
	for (const StatusPairRow& pair : status_pair_rows)
		if (pair.upstream)
			expected.emplace_back(pair.key);
	for (const TunableRow& row : tunable_rows)
		if (!status_shows_tunable(row.key))
			expected.emplace_back(row.key);
	std::sort(tunable_names.begin(), tunable_names.end());
	std::sort(expected.begin(), expected.end());
	EXPECT_EQ(tunable_names, expected);
}

// kmod/README.md's "Memory": the per-block and fixed figures, the table of
// memory by cache size and the table of the largest cache by memory, all
// computed from WB_MEM_* (which the kernel checks its structures against).
TEST(Contract, KmodReadmeMemoryTablesFollowTheSizes)
{
	const std::string readme = source_file("kmod/README.md");
	const std::size_t from = readme.find("\n### Memory\n");
	ASSERT_NE(from, std::string::npos) << "kmod/README.md has no Memory section";
	const std::string section = readme.substr(from, readme.find("\n### ", from + 1) - from);
	EXPECT_NE(collapse_space(section).find(fmt::format("at most **{}.{:03} bytes per cache block**",
							   WB_MEM_MILLIBYTES_PER_BLOCK / 1000,
							   WB_MEM_MILLIBYTES_PER_BLOCK % 1000)),
		  std::string::npos);
	EXPECT_NE(collapse_space(section).find(fmt::format("plus at most **{} MiB per device**", WB_MEM_FIXED_BYTES >> 20)),
		  std::string::npos);

	const auto bytes_of = [](const std::string& size) -> std::uint64_t {
		std::istringstream in(size);
		std::uint64_t n = 0;
		std::string unit;
		in >> n >> unit;
		const int shift = unit == "MiB" ? 20 : unit == "GiB" ? 30
					       : unit == "TiB"       ? 40
								     : -1;
		EXPECT_GE(shift, 0) << "no size: " << size;
		return shift < 0 ? 0 : n << shift;
	};
	// The tables write thousands with commas.
	const auto without_commas = [](std::string text) {
		text.erase(std::remove(text.begin(), text.end(), ','), text.end());
		return text;
	};
	const auto digits = [&](const std::string& text) { return std::stoull(without_commas(text)); };
	int by_cache = 0;
	int by_memory = 0;
	std::istringstream lines(section);
	for (std::string line; std::getline(lines, line);) {
		if (!line.starts_with("| ") || line.starts_with("|---"))
			continue;
		const auto cells = table_cells(line);
		if (cells.size() == 3 && cells[2].ends_with(" KiB")) {
			const std::uint64_t sectors = bytes_of(cells[0]) / 512;
			EXPECT_EQ(digits(cells[1]), wb_nr_segments(sectors) * WB_BLOCKS_PER_SEGMENT) << line;
			EXPECT_EQ(digits(cells[2].substr(0, cells[2].size() - 4)),
				  (target_memory_bound(sectors) + 1023) / 1024)
				<< line;
			++by_cache;
		} else if (cells.size() == 2 && cells[1].ends_with(" GiB")) {
			const std::uint64_t largest = largest_cache_for_memory(bytes_of(cells[0]));
			EXPECT_EQ(without_commas(cells[1]), fmt::format("{:.1f} GiB", static_cast<double>(largest * 10 / (1ULL << 30)) / 10))
				<< line;
			++by_memory;
		}
	}
	EXPECT_GE(by_cache, 3);
	EXPECT_GE(by_memory, 3);
	// What the tables promise: the budget of 16 bytes a block and
	// 8 MiB, at every cache size.
	for (const std::uint64_t gib : {1ULL, 64ULL, 2048ULL, 16000ULL})
		EXPECT_LE(target_memory_bound(gib << 21), 16 * (wb_nr_segments(gib << 21) * WB_BLOCKS_PER_SEGMENT) + (8ULL << 20));
}
