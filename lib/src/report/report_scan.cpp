// The reports on a scanned cache: wbdump's JSON and text, and the views of
// one segment and one backing sector.
#include "wbkit/report.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <iterator>

#include "report/json_stream.hpp"
#include "report/report_json.hpp"

namespace wbkit {

using report_detail::optional_json;

std::string human_bytes(std::uint64_t bytes)
{
	const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double value = double(bytes);
	unsigned unit = 0;
	while (value >= 1024 && unit + 1 < std::size(units)) {
		value /= 1024;
		++unit;
	}
	return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, units[unit]);
}

namespace report_detail {

nlohmann::json finding_json(const Finding& f)
{
	return {
		{"code", std::string(f.name())},
		{"severity", std::string(severity_name(f.severity))},
		{"message", f.message},
		{"place",
		 {{"slot", optional_json(f.place.slot)},
		  {"segment_id", optional_json(f.place.segment_id)},
		  {"metablock", optional_json(f.place.metablock)},
		  {"backing_sector", optional_json(f.place.backing_sector)},
		  {"cache_offset", optional_json(f.place.cache_offset)}}},
	};
}

nlohmann::json geometry_json(const LogScan& scan)
{
	return {{"cache_bytes", scan.geometry.cache_bytes},
		{"nr_segments", scan.geometry.nr_segments},
		{"segment_bytes", segment_size},
		{"block_bytes", block_size},
		{"blocks_per_segment", blocks_per_segment}};
}

nlohmann::json log_json(const LogScan& scan)
{
	nlohmann::json stop = {{"reason", std::string(stop_reason_name(scan.stop_reason))},
			       {"slot", optional_json(scan.stop_slot)},
			       {"segment_id", scan.stop_slot ? nlohmann::json(scan.slots[*scan.stop_slot].id)
							     : nlohmann::json(nullptr)}};
	return {{"verified", scan.verified},
		{"max_id", scan.max_id},
		{"oldest_id", scan.oldest_id()},
		{"newest_id", scan.last_flushed_id},
		{"segments", scan.log.size()},
		{"discarded_segments", scan.discarded_segments},
		{"stop", stop},
		{"last_flushed_id", scan.last_flushed_id},
		{"last_writeback_id", scan.last_writeback_id},
		{"dirty_blocks", scan.dirty_blocks},
		{"dirty_sectors", scan.dirty_sectors},
		{"writeback_bytes", scan.writeback_bytes()}};
}

} // namespace report_detail

using report_detail::finding_json;

namespace {

std::string stop_text(const LogScan& scan)
{
	switch (scan.stop_reason) {
	case StopReason::empty_log:
		return "nothing to replay: no segment was ever written";
	case StopReason::end_of_ring:
		return fmt::format("walks all {} slots; every non-empty segment is valid", scan.geometry.nr_segments);
	case StopReason::not_verified:
		return "not known: checksums were not verified (headers-only scan)";
	case StopReason::checksum_mismatch:
	case StopReason::unreadable: {
		const SlotInfo& info = scan.slots[*scan.stop_slot];
		return fmt::format("stops at slot {} (segment {}{}): {}", *scan.stop_slot, info.id,
				   info.id == scan.max_id ? ", the newest" : "", slot_state_name(info.state));
	}
	}
	return "unknown";
}

nlohmann::json scan_document(const LogScan& scan, const std::string& cache_path)
{
	nlohmann::json findings = nlohmann::json::array();
	for (const Finding& f : scan.findings)
		findings.push_back(finding_json(f));
	return {
		{"schema", report_detail::schema_wbdump},
		{"cache", cache_path},
		{"geometry", report_detail::geometry_json(scan)},
		{"superblock",
		 {{"readable", scan.superblock_readable},
		  {"magic", scan.superblock.magic},
		  {"magic_ok", scan.superblock.magic_ok},
		  {"record", scan.sb_record},
		  {"trust_record", scan.trust_record},
		  {"clean_copies_trusted_from",
		   scan.trusted_from_id == WB_TRUST_NONE ? nlohmann::json(nullptr)
							 : nlohmann::json(scan.trusted_from_id)}}},
		{"log", report_detail::log_json(scan)},
		{"damage", has_damage(scan.findings)},
		{"findings", findings},
	};
}

nlohmann::json slot_document(const SlotDetail& d)
{
	nlohmann::json metablocks = nlohmann::json::array();
	for (unsigned i = 0; i < d.header.usable_length(); ++i) {
		const Metablock& mb = d.header.metablocks[i];
		metablocks.push_back({{"index", i},
				      {"sector", mb.sector},
				      {"dirty_bits", mb.dirty_bits},
				      {"padding_nonzero", mb.padding_nonzero}});
	}
	return {
		{"slot", d.slot},
		{"cache_offset", d.cache_offset},
		{"state", std::string(slot_state_name(d.state))},
		{"error", d.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.error)},
		{"id", d.header.id},
		{"length", d.header.length},
		{"checksum_stored", d.header.checksum},
		{"checksum_computed", optional_json(d.computed_checksum)},
		{"checksum_ok", d.state == SlotState::valid},
		{"ignored_metablocks", d.ignored_metablocks},
		{"metablocks", metablocks},
	};
}

