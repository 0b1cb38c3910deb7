// wbcrash: enumerates the crash states of a dm-log-writes recording of a
// writeboost target (tests/crash/record.sh) and checks each one offline: the
// library's replay (what wbreplay runs) onto the state's backing device must
// give a logical image that holds every stamped write acknowledged before the
// state's last mark, and no sector that was never written.
//
// Each part of the logged device (backing, cache, a wbctl recording's new
// cache) is a disk with a volatile write cache of its own: a write is durable
// once a flush of ITS device completed after it (dm-log-writes logs a write
// just before the flush that covered it, and each flush entry keeps the
// sector of the part it went to), or when it had FUA; a flush of one device
// makes nothing on another durable. --one-flush-domain models all parts
// behind one cache (the suite's model before issue 56).
// Crash states, per window between two barrier entries (FLUSH or FUA) of
// any device, a cut before the next barrier completes:
//   flush   what every device had made durable, FUA writes included;
//   subset  that plus a random subset of the completed writes that are not
//           durable on their device yet (each device's cache may have
//           written any of them, in any order);
//   torn    as subset, plus some sectors only of one write (a segment write
//           torn at sector granularity), the next barrier's own data included.
// Random choices come from --seed: a run is reproducible.
//
// --emit writes a sample of the states, with the expected logical image, to
// one big file for the kernel check in the VM (tests/crash/kernel-check.sh).
// A failure prints the entry number and the first lost sector and keeps the
// state's images under --keep.
//
// A recording may start from a crash state instead of empty devices (meta
// base=, tests/crash/record-continue.sh): the target constructs on it (its
// replay writes the backing device), maybe takes new writes, and is removed.
// Writes acknowledged before that state (prior_level, or none with
// prior_any=1) must survive every crash state of the new log too.
// --save-state writes such a starting state. With workload=ext4 the stamp
// rule is replaced by --state-check, a command run on each state's logical
// image (tests/crash/ext4-check.sh).
// --no-replay is for the kernel's other caches (tests/crash/peers.sh), whose
// format the library does not read: the states are enumerated and counted the
// same way, nothing is checked offline, and the emitted sample carries each
// state's acknowledged level and limit for the stamp rule in the guest
// (wbstamp verify on the cache built on the state).
// A recording of `wbctl detach` or `replace-cache` (meta ctl=, record.sh
// modes detach and replace-cache: backing, old cache and new cache are three
// parts of one logged device) has no one cache: in each state the device a
// user constructs after the crash is chosen by the library's rule
// (device_after_switch_crash, wbctl(8) CRASHES): the new cache, else the old
// one, whichever has the writeboost magic, else the backing device alone.
// The states are counted per choice and per phase (marks ctl-start and
// ctl-done bracket wbctl), and the emitted sample names the choice in its
// kind; a state of the backing device alone is emitted with no cache part.
// A developer and test tool, not installed.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "log_writes.hpp"
#include "stamp_workload.hpp"
#include "tool_main.hpp"
#include "wbkit/control.hpp"
#include "wbkit/errors.hpp"
#include "wbkit/log_scan.hpp"
#include "wbkit/replay.hpp"

namespace fs = std::filesystem;
using namespace wbkit;
using namespace wbkit::testing;

namespace {

struct Options {
	std::string recording;
	unsigned subsets = 8;
	unsigned torn = 8;
	std::uint64_t seed = 1;
	std::uint64_t max_windows = 0; // 0: all
	std::string keep = "crash-failures";
	std::string emit;
	unsigned emit_max = 0;
	double emit_fraction = 0.05;
	std::string stamp_image; // write the workload's image of writes 1..ops here and stop
	std::uint64_t max_failures = 20;
	bool emit_failing = false;    // emit the failing states (and only them)
	bool torn_any_order = true;   // tears that skip sectors, not only prefixes
	unsigned recovery_every = 10; // every Nth passing state: cut the offline replay, rerun
	std::string save_state;       // final|midlog|midlog-wbreplay: write that state as a recording's base and stop
	std::string save_to;
	std::string state_check; // command run on each state's logical image (workload=ext4)
	std::string work_dir = "/tmp";
	bool no_replay = false;        // count and emit states only (a cache of another format)
	bool one_flush_domain = false; // every part of the logged device behind one volatile cache (the old model)
	std::string keep_refused;      // keep the images of states whose log the shared decision refuses here
	std::uint64_t max_refused = 20;
	std::string keep_lost; // keep the images of states whose walk skipped a segment lost in flight here
};

// A destination that loses power after a byte budget: the write that crosses
// it lands in part (whole sectors), later writes fail. Models wbreplay killed
// or the machine cut while the replay writes.
class CuttingDevice : public Device {
public:
	CuttingDevice(Device& inner, std::uint64_t budget) : inner_(inner), budget_(budget) {}
	const std::string& path() const noexcept override { return inner_.path(); }
	std::uint64_t size_bytes() const noexcept override { return inner_.size_bytes(); }
	bool is_block_device() const noexcept override { return false; }
	DeviceIdentity identity() const noexcept override { return inner_.identity(); }
	int read_at(std::uint64_t offset, std::span<std::byte> buf) noexcept override { return inner_.read_at(offset, buf); }
	int write_at(std::uint64_t offset, std::span<const std::byte> buf) noexcept override
	{
		if (cut_)
			return EIO;
		if (buf.size() <= budget_) {
			budget_ -= buf.size();
			return inner_.write_at(offset, buf);
		}
		const std::size_t part = std::size_t(budget_ / 512 * 512);
		if (part)
			inner_.write_at(offset, buf.first(part));
		cut_ = true;
		return EIO;
	}
	int flush() noexcept override { return cut_ ? EIO : inner_.flush(); }
	bool cut() const { return cut_; }

private:
	Device& inner_;
	std::uint64_t budget_;
	bool cut_ = false;
};

struct Meta {
	std::string target, mode;
	bool stamped = true; // workload=stamp (default) or ext4
	StampWorkload workload;
	std::uint64_t ops = 0, flush_every = 0;
	std::uint64_t first = 1; // the first write of this recording's workload
	std::uint64_t backing_bytes = 0, cache_bytes = 0;
	std::uint64_t region_bytes = 0; // what the workload writes: the cached device
	std::optional<std::uint64_t> log_backing_offset;
	std::uint64_t log_cache_offset = 0;
	// A recording that starts from a crash state: the logged device's content
	// before the first entry, and the writes acknowledged (1..prior_level) or
	// possibly issued (up to prior_limit) before it. prior_any: that state's
	// data need not survive (a damaged cache); only this recording's writes count.
	std::string base;
	std::uint64_t prior_level = 0, prior_limit = 0;
	bool prior_any = false;
	// The target wrote back to a backing device the log does not cover
	// (record.sh mode cache-writeback): no state's data can be checked,
	// only the cache's log.
	bool backing_unlogged_writes = false;
	// wbctl ran during the recording (detach, replace-cache): which cache
	// the state's device is built on follows the switch's rule. The new
	// cache of replace-cache is a third part of the logged device.
	std::string ctl;
	std::optional<std::uint64_t> log_cache2_offset;
	std::uint64_t cache2_bytes = 0;
	std::uint64_t logged_size() const
	{
		if (log_cache2_offset)
			return *log_cache2_offset + cache2_bytes;
		return log_backing_offset ? log_cache_offset + cache_bytes : cache_bytes;
	}
};

Meta read_meta(const fs::path& file)
{
	std::ifstream in(file);
	if (!in)
		throw IoError("cannot read", file.string(), errno);
	std::map<std::string, std::string> kv;
	std::string line;
	while (std::getline(in, line)) {
		auto eq = line.find('=');
		if (eq != std::string::npos)
			kv[line.substr(0, eq)] = line.substr(eq + 1);
	}
	auto num = [&](const std::string& key) -> std::uint64_t {
		auto it = kv.find(key);
		if (it == kv.end())
			throw UsageError(fmt::format("{}: no {}=", file.string(), key));
		return std::stoull(it->second);
	};
	auto num_or = [&](const std::string& key, std::uint64_t fallback) {
		return kv.count(key) ? num(key) : fallback;
	};
	Meta m;
	m.target = kv["target"];
	m.mode = kv["mode"];
	if (kv.count("workload") && kv["workload"] != "stamp" && kv["workload"] != "ext4")
		throw UsageError(fmt::format("{}: unknown workload={}", file.string(), kv["workload"]));
	m.stamped = !kv.count("workload") || kv["workload"] == "stamp";
	m.workload.seed = num_or("seed", 0);
	m.workload.partial_pct = unsigned(num_or("partial_pct", 0));
	m.workload.discard_pct = unsigned(num_or("discard_pct", 0));
	m.workload.region_offset = 0;
	m.workload.region_size = num_or("region_bytes", num("backing_bytes"));
	m.region_bytes = m.workload.region_size;
	m.ops = num("ops");
	m.flush_every = num_or("flush_every", 1);
	m.first = num_or("first", 1);
	m.prior_level = num_or("prior_level", 0);
	m.prior_limit = std::max(m.prior_level, num_or("prior_limit", 0));
	m.prior_any = num_or("prior_any", 0) != 0;
	if (kv.count("base") && !kv["base"].empty())
		m.base = (file.parent_path() / kv["base"]).string();
	if (m.first == 0 || m.prior_limit >= m.first)
		throw UsageError(fmt::format("{}: prior writes must come before first={}", file.string(), m.first));
	m.backing_bytes = num("backing_bytes");
	m.cache_bytes = num("cache_bytes");
	if (kv["log_backing_offset"] != "none")
		m.log_backing_offset = num("log_backing_offset");
	m.log_cache_offset = num("log_cache_offset");
	m.backing_unlogged_writes = num_or("backing_unlogged_writes", 0) != 0;
	if (m.backing_unlogged_writes && m.log_backing_offset)
		throw UsageError(fmt::format("{}: backing_unlogged_writes=1 with a logged backing device", file.string()));
	m.ctl = kv["ctl"];
	if (!m.ctl.empty() && m.ctl != "detach" && m.ctl != "replace-cache")
		throw UsageError(fmt::format("{}: unknown ctl={}", file.string(), m.ctl));
	if (!m.ctl.empty() && !m.log_backing_offset)
		throw UsageError(fmt::format("{}: ctl={} needs the backing device in the log", file.string(), m.ctl));
	if (kv.count("log_cache2_offset") && !kv["log_cache2_offset"].empty()) {
		m.log_cache2_offset = num("log_cache2_offset");
		m.cache2_bytes = num("cache2_bytes");
	}
	if ((m.ctl == "replace-cache") != m.log_cache2_offset.has_value())
		throw UsageError(fmt::format("{}: a new cache (log_cache2_offset=) goes with ctl=replace-cache only",
					     file.string()));
	return m;
}

// A working copy of one crash state and the cache and backing devices in it.
// With both devices under one log, the backing device is a window of the copy;
// with only the cache logged, the backing device starts out as zeros.
// The cache is the one the state's device is built on (a wbctl recording:
// the old or the new cache, or none: the backing device alone).
struct CachePart {
	std::optional<std::uint64_t> offset; // in the logged device; none: no cache
	std::uint64_t bytes = 0;
	std::string choice; // a wbctl recording: switch_crash_device_name(); else empty
};

struct StateDevices {
	SparseImage work;
	std::optional<SparseImage> separate_backing;
	std::optional<DeviceWindow> backing_window;
	std::optional<DeviceWindow> cache;
	Device* backing;

