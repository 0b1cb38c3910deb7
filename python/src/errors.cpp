// errors.hpp: the library's exceptions become Python's own, so scripts catch
// OSError and ValueError as they would from any other module.
#include "bindings.hpp"
#include "wbkit/errors.hpp"

namespace wbkit::python {

namespace {

// Leaked on purpose: a static py::object would be destroyed after the
// interpreter is gone, at process exit.
py::exception<Error>* error = nullptr;
py::exception<RefusedError>* refused = nullptr;

} // namespace

void bind_errors(py::module_& m)
{
	error = new py::exception<Error>(m, "Error", PyExc_RuntimeError);
	error->attr("__doc__") = "An operation of the wbkit library failed for a reason other than I/O or a bad argument.";
	refused = new py::exception<RefusedError>(m, "RefusedError", error->ptr());
	refused->attr("__doc__") = "A safety check refused to go on (for example an exclusive open of a device in use).";

	py::register_exception_translator([](std::exception_ptr p) {
		try {
			if (p)
				std::rethrow_exception(p);
		} catch (const IoError& e) {
			// OSError(errno, message, filename) picks the subclass
			// (FileNotFoundError, PermissionError...) from errno itself.
			// Some checks (a directory, a character device) carry no errno.
			// The filename is an attribute of its own, so the message drops
			// the "path: " prefix the C++ message starts with.
			std::string message = e.what();
			const std::string prefix = e.path() + ": ";
			if (message.rfind(prefix, 0) == 0)
				message.erase(0, prefix.size());
			py::object exc;
			if (e.error_number()) {
				exc = py::handle(PyExc_OSError)(e.error_number(), message, e.path());
			} else {
				// Without an errno, OSError(None, ...) would print "[Errno None]".
				exc = py::handle(PyExc_OSError)(message);
				exc.attr("filename") = e.path();
			}
			PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
		} catch (const UsageError& e) {
			PyErr_SetString(PyExc_ValueError, e.what());
		} catch (const RefusedError& e) {
			PyErr_SetString(refused->ptr(), e.what());
		} catch (const Error& e) {
			PyErr_SetString(error->ptr(), e.what());
		}
	});
}

} // namespace wbkit::python
