// The log verifier: the checksums of a headers-only scan, checked by
// threads in ring order while a replay writes what verified already.
#include "wbkit/log_scan.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "scan/segment_read.hpp"
#include "wbkit/errors.hpp"

namespace wbkit {

bool LogVerifier::applicable(const LogScan& headers)
{
	return !headers.verified && headers.stop_reason == StopReason::not_verified && headers.geometry.nr_segments > 0;
}

struct LogVerifier::State {
	State(Device& cache, const LogScan& headers)
		: cache(cache), headers(headers), nr(headers.geometry.nr_segments),
		  oldest(headers.max_id ? wb_oldest_slot(headers.max_id, nr) : 0), chunks((nr + chunk_steps - 1) / chunk_steps)
	{
		for (std::uint64_t step = 0; step < std::min<std::uint64_t>(WB_REWRITE_WINDOW, nr); ++step)
			if (wb_torn_rewrite(step, headers.slots[wb_ring_slot(oldest, step, nr)].id, headers.max_id, nr))
				last_rewrite_step = step;
	}

	// Ring steps per unit of work: 16 segments, 8 MiB.
	static constexpr std::uint64_t chunk_steps = 16;

	std::uint64_t ring_step(std::uint64_t slot) const { return slot >= oldest ? slot - oldest : slot + nr - oldest; }

	// A slot whose checksum matched only with its metablock tail read as zero.
	struct Tail {
		std::uint64_t slot = 0;
		SegmentHeader header;
		unsigned ignored_metablocks = 0;
	};

	// Valid, as the verifying scan would find it: one read of the header
	// and the written data blocks (a read error is a failure as much as a
	// checksum that does not match), and a header unchanged since the scan.
	// Valid only with the metablock tail read as zero: the slot goes to
	// tails, with how many metablocks that ignores.
	bool verify_slot(std::uint64_t slot, AlignedBuffer& buffer, SegmentCrcStream& crc, std::vector<Tail>& tails) const
	{
		const SlotInfo& info = headers.slots[slot];
		if (info.state == SlotState::empty)
			return true;
		if (info.state != SlotState::unverified || info.length > blocks_per_segment)
			return false;
		const std::uint64_t offset = headers.geometry.slot_offset(slot);
		auto header_block = buffer.span().first(block_size);
		if (cache.read_at(offset, header_block) != 0)
			return false;
		const SegmentHeader h = parse_segment_header(header_block);
		if (h.id != info.id || h.length != info.length || h.checksum != info.stored_checksum)
			return false;
		const detail::SegmentChecksum sum =
			detail::read_segment_checksum(cache, offset, header_block, h.length, buffer.span().subspan(block_size), crc);
		if (sum.error != 0)
			return false;
		const ChecksumVerdict verdict = checksum_verdict(h.checksum, sum.computed);
		if (verdict.tail_ignored())
			tails.push_back({.slot = slot, .header = h, .ignored_metablocks = verdict.ignored_metablocks});
		return verdict.state == SlotState::valid;
	}

	// Ring steps from the oldest on that verified valid; under the mutex.
	// A failing chunk's steps before the failure were checked in order.
	std::uint64_t valid_steps() const
	{
		if (failed_step != ~0ULL && failed_step / chunk_steps == prefix)
			return failed_step;
		return std::min(nr, prefix * chunk_steps);
	}

	void work()
	{
		// A chunk that throws is neither done nor failed: whoever waits for
		// it is told no once every thread has stopped.
		try {
			AlignedBuffer buffer(block_size + detail::segment_piece_bytes);
			SegmentCrcStream crc;
			std::vector<Tail> chunk_tails;
			for (;;) {
				// Chunks are taken in order: when one fails, every chunk before it was taken and is finished.
				const std::uint64_t chunk = next_chunk.fetch_add(1);
				if (chunk >= chunks || stop.load() || chunk * chunk_steps > first_failure.load())
					break;
				const std::uint64_t end = std::min(nr, (chunk + 1) * chunk_steps);
				std::uint64_t bad_step = ~0ULL;
				chunk_tails.clear();
				for (std::uint64_t step = chunk * chunk_steps; step < end; ++step)
					if (!verify_slot(wb_ring_slot(oldest, step, nr), buffer, crc, chunk_tails)) {
						bad_step = step;
						break;
					}
				std::lock_guard lock(mutex);
				tails.insert(tails.end(), chunk_tails.begin(), chunk_tails.end());
				if (bad_step != ~0ULL) {
					failed_step = std::min(failed_step, bad_step);
					first_failure = failed_step;
				} else {
					done[chunk] = true;
					while (prefix < chunks && done[prefix])
						++prefix;
				}
				changed.notify_all();
			}
		} catch (...) {
		}
		std::lock_guard lock(mutex);
		--running;
		changed.notify_all();
	}

