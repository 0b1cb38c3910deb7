// What a Cache (cache.cpp) and its views (segments.cpp, metablocks.cpp,
// blocks.cpp) share: the open devices, the latest scan, and the view types.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "bindings.hpp"
#include "wbkit/device.hpp"
#include "wbkit/inspect.hpp"

namespace wbkit::python {

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
std::shared_ptr<const LogScan> scan_now(CacheState& st, bool verify);
std::shared_ptr<const LogScan> latest_scan(CacheState& st);
SlotDetail read_slot(CacheState& st, std::uint64_t slot);

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

// Cache.block(): the newest copy of one backing sector, or the backing
// device's bytes when the cache holds none.
Block read_block(CacheState& st, std::uint64_t sector);

void bind_segment_views(py::module_& m);
void bind_metablock_views(py::module_& m);
void bind_block_views(py::module_& m);

} // namespace wbkit::python
