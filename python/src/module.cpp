// The extension module _wbkit: one bind_* call per area of the library, and
// the conversions the areas share. The package wbkit re-exports it.
#include <cctype>

#include "bindings.hpp"
#include "wbkit/version.hpp"

namespace wbkit::python {

std::uint64_t to_u64(const py::int_& value, const char* what)
{
	int overflow = 0;
	long long signed_value = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
	if (overflow == 0 && signed_value == -1 && PyErr_Occurred())
		throw py::error_already_set();
	if (overflow < 0 || (overflow == 0 && signed_value < 0))
		throw py::value_error(std::string(what) + " must not be negative");
	unsigned long long result = PyLong_AsUnsignedLongLong(value.ptr());
	if (result == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
		PyErr_Clear();
		throw py::value_error(std::string(what) + " does not fit in 64 bits");
	}
	return result;
}

std::string enum_member_name(std::string_view stable_name)
{
	std::string out(stable_name);
	for (char& c : out)
		c = c == '-' ? '_' : char(std::toupper(static_cast<unsigned char>(c)));
	return out;
}

py::object json_to_python(const std::string& text)
{
	return py::module_::import("json").attr("loads")(text);
}

} // namespace wbkit::python

PYBIND11_MODULE(_wbkit, m)
{
	using namespace wbkit::python;
	m.doc() = "Bindings of the wbkit C++ library: read and check a writeboost cache device. "
		  "Use the package wbkit, which re-exports everything here.";
	m.attr("__version__") = wbkit::version();
	m.attr("build_version") = wbkit::build_version();
	// Order matters: later areas use the exception types and enums of earlier ones.
	bind_errors(m);
	bind_crc32c(m);
	bind_format(m);
	bind_findings(m);
	bind_log_scan(m);
	bind_cache(m);
	bind_replay(m);
	py::module_ testing = m.def_submodule("testing", "Writes cache images the way the target does, for tests and fixtures.");
	bind_log_writer(testing);
}
