// The status and table lines of a writeboost target (wb_status.hpp): the
// parsers, reading dmsetup's output, the figures and the rates.
#include "wbkit/wb_status.hpp"

#include <algorithm>
#include <charconv>
#include <type_traits>
#include <fmt/format.h>

#include "wbkit/format.hpp"
#include "control/words.hpp"

namespace wbkit {

namespace {

constexpr std::size_t fixed_status_fields = WB_STATUS_NR_NUMBERS;
static_assert(std::tuple_size_v<decltype(WbStatus::stat)> == stat_count);

// What a constructor reads as a number (the kernel's kstrtouint: an optional
// '+', then decimal digits).
std::optional<std::uint64_t> table_number(std::string_view token)
{
	if (!token.empty() && token.front() == '+')
		token.remove_prefix(1);
	return decimal(token);
}

std::string shown(std::string_view token)
{
	std::string out(token.substr(0, 40));
	if (token.size() > 40)
		out += "...";
	return out;
}

std::string lower(std::string_view text)
{
	std::string out(text);
	std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return char(std::tolower(c)); });
	return out;
}

std::optional<double> ratio(std::uint64_t part, std::uint64_t whole)
{
	if (whole == 0)
		return std::nullopt;
	return double(part) / double(whole);
}

std::uint64_t minus(std::uint64_t a, std::uint64_t b) { return a > b ? a - b : 0; }

} // namespace

std::string_view target_module_name(TargetModule module)
{
	switch (module) {
	case TargetModule::dm_writeboost:
		return "dm-writeboost";
	case TargetModule::dm_wbkit:
		return "dm-wbkit";
	}
	return "unknown";
}

std::optional<std::uint64_t> WbStatus::pair(std::string_view key) const
{
	std::optional<std::uint64_t> value;
	for (const auto& [k, v] : pairs)
		if (k == key)
			value = v;
	return value;
}

TargetModule WbStatus::module() const { return pair("dead") ? TargetModule::dm_wbkit : TargetModule::dm_writeboost; }

std::optional<bool> WbStatus::dead() const
{
	auto value = pair("dead");
	if (!value)
		return std::nullopt;
	return *value != 0;
}

std::optional<std::uint64_t> WbStatus::discarded_blocks() const { return pair("nr_discarded_blocks"); }

std::optional<std::uint64_t> WbStatus::discarded_dirty_blocks() const { return pair("nr_discarded_dirty"); }

WbStatus parse_wb_status(std::string_view params)
{
	const auto tokens = words_of(params);
	if (tokens.size() < fixed_status_fields + 1)
		throw StatusFormatError(fmt::format("a writeboost status has at least {} fields ({} numbers and a count), "
						    "this one has {}",
						    fixed_status_fields + 1, fixed_status_fields, tokens.size()));
	WbStatus s;
	std::size_t at = 0;
	// The field's name in a message: the row's, with the index in a row of several.
	const auto number = [&](std::string_view name, std::optional<std::size_t> index) {
		auto value = decimal(tokens[at]);
		if (!value)
			throw StatusFormatError(fmt::format("field {} ({}{}) is not a number: '{}'", at + 1, name,
							    index ? std::to_string(*index) : "", shown(tokens[at])));
		++at;
		return *value;
	};
	const auto read_row = [&](auto& member, std::string_view name) {
		if constexpr (std::is_same_v<std::remove_reference_t<decltype(member)>, std::uint64_t>) {
			member = number(name, std::nullopt);
		} else {
			for (std::size_t i = 0; i < member.size(); ++i)
				member[i] = number(name, i);
		}
	};
#define WBKIT_READ_STATUS_ROW(e, name, count) read_row(s.name, #name);
	WB_STATUS_FIELD_ROWS(WBKIT_READ_STATUS_ROW)
#undef WBKIT_READ_STATUS_ROW

	auto count = decimal(tokens[at]);
	if (!count)
		throw StatusFormatError(fmt::format("field {} (the count of key/value tokens) is not a number: '{}'",
						    at + 1, shown(tokens[at])));
	if (*count % 2)
		throw StatusFormatError(fmt::format("the count of key/value tokens is odd: {}", *count));
	const std::size_t following = tokens.size() - at - 1;
	if (*count != following)
		throw StatusFormatError(
			fmt::format("the count says {} key/value tokens, but {} follow it", *count, following));
	for (std::size_t i = at + 1; i < tokens.size(); i += 2) {
		const std::string_view key = tokens[i];
		if (decimal(key))
			throw StatusFormatError(fmt::format("a key/value pair starts with a number, not a key: '{}'", key));
		auto value = decimal(tokens[i + 1]);
		if (!value)
			throw StatusFormatError(
				fmt::format("the value of {} is not a number: '{}'", shown(key), shown(tokens[i + 1])));
		if (key == "dead" && *value > 1)
			throw StatusFormatError(fmt::format("dead is {}, not 0 or 1", *value));
		s.pairs.emplace_back(std::string(key), *value);
	}
	return s;
}