	StateDevices(const SparseImage& state, const Meta& meta, const CachePart& part) : work(state)
	{
		if (part.offset)
			cache.emplace(work, "cache", *part.offset, part.bytes);
		if (meta.log_backing_offset) {
			backing_window.emplace(work, "backing", *meta.log_backing_offset, meta.backing_bytes);
			backing = &*backing_window;
		} else {
			separate_backing.emplace("backing", meta.backing_bytes);
			backing = &*separate_backing;
		}
	}
	StateDevices(const StateDevices&) = delete;
	StateDevices& operator=(const StateDevices&) = delete;
};

struct Counts {
	std::uint64_t flush = 0, subset = 0, torn = 0, failures = 0, emitted = 0, recovery = 0;
	std::uint64_t unformatted = 0;    // ext4: states before the file system existed (not counted)
	std::uint64_t rewrites = 0;       // states whose replay skipped a torn rewrite (FORMAT.md replay step 2)
	std::uint64_t lost_in_flight = 0; // states whose walk skipped a segment lost in flight (same step)
	// States whose log the shared decision refuses (the kernel would not
	// construct, wbreplay not without --force), per refusal; the offline
	// replay here runs on them all the same, as wbreplay --force would.
	std::map<std::string, std::uint64_t> refused;
	std::uint64_t refused_total() const
	{
		std::uint64_t n = 0;
		for (const auto& [name, k] : refused)
			n += k;
		return n;
	}
	// A wbctl recording: states per device chosen (old cache, new cache,
	// backing alone) and per phase (before ctl-start, while wbctl ran, after
	// ctl-done), and the failures per phase.
	std::map<std::string, std::uint64_t> by_choice;
	std::uint64_t by_phase[3] = {0, 0, 0};
	std::uint64_t failures_by_phase[3] = {0, 0, 0};
	std::uint64_t total() const { return flush + subset + torn; }
};

class Checker {
public:
	Checker(const Options& o, const Meta& meta, const LogWritesLog& log)
		: o_(o), meta_(meta), log_(log), rng_(o.seed),
		  logged_size_(meta.logged_size()),
		  newest_(meta.backing_bytes / StampWorkload::sector, 0), initial_("logged", logged_size_)
	{
		if (!meta.base.empty())
			load_base(meta.base);
		// What the state the recording started from had acknowledged.
		if (meta.stamped)
			for (std::uint64_t seq = 1; seq <= meta.prior_level; ++seq) {
				auto op = meta.workload.op_at(seq);
				for (unsigned i = 0; i < op.nr_sectors; ++i)
					newest_[op.sector + i] = seq;
			}
		level_ = meta.first - 1;
		set_domains();
		if (!o.emit.empty()) {
			fs::create_directories(o.emit);
			emit_fd_ = ::open((fs::path(o.emit) / "states.img").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
			if (emit_fd_ < 0)
				throw IoError("cannot create", o.emit + "/states.img", errno);
			manifest_.open(fs::path(o.emit) / "manifest.tsv");
		}
	}
	~Checker()
	{
		if (emit_fd_ >= 0)
			::close(emit_fd_);
	}

	std::uint64_t logged_size() const { return logged_size_; }
	const Counts& counts() const { return counts_; }

	// Walks the log once, building each window's states from the durable image
	// and the writes not yet durable on their own device.
	SparseImage run()
	{
		SparseImage current = initial_;          // every entry so far: the final state
		SparseImage durable = initial_;          // what each device had flushed
		std::vector<Pending> pending;            // completed, not yet covered by a flush of their device
		std::optional<std::uint64_t> base_entry; // the last barrier
		std::uint64_t windows = 0;
		for (const auto& e : log_.entries()) {
			if (e.is_mark()) {
				if (e.mark.size() > 1 && e.mark[0] == 'f')
					raise_level(std::stoull(e.mark.substr(1)));
				// The states of the window this mark is in count for
				// the phase it starts: wbctl's first write follows it.
				if (e.mark == "ctl-start")
					phase_ = 1;
				else if (e.mark == "ctl-done")
					phase_ = 2;
				continue;
			}
			if (!e.is_barrier()) {
				apply_entry(log_, e, current);
				if (e.has_data() || e.is_discard())
					pending.push_back({&e, domain_of(e), false});
				continue;
			}
			if (!o_.max_windows || windows < o_.max_windows)
				check_window(durable, base_entry, pending, &e);
			++windows;
			apply_entry(log_, e, current);
			const unsigned domain = domain_of(e);
			// A flush makes durable what its device had completed
			// before it was issued: dm-log-writes logs those writes
			// before the flush entry. Another device's writes stay
			// in its volatile cache.
			if (e.flags & log_flush_flag)
				make_durable(durable, pending, domain);
			// A FUA write is durable once it completed (logged then);
			// an older write of its device may still land after it
			// in no state: it stays ordered in pending.
			if (e.has_data())
				pending.push_back({&e, domain, (e.flags & log_fua_flag) != 0});
			base_entry = e.number;
		}
		if (!o_.max_windows || windows < o_.max_windows)
			check_window(durable, base_entry, pending, nullptr);
		// The whole log: after the clean teardown nothing may be missing.
		check_state(current, "final", log_.entries().empty() ? 0 : log_.entries().back().number, counts_.flush);
		return current;
	}

	// The devices with a volatile cache of their own, as recorded: one
	// name a device.
	std::string domain_names() const
	{
		std::string names;
		for (const auto& d : domains_)
			names += (names.empty() ? "" : ",") + d.name;
		return names;
	}

private:
	void load_base(const std::string& file)
	{
		std::ifstream in(file, std::ios::binary);
		if (!in)
			throw IoError("cannot read", file, errno);
		if (fs::file_size(file) != logged_size_)
			throw UsageError(fmt::format("{}: {} bytes, the logged device has {}", file, fs::file_size(file),
						     logged_size_));
		std::vector<char> page(SparseImage::page_size);
		for (std::uint64_t off = 0; off < logged_size_; off += page.size()) {
			in.read(page.data(), std::streamsize(page.size()));
			if (std::any_of(page.begin(), page.end(), [](char c) { return c != 0; }))
				initial_.write_exact(off, std::as_bytes(std::span(page)));
		}
	}

	void raise_level(std::uint64_t level)
	{
		if (level > meta_.ops)
			throw UsageError(fmt::format("mark f{} is past the workload's {} writes", level, meta_.ops));
		marked_ = true;
		if (!meta_.stamped) {
			level_ = std::max(level_, level);
			return;
		}
		for (std::uint64_t seq = level_ + 1; seq <= level; ++seq) {
			auto op = meta_.workload.op_at(seq);
			for (unsigned i = 0; i < op.nr_sectors; ++i)
				newest_[op.sector + i] = seq;
		}
		level_ = std::max(level_, level);
	}

	// The cache the state's device is built on: the recording's only cache,
	// or for a wbctl recording the one the switch's rule picks.
	CachePart cache_part(const SparseImage& state) const
	{
		if (meta_.ctl.empty())
			return {meta_.log_cache_offset, meta_.cache_bytes, {}};
		auto& image = const_cast<SparseImage&>(state); // read_at only reads
		std::array<std::byte, 512> old0{}, new0{};
		image.read_exact(meta_.log_cache_offset, old0);
		std::span<const std::byte> new_sector;
		if (meta_.log_cache2_offset) {
			image.read_exact(*meta_.log_cache2_offset, new0);
			new_sector = new0;
		}
		const SwitchCrashDevice device = device_after_switch_crash(old0, new_sector);
		const std::string name = switch_crash_device_name(device);
		switch (device) {
		case SwitchCrashDevice::old_cache:
			return {meta_.log_cache_offset, meta_.cache_bytes, name};
		case SwitchCrashDevice::new_cache:
			return {meta_.log_cache2_offset, meta_.cache2_bytes, name};
		case SwitchCrashDevice::backing:
			break;
		}
		return {std::nullopt, 0, name};
	}

	std::vector<bool> random_mask(std::size_t n, bool nonempty)
	{
		std::vector<bool> mask(n);
		for (;;) {
			bool any = false;
			for (std::size_t i = 0; i < n; ++i)
				any |= (mask[i] = (rng_() & 1) != 0);
			if (any || !nonempty || n == 0)
				return mask;
		}
	}

	// Sectors of one write that reached the media when it was torn: any
	// proper subset (a device may land the sectors of one request in any
	// order), half of the time a prefix; with --torn-prefix-only always a
	// prefix (media that write a request in order).
	std::vector<bool> torn_sectors(std::size_t n)
	{
		std::vector<bool> mask(n);
		if (!o_.torn_any_order || (rng_() & 1)) {
			std::size_t k = 1 + rng_() % (n - 1);
			for (std::size_t i = 0; i < k; ++i)
				mask[i] = true;
			return mask;
		}
		for (;;) {
			std::size_t set = 0;
			for (std::size_t i = 0; i < n; ++i)
				set += (mask[i] = (rng_() & 1) != 0);
			if (set > 0 && set < n)
				return mask;
		}
	}

	// One flush domain: a device with its own volatile write cache. The
	// parts of the logged device (backing, cache, new cache) are separate
	// disks: a flush of one makes nothing on another durable. Entries are
	// told apart by sector; a flush entry keeps the sector its bio had after
	// the part's linear mapping (its start for an empty flush).
	struct FlushDomain {
		std::string name;
		std::uint64_t begin = 0, end = 0; // log sectors
	};
	struct Pending {
		const LogWritesEntry* entry;
		unsigned domain;
		bool durable; // FUA: in every state from its completion on
	};

	void set_domains()
	{
		const std::uint64_t ss = log_.sector_size();
		if (o_.one_flush_domain || !meta_.log_backing_offset) {
			domains_.push_back({"device", 0, logged_size_ / ss});
			return;
		}
		auto add = [&](std::string name, std::uint64_t offset, std::uint64_t bytes) {
			domains_.push_back({std::move(name), offset / ss, (offset + bytes) / ss});
		};
		add("backing", *meta_.log_backing_offset, meta_.backing_bytes);
		add("cache", meta_.log_cache_offset, meta_.cache_bytes);
		if (meta_.log_cache2_offset)
			add("new-cache", *meta_.log_cache2_offset, meta_.cache2_bytes);
	}

	unsigned domain_of(const LogWritesEntry& e) const
	{
		const std::uint64_t end = e.sector + std::max<std::uint64_t>(e.nr_sectors, 1);
		for (unsigned d = 0; d < domains_.size(); ++d)
			if (e.sector >= domains_[d].begin && end <= domains_[d].end)
				return d;
		throw UsageError(fmt::format("log entry {} (sector {}, {} sectors, flags {:#x}) lies in no one device of "
					     "the recording ({}): record each device as a linear part of the logged "
					     "device (record.sh), or check with --one-flush-domain",
					     e.number, e.sector, e.nr_sectors, e.flags, domain_names()));
	}

	// A flush of `domain` completed: its pending writes reach the media, in
	// the order they completed.
	void make_durable(SparseImage& durable, std::vector<Pending>& pending, unsigned domain)
	{
		std::vector<Pending> rest;
		for (const auto& p : pending) {
			if (p.domain == domain)
				apply_entry(log_, *p.entry, durable);
			else
				rest.push_back(p);
		}
		pending.swap(rest);
	}

	// The states of a cut before `next` completes: what every device had
	// flushed, each FUA write that completed, and any subset of the other
	// completed writes of every device (each device's volatile cache may
	// have written any of them, in any order), one of them maybe torn.
	void check_window(const SparseImage& durable, std::optional<std::uint64_t> base_entry,
			  const std::vector<Pending>& pending, const LogWritesEntry* next)
	{
		const std::uint64_t where = base_entry.value_or(0);
		// Optional: the writes a cut may or may not have kept.
		std::vector<std::size_t> optional;
		for (std::size_t i = 0; i < pending.size(); ++i)
			if (!pending[i].durable)
				optional.push_back(i);
		// The durable image, the FUA writes, the optional writes `keep`
		// selects (all of `flushed`'s, whose flush completed), except skip.
		auto build = [&](const std::vector<bool>& keep, const LogWritesEntry* skip,
				 std::optional<unsigned> flushed, std::uint64_t& last) {
			SparseImage state = durable;
			std::size_t k = 0;
			for (const Pending& p : pending) {
				const bool apply = p.durable || keep[k++] || p.domain == flushed;
				if (!apply || p.entry == skip)
					continue;
				apply_entry(log_, *p.entry, state);
				if (!p.durable)
					last = std::max(last, p.entry->number);
			}
			return state;
		};

		std::uint64_t unused = where;
		check_state(build(std::vector<bool>(optional.size()), nullptr, std::nullopt, unused), "flush", where,
			    counts_.flush);

		if (!optional.empty()) {
			// Small windows: every non-empty subset once; large ones: a sample.
			const std::size_t n = optional.size();
			const bool exhaustive = n < 31 && ((std::uint64_t(1) << n) - 1) <= o_.subsets;
			const std::uint64_t nr = exhaustive ? (std::uint64_t(1) << n) - 1 : o_.subsets;
			for (std::uint64_t k = 0; k < nr; ++k) {
				std::vector<bool> mask(n);
				if (exhaustive)
					for (std::size_t i = 0; i < n; ++i)
						mask[i] = ((k + 1) >> i) & 1;
				else
					mask = random_mask(n, true);
				std::uint64_t last = where;
				SparseImage state = build(mask, nullptr, std::nullopt, last);
				check_state(state, "subset", last, counts_.subset);
			}
		}

		// Writes that can tear: the completed writes not yet durable and
		// the next barrier's data.
		std::vector<const LogWritesEntry*> tearable;
		for (std::size_t i : optional)
			if (pending[i].entry->has_data() && pending[i].entry->nr_sectors > 1)
				tearable.push_back(pending[i].entry);
		if (next && next->has_data() && next->nr_sectors > 1)
			tearable.push_back(next);
		if (tearable.empty())
			return;
		for (unsigned k = 0; k < o_.torn; ++k) {
			const LogWritesEntry* victim = tearable[rng_() % tearable.size()];
			// A write with a preflush: the flush completed before its
			// data went out, so its device's earlier writes are durable.
			const bool preflushed = victim == next && (next->flags & log_flush_flag);
			std::uint64_t last = where;
			SparseImage state = build(random_mask(optional.size(), false), victim,
						  preflushed ? std::optional(domain_of(*next)) : std::nullopt, last);
			apply_entry_sectors(log_, *victim, state, torn_sectors(std::size_t(victim->nr_sectors)));
			check_state(state, "torn", victim->number, counts_.torn);
		}
	}

	void check_state(const SparseImage& state, const char* kind, std::uint64_t entry, std::uint64_t& counter)
	{
		// Before the first mark the file system is not made yet: nothing to check.
		if (!meta_.stamped && !marked_) {
			++counts_.unformatted;
			return;
		}
		++counter;
		if (o_.no_replay) {
			maybe_emit(state, nullptr, cache_part(state), kind, entry);
			return;
		}
		const CachePart part = cache_part(state);
		if (!meta_.ctl.empty()) {
			++counts_.by_choice[part.choice];
			++counts_.by_phase[phase_];
		}
		StateDevices devices(state, meta_, part);
		SparseImage& work = devices.work;
		Device* backing = devices.backing;

		std::string replay_error, log_problem;
		bool rewrite = false;
		// The backing device alone (a wbctl recording whose caches were
		// wiped or never formatted): nothing to replay.
		if (devices.cache)
			try {
				DeviceWindow& cache = *devices.cache;
				ScanOptions scan_options;
				scan_options.backing_bytes = meta_.backing_bytes;
				auto scan = std::make_shared<LogScan>(scan_log(cache, scan_options));
				rewrite = scan->rewrite_slot.has_value();
				counts_.rewrites += rewrite;
				counts_.lost_in_flight += !scan->lost_slots.empty();
				if (scan->refused())
					note_refused(state, part, kind, entry, *scan);
				if (!scan->lost_slots.empty() && !o_.keep_lost.empty() && counts_.lost_in_flight <= o_.max_refused &&
				    part.offset) {
					const fs::path dir = fs::path(o_.keep_lost) /
							     fmt::format("{}-{}-entry{}-lost{}", fs::path(o_.recording).filename().string(),
									 kind, entry, counts_.lost_in_flight);
					keep_state(state, part, dir);
					std::cout << fmt::format("LOST-IN-FLIGHT {} state entry={}: slot {}; acknowledged writes 1..{}; "
								 "images kept in {}\n",
								 kind, entry, scan->lost_slots.front(), level_, dir.string());
				}
				log_problem = own_log_problem(*scan);
				// A cache the target never formatted yet: the backing device alone is the logical device.
				if (scan->replayable()) {
					ReplayOptions replay_options;
					replay_options.backing_sectors = meta_.backing_bytes / StampWorkload::sector;
					auto plan = replay_plan(scan, replay_options);
					execute_replay(plan, cache, *backing);
				}
			} catch (const std::exception& ex) {
				replay_error = ex.what();
			}

		std::string problem = !replay_error.empty()           ? "replay threw: " + replay_error
				      : !log_problem.empty()          ? log_problem
				      : meta_.backing_unlogged_writes ? std::string()
				      : meta_.stamped                 ? verify(*backing)
								      : run_state_check(*backing);
		if (meta_.backing_unlogged_writes) {
			if (!problem.empty())
				report_failure(state, work, *backing, part, kind, entry, problem);
			return;
		}
		if (problem.empty() && o_.recovery_every && counts_.total() % o_.recovery_every == 0)
			problem = check_cut_replay(state, *backing, part);
		// The kernel check tells these apart: upstream's replay stops at a
		// torn rewrite, so its image differs there (kernel-check.sh).
		std::string emit_kind = rewrite ? std::string(kind) + "-rewrite" : std::string(kind);
		if (!part.choice.empty())
			emit_kind += "@" + part.choice;
		if (!problem.empty()) {
			if (!meta_.ctl.empty()) {
				++counts_.failures_by_phase[phase_];
				problem += fmt::format(" (device built on: {}; phase: {})", part.choice, phase_name(phase_));
			}
			report_failure(state, work, *backing, part, kind, entry, problem);
			// Whether the kernel loses the same data: its image must equal this one.
			maybe_emit(state, backing, part, emit_kind, entry, true);
		} else
			maybe_emit(state, backing, part, emit_kind, entry);
	}

	// What dm-wbkit promises about its own log in every crash state, whatever
	// the data: its superblock record names only segments that were durable
	// before the record was written (writeback flushes the cache first), so
	// the record never runs ahead of the log (issue 41, finding 2). A record
	// a lap or more behind is allowed: it is written once per interval while
	// the ring may wrap faster, and replay then writes back more than it
	// needs to. Upstream's record can run ahead: not checked there.
	std::string own_log_problem(const LogScan& scan) const
	{
		if (meta_.target != "wbkit" || scan.sb_record <= scan.max_id)
			return {};
		return fmt::format("dm-wbkit's superblock record names segment {}, ahead of the log (newest id {})",
				   scan.sb_record, scan.max_id);
	}

	// The offline replay cut at a random byte of its writes (the backing
	// device), or of the clean mark it writes on the cache afterwards, then
	// run again from the start: the result must be the uninterrupted one.
	std::string check_cut_replay(const SparseImage& state, Device& expected, const CachePart& part)
	{
		if (!part.offset)
			return {}; // the backing device alone: nothing to replay
		++counts_.recovery;
		StateDevices devices(state, meta_, part);
		Device* backing = devices.backing;
		DeviceWindow& cache = *devices.cache;
		ScanOptions scan_options;
		scan_options.backing_bytes = meta_.backing_bytes;
		ReplayOptions replay_options;
		replay_options.backing_sectors = meta_.backing_bytes / StampWorkload::sector;
		std::string cut_where;
		try {
			auto scan = std::make_shared<LogScan>(scan_log(cache, scan_options));
			if (!scan->replayable())
				return {};
			auto plan = replay_plan(scan, replay_options);
			const std::uint64_t total = plan.summary().bytes;
			const bool cut_mark = total == 0 || (rng_() % 4 == 0);
			if (!cut_mark) {
				CuttingDevice cutting(*backing, rng_() % total);
				try {
					execute_replay(plan, cache, cutting);
				} catch (const std::exception&) {
				}
				cut_where = "replay writes";
			} else {
				execute_replay(plan, cache, *backing);
				CuttingDevice cutting(cache, rng_() % 1024);
				try {
					mark_cache_clean(cutting, *scan);
				} catch (const std::exception&) {
				}
				cut_where = "clean mark";
			}
			// The rerun, as wbreplay run again would do it.
			auto rescan = std::make_shared<LogScan>(scan_log(cache, scan_options));
			if (rescan->replayable()) {
				auto replan = replay_plan(rescan, replay_options);
				execute_replay(replan, cache, *backing);
			}
		} catch (const std::exception& ex) {
			return fmt::format("replay rerun after a cut in the {} threw: {}", cut_where, ex.what());
		}
		std::vector<std::byte>& a = compare_a_;
		std::vector<std::byte>& b = compare_b_;
		a.resize(meta_.backing_bytes);
		b.resize(meta_.backing_bytes);
		backing->read_exact(0, a);
		expected.read_exact(0, b);
		if (a != b) {
			std::size_t i = 0;
			while (a[i] == b[i])
				++i;
			return fmt::format("replay cut in the {} and rerun differs from the uninterrupted replay at sector {}",
					   cut_where, i / 512);
		}
		return {};
	}

	// Whether a discard after the level (or in flight when the prior state
	// was cut) covers sector s: it may have zeroed it already.
	bool discarded_in_flight(std::uint64_t s, std::uint64_t limit) const
	{
		if (!meta_.workload.discard_pct)
			return false;
		auto covers = [&](std::uint64_t from, std::uint64_t to) {
			for (std::uint64_t q = from; q <= to; ++q) {
				const auto op = meta_.workload.op_at(q);
				if (op.discard && op.covers(s))
					return true;
			}
			return false;
		};
		return covers(level_ + 1, limit) || covers(meta_.prior_level + 1, meta_.prior_limit);
	}

	// The flush contract of the stamped workload (wbstamp verify) for the
	// current level: each sector holds the newest write (or discard: zeros)
	// <= level that covered it, or a later one that covered it and may have
	// been issued by now.
	std::string verify(Device& backing)
	{
		const std::uint64_t limit = std::min(meta_.ops, level_ + meta_.flush_every);
		const std::uint64_t nr = meta_.backing_bytes / StampWorkload::sector;
		std::vector<unsigned char>& buf = verify_buffer_;
		buf.resize(1 << 20);
		for (std::uint64_t done = 0; done < nr;) {
			const std::uint64_t chunk = std::min<std::uint64_t>(nr - done, buf.size() / StampWorkload::sector);
			backing.read_exact(done * StampWorkload::sector,
					   std::as_writable_bytes(std::span(buf.data(), chunk * StampWorkload::sector)));
			for (std::uint64_t i = 0; i < chunk; ++i, ++done) {
				const unsigned char* sec = buf.data() + i * StampWorkload::sector;
				const std::uint64_t must = newest_[done];
				const std::uint64_t seq = meta_.workload.stamp_seq(sec, done);
				const bool discarded = must && meta_.workload.op_at(must).discard;
				bool ok;
				if (seq && seq == must)
					ok = true;
				else if (seq > level_ && seq <= limit)
					ok = meta_.workload.op_at(seq).covers(done);
				else if (seq > must && seq > meta_.prior_level && seq <= meta_.prior_limit)
					ok = meta_.workload.op_at(seq).covers(done); // in flight when the prior state was cut
				else if (discarded)
					ok = !seq && StampWorkload::all_zero(sec); // a durable discard: never an older write
				else if (!must)
					ok = meta_.prior_any || (!seq && StampWorkload::all_zero(sec));
				else
					ok = false;
				if (!ok && !seq && StampWorkload::all_zero(sec) && discarded_in_flight(done, limit))
					ok = true;
				if (!ok) {
					std::string found = seq                            ? fmt::format("write {}", seq)
							    : StampWorkload::all_zero(sec) ? "zeros"
											   : "other data";
					std::string wanted = discarded ? fmt::format("zeros (discard {})", must)
							     : must    ? fmt::format("write {}", must)
								       : "zeros";
					return fmt::format("first lost sector {}: expected {} (or a later write <= {}), found {}; "
							   "acknowledged writes 1..{}",
							   done, wanted, limit, found, level_);
				}
			}
		}
		return {};
	}

	// workload=ext4: the logical image goes to a file and the --state-check
	// command judges it: `CMD IMAGE LEVEL RECORDING`, exit 0 when it holds
	// everything acknowledged up to mark f<LEVEL>; its last output line says why not.
	std::string run_state_check(Device& logical)
	{
		if (o_.state_check.empty())
			throw UsageError("workload=ext4 needs --state-check");
		const fs::path image = fs::path(o_.work_dir) / fmt::format("wbcrash-state-{}.img", ::getpid());
		save_device(logical, image);
		const std::string cmd = fmt::format("{} '{}' {} '{}' 2>&1", o_.state_check, image.string(), level_,
						    fs::absolute(o_.recording).string());
		FILE* pipe = ::popen(cmd.c_str(), "r");
		if (!pipe)
			throw IoError("cannot run", o_.state_check, errno);
		std::string last, line;
		char buf[4096];
		while (std::fgets(buf, sizeof buf, pipe)) {
			line += buf;
			if (!line.empty() && line.back() == '\n') {
				line.pop_back();
				if (!line.empty())
					last = line;
				line.clear();
			}
		}
		if (!line.empty())
			last = line;
		const int status = ::pclose(pipe);
		fs::remove(image);
		if (status == 0)
			return {};
		return fmt::format("state check (files of marks <= f{}): {}", level_,
				   last.empty() ? "failed without a message" : last);
	}

	static const char* refusal_name(wb_replay_refusal why)
	{
		switch (why) {
		case WB_REPLAY_OK:
			return "ok";
		case WB_REPLAY_SLOT_MISMATCH:
			return "slot-mismatch";
		case WB_REPLAY_IDS_NOT_RISING:
			return "ids-not-rising";
		case WB_REPLAY_STOPS_EARLY:
			return "stops-early";
		case WB_REPLAY_DAMAGED_REWRITE:
			return "damaged-rewrite";
		case WB_REPLAY_UNREADABLE:
			return "unreadable";
		case WB_REPLAY_RING_SHRUNK:
			return "ring-shrunk";
		}
		return "other";
	}

	// A state the kernel would refuse: counted per refusal, and with
	// --keep-refused its images kept (cache.img, backing.img) for wbdump,
	// as a failure's are.
	void note_refused(const SparseImage& state, const CachePart& part, const char* kind, std::uint64_t entry,
			  const LogScan& scan)
	{
		const char* why = refusal_name(scan.decision.refusal);
		const std::uint64_t n = ++counts_.refused[why];
		const std::uint64_t total = counts_.refused_total();
		if (o_.keep_refused.empty() || total > o_.max_refused || !part.offset)
			return;
		fs::path dir = fs::path(o_.keep_refused) /
			       fmt::format("{}-{}-entry{}-{}-{}", fs::path(o_.recording).filename().string(), kind, entry, why, n);
		keep_state(state, part, dir);
		std::cout << fmt::format("REFUSED {} state entry={} ({}): slot {}, segment {}: {}; acknowledged writes 1..{}; "
					 "images kept in {}\n",
					 kind, entry, fs::path(o_.recording).filename().string(), scan.decision.refusal_slot,
					 scan.decision.refusal_id, why, level_, dir.string())
			  << std::flush;
	}

	// A state's cache and backing images and its acknowledged level, for wbdump and fixtures.
	void keep_state(const SparseImage& state, const CachePart& part, const fs::path& dir)
	{
		fs::create_directories(dir);
		save_part(state, *part.offset, part.bytes, dir / "cache.img");
		if (meta_.log_backing_offset)
			save_part(state, *meta_.log_backing_offset, meta_.backing_bytes, dir / "backing.img");
		std::ofstream(dir / "level") << level_ << "\n";
	}

	void report_failure(const SparseImage& state, SparseImage& work, Device& backing, const CachePart& part,
			    const char* kind, std::uint64_t entry, const std::string& problem)
	{
		++counts_.failures;
		if (counts_.failures > o_.max_failures)
			return;
		fs::path dir = fs::path(o_.keep) / fmt::format("{}-{}-entry{}-{}", fs::path(o_.recording).filename().string(),
							       kind, entry, counts_.total());
		fs::create_directories(dir);
		if (part.offset)
			save_part(state, *part.offset, part.bytes, dir / "cache.img");
		if (!meta_.ctl.empty()) { // every cache part, for wbdump
			save_part(state, meta_.log_cache_offset, meta_.cache_bytes, dir / "old-cache.img");
			if (meta_.log_cache2_offset)
				save_part(state, *meta_.log_cache2_offset, meta_.cache2_bytes, dir / "new-cache.img");
		}
		if (meta_.log_backing_offset)
			save_part(state, *meta_.log_backing_offset, meta_.backing_bytes, dir / "backing.img");
		else
			SparseImage("zero", meta_.backing_bytes).save((dir / "backing.img").string());
		save_device(backing, dir / "replayed-backing.img");
		(void)work;
		std::cout << fmt::format("FAIL {} state entry={} ({}): {}; images kept in {}\n", kind, entry,
					 fs::path(o_.recording).filename().string(), problem, dir.string())
			  << std::flush;
	}

	static void save_part(const SparseImage& image, std::uint64_t offset, std::uint64_t size, const fs::path& file)
	{
		int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0)
			throw IoError("cannot create", file.string(), errno);
		if (::ftruncate(fd, off_t(size)) != 0) {
			::close(fd);
			throw IoError("cannot size", file.string(), errno);
		}
		image.save_range(fd, 0, offset, size);
		::close(fd);
	}

