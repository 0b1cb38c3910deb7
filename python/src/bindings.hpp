// Shared by the binding files: one bind_* function per area of the library,
// and the few conversions every area needs. Nothing here interprets a cache.
#pragma once

#include <pybind11/pybind11.h>

#include "wbkit/findings.hpp"
#include "wbkit/log_scan.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wbkit::python {

namespace py = pybind11;

void bind_errors(py::module_& m);
void bind_crc32c(py::module_& m);
void bind_format(py::module_& m);
void bind_findings(py::module_& m);
void bind_log_scan(py::module_& m);
void bind_cache(py::module_& m);
void bind_replay(py::module_& m);
void bind_log_writer(py::module_& m);

// pybind11's own enums are not enum.Enum; scripts expect the standard type
// (isinstance, iteration, pattern matching), so the binding builds real
// enum classes and converts by member. One registry per C++ enum.
template <typename E>
struct NativeEnum {
	static inline PyObject* cls = nullptr;
	static inline std::vector<PyObject*> members; // indexed by the C++ value

	// members: (Python member name, member value), in C++ enumerator order.
	static void define(py::module_& m, const char* name, const char* base, const char* doc,
			   const std::vector<std::pair<std::string, py::object>>& items)
	{
		py::module_ enum_module = py::module_::import("enum");
		py::list pairs;
		for (const auto& [member, value] : items)
			pairs.append(py::make_tuple(member, value));
		py::object type = enum_module.attr(base)(name, pairs, py::arg("module") = m.attr("__name__"));
		type.attr("__doc__") = doc;
		for (const auto& [member, value] : items)
			members.push_back(py::object(type.attr(member.c_str())).release().ptr()); // lives as long as the process
		cls = type.release().ptr();
		m.attr(name) = py::handle(cls);
	}
};

// A scan result as Python sees it: shared, so that views of its vectors and
// the Cache that made it keep it alive without copying millions of entries.
struct ScanRef {
	std::shared_ptr<const LogScan> scan;
	std::string cache_path;
};

// The superblock as Cache.superblock and LogScan.superblock report it.
struct SuperblockInfo {
	bool readable = false;
	SuperblockHeader header;
	std::uint64_t record = 0;
};

// A ReplayPlan object over a scan; cache.cpp's Cache.replay_plan() makes it.
py::object make_plan(std::shared_ptr<const LogScan> scan, std::optional<std::uint64_t> backing_sectors,
		     std::uint64_t max_extent_bytes, std::string cache_path, std::string backing_path);

// Python ints are unbounded and signed; the library's offsets and ids are
// uint64_t. A negative or oversized argument is a ValueError, as for any
// other bad argument, not the TypeError pybind11 would raise.
std::uint64_t to_u64(const py::int_& value, const char* what);

// "checksum-mismatch" -> "CHECKSUM_MISMATCH": Python's spelling of an enum
// member made from the library's stable name.
std::string enum_member_name(std::string_view stable_name);

// JSON documents from inspect.hpp as Python objects (dicts, lists, ints).
py::object json_to_python(const std::string& text);

// Python's spelling of a bool, for reprs.
inline const char* py_bool(bool b) { return b ? "True" : "False"; }

// The repr of an optional value: None or the number.
template <typename T>
std::string opt_repr(const std::optional<T>& value)
{
	return value ? std::to_string(*value) : std::string("None");
}

template <typename T>
py::object opt_object(const std::optional<T>& value)
{
	return value ? py::object(py::cast(*value)) : py::object(py::none());
}

} // namespace wbkit::python

namespace pybind11::detail {

template <typename E>
struct native_enum_caster {
	PYBIND11_TYPE_CASTER(E, const_name("enum"));

	bool load(handle src, bool)
	{
		auto& members = wbkit::python::NativeEnum<E>::members;
		for (std::size_t i = 0; i < members.size(); ++i)
			if (src.ptr() == members[i]) {
				value = E(i);
				return true;
			}
		return false;
	}

	static handle cast(E value, return_value_policy, handle)
	{
		auto& members = wbkit::python::NativeEnum<E>::members;
		std::size_t i = std::size_t(value);
		if (i >= members.size())
			throw value_error("enum value out of range");
		return handle(members[i]).inc_ref();
	}
};

} // namespace pybind11::detail

// clang-format 14 would split the empty struct body over two lines.
// clang-format off
#define WBKIT_NATIVE_ENUM(E)                                                                                          \
	namespace pybind11::detail {                                                                                  \
	template <>                                                                                                   \
	struct type_caster<E> : native_enum_caster<E> {};                                                            \
	}
// clang-format on

WBKIT_NATIVE_ENUM(wbkit::Severity)
WBKIT_NATIVE_ENUM(wbkit::FindingCode)
WBKIT_NATIVE_ENUM(wbkit::SlotState)
WBKIT_NATIVE_ENUM(wbkit::StopReason)