std::optional<std::uint64_t> WbTable::arg(std::string_view key) const
{
	const std::pair<std::string, std::string>* found = nullptr;
	for (const auto& kv : args)
		if (kv.first == key)
			found = &kv;
	if (!found)
		return std::nullopt;
	return table_number(found->second);
}

WbTable parse_wb_table(std::string_view params)
{
	const auto tokens = words_of(params);
	if (tokens.size() < 2)
		throw StatusFormatError("a writeboost table names the backing device and the cache device; this one "
					"has " +
					std::to_string(tokens.size()) + " field(s)");
	WbTable t;
	t.backing = std::string(tokens[0]);
	t.cache = std::string(tokens[1]);
	if (tokens.size() == 2)
		return t;
	auto count = table_number(tokens[2]);
	if (!count)
		throw StatusFormatError(
			fmt::format("the count of optional arguments is not a number: '{}'", shown(tokens[2])));
	if (*count > tokens.size() - 3)
		throw StatusFormatError(fmt::format("the count says {} optional arguments, but only {} follow it",
						    *count, tokens.size() - 3));
	// Words after the counted ones are ignored, as the constructor ignores them.
	for (std::size_t i = 0; i < *count; i += 2) {
		std::string value = i + 1 < *count ? std::string(tokens[3 + i + 1]) : std::string();
		t.args.emplace_back(lower(tokens[3 + i]), std::move(value));
	}
	return t;
}

std::optional<DmTargetLine> split_dm_line(std::string_view line)
{
	// `<start> <length> <type> <params>`, the type a word, not a number.
	auto target_part = [](std::string_view text) -> std::optional<DmTargetLine> {
		const auto tokens = words_of(text.substr(0, std::min<std::size_t>(text.size(), 256)));
		if (tokens.size() < 3)
			return std::nullopt;
		auto start = decimal(tokens[0]);
		auto length = decimal(tokens[1]);
		if (!start || !length || decimal(tokens[2]))
			return std::nullopt;
		if (text.substr(0, tokens[0].size()) != tokens[0])
			return std::nullopt; // the line starts with the start sector
		DmTargetLine out;
		out.start = *start;
		out.length = *length;
		out.type = std::string(tokens[2]);
		const std::size_t after = std::size_t(tokens[2].data() + tokens[2].size() - text.data());
		std::string_view rest = text.substr(after);
		while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t'))
			rest.remove_prefix(1);
		while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t' || rest.back() == '\r' ||
					 rest.back() == '\n'))
			rest.remove_suffix(1);
		out.params = std::string(rest);
		return out;
	};
	if (auto plain = target_part(line))
		return plain;
	// `<name>: ...`: a name may itself hold ": ", so the first split that
	// leaves a target line after it wins.
	for (std::size_t at = line.find(": "); at != std::string_view::npos; at = line.find(": ", at + 1)) {
		if (at == 0)
			continue;
		if (auto named = target_part(line.substr(at + 2))) {
			named->name = std::string(line.substr(0, at));
			return named;
		}
	}
	return std::nullopt;
}

