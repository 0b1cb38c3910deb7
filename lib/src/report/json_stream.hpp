// JSON documents whose size grows with the log (every metablock, every slot,
// every lost range) are written member by member: the small part of the
// document is built as a tree, the long arrays are produced one element at a
// time and written at once, so a cache of many TiB does not need its report
// in memory.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <span>
#include <string>

namespace wbkit {

using JsonSink = std::function<void(const nlohmann::json&)>;

struct StreamedArray {
	std::string key;
	std::function<void(const JsonSink&)> produce; // calls the sink once per element
};

// Writes `head` (an object) with the arrays appended as its last members.
void write_json_document(std::ostream& out, const nlohmann::json& head, std::span<const StreamedArray> arrays);

} // namespace wbkit