nlohmann::json sector_document(const SectorDetail& d)
{
	nlohmann::json j = {{"backing_sector", d.backing_sector}, {"in_cache", d.source.has_value()}};
	if (d.source) {
		j["segment_id"] = d.segment_id;
		j["slot"] = d.slot;
		j["block_index"] = d.source->metablock;
		j["block_sector"] = d.source->block_sector;
		j["dirty"] = d.dirty;
		j["cache_offset"] = d.cache_offset;
		j["readable"] = d.readable;
		if (!d.error.empty())
			j["error"] = d.error;
	}
	return j;
}

nlohmann::json metablock_row_json(const LogMetablockRow& row)
{
	return {{"segment_id", row.segment_id},
		{"slot", row.slot},
		{"index", row.index},
		{"sector", row.metablock.sector},
		{"dirty_bits", row.metablock.dirty_bits}};
}

} // namespace

std::string scan_json(const LogScan& scan, const std::string& cache_path, int indent)
{
	return scan_document(scan, cache_path).dump(indent);
}

std::string slot_json(const SlotDetail& detail, int indent) { return slot_document(detail).dump(indent); }

std::string sector_json(const SectorDetail& detail, int indent) { return sector_document(detail).dump(indent); }

namespace {

nlohmann::json dump_head(const DumpReport& report)
{
	nlohmann::json doc = scan_document(report.scan, report.cache_path);
	if (report.segment) {
		doc["segment"] = slot_document(*report.segment);
		doc["segment"]["in_log"] = report.scan.slots[report.segment->slot].in_log;
	}
	if (report.block)
		doc["block"] = sector_document(*report.block);
	return doc;
}

} // namespace

void write_dump_json(std::ostream& out, const DumpReport& report)
{
	const StreamedArray metablocks[] = {{"metablocks", [&](const JsonSink& sink) {
						     report.metablocks([&](const LogMetablockRow& row) { sink(metablock_row_json(row)); });
					     }}};
	write_json_document(out, dump_head(report), report.metablocks ? std::span(metablocks) : std::span<const StreamedArray>());
}

void print_findings(std::ostream& out, const std::vector<Finding>& findings)
{
	for (const Finding& f : findings)
		fmt::print(out, "  {:<7} {:<31} {}: {}\n", severity_name(f.severity), f.name(), f.place_text(), f.message);
}

void print_summary(std::ostream& out, const LogScan& scan, const std::string& cache_path)
{
	const Geometry& g = scan.geometry;
	fmt::print(out, "cache       {} ({} bytes, {})\n", cache_path, g.cache_bytes, human_bytes(g.cache_bytes));
	fmt::print(out, "geometry    {} segments of {} blocks (4 KiB) each\n", g.nr_segments, blocks_per_segment);
	if (!scan.superblock_readable)
		fmt::print(out, "superblock  unreadable\n");
	else
		fmt::print(out, "superblock  magic 0x{:08x} ({}), record {}\n", scan.superblock.magic,
			   scan.superblock.magic_ok ? "ok" : "bad: unformatted", scan.sb_record);
	if (!scan.trust_record)
		fmt::print(out, "trust       no trust record (formatted by upstream or an older dm-wbkit): "
				"dm-wbkit serves no clean copy after a restart\n");
	else if (scan.trusted_from_id == WB_TRUST_NONE)
		fmt::print(out, "trust       no clean copy serves reads after a restart (a write-around "
				"session or an offline repair since)\n");
	else
		fmt::print(out, "trust       clean copies of segments from {} on serve reads after a restart\n",
			   scan.trusted_from_id);
	if (g.nr_segments > 0) {
		fmt::print(out, "log         max id {}, oldest {}, newest {}, {} segment(s) in the log{}\n", scan.max_id,
			   scan.oldest_id(), scan.last_flushed_id, scan.log.size(),
			   scan.verified ? "" : " (checksums not verified)");
		fmt::print(out, "replay      {}\n", stop_text(scan));
		if (scan.discarded_segments)
			fmt::print(out, "            {} good segment(s) after the stop point are discarded\n",
				   scan.discarded_segments);
		fmt::print(out, "ids         last_flushed_id {}, last_writeback_id {}\n", scan.last_flushed_id,
			   scan.last_writeback_id);
		fmt::print(out, "dirty       {} block(s), {} sector(s), {} to write back\n", scan.dirty_blocks,
			   scan.dirty_sectors, human_bytes(scan.writeback_bytes()));
	}
	if (scan.findings.empty()) {
		fmt::print(out, "findings    none\n");
	} else {
		fmt::print(out, "findings    {}\n", scan.findings.size());
		print_findings(out, scan.findings);
	}
}