	static void save_device(Device& dev, const fs::path& file)
	{
		std::vector<std::byte> all(dev.size_bytes());
		dev.read_exact(0, all);
		std::ofstream out(file, std::ios::binary);
		out.write(reinterpret_cast<const char*>(all.data()), std::streamsize(all.size()));
	}

	// logical: the offline replay's image, or null (--no-replay: none is written).
	void maybe_emit(const SparseImage& state, Device* logical, const CachePart& part, const std::string& kind,
			std::uint64_t entry, bool failing = false)
	{
		if (emit_fd_ < 0 || counts_.emitted >= o_.emit_max)
			return;
		// A wbctl recording: an equal share of the sample per device the
		// rule can choose, so that the early states (the old cache) do not
		// take it all before the switch.
		const std::uint64_t choices = meta_.ctl == "replace-cache" ? 3 : meta_.ctl == "detach" ? 2
												       : 1;
		if (!part.choice.empty() && emitted_by_choice_[part.choice] >= (o_.emit_max + choices - 1) / choices)
			return;
		// Before wbctl the states are those of mode both: a tenth of the
		// fraction there leaves the old cache's share to the switch.
		const double fraction = !meta_.ctl.empty() && phase_ == 0 ? o_.emit_fraction / 10 : o_.emit_fraction;
		std::uniform_real_distribution<double> coin(0.0, 1.0);
		if (failing != o_.emit_failing || (kind != "final" && !failing && coin(emit_rng_) >= fraction))
			return;
		if (!part.choice.empty())
			++emitted_by_choice_[part.choice];
		constexpr std::uint64_t align = 1 << 20;
		auto round = [](std::uint64_t v) { return (v + align - 1) / align * align; };
		// No cache part (the backing device alone): c_len 0 in the
		// manifest, kernel-check.sh maps the backing part with linear.
		const std::uint64_t cache_off = emit_end_;
		const std::uint64_t backing_off = cache_off + round(part.bytes);
		const std::uint64_t expected_off = logical ? backing_off + round(meta_.backing_bytes) : 0;
		emit_end_ = logical ? expected_off + round(meta_.backing_bytes) : backing_off + round(meta_.backing_bytes);
		if (::ftruncate(emit_fd_, off_t(emit_end_)) != 0)
			throw IoError("cannot size", o_.emit + "/states.img", errno);
		if (part.offset)
			state.save_range(emit_fd_, cache_off, *part.offset, part.bytes);
		if (meta_.log_backing_offset)
			state.save_range(emit_fd_, backing_off, *meta_.log_backing_offset, meta_.backing_bytes);
		if (logical) {
			std::vector<std::byte> all(meta_.backing_bytes);
			logical->read_exact(0, all);
			if (::pwrite(emit_fd_, all.data(), all.size(), off_t(expected_off)) != ssize_t(all.size()))
				throw IoError("cannot write", o_.emit + "/states.img", errno);
		}
		// The last two columns: the stamp rule's acknowledged writes (1..level)
		// and the last write that may have been issued (limit).
		const std::uint64_t limit = std::min(meta_.ops, level_ + meta_.flush_every);
		manifest_ << fmt::format("{} {} {} {} {} {} {} {} {} {}\n", counts_.emitted, kind, entry, cache_off / 512,
					 part.bytes / 512, backing_off / 512, expected_off / 512,
					 meta_.backing_bytes / 512, level_, limit);
		manifest_.flush();
		++counts_.emitted;
	}

