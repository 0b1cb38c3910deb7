// crc32c.hpp: the checksum of the format, for scripts that check or build
// segments themselves.
#include "bindings.hpp"
#include "wbkit/crc32c.hpp"

namespace wbkit::python {

namespace {

// Any object with the buffer protocol (bytes, bytearray, memoryview, numpy),
// read in place without a copy.
std::span<const std::byte> bytes_of(const py::buffer_info& info)
{
	if (info.ndim > 1) {
		// Only C-contiguous buffers are one run of bytes.
		py::ssize_t expected = info.itemsize;
		for (py::ssize_t d = info.ndim; d-- > 0;) {
			if (info.strides[std::size_t(d)] != expected)
				throw py::value_error("crc32c needs a contiguous buffer");
			expected *= info.shape[std::size_t(d)];
		}
	} else if (info.ndim == 1 && info.strides[0] != info.itemsize && info.shape[0] > 1) {
		throw py::value_error("crc32c needs a contiguous buffer");
	}
	return {static_cast<const std::byte*>(info.ptr), std::size_t(info.size * info.itemsize)};
}

} // namespace

void bind_crc32c(py::module_& m)
{
	m.def(
		"crc32c",
		[](const py::buffer& data) {
			py::buffer_info info = data.request();
			auto bytes = bytes_of(info);
			py::gil_scoped_release unlocked;
			return crc32c(bytes);
		},
		py::arg("data"),
		"CRC-32C (Castagnoli, CRC-32/ISCSI) of a bytes-like object, as an int.\n\n"
		">>> hex(wbkit.crc32c(b'123456789'))\n'0xe3069283'");

	py::class_<Crc32c>(m, "Crc32c", "Incremental CRC-32C: update() with pieces, then finish().")
		.def(py::init<>(), "An empty checksum: finish() now gives the CRC-32C of no bytes.")
		.def(
			"update",
			[](Crc32c& self, const py::buffer& data) {
				py::buffer_info info = data.request();
				self.update(bytes_of(info));
			},
			py::arg("data"), "Add the bytes of a bytes-like object.")
		.def("finish", &Crc32c::finish,
		     "The CRC-32C of everything added so far; the state starts again from empty.")
		.def("__repr__", [](const Crc32c&) { return std::string("<wbkit.Crc32c>"); });
}

} // namespace wbkit::python
