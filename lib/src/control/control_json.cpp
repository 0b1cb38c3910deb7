// control.hpp: the JSON documents of wbctl --json.
#include "wbkit/control.hpp"

#include <nlohmann/json.hpp>

namespace wbkit {

// ---------------------------------------------------------------------------
// JSON

namespace {

using ojson = nlohmann::ordered_json;

ojson flush_json(const FlushResult& r)
{
	const char* end = r.end == FlushResult::End::done          ? "done"
			  : r.end == FlushResult::End::interrupted ? "interrupted"
								   : "timed_out";
	return ojson{{"end", end},
		     {"start_dirty_blocks", r.start_dirty},
		     {"dirty_blocks_left", r.dirty_left},
		     {"milliseconds", r.took.count()}};
}

} // namespace

std::string switch_result_json(std::string_view command, std::string_view name, const SwitchResult& result,
			       const std::optional<CacheCheck>& cache)
{
	ojson doc{{"schema", "wbctl/1"}, {"command", command}, {"device", name}};
	doc["old_table"] = result.old_table;
	doc["new_table"] = result.new_table;
	doc["stall_ms"] = result.stall.count();
	ojson stalls = ojson::array();
	for (auto s : result.stalls)
		stalls.push_back(s.count());
	doc["suspends_ms"] = stalls;
	doc["parts_ms"] = ojson{{"suspend", result.suspend_took.count()},
				{"writeback", result.writeback_took.count()},
				{"load_and_resume", result.resume_took.count()}};

	if (result.mode) {
		doc["mode"] = *result.mode;
		doc["changed"] = result.changed;
	}
	if (result.drained || command == "detach" || command == "replace-cache" || command == "mode")
		doc["flush"] = flush_json(result.flushed);
	if (command == "detach" || command == "replace-cache") {
		doc["cache_wiped"] = result.cache_wiped; // false with --keep-cache
		if (result.wipe_error)
			doc["wipe_error"] = *result.wipe_error;
	}
	if (cache) {
		doc["cache"] = ojson{{"devno", cache->devno},
				     {"bytes", cache->bytes},
				     {"held", cache->content.what},
				     {"forced", cache->overridden.has_value()}};
	}
	return doc.dump(2);
}

std::string create_result_json(std::string_view name, const CreateResult& result, const CreateCheck& check,
			       const std::optional<std::string>& tab_path)
{
	ojson doc{{"schema", "wbctl/1"}, {"command", "create"}, {"device", name}};
	doc["new_table"] = result.table;
	doc["create_ms"] = result.took.count();
	doc["backing"] = ojson{{"devno", check.backing_devno}, {"sectors", check.backing_sectors}};
	if (check.cache) {
		const char* kind = check.cache->overridden                                       ? "zeroed"
				   : check.cache->content.kind == CacheContent::Kind::writeboost ? "replayed"
												 : "formatted";
		doc["cache"] = ojson{{"devno", check.cache->devno},
				     {"bytes", check.cache->bytes},
				     {"held", check.cache->content.what},
				     {"forced", check.cache->overridden.has_value()},
				     {"start", kind}};
		doc["log_dirty_blocks"] = check.replay_dirty_blocks ? ojson(*check.replay_dirty_blocks) : ojson(nullptr);
		doc["dirty_blocks"] = result.dirty_blocks ? ojson(*result.dirty_blocks) : ojson(nullptr);
	}
	doc["writeboosttab"] = tab_path ? ojson(*tab_path) : ojson(nullptr);
	return doc.dump(2);
}

std::string flush_result_json(std::string_view name, const FlushResult& result)
{
	ojson doc{{"schema", "wbctl/1"}, {"command", "flush"}, {"device", name}};
	doc["flush"] = flush_json(result);
	return doc.dump(2);
}

} // namespace wbkit