void print_slot(std::ostream& out, const SlotDetail& d)
{
	fmt::print(out, "slot        {} (cache offset {})\n", d.slot, d.cache_offset);
	if (!d.header_readable) {
		fmt::print(out, "header      unreadable: {}\n", d.error);
		return;
	}
	fmt::print(out, "segment id  {}\n", d.header.id);
	fmt::print(out, "length      {}{}\n", d.header.length, d.header.length_valid() ? "" : " (too large)");
	if (d.computed_checksum && d.ignored_metablocks)
		fmt::print(out,
			   "checksum    stored 0x{:08x}, computed 0x{:08x} with the {} metablock(s) past length read as "
			   "zero: {}, the newest append to it did not complete\n",
			   d.header.checksum, *d.computed_checksum, d.ignored_metablocks, slot_state_name(d.state));
	else if (d.computed_checksum)
		fmt::print(out, "checksum    stored 0x{:08x}, computed 0x{:08x}: {}\n", d.header.checksum,
			   *d.computed_checksum, slot_state_name(d.state));
	else
		fmt::print(out, "checksum    stored 0x{:08x}, not computed: {}\n", d.header.checksum,
			   d.error.empty() ? std::string(slot_state_name(d.state)) : d.error);
	for (unsigned i = 0; i < d.header.usable_length(); ++i) {
		const Metablock& mb = d.header.metablocks[i];
		fmt::print(out, "  [{:3}] sector {:>12}  dirty_bits 0x{:02x}{}\n", i, mb.sector, mb.dirty_bits,
			   mb.padding_nonzero ? "  padding non-zero" : "");
	}
}

void hexdump(std::ostream& out, std::span<const std::byte> data, std::uint64_t base_offset)
{
	for (std::size_t row = 0; row < data.size(); row += 16) {
		std::string hex, text;
		for (std::size_t i = row; i < row + 16 && i < data.size(); ++i) {
			unsigned char c = static_cast<unsigned char>(data[i]);
			hex += fmt::format("{:02x} ", c);
			text += (c >= 0x20 && c < 0x7f) ? char(c) : '.';
		}
		fmt::print(out, "{:08x}  {:<48} {}\n", base_offset + row, hex, text);
	}
}

void print_sector(std::ostream& out, const SectorDetail& d)
{
	if (!d.source) {
		fmt::print(out, "backing sector {}: no copy in the cache's log; the backing device holds it\n",
			   d.backing_sector);
		return;
	}
	fmt::print(out, "backing sector {}: newest copy in segment {}, slot {}, block index {}, {}\n", d.backing_sector,
		   d.segment_id, d.slot, d.source->metablock, d.dirty ? "dirty" : "clean");
	fmt::print(out, "cache offset {}\n", d.cache_offset);
	if (!d.readable)
		fmt::print(out, "{}\n", d.error);
	else
		hexdump(out, d.data, d.cache_offset);
}

void print_dump(std::ostream& out, const DumpReport& report)
{
	print_summary(out, report.scan, report.cache_path);
	if (report.segment) {
		out << '\n';
		print_slot(out, *report.segment);
	}
	if (report.metablocks) {
		out << "\nmetablocks of the log, in replay order (segment, index, backing sector, dirty bits)\n";
		report.metablocks([&](const LogMetablockRow& row) {
			fmt::print(out, "  {:>10} [{:3}] sector {:>12}  dirty_bits 0x{:02x}\n", row.segment_id, row.index,
				   row.metablock.sector, row.metablock.dirty_bits);
		});
	}
	if (report.block) {
		out << '\n';
		print_sector(out, *report.block);
	}
}

} // namespace wbkit
