// device.hpp and inspect.hpp: a cache device opened read-only. The views of
// it that wbdump prints (one slot, one backing sector, the log's metablocks)
// are bound in segments.cpp, blocks.cpp and metablocks.cpp.
#include <filesystem>
#include <fmt/format.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "cache.hpp"
#include "wbkit/errors.hpp"

namespace wbkit::python {

std::shared_ptr<const LogScan> scan_now(CacheState& st, bool verify)
{
	auto device = st.device();
	ScanOptions options{.verify_checksums = verify};
	if (st.backing)
		options.backing_bytes = st.backing->size_bytes();
	std::shared_ptr<const LogScan> scan;
	{
		py::gil_scoped_release unlocked;
		scan = std::make_shared<const LogScan>(scan_log(*device, options));
	}
	st.scan = scan;
	return scan;
}

std::shared_ptr<const LogScan> latest_scan(CacheState& st) { return st.scan ? st.scan : scan_now(st, true); }

SlotDetail read_slot(CacheState& st, std::uint64_t slot)
{
	auto device = st.device();
	py::gil_scoped_release unlocked;
	return inspect_slot(*device, st.geometry, slot);
}

void bind_cache(py::module_& m)
{
	bind_segment_views(m);
	bind_metablock_views(m);
	bind_block_views(m);

	py::class_<Cache>(m, "Cache",
			  "A cache device (or image) opened read-only. Made by wbkit.open().\n\n"
			  "A context manager: leaving the with block closes it. scan() walks the log as the kernel "
			  "does (a LogScan); slot(), segment() and segments() read single segments; block() finds the "
			  "newest copy of a backing sector; metablocks() iterates over the log's metablocks; "
			  "replay_plan() gives the writes a replay would make. Nothing is ever written.")
		.def_property_readonly(
			"path", [](const Cache& c) { return c.state->path; }, "Path of the cache device or image, as given to open().")
		.def_property_readonly(
			"backing_path",
			[](const Cache& c) {
				return c.state->backing_path.empty() ? py::object(py::none()) : py::object(py::str(c.state->backing_path));
			},
			"Path of the backing device as given to open(), or None when none was given.")
		.def_property_readonly(
			"closed", [](const Cache& c) { return !c.state->cache; },
			"True once close() was called or the with block was left.")
		.def_property_readonly(
			"size", [](const Cache& c) { return c.state->geometry.cache_bytes; }, "Size of the cache device in bytes.")
		.def_property_readonly(
			"backing_size",
			[](const Cache& c) {
				return c.state->backing ? py::object(py::int_(c.state->backing->size_bytes())) : py::object(py::none());
			},
			"Size of the backing device in bytes, or None when none was given.")
		.def_property_readonly(
			"geometry", [](const Cache& c) { return c.state->geometry; },
			"The Geometry of a cache of this size: how many slots, where each one lies.")
		.def_property_readonly(
			"superblock", [](const Cache& c) {
				auto device = c.state->device();
				SuperblockInfo sb;
				AlignedBuffer sector(sector_size);
				py::gil_scoped_release unlocked;
				if (device->read_at(0, sector.span()) == 0) {
					sb.header = parse_superblock_header(sector.span());
					sb.readable = device->read_at(WB_SB_RECORD_OFFSET, sector.span()) == 0;
					if (sb.readable)
						sb.record = parse_superblock_record(sector.span());
				}
				return sb;
			},
			"The superblock, read now: magic (sector 0) and record (sector 2047).")
		.def(
			"segments", [](const Cache& c) { c.state->device(); return SegmentIterator{c.state, 0}; }, "Iterate over every slot, 0 .. nr_segments - 1, reading one segment at a time: Segment objects.")
		.def(
			"slot", [](const Cache& c, const py::int_& k) {
				return read_slot(*c.state, c.state->geometry.checked_slot(to_u64(k, "slot")));
			},
			py::arg("k"), "The Segment in slot k (0-based).")
		.def(
			"segment", [](const Cache& c, const py::int_& id) {
				const std::uint64_t n = to_u64(id, "id");
				auto device = c.state->device();
				py::gil_scoped_release unlocked;
				return inspect_segment(*device, c.state->geometry, n);
			},
			py::arg("id"), "The Segment with this id, read from its slot (id - 1) mod nr_segments.")
		.def(
			"scan", [](const Cache& c, bool verify) { return ScanRef{scan_now(*c.state, verify), c.state->path}; }, py::arg("verify") = true, "Walk the log as the kernel's replay does: a LogScan. verify=False reads only the segment headers "
																			  "(fast on a huge cache), and where replay stops is then unknown.")
		.def(
			"block", [](const Cache& c, const py::int_& sector) { return read_block(*c.state, to_u64(sector, "sector")); }, py::arg("sector"), "Where the newest copy of backing sector `sector` lives, and its bytes: a Block. Uses the latest "
																			   "scan(), or makes a verified one.")
		.def(
			"metablocks", [](const Cache& c) {
				c.state->device();
				return MetablockIterator{c.state, latest_scan(*c.state), 0, 0, false, {}};
			},
			"Iterate over every metablock of the log in replay order (LogMetablock), re-reading one "
			"segment header at a time. Uses the latest scan(), or makes a verified one.")
		.def(
			"replay_plan", [](const Cache& c, const py::int_& max_extent_bytes) {
				std::uint64_t max = to_u64(max_extent_bytes, "max_extent_bytes");
				if (max < block_size || max % sector_size)
					throw py::value_error(fmt::format("max_extent_bytes must be a multiple of {} and at least {}",
									  sector_size, block_size));
				CacheState& st = *c.state;
				auto scan = latest_scan(st);
				std::optional<std::uint64_t> backing_sectors;
				if (st.backing)
					backing_sectors = st.backing->size_bytes() / sector_size;
				return make_plan(scan, backing_sectors, max, st.path, st.backing_path);
			},
			py::arg("max_extent_bytes") = 4ULL << 20, "The replay plan of the log (a ReplayPlan): its summary and, as an iterator, the writes to the "
								  "backing device. Uses the latest scan(), or makes a verified one. With a backing device given to "
								  "open(), sectors past its end are left out and counted as skipped. Writes nothing.")
		.def(
			"close", [](Cache& c) { c.state->cache.reset(); c.state->backing.reset(); c.state->scan.reset(); }, "Close the devices. Later reads raise ValueError; closing twice is harmless.")
		.def("__enter__", [](Cache& c) -> Cache& { return c; })
		.def("__exit__", [](Cache& c, py::handle, py::handle, py::handle) {
			c.state->cache.reset();
			c.state->backing.reset();
			c.state->scan.reset();
			return false;
		})
		.def("__repr__", [](const Cache& c) {
			const CacheState& st = *c.state;
			return fmt::format("<wbkit.Cache {}{}{}: {} bytes, {} slots>", py::repr(py::str(st.path)).cast<std::string>(),
					   st.backing_path.empty() ? "" : " backing " + py::repr(py::str(st.backing_path)).cast<std::string>(),
					   st.cache ? "" : " (closed)", st.geometry.cache_bytes, st.geometry.nr_segments);
		});

	m.def(
		"open",
		[](const std::filesystem::path& path, const std::optional<std::filesystem::path>& backing) {
			auto st = std::make_shared<CacheState>();
			st->path = path.string();
			{
				py::gil_scoped_release unlocked;
				st->cache = open_device(st->path);
				if (backing) {
					st->backing_path = backing->string();
					st->backing = open_device(st->backing_path);
				}
			}
			st->geometry = Geometry::for_cache_bytes(st->cache->size_bytes());
			return Cache{st};
		},
		py::arg("path"), py::arg("backing") = py::none(),
		"Open a cache device or image file read-only: a Cache. `backing` (optional) is the backing device: "
		"the scan then reports metablocks past its end, and block() reads sectors the cache does not hold "
		"from it.");
}

} // namespace wbkit::python