	Device& cache;
	const LogScan& headers;
	const std::uint64_t nr;
	const std::uint64_t oldest;
	const std::uint64_t chunks;
	std::uint64_t last_rewrite_step = 0; // the last ring step whose slot, failing, would be a torn rewrite
	std::atomic<std::uint64_t> next_chunk = 0;
	std::atomic<bool> stop = false;
	std::atomic<std::uint64_t> first_failure = ~0ULL; // failed_step, for the threads to read without the lock
	std::mutex mutex;
	std::condition_variable changed;
	std::vector<bool> done = std::vector<bool>(chunks, false); // under mutex
	std::uint64_t prefix = 0;                                  // chunks done from the first on
	std::uint64_t failed_step = ~0ULL;                         // the first failing ring step found
	std::vector<Tail> tails;                                   // under mutex
	unsigned running = 0;
	std::vector<std::thread> threads;
};

LogVerifier::LogVerifier(Device& cache, const LogScan& headers) : state_(std::make_unique<State>(cache, headers))
{
	if (!applicable(headers))
		throw Error("a log verifier needs a headers-only scan whose walk reached the end of the ring");
	const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
	state_->running = threads;
	try {
		for (unsigned t = 0; t < threads; ++t)
			state_->threads.emplace_back([s = state_.get()] { s->work(); });
	} catch (...) {
		state_->stop = true;
		for (std::thread& t : state_->threads)
			t.join();
		throw;
	}
}

LogVerifier::~LogVerifier()
{
	state_->stop = true; // no new chunks
	for (std::thread& t : state_->threads)
		if (t.joinable())
			t.join();
}

bool LogVerifier::wait_until_verified(std::uint64_t slot)
{
	State& s = *state_;
	// A slot whose checksum fails can be a torn rewrite (wb_torn_rewrite):
	// the verifying scan's log then starts after it, and a segment before it
	// counts as written back (writing its data could roll newer data back).
	// So a segment waits for every slot after it that could be one, too.
	const std::uint64_t step = std::max(s.ring_step(slot), s.last_rewrite_step);
	std::unique_lock lock(s.mutex);
	s.changed.wait(lock, [&] { return step < s.valid_steps() || s.failed_step <= step || s.running == 0; });
	return step < s.valid_steps();
}

bool LogVerifier::finish(LogScan& scan)
{
	State& s = *state_;
	for (std::thread& t : s.threads)
		t.join();
	s.threads.clear();
	if (&scan != &s.headers || s.failed_step != ~0ULL || s.prefix != s.chunks)
		return false;
	// Every non-empty slot is in the log and valid: the verifying scan's
	// walk takes the same log to the end of the ring, with the same
	// findings, index and write-back point.
	for (SlotInfo& info : scan.slots)
		if (info.state == SlotState::unverified) {
			info.state = SlotState::valid;
			info.computed_checksum = info.stored_checksum;
		}
	// A slot valid only with its metablock tail read as zero: the headers
	// named its tail unused-metablock-nonzero, the verifying scan names it an
	// append that did not complete, in the same place.
	for (const State::Tail& t : s.tails) {
		scan.slots[t.slot].ignored_metablocks = std::uint8_t(t.ignored_metablocks);
		for (Finding& f : scan.findings)
			if (f.code == FindingCode::unused_metablock_nonzero && f.place.slot == t.slot)
				f = detail::metablock_tail_finding(t.slot, t.header, t.ignored_metablocks);
	}
	scan.verified = true;
	scan.stop_reason = StopReason::end_of_ring;
	return true;
}

} // namespace wbkit
