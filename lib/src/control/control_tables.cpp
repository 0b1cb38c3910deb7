// control.hpp: the table lines wbctl reads from dmsetup and writes for it.
#include "wbkit/control.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "control/words.hpp"
#include "wbkit/contract.hpp"

namespace wbkit {

// ---------------------------------------------------------------------------
// Table lines

DmTargetLine single_target(std::string_view table_text, std::string_view name)
{
	std::vector<DmTargetLine> lines;
	std::size_t pos = 0;
	while (pos < table_text.size()) {
		std::size_t end = table_text.find('\n', pos);
		if (end == std::string_view::npos)
			end = table_text.size();
		std::string_view text = table_text.substr(pos, end - pos);
		pos = end + 1;
		if (words_of(text).empty())
			continue;
		auto line = split_dm_line(text);
		if (!line)
			throw Error(fmt::format("{}: dmsetup printed a line that is no target line: '{}'", name,
						std::string(text.substr(0, 80))));
		lines.push_back(std::move(*line));
	}
	if (lines.empty())
		throw Error(fmt::format("{}: the device has no table (no target)", name));
	if (lines.size() > 1)
		throw Error(fmt::format("{}: the device has {} targets; wbctl changes only a device of one target",
					name, lines.size()));
	if (lines.front().start != 0)
		throw Error(fmt::format("{}: its target starts at sector {}, not 0", name, lines.front().start));
	return lines.front();
}

std::optional<LinearParams> parse_linear_params(std::string_view params)
{
	const auto words = words_of(params);
	if (words.size() != 2)
		return std::nullopt;
	auto offset = decimal(words[1]);
	if (!offset)
		return std::nullopt;
	return LinearParams{std::string(words[0]), *offset};
}

std::string linear_table_line(std::uint64_t sectors, std::string_view backing)
{
	return fmt::format("0 {} linear {} 0", sectors, backing);
}

std::string writeboost_table_line(std::uint64_t sectors, std::string_view backing, std::string_view cache,
				  const std::vector<std::pair<std::string, std::string>>& args)
{
	std::string line = fmt::format("0 {} writeboost {} {}", sectors, backing, cache);
	if (!args.empty()) {
		line += fmt::format(" {}", args.size() * 2);
		for (const auto& [key, value] : args)
			line += fmt::format(" {} {}", key, value);
	}
	return line;
}

std::vector<std::pair<std::string, std::string>> parse_table_options(std::span<const std::string> words)
{
	std::vector<std::pair<std::string, std::string>> args;
	for (const std::string& word : words) {
		const std::size_t eq = word.find('=');
		if (eq == std::string::npos)
			throw UsageError(fmt::format("table option '{}': write it as KEY=VALUE", word));
		std::string key = word.substr(0, eq);
		std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return char(std::tolower(c)); });
		const std::string value = word.substr(eq + 1);
		if (!find_tunable_row(key)) {
			std::string known;
			for (const TunableRow& row : tunable_rows)
				known += fmt::format("{}{}", known.empty() ? "" : ", ", row.key);
			throw UsageError(fmt::format("table option '{}': unknown key (known: {})", key, known));
		}
		if (!decimal(value))
			throw UsageError(fmt::format("table option '{}': the value is not a decimal number: '{}'", key,
						     value));
		args.emplace_back(std::move(key), value);
	}
	return args;
}

} // namespace wbkit
