// wbrecover's report: JSON and text.
#include "wbkit/report.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "report/json_stream.hpp"
#include "report/report_json.hpp"

namespace wbkit {

using report_detail::finding_json;
using report_detail::optional_json;

namespace {

nlohmann::json ranges_json(const SectorRanges& ranges)
{
	nlohmann::json list = nlohmann::json::array();
	for (const auto& [first, count] : ranges.list())
		list.push_back({{"sector", first}, {"sectors", count}});
	return list;
}

nlohmann::json diagnosis_json(const DeviceDiagnosis& d)
{
	return {{"path", d.path},
		{"size_bytes", d.size_bytes},
		{"readable", d.unreadable.empty()},
		{"unreadable_sectors", d.unreadable.total_sectors()},
		{"unreadable", ranges_json(d.unreadable)}};
}

} // namespace

namespace {

nlohmann::json segment_use_json(const SegmentUse& v)
{
	return {{"slot", v.slot},
		{"id", v.id},
		{"state", std::string(slot_state_name(v.state))},
		{"in_kernel_log", v.in_kernel_log},
		{"used", v.used},
		{"reason", std::string(segment_reason_name(v.reason))},
		{"metablocks", v.metablocks},
		{"metablocks_used", v.metablocks_used},
		{"unreadable_dirty_sectors", v.unreadable_dirty_sectors},
		{"left_behind_sectors", v.left_behind_sectors}};
}

nlohmann::json lost_json(const LostRange& l)
{
	// A range near the top of the address space can hold 2^64 bytes or more:
	// its byte count is then a double, never a wrapped integer.
	const bool fits = l.sectors <= ~std::uint64_t(0) / sector_size;
	return {{"sector", l.sector},
		{"sectors", l.sectors},
		{"bytes", fits ? nlohmann::json(l.sectors * sector_size) : nlohmann::json(double(l.sectors) * sector_size)},
		{"reason", std::string(loss_reason_name(l.reason))}};
}

// Everything but the per-slot and lost-range lists, which grow with the cache.
nlohmann::json recovery_head(const RecoveryReport& r)
{
	nlohmann::json findings = nlohmann::json::array();
	for (const Finding& f : r.findings)
		findings.push_back(finding_json(f));
	return {
		{"schema", report_detail::schema_wbrecover},
		{"dry_run", r.dry_run},
		{"policy", r.salvage ? "salvage" : "kernel"},
		{"forced", r.overridden},
		{"single_point_in_time", r.single_point_in_time},
		{"devices",
		 {{"cache", diagnosis_json(r.cache)},
		  {"backing", diagnosis_json(r.backing)},
		  {"output", optional_json(r.output)}}},
		{"geometry", r.kernel_log ? report_detail::geometry_json(*r.kernel_log) : nlohmann::json(nullptr)},
		{"log", r.kernel_log ? report_detail::log_json(*r.kernel_log) : nlohmann::json(nullptr)},
		{"diagnosis",
		 {{"unreadable_header_slots", r.unreadable_header_slots},
		  {"checksum_failed_slots", r.checksum_failed_slots},
		  {"findings", findings}}},
		{"recovered",
		 {{"extents", r.extents},
		  {"sectors_from_cache", r.sectors_from_cache},
		  {"sectors_rescued_from_clean_copies", r.sectors_rescued_clean},
		  {"bytes_written", r.bytes_written}}},
		{"lost_sectors", r.lost_sectors()},
		{"record_hidden_segments", r.record_hidden_segments},
		{"torn_rewrite", r.torn_rewrite ? nlohmann::json{{"slot", r.torn_rewrite->slot},
								 {"segment_id", r.torn_rewrite->segment_id},
								 {"upstream_dropped_segments",
								  r.torn_rewrite->upstream_dropped_segments},
								 {"upstream_lost_sectors", r.torn_rewrite->upstream_lost_sectors}}
						: nlohmann::json(nullptr)},
		{"notes", r.notes},
		{"nothing_lost", r.nothing_lost()},
	};
}

} // namespace

std::string recovery_json(const RecoveryReport& r, int indent)
{
	nlohmann::json doc = recovery_head(r);
	nlohmann::json& segments = doc["segments"] = nlohmann::json::array();
	for (const SegmentUse& v : r.segments)
		segments.push_back(segment_use_json(v));
	nlohmann::json& lost = doc["lost"] = nlohmann::json::array();
	for (const LostRange& l : r.lost)
		lost.push_back(lost_json(l));
	return doc.dump(indent);
}

void write_recovery_json(std::ostream& out, const RecoveryReport& r)
{
	const StreamedArray arrays[] = {{"segments",
					 [&](const JsonSink& sink) {
						 for (const SegmentUse& v : r.segments)
							 sink(segment_use_json(v));
					 }},
					{"lost", [&](const JsonSink& sink) {
						 for (const LostRange& l : r.lost)
							 sink(lost_json(l));
					 }}};
	write_json_document(out, recovery_head(r), arrays);
}

void print_recovery(std::ostream& out, const RecoveryReport& r)
{
	auto device_line = [&](std::string_view name, const DeviceDiagnosis& d) {
		if (d.unreadable.empty())
			fmt::print(out, "{:<8} {} ({}): readable\n", name, d.path, human_bytes(d.size_bytes));
		else
			fmt::print(out, "{:<8} {} ({}): {} unreadable sector(s) in {} range(s)\n", name, d.path,
				   human_bytes(d.size_bytes), d.unreadable.total_sectors(), d.unreadable.list().size());
	};
	if (r.dry_run)
		out << "dry run: nothing was written; below is what a real run writes and loses\n\n";
	out << "diagnosis\n";
	device_line("cache", r.cache);
	device_line("backing", r.backing);
	if (!r.unreadable_header_slots.empty())
		fmt::print(out, "  unreadable segment headers in slot(s): {}\n", fmt::join(r.unreadable_header_slots, ", "));
	if (!r.checksum_failed_slots.empty())
		fmt::print(out, "  segments failing their checksum in slot(s): {}\n", fmt::join(r.checksum_failed_slots, ", "));
	fmt::print(out, "  log: max id {}, kernel replay applies up to segment {} (stop: {}{})\n", r.max_id,
		   r.last_flushed_id, stop_reason_name(r.stop_reason),
		   r.stop_slot ? fmt::format(" at slot {}", *r.stop_slot) : std::string());

	fmt::print(out, "\npolicy: {}\n", r.salvage ? "salvage (beyond the kernel's consistent prefix)" : "kernel (consistent prefix of the log)");
	if (!r.single_point_in_time)
		out << "  note: the result is NOT a single point in time: it combines segments past a gap or damage\n";
	for (const SegmentUse& v : r.segments)
		if (v.reason != SegmentReason::used && v.reason != SegmentReason::already_written_back)
			fmt::print(out, "  slot {} segment {}: {} ({} of {} metablocks used)\n", v.slot, v.id,
				   segment_reason_name(v.reason),
				   v.metablocks_used, v.metablocks);
	if (r.output && r.dry_run)
		fmt::print(out, "\nwould be written to {} (the backing device is not modified)\n", *r.output);
	else if (r.output)
		fmt::print(out, "\nwritten to {} (the backing device was not modified)\n", *r.output);
	fmt::print(out, "\n{}: {} sector(s) from the cache in {} write(s), {} unreadable backing sector(s) "
			"restored from clean cache copies\n",
		   r.dry_run ? "would recover" : "recovered", r.sectors_from_cache, r.extents, r.sectors_rescued_clean);
	for (const std::string& note : r.notes)
		fmt::print(out, "  {}\n", note);
	const std::string_view lost = r.dry_run ? "would lose" : "lost";
	if (r.lost.empty()) {
		fmt::print(out, "{}: nothing\n", lost);
	} else {
		fmt::print(out, "{}: {} sector(s) in {} range(s) (backing sectors, 512 bytes each):\n", lost, r.lost_sectors(),
			   r.lost.size());
		for (const LostRange& l : r.lost)
			fmt::print(out, "  sectors {}..{} ({} sector(s)): {}\n", l.sector, l.sector + l.sectors - 1, l.sectors,
				   loss_reason_name(l.reason));
	}
}

} // namespace wbkit