std::vector<WbDevice> read_dmsetup_output(std::string_view text, std::string_view source)
{
	std::vector<WbDevice> devices;
	std::vector<std::size_t> unnamed; // indexes into devices, in order
	struct Table {
		std::string name;
		std::uint64_t start;
		WbTable table;
		std::size_t line;
	};
	std::vector<Table> named_tables;
	std::vector<WbTable> unnamed_tables;

	auto where = [&](std::size_t n) { return fmt::format("{}:{}: ", source, n); };
	auto add_status = [&](WbDevice device, std::size_t n) {
		for (const WbDevice& d : devices)
			if (d.name == device.name && d.start == device.start)
				throw StatusFormatError(where(n) + fmt::format("a second status line for {} (the target at "
									       "sector {}); give one sample at a time",
									       device.name, device.start));
		devices.push_back(std::move(device));
	};

	std::size_t n = 0;
	std::size_t pos = 0;
	while (pos < text.size()) {
		std::size_t end = text.find('\n', pos);
		if (end == std::string_view::npos)
			end = text.size();
		std::string_view line = text.substr(pos, end - pos);
		pos = end + 1;
		++n;
		while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
			line.remove_suffix(1);
		while (!line.empty() && (line.front() == ' ' || line.front() == '\t'))
			line.remove_prefix(1);
		if (line.empty() || line == "No devices found")
			continue;
		auto dm = split_dm_line(line);
		if (!dm) {
			const auto tokens = words_of(line);
			if (!decimal(tokens.front()))
				throw StatusFormatError(
					where(n) + "neither a line of dmsetup status or dmsetup table nor a writeboost "
						   "status: '" +
					shown(line) + "'");
			// The bare parameters of a status line.
			WbDevice d;
			try {
				d.status = parse_wb_status(line);
			} catch (const StatusFormatError& e) {
				throw StatusFormatError(where(n) + "not a writeboost status: " + e.what());
			}
			d.name = fmt::format("{}:{}", source, n);
			unnamed.push_back(devices.size());
			add_status(std::move(d), n);
			continue;
		}
		if (dm->type != "writeboost")
			continue;
		const auto params = words_of(dm->params);
		if (params.empty())
			throw StatusFormatError(where(n) + "a writeboost line without parameters");
		if (decimal(params.front())) {
			WbDevice d;
			try {
				d.status = parse_wb_status(dm->params);
			} catch (const StatusFormatError& e) {
				throw StatusFormatError(where(n) + "writeboost status: " + e.what());
			}
			d.start = dm->start;
			d.length = dm->length;
			if (dm->name.empty()) {
				d.name = fmt::format("{}:{}", source, n);
				unnamed.push_back(devices.size());
			} else {
				d.name = dm->name;
			}
			add_status(std::move(d), n);
		} else {
			WbTable table;
			try {
				table = parse_wb_table(dm->params);
			} catch (const StatusFormatError& e) {
				throw StatusFormatError(where(n) + "writeboost table: " + e.what());
			}
			if (dm->name.empty())
				unnamed_tables.push_back(std::move(table));
			else
				named_tables.push_back(Table{dm->name, dm->start, std::move(table), n});
		}
	}

	for (Table& t : named_tables)
		for (WbDevice& d : devices)
			if (d.name == t.name && d.start == t.start)
				d.table = std::move(t.table);
	for (std::size_t i = 0; i < unnamed.size() && i < unnamed_tables.size(); ++i)
		devices[unnamed[i]].table = std::move(unnamed_tables[i]);
	return devices;
}

std::optional<std::uint64_t> WbErrorCounts::count(std::string_view name) const
{
	for (const auto& [k, v] : counters)
		if (k == name)
			return v;
	return std::nullopt;
}

WbErrorCounts parse_error_counts(std::string_view reply)
{
	const auto tokens = words_of(reply);
	if (tokens.empty())
		throw StatusFormatError("an empty reply");
	if (tokens.size() % 2)
		throw StatusFormatError(fmt::format("{} words, not <name> <count> pairs", tokens.size()));
	auto name_char = [](char c, bool first) {
		return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!first && c >= '0' && c <= '9');
	};
	WbErrorCounts counts;
	for (std::size_t i = 0; i < tokens.size(); i += 2) {
		const std::string_view name = tokens[i];
		bool good = name.size() <= 64;
		for (std::size_t k = 0; good && k < name.size(); ++k)
			good = name_char(name[k], k == 0);
		if (!good)
			throw StatusFormatError(fmt::format("word {} is not a counter name: '{}'", i + 1, shown(name)));
		auto value = decimal(tokens[i + 1]);
		if (!value)
			throw StatusFormatError(
				fmt::format("the count of {} is not a number: '{}'", name, shown(tokens[i + 1])));
		if (counts.count(name))
			throw StatusFormatError(fmt::format("{} is given twice", name));
		counts.counters.emplace_back(std::string(name), *value);
	}
	return counts;
}

ErrorEffect error_counter_effect(std::string_view name)
{
	for (const ErrorCounterInfo& info : known_error_counters)
		if (name == info.name)
			return info.effect;
	return ErrorEffect::unknown;
}

WbErrorSummary error_summary(const WbErrorCounts& counts)
{
	WbErrorSummary s;
	auto get = [&](std::string_view name) { return counts.count(name).value_or(0); };
	s.backing = get("backing_read") + get("backing_write") + get("backing_flush");
	s.cache = get("cache_read") + get("cache_write") + get("cache_flush");
	s.failed_requests = get("failed_requests");
	s.transient = get("transient");
	for (const auto& [name, value] : counts.counters) {
		if (value == 0)
			continue;
		s.nonzero.emplace_back(name, value);
		switch (error_counter_effect(name)) {
		case ErrorEffect::fatal:
			s.fatal.emplace_back(name, value);
			break;
		case ErrorEffect::sometimes_fatal:
			// A clean copy the cache device could not read counts in
			// cache_read too; served from the backing device, it was not fatal.
			if (name != "cache_read")
				s.maybe_fatal.emplace_back(name, value);
			else if (value > get("cache_read_fallback"))
				s.maybe_fatal.emplace_back(name, value - get("cache_read_fallback"));
			break;
		case ErrorEffect::not_fatal:
		case ErrorEffect::unknown:
			break;
		}
	}
	return s;
}