	static const char* phase_name(unsigned phase)
	{
		return phase == 0 ? "before wbctl" : phase == 1 ? "while wbctl ran"
								: "after wbctl";
	}

	const Options& o_;
	const Meta& meta_;
	const LogWritesLog& log_;
	std::mt19937_64 rng_;
	std::mt19937_64 emit_rng_{0x5eed};
	std::uint64_t logged_size_;
	std::vector<std::uint64_t> newest_; // newest write <= level_ per sector
	std::uint64_t level_ = 0;
	bool marked_ = false;
	unsigned phase_ = 0;  // a wbctl recording: 0 before ctl-start, 1 while wbctl ran, 2 after ctl-done
	SparseImage initial_; // the logged device before the first entry
	Counts counts_;
	int emit_fd_ = -1;
	std::uint64_t emit_end_ = 0;
	std::map<std::string, std::uint64_t> emitted_by_choice_;
	std::ofstream manifest_;
	std::vector<FlushDomain> domains_;
	// Reused: a fresh multi-MiB buffer per state costs more than the check.
	std::vector<unsigned char> verify_buffer_;
	std::vector<std::byte> compare_a_, compare_b_;
};

int write_stamp_image(const Options& o, const Meta& meta)
{
	SparseImage image("stamps", meta.backing_bytes);
	unsigned char sec[StampWorkload::sector];
	for (std::uint64_t seq = 1; seq <= meta.ops; ++seq) {
		auto op = meta.workload.op_at(seq);
		for (unsigned i = 0; i < op.nr_sectors; ++i) {
			if (op.discard)
				std::memset(sec, 0, sizeof(sec));
			else
				meta.workload.stamp_sector(sec, op.sector + i, seq);
			image.write_exact((op.sector + i) * StampWorkload::sector,
					  std::as_bytes(std::span(sec, StampWorkload::sector)));
		}
	}
	image.save(o.stamp_image);
	return 0;
}

bool same_as_file(const SparseImage& image, std::uint64_t size, const fs::path& file, std::uint64_t& first_diff)
{
	std::ifstream in(file, std::ios::binary);
	if (!in || fs::file_size(file) != size)
		return first_diff = 0, false;
	std::vector<char> a(1 << 20);
	std::vector<std::byte> b(1 << 20);
	SparseImage copy = image;
	for (std::uint64_t off = 0; off < size; off += a.size()) {
		const std::size_t n = std::size_t(std::min<std::uint64_t>(a.size(), size - off));
		in.read(a.data(), std::streamsize(n));
		copy.read_exact(off, std::span(b.data(), n));
		if (std::memcmp(a.data(), b.data(), n) != 0) {
			for (std::size_t i = 0; i < n; ++i)
				if (a[i] != char(b[i]))
					return first_diff = off + i, false;
		}
	}
	return true;
}

// --save-state: the whole log's state (final), or that state with one replayed
// segment in the middle of the log damaged so that the replay stops there
// with good segments after it (midlog), or that damaged state after the
// offline replay with the clean mark (what `wbreplay --mark-clean` does to it:
// midlog-wbreplay), written as the base of a recording
// that starts from it: SAVE_TO/base.img, backing and cache as two parts of
// one device (the layout of mode both), and SAVE_TO/base.kv, the lines
// record-continue.sh copies into its meta.kv.
int save_state(const Options& o, const Meta& meta, const LogWritesLog& log)
{
	if (!meta.stamped || !meta.base.empty())
		throw UsageError("--save-state needs a stamped recording that starts from empty devices");
	const bool midlog = o.save_state == "midlog" || o.save_state == "midlog-wbreplay";
	if (o.save_state != "final" && !midlog)
		throw UsageError("--save-state takes final, midlog or midlog-wbreplay");
	if (o.save_to.empty())
		throw UsageError("--save-state needs --save-to");
	if (!meta.ctl.empty())
		throw UsageError("--save-state: not for a recording of wbctl (ctl=)");
	const std::uint64_t logged = meta.logged_size();
	SparseImage state("logged", logged);
	std::uint64_t level = 0;
	for (const auto& e : log.entries()) {
		if (e.is_mark() && e.mark.size() > 1 && e.mark[0] == 'f')
			level = std::max<std::uint64_t>(level, std::stoull(e.mark.substr(1)));
		apply_entry(log, e, state);
	}
	SparseImage out("base", meta.backing_bytes + meta.cache_bytes);
	std::vector<std::byte> buf(1 << 20);
	auto copy = [&](std::uint64_t from, std::uint64_t to, std::uint64_t size) {
		for (std::uint64_t done = 0; done < size; done += buf.size()) {
			auto chunk = std::span(buf.data(), std::size_t(std::min<std::uint64_t>(buf.size(), size - done)));
			state.read_exact(from + done, chunk);
			if (std::any_of(chunk.begin(), chunk.end(), [](std::byte b) { return b != std::byte{0}; }))
				out.write_exact(to + done, chunk);
		}
	};
	if (meta.log_backing_offset)
		copy(*meta.log_backing_offset, 0, meta.backing_bytes);
	copy(meta.log_cache_offset, meta.backing_bytes, meta.cache_bytes);

	std::string damage;
	if (midlog) {
		DeviceWindow cache(out, "cache", meta.backing_bytes, meta.cache_bytes);
		ScanOptions scan_options;
		scan_options.backing_bytes = meta.backing_bytes;
		const LogScan scan = scan_log(cache, scan_options);
		if (scan.log.size() < 3)
			throw UsageError(fmt::format("midlog: the log has {} segments, too few to stop in its middle", scan.log.size()));
		// As tests/vm/scenarios/75: a few segments below the superblock
		// record when there is one; else the earliest that stops the walk,
		// which leaves the most good segments beyond the stop point: their
		// old data must not come back over new writes that reuse their ids.
		// A damaged segment the walk takes for a torn rewrite (wb_torn_rewrite:
		// one of the first steps of a full ring) does not stop it: the
		// victim lies past those.
		const std::uint64_t nr = scan.geometry.nr_segments;
		const std::uint64_t oldest = wb_oldest_slot(scan.max_id, nr);
		auto stops = [&](std::size_t i) {
			const std::uint64_t slot = scan.log[i].slot;
			const std::uint64_t step = slot >= oldest ? slot - oldest : slot + nr - oldest;
			return !wb_torn_rewrite(step, scan.log[i].id, scan.max_id, nr);
		};
		std::optional<std::size_t> victim;
		for (std::size_t i = 1; i + 1 < scan.log.size(); ++i)
			if (stops(i) && (!victim || (scan.sb_record >= 3 && scan.log[i].id == scan.sb_record - 3)))
				victim = i;
		if (!victim)
			throw UsageError(fmt::format("midlog: no segment of the log's {} would stop the replay", scan.log.size()));
		const LogSegment& seg = scan.log[*victim];
		// A byte the checksum covers in both of its readings (docs/FORMAT.md,
		// "Checksum"): in metablock 0, below the length; without blocks,
		// the stored checksum itself (the whole metablock area is then the
		// tail a reading may take as zero).
		const std::uint64_t at = scan.geometry.slot_offset(seg.slot) +
					 (seg.length > 0 ? WB_METABLOCK_OFFSET(0) : WB_SEG_CHECKSUM_OFFSET);
		std::byte b[1];
		cache.read_exact(at, b);
		b[0] ^= std::byte{0xff};
		cache.write_exact(at, b);
		const LogScan after = scan_log(cache, scan_options);
		if (!after.stop_slot || *after.stop_slot != seg.slot || after.discarded_segments == 0)
			throw UsageError(fmt::format("midlog: damaging segment {} did not stop the replay there", seg.id));
		damage = fmt::format("damaged_segment={} slot={} record={} max_id={} discarded={}", seg.id, seg.slot,
				     scan.sb_record, scan.max_id, after.discarded_segments);
		if (o.save_state == "midlog-wbreplay") {
			DeviceWindow backing(out, "backing", 0, meta.backing_bytes);
			auto replayed = std::make_shared<LogScan>(after);
			ReplayOptions replay_options;
			replay_options.backing_sectors = meta.backing_bytes / StampWorkload::sector;
			execute_replay(replay_plan(replayed, replay_options), cache, backing);
			mark_cache_clean(cache, *replayed);
			const LogScan clean = scan_log(cache, scan_options);
			damage += fmt::format(" wbreplay_mark_clean=yes then: last_flushed={} last_writeback={} good_after_stop={}",
					      clean.last_flushed_id, clean.last_writeback_id, clean.discarded_segments);
		}
	}
	fs::create_directories(o.save_to);
	out.save((fs::path(o.save_to) / "base.img").string());
	std::ofstream kv(fs::path(o.save_to) / "base.kv");
	kv << "source=" << fs::path(o.recording).filename().string() << " " << o.save_state << "\n";
	kv << "source_target=" << meta.target << "\nsource_mode=" << meta.mode << "\n";
	kv << "seed=" << meta.workload.seed << "\npartial_pct=" << meta.workload.partial_pct << "\n";
	if (meta.workload.discard_pct)
		kv << "discard_pct=" << meta.workload.discard_pct << "\n";
	kv << "backing_bytes=" << meta.backing_bytes << "\ncache_bytes=" << meta.cache_bytes << "\n";
	kv << "source_ops=" << meta.ops << "\n";
	if (!midlog)
		kv << "prior_level=" << level << "\nprior_limit=" << std::min(meta.ops, level + meta.flush_every)
		   << "\nprior_any=0\n";
	else
		kv << "prior_level=0\nprior_limit=0\nprior_any=1\nsource_damage=" << damage << "\n";
	std::cout << fmt::format("saved the {} state of {} (acknowledged writes 1..{}) in {}{}{}\n", o.save_state,
				 fs::path(o.recording).filename().string(), level, o.save_to, damage.empty() ? "" : ": ",
				 damage);
	return 0;
}

int run(const Options& o)
{
	const fs::path dir(o.recording);
	const Meta meta = read_meta(dir / "meta.kv");
	if (!o.stamp_image.empty())
		return write_stamp_image(o, meta);
	if (!o.save_state.empty()) {
		LogWritesLog log((dir / "log.img").string());
		return save_state(o, meta, log);
	}
	const auto started = std::chrono::steady_clock::now();
	LogWritesLog log((dir / "log.img").string());
	std::uint64_t barriers = 0, marks = 0, writes = 0;
	for (const auto& e : log.entries()) {
		barriers += e.is_barrier();
		marks += e.is_mark();
		writes += e.has_data();
	}
	Checker checker(o, meta, log);
	SparseImage final_image = checker.run();
	const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

	// The replayer itself: the whole log must rebuild what the VM left on the logged device.
	std::uint64_t diff = 0;
	bool replayer_ok = true;
	if (fs::exists(dir / "final-data.img") && !same_as_file(final_image, checker.logged_size(), dir / "final-data.img", diff)) {
		std::cout << fmt::format("FAIL log replay: the whole log differs from final-data.img at byte {}\n", diff);
		replayer_ok = false;
	}
	const auto& c = checker.counts();
	std::cout << fmt::format("workload {}: target={} mode={} seed={} ops={} flush_every={} entries={} writes={} "
				 "barriers={} marks={} flush_domains={}\n",
				 dir.filename().string(), meta.target, meta.mode, meta.workload.seed, meta.ops, meta.flush_every,
				 log.entries().size(), writes, barriers, marks, checker.domain_names());
	std::cout << fmt::format("states_checked_a={} flush={} subset={} torn={} torn_rewrite_skipped={} recovery_cuts={} "
				 "failures={} emitted={} seconds={:.1f}{}\n",
				 c.total(), c.flush, c.subset, c.torn, c.rewrites, c.recovery, c.failures, c.emitted, seconds,
				 meta.stamped ? "" : fmt::format(" unformatted={}", c.unformatted));
	std::string refused_by;
	for (const auto& [name, n] : c.refused)
		refused_by += fmt::format(" {}={}", name, n);
	std::cout << fmt::format("refused={}{} lost_in_flight_skipped={}\n", c.refused_total(), refused_by,
				 c.lost_in_flight);
	if (!meta.ctl.empty()) {
		std::string choices;
		for (const auto& [name, n] : c.by_choice)
			choices += fmt::format(" {}={}", name, n);
		std::cout << fmt::format("ctl={} states_by_device:{} states_by_phase: before={} during={} after={} "
					 "failures_by_phase: before={} during={} after={}\n",
					 meta.ctl, choices, c.by_phase[0], c.by_phase[1], c.by_phase[2],
					 c.failures_by_phase[0], c.failures_by_phase[1], c.failures_by_phase[2]);
	}
	return (c.failures || !replayer_ok) ? 1 : 0;
}

} // namespace

