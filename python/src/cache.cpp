// device.hpp and inspect.hpp: a cache device opened read-only, and the views
// of it that wbdump prints (one slot, one backing sector, the log's
// metablocks). Iterators read one segment at a time.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <limits>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "bindings.hpp"
#include "wbkit/errors.hpp"
#include "wbkit/inspect.hpp"

namespace wbkit::python {

namespace {

const char* py_bool(bool b) { return b ? "True" : "False"; }

// What a Cache and its iterators share. close() drops the devices; an
// operation in flight (GIL released) holds its own reference, so closing from
// another thread never frees a device under it.
struct CacheState {
	std::string path;
	std::string backing_path;
	std::shared_ptr<Device> cache;
	std::shared_ptr<Device> backing;
	Geometry geometry;
	std::shared_ptr<const LogScan> scan; // the latest, for block() and metablocks()

	std::shared_ptr<Device> device() const
	{
		if (!cache)
			throw py::value_error("I/O operation on a closed cache");
		return cache;
	}
};

struct Cache {
	std::shared_ptr<CacheState> state;
};

// A scan's views must outlive the Cache; block() and metablocks() need one,
// and a verified scan is what the kernel would see.
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

struct SegmentIterator {
	std::shared_ptr<CacheState> state;
	std::uint64_t next = 0;
};

struct LogMetablock {
	std::uint64_t segment_id = 0;
	std::uint64_t slot = 0;
	unsigned index = 0;
	Metablock metablock;
	bool written_back = false;
};

// for_each_log_metablock() as an iterator: one header block in memory at a time.
struct MetablockIterator {
	std::shared_ptr<CacheState> state;
	std::shared_ptr<const LogScan> scan;
	std::size_t segment = 0; // position in scan->log
	unsigned next = 0;       // metablock within the header below
	bool loaded = false;
	SegmentHeader header;
};

struct Block {
	SectorDetail detail; // detail.source is not used: it points into a scan
	std::optional<SectorSource> source;
	bool from_backing = false;
	std::optional<std::string> data;
	std::string backing_error;
};

py::object bytes_or_none(const std::optional<std::string>& data)
{
	return data ? py::object(py::bytes(*data)) : py::object(py::none());
}

} // namespace

void bind_cache(py::module_& m)
{
	py::class_<SlotDetail>(m, "Segment",
			       "One slot read in full: its header, metablocks and checksum. What wbdump --slot shows.")
		.def_readonly("slot", &SlotDetail::slot)
		.def_readonly("cache_offset", &SlotDetail::cache_offset, "Byte offset of the slot on the cache device.")
		.def_property_readonly("id", [](const SlotDetail& d) { return d.header.id; }, "Segment id; 0: never written.")
		.def_property_readonly("length", [](const SlotDetail& d) { return d.header.length; },
				       "Number of metablocks as stored (more than 127 is damage).")
		.def_property_readonly("stored_checksum", [](const SlotDetail& d) { return d.header.checksum; })
		.def_property_readonly("computed_checksum", [](const SlotDetail& d) { return opt_object(d.computed_checksum); },
				       "None when the header or data could not be read or length is too large.")
		.def_property_readonly("checksum_ok", [](const SlotDetail& d) { return d.state == SlotState::valid; })
		.def_readonly("state", &SlotDetail::state, "A SlotState.")
		.def_readonly("header_readable", &SlotDetail::header_readable)
		.def_readonly("data_readable", &SlotDetail::data_readable)
		.def_property_readonly(
			"error", [](const SlotDetail& d) { return d.error.empty() ? py::object(py::none()) : py::object(py::str(d.error)); },
			"Why something could not be read, or None.")
		.def_readonly("header", &SlotDetail::header, "The parsed SegmentHeader.")
		.def_property_readonly(
			"metablocks",
			[](const SlotDetail& d) {
				py::list out;
				for (unsigned i = 0; i < d.header.usable_length(); ++i)
					out.append(d.header.metablocks[i]);
				return out;
			},
			"The segment's metablocks (at most 127), as a list of Metablock.")
		.def("to_json", [](const SlotDetail& d) { return json_to_python(slot_json(d).dump()); },
		     "The document wbdump --json --slot prints under 'segment' (without 'in_log').")
		.def("__repr__", [](const SlotDetail& d) {
			return fmt::format("Segment(slot={}, id={}, length={}, state=SlotState.{}, stored_checksum=0x{:08x})",
					   d.slot, d.header.id, d.header.length, enum_member_name(slot_state_name(d.state)),
					   d.header.checksum);
		});

	py::class_<SegmentIterator>(m, "SegmentIterator")
		.def("__iter__", [](SegmentIterator& it) -> SegmentIterator& { return it; })
		.def("__next__",
		     [](SegmentIterator& it) {
			     if (it.next >= it.state->geometry.nr_segments)
				     throw py::stop_iteration();
			     return read_slot(*it.state, it.next++);
		     })
		.def("__repr__", [](const SegmentIterator& it) {
			return fmt::format("<wbkit.SegmentIterator at slot {} of {}>", it.next, it.state->geometry.nr_segments);
		});

	py::class_<LogMetablock>(m, "LogMetablock", "A metablock of the log, in replay order, with its segment.")
		.def_readonly("segment_id", &LogMetablock::segment_id)
		.def_readonly("slot", &LogMetablock::slot)
		.def_readonly("index", &LogMetablock::index, "Position within the segment (= data block index).")
		.def_property_readonly("sector", [](const LogMetablock& l) { return l.metablock.sector; })
		.def_property_readonly("dirty_bits", [](const LogMetablock& l) { return l.metablock.dirty_bits; })
		.def_property_readonly("is_dirty", [](const LogMetablock& l) { return l.metablock.is_dirty(); })
		.def_property_readonly("padding_nonzero", [](const LogMetablock& l) { return l.metablock.padding_nonzero; })
		.def_readonly("written_back", &LogMetablock::written_back, "The segment's id <= last_writeback_id.")
		.def("__repr__", [](const LogMetablock& l) {
			return fmt::format("LogMetablock(segment_id={}, slot={}, index={}, sector={}, dirty_bits=0x{:02x})",
					   l.segment_id, l.slot, l.index, l.metablock.sector, l.metablock.dirty_bits);
		});

	py::class_<MetablockIterator>(m, "MetablockIterator")
		.def("__iter__", [](MetablockIterator& it) -> MetablockIterator& { return it; })
		.def("__next__",
		     [](MetablockIterator& it) {
			     const auto& log = it.scan->log;
			     while (it.segment < log.size()) {
				     const LogSegment& seg = log[it.segment];
				     if (!it.loaded) {
					     auto device = it.state->device();
					     const std::uint64_t offset = it.scan->geometry.slot_offset(seg.slot);
					     SegmentHeader header;
					     {
						     // The iterator itself is only touched with the GIL held.
						     py::gil_scoped_release unlocked;
						     AlignedBuffer block(block_size);
						     device->read_exact(offset, block.span());
						     header = parse_segment_header(block.span());
					     }
					     it.header = header;
					     it.loaded = true;
					     it.next = 0;
				     }
				     if (it.next < it.header.usable_length()) {
					     unsigned i = it.next++;
					     return LogMetablock{seg.id, seg.slot, i, it.header.metablocks[i], seg.written_back};
				     }
				     ++it.segment;
				     it.loaded = false;
			     }
			     throw py::stop_iteration();
		     })
		.def("__repr__", [](const MetablockIterator& it) {
			return fmt::format("<wbkit.MetablockIterator at log segment {} of {}>", it.segment, it.scan->log.size());
		});

	py::class_<Block>(m, "Block",
			  "Where the newest copy of one backing sector lives, and its 512 bytes. What wbdump --block shows.")
		.def_property_readonly("backing_sector", [](const Block& b) { return b.detail.backing_sector; })
		.def_property_readonly("in_cache", [](const Block& b) { return b.source.has_value(); },
				       "The log holds the newest copy; else the backing device holds the sector.")
		.def_property_readonly("segment_id", [](const Block& b) { return b.source ? py::object(py::int_(b.detail.segment_id)) : py::object(py::none()); })
		.def_property_readonly("slot", [](const Block& b) { return b.source ? py::object(py::int_(b.detail.slot)) : py::object(py::none()); })
		.def_property_readonly("block_index",
				       [](const Block& b) { return b.source ? py::object(py::int_(b.source->metablock)) : py::object(py::none()); },
				       "Index of the data block within its segment, or None.")
		.def_property_readonly("block_sector",
				       [](const Block& b) { return b.source ? py::object(py::int_(b.source->block_sector)) : py::object(py::none()); },
				       "Backing sector of the 4 KiB block holding the copy, or None.")
		.def_property_readonly("dirty", [](const Block& b) { return b.detail.dirty; },
				       "The cache copy is dirty and not yet written back.")
		.def_property_readonly("cache_offset", [](const Block& b) { return b.source ? py::object(py::int_(b.detail.cache_offset)) : py::object(py::none()); },
				       "Byte offset of the sector's copy on the cache device, or None.")
		.def_property_readonly("from_backing", [](const Block& b) { return b.from_backing; },
				       "data was read from the backing device given to open().")
		.def_property_readonly("data", [](const Block& b) { return bytes_or_none(b.data); },
				       "The sector's 512 bytes: the cache copy, or the backing device's when the cache holds "
				       "none and a backing device was given. None when it could not be read.")
		.def_property_readonly("error",
				       [](const Block& b) -> py::object {
					       const std::string& e = b.detail.error.empty() ? b.backing_error : b.detail.error;
					       return e.empty() ? py::object(py::none()) : py::object(py::str(e));
				       })
		.def("to_json",
		     [](const Block& b) {
			     SectorDetail d = b.detail;
			     d.source = b.source ? &*b.source : nullptr;
			     return json_to_python(sector_json(d).dump());
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

	py::class_<Cache>(m, "Cache",
			  "A cache device (or image) opened read-only. A context manager: leaving the block closes it. "
			  "Made by wbkit.open().")
		.def_property_readonly("path", [](const Cache& c) { return c.state->path; })
		.def_property_readonly("backing_path", [](const Cache& c) {
			return c.state->backing_path.empty() ? py::object(py::none()) : py::object(py::str(c.state->backing_path));
		})
		.def_property_readonly("closed", [](const Cache& c) { return !c.state->cache; })
		.def_property_readonly("size", [](const Cache& c) { return c.state->geometry.cache_bytes; },
				       "Size of the cache device in bytes.")
		.def_property_readonly("backing_size", [](const Cache& c) {
			return c.state->backing ? py::object(py::int_(c.state->backing->size_bytes())) : py::object(py::none());
		})
		.def_property_readonly("geometry", [](const Cache& c) { return c.state->geometry; })
		.def_property_readonly(
			"superblock",
			[](const Cache& c) {
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
			"segments", [](const Cache& c) { c.state->device(); return SegmentIterator{c.state, 0}; },
			"Iterate over every slot, 0 .. nr_segments - 1, reading one segment at a time: Segment objects.")
		.def(
			"slot",
			[](const Cache& c, const py::int_& k) {
				std::uint64_t slot = to_u64(k, "slot");
				if (slot >= c.state->geometry.nr_segments)
					throw py::value_error(fmt::format("slot {} is past the last slot ({} slots)", slot,
									  c.state->geometry.nr_segments));
				return read_slot(*c.state, slot);
			},
			py::arg("k"), "The Segment in slot k (0-based).")
		.def(
			"segment",
			[](const Cache& c, const py::int_& id) {
				std::uint64_t n = to_u64(id, "id");
				const Geometry& g = c.state->geometry;
				if (n == 0)
					throw py::value_error("segment ids start at 1");
				if (g.nr_segments == 0)
					throw py::value_error("the cache has no segment slots");
				SlotDetail d = read_slot(*c.state, g.slot_of_id(n));
				if (d.header.id != n)
					throw py::value_error(fmt::format("segment {} is not on the cache (slot {} holds segment {})", n,
									  d.slot, d.header.id));
				return d;
			},
			py::arg("id"), "The Segment with this id, read from its slot (id - 1) mod nr_segments.")
		.def(
			"scan", [](const Cache& c, bool verify) { return ScanRef{scan_now(*c.state, verify), c.state->path}; },
			py::arg("verify") = true,
			"Walk the log as the kernel's replay does: a LogScan. verify=False reads only the segment headers "
			"(fast on a huge cache), and where replay stops is then unknown.")
		.def(
			"block",
			[](const Cache& c, const py::int_& sector) {
				std::uint64_t s = to_u64(sector, "sector");
				CacheState& st = *c.state;
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
				b.detail.source = nullptr;
				b.detail.data.clear();
				return b;
			},
			py::arg("sector"),
			"Where the newest copy of backing sector `sector` lives, and its bytes: a Block. Uses the latest "
			"scan(), or makes a verified one.")
		.def(
			"metablocks",
			[](const Cache& c) {
				c.state->device();
				return MetablockIterator{c.state, latest_scan(*c.state), 0, 0, false, {}};
			},
			"Iterate over every metablock of the log in replay order (LogMetablock), re-reading one "
			"segment header at a time. Uses the latest scan(), or makes a verified one.")
		.def(
			"replay_plan",
			[](const Cache& c, const py::int_& max_extent_bytes) {
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
			py::arg("max_extent_bytes") = 4ULL << 20,
			"The replay plan of the log (a ReplayPlan): its summary and, as an iterator, the writes to the "
			"backing device. Uses the latest scan(), or makes a verified one. With a backing device given to "
			"open(), sectors past its end are left out and counted as skipped. Writes nothing.")
		.def(
			"close", [](Cache& c) { c.state->cache.reset(); c.state->backing.reset(); c.state->scan.reset(); },
			"Close the devices. Later reads raise ValueError; closing twice is harmless.")
		.def("__enter__", [](Cache& c) -> Cache& { return c; })
		.def("__exit__",
		     [](Cache& c, py::handle, py::handle, py::handle) {
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