WbFigures wb_figures(const WbStatus& s)
{
	WbFigures f;
	f.cache_blocks = s.nr_cache_blocks;
	f.cache_bytes = s.nr_cache_blocks * block_size;
	f.dirty_blocks = s.nr_dirty_cache_blocks;
	f.dirty_bytes = s.nr_dirty_cache_blocks * block_size;
	f.dirty_ratio = ratio(s.nr_dirty_cache_blocks, s.nr_cache_blocks);
	f.segments = s.nr_segments;
	f.segments_in_use = minus(s.current_id, s.last_writeback_id);
	f.segments_in_use_ratio = ratio(f.segments_in_use, s.nr_segments);
	f.segments_unflushed = minus(s.current_id, s.last_flushed_id);
	f.segments_to_write_back = minus(s.last_flushed_id, s.last_writeback_id);
	for (unsigned i = 0; i < stat_count; ++i) {
		const std::uint64_t v = s.stat[i];
		const bool hit = i & stat_hit, on_buffer = i & stat_on_buffer, full = i & stat_fullsize;
		if (i & stat_write) {
			f.writes += v;
			f.write_hits += hit ? v : 0;
			f.write_hits_on_buffer += hit && on_buffer ? v : 0;
			f.writes_fullsize += full ? v : 0;
		} else {
			f.reads += v;
			f.read_hits += hit ? v : 0;
			f.read_hits_on_buffer += hit && on_buffer ? v : 0;
			f.reads_fullsize += full ? v : 0;
		}
	}
	f.read_hit_ratio = ratio(f.read_hits, f.reads);
	f.write_hit_ratio = ratio(f.write_hits, f.writes);
	return f;
}

std::optional<WbRates> wb_rates(const WbDevice& before, const WbDevice& after, double seconds)
{
	const WbStatus& a = before.status;
	const WbStatus& b = after.status;
	if (before.name != after.name || before.start != after.start || a.nr_cache_blocks != b.nr_cache_blocks ||
	    a.nr_segments != b.nr_segments)
		return std::nullopt;
	WbRates r;
	r.seconds = seconds;
	bool backwards = b.current_id < a.current_id || b.last_flushed_id < a.last_flushed_id ||
			 b.last_writeback_id < a.last_writeback_id || b.nr_partial_flushed < a.nr_partial_flushed;
	for (unsigned i = 0; i < stat_count; ++i)
		backwards = backwards || b.stat[i] < a.stat[i];
	if (backwards) {
		r.reset = true;
		return r;
	}
	const WbFigures fa = wb_figures(a), fb = wb_figures(b);
	r.reads = fb.reads - fa.reads;
	r.read_hits = fb.read_hits - fa.read_hits;
	r.writes = fb.writes - fa.writes;
	r.write_hits = fb.write_hits - fa.write_hits;
	r.segments_flushed = b.last_flushed_id - a.last_flushed_id;
	r.segments_written_back = b.last_writeback_id - a.last_writeback_id;
	r.partial_flushed = b.nr_partial_flushed - a.nr_partial_flushed;
	r.dirty_blocks_change = std::int64_t(b.nr_dirty_cache_blocks) - std::int64_t(a.nr_dirty_cache_blocks);
	r.read_hit_ratio = ratio(r.read_hits, r.reads);
	r.write_hit_ratio = ratio(r.write_hits, r.writes);
	if (before.errors && after.errors) {
		std::vector<std::pair<std::string, std::uint64_t>> deltas;
		bool back = false;
		for (const auto& [name, value] : after.errors->counters) {
			auto old = before.errors->count(name);
			if (!old)
				continue; // new in this sample: nothing to compare
			back = back || value < *old;
			deltas.emplace_back(name, value - std::min(value, *old));
		}
		if (!back)
			r.errors = std::move(deltas);
	}
	return r;
}

// words.hpp

std::vector<std::string_view> words_of(std::string_view text)
{
	std::vector<std::string_view> tokens;
	std::size_t i = 0;
	while (i < text.size()) {
		while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n'))
			++i;
		std::size_t start = i;
		while (i < text.size() && !(text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n'))
			++i;
		if (i > start)
			tokens.push_back(text.substr(start, i - start));
	}
	return tokens;
}

std::optional<std::uint64_t> decimal(std::string_view token)
{
	if (token.empty() || token.size() > 20)
		return std::nullopt;
	std::uint64_t value = 0;
	auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value, 10);
	if (ec != std::errc() || end != token.data() + token.size() || token.front() == '-' || token.front() == '+')
		return std::nullopt;
	return value;
}

} // namespace wbkit