int main(int argc, char** argv)
{
	Options o;
	CLI::App app{"Enumerates and checks the crash states of a dm-log-writes recording of a writeboost target."};
	app.add_option("recording", o.recording, "directory made by tests/crash/record.sh")->required();
	app.add_option("--subsets", o.subsets, "subset states per window (all subsets if fewer)");
	app.add_option("--torn", o.torn, "torn-write states per window");
	app.add_option("--seed", o.seed, "seed of the random choices");
	app.add_option("--max-windows", o.max_windows, "check only the first N windows (0: all)");
	app.add_option("--keep", o.keep, "where failing states' images go");
	app.add_option("--emit", o.emit, "write a sample of states for the kernel check into this directory");
	app.add_option("--emit-max", o.emit_max, "at most this many emitted states");
	app.add_option("--emit-fraction", o.emit_fraction, "probability that a passing state is emitted");
	app.add_option("--max-failures", o.max_failures, "keep images of at most this many failures");
	app.add_flag("--emit-failing", o.emit_failing, "emit the failing states instead of passing ones");
	app.add_flag("--torn-any-order{true},--torn-prefix-only{false}", o.torn_any_order,
		     "tear writes at any subset of their sectors (the default), or only at a prefix");
	app.add_option("--recovery-every", o.recovery_every, "cut and rerun the offline replay on every Nth state (0: never)");
	app.add_option("--stamp-image", o.stamp_image, "write the image of the whole workload here and stop");
	app.add_option("--save-state", o.save_state,
		       "final|midlog|midlog-wbreplay: write that state as the base of a new recording and stop");
	app.add_option("--save-to", o.save_to, "directory for --save-state");
	app.add_option("--state-check", o.state_check, "command that checks each state's logical image (workload=ext4)");
	app.add_option("--work-dir", o.work_dir, "where --state-check's images go");
	app.add_flag("--one-flush-domain", o.one_flush_domain,
		     "model every logged device behind one volatile cache (a flush of one makes all durable), "
		     "instead of one cache per device");
	app.add_option("--keep-refused", o.keep_refused,
		       "keep the images of states whose log the kernel would refuse here (cache.img, backing.img, level)");
	app.add_option("--max-refused", o.max_refused,
		       "keep images of at most this many refused states (and as many with a segment lost in flight)");
	app.add_option("--keep-lost", o.keep_lost,
		       "keep the images of states whose replay walk skipped a segment lost in flight here");
	app.add_flag("--no-replay", o.no_replay,
		     "a cache of another format: count the states and emit them with their acknowledged level, check nothing");
	return wbkit::run_tool("wbcrash", app, argc, argv, [&] { return run(o); });
}
