// Cache.block(): where the newest copy of one backing sector lives.
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <limits>

#include "cache.hpp"
#include "wbkit/report.hpp"

namespace wbkit::python {

namespace {

py::object bytes_or_none(const std::optional<std::string>& data)
{
	return data ? py::object(py::bytes(*data)) : py::object(py::none());
}

} // namespace

Block read_block(CacheState& st, std::uint64_t s)
{
	auto scan = latest_scan(st);
	auto device = st.device();
	Block b;
	py::gil_scoped_release unlocked;
	b.detail = inspect_sector(*device, *scan, s);
	if (b.detail.source) {
		b.source = *b.detail.source;
		if (b.detail.readable)
			b.data = std::string(reinterpret_cast<const char*>(b.detail.data.data()), b.detail.data.size());
	} else if (st.backing) {
		b.from_backing = true;
		AlignedBuffer buf(sector_size);
		int err = s > std::numeric_limits<std::uint64_t>::max() / sector_size
				  ? EINVAL
				  : st.backing->read_at(s * sector_size, buf.span());
		if (err)
			b.backing_error = fmt::format("reading the backing device failed: {}", std::strerror(err));
		else
			b.data = std::string(reinterpret_cast<const char*>(buf.data()), sector_size);
	}
	b.detail.source.reset();
	b.detail.data.clear();
	return b;
}

void bind_block_views(py::module_& m)
{
	py::class_<Block>(m, "Block",
			  "Where the newest copy of one backing sector lives, and its 512 bytes. What wbdump --block shows.")
		.def_property_readonly(
			"backing_sector", [](const Block& b) { return b.detail.backing_sector; },
			"The backing sector asked about.")
		.def_property_readonly(
			"in_cache", [](const Block& b) { return b.source.has_value(); },
			"The log holds the newest copy; else the backing device holds the sector.")
		.def_property_readonly(
			"segment_id",
			[](const Block& b) { return b.source ? py::object(py::int_(b.detail.segment_id)) : py::object(py::none()); },
			"Id of the segment holding the newest copy, or None.")
		.def_property_readonly(
			"slot", [](const Block& b) { return b.source ? py::object(py::int_(b.detail.slot)) : py::object(py::none()); },
			"Slot of the segment holding the newest copy, or None.")
		.def_property_readonly(
			"block_index",
			[](const Block& b) { return b.source ? py::object(py::int_(b.source->metablock)) : py::object(py::none()); },
			"Index of the data block within its segment, or None.")
		.def_property_readonly(
			"block_sector",
			[](const Block& b) { return b.source ? py::object(py::int_(b.source->block_sector)) : py::object(py::none()); },
			"Backing sector of the 4 KiB block holding the copy, or None.")
		.def_property_readonly(
			"dirty", [](const Block& b) { return b.detail.dirty; },
			"The cache copy is dirty and not yet written back.")
		.def_property_readonly(
			"cache_offset", [](const Block& b) { return b.source ? py::object(py::int_(b.detail.cache_offset)) : py::object(py::none()); },
			"Byte offset of the sector's copy on the cache device, or None.")
		.def_property_readonly(
			"from_backing", [](const Block& b) { return b.from_backing; },
			"data was read from the backing device given to open().")
		.def_property_readonly(
			"data", [](const Block& b) { return bytes_or_none(b.data); },
			"The sector's 512 bytes: the cache copy, or the backing device's when the cache holds "
			"none and a backing device was given. None when it could not be read.")
		.def_property_readonly(
			"error",
			[](const Block& b) -> py::object {
				const std::string& e = b.detail.error.empty() ? b.backing_error : b.detail.error;
				return e.empty() ? py::object(py::none()) : py::object(py::str(e));
			},
			"Why data could not be read, or None.")
		.def(
			"to_json",
			[](const Block& b) {
				SectorDetail d = b.detail;
				d.source = b.source;
				return json_to_python(sector_json(d));
			},
			"The document wbdump --json --block prints under 'block'.")
		.def("__repr__", [](const Block& b) {
			if (!b.source)
				return fmt::format("Block(backing_sector={}, in_cache=False{})", b.detail.backing_sector,
						   b.from_backing ? ", from_backing=True" : "");
			return fmt::format("Block(backing_sector={}, in_cache=True, segment_id={}, slot={}, block_index={}, "
					   "dirty={}, cache_offset={})",
					   b.detail.backing_sector, b.detail.segment_id, b.detail.slot, b.source->metablock,
					   py_bool(b.detail.dirty), b.detail.cache_offset);
		});
}

} // namespace wbkit::python
