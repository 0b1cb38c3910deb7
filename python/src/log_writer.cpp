// log_writer.hpp: writes cache images the way the target does. In the
// submodule wbkit.testing: it exists for tests and fixtures, not for
// repairing anything.
#include <filesystem>
#include <fmt/format.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "bindings.hpp"
#include "wbkit/log_writer.hpp"

namespace wbkit::python {

namespace {

// Owns the devices the library's LogWriter refers to, so they outlive it.
struct Writer {
	std::unique_ptr<Device> cache;
	std::unique_ptr<Device> backing;
	std::unique_ptr<LogWriter> writer;

	LogWriter& get()
	{
		if (!writer)
			throw py::value_error("the log writer is closed");
		return *writer;
	}
	void close()
	{
		writer.reset();
		backing.reset();
		cache.reset();
	}
};

std::span<const std::byte> contiguous_bytes(const py::buffer& data, py::buffer_info& info)
{
	info = data.request();
	if (info.ndim != 1 || info.itemsize != 1 || info.strides[0] != 1)
		throw py::value_error("data must be a contiguous bytes-like object");
	return {static_cast<const std::byte*>(info.ptr), std::size_t(info.size)};
}

} // namespace

void bind_log_writer(py::module_& m)
{
	py::class_<Writer>(m, "LogWriter",
			   "Writes a cache image as the target would: formats it, gathers writes into segments, "
			   "flushes them with their checksums. The image file must exist with its final size. "
			   "A context manager. For tests and fixtures.\n\n"
			   "LogWriter(cache, backing=None, format=True, merge_partial_overwrites=True)")
		.def(py::init([](const std::filesystem::path& cache, const std::optional<std::filesystem::path>& backing,
				 bool format, bool merge_partial_overwrites) {
			     auto w = std::make_unique<Writer>();
			     w->cache = open_device(cache.string(), {.writable = true});
			     if (backing)
				     w->backing = open_device(backing->string(), {.writable = true});
			     w->writer = std::make_unique<LogWriter>(
				     *w->cache, LogWriterOptions{.format = format,
								 .merge_partial_overwrites = merge_partial_overwrites,
								 .backing = w->backing.get()});
			     return w;
		     }),
		     py::arg("cache"), py::arg("backing") = py::none(), py::arg("format") = true,
		     py::arg("merge_partial_overwrites") = true,
		     "Open the cache image (and the backing image) for writing. format: zero the superblock "
		     "region and every slot header, then write the magic. merge_partial_overwrites: a partial "
		     "write over an older dirty copy takes that copy's other dirty sectors into the new block, "
		     "as the target does; off, the older entry still decides them. backing: where segments are "
		     "written back (write_back_through(), and before a slot is reused); without one, wrapping "
		     "over a segment that still holds dirty data is an error.")
		.def(
			"write",
			[](Writer& w, const py::int_& sector, const py::buffer& data) {
				py::buffer_info info;
				w.get().write(to_u64(sector, "sector"), contiguous_bytes(data, info));
			},
			py::arg("sector"), py::arg("data"), "A write of whole sectors at a backing sector.")
		.def(
			"write_clean",
			[](Writer& w, const py::int_& sector, const py::buffer& data) {
				py::buffer_info info;
				w.get().write_clean(to_u64(sector, "sector"), contiguous_bytes(data, info));
			},
			py::arg("block_sector"), py::arg("block"), "A clean entry for one aligned 4 KiB block.")
		.def(
			"flush", [](Writer& w) { w.get().flush(); }, "Seal the open segment, if it holds anything.")
		.def(
			"write_back_through", [](Writer& w, const py::int_& id) { w.get().write_back_through(to_u64(id, "id")); },
			py::arg("id"), "Write back every sealed segment up to and including id.")
		.def(
			"corrupt_segment_data", [](Writer& w, const py::int_& id) { w.get().corrupt_segment_data(to_u64(id, "id")); },
			py::arg("id"), "Flip one byte of a written segment so its checksum fails.")
		.def(
			"tear_segment", [](Writer& w, const py::int_& id) { w.get().tear_segment(to_u64(id, "id")); }, py::arg("id"),
			"Overwrite the later half of a written segment with stale bytes, as a torn write leaves it.")
		.def(
			"cut_append",
			[](Writer& w, const py::int_& id, unsigned committed) {
				w.get().cut_append(to_u64(id, "id"), committed);
			},
			py::arg("id"), py::arg("committed"),
			"An append in place cut between its two writes: the header's first sector goes back to length "
			"`committed` and that prefix's checksum, while the metablock area still names the blocks past it.")
		.def(
			"set_superblock_record",
			[](Writer& w, const py::int_& id) { w.get().set_superblock_record(to_u64(id, "id")); }, py::arg("id"),
			"Write the superblock record (last_writeback_segment_id).")
		.def_property_readonly(
			"geometry", [](Writer& w) { return w.get().geometry(); }, "The Geometry of the cache image.")
		.def_property_readonly(
			"open_id", [](Writer& w) { return w.get().open_id(); }, "Id of the segment being gathered.")
		.def_property_readonly(
			"last_flushed_id", [](Writer& w) { return w.get().last_flushed_id(); },
			"Id of the newest sealed segment, 0 if none.")
		.def_property_readonly(
			"last_writeback_id", [](Writer& w) { return w.get().last_writeback_id(); },
			"Id of the newest segment written back by write_back_through(), 0 if none.")
		.def("close", &Writer::close, "Close the devices; the open segment is not flushed.")
		.def("__enter__", [](Writer& w) -> Writer& { return w; })
		.def("__exit__",
		     [](Writer& w, py::handle, py::handle, py::handle) {
			     w.close();
			     return false;
		     })
		.def("__repr__", [](const Writer& w) {
			if (!w.writer)
				return std::string("<wbkit.testing.LogWriter (closed)>");
			return fmt::format("<wbkit.testing.LogWriter {}: open segment {}>", w.cache->path(), w.writer->open_id());
		});
}

} // namespace wbkit::python
