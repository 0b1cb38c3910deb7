// wbstat's reports on live writeboost targets: JSON, text for people, and
// the Prometheus text format.
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <functional>

#include "report/report_json.hpp"
#include "wbkit/format.hpp"
#include "wbkit/report.hpp"

namespace wbkit {

namespace {

// Insertion order, so the document reads in the order of the status line:
// schema first, then the devices, each from its name to its rates.
using ojson = nlohmann::ordered_json;

template <typename T>
ojson optional_json(const std::optional<T>& value)
{
	return value ? ojson(*value) : ojson(nullptr);
}

// The tunables the status carries (current values: upstream's pairs, the
// last batch's size among them), then those only the table has (upstream's
// table shows what the table line said; a later message is not shown), with
// the defaults both modules use when the table line does not give them.
// Both from the rows of format/wbkit_contract.h.
std::vector<std::string_view> status_keys_of_upstream()
{
	std::vector<std::string_view> keys;
	for (const StatusPairRow& row : status_pair_rows)
		if (row.upstream)
			keys.push_back(row.key);
	return keys;
}
const std::vector<std::string_view> status_tunables = status_keys_of_upstream();

struct TableTunable {
	std::string_view key;
	std::uint64_t fallback;
};
std::vector<TableTunable> table_only_tunables()
{
	std::vector<TableTunable> rows;
	for (const TunableRow& row : tunable_rows)
		if (!status_shows_tunable(row.key))
			rows.push_back({row.key, row.default_value});
	return rows;
}
const std::vector<TableTunable> table_tunables = table_only_tunables();

// The status line's numbers under the names of their rows
// (format/wbkit_contract.h), then its pairs.
ojson status_json(const WbStatus& s, ojson pairs)
{
	ojson status = ojson::object();
#define WBKIT_STATUS_JSON(e, name, count) status[#name] = s.name;
	WB_STATUS_FIELD_ROWS(WBKIT_STATUS_JSON)
#undef WBKIT_STATUS_JSON
	status["pairs"] = std::move(pairs);
	return status;
}

std::optional<std::uint64_t> table_tunable(const WbDevice& d, const TableTunable& t)
{
	if (!d.table)
		return std::nullopt;
	return d.table->arg(t.key).value_or(t.fallback);
}

ojson ratio_json(const std::optional<double>& value) { return optional_json(value); }

ojson rates_json(const std::optional<WbRates>& rates)
{
	if (!rates)
		return nullptr;
	const WbRates& r = *rates;
	ojson doc = {{"seconds", r.seconds}, {"reset", r.reset}};
	const char* keys[] = {"reads",
			      "read_hits",
			      "writes",
			      "write_hits",
			      "segments_flushed",
			      "segments_written_back",
			      "partial_flushed",
			      "dirty_blocks_change",
			      "reads_per_second",
			      "writes_per_second",
			      "writeback_segments_per_second",
			      "dirty_blocks_per_second",
			      "read_hit_ratio",
			      "write_hit_ratio",
			      "errors",
			      "errors_per_second"};
	if (r.reset) {
		for (const char* key : keys)
			doc[key] = nullptr;
		return doc;
	}
	doc["reads"] = r.reads;
	doc["read_hits"] = r.read_hits;
	doc["writes"] = r.writes;
	doc["write_hits"] = r.write_hits;
	doc["segments_flushed"] = r.segments_flushed;
	doc["segments_written_back"] = r.segments_written_back;
	doc["partial_flushed"] = r.partial_flushed;
	doc["dirty_blocks_change"] = r.dirty_blocks_change;
	doc["reads_per_second"] = r.per_second(r.reads);
	doc["writes_per_second"] = r.per_second(r.writes);
	doc["writeback_segments_per_second"] = r.per_second(r.segments_written_back);
	doc["dirty_blocks_per_second"] = r.per_second(r.dirty_blocks_change);
	doc["read_hit_ratio"] = ratio_json(r.read_hit_ratio);
	doc["write_hit_ratio"] = ratio_json(r.write_hit_ratio);
	doc["errors"] = nullptr;
	doc["errors_per_second"] = nullptr;
	if (r.errors) {
		ojson deltas = ojson::object(), per_second = ojson::object();
		for (const auto& [name, delta] : *r.errors) {
			deltas[name] = delta;
			per_second[name] = r.per_second(delta);
		}
		doc["errors"] = deltas;
		doc["errors_per_second"] = per_second;
	}
	return doc;
}

ojson errors_json(const std::optional<WbErrorCounts>& errors)
{
	if (!errors)
		return nullptr;
	ojson doc = ojson::object();
	for (const auto& [name, value] : errors->counters)
		doc[name] = value;
	return doc;
}

ojson device_json(const WbDevice& d, const std::optional<WbRates>* rates)
{
	const WbStatus& s = d.status;
	const WbFigures f = wb_figures(s);
	ojson pairs = ojson::object();
	for (const auto& [key, value] : s.pairs)
		pairs[key] = value;
	ojson table = nullptr;
	if (d.table) {
		ojson args = ojson::object();
		for (const auto& [key, value] : d.table->args)
			args[key] = value;
		table = {{"backing", d.table->backing}, {"cache", d.table->cache}, {"args", args}};
	}
	ojson tunables = ojson::object();
	for (std::string_view key : status_tunables)
		tunables[std::string(key)] = optional_json(s.pair(key));
	for (const TableTunable& t : table_tunables)
		tunables[std::string(t.key)] = optional_json(table_tunable(d, t));
	return {
		{"name", d.name},
		{"start", d.start},
		{"length", d.length},
		{"target", std::string(target_module_name(s.module()))},
		{"dead", optional_json(s.dead())},
		{"dead_cause", optional_json(d.dead_cause)},
		{"errors", errors_json(d.errors)},
		{"status", status_json(s, std::move(pairs))},
		{"table", table},
		{"cache",
		 {{"blocks", f.cache_blocks},
		  {"bytes", f.cache_bytes},
		  {"dirty_blocks", f.dirty_blocks},
		  {"dirty_bytes", f.dirty_bytes},
		  {"dirty_ratio", ratio_json(f.dirty_ratio)},
		  {"discarded_blocks", optional_json(s.discarded_blocks())},
		  {"discarded_dirty_blocks", optional_json(s.discarded_dirty_blocks())}}},
		{"segments",
		 {{"total", f.segments},
		  {"in_use", f.segments_in_use},
		  {"in_use_ratio", ratio_json(f.segments_in_use_ratio)},
		  {"current_id", s.current_id},
		  {"last_flushed_id", s.last_flushed_id},
		  {"last_writeback_id", s.last_writeback_id},
		  {"unflushed", f.segments_unflushed},
		  {"to_write_back", f.segments_to_write_back},
		  {"partial_flushed", s.nr_partial_flushed}}},
		{"io",
		 {{"reads", f.reads},
		  {"read_hits", f.read_hits},
		  {"read_hits_on_buffer", f.read_hits_on_buffer},
		  {"reads_fullsize", f.reads_fullsize},
		  {"read_hit_ratio", ratio_json(f.read_hit_ratio)},
		  {"writes", f.writes},
		  {"write_hits", f.write_hits},
		  {"write_hits_on_buffer", f.write_hits_on_buffer},
		  {"writes_fullsize", f.writes_fullsize},
		  {"write_hit_ratio", ratio_json(f.write_hit_ratio)}}},
		{"tunables", tunables},
		{"rates", rates ? rates_json(*rates) : ojson(nullptr)},
	};
}

std::string percent(const std::optional<double>& ratio)
{
	return ratio ? fmt::format("{:.1f}%", *ratio * 100) : std::string("-");
}

std::string rate(double value) { return fmt::format("{:.1f}", value); }

std::string counter_list(const std::vector<std::pair<std::string, std::uint64_t>>& counters)
{
	std::string text;
	for (const auto& [name, value] : counters)
		text += fmt::format("{}{} {}", text.empty() ? "" : ", ", name, value);
	return text;
}

// The errors line of a device: what the error counters say, and plainly
// when errors that kill the target were counted.
std::string errors_text(const WbDevice& d, const std::string& source)
{
	if (d.status.module() != TargetModule::dm_wbkit)
		return "not reported (dm-writeboost has no error counters)";
	if (!d.errors)
		return source == "dmsetup" ? "not known (no usable reply to the message error_counts; a dm-wbkit "
					     "older than it has none)"
					   : "not known (not read from dmsetup: the counters are dm-wbkit's reply to the "
					     "message error_counts)";
	const WbErrorSummary s = error_summary(*d.errors);
	if (s.nonzero.empty())
		return fmt::format("none since the target was made ({} counters at 0)", d.errors->counters.size());
	std::string text = fmt::format("backing device {}, cache device {}, failed requests {}, transient {} since "
				       "the target was made: {}",
				       s.backing, s.cache, s.failed_requests, s.transient, counter_list(s.nonzero));
	if (!s.fatal.empty())
		text += fmt::format("; FATAL: {} (every such error makes the target dead)", counter_list(s.fatal));
	else if (!s.maybe_fatal.empty() && d.status.dead().value_or(false)) {
		// Alive, the target had none fatal; dead, these may be why.
		std::string maybe;
		for (const auto& [name, value] : s.maybe_fatal)
			maybe += fmt::format("{}{} {} ({})", maybe.empty() ? "" : ", ", name, value,
					     name == "backing_write" ? "fatal when writing back" : "fatal unless a clean copy");
		text += "; possibly fatal: " + maybe;
	}
	return text;
}

// "wb@2048" for the second writeboost target of a device, so every label
// set is unique; the plain name for the usual one-target device.
std::vector<std::string> device_labels(const std::vector<WbDevice>& devices)
{
	std::vector<std::string> labels;
	for (const WbDevice& d : devices) {
		std::size_t same = 0;
		for (const WbDevice& other : devices)
			same += other.name == d.name;
		labels.push_back(same > 1 ? fmt::format("{}@{}", d.name, d.start) : d.name);
	}
	return labels;
}

std::string label_value(std::string_view text)
{
	std::string out;
	for (char c : text) {
		if (c == '\\')
			out += "\\\\";
		else if (c == '"')
			out += "\\\"";
		else if (c == '\n')
			out += "\\n";
		else
			out += c;
	}
	return out;
}

} // namespace

std::string status_json(const StatusReport& report, int indent)
{
	ojson devices = ojson::array();
	for (std::size_t i = 0; i < report.devices.size(); ++i)
		devices.push_back(device_json(report.devices[i], i < report.rates.size() ? &report.rates[i] : nullptr));
	ojson doc = {
		{"schema", report_detail::schema_wbstat},
		{"source", report.source},
		{"time", report.time},
		{"interval_seconds", optional_json(report.interval_seconds)},
		{"devices", devices},
	};
	return doc.dump(indent, ' ', false, ojson::error_handler_t::replace);
}

void print_status(std::ostream& out, const StatusReport& report)
{
	if (report.devices.empty()) {
		fmt::print(out, "no writeboost targets ({})\n", report.source == "dmsetup" ? "dmsetup lists none" : "none in " + report.source);
		return;
	}
	for (std::size_t i = 0; i < report.devices.size(); ++i) {
		const WbDevice& d = report.devices[i];
		const WbStatus& s = d.status;
		const WbFigures f = wb_figures(s);
		if (i)
			out << '\n';
		fmt::print(out, "{}: {}, sectors {}+{} ({})", d.name, target_module_name(s.module()), d.start, d.length,
			   human_bytes(d.length * sector_size));
		if (d.table)
			fmt::print(out, ", backing {}, cache {}", d.table->backing, d.table->cache);
		out << '\n';

		if (!s.dead())
			fmt::print(out, "  state      not reported (dm-writeboost has no dead state)\n");
		else if (!*s.dead())
			fmt::print(out, "  state      alive\n");
		else
			fmt::print(out, "  state      DEAD: {}; every I/O fails, recover offline (wbrecover(8))\n",
				   d.dead_cause ? *d.dead_cause : std::string("cause not read"));
		fmt::print(out, "  errors     {}\n", errors_text(d, report.source));
		fmt::print(out, "  dirty      {} block(s), {} (at most), {} of {} cache blocks ({})\n", f.dirty_blocks,
			   human_bytes(f.dirty_bytes), percent(f.dirty_ratio), f.cache_blocks, human_bytes(f.cache_bytes));
		fmt::print(out, "  segments   {} of {} in use ({}): current id {}, last flushed {}, last written back {}\n",
			   f.segments_in_use, f.segments, percent(f.segments_in_use_ratio), s.current_id, s.last_flushed_id,
			   s.last_writeback_id);
		fmt::print(out, "  writeback  {} segment(s) on the cache device to write back, {} not yet flushed to it",
			   f.segments_to_write_back, f.segments_unflushed);
		if (auto batch = s.pair("nr_cur_batched_writeback"))
			fmt::print(out, "; last batch {} segment(s)", *batch);
		out << '\n';
		fmt::print(out, "  reads      {}, hits {} ({}), hits in the RAM buffer {}, full 4 KiB {}\n", f.reads,
			   f.read_hits, percent(f.read_hit_ratio), f.read_hits_on_buffer, f.reads_fullsize);
		fmt::print(out, "  writes     {}, hits {} ({}), hits in the RAM buffer {}, full 4 KiB {}\n", f.writes,
			   f.write_hits, percent(f.write_hit_ratio), f.write_hits_on_buffer, f.writes_fullsize);
		fmt::print(out, "  partial    {} segment(s) written before they were full (flushes)\n",
			   s.nr_partial_flushed);
		if (auto blocks = s.discarded_blocks())
			fmt::print(out,
				   "  discarded  {} cached block(s) dropped by discards, {} of them dirty (never written "
				   "back)\n",
				   *blocks, s.discarded_dirty_blocks().value_or(0));
		else
			fmt::print(out, "  discarded  not reported ({})\n",
				   s.module() == TargetModule::dm_wbkit ? "a dm-wbkit from before discard support"
									: "dm-writeboost takes no discards");
		std::string tunables;
		for (std::string_view key : status_tunables)
			if (auto v = s.pair(key); v && status_shows_tunable(key))
				tunables += fmt::format("{}{} {}", tunables.empty() ? "" : ", ", key, *v);
		for (const TableTunable& t : table_tunables)
			if (auto v = table_tunable(d, t))
				tunables += fmt::format("{}{} {}", tunables.empty() ? "" : ", ", t.key, *v);
		fmt::print(out, "  tunables   {}\n", tunables.empty() ? "-" : tunables);
		if (!report.interval_seconds)
			continue;
		const std::optional<WbRates>* r = i < report.rates.size() ? &report.rates[i] : nullptr;
		if (!r || !*r) {
			fmt::print(out, "  rates      not known: the target was not in the previous sample\n");
		} else if ((*r)->reset) {
			fmt::print(out,
				   "  rates      over {:.1f} s: not known, the counters went back (clear_stat, or the device "
				   "was made again)\n",
				   (*r)->seconds);
		} else {
			const WbRates& x = **r;
			fmt::print(out,
				   "  rates      over {:.1f} s: reads {}/s (hits {}), writes {}/s (hits {}), written back "
				   "{} segment(s)/s, dirty {:+.1f} block(s)/s\n",
				   x.seconds, rate(x.per_second(x.reads)), percent(x.read_hit_ratio),
				   rate(x.per_second(x.writes)), percent(x.write_hit_ratio),
				   rate(x.per_second(x.segments_written_back)), x.per_second(x.dirty_blocks_change));
			// Errors only when some were counted: the errors line has the totals.
			std::string errors;
			if (x.errors)
				for (const auto& [name, delta] : *x.errors)
					if (delta)
						errors += fmt::format("{}{} {}/s", errors.empty() ? "" : ", ", name,
								      rate(x.per_second(delta)));
			if (!errors.empty())
				fmt::print(out, "  errors/s   {}\n", errors);
		}
	}
}

void write_status_prometheus(std::ostream& out, const StatusReport& report)
{
	const auto labels = device_labels(report.devices);
	auto base = [&](std::size_t i) {
		return fmt::format("device=\"{}\",target=\"{}\"", label_value(labels[i]),
				   target_module_name(report.devices[i].status.module()));
	};
	auto head = [&](const char* name, const char* type, const char* help) {
		fmt::print(out, "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
	};
	// One gauge or counter per device, from a value that may be absent.
	auto metric = [&](const char* name, const char* type, const char* help,
			  const std::function<std::optional<std::uint64_t>(const WbDevice&)>& value) {
		head(name, type, help);
		for (std::size_t i = 0; i < report.devices.size(); ++i)
			if (auto v = value(report.devices[i]))
				fmt::print(out, "{}{{{}}} {}\n", name, base(i), *v);
	};
	auto gauge = [&](const char* name, const char* help,
			 const std::function<std::optional<std::uint64_t>(const WbDevice&)>& value) {
		metric(name, "gauge", help, value);
	};
	auto counter = [&](const char* name, const char* help,
			   const std::function<std::optional<std::uint64_t>(const WbDevice&)>& value) {
		metric(name, "counter", help, value);
	};

	head("writeboost_devices", "gauge", "Writeboost targets found (dm-writeboost and dm-wbkit).");
	fmt::print(out, "writeboost_devices {}\n", report.devices.size());
	head("writeboost_info", "gauge", "Always 1: a writeboost target, with its backing and cache device.");
	for (std::size_t i = 0; i < report.devices.size(); ++i) {
		const WbDevice& d = report.devices[i];
		fmt::print(out, "writeboost_info{{{},backing=\"{}\",cache=\"{}\"}} 1\n", base(i),
			   label_value(d.table ? d.table->backing : ""), label_value(d.table ? d.table->cache : ""));
	}
	gauge("writeboost_dead", "1 when the target is dead (fail-stop after an I/O error; dm-wbkit only).",
	      [](const WbDevice& d) -> std::optional<std::uint64_t> {
		      if (auto dead = d.status.dead())
			      return *dead ? 1 : 0;
		      return std::nullopt;
	      });
	head("writeboost_dead_cause_info", "gauge", "Always 1: why a dead target died (dm-wbkit's dead_cause).");
	for (std::size_t i = 0; i < report.devices.size(); ++i)
		if (report.devices[i].dead_cause)
			fmt::print(out, "writeboost_dead_cause_info{{{},cause=\"{}\"}} 1\n", base(i),
				   label_value(*report.devices[i].dead_cause));
	gauge("writeboost_cache_blocks", "Cache blocks of 4 KiB (nr_cache_blocks).",
	      [](const WbDevice& d) { return d.status.nr_cache_blocks; });
	gauge("writeboost_dirty_blocks", "Dirty cache blocks, not yet written back (nr_dirty_cache_blocks).",
	      [](const WbDevice& d) { return d.status.nr_dirty_cache_blocks; });
	gauge("writeboost_dirty_bytes", "Dirty cache blocks times 4096 (a partly written block counts whole).",
	      [](const WbDevice& d) { return wb_figures(d.status).dirty_bytes; });
	gauge("writeboost_segments", "Segments of 512 KiB in the cache's ring (nr_segments).",
	      [](const WbDevice& d) { return d.status.nr_segments; });
	gauge("writeboost_segments_in_use",
	      "Segments holding data not yet written back (current_id - last_writeback_id); at "
	      "writeboost_segments writes wait for writeback.",
	      [](const WbDevice& d) { return wb_figures(d.status).segments_in_use; });
	gauge("writeboost_current_segment_id", "Id of the segment being filled (current_id).",
	      [](const WbDevice& d) { return d.status.current_id; });
	gauge("writeboost_last_flushed_segment_id", "Newest segment on the cache device (last_flushed_id).",
	      [](const WbDevice& d) { return d.status.last_flushed_id; });
	gauge("writeboost_last_writeback_segment_id", "Newest segment written back (last_writeback_id).",
	      [](const WbDevice& d) { return d.status.last_writeback_id; });
	gauge("writeboost_cursor_position", "Cache block the next write goes to (cursor_pos).",
	      [](const WbDevice& d) { return d.status.cursor_pos; });
	gauge("writeboost_batched_writeback_segments", "Segments in the last writeback batch (nr_cur_batched_writeback).",
	      [](const WbDevice& d) { return d.status.pair("nr_cur_batched_writeback"); });

	head("writeboost_bios_total", "counter",
	     "Bios by kind (the status's stat0..stat15): op read or write, hit 1 when the block was cached, "
	     "on_buffer 1 when it was in the RAM buffer, full_size 1 for a whole 4 KiB block.");
	for (std::size_t i = 0; i < report.devices.size(); ++i)
		for (unsigned k = 0; k < stat_count; ++k)
			fmt::print(out, "writeboost_bios_total{{{},op=\"{}\",hit=\"{}\",on_buffer=\"{}\",full_size=\"{}\"}} {}\n",
				   base(i), k & stat_write ? "write" : "read", k & stat_hit ? 1 : 0,
				   k & stat_on_buffer ? 1 : 0, k & stat_fullsize ? 1 : 0, report.devices[i].status.stat[k]);
	head("writeboost_partial_flushed_segments_total", "counter",
	     "Segments written before they were full (nr_partial_flushed).");
	for (std::size_t i = 0; i < report.devices.size(); ++i)
		fmt::print(out, "writeboost_partial_flushed_segments_total{{{}}} {}\n", base(i),
			   report.devices[i].status.nr_partial_flushed);
	counter("writeboost_discarded_blocks_total",
		"Cached blocks a discard dropped since the target was made (nr_discarded_blocks; dm-wbkit only).",
		[](const WbDevice& d) { return d.status.discarded_blocks(); });
	counter("writeboost_discarded_dirty_blocks_total",
		"Dirty cached blocks a discard dropped, never written back (nr_discarded_dirty; dm-wbkit only).",
		[](const WbDevice& d) { return d.status.discarded_dirty_blocks(); });

	head("writeboost_errors_total", "counter",
	     "I/O errors since the target was made, by counter (dm-wbkit's message error_counts; clear_stat leaves "
	     "them). Always fatal: backing_flush, cache_write, cache_flush; in part: backing_write (writeback "
	     "writes), cache_read (all but clean copies, see cache_read_fallback). See wbstat(8).");
	for (std::size_t i = 0; i < report.devices.size(); ++i)
		if (const auto& errors = report.devices[i].errors)
			for (const auto& [name, value] : errors->counters)
				fmt::print(out, "writeboost_errors_total{{{},counter=\"{}\"}} {}\n", base(i),
					   label_value(name), value);

	head("writeboost_tunable", "gauge",
	     "Tunables by table key: the status's current values, and from the table nr_max_batched_writeback, "
	     "nr_read_cache_cells and write_around_mode.");
	for (std::size_t i = 0; i < report.devices.size(); ++i) {
		const WbDevice& d = report.devices[i];
		for (std::string_view key : status_tunables)
			if (auto v = d.status.pair(key); v && status_shows_tunable(key))
				fmt::print(out, "writeboost_tunable{{{},key=\"{}\"}} {}\n", base(i), key, *v);
		for (const TableTunable& t : table_tunables)
			if (auto v = table_tunable(d, t))
				fmt::print(out, "writeboost_tunable{{{},key=\"{}\"}} {}\n", base(i), t.key, *v);
	}
}

} // namespace wbkit
