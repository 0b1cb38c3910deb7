// findings.hpp: damage as data. Codes and severities are standard Python
// enums built from the library's one table, so a new code needs no binding change.
#include <fmt/format.h>

#include "bindings.hpp"

namespace wbkit::python {

namespace {

std::string place_repr(const Place& p)
{
	std::string out;
	auto add = [&](const char* key, const auto& value) {
		if (value) {
			if (!out.empty())
				out += ", ";
			out += fmt::format("{}={}", key, *value);
		}
	};
	add("slot", p.slot);
	add("segment_id", p.segment_id);
	add("metablock", p.metablock);
	add("backing_sector", p.backing_sector);
	add("cache_offset", p.cache_offset);
	return "Place(" + out + ")";
}

} // namespace

void bind_findings(py::module_& m)
{
	std::vector<std::pair<std::string, py::object>> severities;
	for (Severity s : {Severity::info, Severity::warning, Severity::error})
		severities.emplace_back(enum_member_name(severity_name(s)), py::int_(int(s)));
	NativeEnum<Severity>::define(m, "Severity", "IntEnum",
				     "How bad a finding is, ordered: INFO < WARNING < ERROR. WARNING and ERROR are damage.",
				     severities);

	// The table is the one list of codes; place each member at its C++ value.
	auto table = all_findings();
	std::vector<std::pair<std::string, py::object>> codes(table.size());
	for (const FindingInfo& info : table)
		codes.at(std::size_t(info.code)) = {enum_member_name(info.name), py::str(std::string(info.name))};
	NativeEnum<FindingCode>::define(m, "FindingCode", "Enum",
					"The kind of a finding. A member's value is the stable kebab-case name that "
					"wbdump --json prints and scripts match on.",
					codes);

	py::class_<FindingInfo>(m, "FindingInfo", "One row of the table of finding codes.")
		.def_readonly("code", &FindingInfo::code, "A FindingCode.")
		.def_property_readonly(
			"name", [](const FindingInfo& i) { return std::string(i.name); },
			"The code's stable kebab-case name, as wbdump --json prints it.")
		.def_readonly("severity", &FindingInfo::severity, "The Severity every finding of this code has.")
		.def_property_readonly(
			"summary", [](const FindingInfo& i) { return std::string(i.summary); },
			"What the code means, in one sentence.")
		.def("__repr__", [](const FindingInfo& i) {
			return fmt::format("FindingInfo(name='{}', severity={}, summary='{}')", i.name, severity_name(i.severity),
					   i.summary);
		});
	m.def(
		"all_findings",
		[] {
			py::list out;
			for (const FindingInfo& info : all_findings())
				out.append(info);
			return out;
		},
		"Every finding code the library can report, with its severity and a summary.");
	m.def(
		"finding_info", [](FindingCode code) { return finding_info(code); }, py::arg("code"),
		"The table row of one finding code.");

	py::class_<Place>(m, "Place", "Where a finding lies. Members that do not apply are None.")
		.def_property_readonly(
			"slot", [](const Place& p) { return opt_object(p.slot); }, "Slot on the cache device (0-based), or None.")
		.def_property_readonly(
			"segment_id", [](const Place& p) { return opt_object(p.segment_id); }, "Segment id, or None.")
		.def_property_readonly(
			"metablock", [](const Place& p) { return opt_object(p.metablock); },
			"Index of the metablock within its segment (0..126), or None.")
		.def_property_readonly(
			"backing_sector", [](const Place& p) { return opt_object(p.backing_sector); },
			"Sector (512 bytes) on the backing device, or None.")
		.def_property_readonly(
			"cache_offset", [](const Place& p) { return opt_object(p.cache_offset); },
			"Byte offset on the cache device, or None.")
		.def("__repr__", &place_repr);

	py::class_<Finding>(m, "Finding", "Damage or an oddity found on the cache: code, severity, place, message.")
		.def_readonly("code", &Finding::code, "A FindingCode.")
		.def_readonly("severity", &Finding::severity, "A Severity.")
		.def_readonly("place", &Finding::place, "A Place.")
		.def_readonly("message", &Finding::message, "What was found, for people.")
		.def_property_readonly(
			"name", [](const Finding& f) { return std::string(f.name()); },
			"The code's stable kebab-case name.")
		.def_property_readonly("place_text", &Finding::place_text, "The place for people: 'slot 3, segment 12'.")
		.def("__str__", [](const Finding& f) {
			return fmt::format("{} {} {}: {}", severity_name(f.severity), f.name(), f.place_text(), f.message);
		})
		.def("__repr__", [](const Finding& f) {
			return fmt::format("Finding(code=FindingCode.{}, severity=Severity.{}, place={}, message={})",
					   enum_member_name(f.name()), enum_member_name(severity_name(f.severity)), place_repr(f.place),
					   py::repr(py::str(f.message)).cast<std::string>());
		});
}

} // namespace wbkit::python
