// wbreplay's report: JSON and text.
#include "wbkit/report.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "report/json_stream.hpp"
#include "report/report_json.hpp"

namespace wbkit {

using report_detail::optional_json;

namespace {

nlohmann::json segment_use_json(const SegmentUse& use)
{
	return {{"slot", use.slot},
		{"id", use.id},
		{"state", std::string(slot_state_name(use.state))},
		{"used", use.used},
		{"reason", std::string(segment_reason_name(use.reason))},
		{"sectors_replayed", use.sectors_replayed}};
}

// Everything but the per-slot list, which grows with the cache.
nlohmann::json replay_report_head(const ReplayRunResult& run)
{
	const ReplayPlan& plan = *run.plan;
	const LogScan& scan = plan.scan();
	const ReplaySummary& s = plan.summary();
	nlohmann::json doc = {
		{"schema", report_detail::schema_wbreplay},
		{"cache", run.cache_path},
		{"backing", run.backing_path},
		{"dry_run", run.dry_run},
		{"geometry", report_detail::geometry_json(scan)},
		{"log", report_detail::log_json(scan)},
		{"plan",
		 {{"segments_in_log", s.segments_in_log},
		  {"segments_written_back", s.segments_written_back},
		  {"segments_contributing", s.segments_contributing},
		  {"dirty_blocks", s.dirty_blocks},
		  {"dirty_sectors", s.dirty_sectors},
		  {"bytes", s.bytes},
		  {"extents", s.extents},
		  {"skipped_sectors", s.skipped_sectors},
		  {"max_extent_bytes", plan.options().max_extent_bytes}}},
		{"not_replayed", run.shortfalls},
		{"forced", run.overridden},
		{"scan_seconds", run.scan_seconds},
		{"marked_clean", run.marked_clean},
		{"headers_zeroed", run.headers_zeroed},
		{"mark_clean_refused", run.mark_clean_refused.empty() ? nlohmann::json(nullptr) : nlohmann::json(run.mark_clean_refused)},
	};
	if (run.result)
		doc["written"] = {{"bytes", run.result->bytes_written},
				  {"extents", run.result->extents_written},
				  {"write_requests", run.result->write_requests},
				  {"read_requests", run.result->read_requests},
				  {"seconds", run.result->seconds},
				  {"backing_flushed", true}};
	else
		doc["written"] = nullptr;
	return doc;
}

} // namespace

std::string replay_report_json(const ReplayRunResult& run, int indent)
{
	nlohmann::json doc = replay_report_head(run);
	nlohmann::json& segments = doc["segments"] = nlohmann::json::array();
	for (const SegmentUse& use : segment_uses(*run.plan))
		segments.push_back(segment_use_json(use));
	return doc.dump(indent);
}

void write_replay_report_json(std::ostream& out, const ReplayRunResult& run)
{
	const StreamedArray arrays[] = {{"segments", [&](const JsonSink& sink) {
						 for (const SegmentUse& use : segment_uses(*run.plan))
							 sink(segment_use_json(use));
					 }}};
	write_json_document(out, replay_report_head(run), arrays);
}

void print_replay_report(std::ostream& out, const ReplayRunResult& run)
{
	const ReplayPlan& plan = *run.plan;
	const LogScan& scan = plan.scan();
	const ReplaySummary& s = plan.summary();
	fmt::print(out, "cache    {} ({})\n", run.cache_path, human_bytes(scan.geometry.cache_bytes));
	fmt::print(out, "backing  {}\n", run.backing_path);
	if (scan.log.empty())
		fmt::print(out, "log      empty: nothing to replay\n");
	else
		fmt::print(out, "log      segments {}..{} ({} in the log), last_flushed_id {}, last_writeback_id {}, stop: {}\n",
			   scan.oldest_id(), scan.last_flushed_id, scan.log.size(), scan.last_flushed_id,
			   scan.last_writeback_id, stop_reason_name(scan.stop_reason));
	for (const SegmentUse& use : segment_uses(plan))
		if (!use.used)
			fmt::print(out, "unused   segment {} (slot {}): {}\n", use.id, use.slot, segment_reason_name(use.reason));
	fmt::print(out, "plan     {} dirty block(s), {} dirty sector(s), {} in {} write extent(s) from {} segment(s)\n",
		   s.dirty_blocks, s.dirty_sectors, human_bytes(s.bytes), s.extents, s.segments_contributing);
	for (const std::string& o : run.overridden)
		fmt::print(out, "forced   {}\n", o);
	if (run.dry_run)
		out << "dry run: nothing was written\n";
	else if (run.result)
		fmt::print(out, "wrote    {} in {} write request(s); the backing device is flushed\n",
			   human_bytes(run.result->bytes_written), run.result->write_requests);
	for (const std::string& why : run.shortfalls)
		fmt::print(out, "NOT REPLAYED: {}\n", why);
	if (run.marked_clean)
		fmt::print(out, "marked clean: superblock record = {} (the target will not replay this log again)\n",
			   scan.last_flushed_id);
	if (run.headers_zeroed)
		fmt::print(out,
			   "zeroed   the headers of {} slot(s) from the stop point on, as the target does: "
			   "they are no longer part of the log\n",
			   run.headers_zeroed);
	if (!run.mark_clean_refused.empty())
		fmt::print(out, "not marked clean: {}\n", run.mark_clean_refused);
}

} // namespace wbkit
