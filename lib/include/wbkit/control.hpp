// Changing a live writeboost device (wbctl): flush its dirty data home,
// detach the cache (switch the device to a linear mapping of its backing
// device), attach one (switch a linear mapping to a writeboost table),
// replace it (a writeboost table over another cache) and switch its mode
// (the same table with write_around_mode 1 or 0), each with one short
// suspend, for dm-writeboost 2.2.17 and dm-wbkit alike.
//
// The decisions are here, the system calls behind one interface (System):
// dmsetup's table, status, suspend, load, clear, resume and the drop_caches
// message, and the few device operations around them. wbctl passes the real
// one (DmsetupSystem); the unit tests pass a fake that scripts the answers
// and records the calls, so every step and every failure path is tested
// without a kernel.
//
// The table lines used:
//
//   0 <sectors> linear <backing> 0
//   0 <sectors> writeboost <backing> <cache> [<count> <key> <value> ...]
//
// Every failure leaves the device usable: resumed, with the table it had
// (a loaded inactive table is cleared), or says plainly that it could not.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wbkit/dmsetup.hpp"
#include "wbkit/errors.hpp"
#include "wbkit/wb_status.hpp"

namespace wbkit {

using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------
// Table lines

// The one target of a device's table (`dmsetup table NAME`). Throws Error
// when the table has no target, more than one, or one that does not start
// at sector 0: wbctl changes only devices that are one target wide.
DmTargetLine single_target(std::string_view table_text, std::string_view name);

// A linear target's parameters: `<device> <offset>`. nullopt for another
// shape.
struct LinearParams {
	std::string device;
	std::uint64_t offset = 0;
};
std::optional<LinearParams> parse_linear_params(std::string_view params);

// `0 <sectors> linear <backing> 0`
std::string linear_table_line(std::uint64_t sectors, std::string_view backing);
// `0 <sectors> writeboost <backing> <cache>` and, when args is not empty,
// `<2 x args> <key> <value> ...`
std::string writeboost_table_line(std::uint64_t sectors, std::string_view backing, std::string_view cache,
				  const std::vector<std::pair<std::string, std::string>>& args);

// Parses `key=value` or `key value` words of wbctl's command line into the
// table's optional arguments, checking the keys both modules know and that
// each value is a decimal number. Throws UsageError.
std::vector<std::pair<std::string, std::string>> parse_table_options(std::span<const std::string> words);

// ---------------------------------------------------------------------------
// What a cache device holds (attach's and create's check)

// The kernel's rule (dm-wbkit-format.c, wb_check_cache_signature; the
// format rule of kmod/README.md), from the first and the last MiB of the
// device: a valid superblock is a cache, zeros at both ends (or a dm-wbkit
// cache whose first 4 KiB were zeroed) are blank, anything else is foreign,
// named by the kernel's list where it knows it, else by the first non-zero
// byte. The tools also ask libblkid (probe_signature), which knows more.
inline constexpr std::size_t cache_check_bytes = 1 << 20;
struct CacheContent {
	enum class Kind {
		blank,      // zeros in the first and last MiB: the target formats it
		writeboost, // a valid superblock (WBst): the target replays its log
		foreign,    // anything else: refused
	};
	Kind kind = Kind::blank;
	// foreign: "an ext2/3/4 file system", "non-zero data at byte 4096",
	// "ext4 (found by libblkid)"; writeboost: "a writeboost cache ..."
	std::string what;
};
// head: the first cache_check_bytes, tail: the last (they overlap on a
// device under 2 MiB); device_bytes at least cache_check_bytes.
CacheContent classify_cache_content(std::span<const std::byte> head, std::span<const std::byte> tail,
				    std::uint64_t device_bytes);

// The recovery rule of detach and replace-cache (wbctl(8), CRASHES): after a
// power cut at any step of the switch, the device to construct is
//   - the new cache (replace-cache), when its sector 0 has the writeboost
//     magic: the target formatted it at the resume, after the old cache was
//     written back and wiped;
//   - else the old cache, when its sector 0 has the magic: the switch had
//     not committed, the target replays the old log as before it;
//   - else the backing device alone: the old cache was wiped, which wbctl
//     does only once every block is on the backing device and flushed.
// A span shorter than 4 bytes (or empty: detach, no new cache) has no magic.
enum class SwitchCrashDevice { old_cache,
			       new_cache,
			       backing };
SwitchCrashDevice device_after_switch_crash(std::span<const std::byte> old_cache_sector0,
					    std::span<const std::byte> new_cache_sector0 = {});
const char* switch_crash_device_name(SwitchCrashDevice device); // "old-cache", "new-cache", "backing"

// ---------------------------------------------------------------------------
// The system: dmsetup and devices

// A dmsetup command that failed: its words and what dmsetup said.
class DmsetupError : public Error {
public:
	using Error::Error;
};

// A drop_caches message running in the background.
class PendingMessage {
public:
	virtual ~PendingMessage() = default;
	// nullopt while it runs; then its exit status and stderr.
	virtual std::optional<ProgramOutput> poll() = 0;
	// Ends it (a signal: both modules' drop_caches stop waiting and leave
	// the device as it is; writeback goes on in the background) and waits.
	virtual ProgramOutput stop() = 0;
};

class System {
public:
	virtual ~System() = default;
	// `dmsetup table NAME`, `dmsetup status NAME`: their output. Throw DmsetupError.
	virtual std::string table(const std::string& name) = 0;
	virtual std::string status(const std::string& name) = 0;
	// `dmsetup suspend [--nolockfs] NAME`, `dmsetup resume|clear NAME`,
	// `dmsetup load NAME --table LINE`. Throw DmsetupError.
	virtual void suspend(const std::string& name, bool lockfs) = 0;
	virtual void resume(const std::string& name) = 0;
	virtual void load(const std::string& name, const std::string& table_line) = 0;
	virtual void clear(const std::string& name) = 0;
	// Whether a device-mapper device of that name exists (`dmsetup info`).
	virtual bool exists(const std::string& name) = 0;
	// `dmsetup create NAME --table LINE`, `dmsetup remove NAME`. Throw DmsetupError.
	virtual void create(const std::string& name, const std::string& table_line) = 0;
	virtual void remove(const std::string& name) = 0;
	// `dmsetup message NAME 0 drop_caches` in the background.
	virtual std::unique_ptr<PendingMessage> start_drop_caches(const std::string& name) = 0;
	// An empty flush (fsync) to the device, so that upstream writes its
	// open RAM buffer segment, which its drop_caches waits for. Best effort.
	virtual void flush_device(const std::string& name) = 0;
	// The size in 512-byte sectors of a block device named `major:minor`.
	virtual std::uint64_t device_sectors(const std::string& devno) = 0;
	// Zeroes the first and last MiB of the old cache device `major:minor` and syncs
	// it: the old superblock and segment headers are gone, the targets
	// format it when it is next used. Called while the device `holder`
	// (a device-mapper name) is suspended and its old table still holds
	// the cache: that table must be its only holder, and it does no I/O
	// until it is destroyed (the open is not exclusive, it cannot be).
	virtual void wipe_cache(const std::string& devno, const std::string& holder) = 0;
	virtual Clock::time_point now() = 0;
	virtual void sleep(std::chrono::milliseconds duration) = 0;
};

// The real system: dmsetup (resolved by find_program), run in its own
// process group so that a Ctrl-C reaches wbctl only.
class DmsetupSystem : public System {
public:
	explicit DmsetupSystem(std::string program = "dmsetup");
	std::string table(const std::string& name) override;
	std::string status(const std::string& name) override;
	void suspend(const std::string& name, bool lockfs) override;
	void resume(const std::string& name) override;
	void load(const std::string& name, const std::string& table_line) override;
	void clear(const std::string& name) override;
	bool exists(const std::string& name) override;
	void create(const std::string& name, const std::string& table_line) override;
	void remove(const std::string& name) override;
	std::unique_ptr<PendingMessage> start_drop_caches(const std::string& name) override;
	void flush_device(const std::string& name) override;
	std::uint64_t device_sectors(const std::string& devno) override;
	void wipe_cache(const std::string& devno, const std::string& holder) override;
	Clock::time_point now() override { return Clock::now(); }
	void sleep(std::chrono::milliseconds duration) override;

private:
	std::string run(const std::vector<std::string>& args);
	std::string program_;
};

// The path of a block device `major:minor`: /dev/<DEVNAME of its uevent>,
// checked to be that device. Throws IoError.
std::string block_device_path(const std::string& devno, const std::string& sysfs_root = "/sys");

// The device's writeboost target: its table (the single target, parsed) and
// its status. Throws Error when it is not one writeboost target.
struct WbTarget {
	DmTargetLine line;
	WbTable table;
	WbStatus status;
};
WbTarget read_wb_target(System& system, const std::string& name);

// ---------------------------------------------------------------------------
// Flush

// What a flush has to write back: the dirty blocks when it started, and the
// segments up to target_id (the newest one then: every block dirty then is
// in one of them).
struct FlushGoal {
	std::uint64_t start_dirty = 0;
	std::uint64_t start_writeback_id = 0;
	std::uint64_t target_id = 0;
};
FlushGoal flush_goal(const WbStatus& status);

struct FlushProgress {
	std::uint64_t dirty_left = 0;     // nr_dirty_cache_blocks now (new writes count too)
	std::uint64_t segments_done = 0;  // written back since the start, of
	std::uint64_t segments_total = 0; // target_id - start_writeback_id
	// segments_done / segments_total (1 when there was nothing to do)
	double fraction = 1.0;
	// Every block dirty at the start is home: no dirty block left, or
	// writeback reached target_id.
	bool complete = false;
	// The start's dirty bytes x fraction, and the start's: for a reporter
	// that counts bytes (rate and time left follow from them).
	std::uint64_t done_bytes = 0;
	std::uint64_t total_bytes = 0;
};
FlushProgress flush_progress(const FlushGoal& goal, const WbStatus& now);

struct FlushOptions {
	std::chrono::milliseconds poll_interval{500};
	// Give up (stop the message, return timed_out) after this long.
	std::optional<std::chrono::milliseconds> timeout;
	// Asked between polls; true: stop the message and return interrupted.
	std::function<bool()> interrupted;
	std::function<void(const FlushProgress&)> progress;
};

struct FlushResult {
	enum class End { done,
			 interrupted,
			 timed_out };
	End end = End::done;
	std::uint64_t start_dirty = 0;
	std::uint64_t dirty_left = 0; // at the end (new writes may have made more)
	std::chrono::milliseconds took{0};
};

// Writes every block dirty at the start home, while the device stays in
// use: the drop_caches message in the background, its progress from the
// status. Done when the message returns or the status shows the goal
// reached (upstream's message waits for no dirty block at all, which a
// device under steady writes may never reach; then it is stopped). Throws
// DmsetupError when the message fails (a dead target, EBUSY while the
// device suspends), Error when the device is not a writeboost device.
FlushResult flush(System& system, const std::string& name, const FlushOptions& options);

// ---------------------------------------------------------------------------
// Detach, attach, replace-cache and mode
//
// detach, replace-cache and mode share one switch (drain_and_switch in
// control_switch.cpp): flush in rounds, load the new table, suspend, write back
// (drop_caches on the suspended device) what came in after the flush,
// resume; or, when that write-back takes too long, put the old table back
// and try again. Only the new table differs: linear, writeboost over
// another cache, writeboost with the other write_around_mode.

struct SwitchOptions {
	FlushOptions flush;
	// The drained switches (detach, replace-cache, mode): suspend at most
	// this many times before giving up.
	unsigned attempts = 5;
	// The drained switches: while suspended, blocks written after the flush
	// are written back in place when the write-back takes less than this;
	// otherwise the device is resumed and flushed again.
	std::chrono::milliseconds max_stall{2000};
	// The drained switches: flush again while the last flush left more
	// than small_dirty blocks (written during it) and fewer than the one
	// before, at most flush_rounds flushes before each suspend.
	unsigned flush_rounds = 4;
	std::uint64_t small_dirty = 32;
	// Detach, replace-cache: wipe the old cache device (default; a cache
	// whose old log a later attach, or a construction after a crash,
	// replayed would write stale data over newer). The wipe is the
	// switch's commit point: it happens while the device is suspended,
	// after the write-back and before the resume (wbctl(8), CRASHES).
	bool wipe_cache = true;
	// Freeze a mounted file system for the suspend (dmsetup's default).
	// Off by default: a table switch keeps every byte the device reads, so
	// the file system needs no consistent point on disk, and the freeze
	// (a journal commit and its writes) is most of the stall otherwise.
	bool lockfs = false;
	// Lines for a person, as the steps happen.
	std::function<void(const std::string&)> say;
};

struct SwitchResult {
	std::chrono::milliseconds stall{0};            // suspend to resume of the switch
	std::vector<std::chrono::milliseconds> stalls; // every suspend, the switch's last
	// The switch's suspend, in parts: dmsetup suspend (queued I/O drains, the
	// RAM buffer reaches the cache device), the write-back of what came in
	// after the flush (the drained switches), load (mode on dm-writeboost
	// loads while suspended) and resume.
	std::chrono::milliseconds suspend_took{0};
	std::chrono::milliseconds writeback_took{0};
	std::chrono::milliseconds resume_took{0};
	// The dirty blocks a suspended write-back left at max_stall
	// (read only then: a write-back that ends is its own check).
	std::uint64_t dirty_at_suspend = 0;
	std::string old_table;
	std::string new_table;
	unsigned attempts = 0;
	FlushResult flushed;                   // the first flush (the drained switches)
	bool drained = false;                  // a drained switch: flushed, written back while suspended
	bool cache_wiped = false;              // detach, replace-cache: the old cache's first and last MiB were zeroed
	std::optional<std::string> wipe_error; // detach, replace-cache: the old cache could not be wiped
	// mode: the mode asked for ("write-back", "write-around"), and whether
	// the table changed (false: it had that mode, nothing was done).
	std::optional<std::string> mode;
	bool changed = true;
};

// Flush (in rounds), load the linear table (inactive), suspend, write back
// what came in meanwhile and resume, which swaps the linear table in; or,
// when that write-back takes longer than max_stall, clear the linear table,
// resume and flush again. Throws Error (the device left as
// it was: resumed, its writeboost table live) when a step fails or the
// attempts run out; a flush interrupted by options.flush.interrupted throws
// InterruptedError.
SwitchResult detach(System& system, const std::string& name, const SwitchOptions& options);

struct AttachRequest {
	std::string cache;       // as the table line names it: a path or major:minor
	std::string cache_devno; // major:minor, to compare with the backing device
	std::vector<std::pair<std::string, std::string>> args;
	// Called with the backing device (major:minor) before anything is
	// loaded: checks the cache device (prepare_attach_cache), throws to stop.
	std::function<void(const std::string& backing_devno)> check_cache;
};

// What attach's check found on the cache device.
struct CacheCheck {
	std::string devno; // major:minor
	std::uint64_t bytes = 0;
	CacheContent content;
	// --force: what was overridden, worded; the first and last MiB were zeroed.
	std::optional<std::string> overridden;
};

// The cache device for attach: a block device (opened exclusively: refused
// when mounted or held by a target), not the backing device nor the device
// itself (`not_devnos`, major:minor), large enough for the superblock region
// and one segment, and blank: anything else (a file system, another cache's
// log, unknown data) is refused (RefusedError) unless force, which zeroes
// its first and last MiB so that the target formats a fresh cache.
CacheCheck prepare_attach_cache(const std::string& path, const std::vector<std::string>& not_devnos, bool force);

// The device must be one linear target over the whole of its backing device
// from offset 0. Loads the writeboost table (the target checks the cache:
// a refusal changes nothing), suspends, resumes (the target formats or
// replays the cache here). A failed resume puts the linear table back.
SwitchResult attach(System& system, const std::string& name, const AttachRequest& request,
		    const SwitchOptions& options);

// The table's optional arguments with the tunables as the target runs them
// now, for a table that replaces it (replace-cache, mode): a message changes
// writeback_threshold, sync_data_interval, update_sb_record_interval and
// read_cache_threshold, and `dmsetup table` shows upstream's as the table
// line typed them and neither module's keys that the line did not give.
// The status shows those four: where one differs from the table's value
// (0, the default, when absent), the status's value is written (in place,
// or appended). Everything else is kept as it is.
std::vector<std::pair<std::string, std::string>> live_table_args(const WbTarget& target);

struct ReplaceRequest {
	std::string cache;       // the new cache, as the table line names it
	std::string cache_devno; // major:minor: refused when it is the old cache or the backing device
	// Called with the backing device and the old cache (major:minor) before
	// anything is loaded: checks the new cache (prepare_attach_cache),
	// throws to stop.
	std::function<void(const std::string& backing_devno, const std::string& old_cache_devno)> check_cache;
};

// A writeboost device's cache swapped for another, with the table's
// options as the target runs them (live_table_args): the switch of detach with the table
// `0 <sectors> writeboost <backing> <new cache> [<its options>]`. Loaded
// before the suspend (the constructor only reads a cache other than the
// live one on dm-wbkit; upstream formats the blank new cache in its
// constructor); the resume formats it on dm-wbkit. After it, every block
// is on the backing device and the new cache is empty. A failed resume
// puts the old table back (nothing is dirty on the old cache then). The
// old cache is wiped as detach wipes it (wipe_cache).
SwitchResult replace_cache(System& system, const std::string& name, const ReplaceRequest& request,
			   const SwitchOptions& options);

// The table's write_around_mode (0 when absent).
bool table_write_around(const WbTable& table);

// The same table with write_around_mode 1 (write_around) or 0, every other
// option kept (live_table_args), by the switch of detach: dirty data is written back first
// (dm-wbkit would write it back in the new instance's preresume, inside
// the stall; upstream's write-around constructor formats the cache and
// loses it). Nothing is done when the table has the mode already
// (changed = false). On dm-writeboost the table is loaded only while the
// device is suspended and written back: its constructor replays or formats
// the cache the live instance uses. Refused on dm-writeboost from
// write-around to write-back when the write-around instance caches reads
// (read_cache_threshold): upstream would replay those copies after
// write-around writes changed the backing device (kmod/README.md).
SwitchResult set_mode(System& system, const std::string& name, bool write_around, const SwitchOptions& options);

// ---------------------------------------------------------------------------
// Create

// What create's check found on the two devices.
struct CreateCheck {
	std::string backing_devno; // major:minor
	std::uint64_t backing_sectors = 0;
	// Set when a cache is given: as attach's check, but a writeboost log
	// is what the target replays, not a refusal.
	std::optional<CacheCheck> cache;
	// A writeboost log on the cache: what the target will write home from
	// it (the kernel's replay rule over the log, wbkit/log_scan.hpp).
	std::optional<std::uint64_t> replay_dirty_blocks;
	std::optional<std::uint64_t> replay_segments;
};

// The devices of a new writeboost device (or, without a cache, of a linear
// mapping to attach a cache to later): the backing device a block device
// opened exclusively (not mounted, not held by a target); the cache as for
// attach (prepare_attach_cache: free, not the backing device, large
// enough, blank unless force), except that a writeboost log is kept for
// the target to replay, after a read-only scan: a log the target would
// refuse, or one that names blocks past the end of this backing device
// (the log of another backing device), is refused (RefusedError) unless
// force, which zeroes the cache's first and last MiB as for foreign content (the
// log's dirty blocks are then lost, and the warning counts them).
CreateCheck prepare_create_devices(const std::string& backing, const std::optional<std::string>& cache, bool force);

struct CreateRequest {
	std::string backing;              // as the table line names it
	std::optional<std::string> cache; // none: `0 <sectors> linear <backing> 0`
	std::vector<std::pair<std::string, std::string>> args;
	// Called before anything is created (prepare_create_devices), throws
	// to stop; returns the backing device's size in sectors.
	std::function<std::uint64_t()> check_devices;
};

struct CreateResult {
	std::string table;
	std::chrono::milliseconds took{0}; // dmsetup create: the target's constructor and first resume
	// The status right after it (writeboost): the dirty blocks the target
	// replayed from the log and holds now.
	std::optional<std::uint64_t> dirty_blocks;
};

// Refuses a name that exists; checks the devices; `dmsetup create`; reads
// the table back (the target it asked for) and, for writeboost, the status.
// A create that fails leaves no device behind (one dmsetup left is removed).
CreateResult create(System& system, const std::string& name, const CreateRequest& request);

// The /etc/writeboosttab line for a device (writeboosttab(5), as Debian's
// writeboost package and the initramfs script read it): `NAME BACKING CACHE`
// and the options as `key=value,...`. The options are sent as messages
// there, so those fixed at construction (write_around_mode,
// nr_read_cache_cells) are refused (UsageError).
std::string writeboosttab_line(const std::string& name, const std::string& backing, const std::string& cache,
			       const std::vector<std::pair<std::string, std::string>>& args);
// RefusedError when the file names the device already (a missing file
// names nothing).
void check_writeboosttab(const std::string& path, const std::string& name);
// The file with that line appended (atomically: a copy renamed into
// place). Refuses (RefusedError) a file that already names the device.
void append_writeboosttab(const std::string& path, const std::string& name, const std::string& line);

// wbctl's --json documents (schema wbctl/1): one for a switch (detach,
// attach, replace-cache, mode), one for a flush.
std::string switch_result_json(std::string_view command, std::string_view name, const SwitchResult& result,
			       const std::optional<CacheCheck>& cache = std::nullopt);
std::string flush_result_json(std::string_view name, const FlushResult& result);
std::string create_result_json(std::string_view name, const CreateResult& result, const CreateCheck& check,
			       const std::optional<std::string>& tab_path);

// Ctrl-C while wbctl waited for a flush: the message was stopped and the
// device is as it was.
class InterruptedError : public Error {
public:
	using Error::Error;
	ExitCode exit_code() const noexcept override { return ExitCode::damage; }
};

} // namespace wbkit
